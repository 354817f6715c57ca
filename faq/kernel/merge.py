"""Keys in sorted rows and tries: finding whole keys, matching rows, merging rows in.

What :class:`faq.kernel.keyed.KeyedTable` reads its base, its overrides and its folds
with, and what the incremental states compare tables by:

* :func:`mask_at`: which rows hold one of given values in given columns;
* :func:`search_trie`: each whole key's row in a trie (binary searches per level);
* :func:`match_keys`: which rows of one table have their whole key among another's;
* :func:`merge_into`: a trie with rows dropped and sorted rows added, by merging into its
  sorted rows (no sort of the relation: a keyed table's fold);
* :func:`merged_tries`: every trie built so far with a log's rows merged in (a fold);
* :func:`changed_rows`: the keys whose annotation differs between two tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from faq.kernel.table import Table
from faq.kernel.trie import Trie, build_trie, trie_rows
from semirings.local import LocalOps, equal, group_starts, sort_rows

__all__ = ["changed_rows", "mask_at", "match_keys", "merge_into", "merged_tries", "search_trie"]


def mask_at(t: Table, conds: Mapping[int, np.ndarray]) -> np.ndarray:
    """The rows of ``t`` whose column ``k`` holds one of ``conds[k]``, for every ``k``."""
    mask = np.ones(t.rows, dtype=bool)
    for k, values in conds.items():
        mask &= np.isin(t.cols[k], values)
    return mask


def search_trie(tr: Trie, keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``keys`` (one array per level of ``tr``): whether ``tr`` holds it,
    and its row (deepest node) there, -1 where absent."""
    n = len(keys[0])
    node = np.zeros(n, dtype=np.int64)
    alive = np.arange(n, dtype=np.int64)
    for d, col in enumerate(keys):
        got = tr.lookup(d, node, np.ascontiguousarray(col[alive]))
        ok = got >= 0
        alive, node = alive[ok], got[ok]
    found = np.zeros(n, dtype=bool)
    found[alive] = True
    at = np.full(n, -1, dtype=np.int64)
    at[alive] = node
    return found, at


def match_keys(
    cols: Sequence[np.ndarray], keys: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``cols``: whether its whole key is a row of ``keys``, and which.

    Returns a bool array over the rows of ``cols`` and, for the rows found, the
    position in ``keys`` (-1 elsewhere; ``keys`` has distinct rows).
    """
    n = len(cols[0]) if cols else 0
    m = len(keys[0]) if keys else 0
    if not cols:
        found = np.full(n, m > 0)
        return found, np.where(found, 0, -1)
    if n == 0 or m == 0:
        return np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64)
    both = [np.concatenate([a, b]) for a, b in zip(cols, keys, strict=True)]
    perm, starts = group_starts(both)
    group = np.empty(len(perm), dtype=np.int64)
    group[perm] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(perm))))
    where = np.full(len(starts), -1, dtype=np.int64)
    where[group[n:]] = np.arange(m)
    at = where[group[:n]]
    return at >= 0, at


def merge_into(
    tr: Trie, drop: np.ndarray, add: list[np.ndarray], values: np.ndarray
) -> Trie | None:
    """``tr`` without its rows ``drop``, with the rows ``add`` (keys ``tr`` does not hold
    once ``drop`` is gone; columns in the trie's order) annotated ``values``: one merge of
    sorted rows.  None when the keys do not fit one 64-bit sort key."""
    assert tr.values is not None
    cols = trie_rows(tr)
    keep = np.ones(tr.rows, dtype=bool)
    keep[drop] = False
    cols = [c[keep] for c in cols]
    kept_values = tr.values[keep]
    if len(add[0]):
        order = sort_rows(add)
        add = [c[order] for c in add]
        values = values[order]
        key, new_key = _sort_keys(cols, add)
        if key is None or new_key is None:
            return None
        at = np.searchsorted(key, new_key)
        cols = [np.insert(c, at, a) for c, a in zip(cols, add, strict=True)]
        kept_values = np.insert(kept_values, at, values)
    names = tr.order
    return build_trie(Table(names, tuple(cols), kept_values), names, presorted=True)


def merged_tries(
    built: Mapping[tuple[int, ...], Trie], over: Table, ops: LocalOps
) -> dict[tuple[int, ...], Trie] | None:
    """Each trie of ``built`` (by its column order) with the rows of ``over`` (whole keys by
    position, annotations present; zero: removed) merged in by :func:`merge_into`; None
    where a merge does not apply (keys too wide for one 64-bit sort key)."""
    assert over.values is not None
    alive = np.flatnonzero(ops.nonzero(over.values))
    tries: dict[tuple[int, ...], Trie] = {}
    for perm, tr in built.items():
        keys = [over.cols[k] for k in perm]
        found, at = search_trie(tr, keys)
        t = merge_into(tr, at[found], [c[alive] for c in keys], over.values[alive])
        if t is None:
            return None
        tries[perm] = t
    return tries


def _sort_keys(
    a: list[np.ndarray], b: list[np.ndarray]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """One int64 key per row of ``a`` and of ``b`` ordered as the rows are
    (lexicographically), or None when the columns' ranges do not fit 2**62."""
    if not all(x.dtype.kind in "iu" for x in (*a, *b)):
        return None, None
    lows, spans, total = [], [], 1
    for x, y in zip(a, b, strict=True):
        lo = min(int(x.min()) if len(x) else 0, int(y.min()))
        hi = max(int(x.max()) if len(x) else 0, int(y.max()))
        lows.append(lo)
        spans.append(hi - lo + 1)
        total *= hi - lo + 1
    if total >= 2**62:
        return None, None
    out = []
    for cols in (a, b):
        key = np.zeros(len(cols[0]), dtype=np.int64)
        for c, lo, span in zip(cols, lows, spans, strict=True):
            key = key * span + (c.astype(np.int64) - lo)
        out.append(key)
    return out[0], out[1]


def changed_rows(old: Table, new: Table, ops: LocalOps) -> tuple[Table, Table]:
    """Of the keys of ``new`` (zeros included): those whose annotation differs from ``old``'s.

    Returns the new rows and the old annotations at the same keys (zero when absent).
    """
    assert new.values is not None
    zero = np.asarray([ops.semiring.zero], dtype=ops.dtype)
    if not new.vars:  # a scalar: at most one row, no key to match (no row: zero)
        before = old.values[:1] if old.values is not None and old.rows else zero
        after = new.values[:1] if new.rows else zero
        if equal(before[:1], after).all():
            empty = new.take(np.empty(0, dtype=np.int64))
            return empty, empty
        return Table((), (), after.copy()), Table((), (), before[:1].copy())
    found, at = match_keys(new.cols, old.cols)
    before = np.repeat(zero, new.rows) if new.rows else zero[:0]
    if old.values is not None and found.any():
        before = before.copy()
        before[found] = old.values[at[found]]
    diff = np.flatnonzero(~equal(before, new.values))
    picked = new.take(diff)
    return picked, Table(new.vars, picked.cols, before[diff])
