"""Programs of several rules, recursive ones included: least fixpoints by semi-naive rounds.

A program is rules separated by line ends or ``;``.  Relations named in a head
are *defined* (their rules' results ⊕-combined); the others are inputs.  The
answer is the relation of the first rule's head.  Defined relations are
evaluated in dependency order, one strongly connected group at a time; inside a
recursive group, semi-naive evaluation:

* round 0: Δ₀ = the group's base rules (those whose body names no relation of
  the group), evaluated by :meth:`faq.Query.solve`;
* round k: the candidates are the delta rule (:func:`faq.delta.solve_delta`) of
  every recursive rule, for the change Δₖ of its relations (the state before
  Δₖ as the relations).  For an idempotent ⊕ (boolean, min-plus, max-plus,
  max-product...) Δₖ₊₁ keeps the candidates that improve the state
  (``c ⊕ old != old``), with their new annotation; otherwise (rings, counting)
  Δₖ₊₁ is every candidate: the state is the sum of all rounds;
* it stops when Δ is empty.  After ``max_rounds`` rounds (the ``max_rounds``
  keyword of :meth:`Program.solve`) it raises a ValueError naming the relations
  still changing: counting around a cycle, or a negative cycle in min-plus.

Joins run in the planner and executor (driver kernel, tasks or Spark); the
state and each round's ⊕-merge are numpy tables in the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

import semirings
from faq.delta import solve_delta
from faq.factor import Factor
from faq.inputs import relation_factor
from faq.kernel.keyed import changed_rows
from faq.kernel.table import Table, concat, group_reduce
from faq.plan.convergence import idempotent_on, negative_cycle, nonconvergence
from faq.plan.settings import current
from faq.query import Query
from faq.rule import Rule, parse_rule, split_rules
from semirings import Semiring
from semirings.local import local_ops

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
            node's predecessor on a best path (None for a key a base rule attains).
        max_rounds : int
            Most semi-naive rounds per recursive group (default: the ``max_rounds``
            setting, :func:`faq.settings`).
        **relations
            One per input relation, read as :meth:`faq.Query.solve` reads them
            (:func:`faq.relation_kind`).

        Raises
        ------
        ValueError
            A missing, unexpected or defined relation, an arity mismatch, or no
            fixpoint after ``max_rounds`` rounds (the error names the relations).
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
        # each input is read once (one Spark job at most): checked, consolidated and, when it
        # fits, collected, so that every round's delta rule joins it in the driver instead of
        # scanning a DataFrame again
        local = backend != "spark"
        inputs = {
            n: f.validated(self.semiring, n, local=local)
            for n, f in self._relations(relations).items()
        }
        opts = {"order": order, "join": join, "backend": backend}
        ev = _Evaluation(self, inputs, opts, max_rounds)
        for g in self.groups:
            ev.group(g)
        out = Factor.from_table(ev.state[self.answer], self.semiring, self.answer)
        if witness:
            out.witness_frame = ev.witnesses(self.answer)
        return ProgramRun(out, tuple(ev.rounds), self)

    def explain(
        self,
        run: ProgramRun | None = None,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        backend: str = "auto",
        **relations: Any,
    ) -> str:
        """The groups in evaluation order and, per semi-naive round, each Δ's size and
        where its joins ran.

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
        return run.explain()


@dataclass(frozen=True)
class Round:
    """One semi-naive round of a group: its Δ sizes and where the delta rule ran."""

    group: tuple[str, ...]
    round: int
    delta: tuple[tuple[str, int], ...]
    where: tuple[str, ...]


@dataclass(frozen=True)
class ProgramRun:
    """The record of one :meth:`Program.run`: the answer and every round."""

    result: Factor
    rounds: tuple[Round, ...]
    program: Program

    def explain(self) -> str:
        """The groups in evaluation order and, per round, each Δ's size and where it ran."""
        p = self.program
        lines = [f"program ({p.semiring.name}), answer {p.answer}:"]
        lines += [f"  {r}" for r in p.rules]
        for g in p.groups:
            kind = "recursive" if g.recursive else "non-recursive"
            lines.append(f"group {', '.join(g.names)} ({kind}):")
            for rd in self.rounds:
                if rd.group != g.names:
                    continue
                sizes = ", ".join(f"Δ{n} {k} rows" for n, k in rd.delta)
                where = f" [{', '.join(rd.where)}]" if rd.where else ""
                lines.append(f"  round {rd.round}: {sizes}{where}")
        return "\n".join(lines)


