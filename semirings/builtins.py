"""Built-in semirings, each a named constant with a native Spark path.

=============  ==================  ========  =====  ==========  =========
name           domain              ⊕         ⊗      0           1
=============  ==================  ========  =====  ==========  =========
counting       ℕ (int64)           +         ×      0           1
integer        ℤ (int64), ring     +         ×      0           1
real           finite floats, ring +         ×      0.0         1.0
boolean        {False, True}       or        and    False       True
max-product    [0, ∞) floats       max       ×      0.0         1.0
min-plus       (-∞, +∞] floats     min       +      +∞          0.0
max-plus       [-∞, +∞) floats     max       +      -∞          0.0
log            [-∞, +∞) floats     logaddexp +      -∞          0.0
=============  ==================  ========  =====  ==========  =========

Spark column helpers import :mod:`pyspark` only when called, so importing
:mod:`semirings` never starts a JVM.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any

from semirings.core import Semiring, SparkOps, canonical

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

INF = math.inf
_INT64_MAX = 2**63 - 1


def _f():  # the pyspark.sql.functions module, imported on first use
    from pyspark.sql import functions

    return functions


# -- plain-value helpers ------------------------------------------------------------
def logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) computed without overflow.

    >>> logaddexp(0.0, 0.0) == math.log(2), logaddexp(1000.0, -math.inf)
    (True, 1000.0)
    """
    hi, lo = (a, b) if a >= b else (b, a)
    if hi == -INF:
        return -INF
    return hi + math.log1p(math.exp(lo - hi))


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_float(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and not math.isnan(x)


# -- column helpers -------------------------------------------------------------------
def _c_add(a: Column, b: Column) -> Column:
    return a + b


def _c_mul(a: Column, b: Column) -> Column:
    return a * b


def _c_neg(a: Column) -> Column:
    return -a


def _c_or(a: Column, b: Column) -> Column:
    return a | b


def _c_and(a: Column, b: Column) -> Column:
    return a & b


def _c_max(a: Column, b: Column) -> Column:
    return _f().greatest(a, b)


def _c_min(a: Column, b: Column) -> Column:
    return _f().least(a, b)


def _c_logaddexp(a: Column, b: Column) -> Column:
    f = _f()
    hi = f.greatest(a, b)
    lo = f.least(a, b)
    return f.when(hi == f.lit(-INF), f.lit(-INF)).otherwise(hi + f.log1p(f.exp(lo - hi)))


def _agg_sum(c: Column) -> Column:
    return _f().sum(c)


def _agg_max(c: Column) -> Column:
    return _f().max(c)


def _agg_min(c: Column) -> Column:
    return _f().min(c)


def _reduce_logsumexp(df: DataFrame, keys: list[str], value: str) -> DataFrame:
    """⊕-reduce with logaddexp: shift each group by its max, so exp never overflows."""
    from pyspark.sql import Window

    f = _f()
    w = Window.partitionBy(*keys) if keys else Window.partitionBy(f.lit(0))
    shifted = df.withColumn("__m", f.max(value).over(w))
    term = f.when(f.col("__m") == f.lit(-INF), f.lit(0.0)).otherwise(
        f.exp(f.col(value) - f.col("__m"))
    )
    out = shifted.groupBy(*keys).agg(f.max("__m").alias("__m"), f.sum(term).alias("__s"))
    result = f.when(f.col("__m") == f.lit(-INF), f.lit(-INF)).otherwise(
        f.col("__m") + f.log(f.col("__s"))
    )
    return out.select(*keys, result.alias(value))


def _valid_nonneg_int(c: Column) -> Column:
    return c.isNotNull() & (c >= 0)


def _valid_not_null(c: Column) -> Column:
    return c.isNotNull()


def _valid_finite(c: Column) -> Column:
    f = _f()
    return c.isNotNull() & ~f.isnan(c) & (f.abs(c) != f.lit(INF))


def _valid_nonneg_finite(c: Column) -> Column:
    return _valid_finite(c) & (c >= 0)


def _valid_not_minus_inf(c: Column) -> Column:
    f = _f()
    return c.isNotNull() & ~f.isnan(c) & (c != f.lit(-INF))


def _valid_not_plus_inf(c: Column) -> Column:
    f = _f()
    return c.isNotNull() & ~f.isnan(c) & (c != f.lit(INF))


# -- the built-ins ----------------------------------------------------------------------
COUNTING = Semiring(
    name="counting",
    zero=0,
    one=1,
    add=operator.add,
    mul=operator.mul,
    contains=lambda x: _is_int(x) and 0 <= x <= _INT64_MAX,
    spark=SparkOps("bigint", mul=_c_mul, add=_c_add, agg=_agg_sum, valid=_valid_nonneg_int),
    domain="non-negative 64-bit integers",
)
"""(ℕ, +, ×, 0, 1): counts, e.g. the number of triangles."""

INTEGER = Semiring(
    name="integer",
    zero=0,
    one=1,
    add=operator.add,
    mul=operator.mul,
    neg=operator.neg,
    contains=lambda x: _is_int(x) and -(2**63) <= x <= _INT64_MAX,
    spark=SparkOps(
        "bigint", mul=_c_mul, add=_c_add, agg=_agg_sum, valid=_valid_not_null, neg=_c_neg
    ),
    domain="64-bit integers",
)
"""(ℤ, +, ×, 0, 1): a ring; Z-set weights."""

REAL = Semiring(
    name="real",
    zero=0.0,
    one=1.0,
    add=operator.add,
    mul=operator.mul,
    neg=operator.neg,
    contains=lambda x: _is_float(x) and math.isfinite(x),
    spark=SparkOps("double", mul=_c_mul, add=_c_add, agg=_agg_sum, valid=_valid_finite, neg=_c_neg),
    domain="finite floats",
)
"""(ℝ, +, ×, 0, 1) on finite doubles: a ring; sparse linear algebra."""

BOOLEAN = Semiring(
    name="boolean",
    zero=False,
    one=True,
    add=operator.or_,
    mul=operator.and_,
    idempotent=True,
    contains=lambda x: isinstance(x, bool),
    spark=SparkOps("boolean", mul=_c_and, add=_c_or, agg=_agg_max, valid=_valid_not_null),
    domain="booleans",
)
"""({False, True}, or, and): reachability, existence."""

MAX_PRODUCT = Semiring(
    name="max-product",
    zero=0.0,
    one=1.0,
    add=max,
    mul=operator.mul,
    idempotent=True,
    contains=lambda x: _is_float(x) and math.isfinite(x) and x >= 0,
    spark=SparkOps("double", mul=_c_mul, add=_c_max, agg=_agg_max, valid=_valid_nonneg_finite),
    domain="finite non-negative floats",
)
"""([0, ∞), max, ×, 0, 1): Viterbi, most likely explanation."""

MIN_PLUS = Semiring(
    name="min-plus",
    zero=INF,
    one=0.0,
    add=min,
    mul=operator.add,
    idempotent=True,
    contains=lambda x: _is_float(x) and x != -INF,
    spark=SparkOps("double", mul=_c_add, add=_c_min, agg=_agg_min, valid=_valid_not_minus_inf),
    domain="floats other than -inf (+inf is zero)",
)
"""((-∞, +∞], min, +, +∞, 0): tropical; shortest paths."""

MAX_PLUS = Semiring(
    name="max-plus",
    zero=-INF,
    one=0.0,
    add=max,
    mul=operator.add,
    idempotent=True,
    contains=lambda x: _is_float(x) and x != INF,
    spark=SparkOps("double", mul=_c_add, add=_c_max, agg=_agg_max, valid=_valid_not_plus_inf),
    domain="floats other than +inf (-inf is zero)",
)
"""([-∞, +∞), max, +, -∞, 0): longest paths, log-space Viterbi."""

LOG = Semiring(
    name="log",
    zero=-INF,
    one=0.0,
    add=logaddexp,
    mul=operator.add,
    contains=lambda x: _is_float(x) and x != INF,
    spark=SparkOps(
        "double",
        mul=_c_add,
        add=_c_logaddexp,
        reduce=_reduce_logsumexp,
        valid=_valid_not_plus_inf,
    ),
    domain="floats other than +inf (-inf is zero)",
)
"""([-∞, +∞), logaddexp, +, -∞, 0): sums of probabilities kept in log space."""

BUILTINS: tuple[Semiring, ...] = (
    COUNTING,
    INTEGER,
    REAL,
    BOOLEAN,
    MAX_PRODUCT,
    MIN_PLUS,
    MAX_PLUS,
    LOG,
)
for _S in BUILTINS:
    canonical(_S.name, _S)
