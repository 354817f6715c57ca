"""The runners a step can be given, and the planner's choice among them: which apply to a
step, and what each would cost.

A step of a plan is a bag of factors joined, ⊗-multiplied and ⊕-aggregated onto its
output variables.  The Generic Join kernel runs any bag; a library runner runs the bags
of one shape faster, with exactly the same answer (:mod:`faq.kernel.runners` holds the
implementations, by the names below):

* ``generic-join``: any bag (:func:`faq.kernel.join.generic_join`);
* ``graphblas-mxm``: ``L(x, j), R(j, y)`` with ``j`` eliminated, a sparse matrix product
  in the semiring by SuiteSparse:GraphBLAS (:class:`Product`);
* ``graphblas-masked``: ``L(x, m), R(m, y), M(x, y)`` with ``m`` eliminated, a masked
  GraphBLAS product (:class:`Triangle`: triangle counts and their relatives);
* ``blas``: dense factors (each holds at least the ``dense_fraction`` setting of the cells
  of its key domains): BLAS through numpy for any bag when ⊕.⊗ is a sum of products,
  else a matrix product by a compiled dense loop.

A library runner needs its semiring to declare :class:`~semirings.core.LibraryOps` (the
built-ins but ``log``); the choice reads that declaration, never a semiring's name.
:func:`applies` says from the bag's variables and statistics whether a runner can run a
step, :func:`estimate` what it would cost in CPU seconds (:class:`Costs`, fitted to
``benchmarks/kernels.py``), and :func:`ranked` both for every runner, cheapest first:
:func:`faq.plan.physical.choose` takes the first.  What only the data can tell (keys
of several types, a factor less dense than its statistics said, a 64-bit sum that could
overflow) makes a library runner decline when it runs; the Generic Join kernel then
runs the step, and the run's trace says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from semirings.core import Semiring

__all__ = [
    "BLAS",
    "COSTS",
    "GENERIC_JOIN",
    "GRAPHBLAS_MASKED",
    "GRAPHBLAS_MXM",
    "NAMES",
    "Costs",
    "NotApplicable",
    "Product",
    "Stats",
    "Triangle",
    "applies",
    "estimate",
    "product_shapes",
    "ranked",
    "shape_of",
    "triangle_shapes",
]

GENERIC_JOIN = "generic-join"
GRAPHBLAS_MXM = "graphblas-mxm"
GRAPHBLAS_MASKED = "graphblas-masked"
BLAS = "blas"
NAMES = (GENERIC_JOIN, GRAPHBLAS_MXM, GRAPHBLAS_MASKED, BLAS)
"""Every runner of a local step, by the name ``explain()`` shows after its placement
(``driver/graphblas-mxm``, ``cells/generic-join``...)."""


class NotApplicable(Exception):
    """A runner cannot run a step of this shape, semiring or density (the message says why)."""


# -- the bags a library runner takes ---------------------------------------------------
@dataclass(frozen=True)
class Product:
    """A bag that is one matrix product: ``L(x, j) ⊗ R(j, y)``, ``j`` eliminated.

    ``left`` and ``right`` are the positions of ``L`` and ``R`` in the bag; ``x``
    comes first in the output when both ``x`` and ``y`` are kept, and is the kept
    one when one is.
    """

    left: int
    right: int
    x: str
    j: str
    y: str


@dataclass(frozen=True)
class Triangle:
    """A triangle-shaped bag ``L(x, m), R(m, y), M(x, y)``, ``m`` eliminated: the masked
    product ``C<M> = L ⊕.⊗ R``, then ``C ⊗ M``.  Positions in the bag, and the variables
    (``x`` before ``y`` in the output, ``x`` the kept one when one is)."""

    left: int
    right: int
    mask: int
    x: str
    m: str
    y: str


def _binary(bag: Sequence[tuple[str, ...]], n: int) -> None:
    if len(bag) != n:
        raise NotApplicable(f"the bag has {len(bag)} factors, not {n}")
    for vs in bag:
        if len(vs) != 2 or vs[0] == vs[1]:
            raise NotApplicable(f"a factor over {vs} is not binary")


def _kept(bag_vars: set[str], keep: tuple[str, ...]) -> None:
    if len(set(keep)) != len(keep) or not set(keep) <= bag_vars:
        raise NotApplicable(f"output {keep} is not a set of the bag's variables")


def product_shapes(bag: Sequence[tuple[str, ...]], keep: Sequence[str]) -> list[Product]:
    """The ways to read the bag (each factor's variables) as one matrix product onto
    ``keep``: one, or two mirror images when neither side is kept.

    Raises
    ------
    NotApplicable
        Not two binary factors sharing exactly one variable that is eliminated, with
        the output within the other two.
    """
    keep = tuple(keep)
    _binary(bag, 2)
    a, b = bag
    shared = set(a) & set(b)
    if len(shared) != 1:
        raise NotApplicable(f"factors over {a} and {b} share {len(shared)} variables, not one")
    (j,) = shared
    i = a[1 - a.index(j)]
    k = b[1 - b.index(j)]
    _kept({i, j, k}, keep)
    if j in keep:
        raise NotApplicable(f"the shared variable {j!r} is kept")
    one, two = Product(0, 1, i, j, k), Product(1, 0, k, j, i)
    if not keep:
        return [one, two]
    return [one if keep[0] == i else two]


def triangle_shapes(bag: Sequence[tuple[str, ...]], keep: Sequence[str]) -> list[Triangle]:
    """The ways to read the bag as a masked product onto ``keep`` (one per eliminated
    variable that can be the middle one).

    Raises
    ------
    NotApplicable
        Not three binary factors over three variables pairwise (a triangle), or no
        variable eliminated.
    """
    keep = tuple(keep)
    _binary(bag, 3)
    sets = [frozenset(vs) for vs in bag]
    names = set().union(*sets)
    if len(names) != 3 or len(set(sets)) != 3:
        raise NotApplicable(f"factors over {[tuple(vs) for vs in bag]} are not a triangle")
    _kept(names, keep)
    out = []
    for m in sorted(names - set(keep)):
        rest = [v for v in keep if v != m] + sorted(names - {m} - set(keep))
        x, y = rest
        at = {s: p for p, s in enumerate(sets)}
        left, right, mask = at[frozenset((x, m))], at[frozenset((m, y))], at[frozenset((x, y))]
        out.append(Triangle(left, right, mask, x, m, y))
    if not out:
        raise NotApplicable("every variable of the triangle is kept")
    return out


# -- the choice ---------------------------------------------------------------------------
def _library(semiring: Semiring) -> None:
    if semiring.library is None:
        raise NotApplicable(f"the {semiring.name!r} semiring declares no library operations")


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

    Fitted on 2 December 2026 to the single-thread runs of ``benchmarks/kernels.py``
    (``--repeat 3``, 2 cores, load 0.5-1.5), once float ``np.dot`` calls no longer left
    OpenBLAS's threads spinning beside the runners.  They predict its CPU seconds within
    about 1.3× for the min-plus 2-hop, the triangle count and the dense min-plus product
    (each runner) and the dense chain (Generic Join), 2× over for BLAS and the compiled
    loop, and under on the sparse chain's 25M-row product: 2.7× for GraphBLAS, 7× for the
    Generic Join kernel.  Earlier constants (a row 1.5e-7 s, a GraphBLAS multiplication
    5e-9 s, a masked one 1.8e-9 s), fitted before that fix, rated the masked triangle
    product dearer than the Generic Join, which it is not.  GraphBLAS
    and BLAS spread their work over every core, so their wall time is lower still.

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

    row: float = 3e-8
    join: float = 5.5e-8
    join_cyclic: float = 1.15e-9
    mxm: float = 2.8e-9
    masked: float = 8e-10
    blas: float = 2e-10
    loop: float = 1.5e-10
    cell: float = 5e-9


COSTS = Costs()


def _shape(name: str, bag: Sequence[tuple[str, ...]], keep: Sequence[str]) -> None:
    if name == GRAPHBLAS_MXM:
        product_shapes(bag, keep)
    elif name == GRAPHBLAS_MASKED:
        triangle_shapes(bag, keep)


def _dense(
    inputs: Sequence[Stats], keep: Sequence[str], semiring: Semiring, density: float, cells: int
) -> None:
    lib = semiring.library
    assert lib is not None
    if not lib.sums:
        product_shapes([tuple(i.vars) for i in inputs], keep)
    size = _sizes(inputs)
    for i in inputs:
        span = math.prod(size[v] for v in i.vars)
        if span > cells:
            raise NotApplicable(f"a factor over {tuple(i.vars)} spans {span:,.0f} cells")
        if i.rows < density * span:
            raise NotApplicable(
                f"a factor over {tuple(i.vars)} fills {i.rows / span:.3g} < density {density:g}"
            )
    out = math.prod(size[v] for v in keep)
    if out > cells:
        raise NotApplicable(f"the output spans {out:,.0f} cells")


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
    density: float = 0.5,
    cells: int = 1 << 26,
) -> str | None:
    """None when the runner ``name`` can run the step, else why not (one line).

    From the bag's variables, the factors' statistics (rows and distinct values per
    variable) and the semiring's declarations only; the data may still make the runner
    decline (:func:`faq.kernel.runners.run`).

    Raises
    ------
    KeyError
        ``name`` is not a runner (:data:`NAMES`).
    """
    if name not in NAMES:
        raise KeyError(f"unknown runner {name!r}; runners: {', '.join(NAMES)}")
    if name == GENERIC_JOIN:
        return None
    try:
        _library(semiring)
        if name == BLAS:
            _dense(inputs, keep, semiring, density, cells)
        else:
            _shape(name, [tuple(i.vars) for i in inputs], keep)
    except NotApplicable as why:
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
        A runner of :data:`NAMES`.
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
    density: float = 0.5,
    cells: int = 1 << 26,
    costs: Costs = COSTS,
) -> list[tuple[str, float, str]]:
    """Every runner that applies to the step, cheapest first: ``(name, seconds, why)``.

    ``why`` is the line ``explain()`` can show: the estimate, or why a runner does not
    apply (those come last, with an infinite cost).
    """
    out = []
    for name in NAMES:
        no = applies(name, inputs, keep, semiring, density, cells)
        if no is None:
            s = estimate(name, inputs, keep, semiring, work=work, pair_rows=pair_rows, costs=costs)
            out.append((name, s, f"estimated {s:.3g} s"))
        else:
            out.append((name, math.inf, no))
    return sorted(out, key=lambda r: r[1])


def shape_of(name: str, bag: Sequence[tuple[str, ...]], keep: Sequence[str]) -> Any:
    """How the library runner ``name`` reads the bag: a :class:`Product` (``graphblas-mxm``;
    ``blas`` outside sums of products), the tuple of :class:`Triangle` readings
    (``graphblas-masked``: the runner takes the one with the fewest multiplications), or
    None (the runner needs none).

    Raises
    ------
    NotApplicable
        The bag has no such reading.
    """
    if name == GRAPHBLAS_MASKED:
        return tuple(triangle_shapes(bag, keep))
    if name == GRAPHBLAS_MXM:
        return product_shapes(bag, keep)[0]
    if name == BLAS:
        try:
            return product_shapes(bag, keep)[0]
        except NotApplicable:
            return None  # a sum of products: BLAS takes any bag
    return None
