"""Tables: a relation as numpy arrays, and the algebra on them (⊕-grouping, concatenation).

A :class:`Table` holds one key column per variable and an annotation array
(``None`` when every annotation is one).  Every layer above the kernel (the
join, keyed tables, the Spark conversion, the incremental states) speaks
tables; the semiring's numpy operations come in as a
:class:`semirings.local.LocalOps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from faq.kernel.rows import NONDECREASING, STRICT, key_order
from semirings.local import LocalOps, group_starts, run_starts

__all__ = [
    "Table",
    "cat_rows",
    "concat",
    "consolidated",
    "drop_zeros",
    "empty_table",
    "group_reduce",
    "ranges",
    "sum_keeping_zeros",
    "values_of",
    "with_values",
]


# -- tables -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Table:
    """A relation as numpy arrays: key columns (one per variable) and annotations.

    ``values`` is None when every annotation is the semiring's one.  Keys are
    distinct (a table is consolidated) unless ``unique`` is False.
    """

    vars: tuple[str, ...]
    cols: tuple[np.ndarray, ...]
    values: np.ndarray | None = None
    unique: bool = True

    def __post_init__(self) -> None:
        if len(self.cols) != len(self.vars):
            raise ValueError(f"table over {self.vars} has {len(self.cols)} key columns")

    @property
    def rows(self) -> int:
        """Number of rows."""
        if self.cols:
            return len(self.cols[0])
        return 0 if self.values is None else len(self.values)

    def col(self, var: str) -> np.ndarray:
        """The key column of ``var``."""
        return self.cols[self.vars.index(var)]

    def take(self, idx: np.ndarray) -> Table:
        """The rows ``idx`` (in that order)."""
        values = None if self.values is None else self.values[idx]
        return Table(self.vars, tuple(c[idx] for c in self.cols), values, self.unique)


def group_reduce(t: Table, keep: Sequence[str], ops: LocalOps) -> Table:
    """``t`` ⊕-aggregated onto the variables ``keep``: one row per distinct key, no zeros.

    A table with no ``keep`` variables becomes a single row (or none when
    ``t`` is empty); annotations that are one everywhere are counted.
    """
    keep = tuple(keep)
    if t.rows == 0:
        return Table(keep, tuple(t.col(v)[:0] for v in keep), np.empty(0, dtype=ops.dtype))
    cols = [t.col(v) for v in keep]
    if not cols:
        perm, starts = np.arange(t.rows, dtype=np.int64), np.zeros(1, dtype=np.int64)
    elif (t.unique or t.rows == 1) and keep == t.vars:  # one row: already one per key
        return drop_zeros(t, ops)
    else:
        perm, starts = _groups(cols, t.rows)
    if t.values is None:
        sums = ops.ones(np.diff(np.append(starts, t.rows)))
    else:
        sums = ops.reduceat(t.values if perm is None else t.values[perm], starts)
    if perm is None and len(starts) == t.rows:  # every row its own group: the columns
        return drop_zeros(Table(keep, tuple(cols), sums), ops)
    first = starts if perm is None else perm[starts]
    return drop_zeros(Table(keep, tuple(c[first] for c in cols), sums), ops)


def _groups(cols: list[np.ndarray], n: int) -> tuple[np.ndarray | None, np.ndarray]:
    """A permutation sorting the rows of ``cols`` (None: they are in key order already, as
    most inputs are, and need no sort and no gather) and where each group of equal rows
    starts in that order."""
    order = key_order(cols)
    if order == STRICT:
        return None, np.arange(n, dtype=np.int64)
    if order == NONDECREASING:
        return None, run_starts(cols)
    return group_starts(cols)


def drop_zeros(t: Table, ops: LocalOps) -> Table:
    if t.values is None:
        return t
    keep = ops.nonzero(t.values)
    return t if keep.all() else t.take(np.flatnonzero(keep))


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + c)`` for every ``(s, c)``, vectorised.

    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    ends = np.cumsum(counts)
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts)
    return shift + np.arange(total, dtype=np.int64)


def concat(parts: list[Table], ops: LocalOps) -> Table:
    """Tables over the same variables, one after the other (keys may repeat then)."""
    if len(parts) == 1:
        return parts[0]
    keep = parts[0].vars
    cols = tuple(np.concatenate([t.cols[i] for t in parts]) for i in range(len(keep)))
    values = np.concatenate([values_of(t, ops) for t in parts])
    return Table(keep, cols, values, unique=False)


def values_of(t: Table, ops: LocalOps) -> np.ndarray:
    if t.values is not None:
        return np.asarray(t.values, dtype=ops.dtype)
    return ops.ones(np.ones(t.rows, dtype=np.int64))


def sum_keeping_zeros(t: Table, ops: LocalOps) -> Table:
    """``t`` ⊕-grouped by its whole key, keeping the keys whose ⊕ is zero (a keyed table's
    change marks a removed key so)."""
    if not t.vars:  # one row (or none) is its own sum
        v = t.values if t.values is not None else ops.ones(np.ones(t.rows, np.int64))
        total = ops.reduceat(v, np.zeros(1, dtype=np.int64)) if t.rows > 1 else v
        return Table((), (), np.asarray(total, dtype=ops.dtype))
    perm, starts = group_starts(list(t.cols))
    assert t.values is not None
    sums = ops.reduceat(t.values[perm], starts)
    first = perm[starts]
    return Table(t.vars, tuple(c[first] for c in t.cols), sums)


def scalar_plus(current: Table, delta: Table, ops: LocalOps) -> Table | None:
    """The one row of ``current ⊕ Σ delta`` for tables without key columns (``current``
    holds at most one row, no zero), kept even where it is zero; None where the change's
    annotations ⊕-sum to zero (nothing changes): :func:`sum_keeping_zeros` of the change,
    then of the two rows, with no table grouped."""
    change = sum_keeping_zeros(delta, ops)
    if not change.rows or not ops.nonzero(change.values).all():
        return None
    if not current.rows:
        return change
    return sum_keeping_zeros(Table((), (), np.concatenate([current.values, change.values])), ops)


def with_values(t: Table, ops: LocalOps) -> Table:
    """``t`` with its annotations given: ones where it has none."""
    if t.values is not None:
        return t
    return Table(t.vars, t.cols, ops.ones(np.ones(t.rows, dtype=np.int64)), t.unique)


def empty_table(
    vars_: tuple[str, ...], ops: LocalOps, like: Sequence[np.ndarray] | None = None
) -> Table:
    """A table of no rows over ``vars_``, its key columns of the kinds of ``like`` (else
    int64), its annotations of ``ops``' type."""
    cols = tuple(c[:0] for c in like) if like else tuple(np.empty(0, np.int64) for _ in vars_)
    return Table(vars_, cols, np.empty(0, dtype=ops.dtype))


def cat_rows(a: Table, b: Table) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The columns and annotations of ``a``'s rows then ``b``'s, their types kept."""
    cols = tuple(np.concatenate([x, y]) for x, y in zip(a.cols, b.cols, strict=True))
    assert a.values is not None and b.values is not None
    return cols, np.concatenate([a.values, b.values])


def consolidated(t: Table, ops: LocalOps) -> Table:
    """``t`` ⊕-grouped by its whole key (its rows may repeat a key), no zeros."""
    return group_reduce(Table(t.vars, t.cols, t.values, unique=False), t.vars, ops)
