"""The engine and the kernel's runners against the Generic Join kernel and the libraries.

Usage::

    python benchmarks/kernels.py             # the issue's sizes (about ten minutes)
    python benchmarks/kernels.py --quick     # small sizes, one run each (seconds)
    python benchmarks/kernels.py --workloads triangles,min-plus --repeat 3
    python benchmarks/kernels.py --workloads sparse-chain --kinds engine --profile 25

Workloads (issue 38), each run as the engine runs its steps: kernel tables in (key
columns and annotations, as the executor hands them), kernel tables out:

* ``dense-chain``: ``Q(i, l) :- A(i, j), B(j, k), C(k, l)`` over ``real``, dense
  400×1500 · 1500×400 · 400×1500, as two steps (``j``, then ``k``): ``driver/blas``
  and the Generic Join kernel against numpy's ``multi_dot`` on the arrays;
* ``sparse-chain``: the same chain of three 200k×200k ``real`` matrices with 5
  non-zeros a row: ``driver/graphblas-mxm`` and the Generic Join kernel against
  scipy.sparse ``(A @ B) @ C`` on CSR matrices;
* ``min-plus``: the 2-hop ``Q(a, c) :- E(a, b), E(b, c)`` over ``min-plus`` on 100k
  nodes and 500k weighted edges: ``driver/graphblas-mxm`` and the Generic Join
  kernel against python-graphblas ``mxm(min_plus)`` on a GraphBLAS matrix, twice: the
  product alone, which SuiteSparse leaves with each row's entries unsorted (the sort is
  owed to whoever reads it), and the product with its answer read the fastest way
  (``ss.unpack("csr", sort=True)``: no copy, rows sorted; ``to_coo`` is slower), which
  is what the engine's rows, ending in ``to_pandas``, include;
* ``triangles``: ``Q() :- E(a, b), E(b, c), E(a, c)`` over ``counting`` on a 1M-edge
  power-law graph (:func:`faq.testing.power_law_graph`, 200k nodes; ``--tri-edges M``:
  M edges on M/5 nodes):
  ``driver/graphblas-masked`` and the Generic Join kernel against GraphBLAS's masked
  ``plus_pair`` product ``C<A> = A·A`` summed (LAGraph's method), by SuiteSparse's own
  choice of method and by its dot method (``axb_method="dot"``);
* ``dense-min-plus``: one min-plus product of dense 400×1500 · 1500×400 blocks: the
  compiled dense loop (``driver/blas``) against ``driver/graphblas-mxm`` and the Generic
  Join kernel (whether the dense loop is worth keeping).

Besides the steps, every workload has two end-to-end rows, the engine as a user runs it
in the driver: ``engine`` makes the factors from the user's arrays or pandas frames
(``Factor.from_numpy`` / ``Factor.from_pandas``, built before the clock like the
libraries' structures), runs ``query(rule).run(..., backend="driver")`` and reads the
answer back (``to_numpy``, ``to_pandas`` or ``scalar``), all of it timed; ``engine,
library_runners=False`` is the same under ``faq.settings(library_runners=False)`` (the
Generic Join kernel in every step).  Their answers are compared with the library's like
the steps'.  Each engine row also has the median seconds of its phases: ``convert_s``
(``Factor.from_*``), ``plan_s`` (the rest of ``run`` outside its steps: reading and
checking the relations, statistics and pair sizes, planning), ``steps_s`` (the steps, as
the run's trace times them) and ``read_s`` (the read-back), and ``runners``, what ran
each step.  ``--profile N`` then runs the engine once more per workload under cProfile
and prints its N most expensive functions (by cumulative, then by own time).

The Generic Join kernel runs with the binding order the planner gives it
(:func:`faq.plan.physical.binding_order`, with the step's exact join size).  The
libraries start from their own structures, built before the clock starts (arrays,
CSR matrices, GraphBLAS matrices); the runners' times include turning keys into
indices and back.  Every cell is ``--warmups`` un-timed runs (1) and the median of
``--repeat`` timed runs (2; the warm-up alone when it took over ``--slow`` seconds, 30),
wall-clock and CPU seconds of the process (all its threads: GraphBLAS and BLAS use
every core, the Generic Join kernel and the compiled loop one, so on a loaded machine
the CPU column is the steadier one); answers are compared (floats to 1e-9 relative),
and a mismatch is flagged and makes the exit status 1.  Ratios: each contender's
median over the best library's; the summary table gives per workload the engine, the
engine without library runners, the best library and engine ÷ library (the target of
issue 38: at most 1.5); the speed-up of the runner over the Generic Join kernel is
printed per workload.  Written as CSV and JSON (``benchmarks/results/kernels.csv``
and ``.json``, or under ``--out DIR``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

import faq
import semirings
from benchmarks._common import (
    Result,
    add_out_argument,
    fmt_ratio,
    fmt_s,
    missing_note,
    optional_import,
    profile_text,
    run_info,
    write_results,
)
from faq import Factor, query
from faq.kernel import Table, generic_join
from faq.kernel.rows import csr_rows
from faq.kernel.runners import Params, run
from faq.kernel.stats import pair_join_size, table_stats
from faq.plan import runners
from faq.plan.physical import InputInfo, binding_order
from faq.testing import power_law_graph, triangle_count_numpy
from semirings.local import local_ops

BLAS, GRAPHBLAS_MXM, GRAPHBLAS_MASKED = (
    runners.BLAS,
    runners.GRAPHBLAS_MXM,
    runners.GRAPHBLAS_MASKED,
)

WORKLOADS = ("dense-chain", "sparse-chain", "min-plus", "triangles", "dense-min-plus")
GENERIC = "generic join"
CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"
HOP = "Q(a, c) :- E(a, b), E(b, c)"
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
ENGINE = "engine"
ENGINE_GJ = "engine, library_runners=False"
PHASES = ("convert_s", "plan_s", "steps_s", "read_s")
KINDS = ("library", "runner", "generic", "engine", "engine-gj")
"""The kinds of contenders ``--kinds`` chooses from (every workload has one or more of each
but ``library``): the libraries, the kernel's runners on the steps, the Generic Join
kernel on the steps, the engine end to end, and the engine without library runners."""
TARGET = 1.5
"""Issue 38's target: the engine within this factor of the best library."""


