"""The compiled kernels of the seeded delta rule (:mod:`faq.kernel.seeded`).

* :func:`seeded_sums`: per seed row, the sum over the last variable of the product over
  atoms of base plus correction (one pass, no product split);
* :func:`descend`: the node each seed row reaches down a trie's first levels;
* :func:`near_level`: the last level of a trie of a relation's correction, built only
  from the rows a seed row can reach;
* ``*_held``: each of them keeping the GIL while it runs, for calls on a few rows
  (the ``gil_rows`` setting, :func:`faq.kernel.compiled.sized`).

Compiled with :func:`faq.kernel.numba_jit.jit` (numba's disk cache) and warmed up with
the kernel's other searches (:func:`faq.kernel.compiled.warm_up`).
"""

from __future__ import annotations

import numpy as np

from faq.kernel.numba_jit import gallop, jit, lower_bound

try:
    from numba.typed import List
except ImportError:  # without numba nothing here is compiled or called
    List = list  # noqa: N816

__all__ = [
    "binary_sums",
    "descend",
    "descend_held",
    "near_level",
    "near_level_held",
    "seeded_sums",
    "seeded_sums_held",
]


@jit(nogil=True, inline="always")
def _at(vals, values, lo, hi, v):  # pragma: no cover - compiled
    """The annotation of value ``v`` among ``vals[lo:hi]`` (sorted), or 0, and where a
    search for a larger value may start."""
    at = gallop(vals, lo, hi, v)
    if at < hi and vals[at] == v:
        return values[at], at + 1
    return 0, at


@jit(nogil=True)
def seeded_sums(
    bvals, bstarts, bvalues, bnodes, xvals, xstarts, xvalues, xnodes, w
):  # pragma: no cover - compiled
    """Per seed row ``r``: ``w[r] · Σ_x Π_j (B_j(x) + X_j(x))``, where ``B_j`` and ``X_j``
    are the children (values ``x``, leaf annotations) of node ``bnodes[j][r]`` of a base
    trie level and ``xnodes[j][r]`` of a correction trie level (-1: none); and a bound
    on the magnitude of every partial sum of the products of base or correction per
    atom (``Σ_r |w[r]| Σ_x Π_j (|B_j(x)| + |X_j(x)|)``, as a float)."""
    k = len(bnodes)
    n = len(w)
    out = np.zeros(n, np.int64)
    bat = np.zeros(k, np.int64)  # per atom, where its next search of base children starts
    xat = np.zeros(k, np.int64)  # ... and of correction children
    bound = 0.0
    for r in range(n):
        best = -1
        fewest = -1
        for j in range(k):
            c = 0
            p = bnodes[j][r]
            if p >= 0:
                c += bstarts[j][p + 1] - bstarts[j][p]
            q = xnodes[j][r]
            if q >= 0:
                c += xstarts[j][q + 1] - xstarts[j][q]
            if c == 0:
                best = -1
                break
            if best < 0 or c < fewest:
                best, fewest = j, c
        if best < 0:
            continue
        total = 0
        mag = 0.0
        for side in range(2):  # the proposer's base children, then its correction's
            node = bnodes[best][r] if side == 0 else xnodes[best][r]
            if node < 0:
                continue
            vals = bvals[best] if side == 0 else xvals[best]
            starts = bstarts[best] if side == 0 else xstarts[best]
            for j in range(k):  # x rises, so each search starts where the last ended
                p = bnodes[j][r]
                bat[j] = bstarts[j][p] if p >= 0 else 0
                q = xnodes[j][r]
                xat[j] = xstarts[j][q] if q >= 0 else 0
            for pos in range(starts[node], starts[node + 1]):
                x = vals[pos]
                prod = 1
                size = 1.0
                for j in range(k):
                    b = 0
                    p = bnodes[j][r]
                    if p >= 0:
                        b, bat[j] = _at(bvals[j], bvalues[j], bat[j], bstarts[j][p + 1], x)
                    if side == 1 and j == best and b != 0:
                        size = 0.0  # x is among the proposer's base children: seen
                        break
                    c = 0
                    q = xnodes[j][r]
                    if q >= 0:
                        c, xat[j] = _at(xvals[j], xvalues[j], xat[j], xstarts[j][q + 1], x)
                    size *= abs(b) + abs(c)
                    if size == 0.0:
                        break
                    prod *= b + c
                if size == 0.0:
                    continue
                total += prod
                mag += size
        out[r] = total * w[r]
        bound += mag * abs(w[r])
    return out, bound


