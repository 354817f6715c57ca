"""Base rows a Spark-resident relation keeps in the driver from one tick to the next.

A tick of a view whose state is in Spark reads, for each changed row, the base rows
at its values (:mod:`incremental.reach`): one Spark job that filters the base and
brings those rows to the driver.  On a skewed graph most of them are a few hubs'
rows, and the same hubs are reached tick after tick, so each tick brought the same
hundreds of thousands of rows again.  :class:`HotRows` keeps them: every base row
whose column ``c`` holds one of ``cover[c]``.  A tick then asks Spark only for the
values not covered, and takes the rest from the driver.

A value is kept when a fetch brought at least :data:`LEAST` of its rows, heaviest
first, while the kept rows stay within a quarter of ``max_fetch_rows`` (the rows a
tick may bring to the driver).  The rows are the base's, which only a fold changes:
:meth:`HotRows.folded` writes the fold's changed keys into them.  The driver never
holds more of the relation than the bound, and a view loaded from disk starts with
none (they are learned again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faq import settings
from faq.kernel import KeyedTable, Table, match_keys
from incremental.tables import concat, drop_zeros
from semirings.local import LocalOps, distinct, member

__all__ = ["LEAST", "HotRows", "hot_budget", "union_rows", "with_kept"]

LEAST = 64
"""The fewest rows at a value for it to be kept (lighter values are fetched each time)."""


def hot_budget() -> int:
    """The most rows a relation keeps in the driver: a quarter of ``max_fetch_rows``."""
    return settings().max_fetch_rows // 4


@dataclass(frozen=True)
class HotRows:
    """Every base row of a relation whose column ``c`` holds one of ``cover[c]``.

    Attributes
    ----------
    rows : Table
        Those rows, each key once, with their base annotations.
    cover : tuple of ndarray
        Per key column, the values (sorted, distinct) whose rows are all in ``rows``.
    """

    rows: Table
    cover: tuple[np.ndarray, ...]
    # the keyed table over the rows (per semiring), built on first use: the rows change
    # only when values are learned or a fold is written into them, so its tries serve
    # every tick in between
    _keyed: dict[Any, tuple[Table, KeyedTable]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def keyed(self, ops: LocalOps) -> KeyedTable:
        """The kept rows as a keyed table of ``ops``'s semiring, made once (its tries
        built once, at their first use, and kept with it)."""
        got = self._keyed.get(ops.semiring)
        if got is None or got[0] is not self.rows:  # made for these very rows
            got = self._keyed[ops.semiring] = (self.rows, KeyedTable.of(self.rows, ops))
        return got[1]

    def holds(self, t: Table) -> np.ndarray:
        """Whether each row of ``t`` (rows of the same relation) holds a covered value in
        its column: for a base row, whether it is among the kept rows."""
        return _holds(t, enumerate(self.cover))

    @classmethod
    def empty(cls, like: Table) -> HotRows:
        """No rows, nothing covered (columns typed as ``like``'s)."""
        none = np.flatnonzero(np.zeros(like.rows, dtype=bool))
        return cls(like.take(none), tuple(c[none] for c in like.cols))

    def split(self, asked: Mapping[int, np.ndarray]) -> tuple[dict[int, np.ndarray], Table]:
        """The values of ``asked`` (column -> values, sorted and distinct) not covered,
        which must be fetched, and the kept rows whose column holds a covered one."""
        ask: dict[int, np.ndarray] = {}
        covered: dict[int, np.ndarray] = {}
        for c, values in asked.items():
            inside = member(values, self.cover[c])
            if not inside.all():
                ask[c] = values[~inside]
            covered[c] = values[inside]
        return ask, self.rows.take(np.flatnonzero(_holds(self.rows, covered.items())))

    def at(self, keys: Sequence[np.ndarray]) -> Table:
        """The kept rows whose column ``c`` holds a value of ``keys[c]`` (sorted, distinct)
        for every ``c``."""
        hit = np.ones(self.rows.rows, dtype=bool)
        for c, values in enumerate(keys):
            hit &= member(self.rows.cols[c], values)
        return self.rows.take(np.flatnonzero(hit))

    def learned(self, fetched: Table, asked: Mapping[int, np.ndarray], budget: int) -> HotRows:
        """These rows and those of ``fetched`` at the values of ``asked`` (every base row
        whose column ``c`` holds one of ``asked[c]`` is in ``fetched``) that have at least
        :data:`LEAST` rows, heaviest first, while the kept rows stay within ``budget``."""
        room = budget - self.rows.rows
        if room < LEAST or not fetched.rows:
            return self
        heavy: list[tuple[int, int, object]] = []  # (rows, column, value)
        for c, values in asked.items():
            at, counts = np.unique(fetched.cols[c], return_counts=True)
            pick = (counts >= LEAST) & np.isin(at, values)
            heavy += [(int(n), c, v) for n, v in zip(counts[pick], at[pick], strict=True)]
        if not heavy:
            return self
        heavy.sort(key=lambda h: -h[0])
        chosen: dict[int, list[object]] = {}
        for n, c, v in heavy:
            if n > room:
                continue
            room -= n
            chosen.setdefault(c, []).append(v)
        if not chosen:
            return self
        cover = list(self.cover)
        hit = np.zeros(fetched.rows, dtype=bool)
        for c, vs in chosen.items():
            new = np.asarray(vs, dtype=fetched.cols[c].dtype)
            hit |= np.isin(fetched.cols[c], new)
            cover[c] = distinct(np.concatenate([cover[c], new]))
        add = fetched.take(np.flatnonzero(hit))
        if self.rows.rows:  # rows kept already (through another column) are kept once:
            # every base row holding a covered value is kept, and no other (no key match)
            add = add.take(np.flatnonzero(~_holds(add, enumerate(self.cover))))
        return HotRows(concat(self.rows, add), tuple(cover))

    def folded(self, over: Table, ops: LocalOps) -> HotRows:
        """The kept rows of the base that ``over`` (the annotation at each changed key,
        zero where it is gone) is written into: rows at changed keys replaced or
        dropped, and changed keys whose column holds a covered value added."""
        if not over.rows or not any(len(c) for c in self.cover):  # nothing kept
            return self
        kept = self.rows.take(np.flatnonzero(~match_keys(self.rows.cols, over.cols)[0]))
        now = drop_zeros(over, ops)
        hit = _holds(now, enumerate(self.cover))
        return HotRows(concat(kept, now.take(np.flatnonzero(hit))), self.cover)


def with_kept(fetched: Table, kept: Table, asked: Mapping[int, np.ndarray]) -> Table:
    """The rows of ``fetched`` (every base row whose column ``c`` holds one of ``asked[c]``,
    sorted and distinct) and those of ``kept`` (kept rows, from :meth:`HotRows.split`) not
    among them, each key once: a kept row is among them exactly when one of its columns
    holds an asked value, so no keys are matched (:func:`union_rows` matches them)."""
    if not kept.rows:
        return fetched
    if not fetched.rows:
        return kept
    return concat(fetched, kept.take(np.flatnonzero(~_holds(kept, asked.items()))))


def _holds(t: Table, values: Iterable[tuple[int, np.ndarray]]) -> np.ndarray:
    """Whether each row of ``t`` holds, in some column ``c``, one of the values paired with
    ``c`` (sorted, distinct)."""
    hit = np.zeros(t.rows, dtype=bool)
    for c, vs in values:
        if len(vs):
            hit |= member(t.cols[c], vs)
    return hit


def union_rows(a: Table, b: Table) -> Table:
    """The rows of ``a`` and those of ``b`` whose key is not ``a``'s (each key once)."""
    if not b.rows:
        return a
    if not a.rows:
        return b
    return concat(a, b.take(np.flatnonzero(~match_keys(b.cols, a.cols)[0])))