@dataclass(frozen=True)
class Sizes:
    """The sizes of the workloads."""

    dense: tuple[int, int] = (400, 1500)
    sparse_n: int = 200_000
    sparse_per_row: int = 5
    hop_nodes: int = 100_000
    hop_edges: int = 500_000
    tri_nodes: int = 200_000
    tri_edges: int = 1_000_000


FULL = Sizes()
QUICK = Sizes((40, 150), 5_000, 5, 5_000, 25_000, 4_000, 20_000)


# -- steps as the executor runs them ------------------------------------------------------
def info(t: Table) -> InputInfo:
    """What the planner knows of a table: rows and distinct values per variable (exact)."""
    st = table_stats(t)
    distinct = {v: float(d) for v, d in zip(t.vars, st.distinct, strict=True)}
    return InputInfo(t.vars, float(t.rows), True, distinct)


def pair_join(a: Table, b: Table, v: str) -> float:
    """Rows of ``a ⋈ b`` on ``v`` (exact)."""
    return float(pair_join_size(a, (v,), b, (v,)))


def gj_step(
    tables: list[Table], keep: tuple[str, ...], S: semirings.Semiring, join: float
) -> Table:
    """The Generic Join kernel on one step, in the planner's binding order."""
    order = binding_order([info(t) for t in tables], keep=keep, join=join)
    return generic_join(tables, order, keep, local_ops(S))


def runner_step(
    name: str, tables: list[Table], keep: tuple[str, ...], S: semirings.Semiring, notes: list[str]
) -> Table:
    """The runner ``name`` on one step (a fallback to the Generic Join is noted)."""
    order = sorted({v for t in tables for v in t.vars})
    shape = runners.shape_of(name, [t.vars for t in tables], keep)  # the planner's reading
    ran = run(name, tables, order, keep, local_ops(S), Params(shape, density=0.5))
    if ran.runner != name:
        notes.append(ran.why)
    return ran.table


def matrix_table(vars_: tuple[str, str], rows: np.ndarray, cols: np.ndarray, vals: Any) -> Table:
    return Table(vars_, (rows.astype(np.int64), cols.astype(np.int64)), vals)


