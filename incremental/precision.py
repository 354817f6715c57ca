"""Compensated sums for views over ``real``: no drift, no stuck ``inf``.

A ``real`` view adds floating-point changes to the same keys tick after tick.
Plain ``+`` loses whatever falls below the last bit of a large running sum:
insert 1e16, insert 1.0, retract 1e16 and the sum is 0.0 where a batch solve of
what is left gives 1.0; two rows of 1e308 overflow to ``inf``, and retracting
one leaves ``inf``.  A driver-resident ``real`` view therefore keeps:

* per tuple of every relation and per key of the output, the running sum as
  an unevaluated pair ``hi + lo`` (a *double-double*: ``hi`` the sum rounded
  to a float, ``lo`` what rounding dropped), updated with Knuth's exact
  TwoSum, the normalised form of Neumaier's compensated summation.  ``hi``
  is what queries read; ``lo`` is kept beside it, only where it is not zero;
* per output key, the *magnitude* of what flowed into it since it was last
  computed from the relations: over the ticks, the sum of ``|term|`` over the
  terms each ΔQ added (the delta queries over absolute annotations).  A key
  whose sum is much smaller than that magnitude (:data:`REANCHOR`) has
  cancelled, and the rounding errors of the delta queries that built it may
  be most of what is left; so does a key that is ``inf`` or ``nan``.  Such
  keys are *re-anchored*: recomputed from the relations by a query restricted
  to them, as a batch solve would compute them.

Everything here is vectorised over keys (numpy, no Python loop per row).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faq.kernel import KeyedTable, Table, match_keys
from incremental.deltas import Rows
from semirings.local import group_starts

__all__ = [
    "REANCHOR",
    "add",
    "aligned",
    "delta_sums",
    "keyed",
    "needs_anchor",
    "refuse_overflow",
    "segment_sum",
    "two_sum",
    "union_keys",
]

REANCHOR = 2.0**-20
"""An output key is recomputed from the relations when ``|sum| < REANCHOR · magnitude``
(about 1e-6): the rounding errors of the ticks that built it are at most a few units
of 2⁻⁵³ of the magnitude, so a key kept incrementally is within about 2⁻³³ (1e-10)
of its value, relative to itself, times the number of terms a tick summed into it."""


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s = fl(a + b)`` and the exact rounding error ``e`` (``a + b = s + e``), elementwise.

    Knuth's TwoSum: no branch, no assumption on the order of magnitudes.  Where ``s``
    is not finite the error is reported as zero.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def add(
    ah: np.ndarray, al: np.ndarray, bh: np.ndarray, bl: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(ah + al) + (bh + bl)`` as a normalised pair ``(hi, lo)``, ``hi = fl(hi + lo)``."""
    s, e = two_sum(ah, bh)
    with np.errstate(over="ignore", invalid="ignore"):
        e = e + (al + bl)
    return two_sum(s, e)


def segment_sum(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment ``values[starts[i]:starts[i + 1]]``, its sum as a pair ``(hi, lo)``.

    A pairwise reduction with :func:`add`: ``log2`` of the longest segment rounds of
    vectorised operations.
    """
    h = np.asarray(values, dtype=np.float64).copy()
    lo = np.zeros(len(h))
    n = len(starts)
    if not n:
        return h[:0], lo[:0]
    lens = np.diff(np.append(starts, len(h)))
    seg = np.repeat(np.arange(n), lens)
    pos = np.arange(len(h)) - np.asarray(starts)[seg]
    while len(h) > n:
        even = pos % 2 == 0
        a = np.flatnonzero(even & (pos + 1 < lens[seg]))
        h[a], lo[a] = add(h[a], lo[a], h[a + 1], lo[a + 1])
        h, lo, seg, pos = h[even], lo[even], seg[even], pos[even] // 2
        lens = (lens + 1) // 2
    return h, lo


def aligned(kt: KeyedTable, cols: Sequence[np.ndarray], rows: int) -> np.ndarray:
    """The values of ``kt`` at the ``rows`` keys ``cols`` (distinct), 0.0 where absent."""
    out = np.zeros(rows)
    found = kt.at(cols)
    if not found.rows:
        return out
    assert found.values is not None
    if not kt.vars:
        out[:] = found.values[0]
        return out
    hit, at = match_keys(cols, found.cols)
    out[hit] = found.values[at[hit]]
    return out


def needs_anchor(hi: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """True where a maintained sum has cancelled against its magnitude, or is not finite."""
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(hi) | (np.abs(hi) < REANCHOR * magnitude)


def keyed(vars_: tuple[str, ...], cols: Sequence[np.ndarray], values: np.ndarray) -> Table:
    """A table of float annotations (zeros kept: for :meth:`KeyedTable.replace`)."""
    return Table(vars_, tuple(cols), np.asarray(values, dtype=np.float64))


def union_keys(a: Table, b: Table) -> tuple[np.ndarray, ...]:
    """The distinct keys of ``a`` and ``b`` together (same variables)."""
    if not a.vars:
        return ()
    both = [np.concatenate([x, y]) for x, y in zip(a.cols, b.cols, strict=True)]
    if not len(both[0]):
        return tuple(both)
    perm, starts = group_starts(both)
    return tuple(c[perm[starts]] for c in both)


def delta_sums(d: Rows) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """The distinct keys of ``d`` and each one's ``Σ weight · value`` as a compensated pair
    ``(hi, lo)``; keys whose sum is zero are dropped."""
    w = d.weights.astype(np.float64)
    with np.errstate(over="ignore"):
        values = w if d.values is None else d.values.astype(np.float64) * w
    if d.cols:
        perm, starts = group_starts(list(d.cols))
    else:
        perm, starts = np.arange(d.rows), np.zeros(min(d.rows, 1), dtype=np.int64)
    hi, lo = segment_sum(values[perm], starts)
    keep = np.flatnonzero(hi != 0)
    first = perm[starts][keep]
    return tuple(c[first] for c in d.cols), hi[keep], lo[keep]


def refuse_overflow(name: str, cols: Sequence[np.ndarray], hi: np.ndarray) -> None:
    """OverflowError when a tuple's annotation would leave the float64 range."""
    bad = np.flatnonzero(~np.isfinite(hi))
    if len(bad):
        key = tuple(c[bad[0]].item() if hasattr(c[bad[0]], "item") else c[bad[0]] for c in cols)
        raise OverflowError(
            f"refused: relation {name!r} would hold {len(bad)} tuple(s) whose 'real' "
            f"annotation is beyond the float64 range (±1.8e308), e.g. {key!r}; the view is "
            "unchanged"
        )
