"""Compiled kernels of a maintained path program: ``D(y) :- D(x), E(x, y)`` under changes.

A view of a linear recursive program over a selective semiring whose ⊗ is ``+`` or
``×`` (min-plus shortest paths, max-plus, max-times most reliable paths) keeps its
relations as keyed tables: a base (read here through its trie, or one column's sorted
index) and a small sorted log of overrides.  Where every edge value makes a path no
better (``w ≥ 0`` under min-plus, ``0 ≤ w ≤ 1`` under max-times, ``w ≤ 0`` under
max-plus) the tick's delete-and-rederive is two graph walks
(:mod:`incremental.linear_dred`):

* :func:`path_overdelete`: the keys whose old value some tight derivation through a worsened
  fact attains, to a fixpoint, over the old relations (a depth-first walk);
* :func:`path_repair`: those keys rederived from the rest, and the improved facts relaxed,
  best value first (Dijkstra's order), over the new relations.

Each reads a relation's current annotation at a key as the log's, if the log holds the
key, else the base's; the semiring's zero means absent.  Values are compared as the
semiring orders them (``minimize``) and multiplied by ``+`` or ``×`` (``times``), in
float64, the same operations in the same order as the semi-naive rounds, so the answers
are the batch solve's.
"""

from __future__ import annotations

import numpy as np

from faq.kernel.numba_jit import jit, lower_bound

__all__ = ["VIA_BASE", "VIA_EDGE", "VIA_GONE", "path_overdelete", "path_repair"]

VIA_BASE, VIA_EDGE, VIA_GONE = 0, 1, 2
"""How :func:`path_repair` set a key: a base rule's value, an edge's, or deleted."""
_VIA_BASE, _VIA_EDGE, _VIA_GONE = np.int8(VIA_BASE), np.int8(VIA_EDGE), np.int8(VIA_GONE)


@jit(nogil=True, inline="always")
def _at(bk, bv, lk, lv, k, zero):  # pragma: no cover - compiled
    """The annotation of key ``k`` in a keyed table of one column: the log (``lk``,
    ``lv``, sorted) over the base (``bk``, ``bv``, sorted); ``zero`` where neither."""
    i = lower_bound(lk, 0, len(lk), k)
    if i < len(lk) and lk[i] == k:
        return lv[i]
    j = lower_bound(bk, 0, len(bk), k)
    if j < len(bk) and bk[j] == k:
        return bv[j]
    return zero


@jit(nogil=True, inline="always")
def _better(a, b, minimize):  # pragma: no cover - compiled
    """Whether ``a`` is strictly better than ``b`` in the semiring's order."""
    return a < b if minimize else a > b


@jit(nogil=True, inline="always")
def _mul(a, w, times):  # pragma: no cover - compiled
    return a * w if times else a + w


@jit(nogil=True, inline="always")
def _close(a, b, rtol):  # pragma: no cover - compiled
    """``a == b``, or within a relative ``rtol`` (as the generic over-delete compares)."""
    if a == b:
        return True
    return abs(a - b) <= rtol * max(abs(a), abs(b))


@jit(nogil=True, inline="always")
def _log_run(l0, x):  # pragma: no cover - compiled
    """The rows ``[lo, hi)`` of a log sorted by its first column whose first value is ``x``."""
    lo = lower_bound(l0, 0, len(l0), x)
    hi = lo
    while hi < len(l0) and l0[hi] == x:
        hi += 1
    return lo, hi


@jit(nogil=True, inline="always")
def _node(b0, x):  # pragma: no cover - compiled
    """The trie node of first value ``x`` (-1: none)."""
    p = lower_bound(b0, 0, len(b0), x)
    if p < len(b0) and b0[p] == x:
        return p
    return -1


