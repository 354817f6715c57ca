"""Built-in semirings, each a named constant declaring its Spark and numpy operations.

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

Each built-in declares, beside its Python functions, everything the engine
needs to run it fast: :class:`~semirings.core.SparkOps` (column expressions, a
native aggregate, a validity predicate, whether Spark's order is its order),
:class:`~semirings.core.NumpyOps` (dtype, vectorised ⊗, segment ⊕, n-fold ⊕ of
one, zero test, validity test), :class:`~semirings.core.AggregateOps` (its
operator names for queries' ``aggregates``), :class:`~semirings.core.LibraryOps`
(its GraphBLAS semiring and monoid, its numpy ufuncs, whether BLAS computes it and
whether its values are 64-bit integers that libraries wrap) and, where it has them,
its ring completion and presence flag.  ``log`` declares no library operations:
GraphBLAS has no logaddexp monoid built in, and a user-defined one compiles for
about 6 s in every process (see :mod:`faq.kernel.runners`).

:data:`COUNTING_MAX` (``"max-times"``, ℕ with max and ×) is the engine's semiring
for ``max`` aggregates in counting and integer queries; it is not registered by name.

Spark column helpers import :mod:`pyspark` only when called, so importing
:mod:`semirings` never starts a JVM.  64-bit integer semirings raise
OverflowError in numpy where Spark's ANSI mode would, instead of wrapping
around; the check is exact (a float estimate flags candidates, Python
integers decide).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from semirings.core import AggregateOps, LibraryOps, NumpyOps, Semiring, SparkOps, canonical

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

INF = math.inf
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NEAR = float(2**63) * (1 - 1e-9)  # float estimates at or above this are checked exactly


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


# -- numpy helpers ----------------------------------------------------------------------
def _exact_range(name: str, what: str, exact: list[int]) -> None:
    if any(not _INT64_MIN <= x <= _INT64_MAX for x in exact):
        raise OverflowError(f"{name!r} {what} overflowed 64-bit integers")


def _int64_mul(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Elementwise int64 product raising OverflowError (naming ``name``) past 64 bits."""

    def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        with np.errstate(over="ignore"):
            out = a * b
        approx = np.abs(a.astype(np.float64) * b.astype(np.float64))
        near = np.flatnonzero(approx >= _NEAR)
        if len(near):
            a_n, b_n = np.broadcast_to(a, out.shape), np.broadcast_to(b, out.shape)
            _exact_range(name, "product", [int(a_n[i]) * int(b_n[i]) for i in near])
        return out

    return mul


