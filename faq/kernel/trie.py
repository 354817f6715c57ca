"""Tries: a table indexed by a variable order, one CSR level per variable.

Level ``d`` of a :class:`Trie` holds the distinct prefixes of length
``d + 1``, each level's values sorted within their parent, with CSR offsets to
the children (the index of Leapfrog Triejoin and of the edge-frames and
BiGJoin systems).  :func:`faq.kernel.join.generic_join` binds variables by
searching these levels; the searches run compiled with numba when it is
installed (:mod:`faq.kernel.compiled`), else as a vectorised numpy search over
composite keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

import faq.kernel.compiled as compiled
from faq.kernel.rows import spread
from faq.kernel.table import Table
from semirings.local import LocalOps, distinct, sort_rows

__all__ = ["NUMBA", "Trie", "build_trie", "trie_rows"]

NUMBA = compiled.NUMBA
"""Whether the searches run compiled (numba is installed); else the numpy fallback runs."""


@dataclass(frozen=True, eq=False)
class Trie:
    """A table indexed by a variable order (a CSR per level).

    ``vals[d]`` are the values of the nodes at depth ``d + 1`` (the distinct
    prefixes of length ``d + 1``), sorted within each parent; the children of
    node ``p`` at depth ``d`` are ``vals[d][starts[d][p]:starts[d][p + 1]]``
    (depth 0 is the root, one node).  ``values`` holds the annotation of
    each deepest node (row), or None when all are one.
    """

    order: tuple[str, ...]
    vals: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]
    values: np.ndarray | None
    rows: int
    _composite: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    _first: list[tuple[int, np.ndarray]] = field(default_factory=list)  # first_index, once
    _range: list[tuple[float, float]] = field(default_factory=list)  # value_range, once
    _seek: list[Seek | None] = field(default_factory=list)  # seek(), once

    @property
    def depth(self) -> int:
        """Number of levels (the table's arity)."""
        return len(self.order)

    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        extra = 0 if self.values is None else self.values.nbytes
        return sum(a.nbytes for a in (*self.vals, *self.starts)) + extra

    def count(self, d: int, nodes: np.ndarray) -> np.ndarray:
        """How many children each node (at depth ``d``) has."""
        s = self.starts[d]
        return s[nodes + 1] - s[nodes]

    def value_range(self) -> tuple[float, float] | None:
        """The least and the greatest annotation (None: no row, or no annotations),
        computed once per trie."""
        if self.values is None or not len(self.values):
            return None
        if not self._range:
            self._range.append((float(self.values.min()), float(self.values.max())))
        return self._range[0]

    def first_index(self) -> tuple[int, np.ndarray]:
        """A dense index of the first level's integer values: ``(low, at)`` where
        ``at[v - low]`` is the node of value ``v`` (-1: absent), computed once per trie;
        ``(0, empty)`` when the values are not integers or span more than four times
        their number (plus 65,536), where a binary search is the cheaper index."""
        if not self._first:
            first = self.vals[0] if self.vals else np.zeros(0, dtype=np.int64)
            low, at = 0, np.zeros(0, dtype=np.int32)
            if len(first) and first.dtype == np.int64:
                low, high = int(first[0]), int(first[-1])  # sorted: the root's children
                if high - low < 4 * len(first) + (1 << 16):
                    at = np.full(high - low + 1, -1, dtype=np.int32)
                    at[first - low] = np.arange(len(first), dtype=np.int32)
            self._first.append((low, at))
        return self._first[0]

    def build_index(self) -> None:
        """Build now what a tick reads of this trie (:meth:`first_index`, :meth:`seek`, and
        the sorted keys :meth:`lookup` searches at a level of values the compiled lookup
        does not take: floats, strings), so that a view's first tick, or the first after a
        fold, does not pay for it."""
        self.first_index()
        self.seek()
        for d, vals in enumerate(self.vals):
            if not (NUMBA and vals.dtype.kind in "iu"):
                self._composite_keys(d)

    def seek(self) -> Seek | None:
        """What a compiled descent to the last level and a read of it take
        (:class:`Seek`), gathered once per trie; None unless every level and the
        annotations are int64 (the compiled kernels' type), or the trie has no level (a
        relation without keys)."""
        if not self._seek:
            got = None
            arrays = (*self.vals, *self.starts)
            typed = all(a.dtype == np.int64 for a in arrays)
            if self.vals and self.values is not None and typed and self.values.dtype == np.int64:
                low, at = self.first_index()
                got = Seek(
                    self.vals[:-1], self.starts[:-1], low, at, self.vals[-1], self.starts[-1],
                    self.values,
                )  # fmt: skip
            self._seek.append(got)
        return self._seek[0]

    def lookup(self, d: int, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The child of each node (depth ``d``) whose value is ``x``, or -1 where none is."""
        if len(x) == 0:
            return np.empty(0, dtype=np.int64)
        if NUMBA and x.dtype.kind in "iu":
            find = compiled.sized(len(x), compiled.lookup, compiled.lookup_held)
            return find(self.vals[d], self.starts[d], nodes, x)  # type: ignore[no-any-return]
        return self._lookup_numpy(d, nodes, x)

    def _composite_keys(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Level ``d``'s distinct values and its composite (parent, rank of value) keys,
        sorted as the trie is; built once."""
        hit = self._composite.get(d)
        if hit is None:
            vals, starts = self.vals[d], self.starts[d]
            domain = distinct(vals)
            parent = np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))
            comp = parent * len(domain) + np.searchsorted(domain, vals)
            hit = self._composite[d] = (domain, comp)
        return hit

    def _lookup_numpy(self, d: int, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
        domain, comp = self._composite_keys(d)
        out = np.full(len(x), -1, dtype=np.int64)
        if len(domain) == 0:
            return out
        rank = np.minimum(np.searchsorted(domain, x), len(domain) - 1)
        ok = domain[rank] == x
        key = nodes * len(domain) + rank
        pos = np.minimum(np.searchsorted(comp, key), len(comp) - 1)
        found = ok & (comp[pos] == key)
        out[found] = pos[found]
        return out


@dataclass(frozen=True)
class Seek:
    """A trie of int64 levels and annotations as the compiled delta kernels read it: the
    levels above the last (``vals``, ``starts``) with the first one's dense index
    (``low``, ``at``: :meth:`Trie.first_index`), then the last level's values, offsets
    and annotations."""

    vals: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]
    low: int
    at: np.ndarray
    last: np.ndarray
    last_starts: np.ndarray
    values: np.ndarray


