"""Reading a query's relations: checks, statistics and, for small ones, the rows themselves.

A relation that fits in the driver (at most :data:`LOCAL_ROWS` rows) is
collected once, through Arrow, and from then on handled as numpy arrays:
checked (null keys, annotations outside the semiring), consolidated and
counted exactly, with no further Spark job.  Whether an unchecked DataFrame
fits is asked of Spark's optimizer: the size estimate it uses to decide
broadcast joins (``EXPLAIN COST``; exact for cached and local data, the file
size for files).  Larger relations stay in Spark; one Spark job checks them
and gathers their statistics.
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel import Table, group_reduce
from faq.rule import VALUE
from faq.stats import RelationStats, table_stats
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from faq.factor import Factor

__all__ = [
    "LOCAL_BYTES",
    "LOCAL_ROWS",
    "Relation",
    "arrow_to_table",
    "collect_factor",
    "prepare",
    "size_hint",
    "spark_prepared",
]

log = logging.getLogger("faq")

LOCAL_ROWS = 20_000_000
"""A relation with at most this many rows is read into the driver and joined by the local
kernel (20M two-column rows take about 320 MB as numpy arrays, plus their index)."""

LOCAL_BYTES = 512 * 2**20
"""Without a row estimate, a relation whose estimated size (Spark's ``sizeInBytes``, for
files the file size) is at most this is read into the driver."""

UNKNOWN_BYTES = 2**60
"""Spark's ``sizeInBytes`` for data it knows nothing about (an RDD) is ``Long.MaxValue``
(shown as 8 EiB): such a relation is read with a bound of ``LOCAL_ROWS + 1`` rows."""


@dataclass
class Relation:
    """A relation ready for execution: local rows, or a Spark DataFrame, and statistics.

    ``table`` (local) is consolidated, checked and zero-free.  ``df`` (when
    not local) is checked and typed, and consolidated lazily (a ⊕-aggregation
    in its plan) unless it was already.
    """

    name: str
    vars: tuple[str, ...]
    stats: RelationStats
    table: Table | None = None
    df: DataFrame | None = None

    @property
    def is_local(self) -> bool:
        return self.table is not None


def prepare(
    f: Factor, S: Semiring, label: str, *, local: bool = True, nonnegative: str | None = None
) -> Relation:
    """The factor ``f`` ready for a query over ``S``: local when it is or it fits.

    ``local=False`` keeps a distributed factor in Spark whatever its size.
    ``nonnegative`` (the reason, for the message) also refuses negative annotations of a
    factor kept in Spark, in the same job as the other checks; the caller checks local
    rows.
    Raises ValueError naming ``label`` and the column for null keys, a value
    column of the wrong type or annotations outside ``S``.  Reading a DataFrame
    logs one line at INFO on the ``"faq"`` logger (see
    :func:`faq.session.show_progress`): the relation, the rows read, where they
    went (the driver, or checked and kept in Spark) and the seconds it took.
    """
    t = f._local_table(required=False)
    if t is not None:
        return Relation(f.name or label, f.vars, f.stats or table_stats(t), table=t)
    t0 = time.perf_counter()
    rel = _read(f, S, label, local=local, nonnegative=nonnegative)
    log.info(
        "load %s(%s): %s rows %s in %.2f s",
        rel.name,
        ", ".join(rel.vars),
        f"{rel.stats.rows:,}",
        "into the driver" if rel.is_local else "checked, kept in Spark",
        time.perf_counter() - t0,
    )
    return rel


def _read(f: Factor, S: Semiring, label: str, *, local: bool, nonnegative: str | None) -> Relation:
    """:func:`prepare` for a factor held by a Spark DataFrame."""
    if f._has_value:
        check_value_type(f.df, S, label)
    fits = _fits(f) if local else False
    if fits is None:  # no estimate (data built from an RDD, say): read at most LOCAL_ROWS + 1
        at = f.df.limit(LOCAL_ROWS + 1).toArrow()
        if at.num_rows <= LOCAL_ROWS:
            table = _collected(f, at, S, label, consolidate=False)
            return Relation(f.name or label, f.vars, table_stats(table), table=table)
    elif fits:
        table = collect_factor(f, S, label, consolidate=False)
        return Relation(f.name or label, f.vars, table_stats(table), table=table)
    df, stats = spark_prepared(f, S, label, nonnegative=nonnegative)
    return Relation(f.name or label, f.vars, stats, df=df)


_SEEN: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Rows of the DataFrames queries have read into the driver, by DataFrame object: asking a
DataFrame read before needs no size estimate (an estimate costs about 50 ms)."""


