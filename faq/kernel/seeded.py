"""The delta rule over keyed tables: each term one seeded Generic Join on the state's tries.

A term of the delta rule joins a relation's change with the other atoms'
relations.  When those are :class:`faq.kernel.KeyedTable` s over a ring of
integers (an incremental view's counts: ``integer``, counting kept in ℤ,
booleans kept as counts of rows), each relation is its base plus a small
correction (:meth:`faq.kernel.KeyedTable.correction`: the overrides minus the
base at their keys), and the term is

    Δ ⋈ (B₂ ⊕ X₂) ⋈ ... ⋈ (B_k ⊕ X_k)  =  ⊕ over every choice of Bⱼ or Xⱼ per atom,

where ``X`` is the correction (with the relation's own change ⊕-ed in for
atoms before the changed one: the ordered delta rule reads the new state
there).  Each product is one :func:`faq.kernel.generic_join` seeded by the
change: the bases are read through tries built once per base (binary searches
at the change's values, nothing copied), the corrections through tries of
their rows that share a value with the change.  A tick then costs the
searches its change makes, not the rows it reaches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import product

import numpy as np

import faq.kernel.compiled as compiled
from faq.kernel.join import generic_join
from faq.kernel.keyed import KeyedTable
from faq.kernel.table import Table, concat, group_reduce
from faq.kernel.trie import NUMBA, Trie, build_trie
from faq.plan.settings import current
from semirings.local import LocalOps, distinct, group_starts, member

__all__ = ["MAX_CHOICES", "seeded_delta", "trie_orders"]

MAX_CHOICES = 64
"""Most products (base or correction per atom) a term is split into; past it, None."""

Atoms = Sequence[tuple[str, tuple[str, ...]]]


def seeded_delta(
    atoms: Atoms,
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
) -> tuple[Table, list[tuple[int, tuple[str, ...]]]] | None:
    """ΔQ of the join of ``atoms`` ⊕-aggregated onto ``head`` when ``deltas`` are ⊕-ed into
    ``keyed``, and (atom, variable order) of each term; None where this does not apply.

    Parameters
    ----------
    atoms : sequence of (relation, variables)
        The rule's atoms (no constants).
    head : tuple of str
        The output variables.
    ops : LocalOps
        A ring of integers (the operations of the annotations of ``keyed``).
    keyed : mapping of str to KeyedTable
        Every relation before the change.
    deltas : mapping of str to Table
        The consolidated changes (columns by position), non-empty.

    Returns
    -------
    (Table, list) or None
        None when an atom repeats a variable, a relation is not keyed or has no
        variables, the annotations are not integers, a term would split into
        more than :data:`MAX_CHOICES` products, or some variable shares no atom
        with what a change binds (the caller's general path handles those).
    """
    if np.dtype(ops.dtype).kind not in "iu" or getattr(ops.semiring, "neg", None) is None:
        return None
    atoms = tuple((rel, tuple(vars_)) for rel, vars_ in atoms)
    orders = _orders(atoms)
    if orders is None or any(rel not in keyed for rel, _ in atoms):
        return None
    plans = [(i, orders[i]) for i, (rel, _) in enumerate(atoms) if rel in deltas]
    if any(order is None for _, order in plans):
        return None
    parts: list[Table] = []
    read: dict[tuple[str, bool], _Read | None] = {}  # the corrections, read once a change
    for i, order in plans:
        parts.extend(_term(atoms, i, order, head, ops, keyed, deltas, read))
    if parts:
        change = group_reduce(concat(parts, ops), head, ops)
    else:
        change = Table(head, tuple(np.empty(0, np.int64) for _ in head), np.empty(0, ops.dtype))
    return change, plans


def trie_orders(atoms: Atoms) -> dict[str, set[tuple[int, ...]]]:
    """The column orders (by position) in which :func:`seeded_delta` reads each relation's
    base, whichever relations change, plus each relation's own column order (for reads at
    keys): build them ahead (:meth:`faq.kernel.KeyedTable.trie`) and no tick pays them."""
    out: dict[str, set[tuple[int, ...]]] = {}
    for rel, vars_ in atoms:
        out.setdefault(rel, set()).add(tuple(range(len(vars_))))
    if any(len(set(vs)) != len(vs) for _, vs in atoms):
        return out
    for i, (_, vars_) in enumerate(atoms):
        order = _order(vars_, [v for j, (_, v) in enumerate(atoms) if j != i])
        if order is None:
            continue
        for j, (rel, vs) in enumerate(atoms):
            if j != i:
                out[rel].add(tuple(vs.index(v) for v in order if v in vs))
    return out


@lru_cache(maxsize=256)
def _orders(
    atoms: tuple[tuple[str, tuple[str, ...]], ...],
) -> tuple[tuple[str, ...] | None, ...] | None:
    """The variable order of each atom's term (:func:`_order`; None where a variable shares
    no atom with what its change binds), or None when the rule does not suit
    :func:`seeded_delta` (a repeated variable, an atom without variables, too many
    products).  It depends on the rule only: worked out once per rule, not per tick."""
    if any(not vs or len(set(vs)) != len(vs) for _, vs in atoms):
        return None
    if 2 ** (len(atoms) - 1) > MAX_CHOICES:
        return None
    others = [[v for j, (_, v) in enumerate(atoms) if j != i] for i in range(len(atoms))]
    return tuple(_order(vs, rest) for (_, vs), rest in zip(atoms, others, strict=True))


def _order(seed: tuple[str, ...], others: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The seed's variables, then greedily the variable sharing an atom with the most bound
    ones; None when one shares none."""
    bound = list(dict.fromkeys(seed))
    rest = {v for vs in others for v in vs} - set(bound)
    while rest:

        def score(v: str) -> int:
            return sum(1 for vs in others if v in vs and any(b in vs for b in bound))

        best = max(sorted(rest), key=score)
        if score(best) == 0:
            return None
        bound.append(best)
        rest.discard(best)
    return tuple(bound)


