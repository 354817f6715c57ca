"""The compiled merge of a fold (:func:`faq.kernel.merge.merge_into`), without the GIL.

A fold runs on a helper thread while ticks go on (:mod:`faq.kernel.fold`).  Its numpy
passes over the base (a boolean mask, ``np.insert``, ``np.repeat``, the boundaries of a
trie's levels) hold the GIL for milliseconds each on a relation of a million rows
(``np.repeat`` throughout), and every other thread of the process, a tick's among them,
stalls meanwhile.  Here the
merge of a two-level trie of int64 keys and annotations (a binary relation: an edge
list) is one compiled pass that releases the GIL (:func:`merge_two`): the trie's rows
without the ones dropped, with sorted new rows merged in, and the levels of the merged
trie built on the way.  :func:`spread_into` spells a trie level's values out over the
rows under them without the GIL too (:func:`faq.kernel.rows.spread`, which the fold's
``trie_rows`` and the library runners' read-backs use).  :func:`patch_rows` writes a
change into a keyed table's log (:func:`faq.kernel.merge.patched`) in one pass.

Compiled with :func:`faq.kernel.numba_jit.jit` (numba's disk cache).
"""

from __future__ import annotations

import numpy as np

from faq.kernel.numba_jit import jit, lower_bound

__all__ = ["merge_two", "patch_rows", "spread_into"]


@jit(nogil=True)
def merge_two(vals0, starts1, vals1, values, drop, add0, add1, addv):  # pragma: no cover
    """The trie of the rows of a two-level trie (level values ``vals0``, ``vals1``, the
    children of first-level node ``p`` at ``starts1[p]:starts1[p + 1]``, annotations
    ``values``), less the rows at the positions ``drop`` (any order), plus the rows
    ``(add0, add1)`` annotated ``addv`` (sorted, none of them a key left after the drop):
    its first level's values, the offsets of its children, its second level's values
    and its annotations."""
    n = len(vals1)
    gone = np.zeros(n, np.bool_)
    for i in range(len(drop)):
        gone[drop[i]] = True
    total = n - len(drop) + len(add0)
    col0 = np.empty(total, np.int64)
    col1 = np.empty(total, np.int64)
    out_values = np.empty(total, np.int64)
    m = 0  # rows written
    j = 0  # the next new row
    for p in range(len(vals0)):
        u = vals0[p]
        for r in range(starts1[p], starts1[p + 1]):
            if gone[r]:
                continue
            v = vals1[r]
            while j < len(add0) and (add0[j] < u or (add0[j] == u and add1[j] < v)):
                col0[m] = add0[j]
                col1[m] = add1[j]
                out_values[m] = addv[j]
                m += 1
                j += 1
            col0[m] = u
            col1[m] = v
            out_values[m] = values[r]
            m += 1
    while j < len(add0):
        col0[m] = add0[j]
        col1[m] = add1[j]
        out_values[m] = addv[j]
        m += 1
        j += 1
    nodes = 0
    for r in range(m):
        if r == 0 or col0[r] != col0[r - 1]:
            nodes += 1
    out_vals0 = np.empty(nodes, np.int64)
    out_starts1 = np.empty(nodes + 1, np.int64)
    k = 0
    for r in range(m):
        if r == 0 or col0[r] != col0[r - 1]:
            out_vals0[k] = col0[r]
            out_starts1[k] = r
            k += 1
    out_starts1[nodes] = m
    return out_vals0, out_starts1, col1, out_values


@jit(nogil=True)
def spread_into(vals, ptr, out):  # pragma: no cover - compiled
    """``out[ptr[r]:ptr[r + 1]] = vals[r]`` for every row ``r`` of a CSR pointer array."""
    for r in range(len(ptr) - 1):
        v = vals[r]
        for p in range(ptr[r], ptr[r + 1]):
            out[p] = v


@jit(nogil=True)
def patch_rows(codes, arrays, hit, new_codes, new_arrays, by):  # pragma: no cover - compiled
    """Rows sorted by their distinct ``codes`` (``arrays``: a tuple of int64 columns) with
    new rows (``new_codes``, ``new_arrays``) written in: new row ``r`` overwrites old row
    ``hit[r]``, or is inserted at its code's place where ``hit[r]`` is -1; ``by`` orders
    the new rows by code.  Returns the codes and the columns after (a row of a 2-d array
    each), each column copied in runs between the inserted rows:
    :func:`faq.kernel.merge.patched` compiled."""
    n = len(codes)
    m = len(new_codes)
    k = len(arrays)
    ins = 0
    for r in range(m):
        if hit[r] < 0:
            ins += 1
    rows = np.empty(ins, np.int64)  # the inserted rows, by code
    at = np.empty(ins, np.int64)  # the old row each goes before
    t = 0
    for q in range(m):
        r = by[q]
        if hit[r] < 0:
            rows[t] = r
            at[t] = lower_bound(codes, at[t - 1] if t else 0, n, new_codes[r])
            t += 1
    total = n + ins
    out_codes = np.empty(total, np.int64)
    out = np.empty((k, total), np.int64)
    for j in range(-1, k):
        dst = out_codes if j < 0 else out[j]
        src = codes if j < 0 else arrays[j]
        add = new_codes if j < 0 else new_arrays[j]
        prev = 0
        for t in range(ins):
            p = at[t]
            dst[prev + t : p + t] = src[prev:p]
            dst[p + t] = add[rows[t]]
            prev = p
        dst[prev + ins :] = src[prev:]
        if j < 0:
            continue
        for r in range(m):  # rows written over: their old row, moved by the inserts before
            h = hit[r]
            if h >= 0:
                dst[h + lower_bound(at, 0, ins, h + 1)] = add[r]  # inserts at or before h
    return out_codes, out
