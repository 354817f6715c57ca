"""The executor: one piece of code runs an InsideOut plan over interchangeable backends.

Every step of a :class:`~faq.plan.logical.Plan` joins its bag and ⊕-aggregates
the eliminated variables away.  For each step the executor asks
:func:`faq.plan.physical.choose` where and how to run it, given what its inputs
actually are (local arrays or Spark DataFrames, and their sizes), then runs
it on

* the **local kernel** (:mod:`faq.kernel`) in the driver,
* the same kernel **inside Spark tasks** (:mod:`faq.spark.tasks`), or
* **Spark DataFrame operations** (:mod:`faq.spark.ops`): shuffle joins or
  Generic Join on DataFrames, for data beyond the driver's memory.

Data moves between them only when a step needs it: a local input of a Spark
step becomes a DataFrame, a small Spark input of a local step is collected.
Runtime figures (where each step ran, its method, sizes, seconds, the
kernel's candidates) go to a :class:`Trace`; the plan itself never changes.
Each step logs one line at INFO level on the ``"faq"`` logger when it ends, and, while
it runs, a line every ``progress_seconds`` (:mod:`faq.progress`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from faq.kernel import join as kernel
from faq.kernel import runners
from faq.kernel.join import JoinStats
from faq.kernel.table import Table, group_reduce, key_sets
from faq.kernel.values import spark_type
from faq.plan import physical
from faq.plan.logical import Pairs, Plan, PlanFactor, Step
from faq.plan.physical import Choice, InputInfo
from faq.plan.report import StepTrace, Trace
from faq.plan.settings import Settings, current
from faq.progress import StepProgress
from faq.rule import VALUE
from faq.spark import fused, partitioned, tasks
from faq.spark import ops as spark_ops
from faq.spark.convert import arrow_to_table, to_spark
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, count_distinct, local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Data", "Executor", "Options", "StepHook", "StepTrace", "Trace"]

log = logging.getLogger("faq")


class StepHook(Protocol):
    """Something that watches every step as it runs (witnesses hook in this way).

    ``record`` is called with the executor, the step, its inputs (as
    :class:`Data`) and the physical choice, before the step's bag is joined.
    """

    def record(self, ex: Executor, step: Step, inputs: list[Data], choice: Choice) -> None:
        """Observe one step before it runs."""


@dataclass(frozen=True)
class Options:
    """How an executor runs its plans, fixed when it is built (see :meth:`faq.Query.solve`).

    Attributes
    ----------
    join : {"auto", "binary", "wcoj"}
        The join method of every step (``"auto"``: the planner's choice).
    backend : {"auto", "driver", "tasks", "spark"}
        Where steps run (``"auto"``: by size, the planner's choice).
    trace : bool
        Count every intermediate of binary Spark joins (extra jobs).
    parallelism : int or None
        The task slots steps are planned for; None: the session's
        (:func:`faq.spark.tasks.parallelism`), 1 without one.
    hook : StepHook or None
        Watches every step before it runs (the witness recorder of ``witness=True``).
    names : Mapping[str, str]
        Engine variable name -> the user's, for the log lines.
    defer_last : bool
        Leave the last step lazy in Spark too, for a caller that reads several answers
        in one job (:mod:`faq.delta`'s terms); its rows are then estimated.
    settings : Settings or None
        The thresholds of every choice; None: those in force (:func:`faq.settings`) when
        the executor is built.  Either way they hold for the executor's whole life.
    """

    join: str = "auto"
    backend: str = "auto"
    trace: bool = False
    parallelism: int | None = None
    hook: StepHook | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    defer_last: bool = False
    settings: Settings | None = None


@dataclass
class Data:
    """A factor during execution: its variables and its rows, local or in Spark (or both)."""

    vars: tuple[str, ...]
    rows: float
    table: Table | None = None
    df: DataFrame | None = None
    distinct: dict[str, float] = field(default_factory=dict)
    lazy: bool = False  # ``df`` not computed yet: ``rows`` and ``distinct`` are estimates
    consolidated: bool = True  # False: keys of ``df`` may repeat (⊕-combined by the reader)
    top: dict[str, tuple[tuple[Any, int], ...]] = field(default_factory=dict)  # heaviest values
    # one-cell steps not run yet (``df`` is None until a reader needs it: faq.spark.fused)
    pending: fused.Program | None = None
    # ``df`` is the lazy output of a step of several cells or of a Spark aggregation: a
    # one-cell reader shuffles it into its task rather than pulling those tasks into it
    spread: bool = False
    # where ``df`` reads its rows from, while ``df`` is that DataFrame (an atom's view of
    # its relation): atoms of one relation are then routed together (a self-join)
    source: tuple[partitioned.Source, DataFrame] | None = None

    def routed_from(self) -> partitioned.Source | None:
        """The relation ``df`` reads, if ``df`` is still the atom's view of it."""
        if self.source is None or self.source[1] is not self.df:
            return None
        return self.source[0]

    def info(self) -> InputInfo:
        return InputInfo(self.vars, self.rows, self.table is not None, self.distinct, self.top)


class Stepped(NamedTuple):
    """What running one step gave: its output, the kernel's candidate rows
    (``proposed``), the largest binary intermediate of a traced Spark step, and what the
    runner did when the data made it decline (:class:`faq.kernel.runners.Ran`)."""

    out: Data
    proposed: int | None
    largest: int | None = None
    ran: runners.Ran | None = None


# where a step runs (:attr:`faq.plan.physical.Choice.placement`) -> the executor's method
# that runs it there: the planner names the placement and the runner, the executor looks
# them up and never chooses
_PLACEMENTS = {
    "driver": "_driver_step",
    "tasks": "_tasks_step",
    "cells": "_spark_step",
    "spark": "_spark_step",
}


def _local_data(keep: tuple[str, ...], t: Table, last: bool = False) -> Data:
    """A step's local output; its distinct values are counted for the steps that read
    it, not for the last step's (the answer's statistics are counted if ever needed)."""
    return Data(keep, t.rows, table=t, distinct={} if last else _distinct_of(t))


class Executor:
    """Runs plans over ``S`` on ``spark`` (or in the driver alone) with ``options``.

    Everything it decides by is fixed when it is built: the :class:`Options`, and the
    settings and parallelism they resolve to (:attr:`settings`, :attr:`parallelism`).
    """

    def __init__(
        self, S: Semiring, spark: SparkSession | None, options: Options | None = None
    ) -> None:
        options = options if options is not None else Options()
        physical.check_options(options.join, options.backend)
        self.S = S
        self.ops = local_ops(S)
        self.spark = spark
        self.options = options
        self.settings = options.settings if options.settings is not None else current()
        parallelism = options.parallelism
        if parallelism is None:
            parallelism = tasks.parallelism(spark) if spark is not None else 1
        self.parallelism = parallelism
        self.driver_cores = tasks.driver_cores(spark)
        # every step in the query's semiring (no per-variable aggregates): a lazy output may
        # then leave repeated keys for its reader to ⊕-combine (see _spark_step); set by run
        self.uniform = False

    # -- planning the physical side ------------------------------------------------------
    def choices(self, plan: Plan, atoms: Sequence[Data], pairs: Pairs | None) -> list[Choice]:
        """The physical choice of every step, from estimates (what ``explain`` shows)."""
        infos: dict[int, InputInfo] = {
            id(f): a.info() for f, a in zip(plan.atoms, atoms, strict=True)
        }
        out = []
        for step in plan.steps:
            inputs = [infos.pop(id(f)) for f in step.factors]
            c = self._choose(step, inputs, pairs)
            out.append(c)
            local = not c.in_spark and step.output.rows <= self.settings.local_rows
            infos[id(step.output)] = InputInfo(
                step.output.vars, step.output.rows, local, step.output.distinct
            )
        return out

    def _choose(self, step: Step, inputs: list[InputInfo], pairs: Pairs | None) -> Choice:
        return physical.choose(
            step,
            inputs,
            join=self.options.join,
            backend=self.options.backend,
            pair_rows=pair_rows(step, pairs),
            parallelism=self.parallelism,
            driver_cores=self.driver_cores,
            settings=self.settings,
            semiring=self.step_semiring(step),
        )

    # -- running -------------------------------------------------------------------------
    def run(self, plan: Plan, atoms: Sequence[Data], pairs: Pairs | None) -> tuple[Data, Trace]:
        """Run ``plan`` on the atoms' data; return the result (over the head) and the trace."""
        t_start = time.perf_counter()
        frames: dict[int, Data] = {id(f): a for f, a in zip(plan.atoms, atoms, strict=True)}
        traces: list[StepTrace] = []
        result: Data | None = None
        n = len(plan.steps)
        self.uniform = all(step.op is None for step in plan.steps)
        for k, step in enumerate(plan.steps, 1):
            t0 = time.perf_counter()
            inputs = [frames.pop(id(f)) for f in step.factors]
            choice = self._choose(step, [d.info() for d in inputs], pairs)
            S = self.step_semiring(step)
            hook = self.options.hook
            if hook is not None:
                hook.record(self, step, inputs, choice)
            what = f"step {k}/{n}: {_describe(step, self.options.names)} on {_where(choice)}"
            # the placement the planner named, looked up by name (the executor never chooses)
            place = getattr(self, _PLACEMENTS[choice.placement])
            with StepProgress(what, self.spark, self.settings.progress_seconds):
                out, proposed, largest, ran = place(
                    step, inputs, choice, S, last=k == n and not self.options.defer_last
                )
            seconds = time.perf_counter() - t0
            declined = ran is not None and bool(ran.why)
            traces.append(
                StepTrace(
                    choice,
                    int(out.rows),
                    seconds,
                    proposed,
                    largest,
                    estimated=out.lazy,
                    ran=ran.runner if declined else "",
                    ran_why=ran.why if declined else "",
                )
            )
            log.info(
                "step %d/%d: %s: %s -> %s rows in %.2f s",
                k,
                n,
                _describe(step, self.options.names),
                _where(choice),
                f"~{int(out.rows):,} (estimated; computed with a later step)"
                if out.lazy
                else f"{int(out.rows):,}",
                seconds,
            )
            frames[id(step.output)] = out
            result = out
        if result is None:  # no step: the head is a single atom
            (only,) = frames.values()
            result = self._reorder(only, plan.rule.head)
        options = (("join", self.options.join), ("backend", self.options.backend))
        return result, Trace(tuple(traces), time.perf_counter() - t_start, options)

    def step_semiring(self, step: Step) -> Semiring:
        """The semiring a step runs in: the query's, or with ⊕ replaced by the step's
        own aggregate (per-variable aggregates, :mod:`faq.plan.aggregates`)."""
        if step.op is None:
            return self.S
        from semirings.aggregates import with_add

        return with_add(self.S, step.op)

    def _reorder(self, d: Data, head: tuple[str, ...]) -> Data:
        if d.table is not None:
            t = d.table
            table = Table(head, tuple(t.col(v) for v in head), t.values, t.unique)
            if not t.unique:
                table = group_reduce(table, head, self.ops)
            return Data(head, table.rows, table=table, distinct=d.distinct)
        df = self.dataframe(d)
        return Data(head, d.rows, df=df.select(*head, VALUE), distinct=d.distinct)

    # -- the local kernel ------------------------------------------------------------------
    def _driver_step(
        self, step: Step, inputs: list[Data], choice: Choice, S: Semiring, *, last: bool
    ) -> Stepped:
        """The step in the driver: the binary plan, or the runner the planner named
        (:func:`faq.kernel.runners.run`, with the driver threads it was given)."""
        keep = step.output.vars
        tables = [self.table(d) for d in inputs]
        ops = self.ops if S is self.S else local_ops(S)
        if choice.method == "binary":
            stats = JoinStats()
            out = local_binary(tables, [d.info() for d in inputs], keep, ops, stats)
            return Stepped(_local_data(keep, out, last), sum(stats.proposed))
        st = self.settings
        params = runners.Params(choice.shape, st.dense_fraction, st.dense_cells, choice.tasks)
        ran = runners.run(choice.runner, tables, choice.order, keep, ops, params)
        return Stepped(_local_data(keep, ran.table, last), ran.proposed, ran=ran)

    def _tasks_step(
        self, step: Step, inputs: list[Data], choice: Choice, S: Semiring, *, last: bool
    ) -> Stepped:
        """The step's tries built in the driver and its Generic Join run in
        ``choice.tasks`` Spark tasks, each a slice of the first variable
        (:mod:`faq.spark.tasks`); in the driver when there is no session, or when the
        tries are too large to send through Spark Connect."""
        if self.spark is None or choice.method == "binary":
            return self._driver_step(step, inputs, choice, S, last=last)
        keep = step.output.vars
        tables = [self.table(d) for d in inputs]
        ops = self.ops if S is self.S else local_ops(S)
        tries = kernel.index(tables, choice.order, ops)
        payload = sum(tr.nbytes() for tr in {id(t): t for t in tries}.values())
        if tasks.is_connect(self.spark) and payload > self.settings.connect_payload:
            out = kernel.generic_join(tables, choice.order, keep, ops, tries=tries)
            return Stepped(_local_data(keep, out, last), 0)
        types = [_spark_key_type(next(t.col(v) for t in tables if v in t.vars)) for v in keep]
        res = tasks.run_in_tasks(self.spark, tries, choice.order, keep, S, choice.tasks, types)
        assert isinstance(res, Table)
        return Stepped(_local_data(keep, res, last), 0)

    def table(self, d: Data) -> Table:
        """The rows of ``d`` as a local table (collects a Spark input: one job)."""
        if d.table is None:
            assert d.df is not None
            at = self.dataframe(d).select(*d.vars, VALUE).toArrow()  # keys ⊕-combined
            d.table = arrow_to_table(
                at, d.vars, self.S, "intermediate", check=False, unique=d.consolidated
            )
            d.rows = d.table.rows
        return d.table

    # -- Spark ----------------------------------------------------------------------------
    def dataframe(self, d: Data) -> DataFrame:
        """The rows of ``d`` as a Spark DataFrame, one per key (a local table goes through
        Arrow; repeated keys are ⊕-combined in the DataFrame's plan)."""
        df = self.rows_frame(d)
        if not d.consolidated:
            d.df = sops.consolidate(self.S, df.select(*d.vars, VALUE), list(d.vars), VALUE)
            d.consolidated = True
        assert d.df is not None
        return d.df

    def rows_frame(self, d: Data) -> DataFrame:
        """The rows of ``d`` as a Spark DataFrame whose keys may repeat (``d.consolidated``
        says): what a partitioned step reads, its cells ⊕-combining them."""
        if d.pending is not None:  # its one-cell steps, run by whoever reads it
            d.df, d.pending = fused.realise(d.pending), None
        if d.df is None:
            assert d.table is not None
            d.df = to_spark(d.table, self.S)
        return d.df

    def _local_sources(self, inputs: list[Data]) -> None:
        """Give the local inputs of a partitioned step their Spark rows, one DataFrame per
        relation held in the driver: atoms of one relation see the same key and value
        arrays under their own names (:func:`faq.inputs.InputStage.read`), so they share
        one conversion and are routed together, a self-join's rows packed once, as for a
        relation kept in Spark (not one conversion and one routing per atom)."""
        from pyspark.sql import functions as F

        made: list[tuple[Table, partitioned.Source]] = []
        for d in inputs:
            t = d.table
            if d.df is not None or t is None or d.pending is not None:
                continue
            src = next((s for base, s in made if _same_rows(base, t)), None)
            if src is None:
                keys = tuple(f"k{i}" for i in range(len(t.vars)))
                df = to_spark(t, self.S).toDF(*keys, VALUE)
                src = partitioned.Source(df, keys, keys)
                made.append((t, src))
            view = src.df.select(
                *[F.col(k).alias(v) for k, v in zip(src.keys, d.vars, strict=True)], VALUE
            )
            d.df, d.source = view, (src, view)

    def _spark_step(
        self, step: Step, inputs: list[Data], choice: Choice, S: Semiring, *, last: bool
    ) -> Stepped:
        """The step over Spark: partitioned into cells that each run the step's runner
        (one HyperCube shuffle, :mod:`faq.spark.partitioned`), fused into one task when it
        has one cell (:mod:`faq.spark.fused`), or as DataFrame joins (``join="binary"``)."""
        keep = step.output.vars
        settle = last or self.options.trace
        # a one-cell step, or a one-cell step's output ⊕-aggregated alone: in its task
        one_cell = choice.one_cell or (len(inputs) == 1 and inputs[0].pending is not None)
        if one_cell and self.options.hook is None and not self.options.trace:  # they see all steps
            return Stepped(self._one_cell(step, inputs, choice, S, settle), None)
        if choice.shares is not None:  # the cells' index ⊕-combines repeated keys
            self._local_sources(inputs)
            frames = [spark_ops.Frame(d.vars, self.rows_frame(d), d.rows) for d in inputs]
        else:
            frames = [spark_ops.Frame(d.vars, self.dataframe(d), d.rows) for d in inputs]
        if choice.shares is not None or len(frames) == 1:
            if len(frames) == 1:  # nothing to join: ⊕-aggregate in Spark
                df = spark_ops.aggregate(frames[0], keep, S)
            else:
                # a scalar collected now has its cells' partial sums ⊕-combined in the driver;
                # a lazy output, its reader's (a partitioned step's cells ⊕-combine repeated
                # keys in their index, with no shuffle of their own; others consolidate it)
                # unless the reader ⊕ differs (per-variable aggregates)
                combine = bool(keep) if settle else not self.uniform
                df = partitioned.run_partitioned(
                    [(f.vars, f.df) for f in frames],
                    choice.shares,
                    choice.order,
                    keep,
                    S,
                    combine=combine,
                    runner=choice.runner,
                    shape=choice.shape,
                    sources=[d.routed_from() for d in inputs],
                )
            if settle:
                return Stepped(self._settle(keep, df, S), None)
            # a lazy output: the next step reads it where it is (its size, estimated)
            est = dict(step.output.distinct)
            whole = len(frames) == 1 or combine or not choice.shares.combine
            out = Data(
                keep,
                step.output.rows,
                df=df,
                distinct=est,
                lazy=True,
                consolidated=whole,
                spread=True,
            )
            return Stepped(out, None)
        ordered = [frames[i] for i in physical.join_order([d.info() for d in inputs])]
        joined = spark_ops.binary_join(ordered, self.S)
        largest = spark_ops.trace_binary(ordered, self.S) if self.options.trace else None
        out, rows, distinct = spark_ops.materialize(spark_ops.aggregate(joined, keep, S))
        dist = {v: float(x) for v, x in zip(keep, distinct, strict=True)}
        return Stepped(Data(keep, rows, df=out, distinct=dist), None, largest)

    def _one_cell(
        self, step: Step, inputs: list[Data], choice: Choice, S: Semiring, settle: bool
    ) -> Data:
        """A one-cell step added to the programs of its pending inputs (or starting one):
        run now when ``settle``, else left pending for its reader (:mod:`faq.spark.fused`).
        A pending input that cannot take the step (another value type, or over the
        per-cell budget together) is run first, on its own."""
        rows = sum(d.rows for d in inputs if d.pending is None)
        for d in inputs:
            if d.pending is not None:
                if fused.can_fuse(d.pending, S, rows, self.settings.cell_rows):
                    rows += d.pending.rows
                else:
                    self.rows_frame(d)  # d.pending is None from here
        args: list[fused.Program | fused.Input] = [
            d.pending
            if d.pending is not None
            else fused.Input(d.vars, self.rows_frame(d), d.rows, shuffled=d.spread)
            for d in inputs
        ]
        keep = step.output.vars
        program = fused.fuse(args, choice.order, keep, S)
        if settle:
            return self._settle(keep, fused.realise(program), S)
        est = dict(step.output.distinct)
        return Data(keep, step.output.rows, distinct=est, lazy=True, pending=program)

    def _settle(self, keep: tuple[str, ...], df: DataFrame, S: Semiring) -> Data:
        """A lazy step's output computed now: a scalar collected into the driver
        (one job), anything else materialised on the executors with its counts.  A
        failure inside a cell is raised as the cell's own error."""
        try:
            if not keep:
                at = df.toArrow()
                t = arrow_to_table(at, keep, S, "result", check=False, unique=False)
                return Data(keep, t.rows, table=t)
            out, rows, distinct = spark_ops.materialize(df)
        except Exception as exc:
            raise tasks.task_error(exc) from exc
        dist = {v: float(x) for v, x in zip(keep, distinct, strict=True)}
        return Data(keep, rows, df=out, distinct=dist)


def local_binary(
    tables: Sequence[Table],
    infos: Sequence[InputInfo],
    keep: Sequence[str],
    ops: LocalOps,
    stats: JoinStats | None = None,
) -> Table:
    """The bag joined pairwise (each intermediate materialised), then ⊕-aggregated onto ``keep``.

    The binary plan of :func:`faq.plan.physical.join_order`, on the local kernel:
    what ``join="binary"`` means for a local step.
    """
    order = physical.join_order(infos)
    acc = tables[order[0]]
    for i in order[1:]:
        nxt = tables[i]
        vars_ = (*acc.vars, *[v for v in nxt.vars if v not in acc.vars])
        shared = [v for v in acc.vars if v in nxt.vars]
        binding = (*shared, *[v for v in vars_ if v not in shared])
        acc = kernel.generic_join([acc, nxt], binding, vars_, ops, stats=stats)
    return group_reduce(acc, keep, ops)


def pair_rows(step: Step, pairs: Pairs | None) -> float | None:
    """The cheapest exact pairwise join among the atoms of a cyclic step's bag."""
    if not step.cyclic or not pairs:
        return None
    atoms: list[PlanFactor] = [f for f in step.factors if f.atom is not None]
    sizes = [
        pairs[frozenset((a.atom, b.atom))]
        for i, a in enumerate(atoms)
        for b in atoms[i + 1 :]
        if a.atom != b.atom and set(a.vars) & set(b.vars) and frozenset((a.atom, b.atom)) in pairs
    ]
    return min(sizes) if sizes else None


def _where(c: Choice) -> str:
    """The step's runner and placement for the log: ``driver/blas``, ``tasks/generic-join
    (4 tasks)``, ``cells/graphblas-masked (16 cells)``, ``spark/binary-join``..."""
    if c.placement == "tasks":
        return f"{c.runs} ({c.tasks} tasks)"
    if c.shares is not None:
        return f"{c.runs} (one task)" if c.one_cell else f"{c.runs} ({c.shares.total} cells)"
    return c.runs


def _describe(step: Step, names: Mapping[str, str]) -> str:
    vs = [names.get(v, v) for v in step.vars]
    return f"eliminate {', '.join(vs)}" if vs else "multiply onto the head"


def _distinct_of(t: Table) -> dict[str, float]:

    return {v: float(count_distinct(c)) for v, c in zip(t.vars, key_sets(t), strict=True)}


def _spark_key_type(a: object) -> str:
    return spark_type(a)  # type: ignore[arg-type]


def _same_rows(a: Table, b: Table) -> bool:
    """Whether two local tables hold the very same key and value arrays (an atom's view of
    a relation renames its columns, it does not copy them)."""
    return (
        len(a.cols) == len(b.cols)
        and a.values is b.values
        and all(x is y for x, y in zip(a.cols, b.cols, strict=True))
    )
