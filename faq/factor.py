"""Factors: K-relations stored as Spark DataFrames.

A factor is a DataFrame whose key columns bind to variables by position, plus
an annotation column named ``value`` holding semiring values.  Absent tuples
have annotation zero; two rows with the same key mean the ⊕ of their
annotations; a relation without a ``value`` column has annotation one on
every row (handy for edge lists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["Factor", "RelationStats"]


@dataclass(frozen=True)
class RelationStats:
    """Cheap statistics of a relation: rows (before ⊕-combining duplicates), distincts per key."""

    rows: int
    distinct: tuple[int, ...]


def _check_vars(vars_: Sequence[str], where: str) -> tuple[str, ...]:
    if isinstance(vars_, str):
        raise TypeError(f"{where}: vars must be a sequence of names, e.g. ('i', 'j'), not a string")
    out = tuple(vars_)
    for v in out:
        if not isinstance(v, str) or not v:
            raise ValueError(f"{where}: variable names must be non-empty strings, got {v!r}")
        if v == VALUE:
            raise ValueError(f"{where}: {VALUE!r} is reserved for the annotation column")
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: variables {out!r} repeat a name")
    return out


class Factor:
    """A relation annotated with semiring values, stored as a Spark DataFrame.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Key columns (every column but ``value``, bound to ``vars`` by position)
        and optionally a ``value`` column.
    vars : sequence of str, optional
        Variable names for the key columns; defaults to the column names.
    semiring : str or Semiring, optional
        The semiring of the annotations, when known (queries bring their own).
    name : str, optional
        Used in error messages.

    Examples
    --------
    >>> E = Factor(edges_df, vars=("a", "b"))            # doctest: +SKIP
    >>> E.vars
    ('a', 'b')
    """

    def __init__(
        self,
        df: DataFrame,
        vars: Sequence[str] | None = None,
        semiring: str | Semiring | None = None,
        name: str | None = None,
        *,
        _clean: bool = False,
        _stats: RelationStats | None = None,
    ) -> None:
        from pyspark.sql import DataFrame as SparkDataFrame

        label = f"factor {name!r}" if name else "factor"
        if not isinstance(df, SparkDataFrame):
            raise TypeError(f"{label}: expected a Spark DataFrame, got {type(df).__name__}")
        cols = list(df.columns)
        if len(set(cols)) != len(cols):
            raise ValueError(f"{label}: DataFrame columns {cols!r} repeat a name")
        keys = [c for c in cols if c != VALUE]
        has_value = VALUE in cols
        vars_ = _check_vars(keys if vars is None else vars, label)
        if len(vars_) != len(keys):
            raise ValueError(
                f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
                f"{len(keys)} key columns {keys!r} (columns found: {cols!r}; "
                f"the annotation column must be named {VALUE!r})"
            )
        selected = [df[k].alias(v) for k, v in zip(keys, vars_, strict=True)]
        if has_value:
            selected.append(df[VALUE])
        self._df = df.select(*selected)
        self._vars = vars_
        self._has_value = has_value
        self._semiring = None if semiring is None else semirings.get(semiring)
        self.name = name
        self._clean = _clean
        self._stats = _stats
        self._array: np.ndarray | None = None  # from_numpy without a semiring
        self._plain: Semiring | None = None  # how the array's entries are read then
        self._by_semiring: dict[int, Factor] = {}

    # -- basic properties ----------------------------------------------------------------
    @property
    def vars(self) -> tuple[str, ...]:
        """The variables, in key-column order."""
        return self._vars

    @property
    def df(self) -> DataFrame:
        """The DataFrame: one column per variable, then ``value`` (when the factor has one)."""
        return self._df

    @property
    def semiring(self) -> Semiring | None:
        """The semiring of the annotations, when known."""
        return self._semiring

    @property
    def has_value(self) -> bool:
        """False for a plain relation (every row annotated with one)."""
        return self._has_value

    def __repr__(self) -> str:
        s = f", semiring={self._semiring.name!r}" if self._semiring else ""
        n = f"{self.name!r}, " if self.name else ""
        return f"Factor({n}vars={self._vars!r}{s})"

    def _label(self) -> str:
        return f"factor {self.name!r}" if self.name else "factor"

    def _semiring_or(self, semiring: str | Semiring | None) -> Semiring:
        if semiring is not None:
            return semirings.get(semiring)
        if self._semiring is not None:
            return self._semiring
        raise ValueError(f"{self._label()} has no semiring; pass semiring=")

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_numpy(
        cls,
        matrix: Any,
        vars: Sequence[str],
        semiring: str | Semiring | None = None,
        name: str | None = None,
    ) -> Factor:
        """A factor from a dense array: key columns are the indices, entries the annotations.

        Entries equal to the semiring's zero are dropped (a sparse factor).
        Without ``semiring`` the array's entries are plain numbers: the factor
        drops the entries equal to ``0`` (``False`` for a boolean array) and
        keeps the array, so a query of any semiring (``min-plus``, whose zero
        is ``+inf``, as well as ``real``) uses it with that semiring's zero
        dropped instead, after checking every entry belongs to it.

        >>> A = Factor.from_numpy(np.eye(3), vars=("i", "j"))     # doctest: +SKIP
        >>> A.to_dict()                                            # doctest: +SKIP
        {(0, 0): 1.0, (1, 1): 1.0, (2, 2): 1.0}
        """
        arr = np.asarray(matrix)
        if semiring is None:
            S = semirings.BOOLEAN if arr.dtype == np.bool_ else semirings.REAL
            if np.issubdtype(arr.dtype, np.integer):
                S = semirings.INTEGER
            f = cls._from_array(arr, vars, S, name)
            f._semiring = None
            f._plain = S
            f._array = arr
            f._by_semiring = {}
            return f
        return cls._from_array(arr, vars, semirings.get(semiring), name)

    @classmethod
    def _from_array(
        cls, arr: np.ndarray, vars: Sequence[str], S: Semiring, name: str | None
    ) -> Factor:
        label = f"factor {name!r}" if name else "factor"
        vars_ = _check_vars(vars, label)
        if arr.ndim != len(vars_):
            raise ValueError(
                f"{label}: array has {arr.ndim} dimensions {arr.shape} but {len(vars_)} "
                f"variables {vars_!r}"
            )
        values = _numpy_values(arr, S, label)
        mask = values != S.zero
        if arr.ndim == 0:
            idx: tuple[np.ndarray, ...] = ()
            kept = values.reshape(1)[np.atleast_1d(mask)]
        else:
            idx = np.nonzero(mask)
            kept = values[mask]
        _check_numpy_members(kept, S, label)
        stats = RelationStats(
            rows=int(kept.size),
            distinct=tuple(int(np.unique(ix).size) for ix in idx) if arr.ndim else (),
        )
        columns = {v: np.asarray(ix, dtype=np.int64) for v, ix in zip(vars_, idx, strict=True)}
        columns[VALUE] = kept
        df = _dataframe(columns, [*vars_, VALUE], ["bigint"] * len(vars_) + [sops.ops(S).type])
        return cls(df, vars_, S, name, _clean=True, _stats=stats)

    def for_semiring(self, semiring: str | Semiring, name: str | None = None) -> Factor:
        """This factor as annotations of ``semiring``.

        A factor made by :meth:`from_numpy` without a semiring is rebuilt from
        its array with ``semiring``'s zero dropped; any other factor is
        returned as it is when it has no semiring or this one, and re-checked
        against ``semiring`` when its own has the same zero.

        Raises
        ------
        ValueError
            An entry is not a value of ``semiring``, or the factor holds
            values of a semiring with another zero.
        """
        S = semirings.get(semiring)
        label = name or self.name
        if self._array is not None:
            hit = self._by_semiring.get(id(S))
            if hit is None:
                hit = Factor._from_array(self._array, self._vars, S, label)
                self._by_semiring[id(S)] = hit
            return hit
        own = self._semiring
        if own is None or own is S or not self._has_value:
            return self
        if own.zero != S.zero:
            raise ValueError(
                f"relation {label!r} holds {own.name!r} values (zero {own.zero!r}) but the "
                f"query's semiring is {S.name!r} (zero {S.zero!r}); rebuild the factor with "
                f"semiring={S.name!r}"
            )
        return Factor(self._df, self._vars, S, name=label)  # same zero: values re-checked

    @classmethod
    def from_dict(
        cls,
        entries: Mapping[tuple[Any, ...], Any],
        vars: Sequence[str],
        semiring: str | Semiring = "real",
        name: str | None = None,
        key_types: Sequence[str] | None = None,
    ) -> Factor:
        """A factor from ``{key tuple: annotation}`` (keys of ints unless ``key_types`` says).

        Annotations equal to zero are dropped; each is checked against the semiring.
        """
        S = semirings.get(semiring)
        label = f"factor {name!r}" if name else "factor"
        vars_ = _check_vars(vars, label)
        rows = []
        for key, val in entries.items():
            k = tuple(key) if isinstance(key, tuple) else (key,)
            if len(k) != len(vars_):
                raise ValueError(f"{label}: key {key!r} has {len(k)} parts, expected {len(vars_)}")
            if any(x is None for x in k):
                raise ValueError(f"{label}: key {key!r} contains None")
            S.check_value(val, f"{label}, key {key!r}")
            if not S.is_zero(val):
                rows.append((*k, val))
        types = list(key_types) if key_types is not None else ["bigint"] * len(vars_)
        columns = {c: [r[i] for r in rows] for i, c in enumerate([*vars_, VALUE])}
        df = _dataframe(columns, [*vars_, VALUE], [*types, sops.ops(S).type])
        stats = RelationStats(
            len(rows), tuple(len({r[i] for r in rows}) for i in range(len(vars_)))
        )
        return cls(df, vars_, S, name, _clean=True, _stats=stats)

    # -- preparation for queries -------------------------------------------------------------
    def prepared(self, semiring: Semiring, label: str) -> tuple[DataFrame, RelationStats]:
        """Validated, typed, ⊕-consolidated DataFrame for ``semiring``, plus statistics.

        Raises ValueError naming ``label`` and the column for null keys, a value
        column of the wrong type, or annotations outside the semiring.  Runs one
        Spark job (statistics and checks together) unless the factor is already
        known to be clean.
        """
        from pyspark.sql import functions as F

        S = semiring
        o = sops.ops(S)
        keys = list(self._vars)
        df = self._df
        if self._has_value:
            _check_value_type(df, S, label)
        clean = self._clean and self._semiring is S
        if clean and self._stats is not None:
            return df, self._stats
        aggs = [F.count(F.lit(1)).alias("__rows")]
        for i, k in enumerate(keys):
            aggs.append(F.sum(F.when(F.col(k).isNull(), 1).otherwise(0)).alias(f"__null{i}"))
            aggs.append(F.approx_count_distinct(k).alias(f"__d{i}"))
        if self._has_value and not clean:
            bad = ~F.coalesce(o.valid(F.col(VALUE).cast(o.type)), F.lit(False))
            aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias("__bad"))
        row = df.agg(*aggs).collect()[0].asDict()
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
        stats = RelationStats(
            int(row["__rows"]), tuple(int(row[f"__d{i}"]) for i in range(len(keys)))
        )
        if clean:
            return df, stats
        if self._has_value:
            typed = df.select(*keys, F.col(VALUE).cast(o.type).alias(VALUE))
        else:
            typed = df.select(*keys, F.lit(S.one).cast(o.type).alias(VALUE))
        out = sops.reduce(S, typed, keys, VALUE)
        out = out.filter(sops.nonzero(S, F.col(VALUE)))
        return out, stats

    # -- results ------------------------------------------------------------------------------
    def to_dict(self) -> dict[tuple[Any, ...], Any]:
        """``{key tuple: annotation}`` (⊕-combined; collects the factor to the driver).

        A factor with no variables maps ``()`` to its value.
        """
        df = self._df
        if not self._clean:
            S = self._semiring
            if S is None:
                if self._has_value:
                    raise ValueError(
                        f"{self._label()} has no semiring to combine duplicate keys; "
                        "create it with semiring="
                    )
                return {tuple(r): True for r in df.distinct().collect()}
            df, _ = self.prepared(S, self._label())
        n = len(self._vars)
        out: dict[tuple[Any, ...], Any] = {}
        for r in df.collect():
            out[tuple(r[:n])] = r[n]
        return out

    def to_numpy(self, shape: Sequence[int] | None = None) -> np.ndarray:
        """A dense array indexed by the (non-negative integer) keys; absent entries are zero.

        ``shape`` defaults to one more than the largest key on each axis.
        """
        S = self._semiring or self._plain or semirings.REAL
        entries = self.to_dict()
        n = len(self._vars)
        for key in entries:
            for x in key:
                if not isinstance(x, int | np.integer) or x < 0:
                    raise ValueError(
                        f"{self._label()}: to_numpy needs non-negative integer keys, found {key!r}"
                    )
        if shape is None:
            shape = tuple(max((k[i] for k in entries), default=-1) + 1 for i in range(n))
        shape = tuple(int(s) for s in shape)
        if len(shape) != n:
            raise ValueError(f"{self._label()}: shape {shape} has {len(shape)} axes, expected {n}")
        dtype = {"boolean": bool, "bigint": np.int64}.get(S.spark_type or "", np.float64)
        if not S.has_native_spark and S.spark_type not in ("boolean", "bigint", "double"):
            dtype = object
        arr = np.full(shape, S.zero, dtype=dtype)
        for key, val in entries.items():
            if any(k >= s for k, s in zip(key, shape, strict=True)):
                raise ValueError(f"{self._label()}: key {key!r} lies outside shape {shape}")
            arr[key] = val
        return arr

    def scalar(self) -> Any:
        """The value of a factor with no variables (the semiring zero when it has no row)."""
        if self._vars:
            raise ValueError(
                f"{self._label()} has variables {self._vars!r}; scalar() needs a factor "
                "with none (a query with an empty head)"
            )
        S = self._semiring_or(None)
        d = self.to_dict()
        return d.get((), S.zero)

    def count(self) -> int:
        """Number of rows of the stored DataFrame."""
        if self._clean and self._stats is not None:
            return self._stats.rows
        return self._df.count()

    def unpersist(self) -> None:
        """Release the cached data behind a query result."""
        self._df.unpersist()


# -- helpers ----------------------------------------------------------------------------------
def _numpy_values(arr: np.ndarray, S: Semiring, label: str) -> np.ndarray:
    t = sops.ops(S).type
    if t == "boolean":
        if arr.dtype != np.bool_:
            raise ValueError(f"{label}: semiring {S.name!r} needs a boolean array, got {arr.dtype}")
        return arr
    if t == "bigint":
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{label}: semiring {S.name!r} needs integers, got {arr.dtype}")
        integral = np.issubdtype(arr.dtype, np.integer)
        if not integral and (not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr))):
            raise ValueError(
                f"{label}: semiring {S.name!r} needs integers; the array holds non-integral"
                " or non-finite values"
            )
        return arr.astype(np.int64)
    if t == "double":
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{label}: semiring {S.name!r} needs numbers, got {arr.dtype}")
        return arr.astype(np.float64)
    return arr


def _check_numpy_members(values: np.ndarray, S: Semiring, label: str) -> None:
    """Check every kept annotation is in the semiring (vectorised checks first)."""
    flat = values.reshape(-1)
    if flat.dtype == np.float64 and np.isnan(flat).any():
        raise ValueError(f"{label}: NaN is not a value of the {S.name!r} semiring ({S.domain})")
    for x in np.unique(flat) if flat.dtype != object else flat:
        S.check_value(x.item() if hasattr(x, "item") else x, label)


def _check_value_type(df: DataFrame, S: Semiring, label: str) -> None:
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


def _dataframe(columns: dict[str, Any], names: list[str], types: list[str]) -> DataFrame:
    """A DataFrame from column arrays, through Arrow when pandas is available."""
    from faq.session import get_spark

    spark = get_spark()
    schema = ", ".join(f"`{n}` {t}" for n, t in zip(names, types, strict=True))
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas ships with the install
        pd = None
    if pd is not None and all(t in ("bigint", "double", "boolean") for t in types):
        pdf = pd.DataFrame({n: np.asarray(columns[n]) for n in names})
        if len(pdf):
            return spark.createDataFrame(pdf, schema=schema)
    rows: Iterable[tuple[Any, ...]] = zip(*(_py(columns[n]) for n in names), strict=True)
    return spark.createDataFrame(list(rows), schema=schema)


def _py(col: Any) -> list[Any]:
    if isinstance(col, np.ndarray):
        return col.tolist()
    return list(col)
