"""Incremental views: an FAQ maintained under changes of its relations (DBSP style).

A view holds the current relations and the current output of a query.  Each
:meth:`IncrementalView.step` receives deltas, computes the change of the
output (:mod:`incremental.regimes`: the ordered delta rule, derivation
counts for boolean, recomputed groups after retractions in semirings without
inverses) and commits the new relations and output, all or nothing, durably
when the view has a ``state_dir``: a tick begins its commit at the store, is applied,
then completes it (or aborts it on any error) before the view takes the new state
(:mod:`incremental.commit`, :mod:`incremental.store`).  A step may
carry a ``batch_id``: a batch at or below the last committed one is skipped,
which makes a replayed micro-batch of Structured Streaming harmless
(:meth:`IncrementalView.foreach_batch`).

The state lives in the driver (:mod:`incremental.driver_state`: keyed tables
that answer the delta rule's lookups by binary search), so a small tick runs no
Spark job at all; a view created with ``state="spark"`` keeps it in Spark
instead (:mod:`incremental.spark_state`), for relations beyond the driver.  Both
follow one protocol (:mod:`incremental.protocol`), run the same regime code
(:mod:`incremental.regimes`) and write one manifest format
(:mod:`incremental.store`): a view behaves the same in either state.  A view of a
program has a third state (:mod:`incremental.program_state`), behind the same protocol.
"""

from __future__ import annotations

import functools
import logging
import numbers
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from faq import Factor, Program, Query, Rule, settings
from faq.kernel import Table, warm_up_in_background
from faq.plan import JOIN_METHODS
from incremental.changes import KINDS, changes
from incremental.commit import VOLATILE, Commit, Volatile
from incremental.deltas import Rows, read_delta, to_spark
from incremental.driver_state import DriverState
from incremental.journal import Intent
from incremental.lock import FolderLock
from incremental.manifest import IF_TICKS_LOST, ViewId, upgraded
from incremental.program_state import ProgramState, check_max_rounds
from incremental.protocol import How, StateKind, StepReport, ViewState
from incremental.regimes import regime, step_semiring
from incremental.sets import set_modes
from incremental.shape import Shape
from incremental.spark_state import SparkState
from incremental.store import Store
from incremental.witnesses import WitnessState, check_witness_options
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["STATES", "IncrementalView"]

log = logging.getLogger("faq.incremental")

STATES = ("auto", "driver", "spark")
"""Where a view keeps its state: ``"auto"`` (the driver unless the initial relations hold
more than the ``local_rows`` setting, :func:`faq.settings`), ``"driver"`` or ``"spark"``, for a
one-rule query; a program's view keeps its program state in the driver (``"spark"`` is
refused for it)."""

IF_EXISTS = ("error", "resume")
"""With initial relations and a ``state_dir`` holding a view: refuse, or reopen it."""


