"""The delta rule: how the answer of a query changes when its relations change.

For ``Q = ⊕ ⊗_i R_i`` and changes ``ΔR_i`` the answer changes by

    ΔQ = ⊕_i  Q(R_1', …, R_{i-1}', ΔR_i, R_{i+1}, …, R_n),     R' = R ⊕ ΔR,

because Q is linear in each atom (⊗ distributes over ⊕); the terms telescope,
so ``Q(R') = Q(R) ⊕ ΔQ`` in every commutative semiring.  A relation named in
several atoms is one ``R_i`` per atom (a self-join gets one term per atom).
This is the ordered delta rule of DBSP (Budiu et al., VLDB 2023).

:func:`solve_delta` evaluates it with the same planner, executor and kernel as
:meth:`faq.Query.solve`.  A term touches only the rows that join with its
change, so for small changes (the ``local_delta_rows`` setting) it runs in the driver:
the rows of the other relations that can join are fetched by rounds of
semi-joins (round 1: the rows sharing a value with the change; round 2: the
rows sharing a value with those; ...), each round one filtered scan per
relation for all terms at once, and the terms are then solved on the local
kernel (:class:`faq.delta_local.LocalDelta`).  Larger changes, or steps the change
does not reach (a Cartesian product), run in Spark (:func:`_spark`), unless every
relation and change is in the driver already: those run there up to ``local_rows``
(:func:`faq.plan.physical.delta_in_driver`).

This module keeps the algebra: which terms there are, what each reads (the hops of
its change, planned from the rule by :func:`faq.plan.reach.hops`) and how their
results combine.  Where they run is decided by the planner
(:func:`faq.plan.physical.delta_in_driver`, :func:`faq.plan.physical.delta_in_one_task`,
the bounds of :func:`faq.plan.reach.bounds`), the reason kept in ``DeltaResult.why``;
the scans are :mod:`faq.spark.reach`'s and the one-task mechanics
:mod:`faq.spark.delta_task`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.delta_local import (
    DeltaResult,
    LocalDelta,
    NeedsSpark,
    TermReport,
    empty_change,
    split_rule,
)
from faq.factor import Factor, Source
from faq.inputs import relation_factor
from faq.kernel.stats import filtered_stats
from faq.kernel.table import Table, group_reduce
from faq.plan.physical import check_options, delta_in_driver, delta_in_one_task
from faq.plan.reach import bounds, hops
from faq.plan.settings import Settings, current, settings
from faq.query import Query, deferred_run
from faq.rule import VALUE, Atom, Rule
from faq.session import fixed_plans_for, quiet_spark_errors
from faq.spark.convert import arrow_to_table
from faq.spark.delta_task import in_one_task, materialised
from faq.spark.ops import union_all
from faq.spark.reach import matching, semi_joined
from faq.spark.tasks import query_error
from semirings import Semiring
from semirings import spark as sops
from semirings.local import distinct, local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "DeltaResult",
    "TermReport",
    "solve_delta",
    "split_rule",
]


def solve_delta(
    q: Query,
    relations: Mapping[str, Factor],
    deltas: Mapping[str, Factor],
    *,
    order: str | Sequence[str] = "auto",
    join: str = "auto",
    local: bool = True,
) -> DeltaResult:
    """ΔQ: the change of ``q``'s answer when ``deltas`` are ⊕-ed into ``relations``.

    Parameters
    ----------
    q : Query
        The query; its semiring is the one of the relations and changes (use a
        ring such as ``integer`` for deletions as negative weights).
    relations : mapping of str to Factor (or rows)
        Every relation of ``q`` before the change (trusted factors: see
        :meth:`Factor.trusted`; Spark ones are read by filtered scans only).
        Anything else is read by the one rule of every entry point
        (:func:`faq.relation_kind`: a pandas or Spark DataFrame, an Arrow table or a
        numpy structured array are rows; a plain numpy array is refused).
    deltas : mapping of str to Factor (or rows)
        The changes of some relations: consolidated factors (local ones are
        read directly), or rows read as ``relations`` are.
    order, join
        As for :meth:`faq.Query.solve`.
    local : bool, default True
        Try the driver path first (small changes); False always uses Spark: each
        term as a Spark query over the rows its change can reach, all terms'
        ⊕ computed in one action.

    Returns
    -------
    DeltaResult

    Raises
    ------
    ValueError
        A query with per-variable aggregates (not maintainable), an unknown
        relation or join method.
    """
    q.check_incremental("solve_delta")
    check_options(join, "auto")
    unknown = [n for n in deltas if n not in q.rule.relations]
    if unknown:
        raise ValueError(f"unknown relation(s) {unknown!r} for {q.rule}")
    relations = _given(q, relations, "relation")
    deltas = _given(q, deltas, "change of relation")
    if any(a.consts for a in q.rule.atoms):  # constants select rows of relations and changes
        names = q.rule.relations
        plain, relations = q.without_constants(**relations)
        _, deltas = q.without_constants(**deltas)
        res = solve_delta(plain, relations, deltas, order=order, join=join, local=local)
        touched = {n: f for n, f in res.touched.items() if n in names}
        return replace(res, touched=touched)
    S = q.semiring
    counts = {n: d.count() for n, d in deltas.items()}  # one count each (a job for a DataFrame)
    live = {n: d for n, d in deltas.items() if counts[n] > 0}
    rows = max((counts[n] for n in live), default=0)
    held = all(f.is_local for f in (*relations.values(), *live.values()))
    driver, why = delta_in_driver(rows, local, held=held)
    if driver:
        try:
            res = LocalDelta(q, relations, live, order, join).run()
        except NeedsSpark as exc:
            why = str(exc)
        else:
            return replace(res, why=why)
    res = _spark(q, relations, live, order, join, S)
    return replace(res, why=f"{why}; {res.why}" if res.why else why)


def _given(q: Query, given: Mapping[str, Any], what: str) -> dict[str, Factor]:
    """Relations or changes given by name, read by the one rule of every entry point
    (:func:`faq.inputs.relation_factor`): a Factor as it is, rows (pandas, Arrow, a
    structured array, a Spark DataFrame) as a factor of ``q``'s semiring."""
    out = {}
    for n, g in given.items():
        atom = next((a for a in q.rule.atoms if a.relation == n), None)
        if atom is None or isinstance(g, Factor) and g.source.form not in ("array", "raw"):
            out[n] = g  # trusted factors as they are (a keyed table stays keyed)
        else:  # rows, or a factor of rows not yet read for a semiring
            f = relation_factor(n, g, atom, f"{what} {n!r}")
            out[n] = f.for_semiring(q.semiring, n)
    return out


