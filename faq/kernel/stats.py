"""Statistics of relations, gathered in one pass: rows, distinct values, pairwise join sizes.

The planner and the physical choices read these figures.  Local relations
(:class:`faq.kernel.Table`) get exact ones from numpy (Spark relations get rows and
approximate distinct counts from the job that checks them, :mod:`faq.spark.checks`).
Besides row and distinct counts, the physical
layer asks for the exact size of the joins of two atoms on their shared
variables, ``Σ_v deg_R(v) · deg_S(v)``: that is what a binary plan builds
first, so it decides between binary joins and Generic Join, and it is what
the triangle's "pairwise join" is (a uniform estimate from distinct counts is
off by 100× and more on real graphs, whose degrees are skewed).

>>> import numpy as np
>>> from faq.kernel import Table
>>> E = Table(("a", "b"), (np.array([0, 0, 1]), np.array([1, 2, 2])))
>>> table_stats(E)
RelationStats(rows=3, distinct=(2, 2), exact=True, scanned=0)
>>> pair_join_size(E, ("b",), E, ("a",))   # E(x, b) ⋈ E(b, y): the 2-paths x → b → y
1
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.table import grid_cols
from semirings.local import group_starts, value_counts

if TYPE_CHECKING:  # pragma: no cover
    from faq.kernel.table import Table

__all__ = [
    "RelationStats",
    "degrees",
    "filtered_stats",
    "pair_join_size",
    "table_stats",
]


@dataclass(frozen=True)
class RelationStats:
    """Row count and distinct count per key column of a relation.

    ``exact`` is False when the figures are estimates or upper bounds (an
    approximate distinct count, rows before duplicates are ⊕-combined).
    ``top`` is, per key column when known, its most frequent values with their
    (approximate) row counts, most frequent first: what a partitioned step reads
    to find the values too heavy for one cell (:mod:`faq.plan.shares`).
    ``scanned`` is, when more than ``rows``, the rows the relation's DataFrame reads
    to produce its rows (a filter over a larger relation): a one-cell step shuffles
    such a relation into its task, so that the scan runs in parallel, rather than
    pulling the scan into its one task (:mod:`faq.spark.fused`).
    """

    rows: int
    distinct: tuple[int, ...]
    exact: bool = True
    top: tuple[tuple[tuple[Any, int], ...], ...] = field(default=(), repr=False)
    scanned: int = 0


def table_stats(t: Table) -> RelationStats:
    """Statistics of a local table (numpy; ``O(n log n)``): exact for a consolidated one,
    ``rows`` an upper bound when keys may repeat."""
    distinct = tuple(len(degrees(t, (v,))[1]) for v in t.vars)
    return RelationStats(t.rows, distinct, t.unique)


def filtered_stats(whole: RelationStats, values: Mapping[int, int] | None) -> RelationStats:
    """Estimated statistics of a relation's rows whose column ``c`` takes one of
    ``values[c]`` given values, for each ``c`` of ``values`` (None: not known).

    The rows are the whole relation's times, per such column, the fraction of its
    distinct values given (as if rows spread evenly over them: values of a higher
    degree than the average make it an underestimate); without ``values``, the whole
    relation's figures.  ``scanned`` is the whole relation's rows: what a filter
    producing them reads.  Not exact."""
    rows, distinct = float(whole.rows), list(whole.distinct)
    for c, n in (values or {}).items():
        if c < len(distinct):
            rows *= min(1.0, n / max(1, whole.distinct[c]))
            distinct[c] = min(distinct[c], n)
    est = max(1, min(whole.rows, int(rows)))
    kept = tuple(min(d, est) for d in distinct)
    return RelationStats(est, kept, exact=False, scanned=max(whole.scanned, whole.rows))


class _ByColumns:
    """Values computed from tuples of column arrays, kept while the columns live.

    Keyed by the columns' ids, but an entry goes as soon as one of its columns is freed
    (a weak reference's callback, run before the column's memory, and with it its id,
    can be reused): an entry found is always for the very arrays asked about, and what
    it holds is freed with them.  At most ``size`` entries (all dropped past that).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: dict[tuple[int, ...], tuple[list[weakref.ref], Any]] = {}

    def get(self, cols: Sequence[np.ndarray]) -> Any:
        """The value kept for ``cols`` (the same array objects), or None."""
        hit = self.entries.get(tuple(id(c) for c in cols))
        if hit is not None and all(r() is c for r, c in zip(hit[0], cols, strict=True)):
            return hit[1]
        return None

    def put(self, cols: Sequence[np.ndarray], value: Any) -> None:
        """Keep ``value`` for ``cols`` (at least one) until one of them is freed."""
        assert cols, "no columns: nothing would tell the entry's arrays apart"
        key = tuple(id(c) for c in cols)
        entries = self.entries

        def drop(_: weakref.ref, key: tuple[int, ...] = key) -> None:
            entries.pop(key, None)

        if len(entries) >= self.size:
            entries.clear()
        entries[key] = ([weakref.ref(c, drop) for c in cols], value)


