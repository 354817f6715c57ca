"""The state of a view of a program (recursive queries): ``IncrementalView(program, ...)``.

:class:`ProgramState` follows :class:`incremental.protocol.ViewState`, as the driver and
Spark states of a one-rule view do, so :class:`incremental.IncrementalView` steps,
commits and reopens it through the same code.  Deltas are read by the view
(:func:`incremental.deltas.read_delta`); this state gives them their meaning:

* ``integer``, ``real`` and ``counting``: a tuple's annotation changes by
  ``_weight · value`` (counting refuses a negative multiplicity);
* ``boolean``: a tuple is present while its number of rows is positive;
* every other semiring: a relation is a multiset of annotated rows, a tuple's
  annotation the ⊕ of its rows, and a retraction names a row it holds.

Its relations are in the driver: every input relation (and its rows or counts) and every
defined relation as keyed tables (:class:`incremental.driver_state.LocalKeyed`), plus the
rounds of every linear recursive ring group (:class:`incremental.traced.Rounds`).  Each
tick updates the defined relations by :class:`incremental.fixpoint.Fixpoint` (delete and
rederive for an idempotent ⊕, the batch's rounds maintained for linear rings and
counting, a recompute otherwise); nothing is changed in place, so a refused tick leaves
the state as it was.  Input relations may be sets (``sets=``, :mod:`incremental.sets`).

A durable view (``state_dir``) writes all of them as parts (:meth:`ProgramState.parts`):
``rel-<relation>`` (every relation's annotations, in the working semiring),
``rows-<input>`` (an input's rows or counts, where the semiring keeps them) and
``trace-<relation>`` (the rounds of a traced group's relation); each records what a tick
changed in it, so a tick is one journal frame.  :meth:`ProgramState.restore` reads them
back, with the journal's ticks after them.  There is no Spark-resident program state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import semirings
from faq import Factor, Program, Rule, Witnesses, settings
from faq.kernel import Table, changed_rows
from incremental.deltas import Rows
from incremental.driver_state import LocalKeyed
from incremental.fixpoint import Diff, Fixpoint, working_semiring
from incremental.journal import Frame, StateError
from incremental.manifest import relation_part, rows_part, trace_part
from incremental.protocol import Change, How
from incremental.regimes import regime
from incremental.sets import set_delta
from incremental.store import Store
from incremental.tables import (
    ANNOTATION,
    annotation_delta,
    at_groups,
    distinct_keys,
    empty_table,
    kind,
    kind_name,
    multiplicities,
    refuse_missing,
    refuse_negative,
    repeat_reduce,
    row_counts,
)
from incremental.traced import ROUND, Rounds
from incremental.witness_programs import ProgramWitnesses, program_witnesses
from semirings import Semiring
from semirings.local import local_ops

__all__ = ["ProgramState", "check_max_rounds", "program_keys", "program_text", "unknown_input"]


def program_keys(program: Program) -> dict[str, tuple[str, ...]]:
    """The key names of every relation of ``program``: ``c0, c1, ...`` for an input, the
    head's variables of its first rule for a defined relation."""
    keys = {n: tuple(f"c{i}" for i in range(a)) for n, a in program.inputs.items()}
    keys.update(program.vars)
    return keys


def program_text(program: Program) -> str:
    """The program's rules, one per line, as a durable view's manifest names it."""
    return "\n".join(str(r) for r in program.rules)


def unknown_input(program: Program, names: Sequence[str]) -> str:
    """The refusal of ``names`` as relations a view of ``program`` takes changes of (a
    defined relation is named with its rule)."""
    defined = [n for n in names if n in program.defined]
    if defined:
        r = next(r for r in program.rules if r.name == defined[0])
        return (
            f"relation {defined[0]!r} is defined by rule {r}: a view of the program takes "
            f"changes of its input relations only ({', '.join(program.inputs)})"
        )
    return (
        f"unknown relation(s) {', '.join(map(repr, names))} for program {program.text!r}; "
        f"its input relations are: {', '.join(program.inputs)}"
    )


def check_max_rounds(max_rounds: Any) -> int | None:
    """``max_rounds`` checked: None or a positive integer.

    Raises
    ------
    ValueError
        Anything else.
    """
    if max_rounds is not None and (
        not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 1
    ):
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    return max_rounds


