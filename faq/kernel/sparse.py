"""Sparse matrix products in a semiring, by SuiteSparse:GraphBLAS (python-graphblas).

Two runners, each returning exactly the table
:func:`faq.kernel.join.generic_join` returns for the same step (the same rows
sorted by the output variables, the same annotations, zeros dropped, repeated
keys ⊕-combined, the same OverflowError), or raising
:class:`~faq.kernel.library.Declined` when it cannot:

* :func:`graphblas_mxm`: a bag ``L(x, j), R(j, y)`` with ``j`` eliminated (a step
  of a matrix chain, a 2-hop, a round of a shortest-path fixpoint) is
  ``L ⊕.⊗ R`` in the semiring's GraphBLAS semiring; with ``y`` eliminated too it
  is ``L ⊕.⊗ (R ⊕-reduced by rows)``, and with nothing kept an inner product of
  the two reductions;
* :func:`graphblas_masked`: a triangle-shaped bag ``L(x, m), R(m, y), M(x, y)``
  with ``m`` eliminated is ``C<M> = L ⊕.⊗ R`` (only the entries where ``M`` has
  one are computed), then ``C ⊗ M`` elementwise, then ⊕-reduced onto what is
  kept (the triangle count is LAGraph's masked ``plus_pair`` product).

Each variable's keys become matrix indices in key order (:class:`~faq.kernel.library.Axis`),
so GraphBLAS's row-major output is already sorted.  Factors without annotations
become iso-valued matrices, and two of them are multiplied by the declared
``pair`` semiring (``plus_pair``: the count of paths, no value read).

64-bit integer semirings (``counting``, ``integer``) run only when
:func:`~faq.kernel.library.path_bound` (or, for a product kept whole,
:func:`~faq.kernel.library.row_bound`) proves that no product and no partial sum
leaves 64 bits, since GraphBLAS wraps around where the kernel raises; a
semiring whose ⊕ selects (max, min, or) needs only its products bounded.  Float
sums may be added in another order than the kernel's (same values to rounding).

python-graphblas is imported on first use (about 1.5 s).  GraphBLAS uses every core
unless told otherwise (``threads``: a thread-local ``gb.ss.Context`` for the call), which
is what a step in the driver wants and not what several Spark cells on one executor want;
on an oversubscribed machine one thread also spends less CPU than two (they spin-wait).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from faq.kernel.library import (
    LIMIT,
    Axis,
    Declined,
    ProductShape,
    TriangleShape,
    axes_of,
    consolidate,
    empty,
    library_ops,
    magnitudes,
    path_bound,
    product_fits,
    result,
    row_bound,
    scalar_result,
)
from faq.kernel.rows import STRICT, csr_rows, key_order
from faq.kernel.stats import products_sum
from faq.kernel.table import Table
from semirings.core import LibraryOps
from semirings.local import LocalOps

__all__ = ["graphblas", "graphblas_masked", "graphblas_mxm"]


def graphblas() -> Any:
    """The python-graphblas module (imported on first use).

    Raises
    ------
    Declined
        python-graphblas (or SuiteSparse:GraphBLAS) cannot be imported.
    """
    try:
        import graphblas as gb
    except ImportError as exc:  # pragma: no cover - a runtime dependency
        raise Declined(f"python-graphblas cannot be imported ({exc})") from None
    return gb


def _threads(gb: Any, threads: int) -> contextlib.AbstractContextManager[Any]:
    """GraphBLAS's threads for the calls of this thread in the block (0: unchanged)."""
    if threads <= 0:
        return contextlib.nullcontext()
    return gb.ss.Context(engage=False, nthreads=threads)


