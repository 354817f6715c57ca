"""The delta queries a tick runs, over relations held by either state.

Each function reads the relations as :class:`faq.Factor` s (a keyed table in the
driver, a DataFrame in Spark: :meth:`incremental.regimes.Keyed.factor`) and returns
a driver table: the change of the output (:func:`delta_rule`), the output keys a
change reaches (:func:`affected_groups`) or the output at some keys
(:func:`recompute_groups`).  :func:`faq.solve_delta` decides where each
term runs (the driver for small deltas, reading only the rows they reach).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

import semirings
from faq import Atom, Factor, Query, Rule, TermReport, solve_delta
from faq.kernel import KeyedTable, Table, consolidated, keyed_delta, paired_at
from faq.plan import delta_in_driver, keyed_runners
from incremental.protocol import How, Keyed
from incremental.tables import int_cols
from semirings import Semiring
from semirings.local import LocalOps, local_ops

__all__ = [
    "GROUPS",
    "Outcome",
    "affected_groups",
    "delta_rule",
    "keyed_terms",
    "recompute_groups",
    "solve",
]

GROUPS = "__groups__"
"""The relation name of the affected groups in a restricted recompute."""

Terms = tuple[dict[str, Any], ...]


class Outcome(NamedTuple):
    """What the delta queries of one call gave, read by name."""

    table: Table
    """The rows (a change of the output, or the output at some keys), in the driver."""
    terms: Terms
    """The reports of the delta queries' terms (:class:`faq.TermReport`)."""
    where: str
    """Where they ran (``"driver"``, ``"spark"``), or why nothing ran."""


def delta_rule(
    rule: Rule,
    S: Semiring,
    rels: Mapping[str, Keyed],
    deltas: Mapping[str, Table],
    how: How,
) -> Outcome:
    """ΔQ over ``S`` when ``deltas`` are ⊕-ed into ``rels`` (the delta rule): by the runners
    made for keyed tables where every relation is one in the driver (no factor made),
    else over each relation's factor."""
    keyed = {n: r.keyed_table for n, r in rels.items()}

    def factors() -> dict[str, Factor]:
        return {n: r.factor(S, n) for n, r in rels.items()}

    if any(k is None for k in keyed.values()):  # kept in Spark: the keyed tables of the
        return _terms(rule, S, factors(), deltas, how)  # rows a tick fetched, in its factors
    return _run(rule, S, keyed, factors, deltas, how)


def _terms(
    rule: Rule,
    S: Semiring,
    relations: Mapping[str, Factor],
    deltas: Mapping[str, Table],
    how: How,
) -> Outcome:
    """ΔQ of ``rule`` over the factors ``relations`` (:func:`_run`, the keyed tables they
    hold)."""
    keyed = {n: f.source.keyed for n, f in relations.items()}
    return _run(rule, S, keyed, lambda: relations, deltas, how)


def _run(
    rule: Rule,
    S: Semiring,
    keyed: Mapping[str, KeyedTable | None],
    factors: Callable[[], Mapping[str, Factor]],
    deltas: Mapping[str, Table],
    how: How,
) -> Outcome:
    """ΔQ of ``rule``: nothing for empty changes; by the keyed runners where every relation
    is a keyed table in ``keyed`` they apply to (asked once); else :func:`_solved` over the
    relations' ``factors`` (made only then)."""
    if not any(d.rows for d in deltas.values()):
        o = local_ops(S)
        empty = Table(rule.head, int_cols(rule.head), np.empty(0, o.dtype))
        return Outcome(empty, (), "nothing to do")
    fast = keyed_terms(rule, local_ops(S), keyed, deltas, how)
    return fast if fast is not None else _solved(rule, S, factors(), deltas, how)


def _solved(
    rule: Rule,
    S: Semiring,
    relations: Mapping[str, Factor],
    deltas: Mapping[str, Table],
    how: How,
) -> Outcome:
    """ΔQ of ``rule`` by :func:`faq.solve_delta` over the factors ``relations``."""
    changes = {n: Factor.from_table(d, S, n) for n, d in deltas.items() if d.rows}
    q = Query(rule, S)
    try:
        res = solve_delta(q, relations, changes, order=how.order, join=how.join, local=how.local)
    except OverflowError as exc:
        raise _overflow(rule, S) from exc
    return Outcome(res.change.to_table(), tuple(res.terms), res.where)