@dataclass(frozen=True)
class ProgramState:
    """A program view's relations in the driver (:class:`incremental.protocol.ViewState`).

    Attributes
    ----------
    program : faq.Program
        The program.
    rels : dict of str to LocalKeyed
        Every relation (inputs and defined ones): its annotation per key, in the working
        semiring (:func:`incremental.fixpoint.working_semiring`).
    rows : dict of str to LocalKeyed
        Per input relation its rows (a multiset: keys plus
        :data:`incremental.tables.ANNOTATION`, counts) in the general regime, its row
        counts per key for boolean, nothing (no columns) in a ring or counting.
    traces : mapping
        The rounds of every linear recursive ring group, by the group's relation names.
    max_rounds : int, optional
        Most semi-naive rounds per group and tick (None: the ``max_rounds`` setting when
        the step runs).
    witness : bool
        ``result()`` carries the answer's witnesses.
    wit : ProgramWitnesses, optional
        The witnesses kept tick by tick (None: found when read, or none kept).
    how : How
        The delta queries' options of the last tick (witnesses found when read use them).
    """

    program: Program
    rels: dict[str, LocalKeyed]
    rows: dict[str, LocalKeyed]
    traces: Mapping[tuple[str, ...], Rounds] = field(default_factory=dict)
    max_rounds: int | None = None
    witness: bool = False
    wit: ProgramWitnesses | None = None
    how: How = How("auto", "auto", True)
    where: str = "driver"

    @classmethod
    def empty(
        cls, program: Program, max_rounds: int | None = None, witness: bool = False
    ) -> ProgramState:
        """A state with every relation empty."""
        W = working_semiring(program.semiring)
        o, io = local_ops(W), local_ops(semirings.INTEGER)
        keys = program_keys(program)
        rels = {n: LocalKeyed.empty(k, o) for n, k in keys.items()}
        rows: dict[str, LocalKeyed] = {}
        reg = regime(program.semiring)
        for n in program.inputs:
            k = keys[n]
            if reg == "boolean":
                rows[n] = LocalKeyed.empty(k, io)
            elif reg == "general":
                t = empty_table((*k, ANNOTATION), io)
                cols = (*t.cols[:-1], np.empty(0, dtype=o.dtype))
                rows[n] = LocalKeyed.of(Table(t.vars, cols, t.values), io)
            else:
                rows[n] = LocalKeyed.empty((), io)
        return cls(program, rels, rows, {}, max_rounds, witness)

    def load(
        self, initial: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None = None
    ) -> ProgramState:
        """The state holding ``initial`` (on an empty state): applied as one tick, with
        the witnesses found when ``witness`` and every index built."""
        state = self.apply(initial, how, sets)[0].compacted()
        if self.witness:
            state = replace(state, wit=ProgramWitnesses.of(self.program, state.rels, how))
        return state.indexed()

    # -- the protocol -------------------------------------------------------------------------
    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None
    ) -> tuple[ProgramState, Change]:
        """The next state and the change of the answer (nothing changed in place).

        Raises
        ------
        ValueError
            A key type that differs from the relation's, a retraction of a row the
            relation does not hold, a negative multiplicity, a refused set delta, or a
            fixpoint the batch solve refuses (it does not converge).
        """
        st = self.journaled()
        deltas = {n: d for n, d in deltas.items() if d.rows}
        for n, d in deltas.items():
            st = st.typed(n, d)
        reg = regime(self.program.semiring)
        for n, mode in (sets or {}).items():
            if n in deltas:
                deltas[n] = set_delta(n, mode, deltas[n], st.rels[n], reg)
        deltas = {n: d for n, d in deltas.items() if d.rows}
        rels, rows = {}, dict(st.rows)
        diffs: dict[str, Diff] = {}
        for name, d in deltas.items():
            rel, rows[name], diffs[name] = st.input(name, d)
            if diffs[name].new.rows:
                rels[name] = rel
        max_rounds = self.max_rounds or settings().max_rounds
        engine = Fixpoint(self.program, how, max_rounds, st.traces)
        new, changed = engine.apply(st.rels, rels, diffs)
        answer = changed.get(self.program.answer)
        change = engine.change(answer) if answer is not None else self.empty_change()
        wit = self.wit
        if wit is not None:  # witnesses kept tick by tick: the walks' own, or found again
            walked = engine.walked.get(self.program.answer)
            kept = wit.walked(self.program, walked) if walked is not None else None
            wit = kept or wit.after(self.program, self.rels, new, deltas, change)
        nxt = replace(st, rels=new, rows=rows, traces=engine.traces, wit=wit, how=how)
        where = ", ".join(sorted(engine.where)) or "nothing to do"
        return nxt, Change(change, tuple(engine.terms), where)

    def result(self) -> Factor:
        """The answer: equal to ``program.solve(**current inputs)``; with ``witness``,
        its witnesses over the maintained relations (:mod:`incremental.witness_programs`)."""
        p = self.program
        out = self.relation(p.answer)
        if self.wit is not None:
            frame = self.wit.frame(p, out)
        elif self.witness:  # found when read (ProgramWitnesses does not keep these rules)
            frame = program_witnesses(p, self.relation, out, self.how)
        else:
            return out
        rels = self.rels
        paths = p.witness_paths(  # over this state's relations (a tick makes another state)
            lambda name: rels[name].table(),
            lambda rule: {n: self.relation(n) for n in rule.relations},
            {"order": self.how.order, "join": self.how.join, "backend": "auto"},
            frame,
        )
        return Factor.from_source(out.source, out.name, witnesses=Witnesses(frame, paths))

    def relation(self, name: str) -> Factor:
        """Relation ``name`` (an input or a defined one) in the program's semiring."""
        return Factor.from_table(self.rels[name].table(), self.program.semiring, name)

    def total_rows(self) -> int:
        """Rows of all relations, defined ones included."""
        return sum(r.rows for r in self.rels.values())

    def output_rows(self) -> int:
        """Rows of the answer."""
        return self.rels[self.program.answer].rows

    def parts(self) -> dict[str, LocalKeyed]:
        """What a durable view writes (see the module docstring)."""
        out = {relation_part(n): r for n, r in self.rels.items()}
        out |= {rows_part(n): r for n, r in self.rows.items() if r.vars}
        for rounds in self.traces.values():
            out |= {trace_part(n): r for n, r in rounds.rels.items()}
        return out

    def describe(self) -> dict[str, Any]:
        """Nothing besides the parts."""
        return {}

    def settle(self) -> None:
        """Nothing to free in the driver."""

    # -- reopening ----------------------------------------------------------------------------
    def restore(
        self,
        rule: Rule,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        store: Store,
        manifest: dict[str, Any],
        frames: Sequence[Frame] = (),
    ) -> ProgramState:
        """The state (on an empty one) of a manifest's ``parts`` and the journal's
        ``frames`` after it, replayed by the store (:meth:`incremental.store.Store.replay`);
        ``rule``, ``S`` and ``keys`` are the view's (the program's first rule, its semiring,
        every relation's keys).

        Raises
        ------
        StateError
            The manifest names a part this program does not have, or lacks one it must.
        """
        p = self.program
        o = local_ops(working_semiring(S))
        probe: dict[str, LocalKeyed] = {**self.parts()}
        probe |= {trace_part(n): LocalKeyed.empty((ROUND, *keys[n]), o) for n in p.defined}
        named = manifest["parts"]
        where = store.root / "manifest.json"
        odd = sorted(set(named) - set(probe))
        if odd:
            raise StateError(f"{where}: part(s) {odd} are not parts of a view of this program")
        missing = sorted(set(self.parts()) - set(named))
        if missing:
            raise StateError(f"{where}: part(s) {missing} of the program view are missing")
        read = {
            n: LocalKeyed(store.read_keyed(e, probe[n].vars, probe[n].ops))
            for n, e in named.items()
        }
        tables = store.replay(manifest, read, frames)
        traces = {}
        for g in p.groups:
            if trace_part(g.names[0]) in tables:
                rels = {n: tables[trace_part(n)] for n in g.names}
                traces[g.names] = Rounds(rels, _round_counts(rels.values()))
        state = replace(
            self,
            rels={n: tables[relation_part(n)] for n in self.rels},
            rows={n: tables.get(rows_part(n), r) for n, r in self.rows.items()},
            traces=traces,
        )
        return state.indexed()

    # -- helpers ------------------------------------------------------------------------------
    def journaled(self) -> ProgramState:
        """The same state, each relation recording what it is changed by from now on (the
        tables a durable view's journal frame holds, see :mod:`incremental.journal`)."""
        return self._each(LocalKeyed.journaled)

    def compacted(self) -> ProgramState:
        """The same state with every relation's log folded into its base: a relation a
        load filled from empty holds all its rows in its log, where each tick's lookups
        would read every one of them."""
        return self._each(LocalKeyed.compacted)

    def _each(self, f: Callable[[LocalKeyed], LocalKeyed]) -> ProgramState:
        """The same state with ``f`` applied to every relation (inputs' rows and traces too)."""
        traces = {
            g: Rounds({n: f(r) for n, r in t.rels.items()}, t.counts)
            for g, t in self.traces.items()
        }
        return replace(
            self,
            rels={n: f(r) for n, r in self.rels.items()},
            rows={n: f(r) for n, r in self.rows.items()},
            traces=traces,
        )

    def indexed(self) -> ProgramState:
        """The same state with the index of every relation built (a tick's lookups read
        them; kept while a relation's changes are overrides of its base): its columns'
        and whole key's, and the trie of its base in column order with what a lookup in
        it reads (a view's first tick over 10M edges built them: 2.5 s, against 10 ms)."""
        for r in (*self.rels.values(), *self.rows.values()):
            r.kt.build_index()
            if r.vars:
                r.kt.trie(tuple(range(len(r.vars)))).build_index()
        return self

    def empty_change(self) -> Table:
        """An empty change of the answer."""
        p = self.program
        return empty_table(p.vars[p.answer], local_ops(working_semiring(p.semiring)))

    def typed(self, name: str, d: Rows) -> ProgramState:
        """The state with relation ``name`` checked against the delta's key types (an
        empty relation that never held a row takes them).

        Raises
        ------
        ValueError
            A key column of another type than the relation's.
        """
        rel, rows = self.rels[name], self.rows[name]
        want, got = rel.kinds(), [kind(c) for c in d.cols]
        if got == want or not d.rows:
            return self
        if rel.fresh:
            if rows.vars and rows.vars[-1] == ANNOTATION:  # a multiset: keys and annotation
                W = working_semiring(self.program.semiring)
                ann = d.values if d.values is not None else np.empty(0, local_ops(W).dtype)
                rows = rows.emptied((*d.cols, ann[:0]))
            elif rows.vars:  # boolean: counts per key
                rows = rows.emptied(d.cols)
            rels = {**self.rels, name: rel.emptied(d.cols)}
            return replace(self, rels=rels, rows={**self.rows, name: rows})
        i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        raise ValueError(
            f"delta of relation {name!r}: key column at position {i} holds "
            f"{kind_name(got[i])} values but relation {name!r} has {kind_name(want[i])} keys"
        )

    def input(self, name: str, d: Rows) -> tuple[LocalKeyed, LocalKeyed, Diff]:
        """Input relation ``name`` after delta ``d``: its annotations, rows and Diff."""
        rel, rows = self.rels[name], self.rows[name]
        S = self.program.semiring
        keys = rel.vars
        reg = regime(S)
        o = local_ops(working_semiring(S))
        if reg in ("ring", "counting"):
            t = annotation_delta(reg, name, keys, d, o)
            new_rel, _, after = rel.plus(t)
            if reg == "counting":
                refuse_negative(name, after, S.name)
            new, old = changed_rows(rel.at(after.cols), after, o)
            return new_rel, rows, Diff(old, new)
        if reg == "boolean":
            ct = annotation_delta(reg, name, keys, d, local_ops(semirings.INTEGER))
            new_rows, _, after = rows.plus(ct)
            refuse_negative(name, after, S.name)
            assert after.values is not None
            now = Table(keys, after.cols, after.values > 0)
            held = rel.at(after.cols)
            new, old = changed_rows(held, now, o)
            return rel.replace(new, held) if new.rows else rel, new_rows, Diff(old, new)
        ms = row_counts(name, keys, d, o)
        with multiplicities(name):
            new_rows, _, counts = rows.plus(ms)
        refuse_missing(name, counts, S)
        at = distinct_keys(ms.cols[:-1])
        found = new_rows.kt.at_prefix(at)  # every row of the touched keys
        assert found.values is not None
        per_key = Table(keys, found.cols[:-1], found.cols[-1])
        now = at_groups(repeat_reduce(per_key, found.values, keys, o), Table(keys, at, None), o)
        held = rel.at(at)
        new, old = changed_rows(held, now, o)
        return rel.replace(new, held) if new.rows else rel, new_rows, Diff(old, new)


def _round_counts(rels: Any) -> np.ndarray:
    """The rows of every round of a group's rounds (all relations together), as
    :class:`incremental.traced.Rounds` keeps them: up to the first empty round, at least
    one entry."""
    counts = np.zeros(1, dtype=np.int64)
    for r in rels:
        c = r.table().cols[0].astype(np.int64)
        if len(c):
            counts = np.pad(counts, (0, max(0, int(c.max()) + 1 - len(counts))))
            counts += np.bincount(c, minlength=len(counts))
    return counts
