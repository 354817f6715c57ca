"""Maintaining the least fixpoint of a program under changes of its inputs (one tick).

:class:`Fixpoint` takes the relations of a program before a tick (keyed tables
in the driver), the changes of its input relations (annotations before and
after at the changed keys: :class:`Diff`) and updates the defined relations one
strongly connected group at a time, in dependency order; a group whose rules
read no changed relation is left as it is.  Inside a group, by the semiring:

* **idempotent ⊕** (boolean, min-plus, max-plus, max-product, a user max/min
  semiring): *delete and rederive* (DRed).  A changed input key whose new
  annotation is not at least as good as the old one (deleted, or worse) is
  *worsened*; one that got better is *improved*.

  1. Over-delete: the keys of the group with a derivation (in the old state)
     through a worsened fact, then, to a fixpoint, those with a derivation
     through a key already marked.  Each step is the delta rule
     (:func:`faq.solve_delta`) over the old relations with the marked rows as
     the change.  For a semiring that declares ``tight`` (min-plus, max-plus,
     max-product, boolean) only the derivations whose value equals the key's value
     count (*tight* ones; a worse derivation never supports it since ⊕ is selective
     and ⊗ strictly monotone there; a relative tolerance of 1e-9 counts near-equal
     floats as equal, which only marks more); for other semirings every derivation
     does.
  2. The marked keys are removed and rederived: every rule of the group
     restricted to them (a delta query whose change is the marked keys), over
     the new inputs and the remaining state.
  3. The delta terms of the improved inputs, with the rederived values, seed
     semi-naive rounds that continue from the remaining state.

* **rings and counting** (``integer``, ``real``, counting in ℤ), a *linear*
  recursive group (every recursive rule reads one atom of the group): the view keeps
  the batch's rounds ``Δ₀, Δ₁, …`` (their sum is the group's state) and maintains
  them, every round at once (:mod:`incremental.traced`): the new rounds are exactly
  the batch solve's, so a tick ends where they end and is refused where the batch is.
  (Continuing from the old state instead finds *a* solution of ``D = b + M·D``, not
  always the least one, and may diverge where the new fixpoint is finite.)  A group
  without recursive rules is one delta step.
* otherwise (a non-linear ring or counting program, ``log``, a user semiring whose
  ⊕ is not idempotent): the group is recomputed from its base rules, as a batch
  solve does, and compared with the old relations at every key either holds.

Every step runs on the runners made for keyed relations where they apply
(:func:`faq.kernel.paired.keyed_delta`: a rule of two atoms is one lookup and one pair
join, a ring of integers seeded joins on tries), else through the planner and executor
(:func:`faq.solve_delta`, :meth:`faq.Query.solve`); the numpy work is the ⊕-merge of
each round's rows.  A
fixpoint that does not exist is refused with the batch's error
(:class:`faq.plan.DivergenceError`) when the batch would refuse it: an idempotent
group when a round proves an improving cycle (:func:`faq.plan.improving_cycle`: no
bound on the rounds otherwise, so long chains converge), any other after
``max_rounds`` rounds, and any tick that derives a value outside the semiring's
domain or overflows.  Nothing is changed in place: a refused tick leaves the
caller's relations as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq import Factor, Program, Query, solve_delta
from faq.kernel import Table, changed_rows, concat, group_reduce, match_keys
from faq.plan import (
    idempotent_on,
    improving_cycle,
    improving_cycle_error,
    nonconvergence,
    outside_domain,
    overflowed,
)
from incremental.driver_state import LocalKeyed
from incremental.linear_dred import Walked, linear_dred
from incremental.protocol import How
from incremental.regimes import regime, step_semiring
from incremental.tables import at_groups, distinct_keys, drop_zeros, empty_table, negated
from incremental.terms import keyed_terms, recompute_groups, solve
from incremental.traced import Rounds, maintain, plus_at
from semirings import Semiring
from semirings.local import equal, local_ops

__all__ = ["Diff", "Fixpoint", "working_semiring"]

_RTOL = 1e-9


def working_semiring(S: Semiring) -> Semiring:
    """The semiring a program view computes in: the declared completion (ℤ for counting:
    changes are signed), ``S`` otherwise."""
    return step_semiring(S)


@dataclass(frozen=True)
class Diff:
    """A relation's change at a tick: its annotations before and after at the keys
    that changed (the semiring's zero where a key is absent)."""

    old: Table
    new: Table


class Fixpoint:
    """The tick-by-tick maintenance of one program's defined relations (see the module
    docstring).

    Parameters
    ----------
    program : faq.Program
        The program.
    how : How
        Variable order, join method and ``local`` of every delta query.
    max_rounds : int
        Most semi-naive rounds per group and tick where ⊕ is not idempotent.
    traces : mapping, optional
        The rounds of every linear recursive ring group before the tick (from the
        previous tick's :attr:`traces`); after :meth:`apply`, :attr:`traces` holds the
        new ones.
    """

    def __init__(
        self,
        program: Program,
        how: How,
        max_rounds: int,
        traces: Mapping[tuple[str, ...], Rounds] | None = None,
    ) -> None:
        self.p = program
        self.S = program.semiring
        self.W = working_semiring(self.S)
        self.o = local_ops(self.W)
        self.how = how
        self.max_rounds = max_rounds
        self.queries = [Query(r, self.W) for r in program.rules]
        self.terms: list[Any] = []
        self.where: set[str] = set()
        #: the rounds of every linear recursive ring group (see the module docstring)
        self.traces: dict[tuple[str, ...], Rounds] = dict(traces or {})
        #: per relation maintained by the compiled walks this tick, what they set
        self.walked: dict[str, Walked] = {}

    # -- one tick -----------------------------------------------------------------------------
    def apply(
        self,
        old: Mapping[str, LocalKeyed],
        inputs: Mapping[str, LocalKeyed],
        diffs: Mapping[str, Diff],
    ) -> tuple[dict[str, LocalKeyed], dict[str, Diff]]:
        """The relations after the tick and every changed relation's :class:`Diff`.

        ``old`` holds every relation before the tick, ``inputs`` the changed input
        relations after it and ``diffs`` their changes.  None is modified.
        """
        new = {**old, **inputs}
        diffs = {n: d for n, d in diffs.items() if d.new.rows}
        for g in self.p.groups:
            reads = {a.relation for i in (*g.base, *g.recursive) for a in self.p.rules[i].atoms}
            if not reads & set(diffs):
                continue
            before = {n: old[n] for n in g.names}
            if self.S.idempotent or self._idempotent(g, old, diffs):
                after, touched = self._dred(g, old, new, diffs)
            elif regime(self.S) in ("ring", "counting") and self._linear(g):
                if g.recursive:
                    after, touched = self._traced(g, old, new, diffs)
                else:
                    after, touched = self._ring(g, old, new, diffs)
            else:
                after, touched = self._recompute(g, new)
            for n in g.names:
                new[n] = after[n]
                d = self._diff(before[n], after[n], touched[n])
                if d.new.rows:  # later groups read only relations that changed
                    diffs[n] = d
        return new, diffs

    def change(self, d: Diff) -> Table:
        """What a view's step returns for the answer's :class:`Diff`: ΔQ in a ring or
        counting (new minus old), otherwise the new annotation of every changed key."""
        if regime(self.S) not in ("ring", "counting"):
            return d.new
        return self.minus(d)

    def minus(self, d: Diff) -> Table:
        """``new - old`` at the changed keys (a ring), zeros dropped."""
        assert d.old.values is not None
        back = negated(Table(d.new.vars, d.old.cols, d.old.values), self.W, self.o)
        return self.merge([d.new, back])

    # -- the three methods --------------------------------------------------------------------
    def _dred(
        self,
        g: Any,
        old: Mapping[str, LocalKeyed],
        new: Mapping[str, LocalKeyed],
        diffs: Mapping[str, Diff],
    ) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]]:
        """Delete and rederive (idempotent ⊕)."""
        worse: dict[str, Table] = {}
        better: dict[str, Table] = {}
        for n, d in diffs.items():
            up = equal(self._plus(d.old.values, d.new.values), d.new.values)
            worse[n] = drop_zeros(d.old.take(np.flatnonzero(~up)), self.o)
            better[n] = drop_zeros(d.new.take(np.flatnonzero(up)), self.o)
        walked = linear_dred(self, g, old, new, worse, better)
        if walked is not None:  # a path program: two compiled walks
            return walked
        marked = self._overdelete(g, old, worse)
        rest = {**new}
        for n in g.names:
            gone = marked[n]
            zeros = np.full(gone.rows, self.W.zero, dtype=self.o.dtype)
            rest[n] = _replace(old[n], Table(gone.vars, gone.cols, zeros), gone)
        seeds: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        for i in (*g.base, *g.recursive):
            r = self.p.rules[i]
            at = marked[r.name]
            if at.rows:
                rels = {m: rest[m] for m in r.relations}
                got, terms, where = recompute_groups(r, self.W, rels, at, self.how)
                self.report(terms, where)
                seeds[r.name].append(self.renamed(r.name, got))
            changes = {m: better[m] for m in r.relations if m in better and better[m].rows}
            if changes:
                seeds[r.name].append(self.delta(i, rest, changes))
        delta = {n: self._improving(rest[n], self.merge(seeds[n])) for n in g.names}
        after, touched = self.rounds(g, rest, delta, idempotent=True)
        for n in g.names:
            touched[n].append(marked[n])
        return after, touched

    def _overdelete(
        self, g: Any, old: Mapping[str, LocalKeyed], worse: Mapping[str, Table]
    ) -> dict[str, Table]:
        """The keys of the group a derivation through a worsened fact reaches, to a
        fixpoint (their old annotations)."""
        marked = {n: self.empty(n) for n in g.names}
        frontier = {n: t for n, t in worse.items() if t.rows}
        tight = self.S.tight  # declared: only derivations that attain a value support it
        while frontier:  # ends: every step marks keys of the old relations not yet marked
            cand: dict[str, list[Table]] = {n: [] for n in g.names}
            for i in (*g.base, *g.recursive):
                r = self.p.rules[i]
                changes = {m: frontier[m] for m in r.relations if m in frontier}
                if changes:
                    cand[r.name].append(self.delta(i, old, changes))
            frontier = {}
            for n in g.names:
                if not cand[n]:
                    continue
                c = self.merge(cand[n])
                was = self._values_at(old[n], c)
                assert c.values is not None
                hit = self.o.nonzero(was)
                if tight:
                    hit &= _close(c.values, was)
                seen, _ = match_keys(c.cols, marked[n].cols)
                pick = np.flatnonzero(hit & ~seen)
                if len(pick):
                    fresh = Table(c.vars, tuple(x[pick] for x in c.cols), was[pick])
                    marked[n] = concat([marked[n], fresh], self.o) if marked[n].rows else fresh
                    frontier[n] = fresh
        return marked

    def _ring(
        self,
        g: Any,
        old: Mapping[str, LocalKeyed],
        new: Mapping[str, LocalKeyed],
        diffs: Mapping[str, Diff],
    ) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]]:
        """A group without recursive rules in a ring or counting: one delta step."""
        changes = {n: self.minus(d) for n, d in diffs.items()}
        seeds: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        for i in g.base:
            r = self.p.rules[i]
            ch = {m: changes[m] for m in r.relations if m in changes and changes[m].rows}
            if ch:
                seeds[r.name].append(self.delta(i, old, ch))
        delta = {n: self.merge(seeds[n]) for n in g.names}
        return self.rounds(g, dict(new), delta, idempotent=False)

    def _traced(
        self,
        g: Any,
        old: Mapping[str, LocalKeyed],
        new: Mapping[str, LocalKeyed],
        diffs: Mapping[str, Diff],
    ) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]]:
        """A linear recursive group in a ring or counting: its rounds maintained
        (:mod:`incremental.traced`); refused where the batch's rounds are."""
        changes = {n: self.minus(d) for n, d in diffs.items() if n not in g.names}
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                was = self.traces.get(g.names)
                after, change, rounds = maintain(self, g, old, new, changes, was)
        except OverflowError as exc:
            raise overflowed(self.S, g.names, None, exc) from exc
        values = {n: a.at(change[n].cols) for n, a in after.items()}
        bad = outside_domain(self.W, g.names, values, None)
        if bad is not None:
            raise bad
        self.traces[g.names] = rounds
        return after, {n: [change[n]] for n in g.names}

    def _recompute(
        self, g: Any, new: Mapping[str, LocalKeyed]
    ) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]]:
        """The group solved again from its base rules (as a batch solve does)."""
        base: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        for i in g.base:
            r = self.p.rules[i]
            relations = {m: new[m].factor(self.W, m) for m in r.relations}
            base[r.name].append(self.renamed(r.name, solve(r, self.W, relations, self.how)))
        delta = {n: self.merge(ts) for n, ts in base.items()}
        idem = idempotent_on(self.S, list(delta.values()), check=False)
        start = {**new, **{n: LocalKeyed.empty(self.p.vars[n], self.o) for n in g.names}}
        after, touched = self.rounds(g, start, delta, idempotent=idem)
        for n in g.names:
            touched[n].append(new[n].table())
        return after, touched

    # -- semi-naive rounds --------------------------------------------------------------------
    def rounds(
        self,
        g: Any,
        rels: dict[str, LocalKeyed],
        delta: dict[str, Table],
        idempotent: bool,
    ) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]]:
        """Semi-naive rounds of the group's recursive rules from ``rels`` (the group's
        relations before ``delta``); returns the relations after the last round and, per
        relation, the keys every round changed."""
        touched: dict[str, list[Table]] = {n: [delta[n]] for n in g.names}
        k = 0
        # values leaving the domain (inf, NaN) are refused below, not warned about
        with np.errstate(over="ignore", invalid="ignore"):
            while any(d.rows for d in delta.values()):
                k += 1
                if not idempotent and k > self.max_rounds:
                    raise nonconvergence(self.S, g.names, delta, self.max_rounds)
                try:
                    now, delta = self._round(g, rels, delta, idempotent, k)
                except OverflowError as exc:
                    raise overflowed(self.S, g.names, k, exc) from exc
                if idempotent and improving_cycle(k, now, delta):
                    raise improving_cycle_error(self.S, g.names, delta, k)
                rels = {**rels, **now}
                for n in g.names:
                    touched[n].append(delta[n])
        return {n: rels[n] for n in g.names}, touched

    def _round(
        self,
        g: Any,
        rels: dict[str, LocalKeyed],
        delta: dict[str, Table],
        idempotent: bool,
        k: int,
    ) -> tuple[dict[str, LocalKeyed], dict[str, Table]]:
        """Round ``k``: the group's relations with ``delta`` in place, and the next change."""
        if idempotent:  # a round's change holds the new annotations, put in place
            now = {n: _put(rels[n], delta[n], self.o) for n in g.names}
            values = delta
        else:
            now, values = {}, {}
            for n in g.names:
                now[n], _, values[n] = plus_at(rels[n], delta[n], self.o)
        bad = outside_domain(self.W, g.names, values, k - 1)
        if bad is not None:
            raise bad
        cand: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        for i in g.recursive:
            r = self.p.rules[i]
            ch = {m: delta[m] for m in r.relations if m in delta and delta[m].rows}
            if ch:
                cand[r.name].append(self.delta(i, rels, ch))
        if not idempotent:
            return now, {n: self.merge(cand[n]) for n in g.names}
        if not self.S.idempotent:
            idempotent_on(self.S, [t for ts in cand.values() for t in ts])
        return now, {n: self._improving(now[n], self.merge(cand[n])) for n in g.names}

    # -- helpers ------------------------------------------------------------------------------
    def delta(self, i: int, rels: Mapping[str, LocalKeyed], changes: dict[str, Table]) -> Table:
        """The delta terms of rule ``i`` for ``changes`` ⊕-ed into ``rels``: by the runners
        made for keyed relations where they apply and the driver may run the step (what
        :func:`faq.solve_delta` would choose, without building its factors), else by
        ``solve_delta``."""
        r = self.p.rules[i]
        got = keyed_terms(r, self.o, {m: rels[m].kt for m in r.relations}, changes, self.how)
        if got is not None:
            self.report(got.terms, got.where)
            return self.renamed(r.name, got.table)
        res = solve_delta(
            self.queries[i],
            {m: rels[m].factor(self.W, m) for m in r.relations},
            {m: Factor.from_table(t, self.W, m) for m, t in changes.items()},
            order=self.how.order,
            join=self.how.join,
            local=self.how.local,
        )
        self.report(res.terms, res.where)
        return self.renamed(r.name, res.change.to_table())

    def report(self, terms: Any, where: str) -> None:
        self.terms.extend(terms)
        self.where.add(where)

    def _improving(self, state: LocalKeyed, cand: Table) -> Table:
        """The rows of ``cand`` that improve ``state`` (idempotent ⊕), with the new values."""
        if not cand.rows or not state.rows:
            return cand
        if not cand.vars:
            cur = state.at(cand.cols)
            return changed_rows(cur, self.merge([cur, cand]), self.o)[0]
        was = state.values_at(cand.cols)  # cand has distinct keys (a merge's)
        now = self._plus(was, cand.values)
        keep = np.flatnonzero(~equal(now, was))
        return Table(cand.vars, tuple(c[keep] for c in cand.cols), now[keep])

    def _plus(self, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
        """``a ⊕ b`` elementwise."""
        assert a is not None and b is not None
        both = np.empty(2 * len(a), dtype=self.o.dtype)
        both[0::2], both[1::2] = a, b
        return self.o.reduceat(both, np.arange(0, len(both), 2))

    def _idempotent(self, g: Any, old: Mapping[str, LocalKeyed], diffs: Mapping[str, Diff]) -> bool:
        """A user semiring that does not declare ``idempotent``: ``a ⊕ a == a`` on its one,
        the group's annotations and the changed ones (as the batch decides)."""
        if regime(self.S) in ("ring", "counting"):
            return False
        tables = [old[n].table() for n in g.names]
        tables += [t for d in diffs.values() for t in (d.old, d.new)]
        return any(old[n].rows for n in g.names) and idempotent_on(self.S, tables, check=False)

    def _linear(self, g: Any) -> bool:
        """Every recursive rule of the group reads exactly one atom of the group."""
        return all(
            sum(a.relation in g.names for a in self.p.rules[i].atoms) == 1 for i in g.recursive
        )

    def _diff(self, before: LocalKeyed, after: LocalKeyed, touched: list[Table]) -> Diff:
        """The :class:`Diff` of a defined relation at the keys a tick touched."""
        keys = [t for t in touched if t.rows]
        if not keys:
            e = empty_table(before.vars, self.o)
            return Diff(e, e)
        # the distinct keys, whatever their values (a ⊕ of them could cancel to zero)
        cols = distinct_keys(concat(keys, self.o).cols)
        at = Table(before.vars, cols, None)
        if not at.vars:
            now = at_groups(after.at(cols), at, self.o)
            new, was = changed_rows(before.at(cols), now, self.o)
            return Diff(was, new)
        a, b = after.values_at(cols), before.values_at(cols)
        pick = np.flatnonzero(~equal(a, b))
        picked = tuple(c[pick] for c in cols)
        return Diff(Table(at.vars, picked, b[pick]), Table(at.vars, picked, a[pick]))

    def _values_at(self, rel: LocalKeyed, keys: Table) -> np.ndarray:
        """``rel``'s annotation at each key of ``keys`` (zero where it has none)."""
        if keys.vars:
            return rel.values_at(keys.cols)
        got = at_groups(rel.at(keys.cols), keys, self.o).values
        assert got is not None
        return got

    def merge(self, parts: list[Table]) -> Table:
        """The tables ⊕-combined (empty ones skipped: their key types may differ)."""
        full = [t for t in parts if t.rows] or parts[:1]
        return group_reduce(concat(full, self.o), full[0].vars, self.o)

    def renamed(self, name: str, t: Table) -> Table:
        """``t`` over ``name``'s key names (read by position)."""
        vals = t.values if t.values is not None else self.o.ones(np.ones(t.rows, np.int64))
        return Table(self.p.vars[name], t.cols, vals, unique=t.unique)

    def empty(self, name: str) -> Table:
        """An empty table of relation ``name``."""
        return empty_table(self.p.vars[name], self.o)


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a == b``, or within a relative 1e-9 for floats."""
    same = equal(a, b)
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            same |= np.abs(a - b) <= _RTOL * np.maximum(np.abs(a), np.abs(b))
    return same


def _put(kt: LocalKeyed, t: Table, o: Any) -> LocalKeyed:
    """``kt`` with ``t``'s annotation at each of its keys (an empty relation takes
    ``t``'s key types)."""
    if not t.rows:
        return kt
    if not kt.rows:
        return LocalKeyed.of(drop_zeros(t, o), o)
    return kt.replace(t)


def _replace(kt: LocalKeyed, t: Table, held: Table) -> LocalKeyed:
    """``kt`` with ``t``'s annotation at each of its keys (zero: removed); ``held``: its
    rows at those keys now."""
    if not t.rows or not kt.rows:
        return kt
    return kt.replace(t, held)
