"""Incremental views over programs (recursive queries): ``IncrementalView(program, ...)``.

:class:`ProgramView` is what :class:`incremental.IncrementalView` makes for a
:class:`faq.Program`.  It has the faces of every view (``step``, ``result``,
``tick``, ``batch_id`` skipping, ``last_step``, ``foreach_batch``) and reads
deltas in the same format with the same checks (:func:`incremental.deltas.read_delta`):

* ``integer``, ``real`` and ``counting``: a tuple's annotation changes by
  ``_weight · value`` (counting refuses a negative multiplicity);
* ``boolean``: a tuple is present while its number of rows is positive;
* every other semiring: a relation is a multiset of annotated rows, a tuple's
  annotation the ⊕ of its rows, and a retraction names a row it holds.

Its state is in the driver: every input relation (and its rows or counts) and
every defined relation as keyed tables.  Each tick updates the defined
relations by :class:`incremental.fixpoint.Fixpoint` (delete and rederive for an
idempotent ⊕, the batch's rounds maintained for linear rings and counting, a recompute
otherwise) and commits all or nothing.
A program view has no ``state_dir`` (not durable) and no Spark state: both are
refused with a ValueError.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import semirings
from faq import Factor, Program, Witnesses, settings
from faq.kernel import Table, changed_rows
from faq.plan import JOIN_METHODS
from incremental.changes import KINDS, changes
from incremental.deltas import Rows, read_delta
from incremental.driver_state import LocalKeyed
from incremental.fixpoint import Diff, Fixpoint, working_semiring
from incremental.protocol import How, StepReport
from incremental.regimes import regime
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
from incremental.traced import Rounds
from incremental.view import PROGRAM_VIEW, STATES, IncrementalView, check_batch_id
from incremental.witness_programs import ProgramWitnesses, program_witnesses
from incremental.witnesses import check_witness_options
from semirings.local import local_ops

__all__ = ["ProgramView"]

log = logging.getLogger("faq.incremental")


@dataclass(frozen=True)
class _State:
    """Every relation (annotation per key, in the working semiring), per input relation
    its rows (a multiset) or row counts (boolean), and the rounds of every linear
    recursive ring group (:class:`incremental.traced.Rounds`); immutable."""

    rels: dict[str, LocalKeyed]
    rows: dict[str, LocalKeyed]
    traces: Mapping[tuple[str, ...], Rounds] = field(default_factory=dict)


class ProgramView(IncrementalView):
    """The answer of a program (recursive or not), maintained under changes of its inputs.

    Made by ``IncrementalView(program, ...)``; see :class:`incremental.IncrementalView`
    for the delta format and the faces.  ``step`` takes deltas of the input relations
    only, and ``relation(name)`` reads any relation, defined ones included.

    Parameters
    ----------
    program : faq.Program
        The program, e.g. ``query("D(x) :- S(x)\\nD(y) :- D(x), E(x, y)",
        semiring="min-plus")``.
    join, order
        As for :class:`incremental.IncrementalView`.
    state : {"auto", "driver"}
        The state is in the driver; ``"spark"`` is refused.
    max_rounds : int, optional
        Most semi-naive rounds per group and tick (default: the ``max_rounds`` setting
        when the step runs).  A tick still changing after them is refused.
    witness : bool
        ``result()`` carries the answer's witnesses over the maintained relations, as
        ``program.solve(witness=True)`` names them (selective ⊕ only; kept tick by tick
        or found when read, see :mod:`incremental.witness_programs`).
    **initial
        Initial contents of input relations, in the delta format.

    Raises
    ------
    ValueError
        ``state_dir``, ``state="spark"`` or ``sets`` (not supported for programs), an
        unknown or defined relation, or bad initial contents.
    """

    def __init__(
        self,
        query: Program,
        *,
        state_dir: Any = None,
        join: str = "auto",
        order: str | Sequence[str] = "auto",
        state: str = "auto",
        if_exists: str = "error",
        sets: Any = None,
        max_rounds: int | None = None,
        witness: bool = False,
        **initial: Any,
    ) -> None:
        self._store = None
        check_witness_options(query.semiring, witness, state, state_dir, "IncrementalView")
        self._witness = witness
        if state_dir is not None:
            raise ValueError(
                "IncrementalView over a program: state_dir is not supported (a program "
                "view is not durable: its state, the defined relations included, lives in "
                "the driver only); create it without state_dir and rebuild it from the "
                "inputs after a restart"
            )
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}; valid: {', '.join(STATES)}")
        if state == "spark":
            raise ValueError(
                'IncrementalView over a program: state="spark" is not supported (the '
                'fixpoint is maintained in the driver); use state="auto" or "driver"'
            )
        if sets is not None:
            raise ValueError(
                "IncrementalView over a program: sets= is not supported; relations are "
                "bags (Z-sets) or multisets of annotated rows"
            )
        if join not in JOIN_METHODS:
            raise ValueError(
                f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}"
            )
        if max_rounds is not None and (
            not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 1
        ):
            raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
        del if_exists  # only meaningful with a state_dir
        self.query = query
        self.program = query
        self.join = join
        self.order = order
        self.rule = query.rule
        self.semiring = query.semiring
        self.max_rounds = max_rounds
        self._tick = 0
        self._batch: int | None = None
        self._local_rule = True
        self.last_step: StepReport | None = None
        self._W = working_semiring(self.semiring)
        self._keys = {n: tuple(f"c{i}" for i in range(a)) for n, a in query.inputs.items()}
        self._keys.update(query.vars)
        self._pstate = self._empty()
        rows = self._deltas(initial, "initial contents")
        self._pstate = self._apply(rows)[0]
        how = How(order, join, True)
        self._wit = ProgramWitnesses.of(query, self._pstate.rels, how) if witness else None
        # the indexes the ticks' lookups read, built once here (kept while a relation's
        # changes are overrides of its base)
        for kt in (*self._pstate.rels.values(), *self._pstate.rows.values()):
            kt.kt.build_index()
        log.info(
            "view of program %s: initial answer %s rows",
            self.program.answer,
            f"{self._pstate.rels[self.program.answer].rows:,}",
        )

    # -- public API ---------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """Where the state lives: always ``"driver"`` for a program."""
        return "driver"

    def result(self) -> Factor:
        """The maintained answer: equal to ``program.solve(**current inputs)``; with
        ``witness=True``, its witnesses over the maintained relations (``witnesses()``,
        ``witness_frame``; see :func:`incremental.witnesses.program_witnesses`)."""
        out = self.relation(self.program.answer)
        if self._wit is not None:
            frame = self._wit.frame(self.program, out)
        elif self._witness:  # found when read (ProgramWitnesses does not keep these rules)
            how = How(self.order, self.join, self._local_rule)
            frame = program_witnesses(self.program, self.relation, out, how)
        else:
            return out
        return Factor.from_source(out.source, out.name, witnesses=Witnesses(frame))

    def relation(self, name: str) -> Factor:
        """The current contents of relation ``name``: an input or a defined relation."""
        if name not in self._keys:
            raise ValueError(self._unknown([name]))
        return Factor.from_table(self._pstate.rels[name].table(), self.semiring, name)

    def step(self, batch_id: int | None = None, **deltas: Any) -> Factor:
        """Apply one tick of changes of input relations; return the change of the answer.

        As :meth:`incremental.IncrementalView.step`.  A tick whose fixpoint does not
        converge (a cycle in counting, a negative cycle in min-plus) is refused with
        the batch solve's error, and the view is left as it was.
        """
        t0 = time.perf_counter()
        if batch_id is not None:
            batch_id = check_batch_id(batch_id)
            if self._batch is not None and batch_id <= self._batch:
                self.last_step = StepReport(self._tick, batch_id, skipped=True)
                log.info("batch %d skipped: batch %d is committed", batch_id, self._batch)
                return self._empty_change()
        rows = self._deltas(deltas, "delta")
        new, change, engine = self._apply(rows)
        if self._wit is not None:  # witnesses kept tick by tick
            self._wit = self._wit.after(self.program, self._pstate.rels, new.rels, rows, change)
        self._pstate = new
        self._tick += 1
        if batch_id is not None:
            self._batch = batch_id
        where = ", ".join(sorted(engine.where)) or "nothing to do"
        self.last_step = StepReport(
            self._tick, batch_id, False, tuple(engine.terms), change.rows, where
        )
        log.info(
            "tick %d: change of %s rows (%s) in %.3f s",
            self._tick,
            f"{change.rows:,}",
            where,
            time.perf_counter() - t0,
        )
        return Factor.from_table(change, self._change_semiring(), f"Δ{self.program.answer}")

    def foreach_batch(self, relation: str, kind: str | None = None) -> Callable[[Any, int], None]:
        """A function for ``writeStream.foreachBatch`` that applies each micro-batch to
        input ``relation`` (see :meth:`incremental.IncrementalView.foreach_batch`)."""
        if relation not in self.program.inputs:
            raise ValueError(self._unknown([relation]))
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown change kind {kind!r}; valid kinds: {', '.join(KINDS)}")

        def apply(df: Any, batch_id: int) -> None:
            self.step(
                batch_id=int(batch_id), **{relation: df if kind is None else changes(df, kind=kind)}
            )

        return apply

    def __repr__(self) -> str:
        return f"IncrementalView({self.program!r}, tick={self._tick})"

    # -- a tick -------------------------------------------------------------------------------
    def _apply(self, deltas: Mapping[str, Rows]) -> tuple[_State, Table, Fixpoint]:
        """The state after ``deltas``, the change of the answer, the engine that ran."""
        st = self._pstate
        rels, rows = {}, dict(st.rows)
        diffs: dict[str, Diff] = {}
        for name, d in deltas.items():
            rel, rows[name], diffs[name] = self._input(name, d)
            if diffs[name].new.rows:
                rels[name] = rel
        max_rounds = self.max_rounds or settings().max_rounds
        engine = Fixpoint(self.program, self._how(), max_rounds, st.traces)
        new, changed = engine.apply(st.rels, rels, diffs)
        answer = changed.get(self.program.answer)
        change = engine.change(answer) if answer is not None else self._empty_table()
        return _State(new, rows, engine.traces), change, engine

    def _input(self, name: str, d: Rows) -> tuple[LocalKeyed, LocalKeyed, Diff]:
        """Input relation ``name`` after delta ``d``: its annotations, rows and Diff."""
        rel, rows = self._typed(name, d)
        keys = self._keys[name]
        reg = regime(self.semiring)
        o = local_ops(self._W)
        if reg in ("ring", "counting"):
            t = annotation_delta(reg, name, keys, d, o)
            new_rel, _, after = rel.plus(t)
            if reg == "counting":
                refuse_negative(name, after, self.semiring.name)
            new, old = changed_rows(rel.at(after.cols), after, o)
            return new_rel, rows, Diff(old, new)
        if reg == "boolean":
            ct = annotation_delta(reg, name, keys, d, local_ops(semirings.INTEGER))
            new_rows, before, after = rows.plus(ct)
            refuse_negative(name, after, self.semiring.name)
            assert after.values is not None
            now = Table(keys, after.cols, after.values > 0)
            new, old = changed_rows(rel.at(after.cols), now, o)
            return rel.replace(new) if new.rows else rel, new_rows, Diff(old, new)
        ms = row_counts(name, keys, d, o)
        with multiplicities(name):
            new_rows, _, counts = rows.plus(ms)
        refuse_missing(name, counts, self.semiring)
        at = distinct_keys(ms.cols[:-1])
        found = new_rows.kt.at_prefix(at)  # every row of the touched keys
        assert found.values is not None
        per_key = Table(keys, found.cols[:-1], found.cols[-1])
        now = at_groups(repeat_reduce(per_key, found.values, keys, o), Table(keys, at, None), o)
        new, old = changed_rows(rel.at(at), now, o)
        return rel.replace(new) if new.rows else rel, new_rows, Diff(old, new)

    def _typed(self, name: str, d: Rows) -> tuple[LocalKeyed, LocalKeyed]:
        """Relation ``name`` and its rows, checked against the delta's key types (an
        empty relation that never held a row takes them)."""
        rel, rows = self._pstate.rels[name], self._pstate.rows[name]
        want, got = rel.kinds(), [kind(c) for c in d.cols]
        if got == want or not d.rows:
            return rel, rows
        if rel.fresh:
            if rows.vars and rows.vars[-1] == ANNOTATION:  # a multiset: keys and annotation
                ann = d.values if d.values is not None else np.empty(0, local_ops(self._W).dtype)
                rows = rows.emptied((*d.cols, ann))
            elif rows.vars:  # boolean: counts per key
                rows = rows.emptied(d.cols)
            return rel.emptied(d.cols), rows
        i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        raise ValueError(
            f"delta of relation {name!r}: key column at position {i} holds "
            f"{kind_name(got[i])} values but relation {name!r} has {kind_name(want[i])} keys"
        )

    # -- helpers ------------------------------------------------------------------------------
    def _empty(self) -> _State:
        o = local_ops(self._W)
        rels = {n: LocalKeyed.empty(k, o) for n, k in self._keys.items()}
        rows: dict[str, LocalKeyed] = {}
        reg = regime(self.semiring)
        for n in self.program.inputs:
            keys = self._keys[n]
            if reg == "boolean":
                rows[n] = LocalKeyed.empty(keys, local_ops(semirings.INTEGER))
            elif reg == "general":
                vars_ = (*keys, ANNOTATION)
                t = empty_table(vars_, local_ops(semirings.INTEGER))
                cols = (*t.cols[:-1], np.empty(0, dtype=o.dtype))
                rows[n] = LocalKeyed.of(Table(vars_, cols, t.values), local_ops(semirings.INTEGER))
            else:
                rows[n] = LocalKeyed.empty((), local_ops(semirings.INTEGER))
        return _State(rels, rows)

    def _deltas(self, given: Mapping[str, Any], what: str) -> dict[str, Rows]:
        """The deltas read and checked (in the order given), empty ones dropped."""
        bad = [n for n in given if n not in self.program.inputs]
        if bad:
            raise ValueError(self._unknown(bad))
        out = {}
        for n, g in given.items():
            if g is None:
                continue
            atom = next(a for r in self.program.rules for a in r.atoms if a.relation == n)
            label = f"{what} of relation {n!r}"
            r = read_delta(g, self.program.inputs[n], self._change_semiring(), label, str(atom))
            if r is not None and r.rows:
                out[n] = r
        return out

    def _unknown(self, names: list[str]) -> str:
        p = self.program
        defined = [n for n in names if n in p.defined]
        if defined:
            r = next(r for r in p.rules if r.name == defined[0])
            return (
                f"relation {defined[0]!r} is defined by rule {r}: a view of the program takes "
                f"changes of its input relations only ({', '.join(p.inputs)})"
            )
        return (
            f"unknown relation(s) {', '.join(map(repr, names))} for program {p.text!r}; "
            f"its input relations are: {', '.join(p.inputs)}"
        )

    def _empty_table(self) -> Table:
        return empty_table(self.program.vars[self.program.answer], local_ops(self._W))

    def _empty_change(self) -> Factor:
        S = self._change_semiring()
        return Factor.from_table(self._empty_table(), S, f"Δ{self.program.answer}")


PROGRAM_VIEW[:] = [ProgramView]  # IncrementalView(program, ...) makes one