_DEGREES = _ByColumns(64)
"""Recent degree vectors, by their columns (see :class:`_ByColumns`)."""


def degrees(t: Table, vars_: Sequence[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct values of ``vars_`` in ``t`` (one array per variable) and their counts.

    Remembered for the columns' arrays while they live (the last few), so that the
    several pairs of atoms over one relation cost one pass per column.
    """
    if not vars_:  # the row count: nothing to remember (no column says which table)
        return _degrees(t, [])
    if (grid := t.grid) is not None:  # no column to count: the levels say it
        return _grid_degrees(grid, [t.vars.index(v) for v in vars_], t.rows)
    cols = [t.col(v) for v in vars_]
    hit = _DEGREES.get(cols)
    if hit is not None:
        return hit
    out = _degrees(t, cols)
    _DEGREES.put(cols, out)
    return out


def _grid_degrees(
    grid: tuple[np.ndarray, ...], at: list[int], rows: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """The degrees of the variables at ``at`` in a grid (every combination once): each
    combination of their keys, in key order, ``rows / their combinations`` times."""
    combos = math.prod(len(grid[i]) for i in at)
    values = list(grid_cols([grid[i] for i in at]))
    return values, np.full(combos, rows // combos if combos else 0, dtype=np.int64)


def _degrees(t: Table, cols: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    if not cols:
        return [], np.array([t.rows], dtype=np.int64)
    if len(cols) == 1:
        values, counts = value_counts(cols[0])
        return [values], counts.astype(np.int64)
    perm, starts = group_starts(cols)
    counts = np.diff(np.append(starts, len(perm)))
    first = perm[starts]
    return [c[first] for c in cols], counts.astype(np.int64)


def pair_join_size(a: Table, a_vars: Sequence[str], b: Table, b_vars: Sequence[str]) -> int:
    """Exact rows of joining ``a`` and ``b`` on ``a_vars`` = ``b_vars`` (by position).

    ``Σ_v deg_a(v) · deg_b(v)`` over the key values ``v`` both have.
    """
    va, ca = degrees(a, a_vars)
    vb, cb = degrees(b, b_vars)
    if not va:
        return int(ca[0]) * int(cb[0])
    if len(va) == 1:  # both sorted and distinct: a binary search of one in the other
        if len(vb[0]) == 0:
            return 0
        pos = np.minimum(np.searchsorted(vb[0], va[0]), len(vb[0]) - 1)
        ia = np.flatnonzero(vb[0][pos] == va[0])
        ib = pos[ia]
    else:
        both = [np.concatenate([x, y]) for x, y in zip(va, vb, strict=True)]
        perm, starts = group_starts(both)
        sizes = np.diff(np.append(starts, len(perm)))
        pairs = perm[starts[sizes == 2]], perm[starts[sizes == 2] + 1]
        lo, hi = np.minimum(*pairs), np.maximum(*pairs)
        ia, ib = lo, hi - len(ca)
    return products_sum(ca[ia], cb[ib])


def products_sum(a: np.ndarray, b: np.ndarray) -> int:
    """``Σ a[i] · b[i]`` of two arrays of non-negative integer counts: exactly in 64-bit
    integers where no product or sum can leave them, else rounded from float64.

    Neither way calls BLAS: a float ``np.dot`` would, and OpenBLAS's threads then spin
    for a tenth of a second after it, taking the cores from the library runner or the
    compiled kernel that runs the step next (a GraphBLAS product on two cores ran about
    twice as slow just after one).
    """
    if not len(a):
        return 0
    top = float(a.max()) * float(b.max()) * len(a)
    if top < 2.0**62:
        return int(np.dot(a.astype(np.int64, copy=False), b.astype(np.int64, copy=False)))
    return int(np.multiply(a, b, dtype=np.float64).sum().round())


# -- Spark: every figure of a query in one job ---------------------------------------------------