def _releases_on_error(init: Callable[..., None]) -> Callable[..., None]:
    """``__init__`` that gives the folder up when it fails, claims it when it succeeds."""

    @functools.wraps(init)
    def wrapped(self: IncrementalView, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
            if self._store is not None:
                self._store.opened()
        except BaseException:
            store = getattr(self, "_store", None)
            if store is not None:
                store.close()
            raise

    return wrapped


class IncrementalView:
    """The output of an FAQ, maintained under insertions and deletions.

    Parameters
    ----------
    query : faq.Query or faq.Program
        The query to maintain, e.g. ``query("Q() :- E(a, b), E(b, c), E(a, c)",
        semiring="counting")``, or a program (several rules, recursion): then ``step``
        takes changes of its input relations, ``relation`` reads defined ones too, and
        the state is a :class:`incremental.program_state.ProgramState` in the driver.
    state_dir : str or path-like, optional
        Folder that makes every commit durable and verified (see
        :mod:`incremental.store`).  A folder that already holds a view of the
        same query is reopened at its last committed tick, after checking
        every file; then no initial relations may be given.
    join : {"auto", "binary", "wcoj"}
        Join method of every delta query (see :meth:`faq.Query.solve`).
    order : str or list of str
        Variable-order strategy of every delta query (default ``"auto"``).
    state : {"auto", "driver", "spark"}
        Where the relations and the output live (see :data:`STATES`; a program's: the driver).
    if_exists : {"error", "resume"}
        With initial relations and a ``state_dir`` that already holds a view:
        ``"error"`` (default) refuses; ``"resume"`` reopens the folder (the same
        checks as a reopen) and does not read the initial relations.  A stream
        job that creates its view on the first run and resumes it on every
        restart passes ``if_exists="resume"``.
    if_ticks_lost : {"error", "accept"}
        A folder whose journal lost ticks committed before the view was closed: ``"error"``
        raises :class:`StateError` naming them; ``"accept"`` resumes at its last tick.
    sets : {"ignore", "refuse"} or dict, optional
        Relations kept as sets, not bags (:mod:`incremental.sets`): a tuple is
        present at most once, and inserting one that is present (or retracting
        one that is not) is dropped (``"ignore"``) or refused (``"refuse"``).
        A string applies to every relation, a dict names relations.  Default:
        every relation is a bag (a Z-set).
    max_rounds : int, optional
        A program's most semi-naive rounds per group and tick (default: the
        ``max_rounds`` setting); a tick still changing after them is refused.
    witness : bool
        Keep ``result().witnesses()`` after every tick (selective ⊕; see docs/witness.md).
    **initial
        Initial contents, one per relation name, in the delta format below; a
        relation not given starts empty.

    Notes
    -----
    **Delta format.**  A delta for a relation of arity ``k`` has ``k`` key
    columns (by position), an optional ``value`` column (the annotation, one
    by default) and an optional ``_weight`` column (an integer multiplicity,
    +1 by default: +1 adds the annotated row, -1 retracts it).  A delta is a
    Spark DataFrame, a :class:`faq.Factor`, a pandas DataFrame, a pyarrow
    Table or RecordBatch or a numpy structured array (:mod:`incremental.deltas`,
    the one reader of both states; the rule of every entry point,
    :func:`faq.relation_kind`: a plain numpy array is refused as ambiguous);
    pandas, Arrow and numpy deltas run no Spark job to be read.

    * ``integer``, ``real`` (rings) and ``counting``: a tuple's annotation
      changes by ``_weight · value``; a deletion is a negative weight (or a
      negative ``value``).  Counting refuses a negative multiplicity.
    * every other semiring: a relation is a multiset of annotated rows and a
      tuple's annotation is the ⊕ of its rows.  Retracting ``(k, v)`` removes
      one copy of exactly that row; changing an annotation is a retraction of
      the old row and an insertion of the new one in the same delta.  A
      retraction of a row the relation does not hold is refused.

    :meth:`step` returns, for rings and counting, ΔQ (``result()`` before ⊕
    ΔQ = ``result()`` after; counting's ΔQ is in ``integer``); for the other
    semirings, the new annotation of every output key whose annotation
    changed, the semiring's zero for a key that is gone.

    A refused step raises ValueError and leaves the view exactly as it was.

    **One writer per folder.**  A view with a ``state_dir`` holds it
    exclusively (an OS file lock plus the lease file ``lease.json`` naming the
    holder, :mod:`incremental.lock`) until :meth:`close`, the end of a ``with``
    block, its garbage collection or the end of the process.  Another process
    opening the folder meanwhile gets :class:`incremental.LockError` naming
    the holder; a second view opened on it in the same process takes it over,
    and the older one then refuses to step.

    Examples
    --------
    >>> from faq import query                                       # doctest: +SKIP
    >>> tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    >>> view = IncrementalView(tri, E=edges)                        # doctest: +SKIP
    >>> view.step(E=delta).scalar(), view.result().scalar(), view.tick  # doctest: +SKIP
    (-1, 44, 1)
    """

    @_releases_on_error
    def __init__(
        self,
        query: Query | Program,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        join: str = "auto",
        order: str | Sequence[str] = "auto",
        state: str = "auto",
        if_exists: str = "error",
        if_ticks_lost: str = "error",
        sets: str | Mapping[str, str] | None = None,
        max_rounds: int | None = None,
        witness: bool = False,
        **initial: Any,
    ) -> None:
        shape = Shape.of(query)  # a one-rule query or a program
        program = shape.program
        state = check_witness_options(query.semiring, witness, state, state_dir)  # first
        if join not in JOIN_METHODS:
            raise ValueError(
                f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}"
            )
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}; valid: {', '.join(STATES)}")
        if if_exists not in IF_EXISTS:
            raise ValueError(f"unknown if_exists {if_exists!r}; valid: {', '.join(IF_EXISTS)}")
        if if_ticks_lost not in IF_TICKS_LOST:
            raise ValueError(f"unknown if_ticks_lost {if_ticks_lost!r}; valid: error, accept")
        self.max_rounds = check_max_rounds(max_rounds)
        shape.check(state, max_rounds)
        self.query = query
        self.program = program  # None for a one-rule query
        self.join = join
        self.order = order
        self.rule: Rule = query.rule
        self.semiring: Semiring = query.semiring
        self._shape, self._keys = shape, shape.keys
        self._sets = set_modes(sets, shape.inputs)
        self._blank = None if program is None else ProgramState.empty(program, max_rounds, witness)
        self._store: Store | None = None  # held exclusively (LockError: another process has it)
        if state_dir is not None:
            root = Path(state_dir)
            view = ViewId(self._shape.text, self.semiring.name, self._keys, self._sets)
            self._store = Store(root, self.semiring, FolderLock(root), if_ticks_lost, view)
        self._tick = 0
        self._batch: int | None = None
        self._local_rule = True
        self.last_step: StepReport | None = None  # what the last step did
        manifest = None
        if self._store is not None and self._store.exists():
            if initial and if_exists == "error":
                raise ValueError(
                    f"state_dir {str(self._store.root)!r} already holds a view; reopen it "
                    'without initial relations, or pass if_exists="resume" to reopen it and '
                    "leave the initial relations unread"
                )
            manifest = self._store.read_view()  # refused unless of this view
        unknown = [n for n in initial if n not in self._shape.inputs]
        if unknown:
            raise ValueError(self._shape.unknown(unknown))
        # the ticks' compiled kernels, a fold's merge among them (which would otherwise
        # compile on the fold's helper thread in the middle of the ticks), compile or load
        # from numba's disk cache beside the load (or the reopening)
        warm_up_in_background()
        if manifest is not None:
            self._state: ViewState = self._resume(manifest)
            return
        t0 = time.perf_counter()
        rows: dict[str, Rows] = {}
        if state != "spark":
            most = settings().local_rows if state == "auto" and program is None else None
            for n, given in initial.items():
                if given is None:
                    continue
                got = self._read(n, given, "initial contents", most)
                if got is None:  # more rows than the driver holds: the state goes to Spark
                    state = "spark"
                    break
                rows[n] = got
                most = None if most is None else most - got.rows
        if state == "spark" and self._sets:
            # a set relation's contents are checked in the driver: they are read as deltas
            rows = {
                n: self._read(n, g, "initial contents") for n, g in initial.items() if g is not None
            }
            empty = SparkState.load(self.rule, self.semiring, self._keys, {}, self._how())
            self._state = empty.apply(rows, self._how(), self._sets)[0]
        elif state == "spark":
            # pandas, Arrow and numpy inputs are converted to Spark DataFrames, once
            initial = {
                n: to_spark(g, f"initial contents of relation {n!r}") for n, g in initial.items()
            }
            self._state = SparkState.load(
                self.rule, self.semiring, self._keys, initial, self._how()
            )
        elif self._blank is not None:  # a program: its state keeps its own witnesses
            self._state = self._blank.load(rows, self._how(), self._sets)
        else:
            empty = DriverState.empty(self.rule, self.semiring, self._keys)
            self._state = empty.load(rows, self._how(), self._sets)
            self._state = WitnessState.of(self._state, self._how()) if witness else self._state
        log.info(
            "view of %s: %s rows loaded, initial output %s rows in %.2f s (%s state)",
            self.rule,
            f"{self._state.total_rows():,}",
            f"{self._state.output_rows():,}",
            time.perf_counter() - t0,
            self._state.where,
        )
        if self._store is not None:  # tick 0: a checkpoint
            try:
                self._store.begin(0, None, {}).complete(self._state)
            finally:
                self._state.settle()

    # -- public API -------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        """The number of committed steps."""
        return self._tick

    @property
    def batch_id(self) -> int | None:
        """The batch id of the last committed step that had one (None if none had)."""
        return self._batch

    @property
    def local(self) -> bool:
        """Evaluate the delta rule of small deltas in the driver (default True); False runs
        every delta query as a Spark query (over the state, wherever it lives)."""
        return self._local_rule

    @local.setter
    def local(self, value: bool) -> None:
        self._local_rule = bool(value)

    @property
    def where(self) -> str:
        """Where the state lives: ``"driver"`` or ``"spark"``."""
        return self._state.where

    def result(self) -> Factor:
        """The maintained output: equal to ``query.solve(**current relations)``."""
        return self._state.result()

    def relation(self, name: str) -> Factor:
        """The current contents of relation ``name`` (one row per tuple, its annotation;
        of a program: an input or a defined relation)."""
        if name not in self._keys:
            raise ValueError(self._shape.unknown([name]))
        return self._state.relation(name)

    def step(self, batch_id: int | None = None, **deltas: Any) -> Factor:
        """Apply one tick of changes; return the change of the output and commit.

        Parameters
        ----------
        batch_id : int, optional
            The id of this batch of changes (e.g. a Structured Streaming
            micro-batch id).  It is committed with the step; a step whose id is
            at or below the last committed one is skipped (nothing changes, an
            empty change is returned and ``last_step.skipped`` is True).
        **deltas
            One delta per changed relation (see the class notes for the format): a
            Spark DataFrame, a :class:`faq.Factor`, a pandas DataFrame, a pyarrow
            Table or RecordBatch or a numpy structured array (a plain numpy array is
            refused as ambiguous), e.g. ``view.step(E=pandas_df)``.  Pandas, Arrow and numpy deltas
            are read without a Spark job and get the checks a Spark DataFrame of the
            same rows gets (number of key columns, null keys, key types, annotations
            outside the semiring, an integer ``_weight`` without nulls), with the
            same messages.

        Returns
        -------
        faq.Factor
            Over the head variables: ΔQ (rings, counting) or the new annotations
            of the changed output keys (other semirings).

        Raises
        ------
        ValueError
            An unknown relation, a bad batch id, an arity or key-type mismatch,
            null keys or weights, annotations outside the semiring, a retraction
            of a row the relation does not hold, or a negative multiplicity.
            The view is then left unchanged.
        incremental.LockError
            The view was closed, or lost its hold on its ``state_dir`` (another
            view took it over): nothing is committed.
        """
        t0 = time.perf_counter()
        if self._store is not None:
            self._store.check()  # a closed or fenced view refuses at once
        if batch_id is not None:
            batch_id = _batch_id(batch_id)
            if self._batch is not None and batch_id <= self._batch:
                self.last_step = StepReport(self._tick, batch_id, skipped=True)
                log.info(
                    "batch %d skipped: batch %d is already committed (tick %d)",
                    batch_id,
                    self._batch,
                    self._tick,
                )
                return self._empty_change()
        rows = self._deltas(deltas)
        batch = batch_id if batch_id is not None else self._batch
        commit = self._begin(self._tick + 1, batch, rows)  # the intent, synced meanwhile
        try:
            new, change = self._state.apply(rows, self._how(), self._sets)
            commit.complete(new)  # durable when it returns
            self._state = new
        except BaseException:
            commit.abort()  # refused or failed: the tick is not committed
            raise
        finally:
            self._state.settle()
        self._tick += 1
        if batch_id is not None:
            self._batch = batch_id
        self.last_step = StepReport(
            self._tick,
            batch_id,
            False,
            tuple(change.terms),
            change.table.rows,
            change.where,
            commit.seconds,
        )
        if log.isEnabledFor(logging.INFO):  # its arguments are formatted only when shown
            log.info(
                "tick %d: %s -> change of %s rows (%s) in %.2f s",
                self._tick,
                ", ".join(f"Δ{n} {r.rows:,} rows" for n, r in rows.items()) or "no change",
                f"{change.table.rows:,}",
                change.where,
                time.perf_counter() - t0,
            )
        return Factor.from_table(change.table, self._change_semiring(), f"Δ{self.rule.name}")

    def foreach_batch(self, relation: str, kind: str | None = None) -> Callable[[Any, int], None]:
        """A function for ``writeStream.foreachBatch`` that applies each micro-batch.

        Each micro-batch ``df`` (keys, optional ``value``, optional ``_weight``;
        with ``kind``, a change feed for :func:`incremental.changes`) becomes
        the delta of ``relation`` in ``step(batch_id=batch_id, ...)``, so a
        micro-batch replayed after a crash is skipped: exactly once, with a
        ``state_dir``, across restarts.

        Examples
        --------
        >>> q = (stream.writeStream.foreachBatch(view.foreach_batch("E"))   # doctest: +SKIP
        ...      .option("checkpointLocation", ckpt).start())
        """
        if relation not in self._shape.inputs:
            raise ValueError(self._shape.unknown([relation]))
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown change kind {kind!r}; valid kinds: {', '.join(KINDS)}")

        def apply(df: DataFrame, batch_id: int) -> None:
            delta = df
            if kind is not None:
                delta = changes(df, kind=kind)
            self.step(batch_id=int(batch_id), **{relation: delta})

        return apply

    def close(self) -> None:
        """Give the ``state_dir`` up: its lock and lease are released (idempotent).

        Later steps raise :class:`incremental.LockError`; ``result()`` and
        ``relation()`` still read.  A view without a ``state_dir`` has nothing
        to release.  Garbage collection and the end of the process release too.
        """
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> IncrementalView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f", state_dir={str(self._store.root)!r}" if self._store is not None else ""
        return f"IncrementalView({self.query!r}, tick={self._tick}{where})"

    # -- helpers ------------------------------------------------------------------------------
    def _deltas(self, deltas: Mapping[str, Any]) -> dict[str, Rows]:
        """The tick's deltas read and checked (:func:`incremental.deltas.read_delta`), the
        empty ones left out."""
        unknown = [n for n in deltas if n not in self._shape.inputs]
        if unknown:
            raise ValueError(self._shape.unknown(unknown))
        rows = {}
        for n, d in deltas.items():
            r = self._read(n, d, "delta") if d is not None else None
            if r is not None and r.rows:
                rows[n] = r
        return rows

    def _begin(
        self, tick: int, batch_id: int | None, rows: Mapping[str, Rows]
    ) -> Commit | Volatile:
        """Tick ``tick``'s commit (:meth:`incremental.store.Store.begin`); without a
        ``state_dir``, one that writes nothing."""
        if self._store is None:
            return VOLATILE
        return self._store.begin(tick, batch_id, rows)

    def _read(self, name: str, given: Any, what: str, most: int | None = None) -> Rows | None:
        label = f"{what} of relation {name!r}"
        S = self._change_semiring()  # counting deltas are signed: read in ℤ
        arity = self._shape.inputs[name]
        return read_delta(given, arity, S, label, self._shape.atom(name), most)

    def _change_semiring(self) -> Semiring:
        return step_semiring(self.semiring)

    def _how(self) -> How:
        return How(self.order, self.join, self._local_rule)

    def _empty_change(self) -> Factor:
        S = self._change_semiring()
        o = local_ops(S)
        head = self.rule.head
        t = Table(head, tuple(np.empty(0, np.int64) for _ in head), np.empty(0, dtype=o.dtype))
        return Factor.from_table(t, S, f"Δ{self.rule.name}")

    # -- durability -----------------------------------------------------------------------------
    def _resume(self, m: dict[str, Any]) -> ViewState:
        store = self._store
        assert store is not None
        state: ViewState
        m = upgraded(store.root, m, regime(self.semiring) in ("ring", "counting"))
        frames, intent = store.open_journal(m)
        kind: StateKind = SparkState if m.get("state", "driver") == "spark" else DriverState
        kind = self._blank or kind  # a program's state, whatever the manifest
        state = kind.restore(self.rule, self.semiring, self._keys, store, m, frames)
        last = frames[-1] if frames else None
        self._tick = int(m["tick"]) if last is None else last.tick
        self._batch = m.get("batch_id") if last is None else last.batch_id
        if intent is not None:
            state = self._reapply(state, intent)
        log.info("view of %s reopened at tick %d (%s state)", self.rule, self._tick, state.where)
        return state

    def _reapply(self, state: ViewState, intent: Intent) -> ViewState:
        """``state`` after the tick whose intent has no commit frame, its deltas applied
        again; its commit frame is owed to the journal (:meth:`Store.owe`).  A tick they are
        refused in was never committed: its intent is cut off at the next commit, warned."""
        assert self._store is not None
        rows = {n: Rows(*d) for n, d in intent.deltas.items()}
        try:
            new, _ = state.apply(rows, self._how(), self._sets)
        except (ValueError, ArithmeticError) as exc:
            log.warning(
                "state_dir %r: tick %d, whose intent was written before its process stopped, "
                "is refused when applied again (%s): it was never committed; the view "
                "resumes at tick %d",
                str(self._store.root),
                intent.tick,
                exc,
                self._tick,
            )
            self._store.drop_intent(intent)
            return state
        self._store.owe(new, intent.tick, intent.batch_id)
        new.settle()
        self._tick, self._batch = intent.tick, intent.batch_id
        log.info("tick %d applied again from its intent and committed", intent.tick)
        return new


def _batch_id(batch_id: Any) -> int:
    """A batch id as a Python int: any non-negative integer (numpy's too), not a bool."""
    if (
        isinstance(batch_id, bool | np.bool_)
        or not isinstance(batch_id, numbers.Integral)
        or batch_id < 0
    ):
        raise ValueError(f"batch_id must be a non-negative integer, got {batch_id!r}")
    return int(batch_id)
