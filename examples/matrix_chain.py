"""A matrix chain over three semirings, checked against numpy.

    python examples/matrix_chain.py [--dims 40 5 60 4 30] [--seed 0]

The chain ``Q(i, m) :- A(i, j), B(j, k), C(k, l), D(l, m)`` is one functional
aggregate query: the head's variables ``i, m`` are free, the inner indices
``j, k, l`` are ⊕-aggregated.  The planner picks the order in which the inner
indices are eliminated, which is the parenthesization of the product; with
skewed shapes the best one is far cheaper than left to right.

The same query runs over

- ``real`` (+, ×): the ordinary matrix product ``A @ B @ C @ D``;
- ``max-product`` (max, ×): the Viterbi score of the best path i → j → k → l → m;
- ``min-plus`` (min, +): the shortest path through the four layers.

and, through :func:`faq.einsum`, as a numpy-style spec.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import reduce

import numpy as np

import faq
from faq.session import local_session

RULE = "Q(i, m) :- A(i, j), B(j, k), C(k, l), D(l, m)"
NAMES = ("A", "B", "C", "D")
VARS = (("i", "j"), ("j", "k"), ("k", "l"), ("l", "m"))


def max_product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(max, ×) matrix product by brute force: out[i, k] = max_j x[i, j] * y[j, k]."""
    return np.max(x[:, :, None] * y[None, :, :], axis=1)


def min_plus(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(min, +) matrix product by brute force: out[i, k] = min_j x[i, j] + y[j, k]."""
    return np.min(x[:, :, None] + y[None, :, :], axis=1)


def run(
    semiring: str,
    mats: list[np.ndarray],
    brute: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    explain: bool,
) -> bool:
    """Solve the chain over ``semiring``, print the plan and the check against numpy."""
    q = faq.query(RULE, semiring=semiring)
    factors = {
        n: faq.Factor.from_numpy(m, vars=v, semiring=semiring, name=n)
        for n, m, v in zip(NAMES, mats, VARS, strict=True)
    }
    t0 = time.perf_counter()
    run = q.run(**factors)
    out = run.result
    seconds = time.perf_counter() - t0
    expected = reduce(brute, mats)
    got = out.to_numpy(shape=expected.shape)
    ok = bool(np.allclose(got, expected))
    print(f"\n=== semiring {semiring!r}: {RULE}")
    if explain:
        print(q.explain(run))
    else:
        print(f"variable order (eliminated first to last): {', '.join(run.plan.order)}")
    print(
        f"solved in {seconds:.2f} s; result {got.shape[0]}x{got.shape[1]}, "
        f"{out.count():,} non-zero entries"
    )
    print(f"np.allclose(result, numpy brute force) -> {ok}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Solve a 4-matrix chain with the FAQ engine over the real, max-product and "
        "min-plus semirings, and check each against numpy.",
    )
    parser.add_argument(
        "--dims",
        type=int,
        nargs=5,
        default=[40, 5, 60, 4, 30],
        metavar="N",
        help="the chain's dimensions: A is d0 x d1, B d1 x d2, C d2 x d3, D d3 x d4 "
        "(default: 40 5 60 4 30, skewed so that the order matters)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    args = parser.parse_args(argv)
    if min(args.dims) < 1:
        parser.error("--dims must be positive")

    spark = local_session(args.master)
    rng = np.random.default_rng(args.seed)
    d = args.dims
    # Entries in [0.1, 1): no zeros, so every factor is dense and every semiring
    # sees the same relation.
    mats = [rng.uniform(0.1, 1.0, size=(d[n], d[n + 1])) for n in range(4)]
    print(
        "chain shapes:",
        "  ".join(f"{n} {m.shape[0]}x{m.shape[1]}" for n, m in zip(NAMES, mats, strict=True)),
    )

    ok = run("real", mats, np.matmul, explain=True)
    ok &= run("max-product", mats, max_product, explain=True)
    ok &= run("min-plus", mats, min_plus, explain=False)

    # The same engine behind a numpy-style spec; numpy arrays become sparse factors.
    a, b, c = mats[:3]
    out = faq.einsum("ij,jk,kl->il", a, b, c, semiring="real")
    got = out.to_numpy(shape=(a.shape[0], c.shape[1]))
    same = bool(np.allclose(got, a @ b @ c))
    print('\n=== faq.einsum("ij,jk,kl->il", A, B, C, semiring="real")')
    print(f"result {got.shape[0]}x{got.shape[1]}; np.allclose(result, A @ B @ C) -> {same}")
    ok &= same

    spark.stop()
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
