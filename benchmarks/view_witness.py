"""Witness upkeep of a view against a plain tick: two-hop cheapest paths over min-plus.

    python benchmarks/view_witness.py [--nodes 20000] [--edges 50000] [--changes 10 100 1000]
                                      [--ticks 20]

``Q(a, c) :- E(a, b), E(b, c)`` on a random graph, maintained by two views in the driver,
one with ``witness=True``.  Every tick (half deletions of held edges, half insertions of
new ones) is applied to both views in turn, so both see the same load; prints per tick
size the median milliseconds of each, their ratio, and the seconds ``result()`` takes to
build the witness frame of the whole answer.
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--edges", type=int, default=50_000)
    p.add_argument("--changes", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--ticks", type=int, default=20)
    a = p.parse_args()
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