@jit(nogil=True)
def path_overdelete(
    dbk, dbv, dlk, dlv, b0, bs, b1, bw, l0, l1, lw, init, wx, wy, ww, zero, times, rtol
):  # pragma: no cover - compiled
    """The keys of ``D`` to delete, and their old values: ``init`` (already judged), the
    heads of the worsened edges ``(wx, wy)`` (old values ``ww``) that a tight derivation
    used, and, to a fixpoint, every key a tight derivation from a marked key reaches.

    ``D`` is the old relation (base ``dbk``/``dbv``, log ``dlk``/``dlv``); the edges are
    the old ``E``: its base as a trie in column order (first values ``b0``, offsets
    ``bs``, second values ``b1``, annotations ``bw``) and its log ``l0``/``l1``/``lw``
    in key order.  A derivation ``D(x) ⊗ E(x, y)`` is tight when it is within ``rtol``
    of ``D(y)``, as :func:`incremental.fixpoint._close` judges."""
    marked = dict()
    marked[np.int64(0)] = 0.0
    del marked[np.int64(0)]
    stack = np.empty(max(16, 2 * (len(init) + len(wx))), np.int64)
    top = 0
    for k in init:
        if k not in marked:
            marked[k] = _at(dbk, dbv, dlk, dlv, k, zero)
            if top == len(stack):
                stack = np.concatenate((stack, np.empty(len(stack), np.int64)))
            stack[top] = k
            top += 1
    for e in range(len(wx)):
        y = wy[e]
        if y in marked:
            continue
        dx = _at(dbk, dbv, dlk, dlv, wx[e], zero)
        dy = _at(dbk, dbv, dlk, dlv, y, zero)
        if dx == zero or dy == zero or not _close(_mul(dx, ww[e], times), dy, rtol):
            continue
        marked[y] = dy
        if top == len(stack):
            stack = np.concatenate((stack, np.empty(len(stack), np.int64)))
        stack[top] = y
        top += 1
    while top:
        top -= 1
        x = stack[top]
        dx = marked[x]
        lo, hi = _log_run(l0, x)
        p = _node(b0, x)
        a = bs[p] if p >= 0 else 0
        end = bs[p + 1] if p >= 0 else 0
        q = lo
        while a < end or q < hi:  # the base's children and the log's, merged by y
            if q < hi and (a >= end or l1[q] <= b1[a]):
                z, w = l1[q], lw[q]
                if a < end and b1[a] == l1[q]:
                    a += 1  # the log's annotation overrides the base's
                q += 1
            else:
                z, w = b1[a], bw[a]
                a += 1
            if w == zero or z in marked:
                continue
            dz = _at(dbk, dbv, dlk, dlv, z, zero)
            if dz == zero or not _close(_mul(dx, w, times), dz, rtol):
                continue
            marked[z] = dz
            if top == len(stack):
                stack = np.concatenate((stack, np.empty(len(stack), np.int64)))
            stack[top] = z
            top += 1
    keys = np.empty(len(marked), np.int64)
    values = np.empty(len(marked), np.float64)
    for i, (k, v) in enumerate(marked.items()):
        keys[i] = k
        values[i] = v
    return keys, values


@jit(nogil=True, inline="always")
def _push(hv, hk, hp, hf, n, v, k, p, f, minimize):  # pragma: no cover - compiled
    """Push ``(v, k, p, f)`` (a value, its key, the key it came from and whether it came
    from an edge: 1, or a base rule: 0) onto the binary heap ``hv``/``hk``/``hp``/``hf``
    of ``n`` entries (best value on top); returns the arrays (grown when full) and the
    new size."""
    if n == len(hv):
        hv = np.concatenate((hv, np.empty(len(hv), np.float64)))
        hk = np.concatenate((hk, np.empty(len(hk), np.int64)))
        hp = np.concatenate((hp, np.empty(len(hp), np.int64)))
        hf = np.concatenate((hf, np.empty(len(hf), np.int8)))
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if not _better(v, hv[parent], minimize):
            break
        hv[i], hk[i], hp[i], hf[i] = hv[parent], hk[parent], hp[parent], hf[parent]
        i = parent
    hv[i], hk[i], hp[i], hf[i] = v, k, p, f
    return hv, hk, hp, hf, n + 1