def _term(
    atoms: Atoms,
    i: int,
    order: tuple[str, ...],
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
    read: dict[tuple[str, bool], _Read | None] | None = None,
) -> list[Table]:
    """The products of term ``i`` (its change joined with each choice of base or correction;
    ``read``: see :func:`_one_level`)."""
    rel, vars_ = atoms[i]
    d = deltas[rel]
    seed = Table(vars_, d.cols, d.values)
    fast = _one_level(atoms, i, order, head, ops, keyed, deltas, seed, read)
    if fast is not None:
        return fast
    seen = {v: distinct(c) for v, c in zip(vars_, d.cols, strict=True)}
    choices: list[tuple[tuple[Table, Trie] | None, tuple[Table, Trie] | None]] = []
    for j, (r, vs) in enumerate(atoms):
        if j == i:
            continue
        sub = tuple(v for v in order if v in vs)
        kt = keyed[r]
        base = None
        if kt.base.rows:
            tr = kt.trie([vs.index(v) for v in sub])
            base = (Table(vs, kt.base.cols, kt.base.values), replace(tr, order=sub))
        x = kt.correction()
        if j < i and r in deltas:  # the new state: ⊕ the relation's change
            x = concat([x, deltas[r]], ops)
        x = _near(x, vs, seen)
        small = None
        if x.rows:
            t = Table(vs, x.cols, x.values, unique=False)
            small = (t, build_trie(t, sub, ops))
        choices.append((base, small))
    out = []
    for pick in product(*choices):
        if any(p is None for p in pick):
            continue
        tables = [p[0] for p in pick if p is not None]
        tries = [p[1] for p in pick if p is not None]
        out.append(generic_join(tables, order, head, ops, seed=seed, tries=tries))
    return out


def _one_level(
    atoms: Atoms,
    i: int,
    order: tuple[str, ...],
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
    seed: Table,
    read: dict[tuple[str, bool], _Read | None] | None = None,
) -> list[Table] | None:
    """:func:`_term` compiled (:func:`faq.kernel.compiled.seeded_sums`) when the seed binds
    all variables but one, ``x``, every other atom holds ``x``, the head is among the seed's
    variables, keys and annotations are int64: per seed row, the sum over ``x`` of the
    product over atoms of base plus correction, one pass with no product split and no
    numpy call per product.  None where that does not apply, or where a partial sum could
    come near the int64 range (the general path then runs as before).  ``read``: each
    relation's correction as the kernels read it (:func:`_read`), shared by the terms of
    one change."""
    arms = _arms(tuple(atoms), i, order, head, seed.vars) if NUMBA else None
    if arms is None or np.dtype(ops.dtype) != _I64 or not _int64(seed.cols):
        return None
    n = seed.rows
    w = seed.values if seed.values is not None else np.ones(n, dtype=np.int64)
    s = _Seed(
        i, keyed, deltas, tuple(np.ascontiguousarray(c) for c in seed.cols),
        np.ascontiguousarray(w, dtype=_I64), {} if read is None else read,
    )  # fmt: skip
    got = _binary(arms, s) if n <= current().gil_rows else None
    if got is None:
        got = _stepwise(arms, s)
    if got is None or got[1] >= _SAFE:
        return None
    out = got[0]
    if not head:
        total = int(out.sum())
        return [Table((), (), np.array([total], dtype=np.int64))] if total else []
    keep = np.flatnonzero(out)
    cols = tuple(seed.col(v)[keep] for v in head)
    return [Table(head, cols, out[keep], unique=False)]


