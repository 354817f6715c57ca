"""Checks of relations kept in Spark: types, nulls, semiring values and statistics in one job.

:func:`spark_prepared` checks a DataFrame (null keys, annotations outside the
semiring, negative annotations where a query needs non-negative ones) and
gathers its row and distinct counts and each key column's most frequent values
in a single aggregation job (:func:`spark_prepared_all`: one job for up to 64
relations of a query);
:func:`size_hint` reads Spark's own size estimate without running anything.
"""

from __future__ import annotations

import io
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from faq.kernel.stats import RelationStats
from faq.plan.settings import current
from faq.rule import VALUE
from faq.session import fixed_plans_for
from faq.spark.ops import key_type, sql_name, union_all
from faq.spark.tasks import parallelism
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from faq.source import Source

__all__ = [
    "Check",
    "ParquetScan",
    "check_value_type",
    "parquet_scan",
    "read_scan",
    "size_hint",
    "spark_prepared",
    "spark_arrow_type",
    "spark_prepared_all",
]

CHECKS_PER_JOB = 64
"""Relations checked together by one job: one aggregation, grouped by relation, of the
union of their rows (:func:`_figures`).  A query with more takes one job per this many,
so that no one plan unions too many scans (see docs/partitioned.md, "Spark jobs")."""

TOP_K = 8
"""The most frequent values per key column the check job reports (``approx_top_k``)."""
TOP_TRACKED = 1024
"""Values ``approx_top_k`` tracks: a count is off by at most 2 × rows / this."""

_STATS = re.compile(
    r"Statistics\(sizeInBytes=([0-9.Ee+]+)\s*([KMGTPE]?i?B)(?:,\s*rowCount=([0-9.Ee+]+))?"
)
_UNITS = {
    "B": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "PiB": 2**50,
    "EiB": 2**60,
}


def size_hint(df: DataFrame) -> tuple[float | None, float | None]:
    """Spark's own estimate of ``df``: (rows or None, bytes or None), without running it.

    Read from ``EXPLAIN COST`` (the statistics Spark plans broadcast joins
    with); ``(None, None)`` when they cannot be had.  Under projections and filters
    only, the rows of the node below them (a bound from above).  Spark gives no row
    count for files: for a Parquet scan (under filters and projections only) the rows
    are the sum of its files' footers, a bound from above.
    """
    text = explain_cost(df)
    if text is None:
        return None, None
    return size_from(df, text)


def explain_cost(df: DataFrame) -> str | None:
    """``EXPLAIN COST`` of ``df`` (no job), which :func:`size_from` and :func:`plain_scan`
    read; None where it cannot be had (an old Spark, a Connect server without it).

    Read from ``df.explain(mode="cost")``, which prints the plans Spark keeps with the
    frame (about 3 ms once they are made), its print caught for this thread only; a
    SQL ``EXPLAIN COST`` over a temporary view, which plans the query again (70-130 ms),
    where nothing was printed."""
    try:
        text = _printed(lambda: df.explain(mode="cost"))
    except Exception:  # noqa: BLE001 - the SQL statement below, or nothing to read
        text = ""
    if text.strip():
        return text.removesuffix("\n")  # print's own
    try:
        return str(df.sparkSession.sql("EXPLAIN COST SELECT * FROM {t}", t=df).collect()[0][0])
    except Exception:  # no plan to read
        return None


class _ThreadOut:
    """``sys.stdout`` while :func:`_printed` runs: what this thread writes is kept, what
    other threads write goes where it went before."""

    def __init__(self, before: Any) -> None:
        self.before, self.thread, self.kept = before, threading.get_ident(), io.StringIO()

    def write(self, s: str) -> int:
        if threading.get_ident() == self.thread:
            return self.kept.write(s)
        if self.before is None:  # no stdout (as under pythonw): print writes nothing
            return len(s)
        return int(self.before.write(s) or 0)

    def flush(self) -> None:
        if threading.get_ident() != self.thread and self.before is not None:
            self.before.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.before, name)


