"""Factors: K-relations held as numpy arrays in the driver or as Spark DataFrames.

A factor binds key columns to variables by position, plus an annotation
column named ``value`` holding semiring values.  Absent tuples have
annotation zero; two rows with the same key mean the ⊕ of their annotations;
a relation without a ``value`` column has annotation one on every row (handy
for edge lists).

A factor is *local* (its rows are numpy arrays in the driver: built with
:meth:`Factor.from_numpy`, :meth:`Factor.from_dict`, :meth:`Factor.from_pandas`,
or computed by a query that ran locally) or *distributed* (a Spark
DataFrame).  Both work everywhere: :attr:`Factor.df` turns a local factor into
a DataFrame on first use, and queries collect small DataFrames to run them
with the local kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import Table, group_reduce
from faq.kernel.values import (
    check_members,
    checked_table,
    key_array,
    key_type,
    numpy_values,
    pandas_table,
    plain_semiring,
    raw_pandas,
    scalar_value,
)
from faq.rule import VALUE
from faq.spark.convert import to_spark
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

    from faq.kernel.keyed import KeyedTable

__all__ = ["Factor", "RelationStats"]


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


def _array_vars(arr: np.ndarray, vars_: Sequence[str], label: str) -> tuple[str, ...]:
    """The variables of an array, one per dimension."""
    out = _check_vars(vars_, label)
    if arr.ndim != len(out):
        raise ValueError(
            f"{label}: array has {arr.ndim} dimensions {arr.shape} but {len(out)} variables {out!r}"
        )
    return out


def _label(name: str | None) -> str:
    return f"factor {name!r}" if name else "factor"


class Factor:
    """A relation annotated with semiring values: local numpy arrays or a Spark DataFrame.

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

    Notes
    -----
    A DataFrame given this way is checked (null keys, annotations outside
    the semiring) and consolidated (duplicate keys ⊕-combined) when a query
    first uses it.  :meth:`trusted` skips both for data known to be clean.

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
    ) -> None:
        from pyspark.sql import DataFrame as SparkDataFrame

        label = _label(name)
        if not isinstance(df, SparkDataFrame) and not _is_connect_dataframe(df):
            raise TypeError(f"{label}: expected a Spark DataFrame, got {type(df).__name__}")
        cols = list(df.columns)
        if len(set(cols)) != len(cols):
            raise ValueError(f"{label}: DataFrame columns {cols!r} repeat a name")
        folded = [c.casefold() for c in cols]
        if len(set(folded)) != len(folded):
            same = sorted({c for c in cols if folded.count(c.casefold()) > 1})
            raise ValueError(
                f"{label}: DataFrame columns {same!r} differ only in case; Spark column names "
                "are case-insensitive, so rename one of them"
            )
        keys = [c for c in cols if c != VALUE]
        has_value = VALUE in cols
        vars_ = _check_vars(keys if vars is None else vars, label)
        if len(vars_) != len(keys):
            raise ValueError(
                f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
                f"{len(keys)} key columns {keys!r} (columns found: {cols!r}; "
                f"the annotation column must be named {VALUE!r})"
            )
        self._init(vars_, semiring, name, has_value)
        if cols == [*vars_, *([VALUE] if has_value else [])]:
            self._df = df  # already in shape: no select (each costs JVM round trips)
        else:
            selected = [df[k].alias(v) for k, v in zip(keys, vars_, strict=True)]
            if has_value:
                selected.append(df[VALUE])
            self._df = df.select(*selected)
        self._source = df

    def _init(
        self, vars_: tuple[str, ...], semiring: str | Semiring | None, name: str | None, value: bool
    ) -> None:
        self._vars = vars_
        self._semiring = None if semiring is None else semirings.get(semiring)
        self.name = name
        self._has_value = value
        self._df: DataFrame | None = None
        self._source: DataFrame | None = None  # the DataFrame the caller gave
        self._table: Table | None = None  # local rows: consolidated, valid, zero-free
        self._trusted = False  # the DataFrame is valid for the semiring (no check needed)
        self._consolidated = True  # with _trusted: no key occurs twice
        self._count: int | None = None
        self._stats: RelationStats | None = None
        self._array: np.ndarray | None = None  # from_numpy without a semiring
        self._raw: Table | None = None  # from_pandas without a semiring: checked per query
        self._plain: Semiring | None = None  # how such entries are read by default
        self._by_semiring: dict[int, Factor] = {}
        self._keyed: KeyedTable | None = None  # local rows held as a keyed table (lookups)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def _local(
        cls,
        table: Table,
        semiring: Semiring,
        name: str | None = None,
        stats: RelationStats | None = None,
    ) -> Factor:
        """A local factor from a consolidated, valid, zero-free table (no checks)."""
        f = cls.__new__(cls)
        f._init(table.vars, semiring, name, table.values is not None)
        f._table = table
        f._trusted = True
        f._stats = stats
        return f

    @classmethod
    def from_table(cls, table: Table, semiring: str | Semiring, name: str | None = None) -> Factor:
        """A local factor over ``table`` (consolidated, annotations valid, no zeros).

        Nothing is checked: for tables the engine itself produced (a query's
        result, a keyed table's rows).
        """
        return cls._local(table, semirings.get(semiring), name)

    @classmethod
    def keyed(cls, table: KeyedTable, semiring: str | Semiring, name: str | None = None) -> Factor:
        """A local factor over a :class:`faq.kernel.keyed.KeyedTable` (trusted, no checks).

        The delta rule (:meth:`Query.solve_delta`) reads such a factor by lookups
        in its sorted columns instead of scanning it; everything else sees its
        rows as one table (built once, on first use).
        """
        S = semirings.get(semiring)
        f = cls.__new__(cls)
        f._init(table.vars, S, name, True)
        f._keyed = table
        f._trusted = True
        f._stats = RelationStats(table.rows, (table.rows,) * len(table.vars), exact=False)
        return f

    @classmethod
    def trusted(
        cls,
        data: DataFrame | pd.DataFrame,
        vars: Sequence[str],
        semiring: str | Semiring,
        *,
        rows: int,
        distinct: Sequence[int] | None = None,
        name: str | None = None,
        consolidated: bool = True,
    ) -> Factor:
        """A factor whose data the caller vouches for: nothing is checked, no Spark job runs.

        Parameters
        ----------
        data : pyspark.sql.DataFrame or pandas.DataFrame
            Key columns (bound to ``vars`` by position) and a ``value`` column of
            the semiring's type.  Keys are never null and every annotation is a
            value of ``semiring``.
        vars : sequence of str
            Variable names of the key columns.
        semiring : str or Semiring
            The annotations' semiring.
        rows : int
            Row count (an upper bound is fine; ``0`` means empty).
        distinct : sequence of int, optional
            Distinct values per key column (upper bounds); ``rows`` each by default.
        name : str, optional
            Used in messages.
        consolidated : bool, default True
            True when no key occurs twice.  With False, a query ⊕-combines
            equal keys as it reads the data (a relation stored as a table plus
            a log of changes, say).

        Returns
        -------
        Factor
            Local for a pandas DataFrame, distributed for a Spark one.
        """
        S = semirings.get(semiring)
        label = _label(name)
        vars_ = _check_vars(vars, label)
        dist = (
            tuple(int(d) for d in distinct) if distinct is not None else (int(rows),) * len(vars_)
        )
        if len(dist) != len(vars_):
            raise ValueError(f"{label}: {len(dist)} distinct counts for {len(vars_)} variables")
        stats = RelationStats(int(rows), dist, exact=False)
        if _is_pandas(data):
            table = pandas_table(data, vars_, S, label, check=False)
            if not consolidated:
                table = group_reduce(
                    Table(vars_, table.cols, table.values, unique=False), vars_, local_ops(S)
                )
            return cls._local(table, S, name, table_stats(table))
        f = cls(data, vars_, S, name)
        if not f._has_value:
            raise ValueError(f"{label}: trusted data needs a {VALUE!r} column")
        f._trusted = True
        f._consolidated = consolidated
        f._stats = stats
        return f

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
            label = _label(name)
            vars_ = _array_vars(arr, vars, label)
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                raise ValueError(f"{label}: NaN is not a value of any semiring")
            if arr.dtype.kind not in "biuf":
                raise ValueError(f"{label}: an array of numbers or booleans, got {arr.dtype}")
            f = cls.__new__(cls)
            f._init(vars_, None, name, True)
            f._plain = plain_semiring(arr.dtype)
            f._array = arr
            return f
        return cls._from_array(arr, vars, semirings.get(semiring), name)

    @classmethod
    def _from_array(
        cls, arr: np.ndarray, vars: Sequence[str], S: Semiring, name: str | None
    ) -> Factor:
        label = _label(name)
        vars_ = _array_vars(arr, vars, label)
        values = numpy_values(arr, S, label)
        mask = values != S.zero
        if arr.ndim == 0:
            idx: tuple[np.ndarray, ...] = ()
            kept = values.reshape(1)[np.atleast_1d(mask)]
        else:
            idx = np.nonzero(mask)
            kept = values[mask]
        check_members(kept, S, label)
        table = Table(vars_, tuple(np.asarray(ix, dtype=np.int64) for ix in idx), kept)
        distinct = tuple(
            int(np.count_nonzero(np.any(mask, axis=_other(i, arr.ndim)))) for i in range(arr.ndim)
        )
        return cls._local(table, S, name, RelationStats(int(kept.size), distinct))

    @classmethod
    def tagged(
        cls,
        data: Any,
        vars: Sequence[str] | None = None,
        tag: str = "tag",
        name: str | None = None,
    ) -> Factor:
        """A provenance factor: each row annotated with the symbol in column ``tag``.

        ``data`` is a Spark or pandas DataFrame of key columns plus the ``tag``
        column (strings such as ``"e01"``: an ASCII letter or underscore, then
        ASCII letters, digits or underscores, the whole string; the same test on
        pandas and Spark).  The factor is in the ``"provenance"`` semiring
        (:mod:`semirings.provenance`); rows with the same key add up
        (``e1 + e2``).  Checking the tags costs one Spark job for a Spark
        DataFrame.

        Raises
        ------
        ValueError
            A missing ``tag`` column, a ``value`` column besides it, or a tag
            that is null or not a symbol (the message shows one).
        """
        from semirings.provenance import PROVENANCE, is_symbol, spark_is_symbol

        label = _label(name)
        cols = list(data.columns)
        if tag not in cols:
            raise ValueError(f"{label}: no tag column {tag!r} (columns found: {cols!r})")
        if VALUE in cols and tag != VALUE:
            raise ValueError(
                f"{label}: a tagged relation has no {VALUE!r} column besides its tag column "
                f"{tag!r}: the tag is the annotation"
            )
        keys = [c for c in cols if c != tag]
        vars_ = _check_vars(keys if vars is None else vars, label)
        if len(vars_) != len(keys):
            raise ValueError(
                f"{label}: {len(vars_)} variables {vars_!r} but {len(keys)} key columns {keys!r}"
            )
        if _is_pandas(data):  # the same test as on Spark: a whole string that is a symbol
            tags = data[tag]
            bad = ~tags.map(is_symbol).astype(bool)
            if bad.any():
                raise ValueError(_bad_tag(label, tag, tags[bad].iloc[0], int(bad.sum())))
            pdf = data[keys].copy()
            pdf.columns = list(vars_)
            pdf[VALUE] = tags.to_numpy(dtype=object)
            return cls.from_pandas(pdf, vars_, PROVENANCE, name)
        from pyspark.sql import functions as F

        t = F.col(tag)
        if dict(data.dtypes)[tag] != "string":
            raise ValueError(
                f"{label}: tag column {tag!r} has type {dict(data.dtypes)[tag]}; tags are strings"
            )
        bad = ~spark_is_symbol(t)  # anchored with \A...\z: "e1\n" is refused as on pandas
        row = data.select(
            F.count_if(bad).alias("n"), F.first(F.when(bad, F.struct(t.alias("v"))), True)
        ).first()
        if row[0]:  # the example is wrapped in a struct so a null tag shows as None
            raise ValueError(_bad_tag(label, tag, row[1]["v"], int(row[0])))
        df = data.select(*[F.col(k).alias(v) for k, v in zip(keys, vars_, strict=True)],
                         t.alias(VALUE))  # fmt: skip
        return cls(df, vars_, PROVENANCE, name)

    @classmethod
    def from_dict(
        cls,
        entries: Mapping[tuple[Any, ...], Any],
        vars: Sequence[str],
        semiring: str | Semiring = "real",
        name: str | None = None,
        key_types: Sequence[str] | None = None,
    ) -> Factor:
        """A factor from ``{key tuple: annotation}``.

        Annotations equal to zero are dropped; each is checked against the
        semiring.  ``key_types`` (Spark type names such as ``"bigint"`` or
        ``"string"``) is accepted for compatibility; keys keep their Python
        types (ints, strings).
        """
        S = semirings.get(semiring)
        label = _label(name)
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
                rows.append((k, val))
        o = local_ops(S)
        cols = tuple(key_array([r[0][i] for r in rows]) for i in range(len(vars_)))
        for v, c in zip(vars_, cols, strict=True):
            if (kt := key_type(c)).startswith("mixed"):
                raise ValueError(
                    f"{label}: key column {v!r} holds values of several types ({kt[7:-1]}); "
                    "a key column has one type"
                )
        values = np.empty(len(rows), dtype=o.dtype)
        for i, (_, v) in enumerate(rows):
            values[i] = v
        table = Table(vars_, cols, values)
        return cls._local(table, S, name, table_stats(table))

    @classmethod
    def from_pandas(
        cls,
        pdf: pd.DataFrame,
        vars: Sequence[str] | None = None,
        semiring: str | Semiring | None = None,
        name: str | None = None,
    ) -> Factor:
        """A local factor from a pandas DataFrame: key columns, then optionally ``value``.

        Null keys and annotations outside the semiring raise ValueError naming
        the column; duplicate keys are ⊕-combined and zeros dropped.  Without
        ``semiring`` the rows are checked by each query against its own.
        """
        label = _label(name)
        keys = [c for c in pdf.columns if c != VALUE]
        vars_ = _check_vars(keys if vars is None else vars, label)
        if len(vars_) != len(keys):
            raise ValueError(
                f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
                f"{len(keys)} key columns {keys!r}"
            )
        raw = raw_pandas(pdf, keys, vars_, label)
        if semiring is not None:
            S = semirings.get(semiring)
            table, stats = checked_table(raw, S, label)
            return cls._local(table, S, name, stats)
        f = cls.__new__(cls)
        f._init(vars_, None, name, raw.values is not None)
        f._raw = raw
        f._plain = plain_semiring(raw.values.dtype) if raw.values is not None else semirings.REAL
        return f

    def for_semiring(self, semiring: str | Semiring, name: str | None = None) -> Factor:
        """This factor as annotations of ``semiring``.

        A factor made from an array or a pandas DataFrame without a semiring
        is checked for ``semiring`` (and its zeros dropped); any other factor
        is returned as it is when it has no semiring or this one, and
        re-checked against ``semiring`` when its own has the same zero.

        Raises
        ------
        ValueError
            An entry is not a value of ``semiring``, or the factor holds
            values of a semiring with another zero.
        """
        S = semirings.get(semiring)
        label = name or self.name
        if self._array is not None or self._raw is not None:
            hit = self._by_semiring.get(id(S))
            if hit is None:
                if self._array is not None:
                    hit = Factor._from_array(self._array, self._vars, S, label)
                else:
                    assert self._raw is not None
                    table, stats = checked_table(self._raw, S, _label(label))
                    hit = Factor._local(table, S, label, stats)
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
        if self._table is not None:  # same zero: values re-checked
            table, stats = checked_table(self._table, S, _label(label))
            return Factor._local(table, S, label, stats)
        return Factor(self.df, self._vars, S, name=label)

    def validated(
        self, semiring: str | Semiring, name: str | None = None, *, local: bool = True
    ) -> Factor:
        """This factor checked for ``semiring``, consolidated and counted: a trusted factor.

        Null keys and annotations outside the semiring raise ValueError naming
        ``name`` (or the factor's name) and the column; duplicate keys are
        ⊕-combined.  The result is local when the rows fit in the driver (see
        :mod:`faq.inputs`) and ``local`` is True; otherwise a Spark factor whose
        consolidation is part of its plan.  One Spark job either way (none
        for a local factor).
        """
        from faq.inputs import prepare

        S = semirings.get(semiring)
        label = name or self.name
        f = self.for_semiring(S, label)
        rel = prepare(f, S, _label(label), local=local)
        if rel.table is not None:
            return Factor._local(rel.table, S, label, rel.stats)
        assert rel.df is not None
        out = Factor(rel.df, self._vars, S, label)
        out._trusted = True
        out._stats = rel.stats
        return out

    def renamed(self, vars: Sequence[str]) -> Factor:
        """The same factor with its variables (key columns) renamed, by position."""
        vars_ = _check_vars(vars, self._label())
        if len(vars_) != len(self._vars):
            raise ValueError(f"{self._label()}: {len(vars_)} names for {len(self._vars)} variables")
        t = self._local_table(required=False)
        if t is not None:
            table = Table(vars_, t.cols, t.values, t.unique)
            return Factor._local(table, self._semiring_or_plain(), self.name, self._stats)
        out = Factor(
            self.df.toDF(*vars_, *([VALUE] if self._has_value else [])),
            vars_,
            self._semiring,
            self.name,
        )
        out._trusted, out._consolidated, out._stats = self._trusted, self._consolidated, self._stats
        return out

    def selected(self, equal: Mapping[int, Any]) -> Factor:
        """The rows whose key column ``i`` equals ``equal[i]``, without those columns.

        Keys are compared as they are (never cast): the caller checks that each
        value has its column's type (:meth:`faq.Query.solve` does).  A Spark
        factor stays in Spark (a filter in its plan, statistics gathered again);
        a null key equals no value, so its row is not selected.
        """
        keep = [i for i in range(len(self._vars)) if i not in equal]
        vars_ = tuple(self._vars[i] for i in keep)
        t = self._local_table(required=False)
        if t is not None:
            mask = np.ones(t.rows, dtype=bool)
            for i, c in equal.items():
                mask &= t.cols[i] == c
            rows = np.flatnonzero(mask)
            values = t.values[rows] if t.values is not None else None
            table = Table(vars_, tuple(t.cols[i][rows] for i in keep), values, unique=t.unique)
            return Factor._local(table, self._semiring_or_plain(), self.name)
        from pyspark.sql import functions as F

        cols = [F.col("`" + v.replace("`", "``") + "`") for v in self._vars]
        df = self.df
        for i, c in equal.items():
            df = df.filter(cols[i] == F.lit(c))
        df = df.select(*[cols[i] for i in keep], *([F.col(VALUE)] if self._has_value else []))
        out = Factor(df, vars_, self._semiring, self.name)
        out._trusted, out._consolidated = self._trusted, self._consolidated
        return out

    # -- basic properties ----------------------------------------------------------------
    @property
    def vars(self) -> tuple[str, ...]:
        """The variables, in key-column order."""
        return self._vars

    @property
    def df(self) -> DataFrame:
        """The DataFrame: one column per variable, then ``value`` (when the factor has one).

        A local factor is turned into a DataFrame (through Arrow) on first use.
        """
        if self._df is None:
            self._df = to_spark(self._local_table(), self._semiring_or_plain())
        return self._df

    @property
    def key_types(self) -> tuple[str, ...]:
        """Spark SQL types of the key columns (any integer type reads as ``bigint``)."""
        t = self._local_table(required=False)
        if t is not None:
            return tuple(key_type(c) for c in t.cols)
        from pyspark.sql import types as T

        schema = self.df.schema
        return tuple(
            "bigint"
            if isinstance(schema[v].dataType, T.IntegralType)
            else schema[v].dataType.simpleString()
            for v in self._vars
        )

    @property
    def semiring(self) -> Semiring | None:
        """The semiring of the annotations, when known."""
        return self._semiring

    @property
    def has_value(self) -> bool:
        """False for a plain relation (every row annotated with one)."""
        return self._has_value

    @property
    def is_local(self) -> bool:
        """True when the rows are numpy arrays in the driver (no Spark job to read them)."""
        return self._local_table(required=False) is not None

    @property
    def stats(self) -> RelationStats | None:
        """Row and distinct counts, when known without running a Spark job."""
        if self._stats is None and self._table is not None:
            self._stats = table_stats(self._table)
        return self._stats

    def __repr__(self) -> str:
        s = f", semiring={self._semiring.name!r}" if self._semiring else ""
        n = f"{self.name!r}, " if self.name else ""
        where = "local" if self.is_local else "spark"
        return f"Factor({n}vars={self._vars!r}{s}, {where})"

    def _label(self) -> str:
        return _label(self.name)

    def _semiring_or_plain(self) -> Semiring:
        return self._semiring or self._plain or semirings.REAL

    def _local_table(self, required: bool = True) -> Table | None:
        if self._table is not None:
            return self._table
        if self._keyed is not None:
            self._table = self._keyed.table()
            return self._table
        if self._array is not None or self._raw is not None:
            return self.for_semiring(self._semiring_or_plain())._table
        if required:
            raise AssertionError("not a local factor")
        return None

    # -- results ------------------------------------------------------------------------------
    def to_table(self) -> Table:
        """The rows as a :class:`faq.kernel.Table` (collects a distributed factor)."""
        t = self._local_table(required=False)
        if t is not None:
            return t
        from faq.inputs import collect_factor

        return collect_factor(self, self._semiring_or_plain(), self._label())

    #: With ``solve(witness=True)``: a pandas frame of the head columns, one column
    #: per bound variable (a witness) and ``value``; otherwise None.
    witness_frame: Any = None

    def witnesses(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """Per head key, an assignment of the bound variables attaining its value.

        Only for a Factor returned by ``Query.solve(..., witness=True)``; see
        :mod:`faq.witness`.

        Raises
        ------
        ValueError
            The Factor was not solved with ``witness=True``.
        """
        w = self.witness_frame
        if w is None:
            raise ValueError("this Factor has no witnesses: solve it with witness=True")
        bound = [c for c in w.columns if c not in self.vars and c != "value"]
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in w.itertuples(index=False, name=None):
            rec = dict(zip(w.columns, row, strict=True))
            key = tuple(scalar_value(rec[v]) for v in self.vars)
            out[key] = {v: scalar_value(rec[v]) for v in bound}
        return out

    def to_dict(self) -> dict[tuple[Any, ...], Any]:
        """``{key tuple: annotation}`` (⊕-combined; collects a distributed factor).

        A factor with no variables maps ``()`` to its value.
        """
        if self._semiring is None and not self.is_local and self._has_value:
            raise ValueError(
                f"{self._label()} has no semiring to combine duplicate keys; "
                "create it with semiring="
            )
        t = self.to_table()
        S = self._semiring_or_plain()
        values = [S.one] * t.rows if t.values is None else t.values.tolist()
        if not t.vars:
            return {(): values[-1]} if values else {}
        keys = zip(*(c.tolist() for c in t.cols), strict=True)
        return dict(zip(keys, values, strict=True))

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame: one column per variable, then ``value``.

        Rows are sorted by key (first variable first), whichever backend computed
        the factor, so the output is the same from run to run; the index is
        ``0 .. n-1``.  Collects a distributed factor (⊕-combining repeated keys).
        """
        import pandas as pd

        t = self.to_table()
        data = {v: c for v, c in zip(t.vars, t.cols, strict=True)}
        S = self._semiring_or_plain()
        data[VALUE] = (
            t.values if t.values is not None else local_ops(S).ones(np.ones(t.rows, dtype=np.int64))
        )
        pdf = pd.DataFrame(data)
        if not t.vars or t.rows < 2:
            return pdf
        return pdf.sort_values(list(t.vars), kind="stable", ignore_index=True)

    def to_numpy(self, shape: Sequence[int] | None = None) -> np.ndarray:
        """A dense array indexed by the (non-negative integer) keys; absent entries are zero.

        ``shape`` defaults to one more than the largest key on each axis.  A factor
        with no variables (a query with an empty head) gives a 0-d array holding its
        value (the semiring's zero when it has no row).
        """
        S = self._semiring_or_plain()
        t = self.to_table()
        n = len(self._vars)
        for c in t.cols:
            if c.dtype.kind not in "iu" or (len(c) and c.min() < 0):
                bad = c[0] if c.dtype.kind not in "iu" else c.min()
                raise ValueError(
                    f"{self._label()}: to_numpy needs non-negative integer keys, found {bad!r}"
                )
        if shape is None:
            shape = tuple(int(c.max()) + 1 if len(c) else 0 for c in t.cols)
        shape = tuple(int(s) for s in shape)
        if len(shape) != n:
            raise ValueError(f"{self._label()}: shape {shape} has {len(shape)} axes, expected {n}")
        for c, s in zip(t.cols, shape, strict=True):
            if len(c) and int(c.max()) >= s:
                raise ValueError(f"{self._label()}: key {int(c.max())} lies outside shape {shape}")
        dtype = {"boolean": bool, "bigint": np.int64}.get(S.spark_type or "", np.float64)
        if not S.has_native_spark and S.spark_type not in ("boolean", "bigint", "double"):
            dtype = object
        arr = np.full(shape, S.zero, dtype=dtype)
        values = t.values if t.values is not None else np.full(t.rows, S.one, dtype=dtype)
        if n == 0:  # one row at most (the table is consolidated): index () holds it
            if len(values):
                arr[()] = values[-1]
            return arr
        arr[tuple(t.cols)] = values
        return arr

    def scalar(self) -> Any:
        """The value of a factor with no variables (the semiring zero when it has no row)."""
        if self._vars:
            raise ValueError(
                f"{self._label()} has variables {self._vars!r}; scalar() needs a factor "
                "with none (a query with an empty head)"
            )
        S = self._semiring_or_plain()
        d = self.to_dict()
        return d.get((), S.zero)

    def count(self) -> int:
        """Number of rows (of the stored DataFrame, for a distributed factor).

        A trusted distributed factor counts once and remembers it.
        """
        if self._keyed is not None:
            return self._keyed.rows
        t = self._local_table(required=False)
        if t is not None:
            return t.rows
        if self._trusted and self._stats is not None and self._stats.exact:
            return self._stats.rows
        if self._count is None or not self._trusted:
            self._count = self.df.count()
        return self._count

    def unpersist(self) -> None:
        """Release the cached data behind a query result."""
        if self._df is not None:
            self._df.unpersist()


# -- helpers ----------------------------------------------------------------------------------
def _is_connect_dataframe(df: Any) -> bool:
    return type(df).__module__.startswith("pyspark.sql.connect") and hasattr(df, "columns")


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns")


def _other(i: int, ndim: int) -> tuple[int, ...]:
    return tuple(a for a in range(ndim) if a != i)


def _bad_tag(label: str, tag: str, example: Any, count: int) -> str:
    return (
        f"{label}: tag column {tag!r} has {count} value(s) that are not provenance symbols "
        f"(an ASCII letter or underscore, then ASCII letters, digits or underscores, and "
        f"nothing else), e.g. {example!r}"
    )
