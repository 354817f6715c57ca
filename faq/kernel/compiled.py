"""The kernel's compiled searches (numba), numba's disk cache of them, and their warm-up.

The searches of :mod:`faq.kernel` over sorted tries are compiled by numba the
first time they run, which takes a second or two per process (more on a busy
machine).  They are compiled with ``cache=True``: numba keeps the machine code
in a disk cache (``__pycache__`` beside this file, else the user's cache
directory, or ``$NUMBA_CACHE_DIR``) and the next process loads it in a fraction
of that.  Where no cache directory is writable they are compiled without one.

:func:`warm_up` compiles them (or loads them) for the usual arguments and logs
how long it took and how much came from the disk cache;
:func:`warm_up_in_background` does so in a thread, which
:func:`faq.session.local_session` starts before the JVM so that the two
overlap.  Without numba (``NUMBA`` False) the kernel's numpy search runs
instead and there is nothing to compile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "NUMBA",
    "Warmed",
    "count",
    "descend",
    "intersect",
    "jit",
    "lookup",
    "near_level",
    "seeded_sums",
    "warm_up",
    "warm_up_in_background",
]

try:
    import numba as _numba

    NUMBA = True
except ImportError:  # pragma: no cover - numba is a dependency; kept for odd platforms
    _numba = None
    NUMBA = False

log = logging.getLogger("faq")


def jit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)`` with numba's disk cache, or without it where numba finds
    no writable cache directory (it refuses ``cache=True`` then)."""

    def wrap(fn: Callable[..., Any]) -> Any:
        try:
            return _numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return _numba.njit(**options)(fn)

    return wrap


