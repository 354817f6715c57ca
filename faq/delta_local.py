"""The delta rule where the rows are local: its result types, and its driver path.

:class:`LocalDelta` evaluates ``ΔQ = ⊕_i Q(R_1', …, R_{i-1}', ΔR_i, R_{i+1}, …, R_n)``
(see :mod:`faq.delta`) over changes held as tables: the rows of the other
relations that can join a term's change are fetched hop by hop, the hops planned
from the rule (:func:`faq.plan.reach.hops`; hop 1: the rows sharing a value with the
change; hop 2: the rows sharing a value with those; ...), each hop one read per
relation for all terms at once (binary searches on a keyed relation's tries and
masks on a local table, :mod:`faq.kernel.reach`; a bounded scan of a Spark one,
:mod:`faq.spark.reach`), and the terms are then solved on the local kernel; over
keyed relations every term runs as seeded joins on their tries.  Nothing here needs
a Spark session unless a relation is in Spark: the same code runs in a Spark task
over rows shipped there (:mod:`faq.delta`'s one-task path).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.executor import Data, Executor, Options
from faq.factor import Factor
from faq.kernel.join import pair_join
from faq.kernel.keyed import KeyedTable
from faq.kernel.paired import Term, keyed_delta
from faq.kernel.reach import at_keys, filtered, matching_rows, narrow
from faq.kernel.table import Table, concat, consolidated, group_reduce
from faq.plan.logical import AtomStats, make_plan
from faq.plan.physical import keyed_runners
from faq.plan.reach import bounds, hops
from faq.query import Query
from faq.rule import Atom, Rule
from faq.spark.convert import arrow_to_table
from faq.spark.reach import collect_bounded, matching
from semirings import Semiring
from semirings.local import count_distinct, distinct, local_ops

__all__ = [
    "DeltaResult",
    "LocalDelta",
    "NeedsSpark",
    "TermReport",
    "Touched",
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
        Each step's join method (``"wcoj"`` or ``"binary"``; ``"pair"``: a term of two
        atoms joined in one step by :func:`faq.kernel.join.pair_join`; ``"lookup"``: a
        rule of one atom read at the keys asked, :func:`faq.kernel.paired.paired_at`).
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

    @classmethod
    def keyed(cls, term: Term) -> TermReport:
        """The report of a term run in the driver by a runner made for keyed relations
        (:func:`faq.kernel.paired.keyed_delta`)."""
        atom, order, method, skipped = term
        return cls(atom, skipped=True) if skipped else cls(atom, False, "driver", order, (method,))


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
    touched : mapping of str to Factor
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
    touched: Mapping[str, Factor]
    why: str = ""

    def explain(self) -> str:
        """How the delta rule ran, as text: where, and why there (the settings that
        decided it, with their values), then a line per term: where it ran, its
        variable order and join methods, or that it was skipped."""
        lines = [f"Δ: {self.where}" + (f" ({self.why})" if self.why else "")]
        for t in self.terms:
            if t.skipped:
                lines.append(f"  term of atom {t.atom}: skipped (another relation is empty)")
                continue
            order = f"order {', '.join(t.order)}" if t.order else ""
            parts = [t.where, order, "/".join(t.methods), t.purpose]
            lines.append(f"  term of atom {t.atom}: " + "; ".join(p for p in parts if p))
        return "\n".join(lines)


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


class Touched(Mapping[str, Factor]):
    """:attr:`DeltaResult.touched` of changes ``deltas``: each changed relation's rows at
    its change's keys, those of keyed relations ``keyed`` read (binary searches) at first
    use, the others given (``read``: found by the lookups that answered the terms)."""

    def __init__(
        self,
        keyed: Mapping[str, KeyedTable],
        deltas: Mapping[str, Table],
        S: Semiring,
        read: Mapping[str, Table] | None = None,
    ) -> None:
        self._keyed, self._deltas, self._S = keyed, deltas, S
        self._given = dict(read or {})
        self._read: dict[str, Factor] | None = None

    def _rows(self) -> dict[str, Factor]:
        if self._read is None:
            at = {
                n: self._given[n] if n in self._given else self._keyed[n].at(d.cols)
                for n, d in self._deltas.items()
            }
            self._read = {n: Factor.from_table(t, self._S, n) for n, t in at.items()}
        return self._read

    def __getitem__(self, name: str) -> Factor:
        return self._rows()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._deltas)

    def __len__(self) -> int:
        return len(self._deltas)

    def __repr__(self) -> str:
        return repr(self._rows())


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
        self.deltas = {n: consolidated(d.to_table(), self.ops) for n, d in deltas.items()}
        self.keys = {n: relations[n].vars for n in self.rule.relations}
        self.keyed = {n: f.source.keyed for n, f in relations.items() if f.source.keyed is not None}
        self.local = {n: f.local_table() for n, f in relations.items() if n not in self.keyed}

    def run(self) -> DeltaResult:
        fast = self._on_keyed()
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
            paired = self._pair_term(t)
            if paired is not None:
                results.append(paired[0])
                report.append(TermReport(t.atom, False, "driver", paired[1], ("pair",)))
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
            Touched(self.keyed, self.deltas, self.S, touched),  # keyed ones read when asked
        )

    def _on_keyed(self) -> DeltaResult | None:
        """Every term by the runners made for keyed relations
        (:func:`faq.kernel.paired.keyed_delta`), or None where they do not apply, a
        relation is not keyed, or :func:`faq.plan.physical.keyed_runners` says no."""
        if len(self.keyed) != len(self.keys):
            return None
        if not keyed_runners(self.order, self.join, self.rule.atoms):
            return None
        atoms = [(a.relation, a.vars) for a in self.rule.atoms]
        got = keyed_delta(atoms, self.rule.head, self.ops, self.keyed, self.deltas)
        if got is None:
            return None
        return DeltaResult(
            Factor.from_table(got[0], self.S, f"Δ{self.rule.name}"),
            "driver",
            tuple(TermReport.keyed(t) for t in got[1]),
            Touched(self.keyed, self.deltas, self.S),  # read when asked: a view never asks
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
        """Fetch, hop by hop (:func:`faq.plan.reach.hops`), every atom's rows that can join
        with the term's change, each hop one read per relation for all terms; also each
        changed relation's rows at its change's keys, in the first read, for those not
        keyed (a keyed one's are read only if asked: :class:`Touched`)."""
        plans = {t.atom: hops(self.rule, t.atom) for t in terms}
        if not all(p.complete for p in plans.values()):
            raise NeedsSpark("an atom shares no variable with what the change reaches")
        touched: dict[str, Table] = {}
        last = max((len(p.rounds) for p in plans.values()), default=0)
        for r in range(max(last, 1)):
            requests = [
                (t, h.atom, {k: t.known[v] for k, v in h.cols})
                for t in terms
                if r < len(plans[t.atom].rounds)
                for h in plans[t.atom].rounds[r]
            ]
            answers, probed = self._fetch(requests, self.deltas if r == 0 else {})
            touched.update(probed)
            for (t, j, _), rows in zip(requests, answers, strict=True):
                b = self.rule.atoms[j]
                if j < t.atom and b.relation in self.deltas:  # R' = R ⊕ ΔR at these keys
                    d = filtered(self.deltas[b.relation], _conds(b, t.known))
                    rows = consolidated(concat([rows, d], self.ops), self.ops)
                t.fetched[j] = rows
                narrow(t.known, b.vars, rows.cols)
        return touched

    def _fetch(
        self,
        requests: list[tuple[_Term, int, dict[int, np.ndarray]]],
        probes: Mapping[str, Table],
    ) -> tuple[list[Table], dict[str, Table]]:
        """Answer ``requests`` (one read per relation) and read each probed relation that
        is not keyed at its change's keys."""
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
                    answers[n] = matching_rows(keyed, [requests[n][2]])
                continue  # its rows at the change's keys: read if asked (Touched)
            conds = [requests[n][2] for n in idx]
            probe = probes.get(name)
            if probe is not None:
                conds.append({k: distinct(c) for k, c in enumerate(probe.cols)})
            rows = self._read(name, conds)
            for n in idx:
                answers[n] = filtered(rows, requests[n][2])
            if probe is not None:
                touched[name] = at_keys(rows, probe)
        return answers, touched

    def _read(self, name: str, conds: list[dict[int, np.ndarray]]) -> Table:
        """The rows of relation ``name`` (not keyed) matching any of ``conds``: masks on a
        local table, one bounded scan of a Spark one (:mod:`faq.spark.reach`; past the
        bounds of :func:`faq.plan.reach.bounds`, :class:`NeedsSpark`)."""
        local = self.local.get(name)
        if local is not None:
            return matching_rows(local, conds)
        f = self.relations[name]
        if self._rows(name) == 0 or not conds:
            return empty_change(f.vars, self.ops)
        bound = bounds()
        over = bound.literals_over(
            sum(len(v) for c in conds for v in c.values()), f"lookup keys for relation {name!r}"
        )
        if over:
            raise NeedsSpark(over)
        at = collect_bounded(
            f.df.filter(matching(f.vars, f.key_types, conds)), bound.max_fetch_rows
        )
        if at is None:
            raise NeedsSpark(bound.rows_over(f"lookups of relation {name!r} reach"))
        unique = f.source.consolidated
        return arrow_to_table(at, f.vars, self.S, f"relation {name!r}", check=False, unique=unique)

    # -- one term ------------------------------------------------------------------------------
    def _pair_term(self, t: _Term) -> tuple[Table, tuple[str, ...]] | None:
        """Term ``t`` of a rule of two atoms as one :func:`faq.kernel.join.pair_join` of
        the change and the other atom's fetched rows (no plan, no trie), with the
        variables it joins on and then the others; None where that does not apply: not
        two atoms, an atom with a constant, a variable order or a binary join asked for,
        or a ⊕ that is not idempotent (its sums would run in another order than the
        kernel's, which floats and overflow checks can tell apart)."""
        atoms = self.rule.atoms
        if len(atoms) != 2 or any(a.consts for a in atoms) or not self.S.idempotent:
            return None
        if self.join == "binary" or self.order != "auto":
            return None
        j = 1 - t.atom
        mine = _seen(self.deltas[atoms[t.atom].relation], atoms[t.atom])
        other = _seen(t.fetched[j], atoms[j])
        left, right = (mine, other) if t.atom == 0 else (other, mine)
        got = pair_join(left, right, self.rule.head, self.ops)
        if got is None:
            return None
        on = tuple(v for v in left.vars if v in right.vars)
        rest = tuple(v for v in (*left.vars, *right.vars) if v not in on)
        return got, (*on, *dict.fromkeys(rest))

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
def _values(delta: Table, keys: tuple[str, ...], atom: Atom) -> dict[str, np.ndarray]:
    """The values each variable of ``atom`` takes in the change (agreeing repeated columns)."""
    d = _through(delta, atom)
    assert d.table is not None
    return {v: distinct(c) for v, c in zip(d.table.vars, d.table.cols, strict=True)}


def _through(rows: Table, atom: Atom) -> Data:
    """A relation's rows (columns by position) seen through ``atom``, with statistics."""
    table = _seen(rows, atom)
    dist = {v: float(count_distinct(c)) for v, c in zip(table.vars, table.cols, strict=True)}
    return Data(table.vars, float(table.rows), table=table, distinct=dist)


def _seen(rows: Table, atom: Atom) -> Table:
    """A relation's rows (columns by position) seen through ``atom``: one column per
    variable, the rows whose repeated variables agree."""
    first: dict[str, int] = {}
    for i, v in enumerate(atom.vars):
        first.setdefault(v, i)
    t = rows
    if len(first) != len(atom.vars):
        mask = np.ones(t.rows, dtype=bool)
        for i, v in enumerate(atom.vars):
            mask &= t.cols[i] == t.cols[first[v]]
        t = t.take(np.flatnonzero(mask))
    return Table(tuple(first), tuple(t.cols[i] for i in first.values()), t.values)


def _conds(atom: Atom, known: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    return {k: known[v] for k, v in enumerate(atom.vars) if v in known}


def empty_change(vars_: tuple[str, ...], ops: Any) -> Table:
    """No rows over ``vars_`` (integer key columns), with values of ``ops``."""
    return Table(vars_, tuple(np.empty(0, dtype=np.int64) for _ in vars_), np.empty(0, ops.dtype))