@jit(nogil=True)
def descend(vals, starts, seeds, low, at):  # pragma: no cover - compiled
    """The node each seed row reaches down a trie's first ``len(seeds)`` levels
    (``vals``/``starts`` of those levels, ``seeds`` a column per level), -1 where a value
    is missing: :meth:`faq.kernel.Trie.lookup` level by level in one call.  ``low`` and
    ``at``: the first level's dense index (:meth:`faq.kernel.Trie.first_index`; empty:
    none), one load for a value instead of a binary search (0.23 µs among 200,000)."""
    n = len(seeds[0])
    out = np.zeros(n, np.int64)
    dense = len(at) > 0
    for r in range(n):
        node = 0
        for d in range(len(seeds)):
            v = seeds[d][r]
            if d == 0 and dense:
                node = at[v - low] if low <= v < low + len(at) else -1
                if node < 0:
                    break
                continue
            end = starts[d][node + 1]
            lo = lower_bound(vals[d], starts[d][node], end, v)  # (a gallop costs twice)
            if lo < end and vals[d][lo] == v:
                node = lo
            else:
                node = -1
                break
        out[r] = node
    return out


@jit(nogil=True)
def _cmp(a, i, b, j, p):  # pragma: no cover - compiled
    """Compare column ``i`` of ``a`` with column ``j`` of ``b`` (2-d, a row per key
    column) on the first ``p`` rows."""
    for k in range(p):
        if a[k, i] < b[k, j]:
            return -1
        if a[k, i] > b[k, j]:
            return 1
    return 0


@jit(nogil=True)
def _lower_row(a, order, n, b, j, p):  # pragma: no cover - compiled
    """The first ``k < n`` whose column ``order[k]`` of ``a`` is not below column ``j`` of
    ``b`` on the first ``p`` rows (the columns ``order`` names sorted; n if none)."""
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if _cmp(a, order[mid], b, j, p) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit(nogil=True)
def _argsort(x):  # pragma: no cover - compiled
    """A stable order of ``x`` (int64): insertion-sorted runs of 16, merged bottom-up.
    Written here because numba's own sorts take seconds each to compile."""
    n = len(x)
    a = np.arange(n)
    for lo in range(0, n, 16):
        for i in range(lo + 1, min(lo + 16, n)):
            t = a[i]
            j = i - 1
            while j >= lo and x[a[j]] > x[t]:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = t
    b = np.empty(n, np.int64)
    width = 16
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and x[a[i]] <= x[a[j]]):
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
        a, b = b, a
        width *= 2
    return a


@jit(nogil=True)
def _head(x, n):  # pragma: no cover - compiled
    """A copy of the first ``n`` values of ``x`` (a loop: slices cost numba seconds to
    compile)."""
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = x[i]
    return out


@jit(nogil=True)
def _distinct(x):  # pragma: no cover - compiled
    """The distinct values of ``x`` (int64), sorted."""
    by = _argsort(x)
    s = np.empty(len(x), np.int64)
    for i in range(len(x)):
        s[i] = x[by[i]]
    keep = 0
    for i in range(len(s)):
        if i == 0 or s[i] != s[keep - 1]:
            s[keep] = s[i]
            keep += 1
    return _head(s, keep)