_PRINTING = threading.Lock()


def _printed(fn: Callable[[], object]) -> str:
    """What ``fn`` prints to ``sys.stdout`` in this thread."""
    with _PRINTING:
        before = sys.stdout
        out = _ThreadOut(before)
        sys.stdout = out
        try:
            fn()
        finally:
            sys.stdout = before
    return out.kept.getvalue()


def size_from(df: DataFrame, text: str) -> tuple[float | None, float | None]:
    """:func:`size_hint` from ``df``'s :func:`explain_cost` ``text``."""
    m = _STATS.search(text)
    if m is None:
        return None, None
    size = float(m.group(1)) * _UNITS.get(m.group(2), 1)
    rows = float(m.group(3)) if m.group(3) else _below_projections(text)
    if rows is None:
        rows = _parquet_rows(df, text)
    return rows, size


_ROW_KEEPING = re.compile(r"^[\s:+\-|]*(Project|Filter)\b")


def plain_scan(text: str | None) -> bool:
    """Whether the optimized plan of an :func:`explain_cost` ``text`` is one scan (of
    files, a checkpoint, local rows) under projections and filters only: reading it in
    one task costs about what shuffling it into one task would, without the shuffle.
    False without a plan."""
    if text is None:
        return False
    lines = _optimized(text)
    return bool(lines) and all(_ROW_KEEPING.match(ln) for ln in lines[:-1])


def _below_projections(text: str) -> float | None:
    """At least the rows of a plan whose top nodes are projections and filters (nothing
    that adds rows) over a node whose row count Spark knows (a checkpoint, a local
    relation): that count.  Spark keeps no row count above a projection unless its cost
    model is on, so a ``select`` of a checkpointed frame would have none."""
    for ln in _optimized(text):
        m = _STATS.search(ln)
        if m is not None and m.group(3):
            return float(m.group(3))
        if not _ROW_KEEPING.match(ln):
            return None
    return None


_SCAN_NODES = re.compile(r"^[\s:+\-|]*(Project|Filter|Relation)\b")


def _parquet_rows(df: DataFrame, text: str) -> float | None:
    """At least the rows of ``df`` when its optimized plan is one Parquet scan under
    filters and projections (nothing that adds rows), read from the files' footers
    (local files only, at most ``footer_files`` of them, a setting: no job, a few ms);
    None otherwise."""
    lines = _optimized(text)
    scans = [ln for ln in lines if "Relation [" in ln]
    if (
        len(scans) != 1
        or not scans[0].split("]", 1)[-1].lstrip().startswith("parquet")
        or not all(_SCAN_NODES.match(ln) for ln in lines)
    ):
        return None
    paths = _local_files(df)
    if paths is None:
        return None
    try:
        import pyarrow.parquet as pq

        return float(sum(pq.read_metadata(p).num_rows for p in paths))
    except Exception:  # a file gone, unreadable, not Parquet after all: no bound
        return None


def _optimized(text: str) -> list[str]:
    """The non-blank lines of the optimized logical plan in an ``EXPLAIN COST`` text."""
    plan = text.split("== Optimized Logical Plan ==", 1)[-1].split("== Physical Plan ==")[0]
    return [ln for ln in plan.splitlines() if ln.strip()]


def _local_files(df: DataFrame) -> list[str] | None:
    """The paths of the files ``df`` reads when they are all local (``file:`` or no
    scheme) and at most ``footer_files`` (a setting); None otherwise."""
    try:
        urls = [urlparse(f) for f in df.inputFiles()]
    except Exception:  # no files to name (a Connect server without it)
        return None
    if not urls or len(urls) > current().footer_files:
        return None
    if any(u.scheme not in ("", "file") for u in urls):
        return None
    return [unquote(u.path) for u in urls]