def dense_table(vars_: tuple[str, str], m: np.ndarray) -> Table:
    r, c = np.indices(m.shape).reshape(2, -1)
    return matrix_table(vars_, r, c, m.ravel().copy())


def table_to_dense(t: Table, shape: tuple[int, int], fill: float = 0.0) -> np.ndarray:
    out = np.full(shape, fill)
    out[t.cols[0], t.cols[1]] = t.values
    return out


# -- timing ---------------------------------------------------------------------------------
def measure(
    fn: Callable[[], Any], warmups: int, repeat: int, slow: float = float("inf")
) -> tuple[list[float], list[float], Any]:
    """``warmups`` un-timed runs, then ``repeat`` timed ones: (wall seconds, CPU seconds of
    the process, all its threads, last value).  A warm-up run longer than ``slow`` seconds
    is the measurement (its numba code compiled or loaded, a second run of a minute
    tells nothing new): then it is the one run returned."""
    value = None
    times: list[float] = []
    cpu: list[float] = []

    def once() -> None:
        nonlocal value
        c0, t0 = time.process_time(), time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)

    for _ in range(warmups):
        once()
        if times[-1] > slow:
            return times[-1:], cpu[-1:], value
    times.clear()
    cpu.clear()
    for _ in range(repeat):
        once()
    return times, cpu, value


@dataclass
class Contender:
    name: str
    fn: Callable[[], Any]
    library: bool = False
    phases: list[dict[str, Any]] | None = None  # the engine's: one record per run
    deferred: str = ""
    """For a library row: the work its answer still owes when the clock stops (GraphBLAS
    leaves a product's rows unsorted until it is read), empty when it owes none."""

    @property
    def kind(self) -> str:
        """One of :data:`KINDS` (a contender named otherwise runs steps: ``runner``)."""
        if self.library:
            return "library"
        return {GENERIC: "generic", ENGINE: "engine", ENGINE_GJ: "engine-gj"}.get(
            self.name, "runner"
        )


def engine_contenders(
    rule: str,
    semiring: str,
    inputs: Callable[[], dict[str, Factor]],
    read: Callable[[Factor], Any],
) -> list[Contender]:
    """The engine end to end in the driver, with and without its library runners.

    Each run makes the factors (``inputs``: ``Factor.from_numpy`` / ``from_pandas`` on
    the user's data), runs ``query(rule, semiring).run(..., backend="driver")`` and
    reads the answer back (``read``), all timed; it records the seconds of each phase
    (:data:`PHASES`) and what ran each step (``runners``) in the contender's ``phases``.
    """

    def make(name: str, library: bool) -> Contender:
        phases: list[dict[str, Any]] = []

        def fn() -> Any:
            with faq.settings(library_runners=library):
                t0 = time.perf_counter()
                relations = inputs()
                t1 = time.perf_counter()
                run = query(rule, semiring=semiring).run(backend="driver", **relations)
                t2 = time.perf_counter()
                out = read(run.result)
                t3 = time.perf_counter()
            steps = statistics.fsum(s.seconds for s in run.trace.steps)
            phases.append(
                {
                    "convert_s": t1 - t0,
                    "plan_s": t2 - t1 - steps,
                    "steps_s": steps,
                    "read_s": t3 - t2,
                    "runners": "; ".join(s.ran or s.choice.runs for s in run.trace.steps),
                }
            )
            return out

        return Contender(name, fn, phases=phases)

    return [make(ENGINE, True), make(ENGINE_GJ, False)]


