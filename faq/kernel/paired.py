"""Rules of two atoms over keyed tables, by lookups and one pair join: no plan, no trie.

A recursive rule such as ``D(y) :- D(x), E(x, y)`` (shortest paths, reachability)
is, at each round of a maintained fixpoint, a semiring vector-times-matrix step:
the rows of ``D`` that changed, joined with the rows of ``E`` they reach.  Here that
step is what it is: one lookup of the other atom's rows in its
:class:`faq.kernel.KeyedTable` (binary searches, no scan) and one
:func:`faq.kernel.join.pair_join`; or, where the rows in hand bind the other atom's
whole key (``D(x)`` read at the ``x`` of the edges), its annotations read at those keys
(:meth:`~faq.kernel.KeyedTable.values_at`) and multiplied in, with no join.
:func:`paired_delta` is the delta rule's term (one relation changed);
:func:`paired_at` is the rule's output at some keys of its head (the *rederive* step of
delete-and-rederive), also for a rule of one atom (``D(x) :- S(x)``: the atom's rows at
those keys).

Both return exactly what the general path returns (:func:`faq.solve_delta`'s
:meth:`~faq.delta_local.LocalDelta._pair_term`, which joins the same rows the same
way), and decline (None) where they do not apply: not two atoms (one or two for
``paired_at``), a relation that appears twice, an atom that repeats a variable, a ⊕
that is not idempotent (the general kernel's sums run in another order, which floats
and overflow checks can tell apart), or a join that :func:`~faq.kernel.join.pair_join`
declines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from faq.kernel.join import pair_join
from faq.kernel.keyed import KeyedTable
from faq.kernel.merge import match_keys
from faq.kernel.seeded import seeded_delta
from faq.kernel.table import Table, group_reduce
from semirings.local import LocalOps, distinct

__all__ = ["Term", "keyed_delta", "paired_at", "paired_delta"]

Atoms = Sequence[tuple[str, tuple[str, ...]]]


Term = tuple[int, tuple[str, ...], str, bool]
"""How one term of :func:`keyed_delta` ran: the atom whose change it reads, its variable
order, its method (``"wcoj"``: seeded joins; ``"pair"``), and whether it was skipped
(another relation of it is empty: nothing to join)."""


def keyed_delta(
    atoms: Atoms,
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
) -> tuple[Table, tuple[Term, ...]] | None:
    """ΔQ when ``deltas`` are ⊕-ed into relations all held as keyed tables, by the runners
    made for them, and how each term ran; None where none applies (the general driver
    path runs then).  Annotations in a ring of integers: every term as seeded joins on the
    relations' tries (:func:`faq.kernel.seeded.seeded_delta`); a rule of two atoms with one
    relation changed and ⊕ idempotent: :func:`paired_delta`.  ``atoms`` have no constants;
    ``deltas`` are consolidated and non-empty (columns by position)."""
    if any(rel not in keyed for rel, _ in atoms):
        return None

    def skipped(i: int) -> bool:
        return any(
            j != i and keyed[rel].rows == 0 and not (j < i and rel in deltas)
            for j, (rel, _) in enumerate(atoms)
        )

    got = seeded_delta(atoms, head, ops, keyed, deltas)
    if got is not None:
        return got[0], tuple((i, order, "wcoj", skipped(i)) for i, order in got[1])
    paired = paired_delta(atoms, head, ops, keyed, deltas)
    if paired is None:
        return None
    change, i, order = paired
    return change, ((i, order, "pair", skipped(i)),)


def paired_delta(
    atoms: Atoms,
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
) -> tuple[Table, int, tuple[str, ...]] | None:
    """ΔQ of a rule of two atoms when one relation's change ``deltas`` is ⊕-ed in: the
    change joined with the other atom's current rows that share its values, ⊗-multiplied
    and ⊕-reduced onto ``head`` (no zeros); with the index of the changed atom and the
    variables joined on, then the others.  None where it does not apply (see the module
    docstring, and: not exactly one relation changed, the other one not keyed).

    Parameters
    ----------
    atoms : sequence of (relation, variables)
        The rule's two atoms (no constants).
    head : tuple of str
        The output variables.
    ops : LocalOps
        The semiring's operations (an idempotent ⊕).
    keyed : mapping of str to KeyedTable
        The relations before the change (the unchanged one at least).
    deltas : mapping of str to Table
        The consolidated change of one relation (columns by position).
    """
    pair = _atoms(atoms, ops)
    if pair is None or len(pair) != 2 or len(deltas) != 1:
        return None
    (ra, va), (rb, vb) = pair
    if rb in deltas:
        i, (ra, va), (rb, vb) = 1, (rb, vb), (ra, va)
    else:
        i = 0
    if ra not in deltas or rb not in keyed:
        return None
    change = Table(va, deltas[ra].cols, deltas[ra].values)
    got = _joined(change, i == 0, pair, keyed[rb], vb, head, ops)
    return None if got is None else (got[0], i, got[1])


def paired_at(
    atoms: Atoms,
    head: tuple[str, ...],
    ops: LocalOps,
    keyed: Mapping[str, KeyedTable],
    groups: Sequence[np.ndarray],
) -> tuple[Table, tuple[str, ...]] | None:
    """The output of a rule of one or two atoms at the keys ``groups`` of its head (one
    array per head variable, distinct rows): the rows of an atom that holds every head
    variable at those keys, joined with the other atom's rows that share their values (or
    ⊕-reduced onto the head, for one atom); with the variables joined on, then the
    others.  None where it does not apply (see the module docstring, and: no head, no
    atom holding the whole head, a relation not keyed).

    Parameters
    ----------
    atoms : sequence of (relation, variables)
        The rule's one or two atoms (no constants).
    head : tuple of str
        The output variables (at least one).
    ops : LocalOps
        The semiring's operations (an idempotent ⊕).
    keyed : mapping of str to KeyedTable
        The relations.
    groups : sequence of numpy arrays
        The head keys to compute.
    """
    pair = _atoms(atoms, ops)
    if pair is None or not head or any(rel not in keyed for rel, _ in pair):
        return None
    at = next((i for i, (_, vs) in enumerate(pair) if set(head) <= set(vs)), None)
    if at is None:
        return None
    ra, va = pair[at]
    rows = keyed[ra].lookup([{va.index(v): distinct(c) for v, c in zip(head, groups, strict=True)}])
    mine = Table(va, rows.cols, rows.values)
    if len(head) > 1:  # each column matched one of its values: keep the whole keys asked
        hit, _ = match_keys(tuple(mine.col(v) for v in head), groups)
        mine = mine.take(np.flatnonzero(hit))
    if len(pair) == 1:  # the atom's rows at those keys, ⊕-reduced onto the head
        out = Table(head, tuple(mine.col(v) for v in head), mine.values, unique=False)
        return group_reduce(out, head, ops), tuple(v for v in va if v not in head)
    rb, vb = pair[1 - at]
    return _joined(mine, at == 0, pair, keyed[rb], vb, head, ops)


def _joined(
    rows: Table,
    first: bool,
    atoms: Atoms,
    other: KeyedTable,
    vars_: tuple[str, ...],
    head: tuple[str, ...],
    ops: LocalOps,
) -> tuple[Table, tuple[str, ...]] | None:
    """``rows`` (of one atom of ``atoms``, the first where ``first``) joined with the other
    atom's keyed relation ``other`` over its variables ``vars_``, ⊗-multiplied and
    ⊕-reduced onto ``head``; with the variables joined on, then the others.  None where
    they share no variable or :func:`~faq.kernel.join.pair_join` declines."""
    shared = [v for v in rows.vars if v in vars_]
    if not shared:
        return None
    got = _at_whole_keys(rows, first, other, vars_, head, ops)
    if got is None:
        found = other.lookup([{vars_.index(v): distinct(rows.col(v)) for v in shared}])
        them = Table(vars_, found.cols, found.values)
        got = pair_join(*((rows, them) if first else (them, rows)), head, ops)
    if got is None:
        return None
    rest = [v for _, vs in atoms for v in vs if v not in shared]
    return got, (*shared, *dict.fromkeys(rest))


def _at_whole_keys(
    rows: Table,
    first: bool,
    other: KeyedTable,
    vars_: tuple[str, ...],
    head: tuple[str, ...],
    ops: LocalOps,
) -> Table | None:
    """``rows`` ⊗ the other atom's annotation at each row's values of that atom's variables
    ``vars_`` (all bound by ``rows``: its whole key), ``rows``' first where ``first``,
    ⊕-reduced onto ``head``: the other relation read by :meth:`KeyedTable.values_at`, no
    lookup of rows and no join.  None where that atom has a variable ``rows`` lacks, where
    ``rows`` has no annotations, or where key kinds differ (the pair join decides those)."""
    if rows.values is None or not set(vars_) <= set(rows.vars):
        return None
    keys = [rows.col(v) for v in vars_]
    if any(k.dtype.kind != c.dtype.kind for k, c in zip(keys, other.base.cols, strict=True)):
        return None
    w = other.values_at(keys)
    values = ops.mul(rows.values, w) if first else ops.mul(w, rows.values)
    out = Table(head, tuple(rows.col(v) for v in head), values, unique=False)
    return group_reduce(out, head, ops)


def _atoms(atoms: Atoms, ops: LocalOps) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """The one or two atoms, or None where the module's functions do not apply."""
    out = tuple((rel, tuple(vs)) for rel, vs in atoms)
    if len(out) not in (1, 2) or not ops.semiring.idempotent:
        return None
    if len({rel for rel, _ in out}) != len(out) or any(len(set(vs)) != len(vs) for _, vs in out):
        return None
    return out