@dataclass(frozen=True)
class ParquetScan:
    """Columns of a DataFrame that is one scan of local Parquet files, which a Python task
    can read straight from the files (pyarrow) instead of through Spark's rows: the
    files, and the file column each of the DataFrame's columns reads."""

    paths: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]  # (the DataFrame's column, the file's column)


_NAME = r"([A-Za-z_][A-Za-z0-9_]*)#\d+L?"
_RELATION = re.compile(r"^[\s:+\-|]*Relation \[([^\]]*)\] parquet\b")
_PROJECT = re.compile(r"^Project \[(.*)\], Statistics\(")
_ITEM = re.compile(rf"{_NAME}(?: AS {_NAME})?")


def parquet_scan(df: DataFrame, text: str | None, columns: Sequence[str]) -> ParquetScan | None:
    """``df``'s ``columns`` as read straight from its files, when its optimized plan (in
    its :func:`explain_cost` ``text``) is one Parquet scan of local files (at most
    ``footer_files``), under at most one projection that only picks and renames columns
    (no filter, no cast), and every file holds each column under the name the scan reads,
    of a type pyarrow reads as Spark does (signed integers, floats, booleans, strings of
    the default collation); None otherwise (then Spark reads the rows)."""
    lines = [] if text is None else _optimized(text)
    relation = _RELATION.match(lines[-1]) if lines and len(lines) <= 2 else None
    if relation is None:
        return None
    project = _PROJECT.match(lines[0]) if len(lines) == 2 else None
    if len(lines) == 2 and project is None:
        return None
    listed = project.group(1).split(", ") if project else relation.group(1).split(",")
    items = [_ITEM.fullmatch(x.strip()) for x in listed]
    if any(m is None for m in items):
        return None
    reads = [(m.group(2) or m.group(1), m.group(1)) for m in items if m is not None]
    names = [out for out, _ in reads]
    if names != list(df.columns) or len(set(names)) != len(names):  # a name twice: ambiguous
        return None
    source = dict(reads)
    paths = _local_files(df)
    if paths is None:
        return None
    wanted = tuple((c, source[c]) for c in columns)
    types = {c: df.schema[c].dataType for c in columns}
    try:
        import pyarrow.parquet as pq

        for p in paths:
            schema = pq.read_schema(p)
            for c, src in wanted:
                i = schema.get_field_index(src)
                if i < 0 or not _reads_as(schema.field(i).type, types[c]):
                    return None
    except Exception:  # a file gone, unreadable, not Parquet after all: Spark reads it
        return None
    return ParquetScan(tuple(sorted(paths)), wanted)  # in name order: often key order


def read_scan(scan: ParquetScan, names: Sequence[str], types: Sequence[Any]) -> pa.Table:
    """The rows of ``scan`` read from its files (pyarrow, in ``scan.paths`` order), its
    columns named ``names`` and cast to the Arrow ``types`` as Spark's ``cast`` would
    (integers widened, integers to floats rounded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = sorted({src for _, src in scan.columns})
    parts = []
    for path in scan.paths:
        t = pq.read_table(path, columns=source)
        cols = [
            t.column(src).cast(kind, safe=False)
            for (_, src), kind in zip(scan.columns, types, strict=True)
        ]
        parts.append(pa.table(cols, names=list(names)))
    return pa.concat_tables(parts)


def spark_arrow_type(spark: Any) -> pa.DataType:
    """The Arrow type Spark's ``toArrow`` gives a column of the plain Spark type ``spark``
    (one that :func:`parquet_scan` reads from files)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    kinds = {
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.BooleanType: pa.bool_(),
    }
    return kinds.get(type(spark), pa.string())