def bench(
    workload: str,
    contenders: list[Contender],
    same: Callable[[Any, Any], bool],
    args: argparse.Namespace,
    notes: list[str],
    count: Callable[[Any], int | None] = lambda v: None,
) -> list[Result]:
    """Time every contender, compare every answer with the first one's, set the ratios."""
    out: list[Result] = []
    first: Any = None
    first_name = ""
    for c in [c for c in contenders if c.kind in args.kinds]:
        notes.clear()
        if c.phases is not None:
            c.phases.clear()
        try:
            times, cpu, value = measure(c.fn, args.warmups, args.repeat, args.slow)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            out.append(
                Result(workload, c.name, status="error", note=f"{type(exc).__name__}: {exc}")
            )
            continue
        r = Result(workload, c.name, times=times, count=count(value), note="; ".join(notes))
        if len(times) < args.repeat:
            r.note = (r.note + "; " if r.note else "") + f"[warm-up only: over {args.slow:g} s]"
        r.extra["load"] = round(os.getloadavg()[0], 2)
        if c.phases:
            timed = c.phases[-len(times) :]
            for k in PHASES:
                r.extra[k] = statistics.median(p[k] for p in timed)
            r.extra["runners"] = timed[-1]["runners"]
        if first is None:
            first, first_name = value, c.name
        elif not same(first, value):
            r.note = (r.note + "; " if r.note else "") + "ANSWER DIFFERS"
            print(f"!! {workload}: {c.name}'s answer differs from {first_name}'s")
        r.extra["cpu_s"] = statistics.median(cpu)
        r.extra["library"] = c.library
        if c.library:
            r.extra["deferred"] = c.deferred
        if c.deferred:
            r.note = (r.note + "; " if r.note else "") + f"owes {c.deferred} when read"
        out.append(r)
        if args.profile and c.name == ENGINE and r.status == "ok":
            print(
                f"-- cProfile of one {ENGINE} run, {workload}:\n{profile_text(c.fn, args.profile)}"
            )
    libs = [r for r in out if r.extra.get("library") and r.status == "ok"]
    lib = min(libs, key=lambda r: r.median_s or 0.0) if libs else None
    for r in out:
        if lib is not None and r.status == "ok":
            r.ratio, r.baseline = r.median_s / lib.median_s, lib.contender
    return out


# -- the workloads ---------------------------------------------------------------------------
def dense_chain(sz: Sizes, rng: np.random.Generator, args: argparse.Namespace) -> list[Result]:
    n, m = sz.dense
    A, B, C = rng.random((n, m)), rng.random((m, n)), rng.random((n, m))
    ta, tb, tc = dense_table(("i", "j"), A), dense_table(("j", "k"), B), dense_table(("k", "l"), C)
    S = semirings.REAL
    notes: list[str] = []

    def runner() -> np.ndarray:
        ab = runner_step(BLAS, [ta, tb], ("i", "k"), S, notes)
        return table_to_dense(runner_step(BLAS, [ab, tc], ("i", "l"), S, notes), (n, m))

    def gj() -> np.ndarray:
        ab = gj_step([ta, tb], ("i", "k"), S, float(n * m * n))
        return table_to_dense(gj_step([ab, tc], ("i", "l"), S, float(n * n * m)), (n, m))

    def factors() -> dict[str, Factor]:
        return {
            "A": Factor.from_numpy(A, vars=("i", "j")),
            "B": Factor.from_numpy(B, vars=("j", "k")),
            "C": Factor.from_numpy(C, vars=("k", "l")),
        }

    cs = [
        Contender("numpy multi_dot", lambda: np.linalg.multi_dot([A, B, C]), library=True),
        Contender(f"driver/{BLAS}", runner),
        Contender(GENERIC, gj),
        *engine_contenders(CHAIN, "real", factors, lambda f: f.to_numpy(shape=(n, m))),
    ]
    return bench(f"dense chain {n}×{m}·{m}×{n}·{n}×{m}", cs, _close, args, notes)


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=0))


def frame_table(x: Table | pd.DataFrame) -> Table:
    """A two-key answer as a kernel table: a table as it is, a ``to_pandas`` frame's key
    columns and ``value``."""
    if isinstance(x, Table):
        return x
    a, b = (str(c) for c in x.columns[:2])
    return matrix_table((a, b), x[a].to_numpy(), x[b].to_numpy(), x["value"].to_numpy())


