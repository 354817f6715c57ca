"""Keys in sorted rows and tries: finding whole keys, matching rows, merging rows in.

What :class:`faq.kernel.keyed.KeyedTable` reads its base, its overrides and its folds
with, and what the incremental states compare tables by:

* :func:`mask_at`: which rows hold one of given values in given columns;
* :func:`search_trie`: each whole key's row in a trie (binary searches per level);
* :func:`match_keys`: which rows of one table have their whole key among another's;
* :func:`merge_into`: a trie with rows dropped and sorted rows added, by merging into its
  sorted rows (no sort of the relation: a keyed table's fold);
* :func:`merged_tries`: every trie built so far with a log's rows merged in (a fold);
* :func:`patched`: rows in code order with some rows overwritten and others inserted (a
  keyed table's log after a change, one copy of each column, no sort);
* :func:`plus_logged`: a change added into a keyed table of int64 keys and counts (its
  base's annotations and its log's read, the sums written into the log), one call;
* :func:`changed_rows`: the keys whose annotation differs between two tables;
* :func:`whole_key_index`, :func:`whole_key_rows`: rows found by a leading key through one
  sorted int64 code of the whole key (a keyed table's reads of a hub's rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

import faq.kernel.compiled as compiled
from faq.kernel.compiled_keyed import ADDED, plus_log, plus_log_held
from faq.kernel.compiled_merge import merge_two, patch_rows
from faq.kernel.table import Table, ranges
from faq.kernel.trie import NUMBA, Trie, build_trie, trie_rows
from semirings.local import (
    LocalOps,
    complex_codes,
    distinct,
    equal,
    group_starts,
    key_codes,
    row_codes,
    sort_rows,
)

__all__ = [
    "WholeKeyIndex",
    "changed_rows",
    "children_rows",
    "mask_at",
    "match_keys",
    "meeting",
    "merge_into",
    "merged_tries",
    "patched",
    "plus_logged",
    "prefix_runs",
    "search_trie",
    "whole_key_index",
    "whole_key_rows",
]


def meeting(t: Table, cond: Mapping[int, np.ndarray], in_order: bool) -> np.ndarray:
    """Positions of the rows of ``t`` meeting ``cond`` (column -> allowed values): runs
    of the first column's values by binary search where the rows are in key order
    (``in_order``) and ``cond`` names that column, else a mask of every row."""
    first = cond.get(0)
    if first is None or not in_order:
        return np.flatnonzero(mask_at(t, cond))
    col = t.cols[0]
    v = np.asarray(first)
    lo = np.searchsorted(col, v, side="left")
    pos = ranges(lo, np.searchsorted(col, v, side="right") - lo)
    for k, values in cond.items():
        if k and len(pos):
            pos = pos[np.isin(t.cols[k][pos], values)]
    return pos


def mask_at(t: Table, conds: Mapping[int, np.ndarray]) -> np.ndarray:
    """The rows of ``t`` whose column ``k`` holds one of ``conds[k]``, for every ``k``."""
    mask = np.ones(t.rows, dtype=bool)
    for k, values in conds.items():
        mask &= np.isin(t.cols[k], values)
    return mask


def search_trie(tr: Trie, keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``keys`` (one array per level of ``tr``, or fewer: the first
    levels): whether ``tr`` holds it, and its node at the last level searched (its row,
    when every level is), -1 where absent.  Integer keys descend in one compiled call
    that finds the first level's value by the trie's dense index
    (:meth:`faq.kernel.Trie.first_index`), one load where a binary search costs a cache
    miss a step in a large trie."""
    n = len(keys[0])
    d = len(keys)
    if NUMBA and n and all(c.dtype == _I64 for c in (*keys, *tr.vals[:d])):
        cols = tuple(np.ascontiguousarray(c) for c in keys)
        find = compiled.sized(n, compiled.descend, compiled.descend_held)
        at = find(tr.vals[:d], tr.starts[:d], cols, *tr.first_index())
        return at >= 0, at
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