if NUMBA:

    @jit(nogil=True)
    def lookup(vals, starts, nodes, x):  # pragma: no cover - compiled
        """The child of each ``nodes[i]`` whose value is ``x[i]``, or -1 (binary search)."""
        out = np.empty(len(x), np.int64)
        for i in range(len(x)):
            p = nodes[i]
            lo = starts[p]
            end = starts[p + 1]
            hi = end
            v = x[i]
            while lo < hi:
                mid = (lo + hi) >> 1
                if vals[mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            out[i] = lo if lo < end and vals[lo] == v else -1
        return out

    @jit(nogil=True, inline="always")
    def _gallop(vals, lo, hi, v):  # pragma: no cover - compiled
        """The first index in [lo, hi) whose value is ≥ v (exponential, then binary search)."""
        step = 1
        bound = lo
        while bound < hi and vals[bound] < v:
            lo = bound + 1
            bound = lo + step
            step <<= 1
        if bound > hi:
            bound = hi
        while lo < bound:
            mid = (lo + bound) >> 1
            if vals[mid] < v:
                lo = mid + 1
            else:
                bound = mid
        return lo

    @jit(nogil=True)
    def intersect(vals, starts, nodes, proposer, skip, take, total):  # pragma: no cover
        """Per prefix ``i``, the candidates ``skip[i] .. skip[i] + take[i]`` of list
        ``proposer[i]`` that every other sorted list holds: (owner prefix, position in each
        list) of each match."""
        k = len(vals)
        owner = np.empty(total, np.int64)
        pos = np.empty((k, total), np.int64)
        cur = np.empty(k, np.int64)
        end = np.empty(k, np.int64)
        m = 0
        for i in range(len(proposer)):
            j0 = proposer[i]
            for j in range(k):  # each list's cursor at prefix i's children (written out:
                cur[j] = starts[j][nodes[j][i]]  # a helper function costs 3x here)
                end[j] = starts[j][nodes[j][i] + 1]
            first = cur[j0] + skip[i]
            last = first + take[i]
            for q in range(first, last):
                v = vals[j0][q]
                ok = True
                for j in range(k):  # every other list holds v at or after its cursor
                    if j == j0:
                        continue
                    c = _gallop(vals[j], cur[j], end[j], v)
                    cur[j] = c
                    if c >= end[j] or vals[j][c] != v:
                        ok = False
                        break
                if ok:
                    owner[m] = i
                    for j in range(k):
                        pos[j, m] = q if j == j0 else cur[j]
                    m += 1
        return owner[:m], pos[:, :m]

    @jit(nogil=True)
    def count(vals, starts, nodes, proposer, skip, take):  # pragma: no cover
        """How many matches :func:`intersect` would find for each prefix."""
        k = len(vals)
        if k == 2:
            return _count_two(vals, starts, nodes, proposer, skip, take)
        out = np.zeros(len(proposer), np.int64)
        cur = np.empty(k, np.int64)
        end = np.empty(k, np.int64)
        for i in range(len(proposer)):
            j0 = proposer[i]
            for j in range(k):  # each list's cursor at prefix i's children (written out:
                cur[j] = starts[j][nodes[j][i]]  # a helper function costs 3x here)
                end[j] = starts[j][nodes[j][i] + 1]
            first = cur[j0] + skip[i]
            n = 0
            for q in range(first, first + take[i]):
                v = vals[j0][q]
                ok = True
                for j in range(k):  # every other list holds v at or after its cursor
                    if j == j0:
                        continue
                    c = _gallop(vals[j], cur[j], end[j], v)
                    cur[j] = c
                    if c >= end[j] or vals[j][c] != v:
                        ok = False
                        break
                if ok:
                    n += 1
            out[i] = n
        return out

    @jit(nogil=True)
    def _count_two(vals, starts, nodes, proposer, skip, take):  # pragma: no cover
        """Two sorted lists per prefix: a merge when their sizes are close, else a gallop."""
        out = np.zeros(len(proposer), np.int64)
        for i in range(len(proposer)):
            j0 = proposer[i]
            j1 = 1 - j0
            a = vals[j0]
            b = vals[j1]
            ia = starts[j0][nodes[j0][i]] + skip[i]
            ea = ia + take[i]
            ib = starts[j1][nodes[j1][i]]
            eb = starts[j1][nodes[j1][i] + 1]
            n = 0
            if eb - ib <= 8 * (ea - ia):
                while ia < ea and ib < eb:
                    x = a[ia]
                    y = b[ib]
                    if x < y:
                        ia += 1
                    elif x > y:
                        ib += 1
                    else:
                        n += 1
                        ia += 1
                        ib += 1
            else:
                while ia < ea:
                    ib = _gallop(b, ib, eb, a[ia])
                    if ib >= eb:
                        break
                    if b[ib] == a[ia]:
                        n += 1
                    ia += 1
            out[i] = n
        return out


if NUMBA:

    @jit(nogil=True, inline="always")
    def _at(vals, values, lo, hi, v):  # pragma: no cover - compiled
        """The annotation of value ``v`` among ``vals[lo:hi]`` (sorted), or 0."""
        at = _gallop(vals, lo, hi, v)
        if at < hi and vals[at] == v:
            return values[at]
        return 0

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
                for pos in range(starts[node], starts[node + 1]):
                    x = vals[pos]
                    prod = 1
                    size = 1.0
                    for j in range(k):
                        b = 0
                        p = bnodes[j][r]
                        if p >= 0:
                            b = _at(bvals[j], bvalues[j], bstarts[j][p], bstarts[j][p + 1], x)
                        if side == 1 and j == best and b != 0:
                            size = 0.0  # x is among the proposer's base children: seen
                            break
                        c = 0
                        q = xnodes[j][r]
                        if q >= 0:
                            c = _at(xvals[j], xvalues[j], xstarts[j][q], xstarts[j][q + 1], x)
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


if NUMBA:

    @jit()
    def descend(vals, starts, seeds):  # pragma: no cover - compiled
        """The node each seed row reaches down a trie's first ``len(seeds)`` levels
        (``vals``/``starts`` of those levels, ``seeds`` a column per level), -1 where a value
        is missing: :meth:`faq.kernel.Trie.lookup` level by level in one call."""
        n = len(seeds[0])
        out = np.zeros(n, np.int64)
        for r in range(n):
            node = 0
            for d in range(len(seeds)):
                lo = starts[d][node]
                hi = starts[d][node + 1]
                at = _gallop(vals[d], lo, hi, seeds[d][r])
                if at < hi and vals[d][at] == seeds[d][r]:
                    node = at
                else:
                    node = -1
                    break
            out[r] = node
        return out

    @jit(nogil=True, inline="always")
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
            for k in range(p - 1, -1, -1):
                order = order[np.argsort(keys[k][order], kind="mergesort")]
            return order
        code = np.zeros(m, np.int64)
        for k in range(p):
            for i in range(m):
                code[i] = code[i] * spans[k] + (keys[k, i] - lows[k])
        for i in range(1, m):
            if code[i] < code[i - 1]:
                return np.argsort(code)
        return np.arange(m)

    @jit(nogil=True)
    def _bucketed(keys, first):  # pragma: no cover - compiled
        """:func:`_sorted_keys` of two rows of keys whose first row's values are among
        ``first`` (sorted, distinct): a counting sort by the first row, then a sort of each
        bucket by the second where it is not sorted already."""
        m = keys.shape[1]
        g = len(first)
        rank = np.searchsorted(first, keys[0])
        count = np.zeros(g + 1, np.int64)
        for i in range(m):
            count[rank[i] + 1] += 1
        for b in range(g):
            count[b + 1] += count[b]
        order = np.empty(m, np.int64)
        fill = count[:g].copy()
        for i in range(m):
            order[fill[rank[i]]] = i
            fill[rank[i]] += 1
        second = keys[1]
        for b in range(g):
            lo = count[b]
            hi = count[b + 1]
            for i in range(lo + 1, hi):
                if second[order[i]] < second[order[i - 1]]:
                    part = order[lo:hi]
                    order[lo:hi] = part[np.argsort(second[part])]
                    break
        return order

    @jit(nogil=True)
    def near_level(ccols, cvalues, dcols, dvalues, seeds):  # pragma: no cover - compiled
        """The last level of a trie of the rows ``ccols``/``cvalues`` plus ``dcols``/``dvalues``
        (columns in trie order, the last one the level's values; equal keys summed, zero
        sums dropped) over only the rows whose other columns are some seed row's
        (``seeds``, one column each): its values, offsets and leaf annotations, the node
        (group of rows) each seed row reaches (-1: none), and the largest sum of
        ``|annotation|`` over a key (a float: the caller checks it against int64).
        What ``build_trie`` of those rows and a descent of the seed rows give, with no
        trie of the rest built."""
        p = len(seeds)
        n = len(seeds[0])
        nc = len(cvalues)
        nd = len(dvalues)
        seed = np.empty((p, n), np.int64)
        for k in range(p):
            seed[k, :] = seeds[k]
        # a bitmap of the seeds' values of the first column rejects most rows with one
        # load (a binary search among them when their span is large)
        low = seed[0].min()
        high = seed[0].max()
        first = np.unique(seed[0])
        bitmap = high - low < 4 * (nc + nd) + (1 << 16)
        mark = np.zeros(high - low + 1 if bitmap else 0, np.bool_)
        if bitmap:
            for r in range(n):
                mark[seed[0, r] - low] = True
        c0 = ccols[0]
        d0 = dcols[0]
        cand = np.empty(nc + nd, np.int64)
        m = 0
        for t in range(nc + nd):
            v = c0[t] if t < nc else d0[t - nc]
            if v < low or v > high:
                continue
            if bitmap:
                hit = mark[v - low]
            else:
                at = np.searchsorted(first, v)
                hit = at < len(first) and first[at] == v
            if hit:
                cand[m] = t
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
                lo = 0
                hi = n
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if _cmp(seed, sorder[mid], keys, i, p) < 0:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < n and _cmp(seed, sorder[lo], keys, i, p) == 0:
                    keys[:, kept] = keys[:, i]
                    ann[kept] = ann[i]
                    kept += 1
            m = kept
            keys = keys[:, :m].copy()
        order = _bucketed(keys, first) if p == 1 else _sorted_keys(keys)
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
        for r in range(n):  # each seed row's group: binary search over the groups
            lo = 0
            hi = g
            while lo < hi:
                mid = (lo + hi) >> 1
                if _cmp(keys, gfirst[mid], seed, r, p) < 0:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < g and _cmp(keys, gfirst[lo], seed, r, p) == 0:
                node[r] = lo
        return uvals[:u].copy(), starts[: g + 1].copy(), usums[:u].copy(), node, biggest


@dataclass(frozen=True)
class Warmed:
    """What :func:`warm_up` did: seconds, compiled functions (one per signature) loaded
    from numba's disk cache and compiled afresh, and the cache directory (None: no
    disk cache)."""

    seconds: float
    from_cache: int
    compiled: int
    cache_dir: str | None


_LOCK = threading.Lock()
_WARMED: list[Warmed] = []
_THREAD_LOCK = threading.Lock()
_THREAD: list[threading.Thread] = []


def _dispatchers() -> list[Any]:
    return [lookup, intersect, count, _count_two, seeded_sums, descend, near_level]


def _tally() -> tuple[int, int]:
    hits = misses = 0
    for d in _dispatchers():
        s = d.stats
        hits += sum(s.cache_hits.values())
        misses += sum(s.cache_misses.values())
    return hits, misses


def _run_searches(k: int) -> None:
    """Each search once on a tiny index of ``k`` sorted lists of int64 keys (the types
    the kernel passes), so numba compiles (or loads) those signatures."""
    vals = tuple(np.array([1, 2, 3], dtype=np.int64) for _ in range(k))
    starts = tuple(np.array([0, 3], dtype=np.int64) for _ in range(k))
    nodes = tuple(np.zeros(1, dtype=np.int64) for _ in range(k))
    proposer = np.zeros(1, dtype=np.int64)
    skip = np.zeros(1, dtype=np.int64)
    take = np.array([3], dtype=np.int64)
    lookup(vals[0], starts[0], nodes[0], np.array([2], dtype=np.int64))
    intersect(vals, starts, nodes, proposer, skip, take, 3)
    count(vals, starts, nodes, proposer, skip, take)
    w = np.ones(1, dtype=np.int64)
    seeded_sums(vals, starts, vals, nodes, vals, starts, vals, nodes, w)
    if k == 2:  # the one-level seeded path over binary relations
        descend(vals[:1], starts[:1], vals[:1])
        near_level(vals[:2], w, vals[:2], w, vals[:1])


def warm_up() -> Warmed | None:
    """Compile the kernel's searches for the usual arguments now, or load them from disk.

    Covers int64 keys and bags of two and three relations per variable (what
    triangles, paths and chains use; other argument types compile when first
    met).  Logs one INFO line on the ``"faq"`` logger (``kernel ready in ...``).
    Runs once per process; later calls return the first call's figures.

    Returns
    -------
    Warmed or None
        Seconds taken and how many compiled functions came from numba's disk
        cache or were compiled; None without numba.
    """
    if not NUMBA:
        return None
    with _LOCK:
        if _WARMED:
            return _WARMED[0]
        t0 = time.perf_counter()
        hits0, misses0 = _tally()
        for k in (2, 3):
            _run_searches(k)
        hits, misses = _tally()
        where = getattr(lookup.stats, "cache_path", None)  # None without a disk cache
        done = Warmed(time.perf_counter() - t0, hits - hits0, misses - misses0, where)
        _WARMED.append(done)
    log.info(
        "kernel ready in %.2f s: %d compiled function(s) loaded from numba's disk cache, "
        "%d compiled now (cache: %s)",
        done.seconds,
        done.from_cache,
        done.compiled,
        done.cache_dir or "none, no writable directory",
    )
    return done


def warm_up_in_background() -> threading.Thread | None:
    """Start :func:`warm_up` in a thread (once per process) and return it.

    The searches release the GIL and numba compiles under its own lock, so a
    solve that needs them meanwhile waits for that compilation instead of
    repeating it.  The thread is not a daemon: a process that ends at once
    waits for it (at most the compile time) and leaves the disk cache
    complete.  None without numba, or when the work is already done.
    """
    if not NUMBA or _WARMED:
        return None
    with _THREAD_LOCK:
        if _THREAD:
            return _THREAD[0]
        t = threading.Thread(target=_quiet_warm_up, name="faq-kernel-warm-up")
        _THREAD.append(t)
    t.start()
    return t


def _quiet_warm_up() -> None:
    """:func:`warm_up` for a thread: a failure is logged, the kernel then compiles on use."""
    try:
        warm_up()
    except Exception:  # noqa: BLE001 - a warm-up must never break the caller's process
        log.warning("kernel warm-up failed; the kernel compiles when first used", exc_info=True)