def _random_sparse(n: int, per_row: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    rows = np.repeat(np.arange(n, dtype=np.int64), per_row)
    cols = rng.integers(0, n, n * per_row)
    key = np.unique(rows * n + cols)
    return key // n, key % n, rng.uniform(0.5, 1.5, len(key))


def sparse_chain(sz: Sizes, rng: np.random.Generator, args: argparse.Namespace) -> list[Result]:
    sp = optional_import("scipy.sparse")
    n = sz.sparse_n
    mats = [_random_sparse(n, sz.sparse_per_row, rng) for _ in range(3)]
    names = [("i", "j"), ("j", "k"), ("k", "l")]
    ta, tb, tc = (matrix_table(v, *m) for v, m in zip(names, mats, strict=True))
    S = semirings.REAL
    notes: list[str] = []

    def as_coo(t: Table) -> Any:
        return sp.coo_matrix((t.values, (t.cols[0], t.cols[1])), shape=(n, n)).tocsr()

    def runner() -> Any:
        ab = runner_step(GRAPHBLAS_MXM, [ta, tb], ("i", "k"), S, notes)
        return runner_step(GRAPHBLAS_MXM, [ab, tc], ("i", "l"), S, notes)

    def gj() -> Any:
        ab = gj_step([ta, tb], ("i", "k"), S, pair_join(ta, tb, "j"))
        return gj_step([ab, tc], ("i", "l"), S, pair_join(ab, tc, "k"))

    def same(a: Any, b: Any) -> bool:
        x, y = (
            as_coo(frame_table(v)) if isinstance(v, Table | pd.DataFrame) else v for v in (a, b)
        )
        d = abs(x - y)
        return x.nnz == y.nnz and (d.nnz == 0 or d.max() <= 1e-9 * abs(x).max())

    cs = []
    if sp is None:
        print(missing_note("scipy", "the scipy column of the sparse chain"))
    else:
        A, B, C = (sp.csr_matrix((v, (r, c)), shape=(n, n)) for r, c, v in mats)
        cs.append(Contender("scipy (A@B)@C", lambda: (A @ B) @ C, library=True))
    frames = [
        pd.DataFrame({v[0]: r, v[1]: c, "value": x})
        for v, (r, c, x) in zip(names, mats, strict=True)
    ]

    def factors() -> dict[str, Factor]:
        return {
            k: Factor.from_pandas(f, vars=v, semiring="real")
            for k, f, v in zip("ABC", frames, names, strict=True)
        }

    cs += [
        Contender(f"driver/{GRAPHBLAS_MXM}", runner),
        Contender(GENERIC, gj),
        *engine_contenders(CHAIN, "real", factors, Factor.to_pandas),
    ]
    per = sz.sparse_per_row
    return bench(f"sparse chain 3× {n:,}² ({per}/row)", cs, same, args, notes)


def min_plus(sz: Sizes, rng: np.random.Generator, args: argparse.Namespace) -> list[Result]:
    gb = optional_import("graphblas")
    n = sz.hop_nodes
    key = np.unique(rng.integers(0, n, sz.hop_edges) * n + rng.integers(0, n, sz.hop_edges))
    src, dst, w = key // n, key % n, rng.uniform(1.0, 10.0, len(key))
    E1, E2 = matrix_table(("a", "b"), src, dst, w), matrix_table(("b", "c"), src, dst, w)
    S = semirings.MIN_PLUS
    notes: list[str] = []

    def table_of(M: Any) -> Table:
        if isinstance(M, dict):  # unpacked CSR
            return matrix_table(("a", "c"), csr_rows(M["indptr"]), M["col_indices"], M["values"])
        r, c, v = M.to_coo()
        return matrix_table(("a", "c"), r, c, v)

    def same(a: Any, b: Any) -> bool:
        a, b = (
            frame_table(x) if isinstance(x, Table | pd.DataFrame) else table_of(x) for x in (a, b)
        )
        keys = all(np.array_equal(x, y) for x, y in zip(a.cols, b.cols, strict=True))
        return a.rows == b.rows and keys and np.allclose(a.values, b.values, rtol=1e-12)

    cs = []
    if gb is None:
        print(missing_note("graphblas", "the GraphBLAS column of the min-plus 2-hop"))
    else:
        M = gb.Matrix.from_coo(src, dst, w, nrows=n, ncols=n)
        product = lambda: M.mxm(M, gb.semiring.min_plus).new()  # noqa: E731
        cs += [
            Contender("GraphBLAS mxm(min_plus)", product, True, deferred="the sort of each row"),
            Contender(
                "GraphBLAS mxm(min_plus), answer read",
                lambda: product().ss.unpack("csr", sort=True),
                True,
            ),
        ]
    cs += [
        Contender(
            f"driver/{GRAPHBLAS_MXM}",
            lambda: runner_step(GRAPHBLAS_MXM, [E1, E2], ("a", "c"), S, notes),
        ),
        Contender(GENERIC, lambda: gj_step([E1, E2], ("a", "c"), S, pair_join(E1, E2, "b"))),
    ]
    frame = pd.DataFrame({"src": src, "dst": dst, "value": w})

    def factors() -> dict[str, Factor]:
        return {"E": Factor.from_pandas(frame, vars=("a", "b"), semiring="min-plus")}

    cs += engine_contenders(HOP, "min-plus", factors, Factor.to_pandas)
    return bench(f"min-plus 2-hop {n:,} nodes, {len(key):,} edges", cs, same, args, notes)


def triangles(sz: Sizes, rng: np.random.Generator, args: argparse.Namespace) -> list[Result]:
    gb = optional_import("graphblas")
    e = power_law_graph(sz.tri_nodes, sz.tri_edges, seed=args.seed)
    want = triangle_count_numpy(e)
    E = Table(("a", "b"), (e[:, 0], e[:, 1]))
    bag = [E, Table(("b", "c"), E.cols), Table(("a", "c"), E.cols)]
    S = semirings.COUNTING
    notes: list[str] = []

    def scalar(t: Table) -> int:
        return int(t.values[0]) if t.rows else 0

    cs = []
    if gb is None:
        print(missing_note("graphblas", "the GraphBLAS column of the triangle count"))
    else:
        k = int(e.max()) + 1
        A = gb.Matrix.from_coo(e[:, 0], e[:, 1], 1, dtype=np.int64, nrows=k, ncols=k)

        def lagraph(**opts: str) -> Callable[[], int]:
            def count() -> int:
                C = A.mxm(A, gb.semiring.plus_pair).new(mask=A.S, **opts)
                v = C.reduce_scalar().new().value
                return int(v) if v is not None else 0

            return count

        cs.append(Contender("GraphBLAS masked plus_pair", lagraph(), library=True))
        cs.append(  # SuiteSparse's dot method, asked for by name
            Contender("GraphBLAS masked plus_pair, dot", lagraph(axb_method="dot"), library=True)
        )
    cs += [
        Contender(
            f"driver/{GRAPHBLAS_MASKED}",
            lambda: scalar(runner_step(GRAPHBLAS_MASKED, bag, (), S, notes)),
        ),
        Contender(GENERIC, lambda: scalar(gj_step(bag, (), S, pair_join(bag[0], bag[1], "b")))),
    ]
    frame = pd.DataFrame({"src": e[:, 0], "dst": e[:, 1]})

    def factors() -> dict[str, Factor]:
        return {"E": Factor.from_pandas(frame, vars=("a", "b"))}

    cs += engine_contenders(TRIANGLE, "counting", factors, lambda f: int(f.scalar()))
    out = bench(
        f"triangles power-law {len(e):,} edges",
        cs,
        lambda a, b: a == b == want,
        args,
        notes,
        count=lambda v: v,
    )
    for r in out:
        r.edges = len(e)
        if r.status == "ok" and r.count != want:
            r.note = (r.note + "; " if r.note else "") + f"ANSWER DIFFERS from numpy's {want}"
    return out


def dense_min_plus(sz: Sizes, rng: np.random.Generator, args: argparse.Namespace) -> list[Result]:
    n, m = sz.dense
    A, B = rng.uniform(0, 10, (n, m)), rng.uniform(0, 10, (m, n))
    ta, tb = dense_table(("i", "j"), A), dense_table(("j", "k"), B)
    S = semirings.MIN_PLUS
    notes: list[str] = []

    def dense_of(t: Table) -> np.ndarray:
        return table_to_dense(t, (n, n), np.inf)

    cs = [
        Contender(
            f"driver/{BLAS}", lambda: dense_of(runner_step(BLAS, [ta, tb], ("i", "k"), S, notes))
        ),
        Contender(
            f"driver/{GRAPHBLAS_MXM}",
            lambda: dense_of(runner_step(GRAPHBLAS_MXM, [ta, tb], ("i", "k"), S, notes)),
        ),
        Contender(GENERIC, lambda: dense_of(gj_step([ta, tb], ("i", "k"), S, float(n * m * n)))),
    ]

    def factors() -> dict[str, Factor]:
        return {
            "A": Factor.from_numpy(A, vars=("i", "j")),
            "B": Factor.from_numpy(B, vars=("j", "k")),
        }

    read = lambda f: f.to_numpy(shape=(n, n))  # noqa: E731 - min-plus: absent is +inf
    cs += engine_contenders("Q(i, k) :- A(i, j), B(j, k)", "min-plus", factors, read)
    out = bench(f"dense min-plus {n}×{m}·{m}×{n}", cs, np.array_equal, args, notes)
    base = out[0] if out and out[0].status == "ok" else None
    for r in out:  # no library peer: ratios to the dense loop
        if base is not None and r.status == "ok":
            r.ratio, r.baseline = r.median_s / base.median_s, base.contender
    return out


RUN: dict[str, Callable[[Sizes, np.random.Generator, argparse.Namespace], list[Result]]] = {
    "dense-chain": dense_chain,
    "sparse-chain": sparse_chain,
    "min-plus": min_plus,
    "triangles": triangles,
    "dense-min-plus": dense_min_plus,
}


# -- report ---------------------------------------------------------------------------------
def report(results: list[Result]) -> str:
    """The table: per workload each contender's median, its ratio to the library, and the
    runner's speed-up over the Generic Join kernel."""
    lines = [f"{'workload / contender':<44} {'median':>10} {'÷ library':>10} {'CPU':>10}  note"]
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.workload, []).append(r)
    for workload, rows in by.items():
        lines.append(workload)
        for r in rows:
            med = fmt_s(r.median_s) if r.status == "ok" and r.median_s is not None else r.status
            ratio = fmt_ratio(r.ratio) if r.ratio is not None else ""
            cpu = fmt_s(r.extra["cpu_s"]) if "cpu_s" in r.extra else ""
            load = f"load {r.extra['load']:.1f}" if "load" in r.extra else ""
            lines.append(f"  {r.contender:<42} {med:>10} {ratio:>10} {cpu:>10}  {load} {r.note}")
            if r.status == "ok" and "steps_s" in r.extra:
                lines.append(f"    {phase_text(r)}; runners: {r.extra['runners']}")
        gj = next((r for r in rows if r.contender == GENERIC and r.status == "ok"), None)
        for r in rows:
            if gj is not None and r.contender.startswith("driver/") and r.status == "ok":
                speed = gj.median_s / r.median_s
                cpu = gj.extra["cpu_s"] / max(r.extra["cpu_s"], 1e-9)
                lines.append(
                    f"  → {r.contender} over the Generic Join: ×{speed:.2g} wall, ×{cpu:.2g} CPU"
                )
                r.extra["speedup_over_generic_join"] = round(speed, 3)
                r.extra["cpu_speedup_over_generic_join"] = round(cpu, 3)
    return "\n".join(lines)