def children_rows(
    tr: Trie, keys: Sequence[np.ndarray]
) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
    """The rows of ``tr`` whose leading columns are one of ``keys`` (distinct rows, one
    column fewer than ``tr`` has levels): each key's node found by :func:`search_trie`,
    then its children read as one run (no sort, no scan).  Their columns and annotations
    (None where ``tr`` has none)."""
    found, node = search_trie(tr, keys)
    d, at = len(keys), node[found]
    lo = tr.starts[d][at]
    count = tr.starts[d][at + 1] - lo
    leaves = ranges(lo, count)
    cols = tuple(np.repeat(np.asarray(c)[found], count) for c in keys)
    return (*cols, tr.vals[d][leaves]), None if tr.values is None else tr.values[leaves]


def prefix_runs(
    coded: tuple[list[int], list[int], np.ndarray], keys: Sequence[np.ndarray]
) -> np.ndarray | None:
    """Sorted positions of the rows whose leading columns are one of ``keys`` (integers, one
    column short of the rows' key), among rows in the order of their codes ``coded`` (the
    lowest values, spans and sorted codes of :func:`semirings.local.row_keys`): a prefix's
    rows are one run of codes, found by two binary searches.  None for other keys."""
    lows, spans, codes = coded
    k = len(keys)
    if any(np.asarray(c).dtype.kind not in "iu" for c in keys) or len(lows) < k:
        return None
    if len(lows) > k:  # integer codes: a prefix's run spans every value of the last column
        code, ok = key_codes(keys, lows[:k], spans[:k])
        lo = np.searchsorted(codes, code * spans[k])
        hi = np.searchsorted(codes, (code + 1) * spans[k])
    else:  # complex codes (a last column of floats): the prefix is the real part
        code, ok = key_codes(keys, lows, spans)
        edge = np.full(len(code), np.inf)
        lo = np.searchsorted(codes, complex_codes(code, -edge))
        hi = np.searchsorted(codes, complex_codes(code, edge), side="right")
    return np.unique(ranges(lo[ok], (hi - lo)[ok]))


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
    coded = _coded_match(cols, keys)
    if coded is not None:
        return coded
    both = [np.concatenate([a, b]) for a, b in zip(cols, keys, strict=True)]
    perm, starts = group_starts(both)
    group = np.empty(len(perm), dtype=np.int64)
    group[perm] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(perm))))
    where = np.full(len(starts), -1, dtype=np.int64)
    where[group[n:]] = np.arange(m)
    at = where[group[:n]]
    return at >= 0, at