def _reads_as(arrow: Any, spark: Any) -> bool:
    """Whether a Parquet column pyarrow reads as ``arrow`` holds what Spark reads as
    ``spark``, value for value."""
    import pyarrow as pa
    from pyspark.sql import types as T

    bits = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}.get(type(spark))
    if bits is not None:
        return bool(pa.types.is_signed_integer(arrow)) and arrow.bit_width <= bits
    if isinstance(spark, T.FloatType | T.DoubleType):
        return bool(pa.types.is_float32(arrow) or pa.types.is_float64(arrow))
    if isinstance(spark, T.BooleanType):
        return bool(pa.types.is_boolean(arrow))
    if spark.simpleString() == "string":  # not a collated string type
        return bool(pa.types.is_string(arrow) or pa.types.is_large_string(arrow))
    return False


def check_value_type(df: DataFrame, S: Semiring, label: str) -> None:
    """ValueError when the ``value`` column's Spark type cannot hold ``S``'s values."""
    from pyspark.sql import types as T

    t = sops.ops(S).type
    dtype = df.schema[VALUE].dataType
    ok = {
        "bigint": isinstance(dtype, T.IntegralType),
        "double": isinstance(dtype, T.NumericType),
        "boolean": isinstance(dtype, T.BooleanType),
        "string": isinstance(dtype, T.StringType),
    }.get(t, True)
    if not ok:
        raise ValueError(
            f"{label}: column {VALUE!r} has type {dtype.simpleString()}, but the {S.name!r} "
            f"semiring holds {S.domain}"
        )


@dataclass(frozen=True)
class Check:
    """One relation to check in Spark: its source, the semiring, the label its errors name,
    the reason negative annotations are refused (None: they are not) and whether repeated
    keys are ⊕-combined here (see :func:`spark_prepared`)."""

    src: Source
    S: Semiring
    label: str
    nonnegative: str | None = None
    consolidate: bool = True


def spark_prepared(
    src: Source,
    S: Semiring,
    label: str,
    *,
    nonnegative: str | None = None,
    consolidate: bool = True,
) -> tuple[DataFrame, RelationStats, bool]:
    """The rows of ``src`` (a ``df`` source) as a checked, typed, ⊕-consolidated DataFrame
    for ``S``, plus statistics (one Spark job), and whether the rows are consolidated.

    Without ``consolidate`` repeated keys are left for the caller to ⊕-combine (a
    partitioned step's kernel does it in its index, with no shuffle of its own), unless
    a negative annotation has to be judged after ⊕.

    Raises ValueError naming ``label`` and the column for null keys or
    annotations outside the semiring, and, with ``nonnegative`` (the reason, for the
    message), for negative annotations after repeated keys are ⊕-combined (a negative
    row whose key sums to a non-negative value is accepted, as in the driver).  A
    source checked for ``S`` with statistics runs no job (but one for ``nonnegative``).
    """
    return spark_prepared_all([Check(src, S, label, nonnegative, consolidate)])[0]


def spark_prepared_all(
    checks: Sequence[Check],
) -> list[tuple[DataFrame, RelationStats, bool]]:
    """:func:`spark_prepared` for several relations with one Spark job for up to
    :data:`CHECKS_PER_JOB` of them.

    Each relation that needs checking is aggregated over its own rows into one row of
    its figures; those rows are unioned (each relation's figures in its own columns)
    and collected together, so a relation's aggregates never run over another's rows.
    Errors are raised in the order of ``checks``.
    """

    todo = []
    for j, c in enumerate(checks):
        if c.src.df is None:
            raise ValueError(
                f"{c.label}: only a source held in Spark is checked there ({c.src.form})"
            )
        if c.src.checked is not c.S or c.src.stats is None:
            todo.append(j)
    row: dict[str, Any] = {}
    by_semiring: dict[int, list[int]] = {}
    for j in todo:
        by_semiring.setdefault(id(checks[j].S), []).append(j)
    for group in by_semiring.values():
        for at in range(0, len(group), CHECKS_PER_JOB):
            row.update(_figures([(j, checks[j]) for j in group[at : at + CHECKS_PER_JOB]]))
    return [_finish(c, j, row) for j, c in enumerate(checks)]