# -- the Spark path ------------------------------------------------------------------------------
def _spark(
    q: Query,
    relations: Mapping[str, Factor],
    deltas: Mapping[str, Factor],
    order: str | Sequence[str],
    join: str,
    S: Semiring,
) -> DeltaResult:
    """Every term in one Spark task when the rows the changes reach fit one
    (:func:`_in_one_task`); otherwise each term as a Spark query (``backend="spark"``)
    over the rows its change can reach (:func:`_reached`), left uncomputed
    (:func:`faq.query.deferred_run`), the ⊕ of all of them computed in one Spark action."""
    one = _in_one_task(q, relations, deltas, order, join, S)
    if one is not None:
        return one
    split, names = split_rule(q.rule)
    sq = Query(split, S)
    parts: list[DataFrame] = []
    report = []
    held: list[object] = [f.source.df for f in (*relations.values(), *deltas.values())]
    for i, a in enumerate(q.rule.atoms):
        if a.relation not in deltas:
            continue
        reach = hops(q.rule, i)
        bindings: dict[str, Factor] = {}
        empty = False
        change = deltas[a.relation]
        for j, (b, label) in enumerate(zip(q.rule.atoms, names, strict=True)):
            if j == i:
                bindings[label] = change
                continue
            if j < i and b.relation in deltas:
                f = _plus(relations[b.relation], deltas[b.relation], S)
            else:
                f = relations[b.relation]
                empty = empty or (f.stats is not None and f.stats.rows == 0)
            bindings[label] = _reached(f, reach.first(j), change, a, S)
        if empty:
            report.append(TermReport(i, skipped=True))
            continue
        run = deferred_run(sq, order, join, "spark", bindings)
        parts.append(run.result.df.select(*q.rule.head, VALUE))
        methods = tuple(s.choice.method for s in run.trace.steps)
        report.append(TermReport(i, False, "spark", tuple(run.plan.order), methods))
    head = q.rule.head
    if not parts:
        change = Factor.from_table(empty_change(head, local_ops(S)), S, f"Δ{q.rule.name}")
    else:
        summed = sops.consolidate(S, union_all(parts), list(head), VALUE)
        change = _computed(summed, q.rule, S, held, unique=True)
    return DeltaResult(change, "spark", tuple(report), {})


