"""Spark operations for any semiring: the native path, or Python UDFs.

:func:`ops` returns a :class:`~semirings.core.SparkOps` for every semiring.  A
built-in returns its native ops.  A semiring written only as Python functions
gets ops built from UDFs: ⊗ and ⊕ as scalar UDFs, the ⊕-reduction as a
``collect_list`` per group folded by a UDF.  That path is slower but
computes the same thing, so every query runs with every semiring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from semirings.core import Semiring, SparkOps, guarded

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyspark.sql import Column, DataFrame


def ops(semiring: Semiring) -> SparkOps:
    """The Spark side of ``semiring``: native when it has one, UDF-based otherwise.

    The UDF-based ops are made once per semiring object and kept with it
    (:meth:`Semiring.derived`): they go when the semiring goes.
    """
    if semiring.spark is not None:
        return semiring.spark
    return semiring.derived("spark-udf-ops", _udf_ops)


def reduce(semiring: Semiring, df: DataFrame, keys: list[str], value: str) -> DataFrame:
    """⊕-reduce column ``value`` of ``df`` grouped by ``keys`` (all keys when empty: one row)."""
    o = ops(semiring)
    if o.reduce is not None:
        return o.reduce(df, keys, value)
    assert o.agg is not None
    return df.groupBy(*keys).agg(o.agg(df[value]).alias(value))


def constant(semiring: Semiring, value: object) -> Column:
    """The semiring value ``value`` (its zero or one) as a Spark column of the semiring's type.

    A bool, int, float or str is a literal; any other value (a tuple for a
    ``struct<...>`` semiring, a list for an ``array<...>`` one) comes from a
    zero-argument Python UDF, since Spark has no literal of those.
    """
    from pyspark.sql import functions as F

    t = ops(semiring).type
    if value is None or isinstance(value, bool | int | float | str):
        return F.lit(value).cast(t)
    return F.udf(lambda: value, t)()


def consolidate(semiring: Semiring, df: DataFrame, keys: list[str], value: str) -> DataFrame:
    """``df`` with one row per key: column ``value`` ⊕-reduced by ``keys``, zero rows dropped."""
    from pyspark.sql import functions as F

    return reduce(semiring, df, keys, value).filter(nonzero(semiring, F.col(value)))


def python_values(semiring: Semiring, values: np.ndarray) -> np.ndarray:
    """An object array of annotations read from Arrow, as the semiring's own values.

    Arrow reads a ``struct<...>`` value as a dict; a semiring of that type
    holds tuples (what a Spark UDF receives), so each dict becomes the tuple of
    its fields.  Values of any other type are returned as they are.
    """
    return typed_python_values(values, ops(semiring).type)


def typed_python_values(values: np.ndarray, spark_type: str | None) -> np.ndarray:
    """:func:`python_values` given the semiring's Spark type (no Spark session needed: what
    a task calls)."""
    if (spark_type or "").startswith("struct<"):
        for i, x in enumerate(values):
            if isinstance(x, dict):
                values[i] = tuple(x.values())
    return values


def nonzero(semiring: Semiring, c: Column) -> Column:
    """Predicate: the annotation ``c`` is not the semiring zero."""
    if isinstance(semiring.zero, bool):
        return c if semiring.zero is False else ~c
    return c != constant(semiring, semiring.zero)


def _udf_ops(semiring: Semiring) -> SparkOps:
    """UDF-based ops for a semiring of Python functions.

    The UDFs are made on first use, not here: PySpark makes a UDF only with an
    active session, and the local kernel reads ``type`` alone (typing and checking
    local rows), so a user semiring over local data never needs a session.
    """
    t = semiring.spark_type
    if t is None:
        raise ValueError(
            f"semiring {semiring.name!r}: cannot run on Spark: its zero "
            f"{semiring.zero!r} is not a bool, int, float or str; pass spark_type= "
            "to the Semiring"
        )
    S = semiring

    @functools.cache
    def udfs() -> dict[str, Callable[..., Column]]:
        from pyspark.sql import functions as F

        mul, add = guarded(S, "mul"), guarded(S, "add")

        def contains(x):  # no annotations: PySpark would read them as a pandas UDF's types
            try:
                return bool(S.contains(x))  # type: ignore[misc]
            except Exception:
                return False

        out = {
            "mul": F.udf(lambda a, b: None if a is None or b is None else mul(a, b), t),
            "add": F.udf(lambda a, b: None if a is None or b is None else add(a, b), t),
            "fold": F.udf(lambda xs: functools.reduce(add, xs, S.zero), t),
            "valid": F.udf(contains, "boolean"),
        }
        if S.neg is not None:
            neg_fn = guarded(S, "neg")
            out["neg"] = F.udf(lambda a: None if a is None else neg_fn(a), t)
        return out

    def red(df: DataFrame, keys: list[str], value: str) -> DataFrame:
        from pyspark.sql import functions as F

        grouped = df.groupBy(*keys).agg(F.collect_list(value).alias(value))
        return grouped.select(*keys, udfs()["fold"](F.col(value)).alias(value))

    neg_udf = None
    if S.neg is not None:

        def neg_udf(c: Column) -> Column:
            return udfs()["neg"](c)

    return SparkOps(
        type=t,
        mul=lambda a, b: udfs()["mul"](a, b),
        add=lambda a, b: udfs()["add"](a, b),
        valid=lambda c: c.isNotNull() & udfs()["valid"](c),
        reduce=red,
        neg=neg_udf,
    )