def phase_text(r: Result) -> str:
    """An engine row's phases: ``convert 0.01 s, inputs+plan 0.12 s, steps …, read …``."""
    names = ("convert", "inputs+plan", "steps", "read")
    return ", ".join(f"{n} {fmt_s(r.extra[k])}" for n, k in zip(names, PHASES, strict=True))


def engine_summary(results: list[Result]) -> str:
    """Per workload, as a Markdown table: the engine, the engine without library runners,
    the best library, engine ÷ library against :data:`TARGET`, the same against the best
    library whose time includes all the work of its answer (a library row that leaves work
    for the read, GraphBLAS's unsorted product, is the faster but not the whole job: the
    engine's rows include reading its answer back), and the engine's phases."""

    def med(r: Result | None) -> str:
        if r is None:
            return "–"
        return fmt_s(r.median_s) if r.status == "ok" and r.median_s is not None else r.status

    def best(libs: list[Result]) -> Result | None:
        return min(libs, key=lambda r: r.median_s or 0.0) if libs else None

    def ratio_to(eng: Result, lib: Result | None) -> tuple[str, str]:
        if eng.status != "ok" or eng.median_s is None or lib is None:
            return "", ""
        x = eng.median_s / (lib.median_s or 1e-12)
        cpu = f"{eng.extra['cpu_s'] / max(lib.extra['cpu_s'], 1e-9):.2f}"
        return f"{x:.2f}" + (" (met)" if x <= TARGET else " **(missed)**"), cpu

    lines = [
        "| workload | engine | engine, library_runners=False | best library | "
        f"engine ÷ library (target ≤ {TARGET}) | CPU ratio | "
        "engine ÷ library, its answer read | load | engine phases | engine runners |",
        "|---|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.workload, []).append(r)
    for workload, rows in by.items():
        named = {r.contender: r for r in rows}
        eng, gj = named.get(ENGINE), named.get(ENGINE_GJ)
        if eng is None:
            continue
        libs = [r for r in rows if r.extra.get("library") and r.status == "ok"]
        lib = best(libs)
        read = best([r for r in libs if not r.extra.get("deferred")])
        shown = f"{lib.contender} {med(lib)}" if lib is not None else "none"
        ratio, cpu = ratio_to(eng, lib)
        whole = "same" if read is lib else (ratio_to(eng, read)[0] or "–")
        if lib is None and eng.ratio is not None:  # no library: the ratio bench set
            ratio = f"{eng.ratio:.2f} to {eng.baseline} (no library)"
        ok = eng.status == "ok" and "steps_s" in eng.extra
        phases = phase_text(eng) if ok else ""
        lines.append(
            f"| {workload} | {med(eng)} | {med(gj)} | {shown} | {ratio} | {cpu} | {whole} | "
            f"{eng.extra.get('load', '')} | {phases} | {eng.extra.get('runners', '')} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small sizes, one run, no warm-up")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"subset of {WORKLOADS}")
    p.add_argument(
        "--kinds", default=",".join(KINDS),
        help=f"the kinds of contenders to run, a subset of {','.join(KINDS)} (all)",
    )  # fmt: skip
    p.add_argument("--repeat", type=int, default=2, help="timed runs per cell (2)")
    p.add_argument("--warmups", type=int, default=1, help="un-timed runs before them (1)")
    p.add_argument(
        "--slow", type=float, default=30.0,
        help="a warm-up run over this many seconds is the cell's one measurement (30)",
    )  # fmt: skip
    p.add_argument(
        "--profile", type=int, default=0, metavar="N",
        help="cProfile one more engine run per workload, print its N costliest functions",
    )  # fmt: skip
    p.add_argument(
        "--tri-edges", type=int, default=0, metavar="M",
        help="the triangle count's graph: M edges on M/5 nodes (default 1,000,000 on 200,000)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    add_out_argument(p)
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        p.error(f"unknown workload(s) {bad}; choose from {', '.join(WORKLOADS)}")
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not args.kinds or any(k not in KINDS for k in args.kinds):
        p.error(f"--kinds: choose from {', '.join(KINDS)}")
    if args.repeat < 1 or args.warmups < 0:
        p.error("--repeat must be ≥ 1 and --warmups ≥ 0")
    if args.quick:
        args.repeat, args.warmups = 1, 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.tri_edges:
        sizes = replace(sizes, tri_nodes=max(args.tri_edges // 5, 100), tri_edges=args.tri_edges)
    meta = run_info("kernels", argv)
    print(
        f"{meta['command']}  ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
        f"{meta['hugepages']})"
    )
    rng = np.random.default_rng(args.seed)
    results: list[Result] = []
    for w in args.workloads:
        t0 = time.perf_counter()
        got = RUN[w](sizes, rng, args)
        results += got
        took = statistics.fsum(sum(r.times) for r in got)
        print(f"{w}: done in {time.perf_counter() - t0:.1f} s ({took:.1f} s timed)")
    text = report(results)
    print(text)
    print(f"\nThe engine end to end in the driver (load {os.getloadavg()[0]:.1f} at the end):\n")
    print(engine_summary(results))
    csv_path, _ = write_results(results, args.out, "kernels", meta)
    print(f"written: {csv_path}")
    return 1 if any("DIFFERS" in r.note or r.status == "error" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
