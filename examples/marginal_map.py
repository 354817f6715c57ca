"""Marginal MAP on a random sparse chain, timed against the plain sum query of the same rule.

Q(x) = max_y Σ_{z, w} A(x, y) B(y, z) C(z, w) is ``aggregates={"y": "max"}`` in the real
semiring; the plain query Σ_{y, z, w} is the baseline.  Run from the repository root:

    PYTHONPATH=. python examples/marginal_map.py [--rows 200000] [--domain 20000]

Prints the median of three solves after a warm-up, per backend ("driver": the local
kernel; "spark": Spark DataFrame joins).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from faq import query
from faq.session import local_session


def main() -> None:
    """Build three random relations and time both queries on both backends."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--domain", type=int, default=20_000)
    args = p.parse_args()
    spark = local_session()
    rng = np.random.default_rng(0)

    def rel(a: str, b: str):
        keys = rng.integers(0, args.domain, (args.rows, 2))
        values = rng.uniform(0.1, 1.0, args.rows)
        return spark.createDataFrame(pd.DataFrame({a: keys[:, 0], b: keys[:, 1], "value": values}))

    A, B, C = rel("a", "b"), rel("b", "c"), rel("c", "d")
    rule = "Q(x) :- A(x, y), B(y, z), C(z, w)"
    queries = [
        ("sum (plain)", query(rule, "real")),
        ("max_y sum_{z,w}", query(rule, "real", aggregates={"y": "max"})),
    ]
    for backend in ("driver", "spark"):
        for label, q in queries:
            q.solve(backend=backend, A=A, B=B, C=C)  # warm-up
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                run = q.run(backend=backend, A=A, B=B, C=C)
                times.append(time.perf_counter() - t0)
            order = ", ".join(run.plan.order)
            print(f"{backend:6s} {label:16s} median {sorted(times)[1]:.3f} s  (order {order})")


if __name__ == "__main__":
    main()