def _matrix(
    gb: Any,
    rows: np.ndarray,
    cols: np.ndarray,
    t: Table,
    shape: tuple[int, int],
    lib: LibraryOps,
    one: Any,
) -> Any:
    """A GraphBLAS matrix of ``t``'s annotations (iso-valued, the semiring's ``one``,
    without any): imported as CSR (or CSC) without a sort when the rows come sorted
    that way (tables the kernel made are sorted by their variables), else built."""
    iso = t.values is None
    values: Any = np.asarray([one], dtype=lib.dtype) if iso else t.values
    nrows, ncols = shape
    common = {"nrows": nrows, "ncols": ncols, "values": values, "dtype": lib.dtype, "is_iso": iso}
    if _sorted(rows, cols):
        return gb.Matrix.ss.import_csr(
            indptr=_pointers(rows, nrows), col_indices=_u64(cols), sorted_cols=True, **common
        )
    if _sorted(cols, rows):
        return gb.Matrix.ss.import_csc(
            indptr=_pointers(cols, ncols), row_indices=_u64(rows), sorted_rows=True, **common
        )
    if iso:
        values = values[0]
    return gb.Matrix.from_coo(rows, cols, values, dtype=lib.dtype, nrows=nrows, ncols=ncols)


class _Once:
    """What one runner call makes of the very same objects, made once: keys are tuples of
    arrays, axes and tables (compared by identity) and of sizes (compared by value).  A
    self-join (a 2-hop, a triangle count over one edge relation) then gets one index
    array per shared column, one count of its degrees and one matrix, multiplied by
    itself as a library user would write it."""

    def __init__(self) -> None:
        self._made: list[tuple[tuple[Any, ...], Any]] = []

    def __call__(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        for k, got in self._made:
            if len(k) == len(key) and all(map(_same, k, key)):
                return got
        got = make()
        self._made.append((key, got))
        return got


def _same(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, int | tuple) and a == b)


def _built(
    gb: Any,
    once: _Once,
    rows: np.ndarray,
    cols: np.ndarray,
    t: Table,
    shape: tuple[int, int],
    lib: LibraryOps,
    one: Any,
) -> Any:
    """:func:`_matrix`, once per call for the same index and value arrays and shape."""
    return once((rows, cols, t.values, shape), lambda: _matrix(gb, rows, cols, t, shape, lib, one))


def _pointers(major: np.ndarray, n: int) -> np.ndarray:
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(major, minlength=n), out=ptr[1:])
    return ptr.view(np.uint64)


def _u64(idx: np.ndarray) -> np.ndarray:
    """Non-negative int64 indices seen as the uint64 GraphBLAS takes (no copy)."""
    return np.ascontiguousarray(idx, dtype=np.int64).view(np.uint64)


def _sorted(major: np.ndarray, minor: np.ndarray) -> bool:
    """True when the pairs ``(major, minor)`` are strictly increasing (row-major order)."""
    return key_order([major, minor]) == STRICT