def _computed(df: DataFrame, rule: Rule, S: Semiring, held: list[object], unique: bool) -> Factor:
    """ΔQ over ``df`` computed in one action (every term's cells; a scalar read in the
    same job), Spark's errors as the query's."""
    name = f"Δ{rule.name}"
    with quiet_spark_errors(), fixed_plans_for(held):
        try:
            done = materialised(df, rule.head)
        except Exception as exc:
            raise query_error(exc, rule, S) from exc
    if rule.head:
        return Factor.from_source(Source.spark(done, rule.head, S, checked=True), name)
    t = arrow_to_table(done, rule.head, S, "change", check=False, unique=unique)
    return Factor.from_table(t, S, name)


def _in_one_task(
    q: Query,
    relations: Mapping[str, Factor],
    deltas: Mapping[str, Factor],
    order: str | Sequence[str],
    join: str,
    S: Semiring,
) -> DeltaResult | None:
    """ΔQ computed in one Spark task, or None where that does not apply.

    It applies when the changes are in the driver, every relation is in Spark, and
    every atom of a term is one hop from the term's change (:attr:`faq.plan.reach.Reach.one_hop`:
    what a term reads is known from its change alone).  Each relation is then read
    once, by one filtered scan: the rows whose columns hold the values the changes give
    them, every term's filter OR-ed.  Whether those scans fit one task is the planner's
    (:func:`faq.plan.physical.delta_in_one_task`: ``max_literals`` values, the
    estimated rows, :func:`faq.kernel.stats.filtered_stats`, within ``cell_rows``).
    The task (:func:`faq.spark.delta_task.in_one_task`) runs the delta rule's driver
    path over those rows and the changes (:class:`faq.delta_local.LocalDelta`: the same
    lookups and kernel as in the driver).  One Spark stage per relation read, one task,
    no plan per term.
    """
    rule = q.rule
    changes = {n: d.local_table() for n, d in deltas.items()}
    if not changes or any(t is None for t in changes.values()):
        return None
    if any(relations[n].is_local or relations[n].stats is None for n in rule.relations):
        return None
    changed = [i for i, a in enumerate(rule.atoms) if a.relation in changes]
    plans = {i: hops(rule, i) for i in changed}
    if not all(p.one_hop for p in plans.values()):
        return None  # a term reads an atom its change does not reach
    single: dict[str, dict[int, np.ndarray]] = {}  # a column's values, every term's at once
    joint: dict[str, list[dict[int, np.ndarray]]] = {}  # several columns' values together
    for i in changed:
        a = rule.atoms[i]
        t = changes[a.relation]
        assert t is not None
        given = {v: distinct(c) for v, c in zip(a.vars, t.cols, strict=True)}
        for hop in plans[i].rounds[0] if plans[i].rounds else ():  # none: one atom
            b = rule.atoms[hop.atom]
            cond = {k: given[v] for k, v in hop.cols}
            if len(cond) > 1:
                joint.setdefault(b.relation, []).append(cond)
                continue
            ((k, values),) = cond.items()
            mine = single.setdefault(b.relation, {})
            mine[k] = np.union1d(mine[k], values) if k in mine else values
    wanted = {
        n: [{k: v} for k, v in single.get(n, {}).items()] + joint.get(n, [])
        for n in rule.relations
        if n in single or n in joint
    }
    if not wanted:
        return None
    literals = sum(len(v) for m in wanted.values() for c in m for v in c.values())
    rows = 0.0
    for name, m in wanted.items():
        whole = relations[name].stats
        assert whole is not None
        est = sum(filtered_stats(whole, {k: len(v) for k, v in c.items()}).rows for c in m)
        rows += min(est, whole.rows)
    why = delta_in_one_task(literals, rows)
    if not why:
        return None
    names = tuple(wanted)
    frames = [
        relations[n]
        .df.select(*relations[n].vars, VALUE)
        .filter(matching(relations[n].vars, relations[n].key_types, wanted[n]))
        for n in names
    ]
    solve = _TaskSolve(
        q, names, {n: relations[n].vars for n in rule.relations}, changes, order, join, current()
    )
    arities = [len(relations[n].vars) for n in names]
    out = in_one_task(frames, arities, solve, S, rule.head, _head_types(rule, relations))
    held: list[object] = [f.source.df for f in relations.values()]
    change = _computed(out, rule, S, held, unique=False)
    report = tuple(TermReport(i, False, "spark") for i in changed)
    return DeltaResult(change, "spark", report, {}, why)