@jit(nogil=True, inline="always")
def _pop(hv, hk, hp, hf, n, minimize):  # pragma: no cover - compiled
    """Remove the heap's best entry (``hv[0]``, ``hk[0]``, ``hp[0]``, ``hf[0]``, read by
    the caller first); returns the new size."""
    n -= 1
    v, k, p, f = hv[n], hk[n], hp[n], hf[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _better(hv[c + 1], hv[c], minimize):
            c += 1
        if not _better(hv[c], v, minimize):
            break
        hv[i], hk[i], hp[i], hf[i] = hv[c], hk[c], hp[c], hf[c]
        i = c
    if n:
        hv[i], hk[i], hp[i], hf[i] = v, k, p, f
    return n


@jit(nogil=True)
def path_repair(
    dbk,
    dbv,
    dlk,
    dlv,
    marked,
    b0,
    bs,
    b1,
    bw,
    l0,
    l1,
    lw,
    rorder,
    rsorted,
    bx,
    bvals,
    lin,
    sk,
    sv,
    gx,
    gy,
    gw,
    zero,
    minimize,
    times,
):  # pragma: no cover - compiled
    """The keys of ``D`` whose annotation the tick sets, their new annotations (``zero``:
    deleted), the key each came from (its witness: the ``x`` of the edge that gives it)
    and how (:data:`VIA_EDGE`, :data:`VIA_BASE`: a base rule's value, :data:`VIA_GONE`: deleted):
    the ``marked`` keys (sorted) rederived from the rest of the old ``D`` (base
    ``dbk``/``dbv``, log ``dlk``/``dlv``) over the new ``E``, then every
    improvement relaxed best first from them, from the base rules' values ``sk``/``sv``
    and from the improved edges ``gx``/``gy``/``gw``.

    The new ``E`` is read forwards through its base's trie (``b0``, ``bs``, ``b1``,
    ``bw``) and its log (``l0``, ``l1``, ``lw``, in key order), and backwards (the
    edges into a marked key) through its base's rows in the order of their second column
    (``rorder``: row numbers; ``rsorted``: that column sorted; ``bx``, ``bvals``: the
    base's first column and annotations by row) and the log rows ``lin`` (those whose
    second value is marked, in the order of that value).  Every edge value must make a
    path no better (the caller checks): then each key is final when it leaves the heap,
    as in Dijkstra's algorithm."""
    dist = dict()
    dist[np.int64(0)] = (0.0, np.int64(0), np.int8(0))
    del dist[np.int64(0)]
    hv = np.empty(64, np.float64)
    hk = np.empty(64, np.int64)
    hp = np.empty(64, np.int64)
    hf = np.empty(64, np.int8)
    n = 0
    # the marked keys: the best derivation from an unmarked key over the new edges
    li = 0
    for m in range(len(marked)):
        y = marked[m]
        best = zero
        via = np.int64(-1)
        lo = lower_bound(rsorted, 0, len(rsorted), y)
        hi = lo
        while hi < len(rsorted) and rsorted[hi] == y:
            hi += 1
        for t in range(lo, hi):
            r = rorder[t]
            x = bx[r]
            # an edge the log overrides is read from the log below
            a, b = _log_run(l0, x)
            c = lower_bound(l1, a, b, y)
            if c < b and l1[c] == y:
                continue
            if _is_marked(marked, x):
                continue
            dx = _at(dbk, dbv, dlk, dlv, x, zero)
            if dx == zero:
                continue
            cand = _mul(dx, bvals[r], times)
            if _better(cand, best, minimize):
                best, via = cand, x
        while li < len(lin) and l1[lin[li]] < y:
            li += 1
        while li < len(lin) and l1[lin[li]] == y:
            q = lin[li]
            li += 1
            x = l0[q]
            if lw[q] == zero or _is_marked(marked, x):
                continue
            dx = _at(dbk, dbv, dlk, dlv, x, zero)
            if dx == zero:
                continue
            cand = _mul(dx, lw[q], times)
            if _better(cand, best, minimize):
                best, via = cand, x
        if best != zero:
            hv, hk, hp, hf, n = _push(hv, hk, hp, hf, n, best, y, via, _VIA_EDGE, minimize)
    for s in range(len(sk)):
        if sv[s] != zero:
            hv, hk, hp, hf, n = _push(hv, hk, hp, hf, n, sv[s], sk[s], sk[s], _VIA_BASE, minimize)
    for e in range(len(gx)):
        dx = _current(dist, marked, dbk, dbv, dlk, dlv, gx[e], zero)
        if dx != zero and gw[e] != zero:
            c = _mul(dx, gw[e], times)
            hv, hk, hp, hf, n = _push(hv, hk, hp, hf, n, c, gy[e], gx[e], _VIA_EDGE, minimize)
    while n:
        v, y, via, f = hv[0], hk[0], hp[0], hf[0]
        n = _pop(hv, hk, hp, hf, n, minimize)
        if not _better(v, _current(dist, marked, dbk, dbv, dlk, dlv, y, zero), minimize):
            continue
        dist[y] = (v, via, f)
        lo, hi = _log_run(l0, y)
        p = _node(b0, y)
        a = bs[p] if p >= 0 else 0
        end = bs[p + 1] if p >= 0 else 0
        q = lo
        while a < end or q < hi:  # the base's children and the log's, merged by key
            if q < hi and (a >= end or l1[q] <= b1[a]):
                z, w = l1[q], lw[q]
                if a < end and b1[a] == l1[q]:
                    a += 1
                q += 1
            else:
                z, w = b1[a], bw[a]
                a += 1
            if w == zero:
                continue
            c = _mul(v, w, times)
            if _better(c, _current(dist, marked, dbk, dbv, dlk, dlv, z, zero), minimize):
                hv, hk, hp, hf, n = _push(hv, hk, hp, hf, n, c, z, y, _VIA_EDGE, minimize)
    extra = 0
    for m in range(len(marked)):
        if marked[m] not in dist:
            extra += 1
    keys = np.empty(len(dist) + extra, np.int64)
    values = np.empty(len(dist) + extra, np.float64)
    preds = np.empty(len(dist) + extra, np.int64)
    kinds = np.empty(len(dist) + extra, np.int8)
    i = 0
    for k, got in dist.items():
        keys[i], values[i], preds[i], kinds[i] = k, got[0], got[1], got[2]
        i += 1
    for m in range(len(marked)):
        if marked[m] not in dist:
            keys[i], values[i], preds[i], kinds[i] = marked[m], zero, marked[m], _VIA_GONE
            i += 1
    return keys, values, preds, kinds


@jit(nogil=True, inline="always")
def _is_marked(marked, k):  # pragma: no cover - compiled
    i = lower_bound(marked, 0, len(marked), k)
    return i < len(marked) and marked[i] == k


@jit(nogil=True, inline="always")
def _current(dist, marked, dbk, dbv, dlk, dlv, k, zero):  # pragma: no cover - compiled
    """``k``'s annotation as the repair stands: set by it, else deleted (marked), else the
    old relation's."""
    if k in dist:
        return dist[k][0]
    if _is_marked(marked, k):
        return zero
    return _at(dbk, dbv, dlk, dlv, k, zero)
