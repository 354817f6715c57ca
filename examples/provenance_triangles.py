"""Which edges make up each triangle, and what survives when one edge goes: one provenance solve.

Usage::

    python examples/provenance_triangles.py [PATH] [--remove U V]

``PATH`` is a SNAP-style edge list (default: Zachary's karate club,
``tests/data/karate.txt``, 45 triangles).  Each undirected edge ``(u, v)``
with ``u < v`` is tagged with the symbol ``e{u}_{v}``.  The triangle query
over the ``"provenance"`` semiring returns, per triangle, the product of its
three edges' symbols and, for the count, a polynomial with one monomial per
triangle.  ``semirings.specialise`` then answers "how many triangles are
left without edge (U, V)?" by evaluating that one polynomial in counting with
the edge's symbol set to 0: no second solve.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import semirings
from faq import Factor, query
from faq.io import read_edge_list
from faq.session import local_session

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "karate.txt"


def tagged_edges(path: Path) -> pd.DataFrame:
    """Each undirected edge once as (a, b) with a < b, tagged ``e{a}_{b}``."""
    spark = local_session("local[2]")
    df = read_edge_list(str(path), spark=spark).toPandas()
    e = np.sort(df.iloc[:, :2].to_numpy(np.int64), axis=1)
    e = np.unique(e[e[:, 0] != e[:, 1]], axis=0)
    return pd.DataFrame({"a": e[:, 0], "b": e[:, 1], "tag": [f"e{u}_{v}" for u, v in e]})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", default=str(DEFAULT))
    p.add_argument("--remove", nargs=2, type=int, metavar=("U", "V"), default=None)
    args = p.parse_args(argv)
    edges = tagged_edges(Path(args.path))
    E = Factor.tagged(edges, tag="tag", name="E")

    t0 = time.perf_counter()
    per_triangle = query("Q(a, b, c) :- E(a, b), E(b, c), E(a, c)", "provenance").solve(E=E)
    count = query("Q() :- E(a, b), E(b, c), E(a, c)", "provenance").solve(E=E)
    seconds = time.perf_counter() - t0
    triangles = per_triangle.to_dict()
    print(f"{len(edges)} edges, {len(triangles)} triangles ({seconds:.2f} s)")
    for key in sorted(triangles)[:5]:
        print(f"  triangle {key}: {triangles[key]}")

    ones = {t: 1 for t in edges["tag"]}
    print("count from the provenance:", semirings.specialise(count, "counting", ones).scalar())
    if args.remove is not None:
        u, v = sorted(args.remove)
        removed = {(u, v)}
    else:  # the edge in most triangles
        uses: dict[str, int] = {}
        for poly in triangles.values():
            for sym in semirings.provenance.symbols(poly):
                uses[sym] = uses.get(sym, 0) + 1
        top = max(sorted(uses), key=uses.__getitem__)
        u, v = (int(x) for x in top[1:].split("_"))
        removed = {(u, v)}
    without = dict(ones)
    for a, b in removed:
        without[f"e{a}_{b}"] = 0
    left = semirings.specialise(count, "counting", without)
    print(f"without edge ({u}, {v}): {left.scalar() if left.count() else 0} triangles left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