def _int64_sumat(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Segment sums of int64 values raising OverflowError (naming ``name``) past 64 bits."""

    def reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=np.int64)
        with np.errstate(over="ignore"):
            out = np.add.reduceat(v, starts)
        approx = np.add.reduceat(np.abs(v.astype(np.float64)), starts)
        near = np.flatnonzero(approx >= _NEAR)
        if len(near):
            ends = np.append(starts[1:], len(v))
            _exact_range(name, "sum", [sum(int(x) for x in v[starts[i] : ends[i]]) for i in near])
        return out

    return reduceat


def _ufunc_at(add: np.ufunc, dtype: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda values, starts: add.reduceat(np.asarray(values, dtype=dtype), starts)


def _logaddexp_at(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """logaddexp over segments, shifted by each segment's maximum (no overflow, no NaN)."""
    v = np.asarray(values, dtype=np.float64)
    hi = np.maximum.reduceat(v, starts)
    counts = np.diff(np.append(starts, len(v)))
    shift = np.repeat(np.where(hi == -np.inf, 0.0, hi), counts)
    total = np.add.reduceat(np.exp(v - shift), starts)
    with np.errstate(divide="ignore"):
        return np.where(hi == -np.inf, -np.inf, hi + np.log(total))


def _each(value: Any, dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """n-fold ⊕ of one for an idempotent ⊕: one, whatever n."""
    return lambda counts: np.full(len(counts), value, dtype=dtype)


def _counts_as(dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """n-fold ⊕ of one for ⊕ = +: n itself."""
    return lambda counts: np.asarray(counts, dtype=dtype)


def _log_counts(counts: np.ndarray) -> np.ndarray:
    """n-fold ⊕ of one (0.0) in log: log(n)."""
    return np.log(np.asarray(counts, dtype=np.float64))


def _not(zero: Any) -> Callable[[np.ndarray], np.ndarray]:
    return lambda v: np.asarray(v) != zero


def _every(v: np.ndarray) -> np.ndarray:
    return np.ones(len(v), dtype=bool)


def _np_nonneg(v: np.ndarray) -> np.ndarray:
    return v >= 0


def _np_finite(v: np.ndarray) -> np.ndarray:
    return np.isfinite(v)


def _np_nonneg_finite(v: np.ndarray) -> np.ndarray:
    return np.isfinite(v) & (v >= 0)


def _np_not_minus_inf(v: np.ndarray) -> np.ndarray:
    return ~np.isnan(v) & (v != -np.inf)


def _np_not_plus_inf(v: np.ndarray) -> np.ndarray:
    return ~np.isnan(v) & (v != np.inf)


def _int64_numpy(name: str, valid: Callable[[np.ndarray], np.ndarray]) -> NumpyOps:
    """Sum-product on int64 (counting, integer), overflow-checked."""
    return NumpyOps(
        np.int64, _int64_mul(name), _int64_sumat(name), _counts_as(np.int64), _not(0), valid
    )


def _float_numpy(
    zero: float,
    mul: np.ufunc,
    reduceat: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ones: Callable[[np.ndarray], np.ndarray],
    valid: Callable[[np.ndarray], np.ndarray],
) -> NumpyOps:
    return NumpyOps(np.float64, mul, reduceat, ones, _not(zero), valid)


def _library(
    dtype: Any, semiring: str, add: np.ufunc, mul: np.ufunc, pair: str | None = None
) -> LibraryOps:
    """The library side of a built-in: its GraphBLAS semiring (``"<monoid>_<times>"``),
    its ⊕ and ⊗ ufuncs, and the ``pair`` semiring for factors without annotations."""
    monoid, times = semiring.split("_")
    sums = add is np.add and mul is np.multiply
    return LibraryOps(
        dtype, semiring, monoid, times, add, mul, pair, sums=sums, int64=dtype is np.int64
    )


# -- the built-ins ----------------------------------------------------------------------
INTEGER = Semiring(
    name="integer",
    zero=0,
    one=1,
    add=operator.add,
    mul=operator.mul,
    neg=operator.neg,
    contains=lambda x: _is_int(x) and _INT64_MIN <= x <= _INT64_MAX,
    spark=SparkOps(
        "bigint",
        mul=_c_mul,
        add=_c_add,
        agg=_agg_sum,
        valid=_valid_not_null,
        neg=_c_neg,
        ordered=True,
    ),
    numpy=_int64_numpy("integer", _every),
    aggregates=AggregateOps(
        "sum", "×", others={"max": "max-times"}, nonnegative=frozenset({"max"})
    ),
    library=_library(np.int64, "plus_times", np.add, np.multiply, "plus_pair"),
    domain="64-bit integers",
)
"""(ℤ, +, ×, 0, 1): a ring; Z-set weights."""

COUNTING = Semiring(
    name="counting",
    zero=0,
    one=1,
    add=operator.add,
    mul=operator.mul,
    contains=lambda x: _is_int(x) and 0 <= x <= _INT64_MAX,
    spark=SparkOps(
        "bigint", mul=_c_mul, add=_c_add, agg=_agg_sum, valid=_valid_nonneg_int, ordered=True
    ),
    numpy=_int64_numpy("counting", _np_nonneg),
    aggregates=AggregateOps("sum", "×", others={"max": "max-times"}),
    library=_library(np.int64, "plus_times", np.add, np.multiply, "plus_pair"),
    completion=INTEGER,
    domain="non-negative 64-bit integers",
)
"""(ℕ, +, ×, 0, 1): counts, e.g. the number of triangles; its ring completion is ℤ."""

REAL = Semiring(
    name="real",
    zero=0.0,
    one=1.0,
    add=operator.add,
    mul=operator.mul,
    neg=operator.neg,
    contains=lambda x: _is_float(x) and math.isfinite(x),
    spark=SparkOps(
        "double",
        mul=_c_mul,
        add=_c_add,
        agg=_agg_sum,
        valid=_valid_finite,
        neg=_c_neg,
        ordered=True,
    ),
    numpy=_float_numpy(
        0.0, np.multiply, _ufunc_at(np.add, np.float64), _counts_as(np.float64), _np_finite
    ),
    aggregates=AggregateOps(
        "sum", "×", others={"max": "max-product"}, nonnegative=frozenset({"max"})
    ),
    library=_library(np.float64, "plus_times", np.add, np.multiply, "plus_pair"),
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
    spark=SparkOps(
        "boolean", mul=_c_and, add=_c_or, agg=_agg_max, valid=_valid_not_null, ordered=True
    ),
    numpy=NumpyOps(
        np.bool_,
        np.logical_and,
        _ufunc_at(np.logical_or, bool),
        _each(True, bool),
        lambda v: np.asarray(v, dtype=bool),
        _every,
    ),
    aggregates=AggregateOps("or", "and", aliases=("max",)),
    library=_library(np.bool_, "lor_land", np.logical_or, np.logical_and, "lor_pair"),
    presence=True,
    selective="max",
    tight=True,
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
    spark=SparkOps(
        "double", mul=_c_mul, add=_c_max, agg=_agg_max, valid=_valid_nonneg_finite, ordered=True
    ),
    numpy=_float_numpy(
        0.0,
        np.multiply,
        _ufunc_at(np.maximum, np.float64),
        _each(1.0, np.float64),
        _np_nonneg_finite,
    ),
    aggregates=AggregateOps("max", "×", others={"sum": "real"}),
    library=_library(np.float64, "max_times", np.maximum, np.multiply),
    selective="max",
    tight=True,
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
    spark=SparkOps(
        "double", mul=_c_add, add=_c_min, agg=_agg_min, valid=_valid_not_minus_inf, ordered=True
    ),
    numpy=_float_numpy(
        INF, np.add, _ufunc_at(np.minimum, np.float64), _each(0.0, np.float64), _np_not_minus_inf
    ),
    aggregates=AggregateOps("min", "+"),
    library=_library(np.float64, "min_plus", np.minimum, np.add),
    selective="min",
    tight=True,
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
    spark=SparkOps(
        "double", mul=_c_add, add=_c_max, agg=_agg_max, valid=_valid_not_plus_inf, ordered=True
    ),
    numpy=_float_numpy(
        -INF, np.add, _ufunc_at(np.maximum, np.float64), _each(0.0, np.float64), _np_not_plus_inf
    ),
    aggregates=AggregateOps("max", "+", others={"logsumexp": "log"}),
    library=_library(np.float64, "max_plus", np.maximum, np.add),
    selective="max",
    tight=True,
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
        ordered=True,
    ),
    numpy=_float_numpy(-INF, np.add, _logaddexp_at, _log_counts, _np_not_plus_inf),
    aggregates=AggregateOps("logsumexp", "+", others={"max": "max-plus"}),
    domain="floats other than +inf (-inf is zero)",
)
"""([-∞, +∞), logaddexp, +, -∞, 0): sums of probabilities kept in log space."""

COUNTING_MAX = Semiring(
    name="max-times",
    zero=0,
    one=1,
    add=max,
    mul=operator.mul,
    idempotent=True,
    contains=lambda x: _is_int(x) and 0 <= x <= _INT64_MAX,
    spark=SparkOps(
        "bigint", mul=_c_mul, add=_c_max, agg=_agg_max, valid=_valid_nonneg_int, ordered=True
    ),
    numpy=NumpyOps(
        np.int64,
        _int64_mul("max-times"),
        _ufunc_at(np.maximum, np.int64),
        _each(1, np.int64),
        _not(0),
        _np_nonneg,
    ),
    aggregates=AggregateOps("max", "×"),
    library=_library(np.int64, "max_times", np.maximum, np.multiply),
    selective="max",
    tight=True,
    domain="non-negative 64-bit integers",
)
"""(ℕ, max, ×, 0, 1): the ⊕ of ``max`` aggregates in counting and integer queries."""

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
"""The built-in semirings registered by name (:data:`COUNTING_MAX` is internal)."""


def _register_builtins() -> None:
    for S in (*BUILTINS, COUNTING_MAX):
        canonical(S.name, S)


_register_builtins()
