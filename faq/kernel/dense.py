"""Dense blocks: a step whose factors are (nearly) full arrays, by BLAS or a compiled loop.

:func:`dense_step` returns exactly the table :func:`faq.kernel.join.generic_join`
returns for the same step (rows sorted by the output variables, zeros dropped,
repeated keys ⊕-combined, the same OverflowError), or raises
:class:`~faq.kernel.library.Declined` when it cannot.  Each factor becomes a
numpy array over its variables' keys (:class:`~faq.kernel.library.Axis`), absent
keys holding the semiring's zero, when every factor holds at least ``density`` of
its array's cells and no array has more than ``cells`` cells; then:

* a semiring whose ⊕.⊗ is the sum of products (``LibraryOps.sums``: ``real``,
  ``integer``, ``counting``) runs any bag as one ``numpy.einsum(...,
  optimize=True)`` (BLAS for the matrix products).  64-bit integers go through
  float64 BLAS when the bound ``Π max|factor| × Π size of each eliminated
  variable`` is below 2**53 (every product and partial sum is then an integer that
  float64 holds exactly), through numpy's int64 loops below 2**63, and are
  declined above (numpy wraps around where the kernel raises);
* another semiring (min-plus, max-plus, max-product, boolean, max-times) runs a
  matrix product ``L(x, j), R(j, y)`` as a compiled loop over the dense arrays
  (numba; ``out[x, y] = ⊕_j L[x, j] ⊗ R[j, y]``, rows split over ``threads``), and
  the same product with one side or both reduced by numpy ufuncs.

On this machine the compiled min-plus loop takes about 0.4 s for 400×1500·1500×400
where GraphBLAS's ``min_plus`` takes 4 s on the same full matrices and the Generic
Join kernel enumerates 240M rows (``benchmarks/kernels.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from faq.kernel.compiled import NUMBA, jit
from faq.kernel.library import (
    Axis,
    Declined,
    ProductShape,
    axes_of,
    consolidate,
    empty,
    library_ops,
    max_abs,
    product_fits,
    scalar_result,
)
from faq.kernel.rows import fills_box
from faq.kernel.table import GridTable, Table
from semirings.core import LibraryOps
from semirings.local import LocalOps

__all__ = ["LOOPS", "dense_fits", "dense_step", "semiring_matmul"]

LOOPS: dict[tuple[str, str], int] = {
    ("min", "plus"): 0,
    ("max", "plus"): 1,
    ("max", "times"): 2,
    ("lor", "land"): 3,
}
"""The (⊕ monoid, ⊗ operator) pairs, by their declared GraphBLAS names, that the compiled
dense loop computes; another pair runs the same loop in numpy ufuncs."""

_EXACT_FLOAT = 2**53


if NUMBA:

    @jit(nogil=True)
    def _loop(A, B, out, zero, op):  # pragma: no cover - compiled
        """``out[x, y] = ⊕_j A[x, j] ⊗ B[j, y]`` for the ⊕/⊗ pair ``op`` (see LOOPS)."""
        n, m = A.shape
        k = B.shape[1]
        for i in range(n):
            o = out[i]
            for j in range(m):
                a = A[i, j]
                if a == zero:
                    continue
                b = B[j]
                if op == 0:
                    for y in range(k):
                        v = a + b[y]
                        if v < o[y]:
                            o[y] = v
                elif op == 1:
                    for y in range(k):
                        v = a + b[y]
                        if v > o[y]:
                            o[y] = v
                elif op == 2:
                    for y in range(k):
                        v = a * b[y]
                        if v > o[y]:
                            o[y] = v
                else:
                    for y in range(k):
                        o[y] = o[y] or b[y]
        return out


def _loop_numpy(A: np.ndarray, B: np.ndarray, out: np.ndarray, lib: LibraryOps) -> np.ndarray:
    """The dense product in numpy ufuncs: one rank-one ⊗ and one ⊕ per shared index."""
    tmp = np.empty_like(out)
    for j in range(A.shape[1]):
        lib.mul(A[:, j, None], B[None, j, :], out=tmp)
        lib.add(out, tmp, out=out)
    return out


def semiring_matmul(
    A: np.ndarray, B: np.ndarray, lib: LibraryOps, zero: Any, threads: int = 1
) -> np.ndarray:
    """``C[x, y] = ⊕_j A[x, j] ⊗ B[j, y]`` of two dense arrays whose absent cells hold ``zero``.

    Compiled (numba) for the pairs of :data:`LOOPS`, else in numpy ufuncs; ``threads``
    threads each take a block of rows (the compiled loop releases the GIL).
    """
    out = np.full((A.shape[0], B.shape[1]), zero, dtype=lib.dtype)
    op = LOOPS.get((lib.monoid, lib.times))
    if not NUMBA or op is None:
        return _loop_numpy(A, B, out, lib)
    z = np.asarray(zero, dtype=lib.dtype)[()]
    if threads <= 1 or A.shape[0] < 2 * threads:
        return _loop(A, B, out, z, op)
    bounds = np.linspace(0, A.shape[0], threads + 1).astype(np.int64)
    with ThreadPoolExecutor(threads) as pool:
        list(
            pool.map(
                lambda s: _loop(A[s[0] : s[1]], B, out[s[0] : s[1]], z, op),
                zip(bounds[:-1], bounds[1:], strict=True),
            )
        )
    return out


def dense_fits(
    tables: Sequence[Table], keep: Sequence[str], density: float, cells: int
) -> tuple[dict[str, Axis], str]:
    """The axes of a bag whose factors are dense enough, with a line saying so.

    Raises
    ------
    Declined
        A factor holds less than ``density`` of its array's cells, or an array (a
        factor's or the output's) would have more than ``cells`` cells.
    """
    axes = axes_of(tables)
    fill = []
    for t in tables:
        size = math.prod(axes[v].size for v in t.vars)
        if size > cells:
            raise Declined(f"a factor over {t.vars} spans {size:,} cells > {cells:,}")
        fill.append(t.rows / size if size else 1.0)
        if fill[-1] < density:
            raise Declined(f"a factor over {t.vars} fills {fill[-1]:.3g} < density {density:g}")
    out = math.prod(axes[v].size for v in keep)
    if out > cells:
        raise Declined(f"the output spans {out:,} cells > {cells:,}")
    return axes, f"factors fill {min(fill):.3g} ≥ density {density:g} of their cells"


def _array(t: Table, axes: dict[str, Axis], dtype: Any, zero: Any, one: Any) -> np.ndarray:
    """``t`` as an array over its variables' axes, absent cells ``zero`` (a full table in
    row-major order is its annotations reshaped, without a scatter)."""
    shape = tuple(axes[v].size for v in t.vars)
    size = math.prod(shape)
    grid = t.grid
    if grid is not None:  # distinct sorted keys: the whole axis when as many
        if all(len(level) == n for level, n in zip(grid, shape, strict=True)):
            return np.asarray(t.values, dtype=dtype).reshape(shape)
    elif t.values is not None and fills_box(t.cols, size):  # the axes number keys in order
        return np.asarray(t.values, dtype=dtype).reshape(shape)
    flat = np.zeros(t.rows, dtype=np.int64)
    for v, n in zip(t.vars, shape, strict=True):
        flat *= n
        flat += axes[v].index(t.col(v))
    arr = np.full(size, zero, dtype=dtype)
    arr[flat] = one if t.values is None else t.values
    return arr.reshape(shape)


def _rows(keep: tuple[str, ...], out: np.ndarray, axes: dict[str, Axis], ops: LocalOps) -> Table:
    """The non-zero cells of the output array, in row-major (so key) order."""
    if not keep:
        return scalar_result(out[()], ops)
    values = out.ravel().astype(ops.dtype, copy=False)
    alive = ops.nonzero(values)
    if alive.all():  # every cell: a grid, its key columns spelled out only if read
        levels = tuple(
            axes[v].keys(np.arange(n, dtype=np.int64)) for v, n in zip(keep, out.shape, strict=True)
        )
        return GridTable(keep, levels, values)
    where = np.unravel_index(np.flatnonzero(alive), out.shape)
    values = values[alive]
    cols = tuple(axes[v].keys(w) for v, w in zip(keep, where, strict=True))
    return Table(keep, cols, values)


def dense_step(
    tables: Sequence[Table],
    keep: Sequence[str],
    ops: LocalOps,
    shape: ProductShape | None = None,
    *,
    density: float = 0.5,
    cells: int = 1 << 26,
    threads: int = 1,
) -> Table:
    """The step ``⊕_{eliminated} ⊗ tables`` onto ``keep`` over dense arrays.

    Parameters
    ----------
    tables : sequence of Table
        The bag (keys may repeat).  Any bag for a semiring whose ⊕.⊗ is the sum of
        products; two binary factors sharing one eliminated variable for another.
    keep : sequence of str
        The output variables, in the output's order.
    ops : LocalOps
        The semiring's numpy operations; its semiring must declare
        :class:`~semirings.core.LibraryOps`.
    shape : ProductShape, optional
        How the planner read the bag as a product (:func:`faq.plan.runners.product_shapes`);
        needed unless ⊕.⊗ is the sum of products.
    density : float
        The least fraction of its array's cells each factor must hold.
    cells : int
        The most cells of one array (a factor's or the output's).
    threads : int
        Threads of the compiled loop (the BLAS uses its own).

    Returns
    -------
    Table
        What :func:`faq.kernel.join.generic_join` returns for the step.

    Raises
    ------
    Declined
        The factors are not dense enough or too large, the bag is not a matrix product
        (semirings other than sums of products), the semiring declares no library
        operations, or a 64-bit result could overflow.
    OverflowError
        Repeated keys of a 64-bit semiring ⊕-combine past 64 bits (as in the kernel).
    """
    keep = tuple(keep)
    lib = library_ops(ops)
    if shape is None and not lib.sums:
        raise Declined("not a sum of products, and no product shape given")
    if len(set(keep)) != len(keep) or not set(keep) <= {v for t in tables for v in t.vars}:
        raise Declined(f"output {keep} is not a set of the bag's variables")
    if any(len(set(t.vars)) != len(t.vars) for t in tables):
        raise Declined("a factor repeats a variable")
    # distinct keys (a zero annotation is as good as an absent row in an array)
    ts = [t if t.unique else consolidate(t, ops) for t in tables]
    if any(t.rows == 0 for t in ts):
        return empty(keep, ops)
    axes, _ = dense_fits(ts, keep, density, cells)
    zero, one = ops.semiring.zero, ops.semiring.one
    if lib.sums:
        return _rows(keep, _einsum(ts, keep, axes, lib), axes, ops)
    assert shape is not None
    L, R = ts[shape.left], ts[shape.right]
    if lib.int64 and not product_fits([L, R]):
        raise Declined("a product of two annotations could overflow 64 bits")
    A = _array(L, axes, lib.dtype, zero, one)
    if L.vars != (shape.x, shape.j):
        A = np.ascontiguousarray(A.T)
    B = _array(R, axes, lib.dtype, zero, one)
    if R.vars != (shape.j, shape.y):
        B = np.ascontiguousarray(B.T)
    if len(keep) == 2:
        out = semiring_matmul(A, B, lib, zero, threads)
    else:
        v = lib.add.reduce(B, axis=1)
        out = lib.add.reduce(lib.mul(A, v[None, :]), axis=1)
        if not keep:
            out = lib.add.reduce(out)
    return _rows(keep, np.asarray(out), axes, ops)


def _einsum(
    ts: list[Table], keep: tuple[str, ...], axes: dict[str, Axis], lib: LibraryOps
) -> np.ndarray:
    """``einsum`` of the dense factors onto ``keep``, exactly for 64-bit integers."""
    names = list(dict.fromkeys(v for t in ts for v in t.vars))
    letter = {v: chr(ord("a") + i) for i, v in enumerate(names)}
    spec = ",".join("".join(letter[v] for v in t.vars) for t in ts)
    spec += "->" + "".join(letter[v] for v in keep)
    dtype = lib.dtype
    if lib.int64:
        bound = math.prod(max_abs(t) for t in ts)
        bound *= math.prod(axes[v].size for v in names if v not in keep)
        if bound >= 2**63:
            raise Declined(f"a sum of products could overflow 64 bits (bound {bound:.3g})")
        if bound < _EXACT_FLOAT:
            dtype = np.float64
    arrays = [_array(t, axes, dtype, 0, 1) for t in ts]
    out = _product(ts, arrays, keep)
    if out is None:
        out = np.einsum(spec, *arrays, optimize=True)
    return np.asarray(out).astype(lib.dtype) if dtype is not lib.dtype else np.asarray(out)


def _product(ts: list[Table], arrays: list[np.ndarray], keep: tuple[str, ...]) -> np.ndarray | None:
    """Two factors contracted over the variables they share, none of them kept, every
    other variable kept in the order of one factor's then the other's: one
    ``numpy.tensordot`` (one BLAS product, its output contiguous in ``keep``'s order,
    where ``einsum``'s may be a transposed view that reading the rows then copies); None
    for another bag."""
    if len(ts) != 2:
        return None
    pairs = ((ts[0], arrays[0], ts[1], arrays[1]), (ts[1], arrays[1], ts[0], arrays[0]))
    for a, x, b, y in pairs:
        shared = [v for v in a.vars if v in b.vars]
        free = [v for v in a.vars if v not in shared] + [v for v in b.vars if v not in shared]
        if shared and tuple(free) == keep:
            at = ([a.vars.index(v) for v in shared], [b.vars.index(v) for v in shared])
            return np.tensordot(x, y, axes=at)
    return None
