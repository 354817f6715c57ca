"""The kernel's runners of one step, by the names the planner gives them (:mod:`faq.plan.runners`).

A step of a plan is a bag of tables joined, ⊗-multiplied and ⊕-aggregated onto
its output variables.  The Generic Join kernel runs any bag; a library runner
runs the bags of one shape faster and returns exactly the same table:

* ``generic-join``: any bag (:func:`faq.kernel.join.generic_join`);
* ``graphblas-mxm``: ``L(x, j), R(j, y)`` with ``j`` eliminated, a GraphBLAS
  product (:func:`faq.kernel.sparse.graphblas_mxm`);
* ``graphblas-masked``: ``L(x, m), R(m, y), M(x, y)`` with ``m`` eliminated, a
  masked GraphBLAS product (:func:`faq.kernel.sparse.graphblas_masked`);
* ``blas``: dense factors, by BLAS for any bag when ⊕.⊗ is a sum of products,
  else a matrix product by a compiled dense loop (:func:`faq.kernel.dense.dense_step`).

The planner chooses the runner of each step and reads the bag's shape
(:mod:`faq.plan.runners`); the executor, a Spark task or a partitioned cell looks the
runner up here by its name and runs it with that shape (:func:`run`): nothing here
chooses.  What only the data can tell (keys of several types, a factor less dense
than its statistics said, a 64-bit sum that could overflow) makes a library runner
decline; :func:`run` then runs the Generic Join kernel and says why.

Measured by ``benchmarks/kernels.py`` (one process on a shared 2-core machine, CPU
seconds of the median of 2 runs after a warm-up; the library's own call on its own
structures is the reference):

* dense real chain 400×1500·1500×400·400×1500, ``blas``: 0.13 s; numpy
  ``multi_dot`` 0.09 s; the Generic Join kernel 43 s;
* sparse real chain, three 200k×200k with 5 non-zeros a row, ``graphblas-mxm``:
  6.2 s; scipy ``(A @ B) @ C`` 2.8 s; the Generic Join kernel 30 s;
* min-plus 2-hop, 100k nodes and 500k edges, ``graphblas-mxm``: 0.43 s;
  GraphBLAS ``mxm(min_plus)`` 0.44 s; the Generic Join kernel 0.64 s;
* triangle count, 1M-edge power-law graph, ``graphblas-masked``: 1.85 s;
  GraphBLAS masked ``plus_pair`` 1.78 s; the Generic Join kernel 1.48 s;
* dense min-plus 400×1500·1500×400, ``blas`` (the compiled loop): 0.24 s;
  ``graphblas-mxm`` on the same full blocks 1.05 s; the Generic Join kernel 24 s.

The runners' times include keys to indices and back and a sorted output; the
libraries' calls leave their result in their own structures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from faq.kernel.dense import dense_step
from faq.kernel.join import JoinStats, generic_join, generic_join_threads
from faq.kernel.library import Declined
from faq.kernel.sparse import graphblas_masked, graphblas_mxm
from faq.kernel.table import Table
from semirings.local import LocalOps

__all__ = ["GENERIC_JOIN", "RUNNERS", "Declined", "Params", "Ran", "Runner", "run"]


@dataclass(frozen=True)
class Params:
    """What a runner is told besides the step's tables, binding order and output.

    Attributes
    ----------
    shape : object, optional
        How the planner read the bag (:mod:`faq.plan.runners`): a ``Product`` for
        ``graphblas-mxm`` (and ``blas`` outside sums of products), the ``Triangle``
        readings for ``graphblas-masked``; None for the Generic Join kernel.
    density : float
        ``blas``: the least fraction of its array's cells every factor must hold.
    cells : int
        ``blas``: the most cells of one dense array (a factor's or the output's).
    threads : int
        Threads of the step: the Generic Join kernel's (more than one: candidates split
        over driver threads), GraphBLAS's for the call and the compiled dense loop's; 0
        leaves GraphBLAS's own setting (every core), as in the driver; a Spark cell or
        task passes 1.
    """

    shape: Any = None
    density: float = 0.5
    cells: int = 1 << 26
    threads: int = 1


@dataclass(frozen=True)
class Ran:
    """A step run: its table, the runner that computed it, and why another ran than the
    one asked for (a library runner that declined leaves the step to the Generic Join
    kernel); ``proposed`` counts the Generic Join kernel's candidates (0 for a library)."""

    table: Table
    runner: str
    why: str = ""
    proposed: int = 0


Runner = Callable[[Sequence[Table], Sequence[str], Sequence[str], LocalOps, Params], Table]


def _mxm(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    return graphblas_mxm(tables, keep, ops, p.shape, threads=p.threads)


def _masked(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    return graphblas_masked(tables, keep, ops, p.shape, threads=p.threads)


def _blas(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    threads = max(p.threads, 1)
    return dense_step(tables, keep, ops, p.shape, density=p.density, cells=p.cells, threads=threads)


GENERIC_JOIN = "generic-join"
"""The Generic Join kernel's name (:data:`faq.plan.runners.GENERIC_JOIN`): :func:`run`'s own."""

RUNNERS: dict[str, Runner] = {
    "graphblas-mxm": _mxm,
    "graphblas-masked": _masked,
    "blas": _blas,
}
"""The library runners by their names in :data:`faq.plan.runners.NAMES`: ``(tables, order,
keep, ops, params) -> Table``.  ``generic-join`` is :func:`run`'s own."""


def run(
    name: str,
    tables: Sequence[Table],
    order: Sequence[str],
    keep: Sequence[str],
    ops: LocalOps,
    params: Params | None = None,
) -> Ran:
    """Run the step with the runner ``name``; the Generic Join kernel when it declines.

    The table is exactly what :func:`faq.kernel.join.generic_join` returns for the step
    (floats up to the order of their sums), and so are its errors (OverflowError of a
    64-bit semiring).

    Raises
    ------
    KeyError
        ``name`` is neither ``"generic-join"`` nor one of :data:`RUNNERS`.
    """
    params = params or Params()
    why = ""
    if name != GENERIC_JOIN:
        if name not in RUNNERS:
            known = ", ".join([GENERIC_JOIN, *RUNNERS])
            raise KeyError(f"unknown runner {name!r}; runners: {known}")
        try:
            return Ran(RUNNERS[name](tables, order, keep, ops, params), name)
        except Declined as exc:
            why = f"{name} declined: {exc}"
    stats = JoinStats()
    if params.threads > 1:
        out = generic_join_threads(tables, order, keep, ops, params.threads, stats=stats)
    else:
        out = generic_join(tables, order, keep, ops, stats=stats)
    return Ran(out, GENERIC_JOIN, why, sum(stats.proposed))