def keyed_terms(
    rule: Rule,
    o: LocalOps,
    keyed: Mapping[str, KeyedTable | None],
    deltas: Mapping[str, Table],
    how: How,
) -> Outcome | None:
    """ΔQ of ``rule`` when ``deltas`` are ⊕-ed into the keyed tables ``keyed`` (every relation
    of the rule, held in the driver), by the runners made for them
    (:func:`faq.kernel.keyed_delta`): what :func:`faq.solve_delta` would run, without its
    query, factors and plan.  None where it would not: a relation not keyed (None),
    :func:`faq.plan.keyed_runners` says no, a change has more rows than
    :func:`faq.plan.delta_in_driver` allows, or ``keyed_delta`` declines."""
    live = {n: t for n, t in deltas.items() if t.rows}
    rows = max((t.rows for t in live.values()), default=0)
    if not live or any(keyed.get(n) is None for n in rule.relations):
        return None
    if not keyed_runners(how.order, how.join, rule.atoms):
        return None
    if not delta_in_driver(rows, how.local, held=True)[0]:  # keyed: all in the driver
        return None
    atoms = [(a.relation, a.vars) for a in rule.atoms]
    changes = {n: consolidated(t, o) for n, t in live.items()}
    try:
        got = keyed_delta(atoms, rule.head, o, keyed, changes)  # type: ignore[arg-type]
    except OverflowError as exc:
        raise _overflow(rule, o.semiring) from exc
    if got is None:
        return None
    return Outcome(got[0], tuple(TermReport.keyed(t) for t in got[1]), "driver")


def _overflow(rule: Rule, S: Semiring) -> OverflowError:
    return OverflowError(
        f"query {rule}: a {S.name!r} annotation overflowed 64-bit integers in a delta "
        "term; use the 'real' semiring for an approximate answer"
    )


def affected_groups(
    rule: Rule, rels: Mapping[str, Keyed], changed: Mapping[str, Table], how: How
) -> tuple[Table, Terms]:
    """The output keys some derivation through a changed tuple reaches (old or new state).

    A ``boolean`` delta query over the supports of the relations before the
    change, with the changed tuples as the change: its terms read the old
    relations and their union with the changed tuples, which hold every
    derivation of the old and of the new state that uses a changed tuple.
    """
    support = {n: r.indicator(semirings.BOOLEAN, n) for n, r in rels.items()}
    marks = {
        n: Table(t.vars, t.cols, np.ones(t.rows, dtype=bool)) for n, t in changed.items() if t.rows
    }
    found = _terms(rule, semirings.BOOLEAN, support, marks, how)
    return found.table, found.terms


def recompute_groups(
    rule: Rule, S: Semiring, rels: Mapping[str, Keyed], groups: Table, how: How
) -> Outcome:
    """The output of ``rule`` over ``S`` restricted to the keys of ``groups``.

    With a head, a delta query whose changed relation is the groups (an extra
    atom over the head variables, empty before): it reads only the rows the
    groups reach.  With an empty head, the whole query.
    """
    o = local_ops(S)
    relations = {n: r.factor(S, n) for n, r in rels.items()}
    if not rule.head:
        return Outcome(solve(rule, S, relations, how), (), "recompute")
    paired = _paired_at(rule, o, relations, groups, how)
    if paired is not None:
        return paired
    name = GROUPS
    while name in rule.relations:
        name = f"_{name}"
    restricted = Rule(rule.name, rule.head, (Atom(name, rule.head), *rule.atoms))
    g = Table(rule.head, groups.cols, o.ones(np.ones(groups.rows, dtype=np.int64)))
    empty = Table(rule.head, tuple(c[:0] for c in groups.cols), g.values[:0])  # type: ignore[index]
    relations[name] = Factor.from_table(empty, S, name)
    return _terms(restricted, S, relations, {name: g}, how)


def _paired_at(
    rule: Rule, o: LocalOps, relations: Mapping[str, Factor], groups: Table, how: How
) -> Outcome | None:
    """:func:`recompute_groups` of a rule of one or two keyed atoms as lookups and one pair
    join (:func:`faq.kernel.paired.paired_at`: a rederive step of a shortest-paths view), or
    None where that does not apply: the step not in the driver
    (:func:`faq.plan.delta_in_driver`, for as many rows as the keys asked, as the general
    path decides), :func:`faq.plan.keyed_runners` says no, or ``paired_at`` declines."""
    if not keyed_runners(how.order, how.join, rule.atoms):
        return None
    keyed = {n: f.source.keyed for n, f in relations.items()}
    if any(k is None for k in keyed.values()):
        return None
    if not delta_in_driver(groups.rows, how.local, held=True)[0]:  # keyed: in the driver
        return None
    atoms = [(a.relation, a.vars) for a in rule.atoms]
    got = paired_at(atoms, rule.head, o, keyed, groups.cols)  # type: ignore[arg-type]
    if got is None:
        return None
    term = TermReport(0, False, "driver", got[1], ("pair",) if len(atoms) == 2 else ("lookup",))
    return Outcome(got[0], (term,), "driver")


def solve(rule: Rule, S: Semiring, relations: Mapping[str, Factor], how: How) -> Table:
    """The whole output of ``rule`` over ``relations`` (a batch solve), as a driver table."""
    o = local_ops(S)
    try:
        out = Query(rule, S).solve(order=how.order, join=how.join, **relations).to_table()
    except OverflowError as exc:
        raise OverflowError(
            f"query {rule}: a {S.name!r} annotation overflowed 64-bit integers; use "
            "the 'real' semiring for an approximate answer"
        ) from exc
    if out.values is None:
        out = Table(out.vars, out.cols, o.ones(np.ones(out.rows, dtype=np.int64)))
    return out
