"""Rows to the cells of a HyperCube grid: which cells each row goes to, and which atoms it
serves in each.

A step partitioned over the cluster (:mod:`faq.spark.partitioned`) cuts its bag's variables
into a grid of cells; a row of an atom goes to the cells whose coordinate on each of the
atom's variables is the hash of the row's value modulo that variable's share, and to every
coordinate of the variables the atom lacks.  Several atoms may read one relation (a
self-join): a row then goes once to each cell any of them sends it to, with the bit mask of
the atoms it serves there.  This module computes that placement for a batch of rows, with no
Spark: the task that packs a relation's rows for the shuffle (:mod:`faq.spark.routing`) calls
it.

* :func:`key_hash`: the 64-bit hash of integer keys every atom of a variable agrees on (the
  finaliser of SplitMix64: equal keys, equal hashes, on every machine);
* :class:`Route`: one atom's reading of the rows in one grid (the row's first cell, -1 where
  it goes to none of the grid's cells, and the offsets of the cells it spreads over);
* :func:`placed`: the rows of every cell, in row order, with their masks, from the routes
  of the atoms reading the rows (compiled; numpy without numba).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from faq.kernel.numba_jit import NUMBA, jit

__all__ = ["Route", "key_hash", "placed"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def key_hash(keys: np.ndarray) -> np.ndarray:
    """The 64-bit hash of each integer key (SplitMix64's finaliser), as ``uint64``.

    Any integer dtype is read as its int64 value, so a key hashes alike whatever column
    type it came in.
    """
    x = np.asarray(keys).astype(np.int64, copy=False).view(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class Route:
    """How one atom sends a batch of rows to the cells of one grid.

    Attributes
    ----------
    bit : int
        The atom's bit in the masks (``1 << i`` for the ``i``-th atom reading the rows).
    base : numpy.ndarray
        Per row, the number of its first cell (int64): the grid's first cell plus the
        row's own coordinates times their strides; -1 where the row goes to none of the
        grid's cells (a grid of heavy values the row does not hold).
    offsets : numpy.ndarray
        The offsets from ``base`` of every cell the row goes to (int64, ``[0]`` when the
        atom holds every variable the grid cuts): one per coordinate of the variables
        the atom lacks.
    """

    bit: int
    base: np.ndarray
    offsets: np.ndarray


def placed(
    rows: int, routes: Sequence[Route], cells: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a batch of ``rows`` rows goes: the rows of every cell and their masks.

    Parameters
    ----------
    rows : int
        The rows of the batch.
    routes : sequence of Route
        Every atom's route in every grid (an atom may have one per grid).
    cells : int
        The cells of every grid together; every ``base + offset`` is below it.

    Returns
    -------
    (row, mask, starts) : tuple of numpy.ndarray
        ``row[starts[c]:starts[c + 1]]`` are the rows cell ``c`` receives, increasing, and
        ``mask`` the OR of the bits of the atoms that send each there (int64 arrays;
        ``starts`` has ``cells + 1`` entries).
    """
    if not routes or rows == 0:
        return _empty(cells)
    bases = np.stack([np.asarray(r.base, dtype=np.int64) for r in routes])
    offsets = [np.asarray(r.offsets, dtype=np.int64) for r in routes]
    ptr = np.zeros(len(routes) + 1, dtype=np.int64)
    np.cumsum([len(o) for o in offsets], out=ptr[1:])
    flat = np.concatenate(offsets)
    bits = np.array([r.bit for r in routes], dtype=np.int64)
    if NUMBA:
        return _placed(bases, flat, ptr, bits, cells)
    return _placed_numpy(bases, flat, ptr, bits, cells)


def _empty(cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    e = np.empty(0, dtype=np.int64)
    return e, e.copy(), np.zeros(cells + 1, dtype=np.int64)


@jit(nogil=True, inline="always")
def _touch(bases, offsets, ptr, bits, r, mark, touched):  # pragma: no cover - compiled
    """The cells row ``r`` goes to, written to ``touched`` (how many is returned), each
    with the OR of its atoms' bits in ``mark``."""
    t = 0
    for k in range(bases.shape[0]):
        b = bases[k, r]
        if b < 0:
            continue
        for p in range(ptr[k], ptr[k + 1]):
            c = b + offsets[p]
            if mark[c] == 0:
                touched[t] = c
                t += 1
            mark[c] |= bits[k]
    return t


@jit(nogil=True)
def _placed(bases, offsets, ptr, bits, cells):  # pragma: no cover - compiled
    n = bases.shape[1]
    mark = np.zeros(cells, dtype=np.int64)
    touched = np.empty(max(ptr[-1], 1), dtype=np.int64)
    starts = np.zeros(cells + 1, dtype=np.int64)
    for r in range(n):  # first pass: how many rows each cell receives
        t = _touch(bases, offsets, ptr, bits, r, mark, touched)
        for i in range(t):
            starts[touched[i] + 1] += 1
            mark[touched[i]] = 0
    for c in range(cells):
        starts[c + 1] += starts[c]
    pos = starts[:-1].copy()
    row = np.empty(starts[cells], dtype=np.int64)
    mask = np.empty(starts[cells], dtype=np.int64)
    for r in range(n):  # second pass: the rows and their masks, cell by cell
        t = _touch(bases, offsets, ptr, bits, r, mark, touched)
        for i in range(t):
            c = touched[i]
            row[pos[c]] = r
            mask[pos[c]] = mark[c]
            pos[c] += 1
            mark[c] = 0
    return row, mask, starts


def _placed_numpy(
    bases: np.ndarray, offsets: np.ndarray, ptr: np.ndarray, bits: np.ndarray, cells: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_placed` without numba: every (cell, row) pair coded, sorted, OR-combined."""
    n = bases.shape[1]
    codes, masks = [], []
    for k in range(len(bits)):
        at = np.flatnonzero(bases[k] >= 0)
        off = offsets[ptr[k] : ptr[k + 1]]
        cell = (bases[k, at][:, None] + off[None, :]).ravel()
        codes.append(cell * n + np.repeat(at, len(off)))
        masks.append(np.full(len(cell), bits[k], dtype=np.int64))
    code = np.concatenate(codes)
    if not len(code):
        return _empty(cells)
    order = np.argsort(code, kind="stable")
    code = code[order]
    first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    mask = np.bitwise_or.reduceat(np.concatenate(masks)[order], first)
    code = code[first]
    cell = code // n
    starts = np.searchsorted(cell, np.arange(cells + 1), side="left").astype(np.int64)
    return code % n, mask.astype(np.int64), starts
