"""Linear passes over many rows: whether key rows are in order, CSR rows spelled out.

The library runners hand back tens of millions of rows (a sparse chain's 25 million),
and what surrounds the library's call must then cost little more than reading them
once: numpy's spelling of these passes allocates an array or two per step (``np.repeat``
of a CSR pointer array: 0.4 s for 25 million rows; the row-order test of a read-back:
0.16 s), where a compiled loop writes once or only reads.  Without numba the same
results come from numpy.

* :func:`key_order`: whether the rows of key columns are strictly increasing, only
  non-decreasing, or neither (lexicographic, first column first);
* :func:`fills_box`: whether rows are every cell of a box of keys once, in row-major order
  (a dense array's cells, a dense product's output: read by a reshape, not a scatter);
* :func:`spread`: a value per row of a CSR pointer array, once for each of its entries
  (a trie level's values spelled out over the rows under them);
* :func:`csr_rows`: the row of every entry of a CSR matrix, plus an offset.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faq.kernel.compiled import NUMBA, jit
from faq.kernel.compiled_merge import spread_into
from semirings.local import has_nan

__all__ = ["DISORDERED", "NONDECREASING", "STRICT", "csr_rows", "fills_box", "key_order", "spread"]

DISORDERED, NONDECREASING, STRICT = 0, 1, 2
"""What :func:`key_order` finds: rows out of order, in order with repeats, strictly
increasing (in order and distinct)."""

if NUMBA:

    @jit(nogil=True)
    def _order_one(a):  # pragma: no cover - compiled
        out = 2
        for i in range(1, len(a)):
            if a[i - 1] > a[i]:
                return 0
            if a[i - 1] == a[i]:
                out = 1
        return out

    @jit(nogil=True)
    def _order_two(a, b):  # pragma: no cover - compiled
        out = 2
        for i in range(1, len(a)):
            x, y = a[i - 1], a[i]
            if x > y:
                return 0
            if x == y:
                u, v = b[i - 1], b[i]
                if u > v:
                    return 0
                if u == v:
                    out = 1
        return out


def key_order(cols: Sequence[np.ndarray]) -> int:
    """How the rows of ``cols`` (key columns of one length, the first most significant)
    are ordered: :data:`STRICT`, :data:`NONDECREASING` or :data:`DISORDERED`.

    Numeric and string columns are compared by value; a float column holding NaN and
    an object column are said to be :data:`DISORDERED` (their order is the kernel's
    sort's to decide).  Fewer than two rows, or no column, are :data:`STRICT`.
    """
    if not cols or len(cols[0]) < 2:
        return STRICT
    if any(c.dtype.kind not in "iubfU" for c in cols):
        return DISORDERED
    if any(has_nan(c) for c in cols):
        return DISORDERED
    if NUMBA and len(cols) <= 2 and all(c.dtype == np.int64 for c in cols):
        return int(_order_one(cols[0]) if len(cols) == 1 else _order_two(cols[0], cols[1]))
    undecided = np.ones(len(cols[0]) - 1, dtype=bool)
    for c in cols:
        before, after = c[:-1], c[1:]
        if np.any(undecided & (before > after)):
            return DISORDERED
        undecided &= before == after
        if not undecided.any():
            return STRICT
    return NONDECREASING


def fills_box(cols: Sequence[np.ndarray], cells: int) -> bool:
    """Whether the rows of ``cols``, each key inside a box of ``cells`` cells (the caller
    knows it: each column within its axis), are every cell once, in row-major order:
    as many rows as cells, strictly increasing keys (so distinct ones)."""
    return bool(cols) and len(cols[0]) == cells and key_order(cols) == STRICT


def spread(vals: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """``vals[r]`` once for every entry of row ``r`` of a CSR pointer array ``ptr``
    (starting at 0), in order: ``np.repeat(vals, np.diff(ptr))``, by one compiled loop
    without the GIL for int64 values (``np.repeat`` holds it throughout: a thread that
    spreads a trie's rows, as a fold does, stalls every other thread meanwhile)."""
    total = int(ptr[-1]) if len(ptr) > 1 else 0
    if NUMBA and vals.dtype == np.int64:
        out = np.empty(total, dtype=np.int64)
        spread_into(vals, ptr, out)
        return out
    return np.repeat(vals, np.diff(ptr))


def csr_rows(indptr: np.ndarray, lo: int = 0) -> np.ndarray:
    """``lo + r`` for every entry of row ``r`` of a CSR pointer array (int64, one per
    entry, in order)."""
    ptr = indptr.view(np.int64) if indptr.dtype == np.uint64 else indptr.astype(np.int64)
    n = max(len(ptr) - 1, 0)
    return spread(np.arange(lo, lo + n, dtype=np.int64), ptr)
