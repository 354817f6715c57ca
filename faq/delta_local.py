"""The delta rule where the rows are local: its result types, and its driver path.

:class:`LocalDelta` evaluates ``ΔQ = ⊕_i Q(R_1', …, R_{i-1}', ΔR_i, R_{i+1}, …, R_n)``
(see :mod:`faq.delta`) over changes held as tables: the rows of the other
relations that can join a term's change are fetched by rounds of semi-joins
(round 1: the rows sharing a value with the change; round 2: the rows sharing a
value with those; ...), each round one read per relation for all terms at once
(binary searches on a keyed relation's tries, masks on a local table, a filtered
scan of a Spark one), and the terms are then solved on the local kernel; over
keyed relations every term runs as seeded joins on their tries.  Nothing here needs
a Spark session unless a relation is in Spark: the same code runs in a Spark task
over rows shipped there (:mod:`faq.delta`'s one-task path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.executor import Data, Executor, Options
from faq.factor import Factor
from faq.kernel.seeded import seeded_delta
from faq.kernel.table import Table, concat, group_reduce
from faq.plan.logical import AtomStats, make_plan
from faq.plan.settings import current
from faq.query import Query
from faq.rule import Atom, Rule
from faq.spark.convert import arrow_to_table
from faq.spark.ops import all_of, isin_literals
from semirings import Semiring
from semirings.local import count_distinct, distinct, group_starts, local_ops

__all__ = [
    "DeltaResult",
    "LocalDelta",
    "NeedsSpark",
    "TermReport",
    "empty_change",
    "split_rule",
]


class NeedsSpark(Exception):
    """The delta rule cannot run in the driver; the message says why."""


@dataclass(frozen=True)
class TermReport:
    """How one term of the delta rule ran.

    Attributes
    ----------
    atom : int
        The index of the atom whose change the term reads.
    skipped : bool
        True when another relation of the term is empty (nothing to join).
    where : str
        ``"driver"`` or ``"spark"`` (empty when skipped).
    order : tuple of str
        The variable order of the term's plan.
    methods : tuple of str
        Each step's join method (``"wcoj"`` or ``"binary"``).
    purpose : str
        Empty for the change of the answer; a caller that runs the rule for
        something else says what (an incremental view's "affected groups").
    """

    atom: int
    skipped: bool = False
    where: str = ""
    order: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    purpose: str = ""


@dataclass(frozen=True)
class DeltaResult:
    """What :func:`solve_delta` returns.

    Attributes
    ----------
    change : Factor
        ΔQ over the head variables (zero annotations dropped).
    where : str
        ``"driver"`` (lookups plus the local kernel) or ``"spark"``.
    terms : tuple of TermReport
        One report per term of the delta rule, by atom index.
    touched : dict of str to Factor
        For each changed relation (driver path only): its rows before the
        change at the keys the change names, read in the first round of
        lookups (so a caller can count rows or refuse negative multiplicities
        without another scan).
    why : str
        What decided ``where``, naming the setting (``local_delta_rows``,
        ``max_fetch_rows``, ``max_literals``) and its value.
    """

    change: Factor
    where: str
    terms: tuple[TermReport, ...]
    touched: dict[str, Factor]
    why: str = ""


def split_rule(rule: Rule) -> tuple[Rule, tuple[str, ...]]:
    """The rule with one fresh relation name per atom (``E__1``, ``E__2``…), and the names."""
    taken = set(rule.relations)
    names = []
    for i, a in enumerate(rule.atoms, 1):
        n = f"{a.relation}__{i}"
        while n in taken:
            n = f"_{n}"
        taken.add(n)
        names.append(n)
    atoms = tuple(Atom(n, a.vars) for n, a in zip(names, rule.atoms, strict=True))
    return Rule(rule.name, rule.head, atoms), tuple(names)


# -- the driver path ----------------------------------------------------------------------------
@dataclass
class _Term:
    atom: int
    known: dict[str, np.ndarray]  # candidate values of each variable reached so far
    fetched: dict[int, Table]  # atom index -> the relation's rows (key names) that can join
    skipped: bool = False


class LocalDelta:
    """The delta rule in the driver: rounds of lookups, then each term on the local kernel."""

    def __init__(
        self,
        q: Query,
        relations: Mapping[str, Factor],
        deltas: Mapping[str, Factor],
        order: str | Sequence[str],
        join: str,
    ) -> None:
        self.q = q
        self.rule = q.rule
        self.S: Semiring = q.semiring
        self.ops = local_ops(self.S)
        self.relations = relations
        self.order = order
        self.join = join
        self.deltas = {n: _consolidated(d.to_table(), self.ops) for n, d in deltas.items()}
        self.keys = {n: relations[n].vars for n in self.rule.relations}
        self.keyed = {n: f.source.keyed for n, f in relations.items() if f.source.keyed is not None}
        self.local = {n: f.local_table() for n, f in relations.items() if n not in self.keyed}

    def run(self) -> DeltaResult:
        fast = self._on_tries()
        if fast is not None:
            return fast
        terms = []
        for i, a in enumerate(self.rule.atoms):
            if a.relation not in self.deltas:
                continue
            t = _Term(i, _values(self.deltas[a.relation], self.keys[a.relation], a), {})
            t.skipped = self._empty_other(i)
            terms.append(t)
        touched = self._rounds([t for t in terms if not t.skipped])
        results, report = [], []
        for t in terms:
            if t.skipped:
                report.append(TermReport(t.atom, skipped=True))
                continue
            table, plan, trace = self._solve_term(t)
            results.append(table)
            methods = tuple(s.choice.method for s in trace.steps)
            report.append(TermReport(t.atom, False, "driver", tuple(plan.order), methods))
        head = self.rule.head
        if results:
            change = group_reduce(concat(results, self.ops), head, self.ops)
        else:
            change = empty_change(head, self.ops)
        return DeltaResult(
            Factor.from_table(change, self.S, f"Δ{self.rule.name}"),
            "driver",
            tuple(sorted(report, key=lambda r: r.atom)),
            {n: Factor.from_table(tab, self.S, n) for n, tab in touched.items()},
        )

    def _on_tries(self) -> DeltaResult | None:
        """Every term as seeded joins on the keyed relations' tries
        (:func:`faq.kernel.seeded.seeded_delta`), or None where that does not apply: a
        relation not keyed, annotations not in a ring of integers, a binary join or a
        given variable order asked for, a repeated variable, a constant in an atom."""
        if len(self.keyed) != len(self.keys) or self.join == "binary" or self.order != "auto":
            return None
        if any(a.consts for a in self.rule.atoms):  # atoms read columns by position
            return None
        atoms = [(a.relation, a.vars) for a in self.rule.atoms]
        got = seeded_delta(atoms, self.rule.head, self.ops, self.keyed, self.deltas)
        if got is None:
            return None
        change, plans = got
        report = [
            TermReport(i, skipped=True)
            if self._empty_other(i)
            else TermReport(i, False, "driver", order, ("wcoj",))
            for i, order in plans
        ]
        touched = {n: self.keyed[n].at(d.cols) for n, d in self.deltas.items()}
        return DeltaResult(
            Factor.from_table(change, self.S, f"Δ{self.rule.name}"),
            "driver",
            tuple(report),
            {n: Factor.from_table(tab, self.S, n) for n, tab in touched.items()},
        )

    def _empty_other(self, i: int) -> bool:
        """Whether term ``i`` reads an empty relation (nothing to join)."""
        return any(
            j != i and self._rows(b.relation) == 0 and not (j < i and b.relation in self.deltas)
            for j, b in enumerate(self.rule.atoms)
        )

    def _rows(self, name: str) -> int:
        f = self.relations[name]
        st = f.stats
        return st.rows if st is not None else f.count()

    # -- lookups ------------------------------------------------------------------------------
    def _rounds(self, terms: list[_Term]) -> dict[str, Table]:
        """Fetch, round by round, every atom's rows that can join with the term's change."""
        touched: dict[str, Table] = {}
        first = True
        while True:
            requests: list[tuple[_Term, int, dict[int, np.ndarray]]] = []
            for t in terms:
                for j, b in enumerate(self.rule.atoms):
                    if j == t.atom or j in t.fetched:
                        continue
                    conds = {k: t.known[v] for k, v in enumerate(b.vars) if v in t.known}
                    if conds:
                        requests.append((t, j, conds))
            pending = [
                (t, j)
                for t in terms
                for j in range(len(self.rule.atoms))
                if j != t.atom and j not in t.fetched
            ]
            if not requests and pending:
                raise NeedsSpark("an atom shares no variable with what the change reaches")
            if not requests and not first:
                return touched
            probes = self.deltas if first else {}
            answers, probed = self._fetch(requests, probes)
            touched.update(probed)
            first = False
            for (t, j, _), rows in zip(requests, answers, strict=True):
                b = self.rule.atoms[j]
                if j < t.atom and b.relation in self.deltas:  # R' = R ⊕ ΔR at these keys
                    d = _filter(self.deltas[b.relation], _conds(b, t.known))
                    rows = _consolidated(concat([rows, d], self.ops), self.ops)
                t.fetched[j] = rows
                for k, v in enumerate(b.vars):
                    have = distinct(rows.cols[k])
                    if v in t.known:
                        have = np.intersect1d(t.known[v], have, assume_unique=True)
                    t.known[v] = have
            if not requests:
                return touched

    def _fetch(
        self,
        requests: list[tuple[_Term, int, dict[int, np.ndarray]]],
        probes: Mapping[str, Table],
    ) -> tuple[list[Table], dict[str, Table]]:
        """Answer ``requests`` (one filtered scan per relation) and read each probed
        relation at its change's keys."""
        by_rel: dict[str, list[int]] = {}
        for n, (_, j, _) in enumerate(requests):
            by_rel.setdefault(self.rule.atoms[j].relation, []).append(n)
        for name in probes:
            by_rel.setdefault(name, [])
        answers: list[Table] = [None] * len(requests)  # type: ignore[list-item]
        touched: dict[str, Table] = {}
        for name, idx in by_rel.items():
            keyed = self.keyed.get(name)
            if keyed is not None:  # binary searches per request: no scan, no filtering
                for n in idx:
                    answers[n] = keyed.lookup([requests[n][2]])
                if name in probes:
                    touched[name] = keyed.at(probes[name].cols)
                continue
            conds = [requests[n][2] for n in idx]
            probe = probes.get(name)
            if probe is not None:
                conds.append({k: distinct(c) for k, c in enumerate(probe.cols)})
            rows = self._read(name, conds)
            for n in idx:
                answers[n] = _filter(rows, requests[n][2])
            if probe is not None:
                touched[name] = _at_keys(rows, probe)
        return answers, touched

    def _read(self, name: str, conds: list[dict[int, np.ndarray]]) -> Table:
        """The rows of relation ``name`` matching any of ``conds`` (consolidated)."""
        keyed = self.keyed.get(name)
        if keyed is not None:
            return keyed.lookup(conds) if conds else empty_change(keyed.vars, self.ops)
        local = self.local.get(name)
        if local is not None:
            mask = np.zeros(local.rows, dtype=bool)
            for c in conds:
                mask |= _mask(local, c)
            return local.take(np.flatnonzero(mask))
        f = self.relations[name]
        if self._rows(name) == 0 or not conds:
            return empty_change(f.vars, self.ops)
        literals = sum(len(v) for c in conds for v in c.values())
        most = current().max_literals
        if literals > most:
            raise NeedsSpark(
                f"{literals:,} lookup keys for relation {name!r} > max_literals={most:,}"
            )
        df = f.df
        types = f.key_types
        cond = None
        for c in conds:
            part = all_of([isin_literals(f.vars[k], types[k], v) for k, v in c.items()])
            cond = part if cond is None else cond | part
        most = current().max_fetch_rows
        at = df.filter(cond).limit(most + 1).toArrow()
        if at.num_rows > most:
            raise NeedsSpark(
                f"lookups of relation {name!r} reach over max_fetch_rows={most:,} rows"
            )

        unique = f.source.consolidated
        return arrow_to_table(at, f.vars, self.S, f"relation {name!r}", check=False, unique=unique)

    # -- one term ------------------------------------------------------------------------------
    def _solve_term(self, t: _Term) -> tuple[Table, Any, Any]:
        split, _ = split_rule(self.rule)
        atoms: list[Data] = []
        stats: list[AtomStats] = []
        for j, a in enumerate(self.rule.atoms):
            rows = self.deltas[a.relation] if j == t.atom else t.fetched[j]
            d = _through(rows, a)
            atoms.append(d)
            stats.append(AtomStats(int(d.rows), {v: int(x) for v, x in d.distinct.items()}))
        plan = make_plan(split, stats, self.order)
        ex = Executor(self.S, None, Options(self.join, "driver", parallelism=1))
        result, trace = ex.run(plan, atoms, None)
        assert result.table is not None
        return result.table, plan, trace


# -- helpers ------------------------------------------------------------------------------
def _consolidated(t: Table, ops: Any) -> Table:
    return group_reduce(Table(t.vars, t.cols, t.values, unique=False), t.vars, ops)


def _values(delta: Table, keys: tuple[str, ...], atom: Atom) -> dict[str, np.ndarray]:
    """The values each variable of ``atom`` takes in the change (agreeing repeated columns)."""
    d = _through(delta, atom)
    assert d.table is not None
    return {v: distinct(c) for v, c in zip(d.table.vars, d.table.cols, strict=True)}


def _through(rows: Table, atom: Atom) -> Data:
    """A relation's rows (columns by position) seen through ``atom``."""
    first: dict[str, int] = {}
    for i, v in enumerate(atom.vars):
        first.setdefault(v, i)
    t = rows
    if len(first) != len(atom.vars):
        mask = np.ones(t.rows, dtype=bool)
        for i, v in enumerate(atom.vars):
            mask &= t.cols[i] == t.cols[first[v]]
        t = t.take(np.flatnonzero(mask))
    table = Table(tuple(first), tuple(t.cols[i] for i in first.values()), t.values)
    dist = {v: float(count_distinct(c)) for v, c in zip(table.vars, table.cols, strict=True)}
    return Data(table.vars, float(table.rows), table=table, distinct=dist)


def _conds(atom: Atom, known: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    return {k: known[v] for k, v in enumerate(atom.vars) if v in known}


def _mask(t: Table, conds: Mapping[int, np.ndarray]) -> np.ndarray:
    mask = np.ones(t.rows, dtype=bool)
    for k, values in conds.items():
        mask &= np.isin(t.cols[k], values)
    return mask


def _filter(t: Table, conds: Mapping[int, np.ndarray]) -> Table:
    return t.take(np.flatnonzero(_mask(t, conds)))


def _at_keys(rows: Table, keys: Table) -> Table:
    """The rows of ``rows`` whose whole key is a key of ``keys``."""
    if rows.rows == 0 or keys.rows == 0:
        return rows.take(np.empty(0, dtype=np.int64))
    both = [np.concatenate([a, b]) for a, b in zip(rows.cols, keys.cols, strict=True)]
    perm, starts = group_starts(both)
    group = np.empty(len(perm), dtype=np.int64)
    group[perm] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(perm))))
    in_keys = np.zeros(len(starts), dtype=bool)
    in_keys[group[rows.rows :]] = True
    return rows.take(np.flatnonzero(in_keys[group[: rows.rows]]))


def empty_change(vars_: tuple[str, ...], ops: Any) -> Table:
    """No rows over ``vars_`` (integer key columns), with values of ``ops``."""
    return Table(vars_, tuple(np.empty(0, dtype=np.int64) for _ in vars_), np.empty(0, ops.dtype))
