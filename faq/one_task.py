"""A whole solve inside one Spark task: its inputs gathered there by one job, its answer
back in Spark.

Past ``local_rows`` the inputs of a query or a program stay out of the driver.  When they
are small enough for one task's memory (``query_task_rows``, ``program_task_rows``;
:func:`placement`, which asks the planner's :func:`faq.plan.physical.in_one_task`), one
Spark job does all of it:

* the inputs kept in Spark are read as one frame (:func:`gathered`), each row tagged with
  its input, their key columns of one Spark type, padded with nulls to the widest arity;
  plain scans are read by the one task itself, other inputs shuffled into it; inputs
  held in the driver travel inside the task's function;
* that one task (:class:`OneTask`) reads its inputs back into kernel tables, checked as
  the driver checks the rows it reads (:func:`read_input`), and hands them to a *body*
  (the query's or the program's run, with the driver's settings and kernel);
* it yields the answer's rows, and one more row carrying the body's record (or the error
  it raised, pickled), read back as an aggregate observed during the checkpoint that
  ends the job (:func:`run_in_one_task`).

The driver holds no relation: the answer stays in Spark (checkpointed), and the driver
receives only the record.  An error of the run is raised in the driver as it was raised
in the task, with its type and message.
"""

from __future__ import annotations

import base64
import pickle
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.build import label_of
from faq.factor import Factor
from faq.kernel.table import Table
from faq.kernel.values import key_type as values_key_type
from faq.plan.physical import backend_policy, in_one_task
from faq.plan.settings import Settings, current, settings
from faq.progress import StepProgress
from faq.read import fits
from faq.rule import VALUE, Rule
from faq.source import Source
from faq.spark.checks import (
    ParquetScan,
    check_value_type,
    explain_cost,
    parquet_scan,
    plain_scan,
    read_scan,
    size_from,
)
from faq.spark.convert import arrow_to_table
from faq.spark.ops import checkpointed, key_type, union_all
from faq.spark.tasks import arrow_type
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "Body",
    "OneTask",
    "Placement",
    "counted_rows",
    "estimated_rows",
    "gathered",
    "key_types",
    "may_fit",
    "placement",
    "read_files",
    "read_input",
    "run_in_one_task",
]

Body = Callable[[dict[str, Factor], float], tuple[Table | None, Any]]
"""What runs in the one task: given the inputs as Factors held there and the seconds spent
reading them, the answer's table (or None) and a picklable record of the run."""

_TAG = "__input"
_EVERYTHING = 2**62
_RECORD = "__record"
_ARROW = {"bigint": "int64", "string": "string", "double": "float64", "boolean": "bool_"}


@dataclass(frozen=True)
class Placement:
    """Why a solve's inputs go into one Spark task, and what gathering them needs: the
    :func:`faq.spark.checks.explain_cost` texts of those kept in Spark (``explained``;
    plain scans are read by the task itself), the one Spark type of every key column,
    how errors name each input (``labels``; default ``factor 'E'``) and the inputs that
    are scans of local Parquet files, which the task reads from the files (``files``)."""

    why: str
    explained: dict[str, str | None]
    key_type: str
    labels: dict[str, str]
    files: dict[str, ParquetScan]


def may_fit(limit: int, backend: str) -> bool:
    """Whether a solve under ``backend`` might go into one task whose inputs kept in Spark
    hold at most ``limit`` rows: only by size (``backend="auto"``), past ``local_rows``
    (an input kept in Spark holds more than ``local_rows`` rows, so a limit at most that
    admits none).  Asked before any input is read or any plan asked of Spark."""
    return backend_policy(backend).by_size and limit > current().local_rows


def placement(
    inputs: Mapping[str, Factor],
    S: Semiring,
    rules: Sequence[Rule],
    backend: str,
    witness: bool,
    limit: str,
    *,
    checked: bool = False,
    labels: Mapping[str, str] | None = None,
) -> Placement | None:
    """Where :func:`faq.plan.physical.in_one_task` puts a solve of ``rules`` over
    ``inputs`` (limited by the setting ``limit``): a :class:`Placement` in one task, or None.

    The rows of the inputs kept in Spark are their checks' counts (``checked``) or
    Spark's own estimates (:func:`estimated_rows`, from one ``EXPLAIN COST`` per input:
    no job); None as well when those do not say that every input stays out of the driver
    and how many rows it holds.
    """
    remote = {n: f for n, f in inputs.items() if not f.is_local}
    if not remote:
        return None
    explained = {n: explain_cost(f.df) for n, f in remote.items()}  # for rows and scans
    if checked:
        rows = counted_rows(remote)
    else:
        rows = estimated_rows(remote, explained, S, backend, labels)
    if rows is None:
        return None
    types = key_types(inputs)
    ok, why = in_one_task(limit, rules, rows, types, backend, witness)
    if not ok:
        return None
    files = {n: scan for n, f in remote.items() if (scan := _direct(f, explained[n]))}
    if files:
        why += (
            f"; {', '.join(files)} read by the task straight from "
            f"{sum(len(s.paths) for s in files.values())} local Parquet file(s) (pyarrow)"
        )
    return Placement(why, explained, types[0] if types else "bigint", dict(labels or {}), files)