@jit(nogil=True)
def _sorted_keys(keys):  # pragma: no cover - compiled
    """An order of the columns of ``keys`` (2-d, a row per key column) sorted by all its
    rows: none needed when they are (rows of overrides kept in key order usually
    are), else one sort of a single code per key when the rows' spans multiply below
    2**62, else a stable sort per row, last first."""
    p, m = keys.shape
    if m == 0:
        return np.arange(0)
    lows = np.empty(p, np.int64)
    spans = np.empty(p, np.int64)
    span = 1.0
    for k in range(p):
        lo = keys[k, 0]
        hi = keys[k, 0]
        for i in range(m):
            lo = min(lo, keys[k, i])
            hi = max(hi, keys[k, i])
        lows[k] = lo
        spans[k] = hi - lo + 1
        span *= float(hi) - float(lo) + 1.0
    if span >= 2.0**62:
        order = np.arange(m)
        for k in range(p - 1, -1, -1):  # stable passes, last row first
            vals = np.empty(m, np.int64)
            for i in range(m):
                vals[i] = keys[k, order[i]]
            by = _argsort(vals)
            again = np.empty(m, np.int64)
            for i in range(m):
                again[i] = order[by[i]]
            order = again
        return order
    code = np.zeros(m, np.int64)
    for k in range(p):
        for i in range(m):
            code[i] = code[i] * spans[k] + (keys[k, i] - lows[k])
    for i in range(1, m):
        if code[i] < code[i - 1]:
            return _argsort(code)
    return np.arange(m)


@jit(nogil=True)
def _bucketed(keys, rank, g):  # pragma: no cover - compiled
    """:func:`_sorted_keys` of two rows of keys whose first row's values have the ranks
    ``rank`` among ``g`` sorted distinct values: a counting sort by the first row, then a
    sort of each bucket by the second where it is not sorted already."""
    m = keys.shape[1]
    count = np.zeros(g + 1, np.int64)
    for i in range(m):
        count[rank[i] + 1] += 1
    for b in range(g):
        count[b + 1] += count[b]
    order = np.empty(m, np.int64)
    fill = np.empty(g, np.int64)
    for b in range(g):
        fill[b] = count[b]
    for i in range(m):
        order[fill[rank[i]]] = i
        fill[rank[i]] += 1
    for b in range(g):  # each bucket by the second row (written out: fancy indexing
        lo = count[b]  # costs numba seconds to compile)
        hi = count[b + 1]
        for i in range(lo + 1, hi):
            if keys[1, order[i]] < keys[1, order[i - 1]]:
                vals = np.empty(hi - lo, np.int64)
                part = np.empty(hi - lo, np.int64)
                for q in range(hi - lo):
                    part[q] = order[lo + q]
                    vals[q] = keys[1, part[q]]
                by = _argsort(vals)
                for q in range(hi - lo):
                    order[lo + q] = part[by[q]]
                break
    return order


