"""Queries: rules and einsum specs, solved by InsideOut on the local kernel or on Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import semirings
from faq import inputs
from faq.executor import Data, Executor, Options
from faq.factor import Factor, Source
from faq.inputs import check_constants
from faq.kernel.stats import RelationStats
from faq.kernel.table import renamed
from faq.plan import physical
from faq.plan.aggregates import Aggregates, resolve
from faq.plan.logical import (
    Plan,
    make_plan,
    private_rule,
    rename_plan,
)
from faq.plan.report import Trace, render
from faq.plan.settings import Settings, current
from faq.query_task import query_in_one_task, task_placement
from faq.rule import VALUE, Rule, parse_rule, without_constants
from faq.session import (
    current_session,
    fixed_plans_for,
    quiet_spark_errors,
)
from faq.spark.tasks import query_error
from faq.witness import Witnesses, WitnessRecorder, witness_frame
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["Query", "Run"]

_RESERVED = ("order", "join", "trace", "backend")


class Query:
    """A functional aggregate query over one semiring.

    Build one with :func:`query` (a rule) or use :func:`einsum`.  The head's
    variables are free; every other variable is ⊕-aggregated.

    Examples
    --------
    >>> q = query("Q(i, l) :- A(i, j), B(j, k), C(k, l)", semiring="real")  # doctest: +SKIP
    >>> out = q.solve(A=A, B=B, C=C)                                        # doctest: +SKIP
    >>> print(q.explain(A=A, B=B, C=C))                                     # doctest: +SKIP
    """

    def __init__(
        self,
        rule: str | Rule,
        semiring: str | Semiring = "real",
        aggregates: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(rule, str | Rule):
            raise TypeError(
                f"query: a rule is a string such as 'Q(i) :- A(i, j)' (or a Rule), "
                f"got {type(rule).__name__}: {rule!r}"
            )
        self.rule = parse_rule(rule) if isinstance(rule, str) else rule
        _check_names(self.rule)
        # atoms with constants read fresh relations: their rows selected, constants dropped
        self._plain, self._fresh = without_constants(self.rule)
        self._plain_query: Query | None = None
        self._to, self._engine_rule = private_rule(self._plain)
        self._back = {p: v for v, p in self._to.items()}  # private name -> user's name
        self.semiring = semirings.get(semiring)
        self.aggregates: Aggregates | None = resolve(self.rule, self.semiring, aggregates)
        self._stage = inputs.InputStage(
            self.rule,
            self._plain,
            self._fresh,
            self._engine_rule,
            self._back,
            self.semiring,
            self.aggregates,
        )
        for name in self.rule.relations:
            if name in _RESERVED:
                raise ValueError(
                    f"relation name {name!r} in {self.rule} clashes with a solve() option; "
                    f"rename it (reserved: {', '.join(_RESERVED)})"
                )

    def __repr__(self) -> str:
        extra = f", aggregates={self.aggregates.given!r}" if self.aggregates else ""
        return f"query({str(self.rule)!r}, semiring={self.semiring.name!r}{extra})"

    @property
    def _blocks(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return self.aggregates.blocks if self.aggregates is not None else ()

    @property
    def head(self) -> tuple[str, ...]:
        """The free variables, in head order."""
        return self.rule.head

    def without_constants(self, **relations: Factor) -> tuple[Query, dict[str, Factor]]:
        """The same query over relations without constants, and the relations it reads.

        For a rule with constants (``Q(b) :- M(0, b)``), a query whose atoms with
        constants read fresh relations (``Q(b) :- M__c1(b)``), and ``relations``
        (all of this query's relations, or some: changes, say) mapped to them, each
        constant selecting its rows.  A rule without constants: this query and
        ``relations`` as they are.  The delta rule (:meth:`solve_delta`) runs on it.

        Raises
        ------
        ValueError
            A constant whose type is not its column's (see :func:`check_key_types`).
        """
        if not self._fresh:
            return self, dict(relations)
        check_constants(self.rule, relations)
        if self._plain_query is None:
            self._plain_query = Query(self._plain, self.semiring)
        return self._plain_query, self._stage.selections(relations)

    # -- public API --------------------------------------------------------------------------
    def plan(self, order: str | Sequence[str] = "auto", **relations: Any) -> Plan:
        """The InsideOut plan for these relations (statistics only; nothing is joined)."""
        _, stats, pairs = self._stage.read(relations, "auto")
        return make_plan(self.rule, stats, order, pairs, self._blocks)

    def solve(
        self,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        trace: bool = False,
        backend: str = "auto",
        witness: bool = False,
        **relations: Any,
    ) -> Factor:
        """Evaluate the query; return a Factor over the head variables.

        The same as ``run(...).result`` (see :meth:`run`, which also returns the plan
        and the trace of the run).

        Parameters
        ----------
        order : str or list of str
            A strategy name (``"auto"``, ``"optimal"``, ``"greedy"``,
            ``"textual"``) or an explicit elimination order of the bound variables.
        join : {"auto", "binary", "wcoj"}
            Join method: by the bag's shape and skew (worst-case optimal
            Generic Join for cyclic bags), or forced.
        trace : bool
            Count every intermediate of Spark joins (extra Spark jobs), shown
            by :meth:`explain` as "largest intermediate".
        backend : {"auto", "driver", "tasks", "spark"}
            Where steps run: by size (relations that fit in the driver run on
            the local kernel, in the driver or, for much work, in Spark tasks;
            larger ones as Spark joins), or forced.  The thresholds are those of
            :func:`faq.settings`.
        witness : bool
            Also find, per output key, an assignment of the bound variables that
            attains its value (selective ⊕ only: max or min); read it with
            :meth:`Factor.witnesses` or ``Factor.witness_frame``.  See
            :mod:`faq.witness` (ties: the smallest eliminated values win).
        **relations
            One per relation name: a Factor, or rows (a Spark or pandas DataFrame, a
            pyarrow Table, a numpy structured array: key columns by position, then an
            optional ``value``); a plain numpy array is refused as ambiguous (see
            :func:`faq.relation_kind`).

        Returns
        -------
        Factor
            Over the head variables; local when computed locally.  Its rows,
            ``vars``, ``df`` and ``to_dict()`` are those of a plain solve.

        Raises
        ------
        ValueError
            Missing or extra relations, arity mismatches, null keys, values
            outside the semiring, a bad order, join method or backend;
            ``witness=True`` with a semiring whose ⊕ is not selective, or with
            per-variable ``aggregates``.
        OverflowError
            A 64-bit integer semiring (counting, integer) overflowed.
        """
        return self.run(order, join, trace, backend, witness, **relations).result

    def run(
        self,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        trace: bool = False,
        backend: str = "auto",
        witness: bool = False,
        **relations: Any,
    ) -> Run:
        """Evaluate the query and return the record of the run: result, plan and trace.

        Takes the arguments of :meth:`solve`.  ``run.result`` is what ``solve``
        returns; ``run.plan`` the InsideOut plan (in the user's variable names);
        ``run.trace`` each step's physical choice and actual figures;
        ``q.explain(run)`` (or ``run.explain()``) the report as text.  Nothing is
        kept on the query: two runs never share state.
        """
        return self._run(order, join, trace, backend, witness, relations)

    def _run(
        self,
        order: str | Sequence[str],
        join: str,
        trace: bool,
        backend: str,
        witness: bool,
        relations: dict[str, Any],
        defer: bool = False,
    ) -> Run:
        # errors re-raised as one line; fixed Spark plans (a job per action, not per shuffle)
        held = [r.source.df if isinstance(r, Factor) else r for r in relations.values()]
        with quiet_spark_errors(), fixed_plans_for(held):
            return self._planned_run(order, join, trace, backend, witness, relations, defer)

    def _planned_run(
        self, order: Any, join: str, trace: bool, backend: str, witness: bool, relations: Any,
        defer: bool,
    ) -> Run:  # fmt: skip
        physical.check_options(join, backend)
        rec = None
        if witness:
            if self.aggregates is not None:
                raise ValueError(
                    f"query {self.rule}: witness=True is not supported with per-variable "
                    f"aggregates ({self.aggregates.describe()}); solve without one or the other"
                )
            rec = WitnessRecorder(self.semiring)  # refuses a non-selective ⊕
        placed = None
        if not (witness or defer):  # inputs kept in Spark that fit one task: one job
            placed = task_placement(
                self.rule, self.semiring, relations, self._stage.factors, backend
            )
        if placed is not None:
            try:
                result, plan, tr = query_in_one_task(self, placed, order, join, trace)
            except Exception as exc:
                raise query_error(exc, self.rule, self.semiring) from exc
            return Run(result, plan, tr, self.semiring.name, current())
        atoms, stats, pairs = self._stage.read(relations, backend)
        plan = make_plan(self.rule, stats, order, pairs, self._blocks)
        opts = Options(join, backend, trace, hook=rec, names=self._back, defer_last=defer)
        ex = Executor(self.semiring, _session(atoms), opts)
        try:
            result, run = ex.run(rename_plan(plan, self._to, self._engine_rule), atoms, pairs)
            if result.table is None:
                ex.rows_frame(result)  # one-cell steps left pending: their program, not run
        except Exception as exc:
            raise query_error(exc, self.rule, self.semiring) from exc
        run = replace(
            run,
            steps=tuple(replace(s, choice=_choice_names(s.choice, self._back)) for s in run.steps),
        )
        found = None
        if rec is not None:  # the back-pointers the run recorded, walked from its result
            frame = witness_frame(result, self._engine_rule.head, rec)
            found = Witnesses(frame.rename(columns=self._back))
        out = _factor(result, self.rule, self._to, self._back, self.semiring, found)
        return Run(out, plan, run, self.semiring.name, ex.settings)

    def check_incremental(self, what: str) -> None:
        """Raise ValueError when this query cannot be maintained incrementally (``what``
        names the caller): per-variable aggregates are not, since a change under a max
        cannot be undone by adding a delta."""
        if self.aggregates is not None:
            raise ValueError(
                f"{what}: query {self.rule} has per-variable aggregates "
                f"({self.aggregates.describe()}), which are not maintained incrementally "
                "(a max or min has no inverse to subtract a deleted tuple's contribution); "
                "solve it again instead"
            )

    def explain(
        self,
        run: Run | None = None,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        backend: str = "auto",
        **relations: Any,
    ) -> str:
        """The plan as text: variable order, each step's factors, where and how it runs, sizes.

        ``q.explain(run)`` is the report of that run (:meth:`run`), with actual
        sizes and seconds.  ``q.explain(**relations)`` plans without running:
        estimated sizes and the physical choices the settings in force
        (:func:`faq.settings`) would make; nothing is joined.
        """
        if run is not None:
            if not isinstance(run, Run):
                raise TypeError(
                    f"explain: the first argument is a Run (from q.run(...)), got "
                    f"{type(run).__name__}; pass relations by name: q.explain(E=...)"
                )
            if run.plan.rule != self.rule or run.semiring != self.semiring.name:
                raise ValueError(
                    f"explain: the run is of {run.plan.rule} over {run.semiring!r}, not of "
                    f"this query, {self.rule} over {self.semiring.name!r}"
                )
            if relations:
                raise ValueError(
                    f"explain: a run is reported as it ran; relation(s) "
                    f"{', '.join(map(repr, relations))} given as well would not be read: "
                    "pass the run, or the relations"
                )
            return run.explain()
        physical.check_options(join, backend)
        placed = task_placement(self.rule, self.semiring, relations, self._stage.factors, backend)
        atoms, stats, pairs = self._stage.read(relations, backend)
        plan = make_plan(self.rule, stats, order, pairs, self._blocks)
        if placed is not None:  # planned again in the task, from exact counts
            why = placed.placed.why
            return render(plan, None, self.semiring.name, settings=current(), placement=why)
        ex = Executor(self.semiring, _session(atoms), Options(join, backend))
        private = rename_plan(plan, self._to, self._engine_rule)
        choices = [_choice_names(c, self._back) for c in ex.choices(private, atoms, pairs)]
        return render(plan, choices, self.semiring.name, settings=ex.settings)


@dataclass(frozen=True)
class Run:
    """The record of one :meth:`Query.run`: its result, plan and trace.

    Attributes
    ----------
    result : Factor
        The answer (what :meth:`Query.solve` returns).
    plan : Plan
        The InsideOut plan: variable order and steps, estimated sizes.
    trace : Trace
        Per step, the physical choice made and the actual rows and seconds.
    semiring : str
        The query's semiring.
    settings : Settings
        The thresholds in force during the run (:func:`faq.settings`).
    """

    result: Factor
    plan: Plan
    trace: Trace
    semiring: str
    settings: Settings

    def explain(self) -> str:
        """The report of this run as text (what ``Query.explain(run)`` returns)."""
        choices = [s.choice for s in self.trace.steps]
        return render(self.plan, choices, self.semiring, self.trace, settings=self.settings)


def _session(atoms: Sequence[Data]) -> SparkSession | None:
    for a in atoms:
        if a.df is not None:
            return a.df.sparkSession
    return current_session()


def _check_names(rule: Rule) -> None:
    """Refuse variables whose names Spark cannot tell apart: names equal ignoring case
    (Spark resolves column names case-insensitively, so the answer's DataFrame could not
    hold both), or a variable spelled like the annotation column in another case."""
    seen: dict[str, str] = {VALUE: VALUE}
    for v in rule.variables:
        other = seen.setdefault(v.casefold(), v)
        if other != v:
            what = f"the annotation column {VALUE!r}" if other == VALUE else f"variable {other!r}"
            raise ValueError(
                f"rule {rule}: variable {v!r} differs from {what} only in case; "
                "Spark column names are case-insensitive, so rename one of them"
            )


def _choice_names(c: physical.Choice, back: Mapping[str, str]) -> physical.Choice:
    """A step's choice with its binding order in the user's variable names (``back``:
    private name -> user's name)."""
    shares = c.shares.renamed(back) if c.shares is not None else None
    return replace(c, order=tuple(back.get(v, v) for v in c.order), shares=shares)


def deferred_run(
    q: Query, order: str | Sequence[str], join: str, backend: str, relations: dict[str, Any]
) -> Run:
    """:meth:`Query.run` with an answer computed in Spark left as a plan (estimated sizes,
    keys that may repeat), for a caller in ``faq`` that ⊕-combines several in one job
    (:func:`faq.solve_delta`'s terms) and raises its errors (``spark.tasks.query_error``)."""
    return q._run(order, join, False, backend, False, relations, defer=True)


def _factor(
    d: Data,
    rule: Rule,
    to: Mapping[str, str],
    back: Mapping[str, str],
    S: Semiring,
    witnesses: Witnesses | None = None,
) -> Factor:
    """The answer as a Factor over the rule's head, private names mapped back, built with
    the run's ``witnesses`` (``witness=True``)."""
    head = rule.head
    if d.table is not None:
        t = d.table
        t = renamed(t, tuple(back[v] for v in t.vars))
        stats = None  # the last step's distinct values are counted only if ever needed
        if d.distinct or not t.vars:
            distinct = tuple(int(d.distinct.get(to[v], t.rows)) for v in t.vars)
            stats = RelationStats(t.rows, distinct)
        return Factor.from_source(Source.local(t, S, stats), rule.name, witnesses=witnesses)
    assert d.df is not None
    from pyspark.sql import functions as F

    df = d.df.select(*[F.col(to[v]).alias(v) for v in head], F.col(VALUE))
    distinct = tuple(int(d.distinct.get(to[v], d.rows)) for v in head)
    stats = RelationStats(int(d.rows), distinct, exact=not d.lazy)  # a deferred one: estimates
    src = Source.spark(df, head, S, checked=True, consolidated=d.consolidated, stats=stats)
    return Factor.from_source(src, rule.name, witnesses=witnesses)