def _stepwise(
    arms: tuple[tuple[int, str, tuple[int, ...], tuple[int, ...]], ...], s: _Seed
) -> tuple[np.ndarray, float] | None:
    """:func:`_one_level`'s sums and their bound, each atom's levels found by a call of
    their own (:func:`faq.kernel.compiled.descend`, :func:`faq.kernel.compiled.near_level`),
    then the sums on all the driver's cores for a large seed (:func:`_sums`); None where
    a trie or a correction is not int64, or a correction's sums could leave it."""
    n = len(s.w)
    descend = compiled.sized(n, compiled.descend, compiled.descend_held)
    near_level = compiled.sized(n, compiled.near_level, compiled.near_level_held)
    base: list[tuple[np.ndarray, ...]] = []  # per atom: values, offsets, annotations, nodes
    corr: list[tuple[np.ndarray, ...]] = []
    for j, r, cols_at, seed_at in arms:
        kt = s.keyed[r]
        prefix = tuple(s.cols[k] for k in seed_at)
        level: tuple[np.ndarray, ...]
        if kt.base.rows:
            sk = kt.trie(cols_at).seek()
            if sk is None:
                return None
            if prefix:
                nodes = descend(sk.vals, sk.starts, prefix, sk.low, sk.at)
            else:  # an atom of x alone: every seed row reaches the root
                nodes = np.zeros(n, dtype=np.int64)
            level = (sk.last, sk.last_starts, sk.values, nodes)
        else:
            level = _no_level(n)
        base.append(level)
        rd = s.correction(j, r)
        if rd is None:
            return None
        if not rd.rows:
            level = _no_level(n)
        else:
            cols, dcols, in_order = rd.ordered(cols_at)
            if prefix:
                *level, biggest = near_level(cols, rd.values, dcols, rd.dvalues, prefix, in_order)
            else:  # an atom of x alone: one node, which every seed row reaches
                *level, biggest = _flat_level(cols[0], rd.values, dcols[0], rd.dvalues, n)
            if biggest >= _SAFE:
                return None
        corr.append(tuple(level))
    return _sums(
        [tuple(a) for a in zip(*base, strict=True)],
        [tuple(a) for a in zip(*corr, strict=True)],
        s.w,
    )


def _binary(
    arms: tuple[tuple[int, str, tuple[int, ...], tuple[int, ...]], ...], s: _Seed
) -> tuple[np.ndarray, float] | None:
    """:func:`_stepwise` in one compiled call (:func:`faq.kernel.compiled.binary_sums`)
    where every atom but the seed's is a binary relation (one seed column reaches the
    last variable) with a base: a small seed's levels and sums, with no numpy call and
    no return to Python per atom (a one-edge tick of a triangle count: three calls, one a
    term, where the atom-by-atom path makes fifteen).  None where that does not apply,
    :func:`_stepwise` then runs; the sums past the range a correction may reach: a bound
    of ``_SAFE``."""
    if any(len(at) != 2 for _, _, at, _ in arms):
        return None
    per_atom = []
    for j, r, cols_at, seed_at in arms:
        kt = s.keyed[r]
        sk = kt.trie(cols_at).seek() if kt.base.rows else None
        rd = s.correction(j, r)
        if sk is None or rd is None:
            return None
        none = (_NONE, _NONE)  # an empty correction: no rows in either column
        cols, dcols, in_order = rd.ordered(cols_at) if rd.rows else (none, none, False)
        per_atom.append(
            (seed_at[0], sk.vals[0], sk.starts[0], sk.low, sk.at, sk.last, sk.last_starts,
             sk.values, *cols, rd.values, *dcols, rd.dvalues, in_order)
        )  # fmt: skip
    pick, vals0, starts0, low, at_, vals1, starts1, values, *corr, csorted = zip(
        *per_atom, strict=True
    )
    out, bound, biggest = compiled.binary_sums(
        s.cols, s.w, np.array(pick, dtype=_I64), vals0, starts0, np.array(low, dtype=_I64), at_,
        vals1, starts1, values, *corr, np.array(csorted), _SAFE,
    )  # fmt: skip
    return out, (bound if biggest < _SAFE else _SAFE)