def _coded_match(
    cols: Sequence[np.ndarray], keys: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`match_keys` for integer keys that fit one 64-bit code over the spans of
    ``keys``: ``keys``' codes sorted, each row of ``cols`` searched among them (no sort of
    ``cols``, which is often far longer).  None where the keys do not code so."""
    if any(c.dtype.kind not in "iu" for c in (*cols, *keys)):
        return None
    coded = row_codes(keys)
    if coded is None:
        return None
    lows, spans, kcode = coded
    code, ok = key_codes(cols, lows, spans)
    order = np.argsort(kcode, kind="stable")
    sorted_codes = kcode[order]
    at = np.searchsorted(sorted_codes, code)
    at[at == len(sorted_codes)] = 0
    found = ok & (sorted_codes[at] == code)
    return found, np.where(found, order[at], -1)


def _two_levels(tr: Trie, add: list[np.ndarray], values: np.ndarray) -> bool:
    """Whether :func:`merge_into` runs compiled: two levels, int64 keys and annotations."""
    arrays = (*tr.vals, tr.values, *add, values)
    return NUMBA and tr.depth == 2 and all(a is not None and a.dtype == np.int64 for a in arrays)


def _merge_two(tr: Trie, drop: np.ndarray, add: list[np.ndarray], values: np.ndarray) -> Trie:
    """:func:`merge_into` of a two-level int64 trie, compiled and without the GIL
    (:func:`faq.kernel.compiled_merge.merge_two`): a fold holds the GIL only between its
    compiled passes."""
    if len(add[0]):
        order = sort_rows(add)
        add, values = [c[order] for c in add], values[order]
    v0, s1, v1, out = merge_two(
        tr.vals[0],
        tr.starts[1],
        tr.vals[1],
        tr.values,
        np.ascontiguousarray(drop, dtype=np.int64),
        *(np.ascontiguousarray(c) for c in add),
        np.ascontiguousarray(values),
    )
    s0 = np.array([0, len(v0)], dtype=np.int64)
    return Trie(tr.order, (v0, v1), (s0, s1), out, len(out))


def merge_into(
    tr: Trie, drop: np.ndarray, add: list[np.ndarray], values: np.ndarray
) -> Trie | None:
    """``tr`` without its rows ``drop``, with the rows ``add`` (keys ``tr`` does not hold
    once ``drop`` is gone; columns in the trie's order) annotated ``values``: one merge of
    sorted rows.  None when the keys do not fit one 64-bit sort key."""
    assert tr.values is not None
    if _two_levels(tr, add, values):
        return _merge_two(tr, drop, add, values)
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


WholeKeyIndex = tuple[list[np.ndarray], list[int], np.ndarray, np.ndarray]
"""Per column its sorted distinct values, the multipliers that make a row's ranks one int64
code, the rows' order by code, and the sorted codes (:func:`whole_key_index`)."""


def whole_key_index(cols: Sequence[np.ndarray]) -> WholeKeyIndex | None:
    """Each row of ``cols`` as one int64 code of its columns' ranks, sorted, with what finds
    a key's code (:data:`WholeKeyIndex`); None when the codes would overflow or a column
    does not sort."""
    try:
        parts = [np.unique(c, return_inverse=True) for c in cols]
    except TypeError:
        return None
    sizes = [max(len(u), 1) for u, _ in parts]
    if not parts or float(np.prod(np.asarray(sizes, dtype=np.float64))) >= 2.0**62:
        return None
    mults = [int(np.prod(sizes[i + 1 :], dtype=np.int64)) for i in range(len(sizes))]
    code = np.zeros(len(cols[0]), dtype=np.int64)
    for (_, inv), m in zip(parts, mults, strict=True):
        code += inv.reshape(-1).astype(np.int64) * m
    order = np.argsort(code, kind="stable")
    return [u for u, _ in parts], mults, order, code[order]


def whole_key_rows(idx: WholeKeyIndex, keys: Sequence[np.ndarray]) -> np.ndarray | None:
    """Sorted positions of the rows (of the columns ``idx`` indexes) whose leading columns
    (all of them, or as many as ``keys`` has) are one of ``keys``; None when ``keys`` are
    of another type than the columns."""
    uniq, mults, order, codes = idx
    uniq, mults = uniq[: len(keys)], mults[: len(keys)]
    n = len(keys[0]) if keys else 0
    code = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    try:
        for u, m, q in zip(uniq, mults, keys, strict=True):
            r = np.searchsorted(u, q) if len(u) else np.zeros(n, dtype=np.int64)
            inside = r < len(u)
            r[~inside] = 0
            if len(u):
                ok &= inside & np.asarray(u[r] == q, dtype=bool)
            else:
                ok[:] = False
            code += r.astype(np.int64) * m
    except (TypeError, ValueError):  # keys of another type than the columns
        return None
    c = distinct(code[ok])
    lo = np.searchsorted(codes, c, side="left")
    hi = np.searchsorted(codes, c + mults[-1] - 1, side="right") if mults else lo
    return np.sort(order[ranges(lo, hi - lo)])


def patched(
    codes: np.ndarray,
    arrays: Sequence[np.ndarray],
    hit: np.ndarray,
    new_codes: np.ndarray,
    new_arrays: Sequence[np.ndarray],
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Rows sorted by their distinct ``codes`` (``arrays``: a column each) with new rows
    merged in: row ``i`` of ``new_arrays`` (distinct ``new_codes``) overwrites old row
    ``hit[i]``, or is inserted at its code's place where ``hit[i]`` is -1.  Returns the
    codes and columns after, still sorted: what concatenating the kept old rows and the
    new ones and sorting them by code gives, with one copy of each column and no sort
    of the old rows (the new rows are sorted, a few).

    >>> codes, cols = patched(np.array([2, 5]), [np.array([20, 50])], np.array([1, -1]),
    ...                       np.array([5, 3]), [np.array([55, 33])])
    >>> codes.tolist(), cols[0].tolist()
    ([2, 3, 5], [20, 33, 55])
    """
    by = np.argsort(new_codes, kind="stable")
    if NUMBA and all(a.dtype == _I64 for a in (codes, new_codes, hit, *arrays, *new_arrays)):
        c = np.ascontiguousarray
        out_codes, out2 = patch_rows(
            c(codes), tuple(c(a) for a in arrays), c(hit), c(new_codes),
            tuple(c(b) for b in new_arrays), by,
        )  # fmt: skip
        return out_codes, list(out2)
    h = hit[by]
    miss = h < 0
    at = np.searchsorted(codes, new_codes[by][miss])  # where each inserted row goes
    old = h[~miss]
    moved = old + np.searchsorted(at, old, side="right")  # a hit row, after the inserts
    out_codes = _insert(codes, at, new_codes[by][miss])
    out = []
    for a, b in zip(arrays, new_arrays, strict=True):
        b = b[by]
        col = _insert(a, at, b[miss])
        col[moved] = b[~miss]
        out.append(col)
    return out_codes, out


@dataclass(frozen=True)
class Added:
    """What :func:`plus_logged` gives: the positions of the change's keys present before
    it and their annotations then, every changed key's annotation after it, how many of
    those are nonzero, and the log after it (its codes, and its arrays as rows of one
    2-d array)."""

    present: np.ndarray
    before: np.ndarray
    sums: np.ndarray
    nonzero: int
    codes: np.ndarray
    log: np.ndarray


def plus_logged(
    tr: Trie,
    keys: Sequence[np.ndarray],
    values: np.ndarray,
    lows: Sequence[int],
    spans: Sequence[int],
    codes: np.ndarray,
    log: Sequence[np.ndarray],
) -> Added | None:
    """The change ``keys``/``values`` (distinct keys, integer-ring annotations) added into
    a keyed table whose base is the trie ``tr`` (every level) and whose log, sorted by
    its distinct ``codes`` (:func:`semirings.local.row_codes` with ``lows`` and
    ``spans``), has the arrays ``log`` (key columns, annotations, the base's annotations
    under them): :func:`faq.kernel.compiled_keyed.plus_log`.  None without numba, where
    an array is not int64, a key lies outside the codes' spans, or a sum leaves 64 bits
    (the numpy path then runs, and raises the overflow)."""
    if not NUMBA or tr.seek() is None or len(tr.vals) != len(keys):
        return None
    arrays = (*keys, values, codes, *log)
    if any(a.dtype != _I64 for a in arrays):
        return None
    c = np.ascontiguousarray
    add = compiled.sized(len(values), plus_log, plus_log_held)
    status, present, before, sums, nonzero, out_codes, out = add(
        tr.vals, tr.starts, *tr.first_index(), tr.values, tuple(c(k) for k in keys), c(values),
        np.array(lows, dtype=_I64), np.array(spans, dtype=_I64), c(codes),
        tuple(c(a) for a in log),
    )  # fmt: skip
    if status != ADDED:
        return None
    return Added(present, before, sums, int(nonzero), out_codes, out)


def _insert(a: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.insert(a, at, values)`` for sorted ``at``: a few values by copying the runs
    between them (``np.insert`` builds a mask of the whole array for any array of
    positions, 3× the time on a 45,000-row log)."""
    if len(at) > 16:
        return np.insert(a, at, values)
    out = np.empty(len(a) + len(at), dtype=a.dtype)
    prev = 0
    for k, p in enumerate(at.tolist()):
        out[prev + k : p + k] = a[prev:p]
        out[p + k] = values[k]
        prev = p
    out[prev + len(at) :] = a[prev:]
    return out


_I64 = np.dtype(np.int64)