def _figures(checks: Sequence[tuple[int, Check]]) -> dict[str, Any]:
    """The figures of relations ``(j, check)`` (all in one semiring), computed by one
    Spark job: rows, nulls and distinct values per key column, its most frequent values,
    bad and negative annotations, named for relation ``j`` (``__rows{j}``, ...).

    Every relation's rows are tagged with ``j`` and unioned, one column per *slot*: a
    relation's ``i``-th key column of Spark type ``t`` goes to slot ``(t, n)`` when it is
    its ``n``-th key of that type, so relations of different arities and key types share
    columns (null where a relation has no key for a slot); the figures are one
    aggregation grouped by ``j``.  So all the relations are read in one stage and
    combined in one more, where an aggregation per relation took a stage and a shuffle
    each; and the relations' partitions are coalesced into as many as there are task
    slots, so many small relations do not make as many tiny tasks.  The plan is SQL text
    (one Py4J call per relation), except the semiring's own ``valid`` test, a ``Column``.
    """
    from pyspark.sql import functions as F

    S = checks[0][1].S
    o = sops.ops(S)
    slots: dict[tuple[str, int], str] = {}  # (type, n) -> the union's column
    where: dict[int, list[str]] = {}  # j -> the slot of each key column
    types: dict[str, str] = {}
    for j, c in checks:
        df = c.src.df
        assert df is not None
        seen: dict[str, int] = {}
        where[j] = []
        for k in c.src.vars:
            t = key_type(df.schema[k].dataType)
            n = seen[t] = seen.get(t, -1) + 1
            col = slots.setdefault((t, n), f"__k{len(slots)}")
            types[col] = t
            where[j].append(col)
    parts = []
    for j, c in checks:
        df = c.src.df
        assert df is not None
        mine = dict(zip(where[j], c.src.vars, strict=True))
        cols = [
            f"CAST({sql_name(mine[col]) if col in mine else 'NULL'} AS {t}) AS {col}"
            for col, t in types.items()
        ]
        value = sql_name(VALUE) if c.src.has_value else "NULL"
        valid = c.src.has_value and c.src.checked is not S  # the semiring's own test
        parts.append(
            df.selectExpr(
                f"CAST({j} AS INT) AS __j",
                *cols,
                f"CAST({value} AS {o.type}) AS __v",
                f"{str(valid).upper()} AS __test",
            )
        )
    union = union_all(parts).withColumn(
        "__bad", F.col("__test") & ~F.coalesce(o.valid(F.col("__v")), F.lit(False))
    )
    aggs = ["count(1) AS __rows", "count(CASE WHEN __bad THEN 1 END) AS __bad"]
    for col in types:
        aggs.append(f"count(CASE WHEN {col} IS NULL THEN 1 END) AS __null{col}")
        aggs.append(f"approx_count_distinct({col}) AS __d{col}")
        aggs.append(f"approx_top_k({col}, {TOP_K}, {TOP_TRACKED}) AS __top{col}")
    if any(c.nonnegative for _, c in checks):
        aggs.append("min(CASE WHEN __v < 0 THEN __v END) AS __neg")
    # as many partitions as tasks run at once: a small relation is a task's worth of work
    # at most, and a task costs a fixed price (tens of ms) whatever its rows
    tasks = parallelism(union.sparkSession) * current().task_slices
    grouped = union.coalesce(max(1, tasks)).groupBy("__j")
    with fixed_plans_for([union]):  # else the shuffle is a job of its own
        got = grouped.agg(*[F.expr(a) for a in aggs]).collect()
    row: dict[str, Any] = {}
    by_j = dict(checks)
    for r in got:
        j = r["__j"]
        c = by_j[j]
        row[f"__rows{j}"] = r["__rows"]
        row[f"__bad{j}"] = r["__bad"]
        if c.nonnegative:
            row[f"__neg{j}"] = r["__neg"]
        for i, col in enumerate(where[j]):
            row[f"__null{j}_{i}"] = r[f"__null{col}"]
            row[f"__d{j}_{i}"] = r[f"__d{col}"]
            row[f"__top{j}_{i}"] = r[f"__top{col}"]
    for j, c in checks:  # no rows at all: no group
        if f"__rows{j}" not in row:
            row[f"__rows{j}"] = 0
            for i in range(len(c.src.vars)):
                row[f"__null{j}_{i}"], row[f"__d{j}_{i}"] = 0, 0
    return row


