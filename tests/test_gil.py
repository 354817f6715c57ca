"""A tick's small compiled calls keep the GIL; large ones let other threads run.

A kernel compiled with ``nogil=True`` lets go of the GIL while it runs; if another thread
of the process is running Python, it takes the GIL and the tick waits up to Python's
switch interval (5 ms) to get it back.  A one-edge tick made some fifteen such calls, so
beside a busy Python thread it took about 12 ms instead of 0.4 ms.  Calls on at most
``gil_rows`` rows (a setting) now use the ``*_held`` variants, which keep the GIL.  No speed is
asserted: whether another thread's Python ran during a call (it makes no step for most
of a call that keeps the GIL, and keeps stepping beside one that does not).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import faq
import faq.kernel.compiled as compiled
from faq.kernel import KeyedTable, seeded
from faq.kernel.numba_jit import NUMBA
from faq.kernel.table import Table
from semirings import INTEGER
from semirings.local import local_ops

pytestmark = pytest.mark.skipif(not NUMBA, reason="numba is not installed")

OPS = local_ops(INTEGER)
TRI = [("E", ("a", "b")), ("E", ("b", "c")), ("E", ("a", "c"))]


def longest_pause(call) -> float:
    """The share of ``call()``'s time during which a thread running Python beside it made
    no step: the longest gap between the thread's steps, over the call's duration (about
    1 when the call keeps the GIL throughout, near 0 when it lets go)."""
    stamps: list[float] = []
    stop = threading.Event()
    started = threading.Event()

    def counter() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())
            started.set()

    t = threading.Thread(target=counter, daemon=True)
    t.start()
    started.wait(5)
    try:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join(5)
    inside = [x for x in stamps if t0 <= x <= t1]
    edges = [t0, *inside, t1]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False)) / (t1 - t0)


def big_lookup():
    """A lookup of 4M keys in a sorted list of 4M (a few hundred milliseconds)."""
    rng = np.random.default_rng(0)
    vals = np.sort(rng.choice(10**9, 4_000_000, replace=False)).astype(np.int64)
    starts = np.array([0, len(vals)], dtype=np.int64)
    nodes = np.zeros(len(vals), dtype=np.int64)
    return vals, starts, nodes, rng.permutation(vals)


def test_a_held_kernel_keeps_the_gil_and_the_plain_one_lets_go():
    args = big_lookup()
    compiled.lookup_held(*args)  # compiled, then timed
    assert longest_pause(lambda: compiled.lookup_held(*args)) > 0.5
    assert longest_pause(lambda: compiled.lookup(*args)) < 0.5
    assert np.array_equal(compiled.lookup_held(*args), compiled.lookup(*args))


def test_a_small_change_runs_the_held_kernels_and_a_large_one_the_others(monkeypatch):
    """Up to ``gil_rows`` seed rows one call that keeps the GIL (``binary_sums``, over binary
    relations), past it (or with ``gil_rows=0``) the plain kernels, a call each."""
    names = ("seeded_sums", "descend", "near_level")
    used: list[str] = []
    for full in (*names, *(f"{name}_held" for name in names), "binary_sums"):
        real = getattr(compiled, full)

        def spy(*args, _real=real, _full=full):
            used.append(_full)
            return _real(*args)

        monkeypatch.setattr(compiled, full, spy)
    rng = np.random.default_rng(1)
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, 300, (6000, 2)) if a < b}
    base = sorted(pairs)
    cols = tuple(np.array(c) for c in zip(*base, strict=True))
    kt = KeyedTable.of(Table(("c0", "c1"), cols, np.ones(len(base), np.int64)), OPS)
    kt = kt.plus(Table(("c0", "c1"), (np.array([0]), np.array([299])), np.ones(1, np.int64)))[
        0
    ]  # a log, so that the corrections' levels are read too
    rows = faq.settings().gil_rows
    for n, held, limit in ((1, True, rows), (rows + 1, False, rows), (1, False, 0)):
        fresh = sorted({(a, a + 1 + int(rng.integers(0, 5))) for a in range(n)})[:n]
        change = Table(
            ("c0", "c1"),
            tuple(np.array(c, dtype=np.int64) for c in zip(*fresh, strict=True)),
            np.ones(len(fresh), np.int64),
        )
        used.clear()
        with faq.settings(gil_rows=limit):  # 0: every call lets go of the GIL
            got = seeded.seeded_delta(TRI, (), OPS, {"E": kt}, {"E": change})
        assert got is not None
        if held:  # the levels and the sums in one call, which keeps the GIL
            assert used == ["binary_sums"] * 3, (n, used)
            continue
        assert used and not any(u.endswith("_held") for u in used), (n, used)
        assert set(used) == set(names)
