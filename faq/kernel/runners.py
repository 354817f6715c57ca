"""The kernel's runners of one step, by name: which apply, what each costs, and running one.

A step of a plan is a bag of tables joined, ⊗-multiplied and ⊕-aggregated onto
its output variables.  The Generic Join kernel runs any bag; a library runner
runs the bags of one shape faster and returns exactly the same table:

* ``driver/generic-join``: any bag (:func:`faq.kernel.join.generic_join`);
* ``driver/graphblas-mxm``: ``L(x, j), R(j, y)`` with ``j`` eliminated, a GraphBLAS
  product (:func:`faq.kernel.sparse.graphblas_mxm`);
* ``driver/graphblas-masked``: ``L(x, m), R(m, y), M(x, y)`` with ``m`` eliminated, a
  masked GraphBLAS product (:func:`faq.kernel.sparse.graphblas_masked`);
* ``driver/blas``: dense factors, by BLAS for any bag when ⊕.⊗ is a sum of products,
  else a matrix product by a compiled dense loop (:func:`faq.kernel.dense.dense_step`).

A library runner needs its semiring to declare :class:`~semirings.core.LibraryOps`
(the built-ins but ``log``); the choice reads that declaration, never a
semiring's name.  :func:`applies` says from the bag's variables and statistics
whether a runner can run a step (the planner's question), :func:`estimate` what
it would cost in seconds, :func:`ranked` both for every runner, and :func:`run`
runs the one chosen.  What only the data can tell (keys of several types, a
factor less dense than its statistics said, a 64-bit sum that could overflow)
makes a runner decline at run time: :func:`run` then runs the Generic Join kernel
and says why.

``log`` has no library runner: GraphBLAS has no logaddexp monoid built in, and a
user-defined one (python-graphblas ``Monoid.register_anonymous`` over a numba
``logaddexp``) computes a 100k-node 2-hop at about 1.4× the time of the built-in
``min_plus`` but compiles for about 6 s in every process.

Measured by ``benchmarks/kernels.py`` (one process on a shared 2-core machine, CPU
seconds of the median of 2 runs after a warm-up; the library's own call on its own
structures is the reference):

* dense real chain 400×1500·1500×400·400×1500, ``driver/blas``: 0.13 s; numpy
  ``multi_dot`` 0.09 s; the Generic Join kernel 43 s;
* sparse real chain, three 200k×200k with 5 non-zeros a row, ``driver/graphblas-mxm``:
  6.2 s; scipy ``(A @ B) @ C`` 2.8 s; the Generic Join kernel 30 s;
* min-plus 2-hop, 100k nodes and 500k edges, ``driver/graphblas-mxm``: 0.43 s;
  GraphBLAS ``mxm(min_plus)`` 0.44 s; the Generic Join kernel 0.64 s;
* triangle count, 1M-edge power-law graph, ``driver/graphblas-masked``: 1.85 s;
  GraphBLAS masked ``plus_pair`` 1.78 s; the Generic Join kernel 1.48 s;
* dense min-plus 400×1500·1500×400, ``driver/blas`` (the compiled loop): 0.24 s;
  ``driver/graphblas-mxm`` on the same full blocks 1.05 s; the Generic Join kernel 24 s.

The runners' times include keys to indices and back and a sorted output; the
libraries' calls leave their result in their own structures.  On the scalar triangle
count the Generic Join kernel does as well as GraphBLAS per core; the masked product
wins when the step keeps an edge (``Q(a, c)``: 1.3 s against 1.7 s, one thread each).
:class:`Costs` holds the constants fitted to these runs, so that :func:`ranked` puts the
Generic Join first on the scalar count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from faq.kernel.dense import dense_step
from faq.kernel.join import generic_join
from faq.kernel.library import Declined, product_shapes, triangle_shapes
from faq.kernel.sparse import graphblas_masked, graphblas_mxm
from faq.kernel.table import Table
from semirings.core import Semiring
from semirings.local import LocalOps

__all__ = [
    "BLAS",
    "COSTS",
    "GENERIC_JOIN",
    "GRAPHBLAS_MASKED",
    "GRAPHBLAS_MXM",
    "RUNNERS",
    "Costs",
    "Declined",
    "Params",
    "Ran",
    "Runner",
    "Stats",
    "applies",
    "estimate",
    "ranked",
    "run",
]

GENERIC_JOIN = "driver/generic-join"
GRAPHBLAS_MXM = "driver/graphblas-mxm"
GRAPHBLAS_MASKED = "driver/graphblas-masked"
BLAS = "driver/blas"


@dataclass(frozen=True)
class Params:
    """What a runner is told besides the step (the planner's settings).

    Attributes
    ----------
    density : float
        ``driver/blas``: the least fraction of its array's cells every factor holds.
    cells : int
        ``driver/blas``: the most cells of one dense array (a factor's or the output's).
    threads : int
        Threads of a library runner: GraphBLAS's for the call, and the compiled dense
        loop's; 0 leaves GraphBLAS's own setting (every core) and runs the loop on one.
        (BLAS and the Generic Join kernel take theirs elsewhere.)
    """

    density: float = 0.5
    cells: int = 1 << 26
    threads: int = 0


class Stats(Protocol):
    """What the planner knows of one factor of a step (``faq.plan.physical.InputInfo``)."""

    @property
    def vars(self) -> tuple[str, ...]: ...

    @property
    def rows(self) -> float: ...

    @property
    def distinct(self) -> Mapping[str, float]: ...


@dataclass(frozen=True)
class Costs:
    """CPU seconds per unit of work of each runner, on one core.

    Fitted to ``benchmarks/kernels.py`` on a 2-core machine (see the module text); they
    predict its CPU seconds within about 1.3× except the Generic Join kernel on a 25M-row
    sparse product (3.5× more than predicted).  GraphBLAS and BLAS spread their work over
    every core, so their wall time on an idle machine is lower.

    Attributes
    ----------
    row : float
        One row materialised: a library's input or output row (keys to indices, the
        matrix built, back to keys), or an output row of the Generic Join kernel.
    join : float
        One candidate row of the Generic Join kernel on an acyclic bag (each is built
        and ⊕-folded or kept).
    join_cyclic : float
        One row of the cheapest pairwise join of a cyclic bag (the kernel intersects
        instead of building them).
    mxm : float
        One multiplication of a GraphBLAS product (a row of ``L ⋈ R``).
    masked : float
        One multiplication of the unmasked product of a masked GraphBLAS product (the
        mask skips most of them).
    blas : float
        One multiply-add of a dense product by BLAS.
    loop : float
        One ⊗ and ⊕ of the compiled dense loop.
    cell : float
        One cell of a dense array filled or read.
    """

    row: float = 1.5e-7
    join: float = 9e-8
    join_cyclic: float = 2.2e-9
    mxm: float = 5e-9
    masked: float = 1.8e-9
    blas: float = 2e-10
    loop: float = 8e-10
    cell: float = 5e-9


COSTS = Costs()


@dataclass(frozen=True)
class Ran:
    """A step run: its table, the runner that computed it, and why that one (a runner
    that declined at run time leaves the step to the Generic Join kernel, and says why)."""

    table: Table
    runner: str
    why: str


def _library(semiring: Semiring) -> None:
    if semiring.library is None:
        raise Declined(f"the {semiring.name!r} semiring declares no library operations")


def _shape(name: str, bag: Sequence[tuple[str, ...]], keep: Sequence[str]) -> None:
    if name == GRAPHBLAS_MXM:
        product_shapes(bag, keep)
    elif name == GRAPHBLAS_MASKED:
        triangle_shapes(bag, keep)


def _dense(
    inputs: Sequence[Stats], keep: Sequence[str], semiring: Semiring, params: Params
) -> None:
    lib = semiring.library
    assert lib is not None
    if not lib.sums:
        product_shapes([tuple(i.vars) for i in inputs], keep)
    size = _sizes(inputs)
    for i in inputs:
        span = math.prod(size[v] for v in i.vars)
        if span > params.cells:
            raise Declined(f"a factor over {tuple(i.vars)} spans {span:,.0f} cells")
        if i.rows < params.density * span:
            raise Declined(
                f"a factor over {tuple(i.vars)} fills {i.rows / span:.3g} "
                f"< density {params.density:g}"
            )
    out = math.prod(size[v] for v in keep)
    if out > params.cells:
        raise Declined(f"the output spans {out:,.0f} cells")


def _sizes(inputs: Sequence[Stats]) -> dict[str, float]:
    size: dict[str, float] = {}
    for i in inputs:
        for v in i.vars:
            size[v] = max(size.get(v, 1.0), float(i.distinct.get(v, i.rows)))
    return size


def applies(
    name: str,
    inputs: Sequence[Stats],
    keep: Sequence[str],
    semiring: Semiring,
    params: Params | None = None,
) -> str | None:
    """None when the runner ``name`` can run the step, else why not (one line).

    From the bag's variables, the factors' statistics (rows and distinct values per
    variable) and the semiring's declarations only; the data may still make the runner
    decline (see :func:`run`).

    Raises
    ------
    KeyError
        ``name`` is not a runner (:data:`RUNNERS`).
    """
    if name not in RUNNERS:
        raise KeyError(f"unknown runner {name!r}; runners: {', '.join(RUNNERS)}")
    if name == GENERIC_JOIN:
        return None
    try:
        _library(semiring)
        if name == BLAS:
            _dense(inputs, keep, semiring, params or Params())
        else:
            _shape(name, [tuple(i.vars) for i in inputs], keep)
    except Declined as why:
        return str(why)
    return None


def estimate(
    name: str,
    inputs: Sequence[Stats],
    keep: Sequence[str],
    semiring: Semiring,
    *,
    work: float,
    pair_rows: float | None = None,
    costs: Costs = COSTS,
) -> float:
    """Estimated CPU seconds of the runner ``name`` on a step it applies to.

    The Generic Join kernel: ``join × work`` on an acyclic bag (``join_cyclic × work`` on
    a cyclic one) plus ``row`` per output row; a GraphBLAS product: ``row`` per input and
    output row plus ``mxm`` (``masked``) per multiplication; BLAS and the dense loop:
    ``cell`` per array cell plus ``blas`` (``loop``) per multiply-add.  Output rows are
    estimated as the multiplications, at most the product of the kept variables'
    distinct values and the rows of any factor that holds them all.

    Parameters
    ----------
    name : str
        A runner of :data:`RUNNERS`.
    inputs : sequence of Stats
        The factors' statistics.
    keep : sequence of str
        The step's output variables.
    semiring : Semiring
        The step's semiring (BLAS or the compiled loop, by its declaration).
    work : float
        The planner's estimate of the Generic Join kernel's candidate rows.
    pair_rows : float, optional
        The rows of the join of the two factors that share the eliminated variable
        (a product's multiplications), when known exactly; else from the statistics.
    costs : Costs
        CPU seconds per unit of work.
    """
    rows = sum(i.rows for i in inputs)
    size = _sizes(inputs)
    products = pair_rows if pair_rows is not None else _pairs(inputs)
    out = min(products, math.prod(size[v] for v in keep)) if keep else 1.0
    out = min([out] + [i.rows for i in inputs if set(keep) <= set(i.vars)])
    if name == GENERIC_JOIN:
        if _cyclic([tuple(i.vars) for i in inputs]):
            return costs.join_cyclic * work + costs.row * out
        return costs.join * work + costs.row * out
    if name == BLAS:
        cells = sum(math.prod(size[v] for v in i.vars) for i in inputs)
        cells += math.prod(size[v] for v in keep)
        flops = math.prod(size.values())
        sums = semiring.library is not None and semiring.library.sums
        return costs.cell * cells + (costs.blas if sums else costs.loop) * flops
    per = costs.mxm if name == GRAPHBLAS_MXM else costs.masked
    return costs.row * (rows + out) + per * products


def _cyclic(bag: Sequence[tuple[str, ...]]) -> bool:
    """True when the bag's hypergraph is not α-acyclic (GYO reduction leaves edges)."""
    edges = [set(vs) for vs in bag if vs]
    changed = True
    while changed and len(edges) > 1:
        changed = False
        for v in {v for e in edges for v in e}:  # a variable in one edge only: drop it
            holders = [e for e in edges if v in e]
            if len(holders) == 1:
                holders[0].discard(v)
                changed = True
        for i, e in enumerate(edges):  # an edge inside another: drop it
            if any(j != i and e <= f for j, f in enumerate(edges)):
                edges.pop(i)
                changed = True
                break
    return len(edges) > 1


def _pairs(inputs: Sequence[Stats]) -> float:
    """Rows of the join of the first two factors on their shared variables (uniformity)."""
    a, b = inputs[0], inputs[1]
    shared = [v for v in a.vars if v in b.vars]
    est = a.rows * b.rows
    for v in shared:
        est /= max(a.distinct.get(v, 1.0), b.distinct.get(v, 1.0), 1.0)
    return est


def ranked(
    inputs: Sequence[Stats],
    keep: Sequence[str],
    semiring: Semiring,
    *,
    work: float,
    pair_rows: float | None = None,
    params: Params | None = None,
    costs: Costs = COSTS,
) -> list[tuple[str, float, str]]:
    """Every runner that applies to the step, cheapest first: ``(name, seconds, why)``.

    ``why`` is the line ``explain()`` can show: the estimate, or why a runner does not
    apply (those come last, with an infinite cost).
    """
    out = []
    for name in RUNNERS:
        no = applies(name, inputs, keep, semiring, params)
        if no is None:
            s = estimate(name, inputs, keep, semiring, work=work, pair_rows=pair_rows, costs=costs)
            out.append((name, s, f"estimated {s:.3g} s"))
        else:
            out.append((name, math.inf, no))
    return sorted(out, key=lambda r: r[1])


Runner = Callable[[Sequence[Table], Sequence[str], Sequence[str], LocalOps, Params], Table]


def _generic(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    return generic_join(tables, order, keep, ops)


def _mxm(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    return graphblas_mxm(tables, keep, ops, threads=p.threads)


def _masked(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    return graphblas_masked(tables, keep, ops, threads=p.threads)


def _blas(
    tables: Sequence[Table], order: Sequence[str], keep: Sequence[str], ops: LocalOps, p: Params
) -> Table:
    threads = max(p.threads, 1)
    return dense_step(tables, keep, ops, density=p.density, cells=p.cells, threads=threads)


RUNNERS: dict[str, Runner] = {
    GENERIC_JOIN: _generic,
    GRAPHBLAS_MXM: _mxm,
    GRAPHBLAS_MASKED: _masked,
    BLAS: _blas,
}
"""Every runner by the name ``explain()`` shows: ``(tables, order, keep, ops, params) ->
Table``.  ``order`` is the Generic Join kernel's binding order (the libraries ignore it)."""


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
        ``name`` is not a runner (:data:`RUNNERS`).
    """
    if name not in RUNNERS:
        raise KeyError(f"unknown runner {name!r}; runners: {', '.join(RUNNERS)}")
    params = params or Params()
    try:
        return Ran(RUNNERS[name](tables, order, keep, ops, params), name, "")
    except Declined as why:
        out = generic_join(tables, order, keep, ops)
        return Ran(out, GENERIC_JOIN, f"{name} declined: {why}")
