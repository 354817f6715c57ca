"""How a :class:`faq.kernel.KeyedTable` changes: a change ⊕-ed in (:meth:`Changes.plus`), keys
replaced (:meth:`Changes.replace`), the log of overrides patched in key order, and folded
into the base past the ``log_rows`` setting (on a helper thread for integer annotations,
:mod:`faq.kernel.fold`).  A mixin of :class:`~faq.kernel.KeyedTable`, which holds the
reading side (lookups, the log's key codes, the correction)."""

from __future__ import annotations

from typing import Any

import numpy as np

import faq.kernel.table as tb
from faq.kernel.fold import Fold, begin, early, since
from faq.kernel.merge import match_keys, patched, plus_logged
from faq.kernel.table import Table, concat, sum_keeping_zeros
from faq.plan.settings import current
from semirings.local import sort_rows

__all__ = ["Changes"]

Coded = tuple[np.ndarray, np.ndarray]
"""Keys coded as the overrides are, and whether inside their spans (KeyedTable._coded)."""


class Changes:
    """The changing side of :class:`faq.kernel.KeyedTable` (its mixin: every method reads
    the keyed table's fields and its reading methods)."""

    def compacted(self) -> Any:
        """The same contents with the overrides folded into the base now (or ``self``)."""
        if self.over.rows == 0 or not self.vars:
            return self
        return type(self).of(self.table(), self.ops)

    def replace(self, new: Table, present: int | None = None) -> Any:
        """A keyed table whose annotation at each key of ``new`` (distinct keys) is ``new``'s
        (zero: removed), the others kept.  ``present``: how many keys of ``new`` the table
        holds now, when the caller has read them already (else they are searched for)."""
        new = tb.with_values(Table(self.vars, new.cols, new.values), self.ops)
        if new.rows == 0:
            return self
        return self._replaced(new, self.at(new.cols).rows if present is None else present)

    def _replaced(
        self,
        new: Table,
        present: int,
        known: tuple[np.ndarray, np.ndarray, Coded | None] | None = None,
    ) -> Any:
        """:meth:`replace` by ``new`` (distinct keys, annotations present, rows), of whose
        keys ``present`` are held now; ``known``: for each key of ``new``, its row in the
        overrides (-1: none) and the base's annotation (zero: none), and the keys'
        :meth:`_coded` (None: not computed), when the caller has searched for them
        already."""
        rows = self.rows - present + int(self.ops.nonzero(new.values).sum())
        if not self.vars:
            return type(self)(self.base, new, self.ops, rows)
        integer = np.dtype(self.ops.dtype).kind in "iu"
        coded = known[2] if known is not None else self._coded(new.cols) if self.over.rows else None
        stale, hit = np.zeros(self.over.rows, dtype=bool), None
        if self.over.rows and (self._over_codes() is not None or integer):
            hit = self._over_rows(new.cols, coded) if known is None else known[0]
            stale[hit[hit >= 0]] = True
        elif self.over.rows:
            stale, _ = match_keys(self.over.cols, new.cols)
        at_new = None if not integer else self._base_at(new.cols) if known is None else known[1]
        return self._settled(new, rows, *self._logged(new, stale, hit, at_new, coded))

    def _settled(
        self,
        new: Table,
        rows: int,
        over: Table,
        codes: tuple[list[int], list[int], np.ndarray] | None,
        before: np.ndarray | None,
    ) -> Any:
        """The keyed table whose log is ``over`` (``new`` just written into it; its codes
        and the base's annotations under it, where kept), of ``rows`` keys: folded into
        the base past the ``log_rows`` setting, or a fold begun or taken up."""
        st = current()
        limit = max(st.log_rows, st.log_fraction * self.base.rows)
        fold, declined = self.fold, False
        if fold is not None:  # a fold under way: these keys changed since it began
            fold = Fold(fold.job, (*fold.touched, new.cols))
            if fold.job.done() or over.rows > 4 * limit:  # done, or waited for
                merged = fold.job.result()
                if merged is not None:
                    b, index = merged
                    return type(self)(b, since(over, fold.touched), self.ops, rows, index)
                fold, declined = None, True  # the merge did not apply: fold at once
        if fold is None and over.rows > limit:
            fold = None if declined else begin(self.base, over, self.ops, self._index)
            if fold is None:  # not integers, or no trie to merge into: at once
                t = type(self)(self.base, over, self.ops, rows).table()
                return type(self)(t, tb.empty_table(self.vars, self.ops, t.cols), self.ops, rows)
        elif fold is None and not declined and early(over.rows, new.rows, limit, st.log_ticks):
            fold = begin(self.base, over, self.ops, self._index)  # None: the log stays
        if codes is not None:  # carried, so that no tick codes or searches the whole log
            self._remember("over-codes", (True, *codes), over)
        if before is not None:  # the base's annotations under the overrides (correction())
            self._remember("before", before, over)
        return type(self)(self.base, over, self.ops, rows, self._index, fold)

    def _logged(
        self,
        new: Table,
        stale: np.ndarray,
        hit: np.ndarray | None,
        at_new: np.ndarray | None,
        coded: Coded | None,
    ) -> tuple[Table, tuple[list[int], list[int], np.ndarray] | None, np.ndarray | None]:
        """The overrides with ``new`` written in (``stale``: the rows it replaces; ``hit``:
        their rows per key of ``new``, where searched), kept in key order where their keys
        are integers (the last column may be floats), with their codes where those are
        kept and the base's annotations under them (``at_new`` at ``new``'s keys, for
        integer annotations; ``coded``: the :meth:`_coded` of ``new``'s keys, None where
        they are not codable): patched in place (:meth:`_patch`) where that applies, else
        the kept rows and ``new`` concatenated and sorted (two sorted runs merged)."""
        patch = None if hit is None else self._patch(new, hit, at_new, coded)
        if patch is not None:
            return patch
        over, codes = new, None
        if self.over.rows:
            kept = self.over.take(np.flatnonzero(~stale))
            over = Table(self.vars, *tb.cat_rows(kept, new))
            if coded is not None:  # the codes carried: none computed over the log
                lows, spans, was = self._over_codes()  # type: ignore[misc]
                code, ok = coded
                if ok.all():
                    codes = (lows, spans, np.concatenate([was[~stale], code]))
        before = None if at_new is None else np.concatenate([self._before()[~stale], at_new])
        kinds = [c.dtype.kind for c in over.cols]
        if codes is not None or (all(k in "iu" for k in kinds[:-1]) and kinds[-1] in "iuf"):
            order = sort_rows(over.cols) if codes is None else np.argsort(codes[2], kind="stable")
            over = over.take(order)
            codes = None if codes is None else (codes[0], codes[1], codes[2][order])
            before = None if before is None else before[order]
        return over, codes, before

    def _patch(
        self, new: Table, hit: np.ndarray, at_new: np.ndarray | None, coded: Coded | None
    ) -> tuple[Table, tuple[list[int], list[int], np.ndarray], np.ndarray | None] | None:
        """The overrides, codes (and base values: ``at_new``) with ``new`` (its keys'
        :meth:`_coded`: ``coded``) patched in; None where they cannot be."""
        if not self.over.rows or coded is None:
            return None
        lows, spans, was = self._over_codes()  # type: ignore[misc]
        code, ok = coded
        old = [*self.over.cols, self.over.values]
        add = [*new.cols, new.values]
        if at_new is not None:
            old.append(self._before())
            add.append(at_new)
        if not ok.all() or any(a.dtype != b.dtype for a, b in zip(old, add, strict=True)):
            return None
        codes, out = patched(was, old, hit, code, add)  # type: ignore[arg-type]
        k = len(self.vars)
        over = Table(self.vars, tuple(out[:k]), out[k])
        return over, (lows, spans, codes), out[k + 1] if at_new is not None else None

    def plus(self, delta: Table) -> tuple[Any, Table, Table]:
        """``self ⊕ delta`` and, at ``delta``'s keys, the rows before and after.

        Returns the new keyed table, the old rows at the keys (no zeros) and the new
        annotation of every key of ``delta`` (zero where ⊕ cancelled it).
        """
        if not self.vars:
            return self._plus_scalar(delta)
        delta = tb.consolidated(delta, self.ops)
        if delta.rows == 0:
            empty = tb.empty_table(self.vars, self.ops, delta.cols)
            return self, empty, empty
        if self.vars and np.dtype(self.ops.dtype).kind in "iu":
            return self._plus_integer(delta)
        old = self.at(delta.cols)
        delta = tb.with_values(Table(self.vars, delta.cols, delta.values), self.ops)
        if old.rows == 0:  # new keys only: the sums are the change
            assert delta.values is not None
            summed = Table(self.vars, delta.cols, np.asarray(delta.values, dtype=self.ops.dtype))
        else:
            both = concat([tb.with_values(old, self.ops), delta], self.ops)
            summed = sum_keeping_zeros(Table(self.vars, both.cols, both.values, False), self.ops)
        return self._replaced(summed, old.rows), old, summed

    def _plus_scalar(self, delta: Table) -> tuple[Any, Table, Table]:
        """:meth:`plus` for a relation without key columns (a scalar, such as a count's
        output), by :func:`faq.kernel.table.scalar_plus` (no table grouped)."""
        old = self.table()
        summed = tb.scalar_plus(old, delta, self.ops)
        if summed is None:  # the change cancels: nothing moves
            empty = tb.empty_table((), self.ops)
            return self, empty, empty
        rows = int(self.ops.nonzero(summed.values).sum())
        return type(self)(self.base, summed, self.ops, rows), old, summed

    def _plus_integer(self, delta: Table) -> tuple[Any, Table, Table]:
        """:meth:`plus` of a consolidated ``delta`` for integer annotations: each key searched
        once in the base's trie and once in the overrides, and the searches reused by
        :meth:`_replaced` (what :meth:`at` and :meth:`_replaced` would each search again)."""
        delta = tb.with_values(Table(self.vars, delta.cols, delta.values), self.ops)
        assert delta.values is not None
        fast = self._plus_logged(delta)
        if fast is not None:
            return fast
        base_at, in_over, current, present, coded = self._current(delta.cols)
        old = Table(self.vars, tuple(c[present] for c in delta.cols), current[present])
        if len(present):  # current ⊕ change per key: pairs summed (overflow checked)
            two = np.zeros(delta.rows, dtype=np.int64)
            two[present] = 1
            starts = np.concatenate([[0], np.cumsum(1 + two)[:-1]]).astype(np.int64)
            both = np.empty(delta.rows + len(present), dtype=self.ops.dtype)
            both[starts[present]] = current[present]
            both[starts + two] = delta.values
            sums = np.asarray(self.ops.reduceat(both, starts), dtype=self.ops.dtype)
        else:  # new keys only: the sums are the change
            sums = np.asarray(delta.values, dtype=self.ops.dtype)
        summed = Table(self.vars, delta.cols, sums)
        return self._replaced(summed, old.rows, (in_over, base_at, coded)), old, summed

    def _plus_logged(self, delta: Table) -> tuple[Any, Table, Table] | None:
        """:meth:`_plus_integer` in one compiled call, :func:`faq.kernel.merge.plus_logged`,
        where the semiring declares integer-ring sums on int64 and the log, over a base,
        is kept coded; None elsewhere."""
        lib = self.ops.semiring.library
        if lib is None or not (lib.sums and lib.int64) or not (self.over.rows and self.base.rows):
            return None
        coded = self._over_codes()
        if coded is None or len(coded[0]) != len(self.vars):
            return None
        lows, spans, codes = coded
        log = (*self.over.cols, self.over.values, self._before())
        tr = self.trie(tuple(range(len(self.vars))))
        got = plus_logged(tr, delta.cols, delta.values, lows, spans, codes, log)  # type: ignore[arg-type]
        if got is None:
            return None
        k = len(self.vars)
        old = Table(self.vars, tuple(c[got.present] for c in delta.cols), got.before)
        summed = Table(self.vars, delta.cols, got.sums)
        over = Table(self.vars, tuple(got.log[:k]), got.log[k])
        rows = self.rows - len(got.present) + got.nonzero
        kept = (lows, spans, got.codes)
        return self._settled(summed, rows, over, kept, got.log[k + 1]), old, summed
