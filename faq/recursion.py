"""Programs of several rules, recursive ones included: least fixpoints by semi-naive rounds.

A program is rules separated by line ends or ``;``.  Relations named in a head
are *defined* (their rules' results ⊕-combined); the others are inputs.  The
answer is the relation of the first rule's head.  Defined relations are
evaluated in dependency order, one strongly connected group at a time; inside a
recursive group, semi-naive evaluation:

* round 0: Δ₀ = the group's base rules (those whose body names no relation of
  the group), evaluated by :meth:`faq.Query.run`;
* round k: the candidates are the delta rule (:func:`faq.delta.solve_delta`) of
  every recursive rule, for the change Δₖ of its relations (the state before
  Δₖ as the relations).  For an idempotent ⊕ (boolean, min-plus, max-plus,
  max-product...) Δₖ₊₁ keeps the candidates that improve the state
  (``c ⊕ old != old``), with their new annotation; otherwise (rings, counting)
  Δₖ₊₁ is every candidate: the state is the sum of all rounds;
* it stops when Δ is empty.

A fixpoint that does not exist in the semiring is refused with a
:class:`faq.plan.convergence.DivergenceError` (a ValueError) naming the relations
still changing: for an idempotent ⊕ as soon as a round proves an improving cycle
(a negative cycle in min-plus; at the latest one round after every key is
derived, so a long chain is never refused), otherwise after ``max_rounds``
rounds (the ``max_rounds`` keyword of :meth:`Program.solve`; counting around a
cycle), and in both as soon as a round derives a value outside the semiring's
domain (``inf`` in max-product or real, NaN, past 64 bits in counting).

Joins run in the planner and executor (driver kernel, tasks or Spark); the
state and each round's ⊕-merge are numpy tables in the driver.  Past
``local_rows``, inputs kept in Spark that fit ``program_task_rows`` are gathered into one
Spark task, which runs the whole program there (:mod:`faq.program_task`, chosen by
:func:`faq.plan.physical.in_one_task`); larger ones run each group's fixpoint
partitioned in Spark (:mod:`faq.spark.fixpoint`, chosen by
:func:`faq.plan.physical.fixpoint_in_spark`).
The record of a run (:class:`faq.program_run.ProgramRun`) says where each round ran and what it
cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.delta import solve_delta
from faq.factor import Factor
from faq.frontier import frontier_rounds
from faq.inputs import relation_factor
from faq.kernel.merge import changed_rows
from faq.kernel.table import Table, concat, group_reduce
from faq.paths import PointerPaths, WitnessPaths, answer_witnesses
from faq.plan.convergence import (
    idempotent_on,
    improving_cycle,
    improving_cycle_error,
    nonconvergence,
    outside_domain,
    overflowed,
)
from faq.plan.physical import backend_policy, fixpoint_in_spark
from faq.plan.settings import current
from faq.program_run import ProgramRun, Round, RoundProgress
from faq.program_task import program_in_one_task
from faq.query import Query
from faq.rule import VALUE, Rule, parse_rule, split_rules
from faq.source import Source
from faq.spark.fixpoint import Input, SparkFixpoint
from faq.spark.ops import union_all
from faq.witness import Witnesses
from semirings import Semiring
from semirings import spark as spark_ops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Program",
    "ProgramRun",
    "Round",
    "is_program",
]


_RESERVED = ("order", "join", "trace", "backend", "witness", "max_rounds")


def is_program(text: str) -> bool:
    """True when ``text`` holds several rules, or one rule whose head is in its body."""
    rules = split_rules(text)
    if len(rules) != 1:
        return len(rules) > 1
    try:
        r = parse_rule(rules[0], recursive=True)
    except ValueError:
        return False  # the single-rule parser reports it
    return r.name in r.relations


@dataclass
class _Group:
    """Defined relations that depend on each other, with their base and recursive rules."""

    names: tuple[str, ...]
    base: list[int] = field(default_factory=list)
    recursive: list[int] = field(default_factory=list)


class Program:
    """Rules evaluated together: unions, chains of definitions and recursion.

    Build one with :func:`faq.query` from text with several rules (or a
    recursive one).  ``solve`` returns the least fixpoint of the first rule's
    head relation.

    >>> sp = Program("D(x) :- S(x); D(y) :- D(x), E(x, y)", "min-plus")
    >>> sp.inputs
    {'S': 1, 'E': 2}
    """

    def __init__(self, text: str, semiring: str | Semiring = "real") -> None:
        self.text = text
        self.rules: tuple[Rule, ...] = tuple(
            parse_rule(t, recursive=True) for t in split_rules(text)
        )
        if not self.rules:
            raise ValueError(f"program {text!r} has no rules")
        self.semiring = semirings.get(semiring)
        self.answer = self.rules[0].name
        self.arity: dict[str, int] = {}
        self._check_arities()
        self.defined = tuple(dict.fromkeys(r.name for r in self.rules))
        self.inputs = {n: a for n, a in self.arity.items() if n not in self.defined}
        self._queries = [Query(r, self.semiring) for r in self.rules]
        self.groups = self._groups()
        # the defined relations' key names: those of their first rule's head
        self.vars = {r.name: r.head for r in reversed(self.rules)}

    def __repr__(self) -> str:
        return f"query({self.text!r}, semiring={self.semiring.name!r})"

    @property
    def rule(self) -> Rule:
        """The first rule (its head is the answer)."""
        return self.rules[0]

    @property
    def head(self) -> tuple[str, ...]:
        """The answer's variables."""
        return self.rules[0].head

    def witness_paths(
        self,
        final: Callable[[str], Table],
        relations: Callable[[Rule], dict[str, Factor]],
        opts: Mapping[str, Any],
        frame: pd.DataFrame,
    ) -> PointerPaths:
        """The paths along the witnesses of the answer (``out.path(key)``), given its
        witness ``frame``, each relation of the answer's group at the fixpoint
        (``final(name)``), the factors a rule reads (``relations(rule)``) and the
        ``order``, ``join`` and ``backend`` of every solve: read off the frame's pointers
        where they say it, else from the tree of attaining derivations
        (:class:`faq.paths.WitnessPaths`, built on the first ``path`` call that needs it).
        A batch solve and a view's maintained relations give them alike."""
        g = next(g for g in self.groups if self.answer in g.names)
        group = {n: final(n) for n in g.names}
        tree = WitnessPaths(self.rules, g.names, self.answer, self.semiring, group, relations, opts)
        rules = [r for r in self.rules if r.name in g.names]
        return PointerPaths(rules, self.answer, self.vars[self.answer], frame, tree)

    # -- checks ------------------------------------------------------------------------------
    def _check_arities(self) -> None:
        where: dict[str, tuple[Rule, str]] = {}
        for r in self.rules:
            atoms = [(r.name, len(r.head), f"head {r.name}({', '.join(r.head)})")]
            atoms += [(a.relation, a.arity, f"atom {a}") for a in r.atoms]
            for name, arity, what in atoms:
                if name in _RESERVED:
                    raise ValueError(
                        f"rule {r}: relation name {name!r} clashes with a solve() option; "
                        f"rename it (reserved: {', '.join(_RESERVED)})"
                    )
                first = self.arity.setdefault(name, arity)
                where.setdefault(name, (r, what))
                if first != arity:
                    r0, what0 = where[name]
                    raise ValueError(
                        f"{what} in rule {r}: relation {name!r} has arity {arity} here but "
                        f"{first} in {what0} of rule {r0}"
                    )

    def _groups(self) -> list[_Group]:
        """The defined relations' strongly connected groups, dependencies first."""
        deps = {n: set() for n in self.defined}
        for r in self.rules:
            deps[r.name] |= {a.relation for a in r.atoms if a.relation in deps}
        reach = {n: _reachable(n, deps) for n in deps}
        done: set[str] = set()
        groups: list[_Group] = []
        while len(done) < len(deps):
            for n in self.defined:  # a group whose dependencies are all done
                if n in done:
                    continue
                members = tuple(
                    m for m in self.defined if m == n or (m in reach[n] and n in reach[m])
                )
                if all(d in done or d in members for m in members for d in deps[m]):
                    break
            g = _Group(members)
            for i, r in enumerate(self.rules):
                if r.name in members:
                    inner = any(a.relation in members for a in r.atoms)
                    (g.recursive if inner else g.base).append(i)
            if not g.base:
                r = self.rules[g.recursive[0]]
                raise ValueError(
                    f"rule {r}: recursive relation {r.name!r} has no base case (a rule for "
                    f"{', '.join(map(repr, members))} whose body names none of them)"
                )
            groups.append(g)
            done |= set(members)
        return groups

    def _relations(self, given: Mapping[str, Any]) -> dict[str, Factor]:
        for name in given:
            if name in self.defined:
                r = next(r for r in self.rules if r.name == name)
                raise ValueError(
                    f"relation {name!r} is defined by rule {r}; do not pass it to solve()"
                )
            if name not in self.inputs:
                raise ValueError(
                    f"unexpected relation {name!r} for program {self.text!r} "
                    f"(it reads: {', '.join(self.inputs)})"
                )
        for name in self.inputs:
            if name not in given:
                r = next(r for r in self.rules if name in r.relations)
                raise ValueError(f"unknown relation {name!r} in rule {r}: pass it to solve()")
        out = {}
        for n in self.inputs:  # the one rule for relations given by name (faq.inputs)
            atom = next(a for r in self.rules for a in r.atoms if a.relation == n)
            out[n] = relation_factor(n, given[n], atom).for_semiring(self.semiring, n)
        return out

    # -- evaluation --------------------------------------------------------------------------
    def solve(
        self,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        backend: str = "auto",
        witness: bool = False,
        max_rounds: int | None = None,
        **relations: Any,
    ) -> Factor:
        """The least fixpoint: the answer relation (the first rule's head) as a Factor.

        Parameters
        ----------
        order, join, backend
            As for :meth:`faq.Query.solve`, for every rule evaluation.
        witness : bool
            Also give, per answer key, the bound variables of a rule attaining
            its value (a selective ⊕ only): in a shortest-path program, each
            node's predecessor on a best path (None for a key a base rule attains);
            ``out.path(key)`` follows them from a source (:mod:`faq.paths`).
        max_rounds : int
            Most semi-naive rounds per recursive group whose ⊕ is not idempotent
            (default: the ``max_rounds`` setting, :func:`faq.settings`).  An
            idempotent ⊕ needs no bound: its rounds end at the fixpoint, or refuse
            an improving cycle at the latest one round after every key is derived.
        **relations
            One per input relation, read as :meth:`faq.Query.solve` reads them
            (:func:`faq.relation_kind`).

        Raises
        ------
        ValueError
            A missing, unexpected or defined relation, an arity mismatch.
        faq.plan.convergence.DivergenceError
            (a ValueError) No fixpoint in the semiring: still changing after
            ``max_rounds`` rounds, an improving cycle, or a value outside the
            semiring's domain (the error names the relations).
        """
        opts = {"order": order, "join": join, "backend": backend}
        return self.run(witness=witness, max_rounds=max_rounds, **opts, **relations).result

    def run(
        self,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        backend: str = "auto",
        witness: bool = False,
        max_rounds: int | None = None,
        **relations: Any,
    ) -> ProgramRun:
        """Solve the program and return the record of the run: the answer and each round.

        Takes the arguments of :meth:`solve`; ``run.result`` is what ``solve``
        returns, ``run.rounds`` one :class:`Round` per semi-naive round, and
        ``p.explain(run)`` (or ``run.explain()``) the report as text.
        """
        if max_rounds is None:
            max_rounds = current().max_rounds
        if not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
        # each input is read once (one Spark job at most): checked and, when it fits, collected;
        # inputs kept in Spark that fit one task are checked there (faq.program_task)
        t0 = time.perf_counter()
        given, opts = self._relations(relations), {"order": order, "join": join, "backend": backend}
        for checked in (False, True):
            if checked:
                local = backend_policy(backend).collects
                given = {n: f.validated(self.semiring, n, local=local) for n, f in given.items()}
            in_task = program_in_one_task(self, given, opts, max_rounds, t0, witness, checked)
            if in_task is not None:  # the inputs kept in Spark fit one task: one Spark job
                return in_task
        inputs, read = given, _since(t0)
        ev = _Evaluation(self, inputs, opts, max_rounds, witness)
        for g in self.groups:
            ev.group(g)
        found = None
        if self.answer in ev.frames:  # a fixpoint partitioned in Spark (never with witnesses)
            out = ev.frames[self.answer]
            return ProgramRun(out, tuple(ev.rounds), self, read, tuple(ev.plans))
        answer = ev.state[self.answer]
        if witness:  # found from the fixpoint's final state, before the answer is built
            frame = answer_witnesses(
                self.rules,
                self.semiring,
                self.answer,
                self.vars[self.answer],
                answer,
                ev.relations,
                ev.opts,
            )
            paths = self.witness_paths(ev.state.__getitem__, ev.relations, ev.opts, frame)
            found = Witnesses(frame, paths)
        src = Source.local(answer, self.semiring)
        out = Factor.from_source(src, self.answer, witnesses=found)
        return ProgramRun(out, tuple(ev.rounds), self, read, tuple(ev.plans))

    def explain(
        self,
        run: ProgramRun | None = None,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        backend: str = "auto",
        **relations: Any,
    ) -> str:
        """The groups in evaluation order and, per semi-naive round, each Δ's size, where
        its joins ran (and which inputs its lookups read from Spark), the rows it read and
        derived, and its wall time.

        ``p.explain(run)`` reports that run (:meth:`run`); ``p.explain(**relations)``
        runs the program first (a fixpoint's rounds are only known by running it).
        """
        if run is None:
            run = self.run(order=order, join=join, backend=backend, **relations)
        elif not isinstance(run, ProgramRun):
            raise TypeError(
                f"explain: the first argument is a ProgramRun (from p.run(...)), got "
                f"{type(run).__name__}; pass relations by name: p.explain(E=...)"
            )
        elif run.program is not self and (
            run.program.text != self.text or run.program.semiring is not self.semiring
        ):
            raise ValueError(
                f"explain: the run is of program {run.program!r}, not of this one, {self!r}"
            )
        elif relations:
            raise ValueError(
                f"explain: a run is reported as it ran; relation(s) "
                f"{', '.join(map(repr, relations))} given as well would not be read"
            )
        return run.explain()


