"""What the library runners share: the bags they run, keys as indices, exact bounds.

A library runner (:mod:`faq.kernel.sparse`: SuiteSparse:GraphBLAS;
:mod:`faq.kernel.dense`: numpy's BLAS and compiled dense loops) computes one step
of a plan, a bag of :class:`~faq.kernel.table.Table` joined, ⊗-multiplied and
⊕-aggregated onto the kept variables, and must return exactly what
:func:`faq.kernel.join.generic_join` returns for it.  This module holds what they
need for that:

* the **bags** they run, as the planner read them (:mod:`faq.plan.runners`): a matrix
  product ``L(x, j) ⊗ R(j, y)`` with ``j`` eliminated (:class:`ProductShape`), and a
  triangle ``L(x, m), R(m, y), M(x, y)`` with ``m`` eliminated (:class:`TriangleShape`);
* the tables **consolidated** as the Generic Join kernel indexes them (equal keys
  ⊕-combined with the kernel's own overflow checks, zero annotations dropped:
  :func:`consolidate`);
* **keys as indices**: each variable's keys numbered ``0 … size - 1`` in key
  order (an offset for small integer ranges, else the sorted distinct keys),
  so that a library's row-major output comes back sorted as the kernel's does
  (:class:`Axis`);
* **exact bounds** for 64-bit integer semirings, which the libraries wrap around
  where the kernel raises OverflowError: a runner computes only under a bound
  proving that no product and no partial sum leaves 64 bits (:func:`path_bound`,
  :func:`row_bound`, :func:`product_fits`), and declines otherwise;
* :class:`Declined`: a runner cannot compute a step exactly, so the Generic Join
  kernel must (:func:`faq.kernel.runners.run` then runs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from faq.kernel.table import Table, distinct_rows, drop_zeros, key_sets
from semirings.core import LibraryOps
from semirings.local import LocalOps, distinct

__all__ = [
    "LIMIT",
    "Axis",
    "Declined",
    "ProductShape",
    "TriangleShape",
    "axes_of",
    "consolidate",
    "empty",
    "library_ops",
    "magnitudes",
    "max_abs",
    "path_bound",
    "product_fits",
    "result",
    "row_bound",
    "scalar_result",
]

LIMIT = 2.0**63 * (1 - 1e-6)
"""A float bound below this proves a 64-bit integer result cannot overflow (the margin
covers the rounding of a float sum of up to 10**9 non-negative terms)."""


class Declined(Exception):
    """A library runner cannot compute this step exactly (its shape, its semiring, its
    keys, its density or a possible overflow); the message says why.  The Generic Join
    kernel must run the step."""


def library_ops(ops: LocalOps) -> LibraryOps:
    """The semiring's declared :class:`~semirings.core.LibraryOps`.

    Raises
    ------
    Declined
        The semiring declares none (``log``, provenance, a user semiring).
    """
    lib = ops.semiring.library
    if lib is None:
        raise Declined(f"the {ops.semiring.name!r} semiring declares no library operations")
    return lib


# -- the bags ---------------------------------------------------------------------------------
class ProductShape(Protocol):
    """How a bag reads as one matrix product ``L(x, j) ⊗ R(j, y)``, ``j`` eliminated
    (``faq.plan.runners.Product``): positions of ``L`` and ``R`` in the bag, and the
    variables (``x`` first in the output, the kept one when one is)."""

    left: int
    right: int
    x: str
    j: str
    y: str


class TriangleShape(Protocol):
    """How a bag reads as a masked product ``L(x, m), R(m, y), M(x, y)``, ``m``
    eliminated (``faq.plan.runners.Triangle``)."""

    left: int
    right: int
    mask: int
    x: str
    m: str
    y: str


# -- tables and keys ------------------------------------------------------------------------
def consolidate(t: Table, ops: LocalOps) -> Table:
    """``t`` with distinct keys and no zero annotation, as the Generic Join kernel indexes it.

    Equal keys are ⊕-combined by the kernel's own :func:`~faq.kernel.table.group_reduce`
    (so a 64-bit sum past range raises the same OverflowError); a table whose keys turn
    out distinct and that had no annotations keeps none.
    """
    return distinct_rows(t, ops)


@dataclass(frozen=True)
class Axis:
    """One variable's keys numbered ``0 … size - 1`` in key order.

    ``domain`` is None when the keys are integers numbered by an offset
    (``index = key - lo``), else the sorted distinct keys.
    """

    size: int
    lo: int
    domain: np.ndarray | None
    dtype: Any

    def index(self, col: np.ndarray) -> np.ndarray:
        """The index of every key of ``col`` (each is one of the axis's keys); possibly
        ``col`` itself, not to be written to."""
        if self.domain is None:
            if self.lo:
                return np.subtract(col, self.lo, dtype=np.int64)
            return col.astype(np.int64, copy=False)
        return np.searchsorted(self.domain, col).astype(np.int64, copy=False)

    def keys(self, idx: np.ndarray) -> np.ndarray:
        """The keys at indices ``idx``, of the type of the columns the axis was made from."""
        idx = np.asarray(idx)
        idx = idx.view(np.int64) if idx.dtype == np.uint64 else idx.astype(np.int64, copy=False)
        if self.domain is not None:
            return self.domain[idx]
        if self.lo:
            idx = idx + self.lo
        return idx.astype(self.dtype, copy=False)


def _axis(cols: Sequence[np.ndarray], var: str, n: int) -> Axis:
    """The axis over the keys of ``cols`` (key columns of ``n`` rows in all, or a grid's
    levels standing for its columns: the same keys)."""
    if all(c.dtype.kind in "iu" for c in cols) and n:
        lo = min(int(c.min()) for c in cols if len(c))
        hi = max(int(c.max()) for c in cols if len(c))
        if hi - lo < 2 * n + 1024:
            return Axis(hi - lo + 1, lo, None, np.result_type(*cols))
    whole = cols[0] if len(cols) == 1 else np.concatenate(cols)
    try:
        domain = distinct(whole)
    except TypeError as exc:  # keys of several types: the kernel's sort decides
        raise Declined(f"the keys of {var!r} cannot be ordered ({exc})") from None
    return Axis(len(domain), 0, domain, domain.dtype)


def axes_of(tables: Sequence[Table]) -> dict[str, Axis]:
    """An :class:`Axis` per variable of the bag, over its keys in every table.

    Where the tables share key columns (a self-join: a 2-hop or a triangle count over one
    edge relation) and every variable's keys are integers whose spans are alike (the
    bag's whole span at most twice the widest variable's), all variables get one axis over
    all their keys, so that a shared column is the same index array in every factor and
    a runner builds its matrix once (:func:`faq.kernel.sparse.graphblas_masked`)."""
    names = dict.fromkeys(v for t in tables for v in t.vars)
    axes = {
        v: _axis(
            [key_sets(t)[t.vars.index(v)] for t in tables if v in t.vars],
            v,
            sum(t.rows for t in tables if v in t.vars),
        )
        for v in names
    }
    cols = [c for t in tables for c in key_sets(t)]
    shared = len({id(c) for c in cols}) < len(cols)
    if not shared or any(a.domain is not None for a in axes.values()):
        return axes
    lo = min(a.lo for a in axes.values())
    hi = max(a.lo + a.size - 1 for a in axes.values())
    if hi - lo + 1 > 2 * max(a.size for a in axes.values()):
        return axes
    one = Axis(hi - lo + 1, lo, None, np.result_type(*(a.dtype for a in axes.values())))
    return dict.fromkeys(names, one)


def empty(keep: Sequence[str], ops: LocalOps) -> Table:
    """The empty result over ``keep`` (as the Generic Join kernel returns it)."""
    keep = tuple(keep)
    return Table(
        keep, tuple(np.empty(0, dtype=np.int64) for _ in keep), np.empty(0, dtype=ops.dtype)
    )


def result(keep: Sequence[str], cols: Sequence[np.ndarray], values: Any, ops: LocalOps) -> Table:
    """A runner's output rows (distinct keys, sorted by ``keep``) without their zeros."""
    values = np.asarray(values).astype(ops.dtype, copy=False)
    return drop_zeros(Table(tuple(keep), tuple(cols), values), ops)


