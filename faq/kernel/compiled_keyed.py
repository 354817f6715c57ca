"""A change added into a keyed table of int64 keys and counts, in one compiled call.

:meth:`faq.kernel.KeyedTable.plus` of a change to a relation an incremental view keeps
reads each changed key's annotation in the base (a descent of its trie) and in the log
of overrides (a binary search of the log's key codes), adds the change, and writes the
sums into the log, which stays in key order (:func:`faq.kernel.merge.patched`).  On
numpy that is some forty array operations on arrays as long as the change, about 0.1 ms
for one edge, a third of a one-edge tick.  :func:`plus_log` does all of it in one pass
for the integer ring (keys, annotations and the log all int64), and says where it
cannot (a sum past 64 bits, a key outside the spans the log's codes cover) so that the
numpy path, which raises or re-codes, runs instead.

Compiled with :func:`faq.kernel.numba_jit.jit` (numba's disk cache).
"""

from __future__ import annotations

import numpy as np

from faq.kernel.compiled_merge import patch_rows
from faq.kernel.compiled_seeded import descend
from faq.kernel.numba_jit import jit, lower_bound

__all__ = ["ADDED", "OUTSIDE", "OVERFLOW", "plus_log", "plus_log_held"]

ADDED = 0
""":func:`plus_log` added the change."""
OVERFLOW = 1
"""A key's sum leaves 64 bits: nothing was written (the numpy path raises)."""
OUTSIDE = 2
"""A key lies outside the spans of the log's codes: nothing was written."""
_MOST = np.iinfo(np.int64).max
_LEAST = np.iinfo(np.int64).min


@jit(nogil=True)
def plus_log(
    vals, starts, low, at, values, keys, dvalues, lows, spans, codes, arrays
):  # pragma: no cover - compiled
    """The change ``keys``/``dvalues`` (distinct keys, a column each) added into a keyed
    table whose base is the trie ``vals``/``starts`` (every level, the first one's
    dense index ``low``/``at``: :meth:`faq.kernel.Trie.first_index`) with leaf
    annotations ``values``, and whose log is sorted by the distinct ``codes`` (each key
    coded as :func:`semirings.local.key_codes` codes it with ``lows`` and ``spans``),
    with ``arrays`` the log's key columns, annotations and the base's annotations
    under them.

    Returns a status (:data:`ADDED`, :data:`OVERFLOW`, :data:`OUTSIDE`), the positions
    of the change's keys present before it (in the base or the log, nonzero) and their
    annotations then, the annotation of every changed key after it, how many of those
    are nonzero, and the log after: its codes and its arrays (a row of a 2-d array
    each, in the order of ``arrays``), the changed keys written over their rows or
    inserted in code order (:func:`faq.kernel.compiled_merge.patch_rows`)."""
    n = len(dvalues)
    k = len(keys)
    nc = len(codes)
    node = descend(vals, starts, keys, low, at)
    code = np.empty(n, np.int64)
    hit = np.full(n, -1, np.int64)
    add = np.empty((k + 2, n), np.int64)  # the rows written: keys, sums, base's annotations
    present = np.empty(n, np.int64)
    before = np.empty(n, np.int64)
    ovalues = arrays[k]
    m = 0
    nonzero = 0
    for r in range(n):
        c = 0
        for j in range(k):
            off = keys[j][r] - lows[j]
            if off < 0 or off >= spans[j]:
                return OUTSIDE, present[:0], before[:0], add[k], 0, codes, add[:, :0]
            c = c * spans[j] + off
        code[r] = c
        p = lower_bound(codes, 0, nc, c)
        if p < nc and codes[p] == c:
            hit[r] = p
        b = values[node[r]] if node[r] >= 0 else 0
        cur = ovalues[hit[r]] if hit[r] >= 0 else b
        d = dvalues[r]
        s = d
        if cur != 0 and (node[r] >= 0 or hit[r] >= 0):
            # tested before adding: LLVM may assume a signed sum does not wrap
            if (d > 0 and cur > _MOST - d) or (d < 0 and cur < _LEAST - d):
                return OVERFLOW, present[:0], before[:0], add[k], 0, codes, add[:, :0]
            s = cur + d
            present[m] = r
            before[m] = cur
            m += 1
        for j in range(k):
            add[j, r] = keys[j][r]
        add[k, r] = s
        add[k + 1, r] = b
        if s != 0:
            nonzero += 1
    by = np.argsort(code)
    out_codes, out = patch_rows(codes, arrays, hit, code, add, by)
    return ADDED, present[:m], before[:m], add[k], nonzero, out_codes, out


@jit()
def plus_log_held(
    vals, starts, low, at, values, keys, dvalues, lows, spans, codes, arrays
):  # pragma: no cover - compiled
    """:func:`plus_log`, the GIL kept while it runs."""
    return plus_log(vals, starts, low, at, values, keys, dvalues, lows, spans, codes, arrays)
