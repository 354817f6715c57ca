"""Cost of a provenance solve of the triangle query against a counting solve.

    python benchmarks/provenance.py [GRAPH ...] [--backend driver] [--runs 3] [--csv PATH]

Each GRAPH is a SNAP edge list (default: the karate club in tests/data).  Each
undirected edge is kept once (u < v) and tagged ``e{u}_{v}``.  Prints the
median seconds (after one warm-up) of ``Q() :- E(a, b), E(b, c), E(a, c)`` in
counting and in provenance, including reading the answer, their ratio, and
the size of the provenance polynomial; optionally the same rows as CSV.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

import semirings
from faq import Factor, query
from faq.session import local_session

KARATE = Path(__file__).resolve().parent.parent / "tests" / "data" / "karate.txt"
RULE = "Q() :- E(a, b), E(b, c), E(a, c)"


def edges(path: str) -> pd.DataFrame:
    """Undirected edges once each (u < v), tagged."""
    raw = pd.read_csv(path, sep=r"\s+", comment="#", header=None, usecols=[0, 1])
    raw = raw[pd.to_numeric(raw[0], errors="coerce").notna()].astype(np.int64)
    e = np.unique(np.sort(raw.to_numpy(), axis=1), axis=0)
    e = e[e[:, 0] < e[:, 1]]
    return pd.DataFrame({"a": e[:, 0], "b": e[:, 1], "tag": [f"e{u}_{v}" for u, v in e]})


def median_seconds(fn, runs: int) -> tuple[float, object]:
    """Median seconds of ``runs`` calls of ``fn`` after one warm-up call, and its result."""
    out = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    """Print (and optionally write as CSV) counting and provenance solve times per graph."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graphs", nargs="*", default=[str(KARATE)])
    p.add_argument("--backend", default="driver")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--csv", default=None)
    a = p.parse_args()
    local_session()
    rows = []
    print(f"{'graph':>16} {'edges':>8} {'counting s':>11} {'provenance s':>13} {'ratio':>6} "
          f"{'monomials':>10}")  # fmt: skip
    for g in a.graphs:
        df = edges(g)
        E = Factor.tagged(df, name="E")
        C = Factor.from_pandas(df[["a", "b"]], semiring="counting", name="E")
        count_q, prov_q = query(RULE, "counting"), query(RULE, "provenance")
        t_count, n = median_seconds(
            lambda q=count_q, C=C: q.solve(E=C, backend=a.backend).scalar(), a.runs
        )
        t_prov, poly = median_seconds(
            lambda q=prov_q, E=E: q.solve(E=E, backend=a.backend).scalar(), a.runs
        )
        terms = len(semirings.provenance.parse(poly))
        check = semirings.specialise({(): poly}, "counting", dict.fromkeys(df["tag"], 1))
        assert check == {(): n}, (check, n)
        name = Path(g).stem
        print(f"{name:>16} {len(df):>8,} {t_count:11.3f} {t_prov:13.3f} "
              f"{t_prov / t_count:6.1f} {terms:>10,}")  # fmt: skip
        rows.append([name, len(df), n, t_count, t_prov, t_prov / t_count, terms, a.backend])
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["graph", "edges", "triangles", "counting_s", "provenance_s", "ratio",
                        "monomials", "backend"])  # fmt: skip
            w.writerows(rows)


if __name__ == "__main__":
    main()
