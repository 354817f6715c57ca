"""A recursive program solved whole inside one Spark task: one Spark job, not a few a round.

A fixpoint partitioned in Spark (:mod:`faq.spark.fixpoint`) pays a few Spark jobs a
round (the change's broadcast or shuffle, the ⊕-merge's ``groupBy``, the checkpoint),
about a second each on a small cluster whatever the change holds, and so do the
PySpark loops and Pregel programs users would write instead.  When the inputs kept in
Spark are small enough for one task's memory (``program_task_rows``, chosen by
:func:`faq.plan.physical.program_in_task`), one Spark job runs the whole program:

* the inputs kept in Spark are read as one frame, each row tagged with its input (their
  key columns share one Spark type, padded with nulls to the widest arity), shuffled
  into one partition; inputs held in the driver travel inside the task's function;
* that one task reads its inputs back into kernel tables and runs
  :meth:`faq.Program.run` over them with ``backend="driver"``: every round on the
  driver's kernel, in the task's Python worker, none of them a Spark job;
* it yields the answer's rows, and one more row carrying the run's record (its
  rounds, or the error the run raised, pickled), read back as an aggregate observed
  during the checkpoint that ends the job.

The driver holds no relation: the answer stays in Spark (checkpointed), and the
driver receives only the record.  An error of the run (an improving cycle, a value
outside the semiring's domain, an overflow, a user function's failure) is raised in
the driver as it was raised in the task, with its type and message.
"""

from __future__ import annotations

import base64
import logging
import pickle
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.build import label_of
from faq.factor import Factor
from faq.kernel.table import Table
from faq.kernel.values import key_type as values_key_type
from faq.plan.physical import backend_policy, program_in_task
from faq.plan.settings import Settings, current, settings
from faq.program_run import ProgramRun
from faq.progress import StepProgress
from faq.read import fits
from faq.rule import VALUE
from faq.source import Source
from faq.spark.checks import check_value_type, explain_cost, plain_scan, size_from
from faq.spark.convert import arrow_to_table
from faq.spark.ops import checkpointed, key_type, union_all
from faq.spark.tasks import arrow_type
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["TASK", "key_types", "program_in_one_task"]

log = logging.getLogger("faq")

TASK = "one task"
"""A round's place (:attr:`faq.program_run.Round.where`) when the whole program ran in
one Spark task."""

_TAG = "__input"
_EVERYTHING = 2**62
_RECORD = "__record"
_ARROW = {"bigint": "int64", "string": "string", "double": "float64", "boolean": "bool_"}