class _Evaluation:
    """One solve of a program: the defined relations' tables, filled group by group."""

    def __init__(
        self, p: Program, inputs: dict[str, Factor], opts: dict[str, Any], max_rounds: int
    ) -> None:
        self.p = p
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
        base: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        for i in g.base:
            r = p.rules[i]
            f = p._queries[i].solve(**self.opts, **self.relations(r))
            base[r.name].append(self.table(r.name, f))
        delta = {n: self.merge(ts) for n, ts in base.items()}
        old = {n: self.empty(n) for n in g.names}
        self.record(g, 0, delta, [])
        idempotent = self.S.idempotent or self.idempotent_on(list(delta.values()), check=False)
        k = 0
        while g.recursive and any(d.rows for d in delta.values()):
            k += 1
            if k > self.max_rounds:
                self.refuse(g, delta)
            now = {n: self.merge([old[n], delta[n]]) for n in g.names}
            cand, where = self.candidates(g, old, delta)
            if idempotent and self.idempotent_on([t for ts in cand.values() for t in ts]):
                delta = {
                    n: changed_rows(now[n], self.merge([now[n], *cand[n]]), self.ops)[0]
                    for n in g.names
                }
            else:
                delta = {n: self.merge(cand[n]) for n in g.names}
            if negative_cycle(self.S, k, now, delta):
                raise nonconvergence(self.S, g.names, delta, k, cycle=True)
            old = now
            self.record(g, k, delta, where)
        for n in g.names:
            self.state[n] = self.merge([old[n], delta[n]])

    def idempotent_on(self, tables: list[Table], check: bool = True) -> bool:
        """:func:`idempotent_on` for this program's semiring."""
        return idempotent_on(self.S, tables, check)

    def candidates(
        self, g: _Group, old: dict[str, Table], delta: dict[str, Table]
    ) -> tuple[dict[str, list[Table]], list[str]]:
        """Every recursive rule's delta terms for the change ``delta`` of ``old``."""
        p = self.p
        cand: dict[str, list[Table]] = {n: [self.empty(n)] for n in g.names}
        where: list[str] = []
        for i in g.recursive:
            r = p.rules[i]
            changes = {
                n: self.factor(n, delta[n]) for n in r.relations if n in delta and delta[n].rows
            }
            if not changes:
                continue
            res = solve_delta(
                p._queries[i],
                self.relations(r, old),
                changes,
                order=self.opts["order"],
                join=self.opts["join"],
                local=self.opts["backend"] != "spark",
            )
            where.append(res.where)
            cand[r.name].append(self.table(r.name, res.change))
        return cand, sorted(set(where))

    def record(self, g: _Group, k: int, delta: dict[str, Table], where: list[str]) -> None:
        sizes = tuple((n, int(t.rows)) for n, t in delta.items())
        self.rounds.append(Round(g.names, k, sizes, tuple(where)))

    def refuse(self, g: _Group, delta: dict[str, Table]) -> None:
        raise nonconvergence(self.S, g.names, delta, self.max_rounds)

    def witnesses(self, name: str) -> pd.DataFrame:
        """Per key of ``name``, the bound variables of the first rule attaining its value
        (named as in that rule, with ``_`` appended while a name is one of ``name``'s
        key names; None where the rule has no such variable)."""
        p = self.p
        final = self.state[name]
        head = p.vars[name]
        want = pd.DataFrame({v: c for v, c in zip(head, final.cols, strict=True)})
        want["value"] = final.values if final.values is not None else self.S.one
        found = want[list(head)].copy()
        done = np.zeros(len(found), dtype=bool)
        for i, r in enumerate(p.rules):
            if r.name != name:
                continue
            names = dict(zip(r.head, head, strict=True))
            for b in r.bound:
                names[b] = b
                while names[b] in head:
                    names[b] += "_"
                if names[b] not in found:
                    found[names[b]] = None
            f = p._queries[i].solve(witness=True, **self.opts, **self.relations(r))
            w = f.witness_frame.rename(columns=names)
            w = w.astype({names[b]: object for b in r.bound})  # a left merge keeps ints
            m = want.merge(w, on=list(head), how="left", suffixes=("", "_rule"), indicator=True)
            hit = (m["_merge"] == "both").to_numpy() & ~done
            hit &= (m["value_rule"] == m["value"]).to_numpy()
            for b in r.bound:
                found.loc[hit, names[b]] = m.loc[hit, names[b]].to_numpy()
            done |= hit
        return found


def _reachable(n: str, deps: Mapping[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(deps[n])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += deps[m]
    return seen