def _fits(f: Factor) -> bool | None:
    """Whether ``f`` fits in the driver, from what is known without a job (None: unknown)."""
    if f._trusted and f._stats is not None:
        return f._stats.rows <= LOCAL_ROWS
    seen = _SEEN.get(f._source) if f._source is not None else None
    if seen is not None:
        return seen <= LOCAL_ROWS
    rows, size = size_hint(f.df)
    if rows is not None:
        return rows <= LOCAL_ROWS
    if size is None or size >= UNKNOWN_BYTES:
        return None
    return size <= LOCAL_BYTES


def collect_factor(f: Factor, S: Semiring, label: str, *, consolidate: bool = True) -> Table:
    """The rows of a distributed factor as a checked local table (one job).

    With ``consolidate`` False equal keys are left for the kernel's index to
    ⊕-combine (its sort finds them; the table says ``unique=False``).
    """
    if f._has_value:
        check_value_type(f.df, S, label)
    return _collected(f, f.df.toArrow(), S, label, consolidate=consolidate)


def _collected(f: Factor, at: pa.Table, S: Semiring, label: str, *, consolidate: bool) -> Table:
    """The Arrow rows read from ``f`` as a local table (checked unless ``f`` is trusted)."""
    if f._source is not None:
        _SEEN[f._source] = at.num_rows
    check = not (f._trusted and f._semiring is S)
    unique = f._trusted and f._consolidated
    return arrow_to_table(at, f.vars, S, label, check=check, unique=unique, consolidate=consolidate)