def _head_types(rule: Rule, relations: Mapping[str, Factor]) -> dict[str, str]:
    """The Spark type of every variable of ``rule`` (its first atom's column's)."""
    types: dict[str, str] = {}
    for a in rule.atoms:
        for v, ty in zip(a.vars, relations[a.relation].key_types, strict=True):
            types.setdefault(v, ty)
    return types


class _TaskSolve:
    """What the one task of :func:`_in_one_task` computes (picklable): from the rows it is
    sent (input ``k``: relation ``names[k]``), ⊕-combined by key, and the changes, ΔQ by
    the driver path of the delta rule, under the run's settings."""

    def __init__(
        self,
        q: Query,
        names: tuple[str, ...],
        vars_: dict[str, tuple[str, ...]],
        changes: dict[str, Table | None],
        order: str | Sequence[str],
        join: str,
        st: Settings,
    ) -> None:
        self.q, self.names, self.vars, self.changes = q, names, vars_, changes
        self.order, self.join, self.st = order, join, st

    def __call__(self, given: dict[int, Table]) -> Table:
        S = self.q.semiring
        ops = local_ops(S)
        rels: dict[str, Factor] = {}
        for n, vars_ in self.vars.items():
            if n in self.names and self.names.index(n) in given:
                t = given[self.names.index(n)]
                t = group_reduce(Table(vars_, t.cols, t.values, unique=False), vars_, ops)
            else:
                like = self.changes.get(n)
                t = (
                    like.take(np.empty(0, np.int64))
                    if like is not None
                    else empty_change(vars_, ops)
                )
                t = Table(vars_, t.cols, t.values)
            rels[n] = Factor.from_table(t, S, n)
        changes = {n: Factor.from_table(t, S, n) for n, t in self.changes.items() if t is not None}
        # this runs in a Spark task's Python worker, another process, whose settings are
        # the defaults: the run's own are shipped with the task and entered here
        with settings(**self.st.changed()):
            res = LocalDelta(self.q, rels, changes, self.order, self.join).run()
        return res.change.to_table()


def _reached(
    f: Factor, shared_cols: tuple[tuple[int, str], ...], change: Factor, a: Atom, S: Semiring
) -> Factor:
    """``f`` without rows no row of ``change`` (read by atom ``a``) can join: filtered, on
    each column of ``shared_cols`` (column, variable: the hop-1 columns of ``f``'s atom,
    :func:`faq.plan.reach.hops`), to the change's values of that variable.  A change in
    the driver gives ``IN`` lists (up to the ``max_literals`` bound: no job), any other a
    left semi-join with its columns broadcast.  A factor in the driver, or not one hop
    from the change, is returned as it is.  Its statistics are estimates
    (:func:`faq.kernel.stats.filtered_stats`, which also marks it scanned)."""
    if f.is_local or not shared_cols:
        return f
    shared = [(kb, a.vars.index(v)) for kb, v in shared_cols]
    rows = f.df.select(*f.vars, VALUE)
    t = change.local_table()
    values = None if t is None else [distinct(t.cols[ka]) for _, ka in shared]
    if values is not None and not bounds().literals_over(sum(len(v) for v in values), "values"):
        cond = {kb: v for (kb, _), v in zip(shared, values, strict=True)}
        reduced = rows.filter(matching(f.vars, f.key_types, [cond]))
    else:
        reduced = semi_joined(rows, f.vars, change.df, shared)
    kept = f.source.consolidated
    at = None if values is None else {kb: len(v) for (kb, _), v in zip(shared, values, strict=True)}
    stats = None if f.stats is None else filtered_stats(f.stats, at)
    src = Source.spark(reduced, f.vars, S, checked=True, consolidated=kept, stats=stats)
    return Factor.from_source(src, f.name)


def _plus(old: Factor, delta: Factor, S: Semiring) -> Factor:
    """``old ⊕ delta`` as a trusted Spark factor (consolidated as it is read)."""
    rows = (old.stats.rows if old.stats else 0) + delta.count()
    df = old.df.select(*old.vars, VALUE).unionByName(delta.df.toDF(*old.vars, VALUE))
    return Factor.trusted(df, old.vars, S, rows=rows, consolidated=False)
