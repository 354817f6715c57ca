"""The incremental shortest-paths view of ``benchmarks/recursion.py``: ticks against recompute.

An ``IncrementalView`` of the SSSP program (min-plus) is built over the whole
graph (pandas input, no Spark job), then takes ``--ticks`` ticks of
``--tick-edges`` edge changes each: ``--tick-deletions`` of them retract
edges the graph holds (uniformly at random, with their weights), the others
insert new directed edges between random nodes (seeded weights in 1 … 100).
After every tick the program is solved again over the current edges (the
*recompute*: ``Factor.from_pandas`` of the edges and ``Program.solve``, both
timed, the faster of the engine's two batch inputs) and the view's answer is
compared with it; a difference raises an AssertionError.  The table gives the
median tick and recompute times and their ratio (the issue's target: a tick
at least 20× faster than a recompute).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks._common import Result, fmt_ratio, fmt_rows, fmt_s

__all__ = ["QUERY", "TICK", "RECOMPUTE", "measure_view", "print_view_table", "ticks"]

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
QUERY = "sssp view"
TICK = "view tick"
RECOMPUTE = "recompute"


def ticks(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    count: int,
    size: int,
    deletions: int,
    seed: int,
) -> Iterator[tuple[Any, Any]]:
    """``count`` ticks: per tick the delta (pandas ``src, dst, value, _weight``) and the
    edges after it (pandas ``src, dst, value``).  Deletions retract edges held, insertions
    add pairs the graph does not hold (no self-loops)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    n = int(max(src.max(), dst.max())) + 1
    src, dst, weight = src.copy(), dst.copy(), weight.copy()
    for _ in range(count):
        gone = rng.choice(len(src), size=min(deletions, len(src)), replace=False)
        want = min(size - len(gone), n * (n - 1) - len(src))  # a small graph fills up
        held = src * n + dst
        a, b = np.empty(0, np.int64), np.empty(0, np.int64)
        while len(a) < want:
            u, v = rng.integers(0, n, (2, 2 * want))
            code = u * n + v
            ok = (u != v) & ~np.isin(code, held) & ~np.isin(code, a * n + b)
            _, first = np.unique(code[ok], return_index=True)
            a = np.concatenate([a, u[ok][np.sort(first)]])[:want]
            b = np.concatenate([b, v[ok][np.sort(first)]])[:want]
        w = rng.integers(1, 101, want).astype(np.float64)
        delta = pd.DataFrame(
            {
                "src": np.concatenate([src[gone], a]),
                "dst": np.concatenate([dst[gone], b]),
                "value": np.concatenate([weight[gone], w]),
                "_weight": np.concatenate([-np.ones(len(gone), np.int64), np.ones(want, np.int64)]),
            }
        )
        keep = np.ones(len(src), dtype=bool)
        keep[gone] = False
        src = np.concatenate([src[keep], a])
        dst = np.concatenate([dst[keep], b])
        weight = np.concatenate([weight[keep], w])
        yield delta, pd.DataFrame({"src": src, "dst": dst, "value": weight})


def measure_view(g: Any, args: Any) -> list[Result]:
    """Build the view over graph ``g`` (a ``benchmarks.recursion.Graph``), run the ticks,
    recompute after each and compare; returns the tick and recompute cells."""
    import pandas as pd

    from faq import Factor, query
    from incremental import IncrementalView

    sp = query(SSSP, semiring="min-plus")
    source = pd.DataFrame({"x": [g.source], "value": [0.0]})
    S = Factor.from_dict({(g.source,): 0.0}, vars=["x"], semiring="min-plus")
    edges = pd.DataFrame({"src": g.src, "dst": g.dst, "value": g.weight})
    t0 = time.perf_counter()
    view = IncrementalView(sp, S=source, E=edges)
    build = time.perf_counter() - t0
    extra = {
        "query": QUERY,
        "tick_edges": args.tick_edges,
        "tick_deletions": args.tick_deletions,
    }
    tick = Result(g.name, TICK, edges=g.m, extra={**extra, "build_s": round(build, 3)})
    again = Result(g.name, RECOMPUTE, edges=g.m, extra=dict(extra))
    changed = []
    stream = ticks(
        g.src, g.dst, g.weight, args.ticks, args.tick_edges, args.tick_deletions, args.seed + 2
    )
    for i, (delta, now) in enumerate(stream, 1):
        t0 = time.perf_counter()
        view.step(E=delta)
        tick.times.append(time.perf_counter() - t0)
        changed.append(view.last_step.rows if view.last_step is not None else 0)
        t0 = time.perf_counter()
        want = sp.solve(S=S, E=Factor.from_pandas(now, semiring="min-plus", name="E"))
        again.times.append(time.perf_counter() - t0)
        compare_answers(view.result().to_pandas(), want.to_pandas(), f"{g.name}, tick {i}")
    tick.count = again.count = len(view.result().to_pandas())
    tick.extra["changed_rows"] = changed
    for r in (tick, again):
        r.extra["times_s"] = [round(t, 4) for t in r.times]
    return [tick, again]


def compare_answers(got: Any, want: Any, what: str) -> None:
    """Raise an AssertionError unless both answers (pandas, one row per node) are equal."""
    got = got.sort_values(got.columns[0]).to_numpy()
    want = want.sort_values(want.columns[0]).to_numpy()
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(
            f"{what}: the incremental view and the recompute differ "
            f"({len(got):,} and {len(want):,} nodes)"
        )


def print_view_table(results: list[Result], args: Any) -> None:
    """The Markdown table of the incremental view: tick and recompute times, the ratio."""
    print(
        f"\n## incremental shortest-paths view: ticks of {args.tick_edges:,} edges "
        f"({args.tick_edges - args.tick_deletions:,} insertions, {args.tick_deletions:,} "
        f"deletions), {args.ticks} ticks\n"
    )
    print(
        "| graph | edges | reachable | view build | tick (median) | recompute (median) "
        "| µs per change | recompute ÷ tick | answer rows changed per tick |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r.workload, r.contender): r for r in results if r.extra.get("query") == QUERY}
    for (name, who), t in by.items():
        if who != TICK:
            continue
        r = by[(name, RECOMPUTE)]
        assert t.median_s and r.median_s
        rows = ", ".join(f"{x:,}" for x in t.extra["changed_rows"])
        print(
            f"| {name} | {t.edges:,} | {fmt_rows(t.count or 0)} | {fmt_s(t.extra['build_s'])} "
            f"| {fmt_s(t.median_s)} | {fmt_s(r.median_s)} "
            f"| {t.median_s / args.tick_edges * 1e6:,.1f} | {fmt_ratio(r.median_s / t.median_s)} "
            f"| {rows} |"
        )
