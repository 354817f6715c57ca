"""The kernel's compiled searches (numba), numba's disk cache of them, and their warm-up.

The searches of :mod:`faq.kernel` over sorted tries (and the seeded delta rule's
kernels, :mod:`faq.kernel.compiled_seeded`) are compiled by numba the first time
they run: all of them about 18 s on this project's 2-core test machine.  They are
compiled with ``cache=True``: numba keeps the machine code
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.kernel.compiled_keyed import plus_log, plus_log_held
from faq.kernel.compiled_merge import merge_two, patch_rows, spread_into
from faq.kernel.compiled_paths import path_overdelete, path_repair
from faq.kernel.compiled_seeded import (
    binary_sums,
    descend,
    descend_held,
    near_level,
    near_level_held,
    seeded_sums,
    seeded_sums_held,
)
from faq.kernel.numba_jit import NUMBA, gallop, jit, lower_bound
from faq.plan.settings import current

__all__ = [
    "NUMBA",
    "Warmed",
    "binary_sums",
    "count",
    "descend",
    "descend_held",
    "intersect",
    "jit",
    "lookup",
    "lookup_held",
    "near_level",
    "near_level_held",
    "seeded_sums",
    "seeded_sums_held",
    "sized",
    "warm_up",
    "warm_up_in_background",
]

log = logging.getLogger("faq")


if NUMBA:

    @jit(nogil=True)
    def lookup(vals, starts, nodes, x):  # pragma: no cover - compiled
        """The child of each ``nodes[i]`` whose value is ``x[i]``, or -1 (binary search)."""
        out = np.empty(len(x), np.int64)
        for i in range(len(x)):
            end = starts[nodes[i] + 1]
            lo = lower_bound(vals, starts[nodes[i]], end, x[i])
            out[i] = lo if lo < end and vals[lo] == x[i] else -1
        return out

    @jit()
    def lookup_held(vals, starts, nodes, x):  # pragma: no cover - compiled
        """:func:`lookup`, the GIL kept while it runs (a call on a few keys: see
        :func:`sized`)."""
        return lookup(vals, starts, nodes, x)

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
                    c = gallop(vals[j], cur[j], end[j], v)
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
                    c = gallop(vals[j], cur[j], end[j], v)
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
                    ib = gallop(b, ib, eb, a[ia])
                    if ib >= eb:
                        break
                    if b[ib] == a[ia]:
                        n += 1
                    ia += 1
            out[i] = n
        return out


def sized(rows: int, plain: Any, held: Any) -> Any:
    """The kernel for a call on ``rows`` rows: ``held`` (the variant that keeps the GIL)
    up to the ``gil_rows`` setting, else ``plain`` (which lets other threads run)."""
    return held if rows <= current().gil_rows else plain


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
    return [
        lookup, intersect, count, _count_two, seeded_sums, descend, near_level, merge_two,
        spread_into, lookup_held, seeded_sums_held, descend_held, near_level_held, patch_rows,
        plus_log, plus_log_held, binary_sums,
    ]  # fmt: skip


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
    lookup_held(vals[0], starts[0], nodes[0], np.array([2], dtype=np.int64))
    intersect(vals, starts, nodes, proposer, skip, take, 3)
    count(vals, starts, nodes, proposer, skip, take)
    w = np.ones(1, dtype=np.int64)
    seeded_sums(vals, starts, vals, nodes, vals, starts, vals, nodes, w)
    seeded_sums_held(vals, starts, vals, nodes, vals, starts, vals, nodes, w)
    if k == 3:  # a whole key of three columns, or two of them (search_trie)
        for d in (descend, descend_held):
            d(vals, starts, vals, 0, np.zeros(1, np.int32))
            d(vals[:2], starts[:2], vals[:2], 0, np.zeros(1, np.int32))
    if k == 2:  # the one-level seeded path over binary relations
        for d, n in ((descend, near_level), (descend_held, near_level_held)):
            d(vals, starts, vals, 0, np.zeros(1, np.int32))  # a whole key (search_trie)
            d(vals[:1], starts[:1], vals[:1], 0, np.zeros(1, np.int32))
            n(vals[:2], w, vals[:2], w, vals[:1], True)
        # the one-level path's single call for a small seed over binary relations
        two_at = (np.zeros(1, np.int32),) * 2
        pick = np.zeros(2, dtype=np.int64)
        binary_sums(vals[:2], w, pick, vals[:2], starts[:2], pick, two_at, vals[:2], starts[:2],
                    vals[:2], vals[:2], vals[:2], vals[:2], vals[:2], vals[:2], vals[:2],
                    np.ones(2, np.bool_), 1.0)  # fmt: skip
        # a fold's merge of a binary relation (on the helper thread: loaded here, not there)
        one, three = np.ones(1, dtype=np.int64), np.ones(3, dtype=np.int64)
        merge_two(one, starts[0], vals[0], three, skip, skip, take, one)
        spread_into(vals[0], starts[0], np.empty(3, dtype=np.int64))  # a trie's rows
        # a change written into a keyed table's log: keys of one to three columns, the
        # annotations and the base's under them (merge.patched)
        for width in (3, 4, 5):
            cols = tuple(np.array([1, 2, 3], dtype=np.int64) for _ in range(width))
            patch_rows(cols[0], cols, proposer, take, tuple(c[:1] for c in cols), proposer)
        # a change added into a keyed table of binary keys and its log (merge.plus_logged)
        two = np.array([0, 3], dtype=np.int64)
        for add in (plus_log, plus_log_held):
            add(vals, starts, 0, np.zeros(1, np.int32), vals[0], nodes, w, np.zeros(2, np.int64),
                two, vals[0], (*vals, vals[0], vals[0]))  # fmt: skip
        # a maintained path program's walks (incremental.linear_dred)
        e, f = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        root = np.zeros(1, dtype=np.int64)
        path_overdelete(e, f, e, f, e, root, e, f, e, e, f, e, e, e, f, np.inf, False, 1e-9)
        edges = (e, root, e, f, e, e, f)
        path_repair(e, f, e, f, e, *edges, e, e, e, f, e, e, f, e, e, f, np.inf, True, False)


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