def _finish(c: Check, j: int, row: Mapping[str, Any]) -> tuple[DataFrame, RelationStats, bool]:
    """Relation ``j``'s checked rows from its figures in ``row`` (errors raised here)."""
    from pyspark.sql import functions as F

    src, S, label, nonnegative = c.src, c.S, c.label, c.nonnegative
    o = sops.ops(S)
    keys = list(src.vars)
    df = src.df
    assert df is not None
    negative = F.col(VALUE).cast(o.type) < 0
    clean = src.checked is S
    if clean and src.stats is not None:
        if not src.consolidated and (c.consolidate or nonnegative):
            df = sops.reduce(S, df, keys, VALUE)
        if nonnegative and src.has_value:
            _refuse_negative(df, negative, label, nonnegative)
        return df, src.stats, bool(src.consolidated or c.consolidate or nonnegative)
    for i, k in enumerate(keys):
        nulls = row[f"__null{j}_{i}"]
        if nulls:
            raise ValueError(
                f"{label}: key column {k!r} (position {i}) has {nulls} null "
                "value(s); keys must not be null"
            )
    if row.get(f"__bad{j}"):
        sample = (
            df.filter(~F.coalesce(o.valid(F.col(VALUE).cast(o.type)), F.lit(False)))
            .select(VALUE)
            .limit(1)
            .collect()[0][0]
        )
        raise ValueError(
            f"{label}: column {VALUE!r} has {row[f'__bad{j}']} annotation(s) that are not "
            f"values of the {S.name!r} semiring (domain: {S.domain}), e.g. {sample!r}"
        )
    neg = row.get(f"__neg{j}")
    consolidated = clean and src.consolidated
    if neg is not None and consolidated:
        raise ValueError(f"{label}: {nonnegative}, found {neg!r}")
    rows = int(row[f"__rows{j}"])
    stats = RelationStats(
        rows,
        tuple(min(rows, int(row[f"__d{j}_{i}"])) for i in range(len(keys))),
        exact=False,
        top=tuple(_top(row.get(f"__top{j}_{i}")) for i in range(len(keys))),
    )
    if consolidated:
        return df, stats, True
    if src.has_value:
        typed = df.select(*keys, F.col(VALUE).cast(o.type).alias(VALUE))
    else:
        typed = df.select(*keys, sops.constant(S, S.one).alias(VALUE))
    if not c.consolidate and neg is None:
        return typed, stats, False  # the caller ⊕-combines repeated keys where it must
    out = sops.consolidate(S, typed, keys, VALUE)
    if neg is not None:  # a negative row: refused if its key's ⊕-sum is too
        _refuse_negative(out, negative, label, nonnegative)
    return out, stats, True


def _top(items: Any) -> tuple[tuple[Any, int], ...]:
    """``approx_top_k``'s answer as ``((value, rows), ...)``, most frequent first."""
    return tuple((it["item"], int(it["count"])) for it in items or () if it["item"] is not None)


def _refuse_negative(df: DataFrame, negative: Any, label: str, why: str | None) -> None:
    """ValueError (``why``, naming ``label``) when a row of the consolidated ``df`` is
    negative: repeated keys are ⊕-combined before annotations are judged, as in the
    driver."""
    rows = df.filter(negative).select(VALUE).limit(1).collect()
    if rows:
        raise ValueError(f"{label}: {why}, found {rows[0][0]!r}")
