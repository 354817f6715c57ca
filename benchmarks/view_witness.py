"""Witness upkeep of a view against a plain tick: two-hop cheapest paths over min-plus.

    python benchmarks/view_witness.py [--nodes 20000] [--edges 50000] [--changes 10 100 1000]
                                      [--ticks 20]

    python benchmarks/view_witness.py --program [--edges 1000000] [--exponent 2.3]
                                      [--changes 1 1000 10000] [--ticks 5]

``Q(a, c) :- E(a, b), E(b, c)`` on a random graph, maintained by two views in the driver,
one with ``witness=True``.  Every tick (half deletions of held edges, half insertions of
new ones) is applied to both views in turn, so both see the same load; prints per tick
size the median milliseconds of each, their ratio, and the seconds ``result()`` takes to
build the witness frame of the whole answer.

``--program``: the shortest-paths program of ``benchmarks/recursion.py``
(``D(x) :- S(x); D(y) :- D(x), E(x, y)``, min-plus) instead, on a power-law graph of
``--edges`` directed edges (:func:`faq.testing.power_law_graph` used in both directions,
degree exponent ``--exponent``, integer weights 1…100, the source the node of highest
out-degree), ticks of ``--changes`` edge changes, 30% of them deletions of held edges
(:func:`benchmarks._recursive_view.ticks`).  After the last tick of each size, the witness
view's answer is compared with the plain view's and every witness is checked: its
predecessor edge is held and the predecessor's distance plus the edge's weight is the
node's distance.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: ``incremental`` is the package, not ours
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from faq import query
from incremental import IncrementalView


def graph(nodes: int, edges: int, seed: int = 1) -> pd.DataFrame:
    """Distinct random directed edges with integer weights 1..9."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "s": rng.integers(0, nodes, edges),
            "d": rng.integers(0, nodes, edges),
            "value": rng.integers(1, 10, edges).astype(float),
        }
    )
    return df.drop_duplicates(["s", "d"]).reset_index(drop=True)