def program_in_one_task(
    program: Any,
    inputs: Mapping[str, Factor],
    opts: Mapping[str, Any],
    max_rounds: int,
    t0: float,
    witness: bool,
    checked: bool = True,
) -> ProgramRun | None:
    """Run ``program`` whole inside one Spark task over ``inputs`` when the planner says
    so (:func:`faq.plan.physical.program_in_task`), and return its record; else None.

    Parameters
    ----------
    program : faq.Program
        The program; it is rebuilt in the task from its text and semiring.
    inputs : mapping of str to Factor
        Its input relations, read and checked (``checked``) or as given: those kept in
        Spark are gathered into the task by the job, the others travel with the task's
        function.
    opts : mapping
        ``order``, ``join`` and ``backend`` of the run (in the task, every step runs on
        the driver's kernel).
    max_rounds : int
        As for :meth:`faq.Program.run`.
    t0 : float
        When the run started (``time.perf_counter()``), before its inputs were read.
    witness : bool
        Whether the run keeps witnesses (then it does not run in a task).
    checked : bool
        Whether ``inputs`` were read and checked (:meth:`faq.Factor.validated`: one
        Spark job, exact row counts).  Unchecked, the planner decides from Spark's own
        estimates (:func:`faq.spark.checks.size_hint`), and returns None when those do
        not say that an input stays out of the driver and how many rows it holds (the
        caller then checks the inputs and asks again); the task checks the rows
        instead, as the driver would (:func:`faq.spark.convert.arrow_to_table`).

    Returns
    -------
    ProgramRun or None
        The answer as a Factor kept in Spark, the rounds as the task ran them (each
        one's place :data:`TASK`), the driver's reading and the job's own cost (the
        gathering of the inputs, the answer's checkpoint) in ``read_seconds``; the
        planner's reason in ``plans`` for every recursive group.

    Raises
    ------
    Exception
        What the run raised in the task, with its type and message
        (:class:`faq.plan.convergence.DivergenceError`, OverflowError, ...).
    """
    S: Semiring = program.semiring
    st = current()
    remote = {n: f for n, f in inputs.items() if not f.is_local}
    # declined below as well, before any plan is read: an input kept in Spark holds more
    # than local_rows rows, so a program_task_rows ≤ local_rows admits none
    if not remote or witness or st.program_task_rows <= st.local_rows:
        return None
    plans = {n: explain_cost(f.df) for n, f in remote.items()}  # read once for rows and scans
    rows = _counted(remote) if checked else _rows(remote, plans, S, opts["backend"])
    if rows is None:
        return None
    types = key_types(inputs)
    ok, why = program_in_task(S, program.rules, rows, types, opts["backend"], witness)
    if not ok:
        return None
    read_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    held = {n: f.to_table() for n, f in inputs.items() if f.is_local}
    key_type = types[0] if types else "bigint"
    vtype = sops.ops(S).type
    head = program.vars[program.answer]
    tagged = [(n, f.vars, len(f.df.columns) > len(f.vars)) for n, f in remote.items()]
    arrow = (_arrow(key_type), arrow_type(vtype) or _arrow(vtype))  # made here: no JVM there
    task = _Task(program, held, tagged, opts, max_rounds, st, (head, *arrow))
    schema = ", ".join(
        [f"`{v}` {key_type}" for v in head] + [f"`{VALUE}` {vtype}", f"`{_RECORD}` string"]
    )
    plain = all(plain_scan(plans[n]) for n in remote)
    df = _gathered(remote, key_type, vtype, plain).mapInArrow(task, schema)
    from pyspark.sql import functions as F

    what = f"program {program.answer}: every round in one Spark task"
    with StepProgress(what, df.sparkSession, st.progress_seconds):
        out, got = checkpointed(df, {"record": F.max(F.col(_RECORD))})
    ran, error = pickle.loads(base64.b64decode(got["record"]))
    if error is not None:
        raise error
    rounds, groups, task_read = ran
    answer = out.filter(F.col(_RECORD).isNull()).drop(_RECORD)
    src = Source.spark(answer, head, S, checked=True, consolidated=True)
    result = Factor.from_source(src, program.answer)
    job = _since(t0) - sum(r.seconds for r in rounds) - task_read
    plans = tuple((names, why) for names, _ in groups)
    rounds = tuple(replace(r, where=(TASK,), spark_reads=()) for r in rounds)
    log.info("%s: %d rounds in %.2f s", what, sum(1 for r in rounds if r.round), _since(t0))
    return ProgramRun(result, rounds, program, read_seconds + task_read + job, plans)


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _counted(remote: Mapping[str, Factor]) -> dict[str, int | None]:
    """The rows of each checked input kept in Spark (counted by its check)."""
    return {n: (f.stats.rows if f.stats is not None else None) for n, f in remote.items()}


def _rows(
    remote: Mapping[str, Factor], plans: Mapping[str, str | None], S: Semiring, backend: str
) -> dict[str, int | None] | None:
    """Spark's estimate of the rows of each unchecked input kept in Spark, from its plan
    ``plans[n]`` (None for an input Spark cannot estimate), or None when an input might be
    read into the driver (its rows fit ``local_rows`` or only a read can tell)."""
    limits = current()
    out: dict[str, int | None] = {}
    for n, f in remote.items():
        src = f.source
        if backend_policy(backend).collects and fits(src, limits) is not False:
            return None
        if src.has_value:
            check_value_type(f.df, S, label_of(n))
        text = plans[n]
        hint = None if text is None else size_from(f.df, text)[0]
        out[n] = None if hint is None else int(hint)
    return out


def key_types(inputs: Mapping[str, Factor]) -> list[str]:
    """The Spark type of every key column of ``inputs`` (kept in Spark: by their schema;
    held in the driver: by their values)."""
    out = []
    for f in inputs.values():
        if f.is_local:
            out += [values_key_type(c) for c in f.to_table().cols]
        else:
            out += [key_type(fl.dataType) for fl in f.df.schema.fields[: len(f.vars)]]
    return out


def _gathered(remote: Mapping[str, Factor], key_type: str, vtype: str, plain: bool) -> DataFrame:
    """The rows of every input kept in Spark in one frame, in one partition:
    ``(input, k0 … k{n-1}, value)``, the input's position in ``remote``, its keys by
    position (null past its arity) and its annotation (null without a value column: one).
    Every key column is of ``key_type`` (:func:`faq.plan.physical.program_in_task` asks
    for one type), so the inputs need no other packing to share a frame.  Inputs that are
    all ``plain`` scans are read by the one task itself (``coalesce``); others are
    computed by their own tasks and shuffled into it."""
    from pyspark.sql import functions as F

    width = max(len(f.vars) for f in remote.values())
    frames = []
    for i, f in enumerate(remote.values()):
        df = f.df
        arity = len(f.vars)
        cols = [F.lit(i).cast("int").alias(_TAG)]
        cols += [F.col(df.columns[j]).cast(key_type).alias(f"k{j}") for j in range(arity)]
        cols += [F.lit(None).cast(key_type).alias(f"k{j}") for j in range(arity, width)]
        has_value = len(df.columns) > arity
        value = F.col(df.columns[arity]) if has_value else F.lit(None)
        frames.append(df.select(*cols, value.cast(vtype).alias(VALUE)))
    gathered = union_all(frames)
    if plain:  # read in the one task: no shuffle
        return gathered.coalesce(1)
    return gathered.repartition(1)  # the inputs' own work stays spread over the cluster