@jit(nogil=True)
def near_level(ccols, cvalues, dcols, dvalues, seeds, csorted):  # pragma: no cover - compiled
    """The last level of a trie of the rows ``ccols``/``cvalues`` plus ``dcols``/``dvalues``
    (columns in trie order, the last one the level's values; equal keys summed, zero
    sums dropped) over only the rows whose other columns are some seed row's
    (``seeds``, one column each): its values, offsets and leaf annotations, the node
    (group of rows) each seed row reaches (-1: none), and the largest sum of
    ``|annotation|`` over a key (a float: the caller checks it against int64).
    What ``build_trie`` of those rows and a descent of the seed rows give, with no
    trie of the rest built.  ``csorted``: the rows ``ccols`` are sorted by their first
    column (a keyed table's log in key order), found by one binary search per
    distinct first value of the seeds and a walk along its run, not a pass over them."""
    p = len(seeds)
    n = len(seeds[0])
    nc = len(cvalues)
    nd = len(dvalues)
    seed = np.empty((p, n), np.int64)
    for k in range(p):
        col = seeds[k]
        for r in range(n):
            seed[k, r] = col[r]
    # a dense array over the span of the seeds' first values (1 + a value's rank, 0:
    # none) rejects most rows, and ranks the others, with one load; a binary search
    # among them costs about log2(distinct seeds) loads a row, so the array pays while
    # its size stays within a multiple of that (a 200,000-value span over a 30,000-row
    # log: 1.4 ms by search, 0.1 ms by the array)
    low = seed[0, 0]
    high = seed[0, 0]
    for r in range(n):
        low = min(low, seed[0, r])
        high = max(high, seed[0, r])
    first = _distinct(seed[0])
    steps = 1
    while (1 << steps) < len(first):
        steps += 1
    dense = high - low < 16 * steps * (nc + nd) + (1 << 16)
    slot = np.zeros(high - low + 1 if dense else 0, np.int32)
    if dense:
        for i in range(len(first)):
            slot[first[i] - low] = i + 1
    c0 = ccols[0]
    d0 = dcols[0]
    cand = np.empty(nc + nd, np.int64)
    rank = np.empty(nc + nd, np.int64)  # of each candidate's first value among first
    m = 0
    start = 0
    if csorted:  # each first value's run of rows, in row order as the pass finds them
        for i in range(len(first)):
            t = lower_bound(c0, 0, nc, first[i])
            while t < nc and c0[t] == first[i]:
                cand[m] = t
                rank[m] = i
                m += 1
                t += 1
        start = nc
    for t in range(start, nc + nd):
        v = c0[t] if t < nc else d0[t - nc]
        if v < low or v > high:
            continue
        if dense:
            at = slot[v - low] - 1
            hit = at >= 0
        else:
            at = lower_bound(first, 0, len(first), v)
            hit = at < len(first) and first[at] == v
        if hit:
            cand[m] = t
            rank[m] = at
            m += 1
    keys = np.empty((p + 1, m), np.int64)
    ann = np.empty(m, np.int64)
    for k in range(p + 1):
        ck = ccols[k]
        dk = dcols[k]
        for i in range(m):
            t = cand[i]
            keys[k, i] = ck[t] if t < nc else dk[t - nc]
    for i in range(m):
        t = cand[i]
        ann[i] = cvalues[t] if t < nc else dvalues[t - nc]
    if p > 1:  # the whole prefix among the seed rows': binary search of sorted seeds
        sorder = _sorted_keys(seed)
        kept = 0
        for i in range(m):
            lo = _lower_row(seed, sorder, n, keys, i, p)
            if lo < n and _cmp(seed, sorder[lo], keys, i, p) == 0:
                for k in range(p + 1):
                    keys[k, kept] = keys[k, i]
                ann[kept] = ann[i]
                rank[kept] = rank[i]
                kept += 1
        m = kept
        kept_keys = np.empty((p + 1, m), np.int64)
        for k in range(p + 1):
            for i in range(m):
                kept_keys[k, i] = keys[k, i]
        keys = kept_keys
    order = _bucketed(keys, rank, len(first)) if p == 1 else _sorted_keys(keys)
    # equal keys summed, zero sums dropped; groups of equal prefixes
    uvals = np.empty(m, np.int64)
    usums = np.empty(m, np.int64)
    ufirst = np.empty(m, np.int64)  # a column of keys holding each kept key
    biggest = 0.0
    u = 0
    i = 0
    while i < m:
        a = order[i]
        total = 0
        mag = 0.0
        j = i
        while j < m and _cmp(keys, order[j], keys, a, p + 1) == 0:
            total += ann[order[j]]
            mag += abs(ann[order[j]])
            j += 1
        biggest = max(biggest, mag)
        if total != 0:
            uvals[u] = keys[p, a]
            usums[u] = total
            ufirst[u] = a
            u += 1
        i = j
    starts = np.empty(u + 1, np.int64)
    gfirst = np.empty(u, np.int64)  # a column of keys of each group of equal prefixes
    g = 0
    for i in range(u):
        if i == 0 or _cmp(keys, ufirst[i], keys, ufirst[i - 1], p) != 0:
            starts[g] = i
            gfirst[g] = ufirst[i]
            g += 1
    starts[g] = u
    node = np.full(n, -1, np.int64)
    if p == 1:  # a group per first value: through its rank
        group = np.full(len(first), -1, np.int64)
        for b in range(g):
            group[rank[gfirst[b]]] = b
        for r in range(n):
            if dense:
                at = slot[seed[0, r] - low] - 1
            else:
                at = lower_bound(first, 0, len(first), seed[0, r])
            node[r] = group[at]
        return _head(uvals, u), _head(starts, g + 1), _head(usums, u), node, biggest
    for r in range(n):  # each seed row's group: binary search over the groups
        lo = _lower_row(keys, gfirst, g, seed, r, p)
        if lo < g and _cmp(keys, gfirst[lo], seed, r, p) == 0:
            node[r] = lo
    return _head(uvals, u), _head(starts, g + 1), _head(usums, u), node, biggest