def build_trie(
    table: Table, order: Sequence[str], ops: LocalOps | None = None, presorted: bool = False
) -> Trie:
    """Index ``table`` by the variable ``order`` (a permutation of its vars).

    A table whose keys may repeat (``unique`` False) is consolidated on the
    way (equal keys ⊕-combined with ``ops``, zero annotations dropped): the
    sort that builds the index finds them.  ``presorted``: the rows are already
    sorted by ``order`` (no sort).
    """
    order = tuple(order)
    if sorted(order) != sorted(table.vars):
        raise ValueError(f"trie order {order} is not a permutation of {table.vars}")
    keys = [table.col(v) for v in order]
    n = table.rows
    if presorted:
        values = table.values
    else:
        perm = sort_rows(keys) if keys and n else np.arange(n)
        keys = [k[perm] for k in keys]
        values = None if table.values is None else table.values[perm]
    if not table.unique and n > 1:
        keys, values, n = _merge_repeats(keys, values, n, table, ops)
    vals: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    parent_of_row = np.zeros(n, dtype=np.int64)
    n_parent = 1
    boundary = np.zeros(n, dtype=bool)
    if n:
        boundary[0] = True
    for k in keys:
        if n > 1:
            boundary[1:] |= k[1:] != k[:-1]
        first = np.flatnonzero(boundary)
        vals.append(k[first])
        starts.append(
            np.searchsorted(parent_of_row[first], np.arange(n_parent + 1)).astype(np.int64)
        )
        parent_of_row = np.cumsum(boundary) - 1
        n_parent = len(first)
    if keys and n_parent != n:
        raise ValueError(f"table over {table.vars} has repeated keys; consolidate it first")
    return Trie(order, tuple(vals), tuple(starts), values, n)


def trie_rows(tr: Trie) -> list[np.ndarray]:
    """The key columns of ``tr``'s rows (one per level), in the trie's sorted order."""
    if not tr.order:
        return []
    leaf = np.arange(len(tr.vals[-1]) + 1, dtype=np.int64)  # first row under each node
    cols = [np.empty(0)] * tr.depth
    for d in range(tr.depth - 1, -1, -1):
        cols[d] = spread(tr.vals[d], leaf)
        leaf = leaf[tr.starts[d]]
    return cols


def _merge_repeats(
    keys: list[np.ndarray],
    values: np.ndarray | None,
    n: int,
    table: Table,
    ops: LocalOps | None,
) -> tuple[list[np.ndarray], np.ndarray | None, int]:
    """Sorted rows with equal keys ⊕-combined and zero annotations dropped (the ``n``
    rows of a nullary table are all one key)."""
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    if change.all():
        return keys, values, n
    if ops is None:
        raise ValueError(f"table over {table.vars} has repeated keys; consolidate it first")
    starts = np.flatnonzero(change)
    if values is None:
        values = ops.ones(np.diff(np.append(starts, n)))
    else:
        values = ops.reduceat(values, starts)
    keys = [k[starts] for k in keys]
    alive = ops.nonzero(values)
    if not alive.all():
        idx = np.flatnonzero(alive)
        keys, values = [k[idx] for k in keys], values[idx]
    return keys, values, len(values)