@dataclass(frozen=True)
class _Seed:
    """A term's seed as :func:`_one_level`'s kernels read it: the changed atom ``i``, the
    relations before the change and the changes, the seed's columns and weights (int64,
    contiguous), and the corrections read so far for this change (shared by its terms)."""

    i: int
    keyed: Mapping[str, KeyedTable]
    deltas: Mapping[str, Table]
    cols: tuple[np.ndarray, ...]
    w: np.ndarray
    read: dict[tuple[str, bool], _Read | None]

    def correction(self, j: int, r: str) -> _Read | None:
        """Relation ``r``'s correction as atom ``j`` of the term reads it (:func:`_read`),
        read once per change: with the relation's change ⊕-ed in for an atom before the
        changed one (the new state), without it after."""
        key = (r, j < self.i and r in self.deltas)
        if key not in self.read:
            self.read[key] = _read(self.keyed[r], self.deltas[r] if key[1] else None)
        return self.read[key]


@dataclass(frozen=True)
class _Read:
    """A relation's correction (:meth:`faq.kernel.KeyedTable.correction`) as the compiled
    kernels read it: its columns and annotations (int64, contiguous), whether its rows
    are in key order, and the change ⊕-ed in for a term's atoms before the changed one
    (``dcols``/``dvalues``; empty: none)."""

    cols: tuple[np.ndarray, ...]
    values: np.ndarray
    in_order: bool
    dcols: tuple[np.ndarray, ...]
    dvalues: np.ndarray

    @property
    def rows(self) -> int:
        """Rows of the correction and of the change."""
        return len(self.values) + len(self.dvalues)

    def ordered(
        self, cols_at: tuple[int, ...]
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], bool]:
        """The correction's and the change's columns in an atom's order ``cols_at`` (the
        change's: the correction's where there is none), and whether the correction's
        rows are sorted in that order (only its own key order is kept sorted)."""
        cols = tuple(self.cols[k] for k in cols_at)
        dcols = tuple(self.dcols[k] for k in cols_at) if self.dcols else cols
        return cols, dcols, self.in_order and cols_at == tuple(range(len(cols_at)))


def _read(kt: KeyedTable, d: Table | None) -> _Read | None:
    """:class:`_Read` of ``kt``'s correction, with the change ``d`` (None: none); None where
    a column or annotation is not int64."""
    corr = kt.correction()
    c = np.ascontiguousarray
    if not corr.rows and (d is None or not d.rows):
        return _Read((), _NONE, False, (), _NONE)
    cols = tuple(c(x) for x in corr.cols)
    values = c(corr.values)
    dcols: tuple[np.ndarray, ...] = ()
    dvalues = _NONE
    if d is not None:
        dcols, dvalues = tuple(c(x) for x in d.cols), c(d.values)
    if not _int64((*cols, values, *dcols, dvalues)):
        return None
    in_order = bool(corr.rows) and kt.in_key_order()
    return _Read(cols, values, in_order, dcols, dvalues)


