"""The local kernel inside Spark tasks: one index shipped to every task, one slice each.

A step run "in tasks" builds its tries once, in the driver, and runs
``T`` Spark tasks (``spark.range(T)`` in ``T`` partitions, ``mapInArrow``).
The tries travel inside the task function: PySpark broadcasts a function
larger than ``spark.broadcast.UDFCompressionThreshold`` (1 MB) once per
executor instead of sending it with every task, and Spark Connect ships it in
the plan.  Task ``t`` runs :func:`faq.kernel.generic_join` with
``part=(t, T)``: the candidates of the second binding level, flattened
across all prefixes, are cut into ``T`` equal slices, so a hub's neighbours
spread over several tasks instead of making one straggler.  Each task
⊕-reduces its output before it leaves (only aggregated rows return), and the
driver ⊕-combines the tasks' results.

This is the structure of the edge-frames work on Spark and of BiGJoin: an
index broadcast to the workers, each running a worst-case optimal join over
its share of the first variables.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.join import generic_join
from faq.kernel.table import Table, group_reduce
from faq.kernel.trie import Trie
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "TaskError",
    "arrow_type",
    "marked",
    "parallelism",
    "query_error",
    "run_in_tasks",
    "table_batch",
    "task_error",
]


_MARK = "[sparkfaq task error]"


class TaskError(RuntimeError):
    """A task of the local kernel failed; the message is the task's own error."""


_KNOWN: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
"""(parallelism, driver cores) of the sessions asked already: a session's do not change."""


def parallelism(spark: SparkSession) -> int:
    """How many tasks can run at once: Spark's default parallelism, or the local cores."""
    return _figures(spark)[0]


def driver_cores(spark: SparkSession | None) -> int:
    """Cores the driver's own threads may use: the local master's in local mode (the
    executors are the driver then), else this machine's."""
    if spark is None:
        return os.cpu_count() or 1
    return _figures(spark)[1]


def _figures(spark: SparkSession) -> tuple[int, int]:
    hit = _KNOWN.get(spark)
    if hit is None:
        hit = _KNOWN[spark] = (_parallelism(spark), _driver_cores(spark))
    return hit


def _parallelism(spark: SparkSession) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        pass
    try:
        conf = spark.conf.get("spark.default.parallelism", None)
        if conf:
            return max(1, int(conf))
        master = spark.conf.get("spark.master", None) or ""
    except Exception:
        master = ""
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master)
    if m:
        return os.cpu_count() or 1 if m.group(1) == "*" else int(m.group(1))
    return os.cpu_count() or 1 if master == "local" else 2


def _driver_cores(spark: SparkSession) -> int:
    cores = os.cpu_count() or 1
    try:
        master = spark.conf.get("spark.master", None) or ""
    except Exception:
        return cores
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master)
    if m and m.group(1) != "*":
        return max(1, min(cores, int(m.group(1))))
    return 1 if master == "local" else cores


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def run_in_tasks(
    spark: SparkSession,
    tries: Sequence[Trie],
    order: Sequence[str],
    keep: Sequence[str],
    S: Semiring,
    T: int,
    key_types: Sequence[str],
    *,
    collect: bool = True,
) -> Table | DataFrame:
    """Run :func:`faq.kernel.generic_join` over ``tries`` in ``T`` Spark tasks.

    Returns the ⊕-combined result as a local Table (``collect``, one Spark
    job), or as a lazy DataFrame (head variables, then ``value``) ⊕-reduced by
    Spark, for results too large for the driver.  ``key_types`` are the
    Spark types of the ``keep`` variables.

    Raises
    ------
    OverflowError
        A 64-bit integer semiring overflowed in a task.
    TaskError
        Any other failure of a task (the message is the task's own).
    """
    keep = tuple(keep)
    order = tuple(order)
    vtype = sops.ops(S).type
    schema = ", ".join(
        [f"`{v}` {t}" for v, t in zip(keep, key_types, strict=True)] + [f"`{VALUE}` {vtype}"]
    )
    task = _Task(tuple(tries), order, keep, S, T, arrow_type(vtype))
    df = spark.range(0, T, 1, numPartitions=T).mapInArrow(task, schema)
    if not collect:
        return sops.reduce(S, df, list(keep), VALUE)
    try:
        at = df.toArrow()
    except Exception as exc:
        raise task_error(exc) from exc
    return _from_arrow(at, keep, S)


