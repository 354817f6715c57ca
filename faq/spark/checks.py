"""Checks of relations kept in Spark: types, nulls, semiring values and statistics in one job.

:func:`spark_prepared` checks a DataFrame (null keys, annotations outside the
semiring, negative annotations where a query needs non-negative ones) and
gathers its row and distinct counts and each key column's most frequent values
in a single aggregation job (:func:`spark_prepared_all`: one job for up to eight
relations of a query);
:func:`size_hint` reads Spark's own size estimate without running anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from faq.kernel.stats import RelationStats
from faq.plan.settings import current
from faq.rule import VALUE
from faq.session import fixed_plans_for
from faq.spark.ops import sql_name
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from faq.source import Source

__all__ = ["Check", "check_value_type", "size_hint", "spark_prepared", "spark_prepared_all"]

CHECKS_PER_JOB = 8
"""Relations checked together by one job.  Each relation is aggregated over its own rows
and the one-row results are unioned, so a job's work grows with its relations' rows, but
Spark still plans a union of many aggregates slowly, so a query with many relations
takes one job per this many (see docs/partitioned.md, "Spark jobs", for the benchmark
figures of the change)."""

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
    with); ``(None, None)`` when they cannot be had.  Spark gives no row count for
    files: for a Parquet scan (under filters and projections only) the rows are the
    sum of its files' footers, a bound from above.
    """
    try:
        text = df.sparkSession.sql("EXPLAIN COST SELECT * FROM {t}", t=df).collect()[0][0]
    except Exception:  # an old Spark, a Connect server without it: no estimate
        return None, None
    m = _STATS.search(text)
    if m is None:
        return None, None
    size = float(m.group(1)) * _UNITS.get(m.group(2), 1)
    rows = float(m.group(3)) if m.group(3) else _parquet_rows(df, text)
    return rows, size


_SCAN_NODES = re.compile(r"^[\s:+\-|]*(Project|Filter|Relation)\b")


def _parquet_rows(df: DataFrame, text: str) -> float | None:
    """At least the rows of ``df`` when its optimized plan is one Parquet scan under
    filters and projections (nothing that adds rows), read from the files' footers
    (local files only, at most ``footer_files`` of them, a setting: no job, a few ms);
    None otherwise."""
    plan = text.split("== Optimized Logical Plan ==", 1)[-1].split("== Physical Plan ==")[0]
    lines = [ln for ln in plan.splitlines() if ln.strip()]
    scans = [ln for ln in lines if "Relation [" in ln]
    if (
        len(scans) != 1
        or not scans[0].split("]", 1)[-1].lstrip().startswith("parquet")
        or not all(_SCAN_NODES.match(ln) for ln in lines)
    ):
        return None
    try:
        import pyarrow.parquet as pq

        urls = [urlparse(f) for f in df.inputFiles()]
        if not urls or len(urls) > current().footer_files:  # a footer read per file
            return None
        if any(u.scheme not in ("", "file") for u in urls):
            return None
        return float(sum(pq.read_metadata(unquote(u.path)).num_rows for u in urls))
    except Exception:  # a file gone, unreadable, not Parquet after all: no bound
        return None


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
    for at in range(0, len(todo), CHECKS_PER_JOB):
        union = None
        for j in todo[at : at + CHECKS_PER_JOB]:
            frame, figures = _figures(checks[j], j)
            one = frame.selectExpr(*figures)  # one row: relation j's figures, over its rows
            union = one if union is None else union.unionByName(one, allowMissingColumns=True)
        assert union is not None
        with fixed_plans_for([union]):  # else each relation's shuffle is a job of its own
            figures = union.collect()
        for r in figures:
            for k, v in r.asDict().items():
                if v is not None or k not in row:  # another relation's row holds null here
                    row[k] = v
    return [_finish(c, j, row) for j, c in enumerate(checks)]


def _col(j: int, i: int | str) -> str:
    """The union's column of relation ``j``'s key ``i`` (or its value, ``i="v"``)."""
    return f"__r{j}_{i}"


def _figures(c: Check, j: int) -> tuple[DataFrame, list[str]]:
    """Relation ``j``'s rows with its own column names, and the aggregates of its figures
    (rows, nulls and distinct values per key column, its most frequent values, bad and
    negative annotations), named for relation ``j``, as SQL text (one Py4J call for all
    of them, where ``Column`` functions take several each)."""
    from pyspark.sql import functions as F

    src, o = c.src, sops.ops(c.S)
    assert src.df is not None
    cols = [f"{sql_name(k)} AS {_col(j, i)}" for i, k in enumerate(src.vars)]
    if src.has_value:
        cols.append(f"CAST({sql_name(VALUE)} AS {o.type}) AS {_col(j, 'v')}")
    frame = src.df.selectExpr(*cols)
    aggs = [f"count(1) AS __rows{j}"]
    for i in range(len(src.vars)):
        k = _col(j, i)
        aggs.append(f"count(CASE WHEN {k} IS NULL THEN 1 END) AS __null{j}_{i}")
        aggs.append(f"approx_count_distinct({k}) AS __d{j}_{i}")
        aggs.append(f"approx_top_k({k}, {TOP_K}, {TOP_TRACKED}) AS __top{j}_{i}")
    v = _col(j, "v")
    if src.has_value and c.src.checked is not c.S:  # the semiring's own test, a Column
        bad = ~F.coalesce(o.valid(F.col(v)), F.lit(False))
        frame = frame.withColumn(f"__isbad{j}", bad)
        aggs.append(f"count(CASE WHEN __isbad{j} THEN 1 END) AS __bad{j}")
    if c.nonnegative and src.has_value:
        aggs.append(f"min(CASE WHEN {v} < 0 THEN {v} END) AS __neg{j}")
    return frame, aggs


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