def _direct(f: Factor, text: str | None) -> ParquetScan | None:
    """The columns of ``f`` (kept in Spark) that a task reads (its keys, then its value if
    it has one) as read straight from its Parquet files, or None."""
    df = f.df
    return parquet_scan(df, text, df.columns[: len(f.vars) + (len(df.columns) > len(f.vars))])


def counted_rows(remote: Mapping[str, Factor]) -> dict[str, int | None]:
    """The rows of each checked input kept in Spark (counted by its check)."""
    return {n: (f.stats.rows if f.stats is not None else None) for n, f in remote.items()}


def estimated_rows(
    remote: Mapping[str, Factor],
    explained: Mapping[str, str | None],
    S: Semiring,
    backend: str,
    labels: Mapping[str, str] | None = None,
) -> dict[str, int | None] | None:
    """Spark's estimate of the rows of each unchecked input kept in Spark, from its
    :func:`faq.spark.checks.explain_cost` text ``explained[n]`` (None for an input Spark
    cannot estimate), or None when an input might be read into the driver (its rows fit
    ``local_rows`` or only a read can tell).  A value column of a type the semiring
    cannot hold raises ValueError naming the relation (``labels``, default ``factor 'E'``)."""
    limits = current()
    out: dict[str, int | None] = {}
    for n, f in remote.items():
        src = f.source
        if backend_policy(backend).collects and fits(src, limits) is not False:
            return None
        if src.has_value:
            check_value_type(f.df, S, (labels or {}).get(n, label_of(n)))
        text = explained[n]
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


def gathered(remote: Mapping[str, Factor], key_type: str, vtype: str, plain: bool) -> DataFrame:
    """The rows of every input kept in Spark in one frame, in one partition:
    ``(input, k0 … k{n-1}, value)``, the input's position in ``remote``, its keys by
    position (null past its arity) and its annotation (null without a value column: one).
    Every key column is of ``key_type`` (the planner asks for one type), so the inputs
    need no other packing to share a frame.  Inputs that are all ``plain`` scans are read
    by the one task itself (``coalesce``); others are computed by their own tasks and
    shuffled into it."""
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
    out = union_all(frames)
    if plain:  # read in the one task: no shuffle
        return out.coalesce(1)
    return out.repartition(1)  # the inputs' own work stays spread over the cluster


def run_in_one_task(
    body: Body,
    inputs: Mapping[str, Factor],
    head: tuple[str, ...],
    S: Semiring,
    placed: Placement,
    name: str,
    what: str,
) -> tuple[Factor, Any]:
    """Run ``body`` over ``inputs`` inside one Spark task (one job), as ``placed`` says,
    and return its answer as the Factor ``name`` over ``head`` with the body's record.
    The answer's rows are kept in Spark and checkpointed; an answer without keys
    (``head`` empty) travels in the record instead, the job's one row, and is held in
    the driver.

    ``what`` names the job in progress lines.  The task runs under the settings in force
    here, with every relation held there (``local_rows`` unbounded).  What the body raised
    is raised here.
    """
    from pyspark.sql import functions as F

    st = current()
    remote = {n: f for n, f in inputs.items() if not f.is_local}
    held = {n: f.to_table() for n, f in inputs.items() if f.is_local}
    ktype, vtype = placed.key_type, sops.ops(S).type
    rest = {n: f for n, f in remote.items() if n not in placed.files}
    tagged = [
        (placed.labels.get(n, label_of(n)), n, f.vars, len(f.df.columns) > len(f.vars))
        for n, f in rest.items()
    ]
    files = [
        (placed.labels.get(n, label_of(n)), n, remote[n].vars, scan)
        for n, scan in placed.files.items()
    ]
    arrow = (_arrow(ktype), arrow_type(vtype) or _arrow(vtype))  # made here: no JVM there
    task = OneTask(body, S, held, tagged, st, (head, *arrow), files)
    schema = ", ".join(
        [f"`{v}` {ktype}" for v in head] + [f"`{VALUE}` {vtype}", f"`{_RECORD}` string"]
    )
    if rest:
        plain = all(plain_scan(placed.explained.get(n)) for n in rest)
        df = gathered(rest, ktype, vtype, plain).mapInArrow(task, schema)
    else:  # every input read from its files: the task needs one row to run
        spark = next(iter(remote.values())).df.sparkSession
        df = spark.range(1, numPartitions=1).mapInArrow(task, schema)
    with StepProgress(what, df.sparkSession, st.progress_seconds):
        if head:
            out, got = checkpointed(df, {"record": F.max(F.col(_RECORD))})
            text = got["record"]
        else:  # no keys: the answer is in the record, the job's one row
            out, text = None, df.select(_RECORD).collect()[0][0]
    record, scalar, error = pickle.loads(base64.b64decode(text))
    if error is not None:
        raise error
    if out is None:
        return Factor.from_table(scalar, S, name), record
    answer = out.filter(F.col(_RECORD).isNull()).drop(_RECORD)
    src = Source.spark(answer, head, S, checked=True, consolidated=True)
    return Factor.from_source(src, name), record