def _sums(
    base: list[tuple[np.ndarray, ...]], corr: list[tuple[np.ndarray, ...]], w: np.ndarray
) -> tuple[np.ndarray, float]:
    """:func:`faq.kernel.compiled.seeded_sums` of the levels ``base`` and ``corr`` (values,
    offsets, annotations, and the node each seed row reaches), on all the driver's
    cores when the seed holds at least ``delta_thread_rows`` rows: seed row ``r`` goes
    to thread ``r mod T`` (a hub's rows, adjacent in the seed's key order, spread
    over the threads), whose sums are put back in place and bounds added."""
    n = len(w)
    T = _CORES if n >= max(2, current().delta_thread_rows) else 1
    if T == 1:
        sums = compiled.sized(n, compiled.seeded_sums, compiled.seeded_sums_held)
        return sums(*base, *corr, w)  # type: ignore[no-any-return]

    def part(t: int) -> tuple[np.ndarray, float]:
        def rows(nodes: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            return tuple(np.ascontiguousarray(a[t::T]) for a in nodes)

        b, c = (*base[:3], rows(base[3])), (*corr[:3], rows(corr[3]))
        return compiled.seeded_sums(*b, *c, np.ascontiguousarray(w[t::T]))  # type: ignore[no-any-return]

    out = np.empty(n, dtype=np.int64)
    bound = 0.0
    for t, (got, b) in enumerate(_POOL.map(part, range(T))):
        out[t::T] = got
        bound += b
    return out, bound


_CORES = max(1, os.cpu_count() or 1)
_POOL = ThreadPoolExecutor(max_workers=_CORES, thread_name_prefix="faq-delta")
"""The threads a large change's compiled sums run on (the kernel releases the GIL)."""


@lru_cache(maxsize=256)
def _arms(
    atoms: tuple[tuple[str, tuple[str, ...]], ...],
    i: int,
    order: tuple[str, ...],
    head: tuple[str, ...],
    seed_vars: tuple[str, ...],
) -> tuple[tuple[int, str, tuple[int, ...], tuple[int, ...]], ...] | None:
    """What :func:`_one_level` reads of each atom but the seed's ``i``, worked out once per
    rule and term, not per tick: its index, relation, columns in the term's order (the last
    variable last) and the seed's columns of the other variables; None when the term does
    not suit :func:`_one_level` (the seed does not bind all variables but the last, the
    head is not among the seed's variables, or an atom lacks the last variable)."""
    if len(order) != len(seed_vars) + 1 or not set(head) <= set(seed_vars):
        return None
    x = order[-1]
    arms = []
    for j, (r, vs) in enumerate(atoms):
        if j == i:
            continue
        if x not in vs:
            return None
        sub = tuple(v for v in order if v in vs)  # x last
        arms.append(
            (j, r, tuple(vs.index(v) for v in sub), tuple(seed_vars.index(v) for v in sub[:-1]))
        )
    return tuple(arms)


def _int64(arrays: Sequence[np.ndarray]) -> bool:
    """Whether every array holds int64 (what the compiled kernels were built for)."""
    return all(a.dtype == _I64 for a in arrays)


_I64 = np.dtype(np.int64)


_SAFE = 2.0**59
"""Bound on a term's partial sums under which :func:`_one_level` runs: seven terms (the
most :data:`MAX_CHOICES` allows) of them still sum inside int64."""


_NONE = np.zeros(0, dtype=np.int64)


def _flat_level(
    col: np.ndarray, values: np.ndarray, dcol: np.ndarray, dvalues: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """What :func:`faq.kernel.compiled.near_level` gives for an atom of one column: the
    rows ``col``/``values`` plus ``dcol``/``dvalues``, equal values summed and zero sums
    dropped, as one node that all ``n`` seed rows reach (none when it is empty), and the
    largest sum of ``|annotation|`` over a value."""
    keys = np.concatenate([col, dcol]) if len(dvalues) else col
    vals = np.concatenate([values, dvalues]) if len(dvalues) else values
    if not len(keys):
        return _NONE, np.zeros(2, dtype=np.int64), _NONE, np.full(n, -1, dtype=np.int64), 0.0
    perm, starts = group_starts([keys])
    sums = np.add.reduceat(vals[perm], starts)  # |sums| ≤ mags: checked by the caller
    mags = np.add.reduceat(np.abs(vals[perm].astype(np.float64)), starts)
    keep = np.flatnonzero(sums)
    uniq, sums = keys[perm[starts]][keep], sums[keep]
    nodes = np.zeros(n, dtype=np.int64) if len(uniq) else np.full(n, -1, dtype=np.int64)
    return uniq, np.array([0, len(uniq)], dtype=np.int64), sums, nodes, float(mags.max())


def _no_level(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The level of an empty table: no values, one empty node, no seed row reaches it."""
    return _NONE, np.zeros(1, dtype=np.int64), _NONE, np.full(n, -1, dtype=np.int64)


def _near(t: Table, vars_: tuple[str, ...], seen: Mapping[str, np.ndarray]) -> Table:
    """The rows of ``t`` (columns by position, over ``vars_``) whose values of the seed's
    variables are among the seed's: the only ones a seeded join can reach."""
    if not t.rows:
        return t
    mask = None
    for k, v in enumerate(vars_):
        if v in seen:
            hit = member(t.cols[k], seen[v])
            mask = hit if mask is None else mask & hit
    if mask is None or mask.all():
        return t
    return t.take(np.flatnonzero(mask))
