"""The rounds of a linear recursive group in a ring or counting, kept by a program view
from tick to tick and maintained (DBSP's incremental fixpoint, with the round as a key).

A batch solve of such a group computes ``Δ₀ = b`` (the base rules) and ``Δₖ₊₁ = M·Δₖ``
(``M``: the recursive rules, each linear in its one atom of the group) until a round is
empty; the group's relations are ``D = Δ₀ + Δ₁ + …``.  A view keeps every round,
as one keyed table per relation over ``(round, key…)`` (:class:`Rounds`).  For a tick
that changes the inputs (``b → b'``, ``M → M'``) the rounds change by ``δ``:

    δ₀ = b' − b,        δₖ₊₁ = M'·δₖ + (M' − M)·Δₖ,

so ``δ = Σⱼ (shift∘M')ʲ (δ₀ + shift((M' − M)·Δ))`` where ``shift`` moves a row to the
next round.  Every term is the delta rule of a *lifted* rule, which carries the round
as one more variable (``D(r, y) :- D(r, x), E(x, y)``) and so handles every round in
one query: ``(M' − M)·Δ`` is the delta rule for the inputs' changes over all old rounds
at once, and each application of ``M'`` is the delta rule for the rows found last
(:func:`faq.solve_delta`).  The iterations are as many as the change takes steps, not
as many as there are rounds; rows past ``max_rounds`` are dropped.

The new rounds are ``Δ' = Δ + δ``.  They are exactly the batch's: where ``Δ'ₖ`` is
empty every later round is (``Δ'ₖ₊₁ = M'·Δ'ₖ``), so they end there; where rounds
``0 … max_rounds`` are all non-empty the batch is still changing after ``max_rounds``
rounds and the tick is refused with its error.  Continuing from the old state instead
(``D' = D + X₀ + X₁ + …``, ``Xₖ₊₁ = M'·Xₖ``) finds *a* solution of ``D' = b' + M'·D'``,
not always the least one (drop the source of a cycle of weight one: the cycle would
keep its count), and may diverge where the new fixpoint is finite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from faq import Atom, Factor, Query, Rule, solve_delta
from faq.kernel import Table, consolidated
from faq.plan import nonconvergence
from incremental.driver_state import LocalKeyed
from incremental.protocol import How
from incremental.tables import at_groups, drop_zeros, empty_table, negated, with_values
from semirings import Semiring
from semirings.local import LocalOps

__all__ = ["ROUND", "Maintainer", "Rounds", "maintain", "plus_at"]

ROUND = "round__"
"""The name of the round column of :class:`Rounds` (and of the lifted rules' variable)."""

_RTOL = 1e-12  # a float round's row within this of cancelling (relative) is zero


class Maintainer(Protocol):
    """What :func:`maintain` reads of the engine of a tick
    (:class:`incremental.fixpoint.Fixpoint`)."""

    p: Any
    S: Semiring
    W: Semiring
    o: LocalOps
    how: How
    max_rounds: int

    def delta(self, i: int, rels: Mapping[str, Any], changes: dict[str, Table]) -> Table: ...

    def report(self, terms: Any, where: str) -> None: ...

    def merge(self, parts: list[Table]) -> Table: ...


@dataclass(frozen=True)
class Rounds:
    """The rounds of one group: per relation, a keyed table over ``(round, key…)``, and the
    rows of every round (all relations together)."""

    rels: dict[str, LocalKeyed]
    counts: np.ndarray

    @classmethod
    def empty(
        cls, names: tuple[str, ...], keys: Mapping[str, tuple[str, ...]], o: LocalOps
    ) -> Rounds:
        rels = {n: LocalKeyed.empty((ROUND, *keys[n]), o) for n in names}
        return cls(rels, np.zeros(0, dtype=np.int64))


def maintain(
    m: Maintainer,
    g: Any,
    old: Mapping[str, LocalKeyed],
    new: Mapping[str, LocalKeyed],
    changes: Mapping[str, Table],
    rounds: Rounds | None,
) -> tuple[dict[str, LocalKeyed], dict[str, Table], Rounds]:
    """The group's relations after a tick, their changes, and the new rounds.

    ``old`` and ``new`` hold every relation before and after the tick (the group's own
    before it), ``changes`` the changes of the relations the group reads (new minus
    old).  Raises the batch's :class:`faq.plan.DivergenceError` where the new rounds are
    still changing after ``max_rounds``.
    """
    p = m.p
    keys = {n: p.vars[n] for n in g.names}
    R = rounds or Rounds.empty(g.names, keys, m.o)
    queries = {i: Query(_lift(p.rules[i], g.names), m.W) for i in g.recursive}
    # δ₀ (round 0), and (M' − M)·Δ for every old round at once, shifted to the next
    found: dict[str, list[Table]] = {n: [] for n in g.names}
    for i in g.base:
        r = p.rules[i]
        ch = {k: t for k, t in changes.items() if k in r.relations and t.rows}
        if ch:
            found[r.name].append(_at_round(m.delta(i, old, ch), 0, keys[r.name]))
    for i, q in queries.items():
        r = p.rules[i]
        a = _inner(r, g.names)
        ch = {k: t for k, t in changes.items() if k in r.relations and t.rows}
        if ch and R.rels[a.relation].rows:
            rels = {k: old[k].factor(m.W, k) for k in r.relations if k != a.relation}
            rels[a.relation] = R.rels[a.relation].factor(m.W, a.relation)
            found[r.name].append(_shifted(_solve(m, q, rels, ch), keys[r.name]))
    start = _cut(m, found, keys)
    step = _Step(m, g, queries, new, R, keys)
    try:  # every round at once, while that ends within the old rounds' depth
        delta = _at_once(step, start, cap=len(R.counts) + 1)
    except OverflowError:
        delta = None
    if delta is None:
        delta = _in_order(step, start)
    return _apply(m, g, old, R, delta)


class _Step:
    """``shift(M'·x)`` for rows ``x`` of the group's rounds: the lifted recursive rules'
    delta rule for the change ``x`` over the new inputs."""

    def __init__(
        self,
        m: Maintainer,
        g: Any,
        queries: dict[int, Query],
        new: Mapping[str, LocalKeyed],
        R: Rounds,
        keys: dict[str, tuple[str, ...]],
    ) -> None:
        self.m, self.g, self.queries, self.new, self.R, self.keys = m, g, queries, new, R, keys

    def __call__(self, x: Mapping[str, Table]) -> dict[str, Table]:
        m, p = self.m, self.m.p
        found: dict[str, list[Table]] = {n: [] for n in self.g.names}
        for i, q in self.queries.items():
            r = p.rules[i]
            a = _inner(r, self.g.names)
            if not x[a.relation].rows:
                continue
            rels = {k: self.new[k].factor(m.W, k) for k in r.relations if k != a.relation}
            rels[a.relation] = self.R.rels[a.relation].factor(m.W, a.relation)  # not read
            got = _solve(m, q, rels, {a.relation: x[a.relation]})
            found[r.name].append(_shifted(got, self.keys[r.name]))
        return _cut(m, found, self.keys)

    def total(self, parts: dict[str, list[Table]]) -> dict[str, Table]:
        return {n: self.m.merge([_none(n, self.keys, self.m.o), *ts]) for n, ts in parts.items()}


def _at_once(step: _Step, start: dict[str, Table], cap: int) -> dict[str, Table] | None:
    """``δ = Σⱼ (shift∘M')ʲ start``, every round at once, or None where that takes more
    than ``cap`` steps or leaves the finite values: around a cycle of ``M'`` the rows
    of different rounds that cancel in ``δ`` (a source dropped where a cycle is added)
    never meet in one step, and go round until ``max_rounds``."""
    total: dict[str, list[Table]] = {n: [] for n in start}
    frontier = start
    for _ in range(cap + 1):
        if not any(t.rows for t in frontier.values()):
            return step.total(total)
        if any(not _finite(t) for t in frontier.values()):
            return None
        for n, t in frontier.items():
            total[n].append(t)
        frontier = step(frontier)
    return None


def _in_order(step: _Step, start: dict[str, Table]) -> dict[str, Table]:
    """``δ`` one round after the other, as the batch computes its rounds: the rows of a
    round are summed (and cancel) before ``M'`` carries them to the next."""
    pending: dict[int, dict[str, list[Table]]] = {}

    def add(rows: dict[str, Table]) -> None:
        for n, t in rows.items():
            for k in np.unique(t.cols[0]).tolist() if t.rows else []:
                at = pending.setdefault(int(k), {x: [] for x in start})
                at[n].append(t.take(np.flatnonzero(t.cols[0] == k)))

    add(start)
    total: dict[str, list[Table]] = {n: [] for n in start}
    while pending:
        k = min(pending)
        now = step.total(pending.pop(k))
        if not any(t.rows for t in now.values()):
            continue
        for n, t in now.items():
            total[n].append(t)
        add(step(now))
    return step.total(total)


def _finite(t: Table) -> bool:
    v = t.values
    return v is None or v.dtype.kind != "f" or bool(np.isfinite(v).all())


def _apply(
    m: Maintainer,
    g: Any,
    old: Mapping[str, LocalKeyed],
    R: Rounds,
    delta: dict[str, Table],
) -> tuple[dict[str, LocalKeyed], dict[str, Table], Rounds]:
    """The rounds ``R + delta``, ended at their first empty round (refused past
    ``max_rounds``), and the group's relations changed by as much."""
    counts = np.zeros(max(len(R.counts), m.max_rounds + 2), dtype=np.int64)
    counts[: len(R.counts)] = R.counts
    rels = dict(R.rels)
    moved: dict[str, tuple[Table, Table]] = {}
    for n, d in delta.items():
        if not d.rows:
            continue
        kt, before, after = plus_at(rels[n], d, m.o)
        assert after.values is not None
        was = _values_at(before, after, m.o)
        now = after.values
        if now.dtype.kind == "f":  # cancelled up to rounding: zero, as the batch finds it
            with np.errstate(invalid="ignore"):
                tiny = np.abs(now) <= _RTOL * (np.abs(was) + np.abs(now - was))
            tiny &= m.o.nonzero(now)
            if tiny.any():
                now = now.copy()
                now[tiny] = m.W.zero
                kt = kt.replace(Table(after.vars, after.cols, now))
        step = m.o.nonzero(now).astype(np.int64) - m.o.nonzero(was).astype(np.int64)
        np.add.at(counts, after.cols[0].astype(np.int64), step)
        rels[n] = kt
        moved[n] = (Table(after.vars, after.cols, was), Table(after.vars, after.cols, now))
    end = int(np.argmin(counts > 0)) if (counts == 0).any() else len(counts)
    if end > m.max_rounds:  # rounds 0 … max_rounds all non-empty: the batch refuses
        last = {n: _round(rels[n], m.max_rounds) for n in g.names}
        raise nonconvergence(m.S, g.names, last, m.max_rounds)
    changes: dict[str, Table] = {}
    after: dict[str, LocalKeyed] = {}
    for n in g.names:
        parts: list[Table] = []
        if n in moved:  # the rows δ changed, below the end
            was, now = moved[n]
            keep = np.flatnonzero(now.cols[0] < end)
            diff = m.merge([now.take(keep), negated(was.take(keep), m.W, m.o)])
            parts.append(_drop_round(diff))
        later = (np.arange(end, len(counts), dtype=np.int64),)
        stale = rels[n].kt.at_prefix(later)
        if stale.rows:  # the rounds from the end on are gone (their rows cancel exactly)
            rels[n] = rels[n].replace(_zeros(stale, m.W, m.o))
        gone = R.rels[n].kt.at_prefix(later) if R.rels[n].rows else None
        if gone is not None and gone.rows:  # the old rows of those rounds
            parts.append(_drop_round(negated(gone, m.W, m.o)))
        keys_ = m.p.vars[n]
        change = m.merge([empty_table(keys_, m.o), *[_as(keys_, t) for t in parts]])
        changes[n] = change
        after[n] = plus_at(old[n], change, m.o)[0]
    counts[end:] = 0
    return after, changes, Rounds(rels, counts[: max(end, 1)])


def plus_at(kt: LocalKeyed, t: Table, o: LocalOps) -> tuple[LocalKeyed, Table, Table]:
    """``kt ⊕ t`` (an empty relation takes ``t``'s key types), the rows before at ``t``'s
    keys and the annotations after."""
    if not t.rows:
        return kt, t, t
    if not kt.rows:
        cons = consolidated(t, o)
        empty = cons.take(np.empty(0, dtype=np.int64))
        return LocalKeyed.of(drop_zeros(cons, o), o), empty, with_values(cons, o)
    return kt.plus(t)


# -- helpers -----------------------------------------------------------------------------------
def _lift(r: Rule, group: tuple[str, ...]) -> Rule:
    """``r`` with the round as a first variable of its head and of its atom of the group
    (a fresh name; relations are read by position)."""
    k = ROUND
    while k in r.variables:
        k += "_"
    atoms = tuple(
        Atom(a.relation, (k, *a.vars), tuple((q + 1, c) for q, c in a.consts))
        if a.relation in group
        else a
        for a in r.atoms
    )
    return Rule(r.name, (k, *r.head), atoms)


def _inner(r: Rule, group: tuple[str, ...]) -> Atom:
    return next(a for a in r.atoms if a.relation in group)


def _solve(m: Maintainer, q: Query, rels: dict[str, Factor], ch: Mapping[str, Table]) -> Table:
    res = solve_delta(
        q,
        rels,
        {k: Factor.from_table(t, m.W, k) for k, t in ch.items()},
        order="auto",
        join=m.how.join,
        local=m.how.local,
    )
    m.report(res.terms, res.where)
    return res.change.to_table()


def _at_round(t: Table, k: int, keys: tuple[str, ...]) -> Table:
    r = np.full(t.rows, k, dtype=np.int64)
    return Table((ROUND, *keys), (r, *t.cols), t.values)


def _shifted(t: Table, keys: tuple[str, ...]) -> Table:
    """A lifted rule's rows (round first) moved to the next round."""
    return Table((ROUND, *keys), (t.cols[0] + 1, *t.cols[1:]), t.values)


def _cut(
    m: Maintainer, found: dict[str, list[Table]], keys: Mapping[str, tuple[str, ...]]
) -> dict[str, Table]:
    """The rows found, ⊕-merged, up to round ``max_rounds``."""
    out = {}
    for n, ts in found.items():
        t = m.merge([_none(n, keys, m.o), *ts])
        out[n] = t.take(np.flatnonzero(t.cols[0] <= m.max_rounds)) if t.rows else t
    return out


def _none(n: str, keys: Mapping[str, tuple[str, ...]], o: LocalOps) -> Table:
    return empty_table((ROUND, *keys[n]), o)


def _values_at(before: Table, after: Table, o: LocalOps) -> np.ndarray:
    """``before``'s annotation at each key of ``after`` (zero where it has none)."""
    return at_groups(before, Table(after.vars, after.cols, None), o).values


def _zeros(t: Table, W: Semiring, o: LocalOps) -> Table:
    return Table(t.vars, t.cols, np.full(t.rows, W.zero, dtype=o.dtype))


def _drop_round(t: Table) -> Table:
    return Table(t.vars[1:], t.cols[1:], t.values, unique=False)


def _as(keys: tuple[str, ...], t: Table) -> Table:
    return Table(keys, t.cols, t.values, unique=False)


def _round(kt: LocalKeyed, k: int) -> Table:
    return kt.kt.at_prefix((np.array([k], dtype=np.int64),))