class OneTask:
    """The function of the one task (picklable): the body, the inputs held in the driver,
    the tags of those gathered from Spark and the driver's settings."""

    def __init__(
        self,
        body: Body,
        S: Semiring,
        held: dict[str, Table],
        remote: list[tuple[str, str, tuple[str, ...], bool]],
        st: Settings,
        schema: tuple[tuple[str, ...], pa.DataType, pa.DataType],
        files: list[tuple[str, str, tuple[str, ...], ParquetScan]],
    ) -> None:
        self.body = body
        self.S = S
        self.held = held
        self.remote = remote  # inputs kept in Spark (label, name, variables, has a value)
        self.changed = {n: getattr(st, n) for n in st.changed()}
        self.changed["local_rows"] = _EVERYTHING  # in the task every relation is held there
        self.schema = schema  # the answer's variables, the keys' and the values' Arrow types
        self.files = files  # inputs read from their Parquet files (label, name, variables, scan)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t0 = time.perf_counter()
        ops = local_ops(self.S)
        import pyarrow as pa

        got = [b for b in batches if b.num_rows]
        answer: Table | None = None
        try:
            factors = {n: self._factor(n, t) for n, t in self.held.items()}
            if self.remote:
                rows = pa.Table.from_batches(got) if got else None
                for i, (label, n, vars_, has_value) in enumerate(self.remote):
                    t = read_input(rows, i, label, vars_, has_value, self.S)
                    factors[n] = self._factor(n, t)
            for label, n, vars_, scan in self.files:
                t = read_files(scan, vars_, self.S, label, self.schema[1:])
                factors[n] = self._factor(n, t)
            read = time.perf_counter() - t0
            with settings(**self.changed):
                answer, record = self.body(factors, read)
            # an answer without keys travels in the record: the job's one row
            payload: Any = (record, None if self.schema[0] else answer, None)
        except Exception as exc:  # raised in the driver, as it was raised here
            payload = (None, None, _portable(exc))
        if answer is not None and answer.rows and self.schema[0]:
            yield self._batch(answer, ops, None)
        yield self._batch(None, ops, base64.b64encode(pickle.dumps(payload)).decode("ascii"))

    def _factor(self, name: str, t: Table) -> Factor:
        vars_ = tuple(f"{name}{i}" for i in range(len(t.vars)))
        return Factor.from_table(Table(vars_, t.cols, t.values, t.unique), self.S, name)

    def _batch(self, t: Table | None, ops: LocalOps, record: str | None) -> pa.RecordBatch:
        import pyarrow as pa

        head, kt, vt = self.schema
        names = [*head, VALUE, _RECORD]
        if t is None:
            arrays = [pa.nulls(1, kt) for _ in head]
            arrays += [pa.nulls(1, vt), pa.array([record], pa.string())]
            return pa.RecordBatch.from_arrays(arrays, names=names)
        cols = t.cols if tuple(t.vars) == head else [t.cols[t.vars.index(v)] for v in head]
        arrays = [pa.array(c, type=kt) for c in cols]
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


def read_input(
    rows: pa.Table | None,
    tag: int,
    label: str,
    vars_: tuple[str, ...],
    has_value: bool,
    S: Semiring,
) -> Table:
    """An input's rows among the gathered ``rows`` (those tagged ``tag``): its keys (of
    ``vars_``) and (``has_value``) its annotations, checked for ``S`` as the driver checks
    the rows it reads (null keys, annotations outside the semiring: ValueError naming it
    as ``label``), ⊕-combined by key, zeros dropped."""
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
    return arrow_to_table(at, vars_, S, label, check=True, unique=False)


def read_files(
    scan: ParquetScan,
    vars_: tuple[str, ...],
    S: Semiring,
    label: str,
    types: tuple[pa.DataType, pa.DataType],
) -> Table:
    """An input's rows read straight from its Parquet files (``scan``): its keys (of
    ``vars_``) cast to the key type and, when the scan has one more column, its
    annotations cast to the value type (``types``), as Spark's ``cast`` would, then
    checked, ⊕-combined and without zeros as :func:`read_input` makes them."""
    names = [f"k{i}" for i in range(len(vars_))] + [VALUE] * (len(scan.columns) > len(vars_))
    kinds = [types[0]] * len(vars_) + [types[1]]
    at = read_scan(scan, names, kinds[: len(names)])
    return arrow_to_table(at, vars_, S, label, check=True, unique=False)


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives a pickle round trip, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
