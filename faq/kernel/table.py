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
from functools import cached_property

import numpy as np

from faq.kernel.rows import NONDECREASING, STRICT, key_order
from semirings.local import LocalOps, group_starts, run_starts

__all__ = [
    "GridTable",
    "Table",
    "cat_rows",
    "concat",
    "consolidated",
    "drop_zeros",
    "empty_table",
    "grid_cols",
    "group_reduce",
    "key_sets",
    "ranges",
    "renamed",
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

    @property
    def grid(self) -> tuple[np.ndarray, ...] | None:
        """Per variable, its keys (sorted, distinct) when the table holds every combination
        of them once, in row-major order (a :class:`GridTable`); else None."""
        return None

    def col(self, var: str) -> np.ndarray:
        """The key column of ``var``."""
        return self.cols[self.vars.index(var)]

    def take(self, idx: np.ndarray) -> Table:
        """The rows ``idx`` (in that order)."""
        values = None if self.values is None else self.values[idx]
        return Table(self.vars, tuple(c[idx] for c in self.cols), values, self.unique)


class GridTable(Table):
    """Every combination of some keys per variable, once, in row-major order: a dense
    array's cells (``Factor.from_numpy`` of an array without zeros, a dense step's output).

    ``levels[i]`` holds the keys of ``vars[i]``, sorted and distinct; row ``r`` holds the
    combination at the row-major position ``r`` of the box ``len(levels[0]) × …``, and
    ``values[r]`` its annotation.  The key columns are spelled out when first read, so a
    chain of dense steps (:mod:`faq.kernel.dense`), the statistics of the planner
    (:func:`faq.kernel.stats.degrees`) and ``to_numpy`` never build them: they read the
    levels (:attr:`grid`) and reshape the annotations.
    """

    def __init__(
        self, vars: Sequence[str], levels: Sequence[np.ndarray], values: np.ndarray
    ) -> None:
        vars_, levels = tuple(vars), tuple(levels)
        if len(levels) != len(vars_) or not vars_:
            raise ValueError(f"grid over {vars_} has {len(levels)} levels")
        cells = 1
        for level in levels:
            cells *= len(level)
        if len(values) != cells:
            raise ValueError(f"grid of {cells} cells has {len(values)} annotations")
        object.__setattr__(self, "vars", vars_)
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "unique", True)

    levels: tuple[np.ndarray, ...]

    @cached_property
    def cols(self) -> tuple[np.ndarray, ...]:  # type: ignore[override]
        """The key columns, spelled out (once)."""
        return grid_cols(self.levels)

    @property
    def rows(self) -> int:
        """Number of rows (cells)."""
        assert self.values is not None
        return len(self.values)

    @property
    def grid(self) -> tuple[np.ndarray, ...]:
        """The keys of each variable (sorted, distinct)."""
        return self.levels


def grid_cols(levels: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Every combination of the keys of ``levels``, once, in row-major order, as columns."""
    shape = tuple(len(level) for level in levels)
    where = np.indices(shape, dtype=np.int64).reshape(len(shape), -1)
    return tuple(level[w] for level, w in zip(levels, where, strict=True))


def renamed(t: Table, vars_: Sequence[str]) -> Table:
    """``t`` with its variables renamed, by position: the same columns (a grid stays one)."""
    if (grid := t.grid) is not None:
        assert t.values is not None
        return GridTable(vars_, grid, t.values)
    return Table(tuple(vars_), t.cols, t.values, t.unique)


def key_sets(t: Table) -> tuple[np.ndarray, ...]:
    """Per variable, an array holding the keys of its column: the column itself, or a
    grid's level (each key once, without spelling the column out)."""
    grid = t.grid
    return t.cols if grid is None else grid


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


def distinct_rows(t: Table, ops: LocalOps) -> Table:
    """``t`` ⊕-grouped by its whole key, no zeros, as an input is read: rows without
    annotations whose keys turn out distinct stay without them (each annotated one), so
    that the kernel counts them and a library runner builds one iso-valued matrix, not
    an array of ones."""
    out = group_reduce(t, t.vars, ops)
    if t.values is None and out.values is not None and t.vars and out.rows == t.rows:
        return Table(out.vars, out.cols, None)
    return out


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