class _Task:
    """The function of the one task (picklable): the program's text and semiring, the
    inputs held in the driver, the run's options and the driver's settings."""

    def __init__(
        self,
        program: Any,
        held: dict[str, Table],
        remote: list[tuple[str, tuple[str, ...], bool]],
        opts: Mapping[str, Any],
        max_rounds: int,
        st: Settings,
        schema: tuple[tuple[str, ...], pa.DataType, pa.DataType],
    ) -> None:
        self.kind = type(program)
        self.text = program.text
        self.S = program.semiring
        self.held = held
        self.remote = remote  # inputs kept in Spark (name, variables, has a value), by tag
        self.order, self.join = opts["order"], opts["join"]
        self.max_rounds = max_rounds
        self.changed = {n: getattr(st, n) for n in st.changed()}
        self.changed["local_rows"] = _EVERYTHING  # in the task every relation is held there
        self.schema = schema  # the answer's variables, the keys' and the values' Arrow types

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t0 = time.perf_counter()
        ops = local_ops(self.S)
        import pyarrow as pa

        got = [b for b in batches if b.num_rows]
        answer: Table | None = None
        try:
            program = self.kind(self.text, self.S)
            factors = {n: self._factor(program, n, t) for n, t in self.held.items()}
            if self.remote:
                rows = pa.Table.from_batches(got) if got else None
                for i, (n, vars_, has_value) in enumerate(self.remote):
                    t = _read(rows, i, n, vars_, has_value, self.S)
                    factors[n] = self._factor(program, n, t)
            read = time.perf_counter() - t0
            with settings(**self.changed):
                run = program.run(
                    order=self.order,
                    join=self.join,
                    backend="driver",
                    max_rounds=self.max_rounds,
                    **factors,
                )
            answer = run.result.to_table()
            record: Any = ((run.rounds, run.plans, read + run.read_seconds), None)
        except Exception as exc:  # raised in the driver, as it was raised here
            record = (None, _portable(exc))
        if answer is not None and answer.rows:
            yield self._batch(answer, ops, None)
        yield self._batch(None, ops, base64.b64encode(pickle.dumps(record)).decode("ascii"))

    def _factor(self, program: Any, name: str, t: Table) -> Factor:
        vars_ = tuple(f"{name}{i}" for i in range(program.arity[name]))
        t = Table(vars_, t.cols, t.values, t.unique)
        return Factor.from_table(t, self.S, name)

    def _batch(self, t: Table | None, ops: LocalOps, record: str | None) -> pa.RecordBatch:
        import pyarrow as pa

        head, kt, vt = self.schema
        names = [*head, VALUE, _RECORD]
        if t is None:
            arrays = [pa.nulls(1, kt) for _ in head]
            arrays += [pa.nulls(1, vt), pa.array([record], pa.string())]
            return pa.RecordBatch.from_arrays(arrays, names=names)
        arrays = [pa.array(c, type=kt) for c in t.cols]
        values = t.values if t.values is not None else ops.ones(np.ones(t.rows, np.int64))
        values = values.tolist() if values.dtype == object else values
        arrays.append(pa.array(values, type=vt))
        arrays.append(pa.nulls(t.rows, pa.string()))
        return pa.RecordBatch.from_arrays(arrays, names=names)


def _arrow(spark_type: str) -> pa.DataType:
    """The Arrow type of a plain Spark type's name (``bigint``, ``string``, ``double``,
    ``boolean``)."""
    import pyarrow as pa

    return getattr(pa, _ARROW.get(spark_type, "string"))()


def _read(
    rows: pa.Table | None, tag: int, name: str, vars_: tuple[str, ...], has_value: bool, S: Semiring
) -> Table:
    """Input ``name``'s rows among the gathered ``rows`` (those tagged ``tag``): its keys
    (of ``vars_``) and (``has_value``) its annotations, checked for ``S`` as the driver
    checks the rows it reads (null keys, annotations outside the semiring: ValueError
    naming the relation), ⊕-combined by key, zeros dropped."""
    import pyarrow as pa

    keys = [f"k{i}" for i in range(len(vars_))]
    if rows is None:
        ops = local_ops(S)
        cols = tuple(np.empty(0, dtype=np.int64) for _ in keys)
        return Table(vars_, cols, np.empty(0, dtype=ops.dtype))
    mine = rows.column(_TAG).to_numpy() == tag
    if not mine.all():
        rows = rows.filter(pa.array(mine))
    at = rows.select(keys + ([VALUE] if has_value else []))
    return arrow_to_table(at, vars_, S, label_of(name), check=True, unique=False)


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives a pickle round trip, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
