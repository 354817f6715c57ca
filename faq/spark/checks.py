"""Checks of relations kept in Spark: types, nulls, semiring values and statistics in one job.

:func:`spark_prepared` checks a DataFrame (null keys, annotations outside the
semiring, negative annotations where a query needs non-negative ones) and
gathers its row and distinct counts in a single aggregation job;
:func:`size_hint` reads Spark's own size estimate without running anything.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from faq.kernel.stats import RelationStats
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from faq.source import Source

__all__ = ["check_value_type", "size_hint", "spark_prepared"]

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
    from pyspark.sql import functions as F

    o = sops.ops(S)
    keys = list(src.vars)
    df = src.df
    if df is None:
        raise ValueError(f"{label}: only a source held in Spark is checked there ({src.form})")
    clean = src.checked is S
    negative = F.col(VALUE).cast(o.type) < 0
    if clean and src.stats is not None:
        if not src.consolidated and (consolidate or nonnegative):
            df = sops.reduce(S, df, keys, VALUE)
        if nonnegative and src.has_value:
            _refuse_negative(df, negative, label, nonnegative)
        return df, src.stats, bool(src.consolidated or consolidate or nonnegative)
    aggs = [F.count(F.lit(1)).alias("__rows")]
    for i, k in enumerate(keys):
        aggs.append(F.sum(F.when(F.col(k).isNull(), 1).otherwise(0)).alias(f"__null{i}"))
        aggs.append(F.approx_count_distinct(k).alias(f"__d{i}"))
    if src.has_value and not clean:
        bad = ~F.coalesce(o.valid(F.col(VALUE).cast(o.type)), F.lit(False))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias("__bad"))
    if nonnegative and src.has_value:
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
    consolidated = clean and src.consolidated
    if row.get("__neg") is not None and consolidated:
        raise ValueError(f"{label}: {nonnegative}, found {row['__neg']!r}")
    rows = int(row["__rows"])
    stats = RelationStats(
        rows, tuple(min(rows, int(row[f"__d{i}"])) for i in range(len(keys))), exact=False
    )
    if consolidated:
        return df, stats, True
    if src.has_value:
        typed = df.select(*keys, F.col(VALUE).cast(o.type).alias(VALUE))
    else:
        typed = df.select(*keys, sops.constant(S, S.one).alias(VALUE))
    if not consolidate and row.get("__neg") is None:
        return typed, stats, False  # the caller ⊕-combines repeated keys where it must
    out = sops.consolidate(S, typed, keys, VALUE)
    if row.get("__neg") is not None:  # a negative row: refused if its key's ⊕-sum is too
        _refuse_negative(out, negative, label, nonnegative)
    return out, stats, True


def _refuse_negative(df: DataFrame, negative: Any, label: str, why: str | None) -> None:
    """ValueError (``why``, naming ``label``) when a row of the consolidated ``df`` is
    negative: repeated keys are ⊕-combined before annotations are judged, as in the
    driver."""
    rows = df.filter(negative).select(VALUE).limit(1).collect()
    if rows:
        raise ValueError(f"{label}: {why}, found {rows[0][0]!r}")