def ticks(held: pd.DataFrame, nodes: int, k: int, count: int, seed: int = 2) -> list:
    """``count`` deltas of ``k`` changes: k/2 held edges deleted, k/2 new ones inserted."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(count):
        gone = held.sample(k // 2, random_state=seed + t)
        held = held.drop(gone.index)
        new = pd.DataFrame(
            {
                "s": rng.integers(0, nodes, k - k // 2),
                "d": rng.integers(0, nodes, k - k // 2),
                "value": rng.integers(1, 10, k - k // 2).astype(float),
            }
        ).drop_duplicates(["s", "d"])
        pairs = pd.MultiIndex.from_frame(held[["s", "d"]])
        new = new[~pd.MultiIndex.from_frame(new[["s", "d"]]).isin(pairs)]
        held = pd.concat([held, new], ignore_index=True)
        out.append(pd.concat([gone.assign(_weight=-1), new.assign(_weight=1)], ignore_index=True))
    return out


def check_witnesses(result: Any, edges: pd.DataFrame, source: int) -> int:
    """Check a shortest-paths view's witnesses against the edges held; return how many.

    Every reached node but the source names a predecessor ``x_`` such that the edge
    ``(x_, x)`` is held and ``D(x_) + w(x_, x) == D(x)``.
    """
    dist = result.to_pandas().set_index("x")["value"]
    frame = result.witness_frame
    preds = frame[frame["x"] != source].astype({"x_": np.int64})
    if len(frame) != len(dist) or preds["x_"].isna().any():
        raise AssertionError("a reached node has no witness")
    w = edges.set_index(["src", "dst"])["value"]
    got = w.reindex(pd.MultiIndex.from_arrays([preds["x_"], preds["x"]]))
    if got.isna().any():
        raise AssertionError("a witness names an edge the graph does not hold")
    want = dist.loc[preds["x"]].to_numpy()
    if not np.array_equal(dist.loc[preds["x_"]].to_numpy() + got.to_numpy(), want):
        raise AssertionError("a witness does not attain its node's distance")
    return len(frame)


def program_case(a: argparse.Namespace) -> None:
    """Shortest paths maintained with and without witnesses (``--program``)."""
    from benchmarks._recursive_view import SSSP, ticks
    from benchmarks.recursion import weighted_graph
    from faq.testing import power_law_graph

    und = power_law_graph(max(a.edges // 10, 100), a.edges // 2, seed=0, exponent=a.exponent)
    g = weighted_graph("g", und, 1, both=True)
    sp = query(SSSP, semiring="min-plus")
    source = pd.DataFrame({"x": [g.source], "value": [0.0]})
    edges = pd.DataFrame({"src": g.src, "dst": g.dst, "value": g.weight})
    print(
        f"shortest paths (min-plus program), power-law γ={a.exponent:g}: {g.m:,} directed "
        f"edges, source {g.source}, {a.ticks} ticks each, 30% deletions"
    )
    warm = weighted_graph("warm-up", power_law_graph(300, 1000, seed=5), 1, both=True)
    t0 = time.perf_counter()
    for witness in (False, True):  # compile the kernels both views use (numba) before timing
        view = IncrementalView(
            sp,
            witness=witness,
            state="driver",
            S=pd.DataFrame({"x": [warm.source], "value": [0.0]}),
            E=pd.DataFrame({"src": warm.src, "dst": warm.dst, "value": warm.weight}),
        )
        for d, _ in ticks(warm.src, warm.dst, warm.weight, 3, 50, 15, seed=3):
            view.step(E=d)
        _ = view.result().witness_frame
    print(f"warm-up (both views, 3 ticks on 2,000 edges): {time.perf_counter() - t0:.1f} s")
    for k in a.changes:
        t0 = time.perf_counter()
        plain = IncrementalView(sp, state="driver", S=source, E=edges)
        b_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        kept = IncrementalView(sp, witness=True, state="driver", S=source, E=edges)
        b_kept = time.perf_counter() - t0
        times: dict[str, list[float]] = {"plain": [], "witness": []}
        stream = list(ticks(g.src, g.dst, g.weight, a.ticks, k, (3 * k) // 10, seed=2))
        for d, _ in stream:
            for name, view in (("plain", plain), ("witness", kept)):
                t0 = time.perf_counter()
                view.step(E=d)
                times[name].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        result = kept.result()
        frame = result.witness_frame
        build = time.perf_counter() - t0
        want = plain.result().to_pandas().sort_values("x").to_numpy()
        if not np.array_equal(result.to_pandas().sort_values("x").to_numpy(), want):
            raise AssertionError(f"{k} changes: the witness view's answer differs")
        n = check_witnesses(result, stream[-1][1], g.source)
        ms = {name: statistics.median(v) * 1e3 for name, v in times.items()}
        print(
            f"{k:>6} changes: plain {ms['plain']:8.2f} ms, witness {ms['witness']:8.2f} ms "
            f"({ms['witness'] / ms['plain']:.2f}x); builds {b_plain:.2f} s and {b_kept:.2f} s; "
            f"result() with {len(frame):,} witnesses {build:.3f} s ({n:,} checked)",
            flush=True,
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--edges", type=int, default=None, help="50,000 (--program: 1,000,000)")
    p.add_argument("--changes", type=int, nargs="+", default=None)
    p.add_argument("--ticks", type=int, default=None, help="20 (--program: 5)")
    p.add_argument("--program", action="store_true", help="the shortest-paths program")
    p.add_argument("--exponent", type=float, default=2.3, help="--program: degree exponent")
    a = p.parse_args()
    if a.program:
        a.edges = a.edges or 1_000_000
        a.changes = a.changes or [1, 1000, 10000]
        a.ticks = a.ticks or 5
        program_case(a)
        return
    a.edges = a.edges or 50_000
    a.changes = a.changes or [10, 100, 1000]
    a.ticks = a.ticks or 20
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    E = graph(a.nodes, a.edges)
    print(f"two-hop min-plus, {len(E):,} edges over {a.nodes:,} nodes, {a.ticks} ticks each")
    for k in a.changes:
        plain = IncrementalView(q, state="driver", E=E)
        kept = IncrementalView(q, witness=True, state="driver", E=E)
        times: dict[str, list[float]] = {"plain": [], "witness": []}
        for d in ticks(E, a.nodes, k, a.ticks):
            for name, view in (("plain", plain), ("witness", kept)):
                t0 = time.perf_counter()
                view.step(E=d)
                times[name].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        frame = kept.result().witness_frame
        build = time.perf_counter() - t0
        ms = {n: statistics.median(v) * 1e3 for n, v in times.items()}
        print(
            f"{k:>6} changes: plain {ms['plain']:7.1f} ms, witness {ms['witness']:7.1f} ms "
            f"({ms['witness'] / ms['plain']:.2f}x); result() with {len(frame):,} witnesses "
            f"{build:.3f} s"
        )


if __name__ == "__main__":
    main()