def arrow_to_table(
    at: pa.Table,
    vars_: tuple[str, ...],
    S: Semiring,
    label: str,
    *,
    check: bool,
    unique: bool,
    consolidate: bool = True,
) -> Table:
    """An Arrow table (key columns, then optionally ``value``) as a local table for ``S``.

    With ``check``, null keys and annotations outside the semiring raise
    ValueError; unless ``unique``, equal keys are ⊕-combined (or, without
    ``consolidate``, left for the kernel's index).  Zeros are dropped.
    """
    from faq.factor import _typed_values, check_annotations

    names = at.column_names
    keys = [c for c in names if c != VALUE]
    cols = []
    for i, (k, v) in enumerate(zip(keys, vars_, strict=True)):
        col = at.column(k)
        if col.null_count:
            raise ValueError(
                f"{label}: key column {v!r} (position {i}) has {col.null_count} null "
                "value(s); keys must not be null"
            )
        a = col.to_numpy()
        cols.append(a.astype(np.int64) if a.dtype.kind in "iu" else a)
    o = local_ops(S)
    values = None
    if VALUE in names:
        col = at.column(VALUE)
        if col.null_count and check:
            raise ValueError(
                f"{label}: column {VALUE!r} has {col.null_count} annotation(s) that are not "
                f"values of the {S.name!r} semiring (domain: {S.domain}), e.g. None"
            )
        values = _typed_values(col.to_numpy(zero_copy_only=False), S, label)
        if check:
            check_annotations(values, S, label)
    table = Table(vars_, tuple(cols), values, unique=unique)
    zeros = values is not None and not o.nonzero(values).all()
    if (not unique and consolidate) or zeros:
        table = group_reduce(table, vars_, o)
    return table


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
    with); ``(None, None)`` when they cannot be had.
    """
    try:
        text = df.sparkSession.sql("EXPLAIN COST SELECT * FROM {t}", t=df).collect()[0][0]
    except Exception:  # an old Spark, a Connect server without it: no estimate
        return None, None
    m = _STATS.search(text)
    if m is None:
        return None, None
    size = float(m.group(1)) * _UNITS.get(m.group(2), 1)
    rows = float(m.group(3)) if m.group(3) else None
    return rows, size


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


def spark_prepared(
    f: Factor, S: Semiring, label: str, *, nonnegative: str | None = None
) -> tuple[DataFrame, RelationStats]:
    """Checked, typed, ⊕-consolidated DataFrame for ``S``, plus statistics (one Spark job).

    Raises ValueError naming ``label`` and the column for null keys or
    annotations outside the semiring, and, with ``nonnegative`` (the reason, for the
    message), for negative annotations after repeated keys are ⊕-combined (a negative
    row whose key sums to a non-negative value is accepted, as in the driver).  A
    trusted factor with statistics runs no job (but one for ``nonnegative``).
    """
    from pyspark.sql import functions as F

    o = sops.ops(S)
    keys = list(f.vars)
    df = f.df
    clean = f._trusted and (f._semiring is S or f._semiring is None)
    negative = F.col(VALUE).cast(o.type) < 0
    if clean and f._stats is not None:
        if not f._consolidated:
            df = sops.reduce(S, df, keys, VALUE)
        if nonnegative and f._has_value:
            _refuse_negative(df, negative, label, nonnegative)
        return df, f._stats
    aggs = [F.count(F.lit(1)).alias("__rows")]
    for i, k in enumerate(keys):
        aggs.append(F.sum(F.when(F.col(k).isNull(), 1).otherwise(0)).alias(f"__null{i}"))
        aggs.append(F.approx_count_distinct(k).alias(f"__d{i}"))
    if f._has_value and not clean:
        bad = ~F.coalesce(o.valid(F.col(VALUE).cast(o.type)), F.lit(False))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias("__bad"))
    if nonnegative and f._has_value:
        aggs.append(F.min(F.when(negative, F.col(VALUE).cast(o.type))).alias("__neg"))
    row: dict[str, Any] = df.agg(*aggs).collect()[0].asDict()
    for i, k in enumerate(keys):
        if row[f"__null{i}"]:
            raise ValueError(
                f"{label}: key column {k!r} (position {i}) has {row[f'__null{i}']} null "
                "value(s); keys must not be null"
            )
    if row.get("__bad"):
        sample = (
            df.filter(~F.coalesce(o.valid(F.col(VALUE).cast(o.type)), F.lit(False)))
            .select(VALUE)
            .limit(1)
            .collect()[0][0]
        )
        raise ValueError(
            f"{label}: column {VALUE!r} has {row['__bad']} annotation(s) that are not "
            f"values of the {S.name!r} semiring (domain: {S.domain}), e.g. {sample!r}"
        )
    consolidated = clean and f._consolidated
    if row.get("__neg") is not None and consolidated:
        raise ValueError(f"{label}: {nonnegative}, found {row['__neg']!r}")
    rows = int(row["__rows"])
    stats = RelationStats(
        rows, tuple(min(rows, int(row[f"__d{i}"])) for i in range(len(keys))), exact=False
    )
    if consolidated:
        return df, stats
    if f._has_value:
        typed = df.select(*keys, F.col(VALUE).cast(o.type).alias(VALUE))
    else:
        typed = df.select(*keys, sops.constant(S, S.one).alias(VALUE))
    out = sops.reduce(S, typed, keys, VALUE).filter(sops.nonzero(S, F.col(VALUE)))
    if row.get("__neg") is not None:  # a negative row: refused if its key's ⊕-sum is too
        _refuse_negative(out, negative, label, nonnegative)
    return out, stats


def _refuse_negative(df: DataFrame, negative: Any, label: str, why: str | None) -> None:
    """ValueError (``why``, naming ``label``) when a row of the consolidated ``df`` is
    negative: repeated keys are ⊕-combined before annotations are judged, as in the
    driver."""
    rows = df.filter(negative).select(VALUE).limit(1).collect()
    if rows:
        raise ValueError(f"{label}: {why}, found {rows[0][0]!r}")