class _Evaluation:
    """One solve of a program: the defined relations' tables, filled group by group."""

    def __init__(
        self,
        p: Program,
        inputs: dict[str, Factor],
        opts: dict[str, Any],
        max_rounds: int,
        witness: bool = False,
    ) -> None:
        self.p = p
        self.witness = witness
        self.frames: dict[str, Factor] = {}  # relations whose fixpoint ran in Spark
        self.plans: list[tuple[tuple[str, ...], str]] = []
        self.S = p.semiring
        self.ops = local_ops(self.S)
        self.inputs = inputs
        self.opts = opts
        self.max_rounds = max_rounds
        self.state: dict[str, Table] = {}
        self.rounds: list[Round] = []

    def factor(self, name: str, t: Table | None = None) -> Factor:
        if t is None:
            if name in self.inputs:
                return self.inputs[name]
            if name in self.frames:
                return self.frames[name]
            t = self.state[name]
        return Factor.from_table(t, self.S, name)

    def relations(self, rule: Rule, tables: Mapping[str, Table] | None = None) -> dict[str, Factor]:
        tables = tables or {}
        return {n: self.factor(n, tables.get(n)) for n in rule.relations}

    def table(self, name: str, f: Factor) -> Table:
        """``f``'s rows as a table over ``name``'s key names (read by position)."""
        t = f.to_table()
        return Table(self.p.vars[name], t.cols, t.values, unique=t.unique)

    def empty(self, name: str) -> Table:
        cols = tuple(np.empty(0, dtype=np.int64) for _ in self.p.vars[name])
        return Table(self.p.vars[name], cols, np.empty(0, dtype=self.ops.dtype))

    def merge(self, parts: list[Table]) -> Table:
        """The tables ⊕-combined (empty ones skipped: their key types may differ)."""
        full = [t for t in parts if t.rows] or parts[:1]
        return group_reduce(concat(full, self.ops), full[0].vars, self.ops)

    def group(self, g: _Group) -> None:
        p = self.p
        t0 = time.perf_counter()
        rules = [p.rules[i] for i in g.recursive]
        if g.recursive:
            read = {n: self.factor(n) for r in rules for n in r.relations if n not in g.names}
            spark, why = fixpoint_in_spark(
                self.S,
                rules,
                g.names,
                [n for n, f in read.items() if not f.is_local],
                self.opts["backend"],
                self.witness,
            )
            self.plans.append((g.names, why))
            if spark:
                self.spark_group(g, rules, read, t0)
                return
        results, where = self.base(g)
        delta = {
            n: self.merge([self.empty(n), *(self.table(n, f) for f in fs)])
            for n, fs in results.items()
        }
        old = {n: self.empty(n) for n in g.names}
        self.rounds.append(Round(g.names, 0, _sizes(delta), tuple(sorted(where)), _since(t0)))
        if fast := frontier_rounds(self.S, rules, g.names, p.vars, delta, self.inputs):
            self.state[g.names[0]], rounds, how = fast  # a linear path rule: GraphBLAS rounds
            self.rounds += rounds
            self.plans[-1] = (g.names, f"{self.plans[-1][1]}; {how}")
            return
        idempotent = self.S.idempotent or self.idempotent_on(list(delta.values()), check=False)
        k = 0
        progress = RoundProgress(g.names)
        # values leaving the domain (inf, NaN) are refused below, not warned about
        with np.errstate(over="ignore", invalid="ignore"):
            while g.recursive and any(d.rows for d in delta.values()):
                k += 1
                if not idempotent and k > self.max_rounds:
                    raise nonconvergence(self.S, g.names, delta, self.max_rounds)
                t0 = time.perf_counter()
                try:
                    old, delta, rd = self.round(g, k, old, delta, idempotent)
                except OverflowError as exc:
                    raise overflowed(self.S, g.names, k, exc) from exc
                self.rounds.append(replace(rd, seconds=_since(t0)))
                progress.round(k, rd.delta)
        progress.done(k)
        for n in g.names:
            self.state[n] = self.merge([old[n], delta[n]])

    def base(self, g: _Group) -> tuple[dict[str, list[Factor]], set[str]]:
        """The results of the group's base rules, per relation, and where they ran."""
        p = self.p
        results: dict[str, list[Factor]] = {n: [] for n in g.names}
        where: set[str] = set()
        for i in g.base:
            r = p.rules[i]
            run = p._queries[i].run(**self.opts, **self.relations(r))
            where |= {s.choice.backend for s in run.trace.steps}
            if not run.trace.steps or not run.result.is_local:  # no join: where its rows are
                where.add("driver" if run.result.is_local else "spark")
            results[r.name].append(run.result)
        return results, where

    def spark_group(self, g: _Group, rules: list[Rule], read: dict[str, Factor], t0: float) -> None:
        """The group's fixpoint partitioned in Spark (:mod:`faq.spark.fixpoint`): its base
        rules' results stay in Spark as round 0's change."""
        p = self.p
        results, where = self.base(g)
        delta0 = {}
        for n, fs in results.items():
            fs = fs or [self.factor(n, self.empty(n))]
            dfs = [f.df.toDF(*p.vars[n], VALUE) for f in fs]
            df = dfs[0]
            if len(dfs) > 1:  # several base rules: their results ⊕-combined
                df = spark_ops.consolidate(self.S, union_all(dfs), list(p.vars[n]), VALUE)
            delta0[n] = df
        idempotent = self.S.idempotent or idempotent_on(self.S, [], check=False)
        inputs = {
            n: Input(f.df, f.vars, f.stats.rows if f.stats is not None else 0)
            for n, f in read.items()
        }
        fix = SparkFixpoint(self.S, g.names, rules, p.vars, inputs, idempotent, self.max_rounds)
        try:
            fixpoint = fix.run(delta0, sorted(where), self.rounds, t0)
        finally:
            fix.release()
        for n, df in fixpoint.items():
            src = Source.spark(df, p.vars[n], self.S, checked=True, consolidated=True)
            self.frames[n] = Factor.from_source(src, n)

    def round(
        self, g: _Group, k: int, old: dict[str, Table], delta: dict[str, Table], idempotent: bool
    ) -> tuple[dict[str, Table], dict[str, Table], Round]:
        """Round ``k``: the state with ``delta`` merged, the next change, the round's record."""
        now = {n: self.merge([old[n], delta[n]]) for n in g.names}
        # an idempotent round's change holds the new values; otherwise the sums are new
        bad = outside_domain(self.S, g.names, delta if idempotent else now, k - 1)
        if bad is not None:
            raise bad
        cand, where, reads = self.candidates(g, old, delta)
        if idempotent and self.idempotent_on([t for ts in cand.values() for t in ts]):
            nxt = {
                n: changed_rows(now[n], self.merge([now[n], *cand[n]]), self.ops)[0]
                for n in g.names
            }
        else:
            nxt = {n: self.merge(cand[n]) for n in g.names}
        if idempotent and improving_cycle(k, now, nxt):
            raise improving_cycle_error(self.S, g.names, nxt, k)
        rows_in = sum(t.rows for t in delta.values())
        derived = sum(t.rows for ts in cand.values() for t in ts)
        return now, nxt, Round(g.names, k, _sizes(nxt), where, 0.0, rows_in, derived, reads)

    def idempotent_on(self, tables: list[Table], check: bool = True) -> bool:
        """:func:`idempotent_on` for this program's semiring."""
        return idempotent_on(self.S, tables, check)

    def candidates(
        self, g: _Group, old: dict[str, Table], delta: dict[str, Table]
    ) -> tuple[dict[str, list[Table]], tuple[str, ...], tuple[str, ...]]:
        """Every recursive rule's delta terms for the change ``delta`` of ``old``, where
        they ran, and the inputs kept in Spark that driver-side lookups read."""
        p = self.p
        cand: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        where: set[str] = set()
        reads: set[str] = set()
        for i in g.recursive:
            r = p.rules[i]
            changes = {
                n: self.factor(n, delta[n]) for n in r.relations if n in delta and delta[n].rows
            }
            if not changes:
                continue
            rels = self.relations(r, old)
            res = solve_delta(
                p._queries[i],
                rels,
                changes,
                order=self.opts["order"],
                join=self.opts["join"],
                local=backend_policy(self.opts["backend"]).collects,
            )
            where.add(res.where)
            if res.where == "driver":  # lookups of rows kept in Spark: filtered scans
                reads |= {n for n, f in rels.items() if n not in changes and not f.is_local}
            cand[r.name].append(self.table(r.name, res.change))
        return cand, tuple(sorted(where)), tuple(sorted(reads))


def _sizes(delta: Mapping[str, Table]) -> tuple[tuple[str, int], ...]:
    return tuple((n, int(t.rows)) for n, t in delta.items())


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _reachable(n: str, deps: Mapping[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(deps[n])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += deps[m]
    return seen
