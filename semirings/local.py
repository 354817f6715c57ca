"""Semiring operations on numpy arrays and pandas groups, for small data in the driver.

The incremental engine evaluates small delta queries in the driver
(:mod:`faq.local`); this module gives it ⊗ of two columns, ⊕ within groups and
the zero test, vectorised for the built-ins and element by element (with the
semiring's own Python functions) for user-defined semirings.

64-bit integer semirings (``counting``, ``integer``) raise OverflowError where
Spark's ANSI mode would, instead of wrapping around:

>>> import numpy as np, semirings
>>> from semirings.local import local_ops
>>> o = local_ops(semirings.INTEGER)
>>> o.mul(np.array([2, 3]), np.array([5, -1])).tolist()
[10, -3]
>>> o.mul(np.array([2**62]), np.array([4]))
Traceback (most recent call last):
...
OverflowError: 'integer' product overflowed 64-bit integers
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from semirings import builtins as B
from semirings.core import Semiring

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["LocalOps", "local_ops"]

_LIMIT = float(2**63)


@dataclass(frozen=True)
class LocalOps:
    """⊗, group-⊕ and the zero test of one semiring on numpy/pandas values."""

    semiring: Semiring
    dtype: object
    mul: Callable[[np.ndarray, np.ndarray], np.ndarray]
    _reduce: Callable[[pd.DataFrame, list[str], str], pd.DataFrame]
    nonzero: Callable[[np.ndarray], np.ndarray]

    def reduce(self, df: pd.DataFrame, keys: Sequence[str], col: str) -> pd.DataFrame:
        """⊕ of ``col`` per distinct ``keys`` (one row for no keys; none for no rows)."""
        if df.empty:
            return df[[*keys, col]].iloc[:0]
        return self._reduce(df, list(keys), col)


def _checked(name: str, what: str, exact: np.ndarray, approx: np.ndarray) -> np.ndarray:
    if approx.size and float(np.max(np.abs(approx))) >= _LIMIT:
        raise OverflowError(f"{name!r} {what} overflowed 64-bit integers")
    return exact


def _int_ops(S: Semiring) -> LocalOps:
    def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        return _checked(S.name, "product", a * b, a.astype(float) * b.astype(float))

    def reduce(df: pd.DataFrame, keys: list[str], col: str) -> pd.DataFrame:
        import pandas as pd

        if not keys:
            v = df[col].to_numpy(dtype=np.int64)
            if not len(v):
                return pd.DataFrame({col: np.array([], dtype=np.int64)})
            total = _checked(S.name, "sum", v.sum(), np.array([np.abs(v.astype(float)).sum()]))
            return pd.DataFrame({col: np.array([total], dtype=np.int64)})
        g = df.groupby(keys, sort=False, as_index=False)[col]
        out = g.sum()
        approx = df[col].abs().astype(float).groupby([df[k] for k in keys], sort=False).sum()
        _checked(S.name, "sum", out[col].to_numpy(), approx.to_numpy())
        return out

    return LocalOps(S, np.int64, mul, reduce, lambda v: np.asarray(v) != 0)


def _grouped(agg: str) -> Callable[[pd.DataFrame, list[str], str], pd.DataFrame]:
    def reduce(df: pd.DataFrame, keys: list[str], col: str) -> pd.DataFrame:
        import pandas as pd

        if not keys:
            if not len(df):
                return pd.DataFrame({col: df[col].iloc[:0]})
            return pd.DataFrame({col: [getattr(df[col], agg)()]})
        return df.groupby(keys, sort=False, as_index=False)[col].agg(agg)

    return reduce


def _logsumexp(df: pd.DataFrame, keys: list[str], col: str) -> pd.DataFrame:
    import pandas as pd

    v = df[col].to_numpy(dtype=float)
    if not keys:
        if not len(v):
            return pd.DataFrame({col: np.array([], dtype=float)})
        hi = v.max()
        total = hi if hi == -np.inf else hi + np.log(np.exp(v - hi).sum())
        return pd.DataFrame({col: [total]})
    by = [df[k] for k in keys]
    hi = df[col].groupby(by, sort=False).transform("max").to_numpy(dtype=float)
    shifted = np.where(hi == -np.inf, 0.0, np.exp(v - np.where(hi == -np.inf, 0.0, hi)))
    tmp = df[keys].copy()
    tmp["__hi"], tmp["__e"] = hi, shifted
    g = tmp.groupby(keys, sort=False, as_index=False)
    out = g.agg(__hi=("__hi", "first"), __e=("__e", "sum"))
    hi_o = out.pop("__hi").to_numpy()
    e_o = out.pop("__e").to_numpy()
    with np.errstate(divide="ignore"):
        out[col] = np.where(hi_o == -np.inf, -np.inf, hi_o + np.log(e_o))
    return out


def _generic(S: Semiring) -> LocalOps:
    umul = np.frompyfunc(S.mul, 2, 1)

    def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(umul(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))

    def fold(values: Sequence[object]) -> object:
        return functools.reduce(S.add, values)

    def reduce(df: pd.DataFrame, keys: list[str], col: str) -> pd.DataFrame:
        import pandas as pd

        if not keys:
            vals = list(df[col])
            return pd.DataFrame({col: [fold(vals)] if vals else []}, dtype=object)
        return df.groupby(keys, sort=False, as_index=False)[col].agg(lambda s: fold(list(s)))

    def nonzero(v: np.ndarray) -> np.ndarray:
        return np.array([x != S.zero for x in v], dtype=bool)

    return LocalOps(S, object, mul, reduce, nonzero)


def local_ops(S: Semiring) -> LocalOps:
    """The driver-side operations of ``S``: vectorised for built-ins, else elementwise."""
    if S is B.COUNTING or S is B.INTEGER:
        return _int_ops(S)
    if S is B.REAL:
        return LocalOps(S, np.float64, np.multiply, _grouped("sum"), lambda v: np.asarray(v) != 0)
    if S is B.BOOLEAN:
        return LocalOps(S, np.bool_, np.logical_and, _grouped("max"), lambda v: np.asarray(v))
    if S is B.MAX_PRODUCT:
        return LocalOps(S, np.float64, np.multiply, _grouped("max"), lambda v: np.asarray(v) != 0)
    if S is B.MIN_PLUS:
        return LocalOps(S, np.float64, np.add, _grouped("min"), lambda v: np.asarray(v) != np.inf)
    if S is B.MAX_PLUS:
        return LocalOps(S, np.float64, np.add, _grouped("max"), lambda v: np.asarray(v) != -np.inf)
    if S is B.LOG:
        return LocalOps(S, np.float64, np.add, _logsumexp, lambda v: np.asarray(v) != -np.inf)
    return _generic(S)
