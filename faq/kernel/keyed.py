"""Keyed tables: a relation held in the driver that answers lookups without a scan.

A :class:`KeyedTable` is a consolidated relation (distinct keys, no zero
annotations) stored as a *base* table plus a small table of *overrides*: the
current annotation of the keys changed since the base was last rewritten (the
semiring's zero for a key that is gone).  Reading the rows whose column ``k``
takes one of a few values costs a binary search in a sorted copy of that column
of the base (built once per rewrite) and a scan of the overrides; changing a
few keys patches the overrides (kept in key order).  Past the ``log_rows`` and
``log_fraction`` settings, the overrides are folded into a new base: for integer
annotations merged into the base's tries on a helper thread while ticks go on
(:meth:`KeyedTable.replace`); otherwise at once.  Such a fold also begins earlier, once
the log holds many times the change being written (the ``log_ticks`` setting): small
changes after large ones then soon stop paying for a large log.  The delta rule reads a
relation held this way (:meth:`faq.Factor.keyed`) by these lookups: a view's tick costs
what its change reaches, not the relation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import faq.kernel.table as tb
from faq.kernel.fold import Fold
from faq.kernel.keyed_changes import Changes, Coded
from faq.kernel.merge import (
    WholeKeyIndex,
    changed_rows,
    children_rows,
    mask_at,
    match_keys,
    meeting,
    prefix_runs,
    search_trie,
    whole_key_index,
    whole_key_rows,
)
from faq.kernel.table import Table, drop_zeros, ranges
from faq.kernel.trie import Trie, build_trie
from semirings.local import LocalOps, distinct, group_starts, key_codes, row_keys

__all__ = ["KeyedTable", "changed_rows", "mask_at", "match_keys"]


@dataclass(frozen=True)
class KeyedTable(Changes):
    """A consolidated relation in the driver: ``base`` with ``over`` replacing its keys.

    Attributes
    ----------
    base : Table
        Distinct keys, no zero annotations (``values`` always present).
    over : Table
        Distinct keys; the current annotation of each (zero: the key is gone).
    ops : LocalOps
        The semiring's local operations (for zero tests and ⊕).
    rows : int
        The exact number of rows of the current contents.
    """

    base: Table
    over: Table
    ops: LocalOps
    rows: int
    _index: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    # a fold of the overrides into the base under way on the helper thread (see replace)
    fold: Fold | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, table: Table, ops: LocalOps) -> KeyedTable:
        """A keyed table holding ``table`` (consolidated, no zeros)."""
        base = tb.with_values(table, ops)
        return cls(base, tb.empty_table(base.vars, ops, base.cols), ops, base.rows)

    def overridden(self, over: Table, rows: int) -> KeyedTable:
        """The same base (its sorted columns and tries shared, built once for both) with
        the overrides ``over`` instead (distinct keys in key order, the current annotation
        of each, zero where gone) and ``rows`` the rows of the contents."""
        return KeyedTable(self.base, over, self.ops, rows, self._index)

    @property
    def vars(self) -> tuple[str, ...]:
        """The key columns."""
        return self.base.vars

    # -- reading ------------------------------------------------------------------------------
    def table(self) -> Table:
        """The current contents as one consolidated table (copies the relation)."""
        if self.over.rows == 0:
            return self.base
        if not self.vars:
            return drop_zeros(self.over, self.ops)
        in_over, _ = match_keys(self.base.cols, self.over.cols)
        kept = self.base.take(np.flatnonzero(~in_over))
        return Table(self.vars, *tb.cat_rows(kept, drop_zeros(self.over, self.ops)))

    def at(self, keys: Sequence[np.ndarray]) -> Table:
        """The current rows whose whole key is one of ``keys`` (one array per column): by
        binary searches (:meth:`_at_searched`) where :meth:`_searched`, else by prefix."""
        if not self.vars:
            return self.table()
        return self._at_searched(keys) if self._searched() else self._leading(keys)

    def _searched(self) -> bool:  # integer annotations, or boolean and float ones over integers
        kind = np.dtype(self.ops.dtype).kind
        return kind in "iu" or (kind in "bf" and all(c.dtype.kind in "iu" for c in self.base.cols))

    def values_at(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        """The current annotation at each row of ``keys`` (one array per column, at least
        one column; repeats allowed), the semiring's zero where there is none."""
        out = np.repeat(np.asarray([self.ops.semiring.zero], dtype=self.ops.dtype), len(keys[0]))
        if self.vars and self._searched():  # aligned by the searches themselves
            _, _, current, present, _ = self._current(keys)
            out[present] = current[present]
            return out
        rows = self.at(keys)
        found, at = match_keys(keys, rows.cols)
        out[found] = rows.values[at[found]]  # type: ignore[index]
        return out

    def at_prefix(self, keys: Sequence[np.ndarray]) -> Table:
        """The current rows whose leading ``len(keys)`` columns are one of ``keys`` (one
        array per leading column; all columns: :meth:`at`)."""
        if len(keys) >= len(self.vars) or not keys:
            return self.at(keys) if keys else self.table()
        return self._leading(keys)

    def _leading(self, keys: Sequence[np.ndarray]) -> Table:
        """The current rows whose leading columns are one of ``keys``: integers one column
        short of the key as the children of their nodes in the base's trie; else by binary
        search in a sorted code of the whole key (:func:`faq.kernel.merge.whole_key_rows`).
        (Column by column, a hub's edges would all be read first.)"""
        k, ints = len(keys), all(c.dtype.kind in "iu" for c in (*keys, *self.base.cols[:-1]))
        if k == len(self.vars) - 1 and ints:  # the last column may be floats (weights)
            perm, starts = group_starts(keys)  # each node's children once
            tr = self.trie(tuple(range(k + 1)))
            base = Table(self.vars, *children_rows(tr, [c[perm[starts]] for c in keys]))
        else:
            idx = self._whole_key_index() if len(self.vars) > 1 else None
            pos = None if idx is None else whole_key_rows(idx, keys)  # None: keys of other types
            if pos is None:
                rows = self.lookup([{i: distinct(c) for i, c in enumerate(keys)}])
                return rows.take(np.flatnonzero(match_keys(rows.cols[:k], keys)[0]))
            base = self.base.take(pos)
        if self.over.rows == 0:
            return base
        over = self._over_prefix(keys)
        base = base.take(np.flatnonzero(~self._in_over(base.cols)))
        return Table(self.vars, *tb.cat_rows(base, drop_zeros(over, self.ops)))

    def _whole_key_index(self) -> WholeKeyIndex | None:
        """The base's :func:`faq.kernel.merge.whole_key_index`, built once per base."""
        if -1 not in self._index:
            self._index[-1] = whole_key_index(self.base.cols)  # type: ignore[assignment]
        return self._index[-1]  # type: ignore[return-value]

    def _at_searched(self, keys: Sequence[np.ndarray]) -> Table:
        """:meth:`at` by binary searches in the trie of the base and in the overrides
        (integer annotations, such as an incremental view's counts, or boolean and float
        ones over integer keys)."""
        keys = [np.asarray(c) for c in keys]
        if len(keys[0]) > 1:
            perm, starts = group_starts(keys)
            keys = [c[perm[starts]] for c in keys]
        _, _, current, present, _ = self._current(keys)
        return Table(self.vars, tuple(c[present] for c in keys), current[present])

    def _current(
        self, keys: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Coded | None]:
        """For each of ``keys`` (distinct): the base's annotation (0 of its dtype: none),
        its row in the overrides (-1: none), the current annotation, the positions of the
        keys present now (in the base or the overrides, nonzero), and the keys'
        :meth:`_coded` that found them in the overrides (None: not coded)."""
        found, pos = self._positions(keys)
        values = self.trie(tuple(range(len(self.vars)))).values
        assert values is not None
        base_at = np.zeros(len(keys[0]), dtype=values.dtype)
        base_at[found] = values[pos[found]]
        coded = self._coded(keys) if self.over.rows else None
        in_over = self._over_rows(keys, coded)
        listed = in_over >= 0
        current = base_at.copy()
        if listed.any():
            assert self.over.values is not None
            current[listed] = self.over.values[in_over[listed]]
        present = np.flatnonzero(self.ops.nonzero(current) & (found | listed))
        return base_at, in_over, current, present, coded

    def lookup(self, conds: Sequence[Mapping[int, np.ndarray]]) -> Table:
        """The current rows matching any of ``conds`` (each: column -> allowed values, all
        of which must hold), consolidated."""
        if not self.vars or any(not c for c in conds):
            return self.table()
        if not conds:
            return self.base.take(np.empty(0, np.int64))
        if len(conds) == 1:
            pos = np.sort(self._base_rows(conds[0]))
        else:  # a mask over the base: cheaper than sorting the union of large picks
            hit = np.zeros(self.base.rows, dtype=bool)
            for c in conds:
                hit[self._base_rows(c)] = True
            pos = np.flatnonzero(hit)
        base = self.base.take(pos)
        if self.over.rows == 0:
            return base
        mask = np.zeros(self.over.rows, dtype=bool)
        for c in conds:
            mask[self._over_meeting(c)] = True
        over = self.over.take(np.flatnonzero(mask))
        base = base.take(np.flatnonzero(~self._in_over(base.cols)))
        return Table(self.vars, *tb.cat_rows(base, drop_zeros(over, self.ops)))

    def _in_over(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        """For each row of whole ``keys``: whether the overrides hold it."""
        at = self._coded_rows(keys)
        return at >= 0 if at is not None else match_keys(keys, self.over.cols)[0]

    def _over_prefix(self, keys: Sequence[np.ndarray]) -> Table:
        """The overrides whose leading ``len(keys)`` columns are one of ``keys``: by their
        codes (a whole key, or runs of a key one column short), else by a match of all."""
        at, coded = self._coded_rows(keys), self._over_codes()
        if at is not None:
            return self.over.take(np.unique(at[at >= 0]))
        short = coded is not None and len(keys) == len(self.vars) - 1
        pos = prefix_runs(coded, keys) if short else None  # type: ignore[arg-type]
        if pos is None:
            pos = np.flatnonzero(match_keys(self.over.cols[: len(keys)], keys)[0])
        return self.over.take(pos)

    def _over_meeting(self, cond: Mapping[int, np.ndarray]) -> np.ndarray:
        """Positions of the overrides meeting ``cond`` (:func:`faq.kernel.merge.meeting`)."""
        return meeting(self.over, cond, self._over_codes() is not None)

    def _base_rows(self, cond: Mapping[int, np.ndarray]) -> np.ndarray:
        """Positions in ``base`` of the rows meeting ``cond`` (in no particular order).

        The column whose values match the fewest rows is read by binary search in
        its sorted copy; the other conditions filter those rows.
        """
        best: tuple[int, np.ndarray, np.ndarray] | None = None
        for k, values in cond.items():
            _, sorted_col = self.column_index(k)
            v = np.asarray(values)
            lo = np.searchsorted(sorted_col, v, side="left")
            hi = np.searchsorted(sorted_col, v, side="right")
            if best is None or int((hi - lo).sum()) < int((best[2] - best[1]).sum()):
                best = (k, lo, hi)
        assert best is not None
        k0, lo, hi = best
        pos = self.column_index(k0)[0][ranges(lo, hi - lo)]
        for k, values in cond.items():
            if k != k0 and len(pos):
                pos = pos[np.isin(self.base.cols[k][pos], values)]
        return pos

    def column_index(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The base's row numbers in the order of column ``k`` (stable), and that column
        sorted: built once per base."""
        if k not in self._index:
            order = np.argsort(self.base.cols[k], kind="stable")
            self._index[k] = (order, self.base.cols[k][order])
        return self._index[k]

    def trie(self, perm: Sequence[int]) -> Trie:
        """The base indexed by its columns in the order ``perm`` (levels named ``c0``,
        ``c1``, ... by column position), built once per base and shared by every keyed
        table over the same base.  It holds the base only: see :meth:`correction`."""
        perm = tuple(perm)
        key = ("trie", perm)
        got = self._index.get(key)
        # keyed tables over the same keys may share the index with other annotations
        if got is None or got[0] is not self.base.values:
            names = tuple(f"c{k}" for k in perm)
            t = Table(names, tuple(self.base.cols[k] for k in perm), self.base.values)
            got = self._index[key] = (self.base.values, build_trie(t, names))
        return got[1]

    def correction(self) -> Table:
        """What the overrides add to the base, key by key: the current annotation minus the
        base's (the base's negated for a removed key; zero where the two agree), so that
        the contents are ``base ⊕ correction``: the overrides' keys, in their order, with
        no row left out (a pass to drop the zeros would cost more than the readers'
        skipping them: their products and sums are zero).  Only for annotations in a ring
        of integers (``ops.dtype`` an integer type): it needs inverses and exact
        arithmetic."""
        if np.dtype(self.ops.dtype).kind not in "iu":
            raise TypeError(f"correction() needs integer annotations, not {self.ops.dtype}")
        over = self.over
        got = self._memo("correction")
        if got is None:
            assert over.values is not None
            got = Table(self.vars, over.cols, over.values - self._before())
            self._remember("correction", got)
        return got

    def _memo(self, name: str) -> Any:
        """What :meth:`_remember` kept under ``name`` for these overrides over this base."""
        for over, values, value in self._index.get(("memo", name), ()):
            if over is self.over and values is self.base.values:
                return value
        return None

    def _remember(self, name: str, value: Any, over: Table | None = None) -> None:
        """Keep ``value`` for ``over`` (default: these overrides) over this base; entries of
        older overrides are dropped (those of the last two are kept: a tick reads the state
        before its change while it builds the state after)."""
        over = self.over if over is None else over
        kept = self._index.get(("memo", name), ())
        kept = [e for e in kept if e[0] is not over][-1:]  # matched by identity, not id()
        self._index[("memo", name)] = [*kept, (over, self.base.values, value)]

    def _before(self) -> np.ndarray:
        """The base's annotation at each key of the overrides (zero where it has none),
        kept with the overrides from one change to the next."""
        before = self._memo("before")
        if before is None:
            before = self._base_at(self.over.cols)
            self._remember("before", before)
        return before

    def _base_at(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        """The base's annotation at each of ``keys`` (zero where it has none)."""
        dtype = self.base.values.dtype if self.base.values is not None else np.int64
        out = np.zeros(len(keys[0]) if keys else 0, dtype=dtype)
        if len(out) and self.base.rows and self.vars:
            found, at = self._positions(keys)
            values = self.trie(tuple(range(len(self.vars)))).values
            assert values is not None
            out[found] = values[at[found]]
        return out

    def _positions(self, keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """For each row of ``keys``: whether the base holds it, and its row in the trie of
        the base in column order (binary searches, no sort)."""
        return search_trie(self.trie(tuple(range(len(self.vars)))), keys)

    def _over_rows(self, keys: Sequence[np.ndarray], coded: Coded | None = None) -> np.ndarray:
        """For each row of ``keys``: the row of the overrides holding it, or -1 (by their
        codes, else a trie of them built once per change); ``coded``: the keys'
        :meth:`_coded`, where the caller has them."""
        n = len(keys[0])
        if self.over.rows == 0:
            return np.full(n, -1, dtype=np.int64)
        at = self._coded_rows(keys, coded)
        if at is not None:
            return at
        tr = self._memo("over-trie")
        if tr is None:
            names = tuple(f"c{k}" for k in range(len(self.vars)))
            rows = np.arange(self.over.rows, dtype=np.int64)
            tr = build_trie(Table(names, self.over.cols, rows), names)
            self._remember("over-trie", tr)
        found, at = search_trie(tr, keys)
        return np.where(found, tr.values[np.maximum(at, 0)], -1)

    def _coded(self, keys: Sequence[np.ndarray]) -> Coded | None:
        """Whole ``keys`` coded as the overrides' keys are (:func:`semirings.local.key_codes`
        with their lowest values and spans): each row's code and whether it lies inside
        their spans; None where :meth:`_codable` says they cannot be."""
        if not self._codable(keys):
            return None
        lows, spans, _ = self._over_codes()  # type: ignore[misc]
        return key_codes(keys, lows, spans)

    def _coded_rows(
        self, keys: Sequence[np.ndarray], coded: Coded | None = None
    ) -> np.ndarray | None:
        """:meth:`_over_rows` by binary search in :meth:`_over_codes` (None: not codable)."""
        coded = self._coded(keys) if coded is None else coded
        if coded is None:
            return None
        code, ok = coded
        codes = self._over_codes()[2]  # type: ignore[index]
        pos = np.minimum(np.searchsorted(codes, code), len(codes) - 1)
        return np.where(ok & (codes[pos] == code), pos, -1)

    def in_key_order(self) -> bool:
        """Whether the overrides, and so :meth:`correction`, are sorted by key: where their
        codes are kept (:meth:`_over_codes`, checked when made, carried by each change)."""
        return self._over_codes() is not None

    def _codable(self, keys: Sequence[np.ndarray]) -> bool:
        """Whether whole ``keys`` can be found in :meth:`_over_codes` (kinds alike)."""
        coded = self._over_codes()
        if coded is None or len(keys) != len(self.vars):
            return False
        kinds = [np.asarray(c).dtype.kind for c in keys]
        return all(k in ("iu" if i < len(coded[0]) else "iuf") for i, k in enumerate(kinds))

    def _over_codes(self) -> tuple[list[int], list[int], np.ndarray] | None:
        """The overrides' keys as one sorted code each (:func:`semirings.local.row_keys`:
        the lowest value and the span of every integer column, and the codes), when their
        integer columns' spans multiply to less than 2**62 (2**53 before a last column of
        floats) and the rows are in key order (:meth:`replace` keeps them so); None
        otherwise.  A key is then found by one binary search, with no trie of the
        overrides built for each tick."""
        got = self._memo("over-codes")
        if got is None:
            got = (False,)
            coded = row_keys(self.over.cols)
            if coded is not None and bool(np.all(coded[2][1:] > coded[2][:-1])):
                got = (True, *coded)
            self._remember("over-codes", got)
        return None if not got[0] else (got[1], got[2], got[3])

    def build_index(self) -> None:
        """Sort every column of the base now, and build the whole-key code of a key of
        several columns (otherwise each is built at its first use)."""
        for k in range(len(self.vars)):
            self.column_index(k)
        if len(self.vars) > 1:
            self._whole_key_index()