def _entries(C: Any, ax: Axis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of ``C`` in row-major order, ``C`` emptied (its arrays moved out): the
    row of each as a key of ``ax`` (spelled out from the row pointers in one pass, the
    offset of an integer axis added as it goes), its column index, its value."""
    d = C.ss.unpack("csr", sort=True)
    ptr = d["indptr"]
    if ax.domain is None and ax.dtype == np.int64:
        rows = csr_rows(ptr, ax.lo)
    else:
        rows = ax.keys(csr_rows(ptr))
    values = d["values"]
    if d["is_iso"]:
        values = np.full(len(rows), values[0] if len(values) else 0, dtype=values.dtype)
    return rows, d["col_indices"], values


def _semiring(gb: Any, lib: LibraryOps, *tables: Table) -> Any:
    if lib.pair is not None and all(t.values is None for t in tables):
        return getattr(gb.semiring, lib.pair)
    return getattr(gb.semiring, lib.semiring)


def _index(
    tables: Sequence[Table], axes: dict[str, Axis], once: _Once
) -> list[dict[str, np.ndarray]]:
    """Each table's keys as indices per variable (a shared column on one axis: one array)."""

    def index(col: np.ndarray, ax: Axis) -> np.ndarray:
        return once((col, ax), lambda: ax.index(col))  # type: ignore[no-any-return]

    return [{v: index(t.col(v), axes[v]) for v in t.vars} for t in tables]


def _degrees(once: _Once, i: np.ndarray, size: int) -> np.ndarray:
    """The entries of each of ``size`` indices in ``i``, counted once per runner call."""
    return once((i, size), lambda: np.bincount(i, minlength=size))  # type: ignore[no-any-return]


def _wedges(
    shape: TriangleShape, idx: list[dict[str, np.ndarray]], size_m: int, once: _Once
) -> int:
    """The multiplications of the unmasked product ``L ⊕.⊗ R`` of a triangle reading
    (``idx``: each factor's keys as indices, per variable): Σ_m deg_L(m)·deg_R(m)."""
    left, right = idx[shape.left][shape.m], idx[shape.right][shape.m]
    return products_sum(_degrees(once, left, size_m), _degrees(once, right, size_m))


DOT_STEP = 12.0
"""What one step of SuiteSparse's masked dot-product method costs, in multiplications of
its saxpy method: about 12 ns against about 1 ns on 2 threads, fitted to triangle counts
of power-law graphs with 1M-10M edges (exponents 2.1, 2.5 and 3.5) timed both ways
against their steps and wedges.  ``benchmarks/kernels.py --workloads triangles
--tri-edges M`` times the two methods side by side (its two GraphBLAS rows)."""


def _reading_cost(
    shape: TriangleShape, idx: list[dict[str, np.ndarray]], axes: dict[str, Axis], once: _Once
) -> tuple[float, str]:
    """The cost of a triangle reading, in multiplications of the saxpy method, and the
    method that cost is for (``""``: SuiteSparse's own choice)."""
    wedges = _wedges(shape, idx, axes[shape.m].size, once)
    m = idx[shape.mask]
    if DOT_STEP * len(m[shape.x]) >= wedges:  # the dot method visits every mask entry
        return float(wedges), ""
    deg_l = _degrees(once, idx[shape.left][shape.x], axes[shape.x].size)
    deg_r = _degrees(once, idx[shape.right][shape.y], axes[shape.y].size)
    steps = dot_steps(wedges, deg_l, deg_r, m[shape.x], m[shape.y])
    return (float(wedges), "") if steps is None else (DOT_STEP * steps, "dot")


SAMPLE = 1 << 16
"""The mask entries :func:`dot_steps` reads at most (evenly spaced): enough to choose."""


def dot_steps(
    wedges: int, deg_l: np.ndarray, deg_r: np.ndarray, mx: np.ndarray, my: np.ndarray
) -> float | None:
    """The steps of SuiteSparse's dot method for ``C<M> = L ⊕.⊗ R``, where they cost
    less than ``wedges``; else None (SuiteSparse's own choice of method is cheaper).

    Its own choice (a saxpy method here) makes every multiplication of the unmasked
    product, ``wedges`` of them, and keeps those the mask allows.  The dot method visits
    each entry ``(x, y)`` of the mask and intersects row ``x`` of ``L`` with column ``y``
    of ``R``, a merge or a binary search over the shorter of the two, so it costs about
    ``Σ_{(x, y) ∈ M} min(deg_L(x), deg_R(y))`` steps, each dearer (:data:`DOT_STEP`),
    and at least one step an entry.  On a skewed graph the wedges far outnumber those
    steps: a triangle count at 10M edges took 8-11 s by the dot method against 24-45 s
    by SuiteSparse's own.  The sum is estimated from at most :data:`SAMPLE` evenly
    spaced entries of the mask.

    Parameters
    ----------
    wedges : int
        The multiplications of the unmasked product.
    deg_l, deg_r : numpy.ndarray
        The entries of each row of ``L`` and of each column of ``R``, by index.
    mx, my : numpy.ndarray
        The mask's row and column indices, one per entry.
    """
    n = len(mx)
    if n == 0:
        return None
    every = slice(None, None, max(1, n // SAMPLE))
    mins = np.minimum(deg_l[mx[every]], deg_r[my[every]])
    steps = max(float(mins.mean()) * n, float(n))
    return steps if DOT_STEP * steps < wedges else None


def graphblas_mxm(
    tables: Sequence[Table],
    keep: Sequence[str],
    ops: LocalOps,
    shape: ProductShape,
    *,
    threads: int = 0,
) -> Table:
    """The step ``⊕_{eliminated} L(x, j) ⊗ R(j, y)`` onto ``keep`` as a GraphBLAS product.

    Parameters
    ----------
    tables : sequence of Table
        The bag: two binary factors sharing one variable ``j`` (keys may repeat).
    keep : sequence of str
        The output variables: ``(x, y)`` in either order, one of them, or none.
    ops : LocalOps
        The semiring's numpy operations; its semiring must declare
        :class:`~semirings.core.LibraryOps`.
    shape : ProductShape
        How the planner read the bag as a product (:func:`faq.plan.runners.product_shapes`).
    threads : int
        GraphBLAS's threads for this call (0: its own setting, by default every core).

    Returns
    -------
    Table
        What :func:`faq.kernel.join.generic_join` returns for the step.

    Raises
    ------
    Declined
        The semiring declares no library operations,
        the keys cannot be ordered, or a 64-bit result could overflow.
    OverflowError
        Repeated keys of a 64-bit semiring ⊕-combine past 64 bits (as in the kernel).
    """
    keep = tuple(keep)
    lib = library_ops(ops)
    gb = graphblas()
    with _threads(gb, threads):
        return _mxm(gb, tables, keep, ops, lib, shape)


def _mxm(
    gb: Any,
    tables: Sequence[Table],
    keep: tuple[str, ...],
    ops: LocalOps,
    lib: LibraryOps,
    shape: ProductShape,
) -> Table:
    ts = [consolidate(t, ops) for t in tables]
    if any(t.rows == 0 for t in ts):
        return empty(keep, ops)
    L, R = ts[shape.left], ts[shape.right]
    axes = axes_of([L, R])
    ax, aj, ay = axes[shape.x], axes[shape.j], axes[shape.y]
    once = _Once()
    li, ri = _index([L, R], axes, once)
    if lib.int64:
        _check_product(L, R, li[shape.x], li[shape.j], ri[shape.j], ax, aj, lib, len(keep) == 2)
    one = ops.semiring.one
    Lm = _built(gb, once, li[shape.x], li[shape.j], L, (ax.size, aj.size), lib, one)
    Rm = _built(gb, once, ri[shape.j], ri[shape.y], R, (aj.size, ay.size), lib, one)
    if len(keep) == 2:
        C = Lm.mxm(Rm, _semiring(gb, lib, L, R)).new()
        r, c, v = _entries(C, ax)
        return result(keep, [r, ay.keys(c)], v, ops)
    monoid = getattr(gb.monoid, lib.monoid)
    semiring = getattr(gb.semiring, lib.semiring)
    v = Rm.reduce_rowwise(monoid).new()
    if len(keep) == 1:
        w = Lm.mxv(v, semiring).new()
        i, vals = w.to_coo()
        return result(keep, [ax.keys(i)], vals, ops)
    u = Lm.reduce_columnwise(monoid).new()
    return scalar_result(u.inner(v, semiring).new().value, ops)


def _check_product(
    L: Table,
    R: Table,
    lx: np.ndarray,
    lj: np.ndarray,
    rj: np.ndarray,
    ax: Axis,
    aj: Axis,
    lib: LibraryOps,
    whole: bool,
) -> None:
    """Declined unless ``L ⊕.⊗ R`` (and its reductions) provably stays within 64 bits."""
    if not lib.sums:
        if not product_fits([L, R]):
            raise Declined("a product of two annotations could overflow 64 bits")
        return
    lm, rm = magnitudes(L), magnitudes(R)
    bound = path_bound(lj, lm, rj, rm, aj.size)
    if bound < LIMIT:
        return
    if whole and row_bound(lx, lj, lm, rj, rm, ax.size, aj.size) < LIMIT:
        return
    raise Declined(f"a sum of products could overflow 64 bits (bound {bound:.3g})")


def graphblas_masked(
    tables: Sequence[Table],
    keep: Sequence[str],
    ops: LocalOps,
    shapes: Sequence[TriangleShape],
    *,
    threads: int = 0,
) -> Table:
    """The triangle-shaped step ``⊕ L(x, m) ⊗ R(m, y) ⊗ M(x, y)`` as a masked GraphBLAS product.

    ``C<M> = L ⊕.⊗ R`` computes only the entries ``(x, y)`` where ``M`` has one; ``C ⊗ M``
    then multiplies ``M``'s annotations in, and the result is ⊕-reduced onto ``keep``.
    When two variables are eliminated, the middle one is the one whose unmasked product
    has the fewest multiplications.

    Parameters
    ----------
    tables : sequence of Table
        The bag: three binary factors over three variables pairwise (keys may repeat).
    keep : sequence of str
        The output variables (at most two; at least one variable is eliminated).
    ops : LocalOps
        The semiring's numpy operations; its semiring must declare
        :class:`~semirings.core.LibraryOps`.
    shapes : sequence of TriangleShape
        The ways the planner read the bag as a masked product, one per variable that
        can be the middle one (:func:`faq.plan.runners.triangle_shapes`).
    threads : int
        GraphBLAS's threads for this call (0: its own setting, by default every core).

    Returns
    -------
    Table
        What :func:`faq.kernel.join.generic_join` returns for the step.

    Raises
    ------
    Declined
        The semiring declares no library operations, the keys
        cannot be ordered, or a 64-bit result could overflow.
    OverflowError
        Repeated keys of a 64-bit semiring ⊕-combine past 64 bits (as in the kernel).
    """
    keep = tuple(keep)
    lib = library_ops(ops)
    gb = graphblas()
    with _threads(gb, threads):
        return _masked(gb, tables, keep, ops, lib, shapes)


def _masked(
    gb: Any,
    tables: Sequence[Table],
    keep: tuple[str, ...],
    ops: LocalOps,
    lib: LibraryOps,
    shapes: Sequence[TriangleShape],
) -> Table:
    ts = [consolidate(t, ops) for t in tables]
    if any(t.rows == 0 for t in ts):
        return empty(keep, ops)
    axes = axes_of(ts)
    once = _Once()
    idx = _index(ts, axes, once)
    costs = [_reading_cost(s, idx, axes, once) for s in shapes]
    at = min(range(len(shapes)), key=lambda i: costs[i][0])
    shape, method = shapes[at], costs[at][1]
    L, R, M = ts[shape.left], ts[shape.right], ts[shape.mask]
    li, ri, mi = idx[shape.left], idx[shape.right], idx[shape.mask]
    ax, am, ay = axes[shape.x], axes[shape.m], axes[shape.y]
    if lib.int64:
        if lib.sums:
            bound = path_bound(li[shape.m], magnitudes(L), ri[shape.m], magnitudes(R), am.size)
            bound *= 1 if M.values is None else float(np.abs(M.values.astype(np.float64)).max())
            if bound >= LIMIT:
                raise Declined(f"a sum of products could overflow 64 bits (bound {bound:.3g})")
        elif not product_fits([L, R, M]):
            raise Declined("a product of three annotations could overflow 64 bits")
    one = ops.semiring.one
    Lm = _built(gb, once, li[shape.x], li[shape.m], L, (ax.size, am.size), lib, one)
    Rm = _built(gb, once, ri[shape.m], ri[shape.y], R, (am.size, ay.size), lib, one)
    Mm = _built(gb, once, mi[shape.x], mi[shape.y], M, (ax.size, ay.size), lib, one)
    opts = {"axb_method": method} if method else {}
    C = Lm.mxm(Rm, _semiring(gb, lib, L, R)).new(mask=Mm.S, **opts)
    if M.values is not None:
        C = C.ewise_mult(Mm, getattr(gb.binary, lib.times)).new()
    monoid = getattr(gb.monoid, lib.monoid)
    if len(keep) == 2:
        r, c, v = _entries(C, ax)
        return result(keep, [r, ay.keys(c)], v, ops)
    if len(keep) == 1:
        i, vals = C.reduce_rowwise(monoid).new().to_coo()
        return result(keep, [ax.keys(i)], vals, ops)
    return scalar_result(C.reduce_scalar(monoid).new().value, ops)