class _Task:
    """The function each task runs (picklable: the tries are its data)."""

    def __init__(
        self,
        tries: tuple[Trie, ...],
        order: tuple[str, ...],
        keep: tuple[str, ...],
        S: Semiring,
        T: int,
        value_type: pa.DataType | None = None,
    ) -> None:
        self.tries = tries
        self.order = order
        self.keep = keep
        self.S = S
        self.T = T
        self.value_type = value_type  # given for nested types (Arrow cannot infer a struct)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ops = local_ops(self.S)
        for batch in batches:
            for t in batch.column(0).to_pylist():
                try:
                    out = generic_join(
                        [], self.order, self.keep, ops, tries=self.tries, part=(int(t), self.T)
                    )
                except Exception as exc:
                    raise marked(exc) from exc
                yield table_batch(out, ops, self.value_type)


def marked(exc: BaseException) -> BaseException:
    """``exc`` as a task raises it, so that :func:`task_error` can give the driver the
    task's own error (an OverflowError stays one)."""
    if isinstance(exc, OverflowError):
        return OverflowError(f"{_MARK} OverflowError: {exc}")
    return RuntimeError(f"{_MARK} {type(exc).__name__}: {exc}")


def table_batch(out: Table, ops: LocalOps, value_type: pa.DataType | None) -> pa.RecordBatch:
    """A kernel result as an Arrow batch: its key columns, then ``value`` (of
    ``value_type`` when given: nested types, which Arrow cannot infer)."""
    import pyarrow as pa

    arrays = [pa.array(c) for c in out.cols]
    values = out.values if out.values is not None else ops.ones(np.ones(out.rows, np.int64))
    arrays.append(pa.array(_plain(values), type=value_type))
    return pa.RecordBatch.from_arrays(arrays, names=[*out.vars, VALUE])


def arrow_type(spark_type: str) -> pa.DataType | None:
    """The Arrow type of a nested Spark type (``struct<...>``, ``array<...>``, ``map<...>``)
    of a user semiring's values; None for a plain type, which Arrow infers."""
    if not spark_type.startswith(("struct<", "array<", "map<")):
        return None
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import DataType

    return to_arrow_type(DataType.fromDDL(spark_type))


def _plain(values: np.ndarray) -> Any:
    if values.dtype == object:
        return values.tolist()
    return values


def _from_arrow(at: pa.Table, keep: tuple[str, ...], S: Semiring) -> Table:
    ops = local_ops(S)
    cols = []
    for v in keep:
        a = at.column(v).to_numpy()
        cols.append(a.astype(np.int64) if a.dtype.kind in "iu" else a)
    raw = at.column(VALUE).to_numpy(zero_copy_only=False)
    if ops.dtype is object:
        values = sops.python_values(S, raw.astype(object))
    else:
        values = raw.astype(ops.dtype)
    return group_reduce(Table(keep, tuple(cols), values, unique=False), keep, ops)


def task_error(exc: BaseException) -> BaseException:
    """The error a failed kernel task reported, as the driver should raise it."""
    text = str(exc)
    i = text.find(_MARK)
    if i < 0:
        return exc
    line = text[i + len(_MARK) :].strip().splitlines()[0]
    kind, _, message = line.partition(": ")
    if kind == "OverflowError":
        return OverflowError(message)
    return TaskError(line)


def query_error(exc: Exception, rule: object, S: Semiring) -> Exception:
    """The error a failed solve of ``rule`` over ``S`` raises: overflow (local or Spark's
    ANSI mode) as an OverflowError naming the semiring, a user function's failure in a
    worker as one line; everything else as it is (a failed cell's as its own error)."""
    from semirings.core import SemiringFunctionError, function_error

    if isinstance(exc, SemiringFunctionError):
        return exc
    failed = function_error(str(exc))
    if failed is not None:  # a user function raised in a Spark worker: one line, not a trace
        return failed
    exc = task_error(exc)  # type: ignore[assignment]
    text = str(exc)
    overflow = (
        isinstance(exc, OverflowError)
        or "ARITHMETIC_OVERFLOW" in text
        or ("overflow" in text.lower() and "Arithmetic" in type(exc).__name__)
    )
    if overflow:
        return OverflowError(
            f"query {rule}: a {S.name!r} annotation overflowed 64-bit integers "
            "(Spark ANSI mode). Use the 'real' semiring for an approximate answer."
        )
    return exc