@jit()
def binary_sums(
    seeds, w, pick, vals0, starts0, low, at, vals1, starts1, values,
    ccol0, ccol1, cvalues, dcol0, dcol1, dvalues, csorted, safe,
):  # fmt: skip  # pragma: no cover - compiled
    """:func:`seeded_sums` of a small seed over atoms of two columns each (binary
    relations, the last variable second), with their levels found in the same call:
    for atom ``j`` (a tuple entry of each argument) the node each seed row reaches, by
    its seed column ``pick[j]``, in the base's trie (first level ``vals0``/``starts0``,
    its dense index ``low``/``at``, second level ``vals1``/``starts1``, annotations
    ``values``: :func:`descend`) and in the correction ``ccol0``/``ccol1``/``cvalues``
    plus the change ``dcol0``/``dcol1``/``dvalues`` (:func:`near_level`, ``csorted``
    as there).  Returns the sums, their bound, and the largest sum of ``|annotation|``
    over a key of a correction; past ``safe`` it stops there (no sums: zeros)."""
    k = len(pick)
    bnodes = List()
    xvals = List()
    xstarts = List()
    xvalues = List()
    xnodes = List()
    biggest = 0.0
    for j in range(k):
        prefix = (seeds[pick[j]],)
        bnodes.append(descend((vals0[j],), (starts0[j],), prefix, low[j], at[j]))
        uvals, ustarts, usums, node, big = near_level(
            (ccol0[j], ccol1[j]), cvalues[j], (dcol0[j], dcol1[j]), dvalues[j], prefix, csorted[j]
        )
        xvals.append(uvals)
        xstarts.append(ustarts)
        xvalues.append(usums)
        xnodes.append(node)
        biggest = max(biggest, big)
    if biggest >= safe:
        return np.zeros(len(w), np.int64), 0.0, biggest
    out, bound = seeded_sums(vals1, starts1, values, bnodes, xvals, xstarts, xvalues, xnodes, w)
    return out, bound, biggest


# -- the same kernels keeping the GIL (small calls: faq.kernel.compiled.sized) ------------
@jit()
def seeded_sums_held(
    bvals, bstarts, bvalues, bnodes, xvals, xstarts, xvalues, xnodes, w
):  # pragma: no cover - compiled
    """:func:`seeded_sums`, the GIL kept while it runs."""
    return seeded_sums(bvals, bstarts, bvalues, bnodes, xvals, xstarts, xvalues, xnodes, w)


@jit()
def descend_held(vals, starts, seeds, low, at):  # pragma: no cover - compiled
    """:func:`descend`, the GIL kept while it runs."""
    return descend(vals, starts, seeds, low, at)


@jit()
def near_level_held(ccols, cvalues, dcols, dvalues, seeds, csorted):  # pragma: no cover
    """:func:`near_level`, the GIL kept while it runs."""
    return near_level(ccols, cvalues, dcols, dvalues, seeds, csorted)
