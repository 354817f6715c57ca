"""A program view's answer witnesses (``IncrementalView(program, witness=True)``).

A program's answer is defined by rules over the inputs and defined relations; a key's
witness is the bound values of the first of those rules that attains the key's value
over the fixpoint, named as ``program.solve(witness=True)`` names them (a name that is
one of the answer's columns gets ``_`` appended; None where that rule has no such
variable).  :class:`ProgramWitnesses` keeps them tick by tick, with the lookups and
joins of :mod:`incremental.witnesses`, for answer rules that read the inputs and the
answer only, of at most :data:`incremental.witnesses.DIRECT_BOUND` bound variables
(single-source paths, reachability); :func:`program_witnesses` finds them for any other
program when ``result()`` is read (each rule defining the answer solved once with
``witness=True`` over the maintained relations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from faq import VALUE, Factor, Program, Query, Rule
from faq.kernel import VIA_BASE, VIA_EDGE, KeyedTable, Table, match_keys
from incremental.deltas import Rows
from incremental.protocol import How
from incremental.regimes import Maintained
from incremental.tables import distinct_keys
from incremental.witnesses import (
    DIRECT_BOUND,
    best_rows,
    index_of,
    no_rows,
    restricted,
    stale_keys,
    swapped,
    worsened,
)
from semirings.local import equal

if TYPE_CHECKING:
    from incremental.linear_dred import Walked

__all__ = ["ProgramWitnesses", "program_witnesses"]


def program_witnesses(
    program: Program, relation: Callable[[str], Factor], answer: Factor, how: How
) -> pd.DataFrame:
    """The witness frame of a program view's ``answer`` (``relation`` reads the view's
    current relations, inputs and defined ones), as ``program.solve(witness=True)``
    gives it: per key, the bound variables of the first rule defining the answer that
    attains its value over the maintained relations (a name that is one of the answer's
    columns gets ``_`` appended; None where that rule has no such variable).

    Each rule defining the answer is solved once with ``witness=True`` over the current
    relations (one non-recursive round: the fixpoint itself is maintained, not solved).
    """
    order, join, _ = how
    head = program.vars[program.answer]
    t = answer.to_table()
    S = program.semiring
    values = t.values if t.values is not None else np.full(t.rows, S.one)
    want = pd.DataFrame({v: c for v, c in zip(head, t.cols, strict=True)})
    want[VALUE] = values
    found = want[list(head)].copy()
    done = np.zeros(len(found), dtype=bool)
    for r in program.rules:
        if r.name != program.answer:
            continue
        names = dict(zip(r.head, head, strict=True))
        for b in r.bound:
            names[b] = b
            while names[b] in head:
                names[b] += "_"
            if names[b] not in found:
                found[names[b]] = None
        if not len(found) or any(relation(n).to_table().rows == 0 for n in r.relations):
            continue
        rels = {n: relation(n) for n in r.relations}
        w = Query(r, S).solve(order=order, join=join, witness=True, **rels).witness_frame
        w = w.rename(columns=names).astype({names[b]: object for b in r.bound})
        m = want.merge(w, on=list(head), how="left", suffixes=("", "_rule"), indicator=True)
        hit = (m["_merge"] == "both").to_numpy() & ~done
        hit &= equal(m[f"{VALUE}_rule"].to_numpy(), m[VALUE].to_numpy())
        for b in r.bound:
            found.loc[hit, names[b]] = m.loc[hit, names[b]].to_numpy()
        done |= hit
    return found.sort_values(list(head)).reset_index(drop=True) if head else found


@dataclass(frozen=True)
class ProgramWitnesses:
    """A program view's answer witnesses, kept tick by tick: per rule defining the answer,
    an index of the keys it attains (the answer's value), each with its bound values.

    For programs whose answer rules read the inputs and the answer only, each with at
    most :data:`DIRECT_BOUND` bound variables (single-source paths, reachability); others
    find their witnesses when ``result()`` is read (:func:`program_witnesses`).  After a
    tick, every rule is looked at again at the keys whose answer changed and at those
    whose indexed witness used a tuple that got worse; elsewhere an indexed rule still
    attains its key (its tuples are as good, the answer the same), and every key keeps at
    least one rule, the rules of a key being found together.
    """

    rules: tuple[Rule, ...]
    indexes: tuple[KeyedTable, ...]

    @classmethod
    def of(cls, program: Program, rels: Mapping[str, Any], how: How) -> ProgramWitnesses | None:
        """The witnesses of the whole answer over ``rels`` (the view's relations), or None
        when the program's answer rules are not kept tick by tick."""
        A = program.answer
        rules = tuple(r for r in program.rules if r.name == A)
        if any(
            len(r.bound) > DIRECT_BOUND
            or any(n != A and n not in program.inputs for n in r.relations)
            for r in rules
        ):
            return None
        keys = rels[A].table()
        found = [_attaining(program, r, rels, keys) for r in rules]
        return cls(rules, tuple(index_of(f) for f in found))

    def after(
        self,
        program: Program,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        deltas: Mapping[str, Rows],
        change: Table,
    ) -> ProgramWitnesses:
        """The witnesses after a tick from relations ``old`` to ``new`` (``deltas`` of the
        inputs, ``change`` of the answer: its changed keys)."""
        A = program.answer
        mo, mn = _as_maintained(program, old), _as_maintained(program, new)
        changed = {n: d.cols for n, d in deltas.items() if d.rows}
        if change.rows:
            changed[A] = change.cols
        worse = {
            n: worsened(mo, mn, n, Rows(c, None, np.ones(len(c[0]) if c else 1, np.int64)))
            for n, c in changed.items()
        }
        worse = {n: t for n, t in worse.items() if t.rows}
        keys = [change.cols] if change.rows else []
        for r, index in zip(self.rules, self.indexes, strict=True):
            stale = stale_keys(r, index, worse)
            if stale is not None:
                keys.append(stale)
        if not keys:
            return self
        at = distinct_keys(tuple(np.concatenate(c) for c in zip(*keys, strict=True)))
        live = new[A].at(at)
        indexes = []
        for r, index in zip(self.rules, self.indexes, strict=True):
            old_rows = index.at_prefix(at) if index.rows else None
            found = _attaining(program, r, new, live)
            indexes.append(swapped(index, old_rows, found))
        return ProgramWitnesses(self.rules, tuple(indexes))

    def walked(self, program: Program, walk: Walked) -> ProgramWitnesses | None:
        """The witnesses after a tick the compiled walks took (:mod:`incremental.linear_dred`),
        from what they set: each key they set gets the edge its value came from (the
        recursive rule's row ``(y, x)``) or the base rule (its row ``(y,)``), and a key they
        deleted none.  Every other key keeps its witness: one whose witness got worse had
        a tight derivation through it, so the walks marked and set it.  None where the
        answer's rules are not the walked rule and one base rule without bound variables
        (whose value is then attributed to it); :meth:`after` finds them then."""
        walked = program.rules[walk.rule]
        base = [r for r in self.rules if r != walked]
        if len(base) != 1 or base[0].bound or len(self.rules) != 2 or walked not in self.rules:
            return None
        keys, preds = walk.keys, walk.preds
        indexes = []
        for r, index in zip(self.rules, self.indexes, strict=True):
            old_rows = index.at_prefix((keys,)) if index.rows and len(keys) else None
            pick = np.flatnonzero(walk.kinds == (VIA_BASE if r == base[0] else VIA_EDGE))
            cols = (keys[pick],) if r == base[0] else (keys[pick], preds[pick])
            found = Table(r.head + r.bound, cols, None)
            indexes.append(swapped(index, old_rows, found))
        return ProgramWitnesses(self.rules, tuple(indexes))

    def frame(self, program: Program, answer: Factor) -> pd.DataFrame:
        """The witness frame of ``answer``, named as ``program.solve(witness=True)``
        names it (see :func:`program_witnesses`)."""
        head = program.vars[program.answer]
        t = answer.to_table()
        found = pd.DataFrame({v: c for v, c in zip(head, t.cols, strict=True)})
        done = np.zeros(t.rows, dtype=bool)
        for r, index in zip(self.rules, self.indexes, strict=True):
            names = _names(r, head)
            for b in r.bound:
                if names[b] not in found:
                    found[names[b]] = None
            w = index.table()
            hit, at = match_keys(t.cols, w.cols[: len(head)]) if head else (done | True, None)
            hit &= ~done
            for i, b in enumerate(r.bound):
                col = found[names[b]].to_numpy(dtype=object).copy()
                col[hit] = w.cols[len(head) + i][at[hit]] if at is not None else w.cols[i][0]
                found[names[b]] = col
            done |= hit
        return found.sort_values(list(head)).reset_index(drop=True) if head else found


def _names(r: Rule, head: tuple[str, ...]) -> dict[str, str]:
    """A rule's bound variables as a program's witness frame names them (``_`` appended
    while a name is one of the answer's columns)."""
    names = {}
    for b in r.bound:
        names[b] = b
        while names[b] in head:
            names[b] += "_"
    return names


def _as_maintained(program: Program, rels: Mapping[str, Any]) -> Maintained:
    """A program view's relations seen as a view's (for the lookups of this module)."""
    A = program.answer
    keys = {n: r.vars for n, r in rels.items()}
    return Maintained(program.rules[0], program.semiring, keys, dict(rels), {}, rels[A])


def _attaining(program: Program, r: Rule, rels: Mapping[str, Any], keys: Table) -> Table:
    """Rule ``r``'s best rows (head, then bound values) at the answer keys ``keys`` (a
    table of the answer: keys and values), those attaining the answer's value."""
    m = replace(_as_maintained(program, rels), rule=r)
    cols = r.head + r.bound
    if not keys.rows:
        return Table(cols, tuple(keys.cols) + tuple(np.empty(0, np.int64) for _ in r.bound), None)
    reached = restricted(m, keys.cols)
    if any(t.rows == 0 for t in reached.values()):
        return no_rows(r, reached)
    best = best_rows(r, program.semiring, reached, keys)
    found, at = match_keys(best.cols[: len(r.head)], keys.cols)
    assert found.all() and best.values is not None and keys.values is not None
    want = keys.values[at]
    if m.regime == "boolean":
        want = np.ones(len(at), dtype=bool)
    pick = np.flatnonzero(equal(best.values, want))
    return Table(cols, tuple(c[pick] for c in best.cols), None)
