"""Matrix-chain order: the planner's choice vs numpy's multi_dot and left to right.

    python benchmarks/chain_order.py [--repeat 3] [--quick] [--seed 0]

For each chain ``Q(i, last) :- A(i, j), B(j, k), ...`` with skewed shapes this
prints

- the elimination order the planner picks (``q.plan(...)``), the greedy
  strategy's order, numpy's optimal order (``multi_dot``'s dynamic program),
  and the left-to-right (textual) order, each with the parenthesization it
  stands for, the planner's estimated cost, the dense cost (the sum of p·q·r
  over the multiplications) and the exact number of joined rows (scalar
  multiplications actually performed on the non-zero entries, computed from
  the sparsity patterns);
- the wall time of ``q.solve(...)`` with the planner's order and with the
  forced left-to-right order (``order="textual"``), median of ``--repeat``
  runs, and the speed-up;
- whether both answers agree with each other and with ``numpy.linalg.multi_dot``.

Eliminating an inner index multiplies the two blocks adjacent to it, so an
elimination order is a parenthesization: for A·B·C·D, the order k, j, l is
(A(BC))D.  A final section checks the planner alone (statistics only, no
Spark) against multi_dot's optimum on random dense chains of 3 to 10 matrices
(it uses the planner's internal ``faq.plan.logical.make_plan``; when the engine no
longer has it, that section is skipped with a note).

Every solve is tagged with a Spark job group and its Spark jobs are counted.
The summary is also written as CSV and JSON (``benchmarks/results/chain_order.csv``
and ``.json``, or under ``--out DIR``): per chain the contenders ``planner (auto)``
and ``left to right``, with their order, parenthesization, dense cost, joined
rows, and the time ratio to the planner.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import itertools
import math
import statistics
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import faq
from benchmarks._common import (
    Result,
    add_out_argument,
    missing_note,
    optional_import,
    run_info,
    set_ratios,
    stop_spark,
    timed_jobs,
    write_results,
)
from faq.session import local_session

LETTERS = "ijklmnopqrst"  # chain indices: A(i, j), B(j, k), ...
NAMES = string.ascii_uppercase


@dataclass(frozen=True)
class Chain:
    """A chain of matrices: dims[t] x dims[t + 1] for matrix t, non-zeros at ``density``."""

    name: str
    dims: tuple[int, ...]
    density: float = 1.0

    @property
    def n(self) -> int:
        return len(self.dims) - 1

    def shapes(self) -> str:
        return " · ".join(f"{NAMES[t]} {self.dims[t]}x{self.dims[t + 1]}" for t in range(self.n))


FULL = [
    Chain("dense-4", (1000, 10, 1000, 10, 1000)),
    Chain("dense-3", (1000, 10, 1000, 10)),
    Chain("sparse-3 1%", (20000, 100, 20000, 100), 0.01),
    Chain("dense-6", (400, 20, 300, 10, 500, 5, 200)),
]
QUICK = [
    Chain("dense-4", (200, 10, 200, 10, 200)),
    Chain("dense-3", (200, 10, 200, 10)),
    Chain("sparse-3 1%", (4000, 50, 4000, 50), 0.01),
    Chain("dense-6", (80, 20, 60, 10, 100, 5, 40)),
]


# -- chains as rules ------------------------------------------------------------------------
def chain_rule(n: int) -> str:
    """``Q(i, m) :- A(i, j), B(j, k), C(k, l), D(l, m)`` for ``n`` = 4."""
    body = ", ".join(f"{NAMES[t]}({LETTERS[t]}, {LETTERS[t + 1]})" for t in range(n))
    return f"Q({LETTERS[0]}, {LETTERS[n]}) :- {body}"


def make_matrices(chain: Chain, rng: np.random.Generator) -> list[np.ndarray]:
    """Entries in [0.1, 1) (no cancellation, so patterns of products are exact), others 0."""
    mats = []
    for t in range(chain.n):
        shape = (chain.dims[t], chain.dims[t + 1])
        m = rng.uniform(0.1, 1.0, size=shape)
        if chain.density < 1.0:
            m[rng.random(shape) >= chain.density] = 0.0
        mats.append(m)
    return mats


# -- orders, parenthesizations, costs -------------------------------------------------------
def multi_dot_order(dims: Sequence[int]) -> tuple[np.ndarray, float, str]:
    """numpy's matrix-chain DP: (split table s, optimal dense cost, where it came from).

    Uses ``numpy.linalg``'s own private ``_multi_dot_matrix_chain_order`` when it
    can be imported (so this is exactly what ``multi_dot`` does), else the same
    Cormen DP reimplemented here.
    """
    n = len(dims) - 1
    shaped = [np.empty((dims[t], dims[t + 1]), dtype=np.uint8) for t in range(n)]
    for module in ("numpy.linalg._linalg", "numpy.linalg.linalg"):
        try:
            mod = __import__(module, fromlist=["_multi_dot_matrix_chain_order"])
            fn = mod._multi_dot_matrix_chain_order
        except (ImportError, AttributeError):
            continue
        s, m = fn(shaped, return_costs=True)
        return s, float(m[0, n - 1]), f"{module}._multi_dot_matrix_chain_order"
    m = np.zeros((n, n))
    s = np.zeros((n, n), dtype=np.intp)
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            m[i, j] = math.inf
            for k in range(i, j):
                q = m[i, k] + m[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1]
                if q < m[i, j]:
                    m[i, j], s[i, j] = q, k
    return s, float(m[0, n - 1]), "reimplemented Cormen DP (numpy's private helper not found)"


def split_to_order(s: np.ndarray, n: int) -> tuple[str, ...]:
    """The elimination order of a split table: children first, the split index last."""
    out: list[str] = []

    def walk(i: int, j: int) -> None:
        if i == j:
            return
        k = int(s[i, j])
        walk(i, k)
        walk(k + 1, j)
        out.append(LETTERS[k + 1])  # the index between matrix k and matrix k + 1

    walk(0, n - 1)
    return tuple(out)


def replay(order: Sequence[str], dims: Sequence[int], patterns: list | None = None):
    """Multiply the chain in elimination ``order``: (parenthesization, dense cost, joined rows).

    Eliminating index t (between matrices t-1 and t) multiplies the block ending
    at matrix t-1 by the block starting at matrix t; the dense cost of that is
    dims[lo] * dims[t] * dims[hi + 1].  With ``patterns`` (0/1 sparse matrices)
    the exact joined rows are sum over t of nnz(column t of left) * nnz(row t of right).
    """
    n = len(dims) - 1
    lo = list(range(n))  # lo[x], hi[x]: the block containing matrix x spans lo..hi
    hi = list(range(n))
    text = [NAMES[t] for t in range(n)]  # by block start
    pat = list(patterns) if patterns is not None else None
    dense = 0
    joined = 0
    for v in order:
        t = LETTERS.index(v)
        a, b = lo[t - 1], hi[t]
        dense += dims[a] * dims[t] * dims[b + 1]
        text[a] = f"({text[a]}{text[t]})"
        if pat is not None:
            left, right = pat[a], pat[t]
            cols = np.asarray(left.sum(axis=0)).ravel()
            rows = np.asarray(right.sum(axis=1)).ravel()
            joined += int(cols @ rows)
            prod = (left @ right).astype(bool).astype(np.int64)
            pat[a] = prod
        for x in range(a, b + 1):
            lo[x], hi[x] = a, b
    paren = text[0]
    if paren.startswith("(") and paren.endswith(")"):
        paren = paren[1:-1]
    return paren, dense, (joined if pat is not None else None)


def sparsity_patterns(mats: list[np.ndarray]) -> list:
    """0/1 patterns of the matrices, as scipy CSR matrices when scipy is installed.

    Without scipy they are dense numpy arrays (same counts, more memory).
    """
    sparse = optional_import("scipy.sparse")
    if sparse is None:
        return [(m != 0).astype(np.int64) for m in mats]
    return [sparse.csr_matrix((m != 0).astype(np.int64)) for m in mats]


# -- Spark side -----------------------------------------------------------------------------
def dense_result(out: faq.Factor, shape: tuple[int, int]) -> np.ndarray:
    """A result factor as a dense array (collected through Arrow, fast for ~1M rows)."""
    pdf = out.df.toPandas()
    arr = np.zeros(shape)
    if len(pdf):
        cols = list(out.vars)
        arr[pdf[cols[0]].to_numpy(), pdf[cols[1]].to_numpy()] = pdf["value"].to_numpy()
    return arr


def solve_timed(q: faq.Query, order: str, factors: dict, sc) -> tuple[float, faq.Factor, int]:
    """``q.solve(order=order)``: seconds, the result and the Spark jobs it launched."""
    return timed_jobs(sc, lambda: q.solve(order=order, **factors), f"chain order={order}")


def fmt_int(x: float | None) -> str:
    return "-" if x is None else f"{round(x):,}"


@dataclass
class Row:
    chain: Chain
    planner: tuple[str, ...]
    planner_paren: str
    planner_dense: int
    optimal_dense: int
    textual_dense: int
    joined_planner: int
    joined_textual: int
    t_planner: float
    t_textual: float
    agree: bool
    best_joined: int
    textual: tuple[str, ...] = ()
    textual_paren: str = ""
    times: dict[str, list[float]] | None = None
    jobs: dict[str, int] | None = None


def bench_chain(chain: Chain, rng: np.random.Generator, repeat: int, sc) -> Row:
    n = chain.n
    rule = chain_rule(n)
    q = faq.query(rule, semiring="real")
    mats = make_matrices(chain, rng)
    factors = {
        NAMES[t]: faq.Factor.from_numpy(
            mats[t], vars=(LETTERS[t], LETTERS[t + 1]), semiring="real", name=NAMES[t]
        )
        for t in range(n)
    }
    nnz = sum(int(np.count_nonzero(m)) for m in mats)
    print(f"\n== {chain.name}: {chain.shapes()}   ({nnz:,} non-zeros, density {chain.density:.0%})")
    print(f"   {rule}")

    plans = {
        "planner (auto)": q.plan(**factors),
        "planner (greedy)": q.plan(order="greedy", **factors),
        "left to right": q.plan(order="textual", **factors),
    }
    s, md_cost, _ = multi_dot_order(chain.dims)
    md_order = split_to_order(s, n)
    patterns = sparsity_patterns(mats)

    header = (
        f"   {'':<18} {'elimination order':<20} {'parenthesization':<22} "
        f"{'planner estimate':>17} {'dense cost p·q·r':>17} {'exact joined rows':>18}"
    )
    print(header)
    replays = {}
    for label in ("planner (auto)", "planner (greedy)", "numpy multi_dot", "left to right"):
        if label == "numpy multi_dot":
            order, est = md_order, None
        else:
            order, est = plans[label].order, plans[label].cost
        paren, dense, joined = replay(order, chain.dims, patterns)
        replays[label] = (order, paren, dense, joined)
        print(
            f"   {label:<18} {', '.join(order):<20} {paren:<22} {fmt_int(est):>17} "
            f"{fmt_int(dense):>17} {fmt_int(joined):>18}"
        )
    auto_dense, auto_joined = replays["planner (auto)"][2:]
    every = [replay(o, chain.dims, patterns)[2] for o in itertools.permutations(q.rule.bound)]
    best_joined = min(every)
    verdict = "yes" if auto_dense == round(md_cost) else "NO"
    print(f"   planner's dense cost equals multi_dot's optimum ({md_cost:,.0f}): {verdict}")
    verdict = "yes" if auto_joined == best_joined else f"NO ({auto_joined / best_joined:.2f}x)"
    print(
        f"   planner's joined rows equal the least over all {len(every)} orders "
        f"({best_joined:,}): {verdict}"
    )

    times: dict[str, list[float]] = {"auto": [], "textual": []}
    jobs: dict[str, int] = {}
    outs: dict[str, faq.Factor] = {}
    for _ in range(repeat):
        for order in ("auto", "textual"):  # interleaved, so background load hits both
            seconds, outs[order], jobs[order] = solve_timed(q, order, factors, sc)
            times[order].append(seconds)
    t_auto = statistics.median(times["auto"])
    t_text = statistics.median(times["textual"])
    print(
        f"   solve, median of {repeat}: planner {t_auto:.2f} s, left to right {t_text:.2f} s,"
        f" speed-up {t_text / t_auto:.2f}x   (runs: planner "
        + ", ".join(f"{x:.2f}" for x in times["auto"])
        + "; left to right "
        + ", ".join(f"{x:.2f}" for x in times["textual"])
        + f"; Spark jobs per solve: planner {jobs['auto']}, left to right {jobs['textual']})"
    )

    shape = (chain.dims[0], chain.dims[-1])
    expected = np.linalg.multi_dot(mats)
    got_auto = dense_result(outs["auto"], shape)
    got_text = dense_result(outs["textual"], shape)
    agree = bool(np.allclose(got_auto, got_text) and np.allclose(got_auto, expected))
    print(
        f"   results: {outs['auto'].count():,} rows; planner == left to right == "
        f"numpy multi_dot (allclose): {'yes' if agree else 'NO'}"
    )
    return Row(
        chain,
        replays["planner (auto)"][0],
        replays["planner (auto)"][1],
        auto_dense,
        round(md_cost),
        replays["left to right"][2],
        replays["planner (auto)"][3],
        replays["left to right"][3],
        t_auto,
        t_text,
        agree,
        best_joined,
        replays["left to right"][0],
        replays["left to right"][1],
        times,
        jobs,
    )


def warm_up(rng: np.random.Generator) -> None:
    """One small solve per strategy, so JVM start-up is not charged to the first chain."""
    chain = Chain("warm-up", (30, 5, 30, 5, 30))
    mats = make_matrices(chain, rng)
    factors = {
        NAMES[t]: faq.Factor.from_numpy(mats[t], vars=(LETTERS[t], LETTERS[t + 1]))
        for t in range(chain.n)
    }
    q = faq.query(chain_rule(chain.n), semiring="real")
    for order in ("auto", "textual"):
        q.solve(order=order, **factors)


def planner_only(count: int, rng: np.random.Generator) -> None:
    """The planner's cost vs multi_dot's optimum on random dense chains (no Spark)."""
    try:  # the planner's internals: not public API, may change with the engine
        from faq.plan.logical import EXHAUSTIVE_LIMIT, AtomStats, make_plan
        from faq.rule import parse_rule
    except ImportError as exc:
        print(f"\n== planner alone vs multi_dot: skipped (planner internals changed: {exc})")
        return
    print(
        f"\n== planner alone vs multi_dot on {count} random dense chains "
        "(3-10 matrices, dims 2-1000 log-uniform; statistics only, no Spark)"
    )
    print(
        f"   {'matrices':>8} {'chains':>7} {'auto = optimum':>15} {'greedy = optimum':>17} "
        f"{'worst greedy / optimum':>23}"
    )
    failures = []
    for n in range(3, 11):
        rule = parse_rule(chain_rule(n))
        auto_ok = greedy_ok = 0
        worst = 1.0
        per = count // 8
        for _ in range(per):
            dims = [int(x) for x in np.exp(rng.uniform(np.log(2), np.log(1000), n + 1))]
            stats = [
                AtomStats(dims[t] * dims[t + 1], {LETTERS[t]: dims[t], LETTERS[t + 1]: dims[t + 1]})
                for t in range(n)
            ]
            _, best, _ = multi_dot_order(dims)
            auto = replay(make_plan(rule, stats, "auto").order, dims)[1]
            greedy = replay(make_plan(rule, stats, "greedy").order, dims)[1]
            auto_ok += auto == round(best)
            greedy_ok += greedy == round(best)
            worst = max(worst, greedy / best)
            if auto != round(best) and len(rule.bound) <= EXHAUSTIVE_LIMIT:
                failures.append(dims)
        print(f"   {n:>8} {per:>7} {auto_ok:>15} {greedy_ok:>17} {worst:>22.2f}x")
    print(
        f'   ("auto" is exhaustive up to {EXHAUSTIVE_LIMIT} bound variables = '
        f"{EXHAUSTIVE_LIMIT + 1} matrices, greedy beyond)"
    )
    if failures:
        print(
            f"   PLANNER BUG: exhaustive search missed the optimum on {len(failures)} chain(s),"
            f" e.g. dims {failures[0]}"
        )


def results_of(rows: list[Row]) -> list[Result]:
    """Two result cells per chain, ``planner (auto)`` and ``left to right`` (ratio to the first)."""
    out = []
    for r in rows:
        assert r.times is not None and r.jobs is not None
        for label, key, order, paren, dense, joined in (
            (
                "planner (auto)",
                "auto",
                r.planner,
                r.planner_paren,
                r.planner_dense,
                r.joined_planner,
            ),
            (
                "left to right",
                "textual",
                r.textual,
                r.textual_paren,
                r.textual_dense,
                r.joined_textual,
            ),
        ):
            out.append(
                Result(
                    r.chain.name,
                    label,
                    times=r.times[key],
                    spark_jobs=r.jobs[key],
                    status="ok",
                    note="" if r.agree else "results differ from numpy multi_dot",
                    extra={
                        "shapes": r.chain.shapes(),
                        "density": r.chain.density,
                        "order": ",".join(order),
                        "parenthesization": paren,
                        "dense_cost": dense,
                        "optimal_dense_cost": r.optimal_dense,
                        "joined_rows": joined,
                        "least_joined_rows": r.best_joined,
                        "agree": r.agree,
                    },
                )
            )
    set_ratios(out, "planner (auto)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare the FAQ planner's matrix-chain order with numpy.linalg.multi_dot "
        "and with left to right: costs, Spark wall times, and answers.",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed runs per order; the median is shown (default: 3)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small chains and one run each: a smoke test of the script",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    repeat = 1 if args.quick else args.repeat
    chains = QUICK if args.quick else FULL

    rng = np.random.default_rng(args.seed)
    meta = run_info("chain_order", argv)
    if optional_import("scipy.sparse") is None:
        print(missing_note("scipy", "sparse counting of joined rows (dense numpy instead)"))
    _, _, source = multi_dot_order((2, 3, 4))
    print(f"multi_dot order from: {source}")
    spark = local_session(args.master)
    print(
        f"Spark {spark.version}, master {args.master}, "
        f"{spark.conf.get('spark.sql.shuffle.partitions')} shuffle partitions"
    )
    t0 = time.perf_counter()
    warm_up(rng)
    print(f"(warm-up solve: {time.perf_counter() - t0:.1f} s, not counted)")

    rows = [bench_chain(c, rng, repeat, spark.sparkContext) for c in chains]

    print(f"\n== summary (solve wall time: median of {repeat}; speed-up = left to right / planner)")
    head = (
        f"{'chain':<12} {'planner order':<14} {'paren.':<15} {'dense: plan':>13} "
        f"{'multi_dot':>13} {'LtoR':>14} {'joined: plan':>13} "
        f"{'LtoR':>13} {'t plan':>8} {'t LtoR':>8} {'speed-up':>9} {'agree':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.chain.name:<12} {', '.join(r.planner):<14} {r.planner_paren:<15} "
            f"{r.planner_dense:>13,} {r.optimal_dense:>13,} {r.textual_dense:>14,} "
            f"{r.joined_planner:>13,} {r.joined_textual:>13,} {r.t_planner:>7.2f}s "
            f"{r.t_textual:>7.2f}s {r.t_textual / r.t_planner:>8.2f}x "
            f"{'yes' if r.agree else 'NO':>6}"
        )
    print(
        "costs are scalar multiplications. dense: p·q·r summed over the multiplications of the "
        "planner's order,\nmulti_dot's optimal order and left to right (LtoR); joined: the rows "
        "the joins actually produce\n(products of non-zero entries; equal to the dense cost when "
        "the matrices are dense)"
    )

    planner_only(400 if not args.quick else 80, rng)
    meta.update(spark=spark.version, master=args.master, repeat=repeat)
    csv_path, json_path = write_results(results_of(rows), args.out, "chain_order", meta)
    print(f"\nwritten: {csv_path} and {json_path}")
    ok = all(r.agree and r.joined_planner == r.best_joined for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    status = main()
    stop_spark()
    raise SystemExit(status)
