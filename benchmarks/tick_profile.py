"""Where a view's tick spends its time: cProfile over a run of ticks.

A triangle-counting view (counting semiring, state in the driver, or in Spark with
``--state spark``) is built over a
power-law graph of ``--edges`` edges; then ``--warmup`` ticks run unprofiled and
``--ticks`` ticks run under :mod:`cProfile`, each tick ``--delta`` edge changes
(30% deletions of present edges, the rest insertions) given as ``--input``: a
pandas DataFrame, or a Spark DataFrame made from it (as a streaming micro-batch
would be).  The script prints the mean time per tick (under the profiler, which
adds to it) and the ``--top`` functions by cumulative time, then checks the
view's count against :func:`faq.testing.triangle_count_numpy`.  With ``--durable``
the view keeps a ``state_dir`` (a temporary folder), so every tick also appends its
journal frame and syncs it: the profile then shows what a durable commit adds.

Usage::

    python benchmarks/tick_profile.py                              # 1M edges, Δ=1000, pandas
    python benchmarks/tick_profile.py --delta 1 --input spark
    python benchmarks/tick_profile.py --delta 1 --durable
    python benchmarks/tick_profile.py --state spark --ticks 5    # the Spark-resident state
    python benchmarks/tick_profile.py --state spark --fetch-rows 0  # ... past the fetch bound
    python benchmarks/tick_profile.py --state spark --no-profile --ticks 18  # medians, no cProfile

With ``--no-profile`` the ticks run without cProfile and the script prints the median
tick and the median time of its delta rule (``incremental.terms.delta_rule``: in a
Spark-state tick, the driver's part once the rows the tick reads are fetched).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # run as a script, this file's folder comes first on sys.path and its name would
    # shadow the ``incremental`` package; import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import tempfile
import time

import numpy as np


def profile_ticks(
    spark,
    edges: int,
    delta: int,
    kind: str,
    ticks: int,
    warmup: int,
    top: int,
    seed: int = 0,
    state_dir: str | None = None,
    state: str = "driver",
    fetch_rows: int | None = None,
) -> tuple[float, str]:
    """The mean seconds per profiled tick and the profile's ``top`` lines (cumulative);
    with ``state_dir``, of a view whose ticks are durable there; ``state`` is the
    view's (``"driver"`` or ``"spark"``); with ``fetch_rows``, the ticks run under
    ``max_fetch_rows=fetch_rows`` (0: a Spark state's ticks all read past the bound)."""
    prof = cProfile.Profile()

    def run(step):
        prof.enable()
        step()
        prof.disable()

    times = _ticks(
        spark, edges, delta, kind, ticks, warmup, seed, state_dir, state, fetch_rows, run
    )
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return sum(t for t, _ in times) / max(ticks, 1), out.getvalue()


def time_ticks(
    spark,
    edges: int,
    delta: int,
    kind: str,
    ticks: int,
    warmup: int,
    seed: int = 0,
    state_dir: str | None = None,
    state: str = "driver",
    fetch_rows: int | None = None,
) -> tuple[float, float]:
    """The ticks of :func:`profile_ticks` without a profiler: the median seconds of a
    tick and of its delta rule (``incremental.terms.delta_rule``, the relations read as
    factors included: the part of a Spark-state tick that runs in the driver once the
    rows it reads are fetched)."""
    times = _ticks(
        spark, edges, delta, kind, ticks, warmup, seed, state_dir, state, fetch_rows,
        lambda step: step(),
    )  # fmt: skip
    return statistics.median(t for t, _ in times), statistics.median(r for _, r in times)


def _ticks(
    spark, edges, delta, kind, ticks, warmup, seed, state_dir, state, fetch_rows, run
) -> list[tuple[float, float]]:
    """Build the view, run ``warmup`` ticks, then ``ticks`` more each through ``run``
    (given the tick as a function of no argument); per timed tick, its seconds and those
    of its delta rule.  The view's count is checked against numpy at the end."""
    import incremental.regimes as regimes
    from benchmarks.incremental import apply, delta_frame, fetch_bound, make_delta
    from faq import query, testing
    from faq.io import edges_dataframe
    from incremental import IncrementalView

    graph = testing.power_law_graph(max(edges // 5, 100), edges, seed)
    present = {(int(u), int(v)) for u, v in graph}
    rng = np.random.default_rng(seed + 1)
    nodes = int(graph.max()) + 1
    changes = []
    for _ in range(warmup + ticks):
        d = make_delta(present, nodes, delta, rng, 0.3)
        apply(present, d)
        changes.append(d)
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    view = IncrementalView(tri, E=edges_dataframe(graph, spark), state_dir=state_dir, state=state)
    frames = [delta_frame(spark, d, kind) for d in changes]
    rule_s: list[float] = []
    real = regimes.delta_rule

    def timed_rule(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            rule_s.append(time.perf_counter() - t0)

    out = []
    regimes.delta_rule = timed_rule  # the name the regimes call (restored below)
    try:
        with fetch_bound(fetch_rows):
            for f in frames[:warmup]:
                view.step(E=f)
            gc.collect()
            for f in frames[warmup:]:
                rule_s.clear()
                t0 = time.perf_counter()
                run(lambda f=f: view.step(E=f))
                out.append((time.perf_counter() - t0, sum(rule_s)))
    finally:
        regimes.delta_rule = real
    final = np.asarray(sorted(present), dtype=np.int64).reshape(-1, 2)
    got, want = view.result().scalar(), testing.triangle_count_numpy(final)
    if got != want:
        raise AssertionError(f"the view counts {got} triangles, numpy {want}")
    view.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", type=int, default=1_000_000, help="edges (default 1,000,000)")
    p.add_argument("--delta", type=int, default=1000, help="changes per tick (default 1000)")
    p.add_argument("--input", choices=["pandas", "spark"], default="pandas")
    p.add_argument("--ticks", type=int, default=25, help="profiled ticks (default 25)")
    p.add_argument("--warmup", type=int, default=5, help="unprofiled ticks first (default 5)")
    p.add_argument("--top", type=int, default=22, help="profile lines shown (default 22)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--durable", action="store_true", help="ticks journaled in a state_dir (a temp folder)"
    )
    p.add_argument("--state", choices=["driver", "spark"], default="driver", help="the view's")
    p.add_argument(
        "--fetch-rows",
        type=int,
        default=None,
        metavar="N",
        help="the ticks under max_fetch_rows=N (with --state spark, 0: every tick reads "
        "past the bound, its delta queries run as Spark jobs)",
    )
    p.add_argument(
        "--no-profile",
        action="store_true",
        help="time the ticks without cProfile: the median tick and the median of its "
        "delta rule (the driver's part of a Spark-state tick once its rows are fetched)",
    )
    args = p.parse_args(argv)
    if args.edges < 10 or args.delta < 1 or args.ticks < 1 or args.warmup < 0:
        p.error("--edges must be at least 10, --delta and --ticks positive, --warmup >= 0")
    if args.fetch_rows is not None and args.fetch_rows < 0:
        p.error("--fetch-rows must be >= 0")

    from faq.session import local_session

    spark = local_session("local[2]", **{"spark.driver.memory": "4g"})
    head = " ".join(["python benchmarks/tick_profile.py", *(argv or sys.argv[1:])])
    if args.no_profile:
        with tempfile.TemporaryDirectory(prefix="tick_profile-") as tmp:
            tick, rule = time_ticks(
                spark, args.edges, args.delta, args.input, args.ticks, args.warmup, args.seed,
                f"{tmp}/state" if args.durable else None, args.state, args.fetch_rows,
            )  # fmt: skip
        print(
            f"# {head}\n{args.edges:,} edges, Δ={args.delta} ({args.input}, {args.state} "
            f"state): tick {tick * 1e3:.1f} ms, its delta rule {rule * 1e3:.1f} ms "
            f"(medians of {args.ticks} ticks after {args.warmup}, no profiler)"
        )
        return 0
    with tempfile.TemporaryDirectory(prefix="tick_profile-") as tmp:
        per_tick, lines = profile_ticks(
            spark, args.edges, args.delta, args.input, args.ticks, args.warmup, args.top,
            args.seed, f"{tmp}/state" if args.durable else None, args.state, args.fetch_rows,
        )  # fmt: skip
    durable = (", durable" if args.durable else "") + f", {args.state} state"
    if args.fetch_rows is not None:
        durable += f", max_fetch_rows={args.fetch_rows:,}"
    print(
        f"# {head}\n"
        f"{args.edges:,} edges, Δ={args.delta} ({args.input}{durable}): "
        f"{per_tick * 1e3:.1f} ms per "
        f"tick under cProfile, mean of {args.ticks} ticks after {args.warmup}\n"
    )
    print(lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