def scalar_result(value: Any, ops: LocalOps) -> Table:
    """The result of a step that keeps no variable: one row, none when it is zero."""
    if value is None:
        return empty((), ops)
    return result((), (), np.array([value]), ops)


# -- exact bounds for 64-bit integers -----------------------------------------------------
def magnitudes(t: Table) -> np.ndarray | None:
    """``|annotation|`` of every row as floats; None when every annotation is one."""
    return None if t.values is None else np.abs(t.values.astype(np.float64))


def max_abs(t: Table) -> int:
    """The largest ``|annotation|`` of a non-empty table, exactly (1 without annotations)."""
    if t.values is None or not len(t.values):
        return 1
    return max(abs(int(t.values.min())), abs(int(t.values.max())))


def product_fits(tables: Sequence[Table]) -> bool:
    """True when no ⊗ of one annotation of each table can leave 64 bits (exact)."""
    bound = 1
    for t in tables:
        bound *= max_abs(t)
    return bound < 2**63


def _weights(idx: np.ndarray, mags: np.ndarray | None, size: int) -> np.ndarray:
    """Per index, the sum of the magnitudes of its rows (its row count without them)."""
    return np.bincount(idx, weights=mags, minlength=size).astype(np.float64)


def path_bound(
    left_j: np.ndarray,
    left_mags: np.ndarray | None,
    right_j: np.ndarray,
    right_mags: np.ndarray | None,
    size_j: int,
    factor: float = 1.0,
) -> float:
    """``factor × Σ |l(x, j)| |r(j, y)|`` over every joined pair: the sum of the magnitudes
    of every product of ``L(x, j) ⋈ R(j, y)``.

    Every product, every entry of ``L ⊕.⊗ R``, every partial sum of one and every sum of
    entries (a row, all of them) is at most this in magnitude (``factor``: the largest
    magnitude of a third factor multiplied in).
    """
    s = _weights(right_j, right_mags, size_j)
    per = s[left_j]
    # not np.dot: float BLAS leaves OpenBLAS's threads spinning beside the runner's product
    total = float(per.sum() if left_mags is None else np.multiply(per, left_mags).sum())
    return total * factor


def row_bound(
    left_x: np.ndarray,
    left_j: np.ndarray,
    left_mags: np.ndarray | None,
    right_j: np.ndarray,
    right_mags: np.ndarray | None,
    size_x: int,
    size_j: int,
) -> float:
    """``max_x Σ_j |l(x, j)| · max_y |r(j, y)|``: at least the magnitude of every entry of
    ``L ⊕.⊗ R`` and of every partial sum of one (tighter than :func:`path_bound` when
    many rows share the work)."""
    m = np.zeros(size_j, dtype=np.float64)
    if right_mags is None:
        m[right_j] = 1.0
    else:
        np.maximum.at(m, right_j, right_mags)
    per = m[left_j] if left_mags is None else m[left_j] * left_mags
    sums = np.bincount(left_x, weights=per, minlength=size_x)
    return float(sums.max()) if len(sums) else 0.0
