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

A factor holds its name and one frozen :class:`faq.source.Source` (:attr:`Factor.source`);
:mod:`faq.build` checks what users give, :mod:`faq.read` reads Spark rows (collect or keep).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.build import (
    array_source,
    check_vars,
    dict_source,
    frame_source,
    is_pandas,
    label_of,
    pandas_source,
    plain_array_source,
    tagged_frame,
    trusted_source,
    unchecked_read,
)
from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import Table, key_sets, renamed
from faq.kernel.values import (
    checked_table,
    dense_array,
    key_type,
    table_dict,
    table_frame,
    witness_dict,
)
from faq.read import collect, read
from faq.rule import VALUE
from faq.source import Source
from faq.spark.convert import to_spark
from faq.spark.ops import key_type as spark_key_type
from faq.spark.ops import sql_name
from faq.witness import Witnesses
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

    from faq.kernel.keyed import KeyedTable

__all__ = ["Factor", "RelationStats", "Source"]


@dataclass(eq=False)
class _Memo:
    """What a factor derived from its source and keeps: caches, never facts about the rows."""

    df: DataFrame | None = None  # local rows as a DataFrame (on the first read of .df)
    table: Table | None = None  # a keyed table's rows as one table (on first use)
    stats: RelationStats | None = None  # a local table's statistics, when the source has none
    count: int | None = None  # the row count of a checked DataFrame (counted once)
    # an array or raw source read for a semiring S: (S, factor) pairs, found by identity
    by_semiring: list[tuple[Semiring, Factor]] = field(default_factory=list)


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

    A factor holds ``name``, its immutable :attr:`source` record and caches of what it
    derived from it (a local factor's DataFrame, an array read per semiring...);
    a result of ``witness=True`` is built with its :class:`faq.witness.Witnesses`.

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
        self._hold(frame_source(df, vars, semiring, label_of(name)), name)

    def _hold(self, source: Source, name: str | None, witnesses: Witnesses | None = None) -> None:
        self.name = name
        self._src = source
        self._memo = _Memo()
        self._witnesses = witnesses

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_source(
        cls, source: Source, name: str | None = None, *, witnesses: Witnesses | None = None
    ) -> Factor:
        """A factor over ``source`` (nothing is checked beyond the record's own rules).

        For rows the engine produced (a query's result, a delta, with the ``witnesses``
        of ``witness=True``); users build factors with the other constructors.
        """
        if not isinstance(source, Source):
            raise TypeError(f"expected a faq.source.Source, got {type(source).__name__}")
        f = cls.__new__(cls)
        f._hold(source, name, witnesses)
        return f

    @classmethod
    def from_table(
        cls,
        table: Table,
        semiring: str | Semiring,
        name: str | None = None,
        *,
        stats: RelationStats | None = None,
    ) -> Factor:
        """A local factor over ``table`` (consolidated, annotations valid, no zeros).

        Nothing is checked: for tables the engine itself produced (a query's
        result, a keyed table's rows).  ``stats`` are its statistics when known.
        """
        return cls.from_source(Source.local(table, semirings.get(semiring), stats), name)

    @classmethod
    def keyed(cls, table: KeyedTable, semiring: str | Semiring, name: str | None = None) -> Factor:
        """A local factor over a :class:`faq.kernel.keyed.KeyedTable` (trusted, no checks).

        The delta rule (:meth:`Query.solve_delta`) reads such a factor by lookups
        in its sorted columns instead of scanning it; everything else sees its
        rows as one table (built once, on first use).
        """
        return cls.from_source(Source.of_keyed(table, semirings.get(semiring)), name)

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
        label = label_of(name)
        src = trusted_source(
            data, vars, S, label, rows=rows, distinct=distinct, consolidated=consolidated
        )
        return cls.from_source(src, name)

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
            return cls.from_source(plain_array_source(arr, vars, label_of(name)), name)
        S = semirings.get(semiring)
        return cls.from_source(array_source(arr, vars, S, label_of(name)), name)

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
        from semirings.provenance import PROVENANCE

        frame, vars_ = tagged_frame(data, vars, tag, label_of(name))
        if is_pandas(frame):
            return cls.from_pandas(frame, vars_, PROVENANCE, name)
        return cls(frame, vars_, PROVENANCE, name)

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
        return cls.from_source(dict_source(entries, vars, S, label_of(name)), name)

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
        return cls.from_source(pandas_source(pdf, vars, semiring, label_of(name)), name)

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
        src = self._src
        if src.array is not None or src.raw is not None:
            kept = self._memo.by_semiring
            hit = next((f for s, f in kept if s is S), None)
            if hit is None:
                hit = Factor.from_source(unchecked_read(src, S, label_of(label)), label)
                kept.append((S, hit))
            return hit
        own = src.semiring
        if own is None or own is S or not src.has_value:
            return self
        if own.zero != S.zero:
            raise ValueError(
                f"relation {label!r} holds {own.name!r} values (zero {own.zero!r}) but the "
                f"query's semiring is {S.name!r} (zero {S.zero!r}); rebuild the factor with "
                f"semiring={S.name!r}"
            )
        t = self.local_table()
        if t is not None:  # same zero: values re-checked
            table, stats = checked_table(t, S, label_of(label))
            return Factor.from_table(table, S, label, stats=stats)
        return Factor(self.df, src.vars, S, name=label)

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
        S = semirings.get(semiring)
        label = name or self.name
        f = self.for_semiring(S, label)
        t = f.local_table()
        if t is not None:
            return Factor.from_table(t, S, label, stats=f.stats or table_stats(t))
        where = label_of(label)
        src = read(f.source, S, where, name=f.name or where, local=local)
        return Factor.from_source(src, label)

    def renamed(self, vars: Sequence[str]) -> Factor:
        """The same factor with its variables (key columns) renamed, by position."""
        vars_ = check_vars(vars, self._label())
        src = self._src
        if len(vars_) != len(src.vars):
            raise ValueError(f"{self._label()}: {len(vars_)} names for {len(src.vars)} variables")
        t = self.local_table()
        if t is not None:
            table = renamed(t, vars_)
            return Factor.from_table(table, src.plain, self.name, stats=src.stats)
        df = self.df.toDF(*vars_, *([VALUE] if src.has_value else []))
        return self._like(frame_source(df, vars_, src.semiring, self._label()), src.stats)

    def selected(self, equal: Mapping[int, Any]) -> Factor:
        """The rows whose key column ``i`` equals ``equal[i]``, without those columns.

        Keys are compared as they are (never cast): the caller checks that each
        value has its column's type (:meth:`faq.Query.solve` does).  A Spark
        factor stays in Spark (a filter in its plan, statistics gathered again);
        a null key equals no value, so its row is not selected.
        """
        src = self._src
        keep = [i for i in range(len(src.vars)) if i not in equal]
        vars_ = tuple(src.vars[i] for i in keep)
        t = self.local_table()
        if t is not None:
            mask = np.ones(t.rows, dtype=bool)
            for i, c in equal.items():
                mask &= t.cols[i] == c
            rows = np.flatnonzero(mask)
            values = t.values[rows] if t.values is not None else None
            table = Table(vars_, tuple(t.cols[i][rows] for i in keep), values, unique=t.unique)
            return Factor.from_table(table, src.plain, self.name)
        from pyspark.sql import functions as F

        cols = [F.col(sql_name(v)) for v in src.vars]
        df = self.df
        for i, c in equal.items():
            df = df.filter(cols[i] == F.lit(c))
        df = df.select(*[cols[i] for i in keep], *([F.col(VALUE)] if src.has_value else []))
        return self._like(frame_source(df, vars_, src.semiring, self._label()), None)

    def _like(self, fresh: Source, stats: RelationStats | None) -> Factor:
        """A factor over the Spark rows ``fresh`` derived from this factor's: what was known
        of these (checked, consolidated) holds for those, with ``stats``."""
        src = self._src
        known = replace(fresh, checked=src.checked, consolidated=src.consolidated, stats=stats)
        return Factor.from_source(known, self.name)

    # -- basic properties ----------------------------------------------------------------
    @property
    def source(self) -> Source:
        """The source record: the rows (in one form) and what is known of them."""
        return self._src

    @property
    def vars(self) -> tuple[str, ...]:
        """The variables, in key-column order."""
        return self._src.vars

    @property
    def df(self) -> DataFrame:
        """The DataFrame: one column per variable, then ``value`` (when the factor has one).

        A local factor is turned into a DataFrame (through Arrow) on first use.
        """
        if self._src.df is not None:
            return self._src.df
        if self._memo.df is None:
            t = self.local_table()
            assert t is not None
            self._memo.df = to_spark(t, self._src.plain)
        return self._memo.df

    @property
    def key_types(self) -> tuple[str, ...]:
        """Spark SQL types of the key columns (any integer type reads as ``bigint``)."""
        t = self.local_table()
        if t is not None:
            return tuple(key_type(c) for c in key_sets(t))
        schema = self.df.schema
        return tuple(spark_key_type(schema[v].dataType) for v in self.vars)

    @property
    def semiring(self) -> Semiring | None:
        """The semiring of the annotations, when known."""
        return self._src.semiring

    @property
    def has_value(self) -> bool:
        """False for a plain relation (every row annotated with one)."""
        return self._src.has_value

    @property
    def is_local(self) -> bool:
        """True when the rows are numpy arrays in the driver (no Spark job to read them)."""
        return self._src.is_local

    @property
    def stats(self) -> RelationStats | None:
        """Row and distinct counts, when known without running a Spark job."""
        src = self._src
        if src.stats is None and src.table is not None:
            if self._memo.stats is None:
                self._memo.stats = table_stats(src.table)
            return self._memo.stats
        return src.stats

    def __repr__(self) -> str:
        S = self.semiring
        s = f", semiring={S.name!r}" if S else ""
        n = f"{self.name!r}, " if self.name else ""
        where = "local" if self.is_local else "spark"
        return f"Factor({n}vars={self.vars!r}{s}, {where})"

    def _label(self) -> str:
        return label_of(self.name)

    def local_table(self) -> Table | None:
        """The rows as a :class:`faq.kernel.Table` when they are in the driver, else None.

        Runs no Spark job.  A keyed table's rows are joined into one table on
        first use; an array or pandas rows given without a semiring are read in
        their own (see :meth:`for_semiring`).
        """
        src = self._src
        if src.table is not None:
            return src.table
        if src.keyed is not None:
            if self._memo.table is None:
                self._memo.table = src.keyed.table()
            return self._memo.table
        if src.array is not None or src.raw is not None:
            return self.for_semiring(src.plain).local_table()
        return None

    # -- results ------------------------------------------------------------------------------
    def to_table(self) -> Table:
        """The rows as a :class:`faq.kernel.Table` (collects a distributed factor)."""
        t = self.local_table()
        if t is not None:
            return t
        return collect(self._src, self._src.plain, self._label())

    @property
    def witness_frame(self) -> pd.DataFrame | None:
        """With ``solve(witness=True)``: a pandas frame of the head columns, one column per
        bound variable (a witness) and ``value``; otherwise None."""
        return self._witnesses.frame if self._witnesses is not None else None

    def witnesses(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """Per head key, an assignment of the bound variables attaining its value.

        Only for a Factor returned by ``solve(..., witness=True)``; see :mod:`faq.witness`.

        Raises
        ------
        ValueError
            The Factor was not solved with ``witness=True``.
        """
        w = self.witness_frame
        if w is None:
            raise ValueError("this Factor has no witnesses: solve it with witness=True")
        return witness_dict(w, self.vars)

    def path(self, key: Any) -> list[tuple[Any, ...]]:
        """The keys from a source to ``key`` along a program answer's witnesses (faq.paths)."""
        if self._witnesses is None or self._witnesses.paths is None:
            raise ValueError("this Factor has no witness paths: solve a program with witness=True")
        return self._witnesses.paths.path(key)

    def to_dict(self) -> dict[tuple[Any, ...], Any]:
        """``{key tuple: annotation}`` (⊕-combined; collects a distributed factor).

        A factor with no variables maps ``()`` to its value.
        """
        if self.semiring is None and not self.is_local and self.has_value:
            raise ValueError(
                f"{self._label()} has no semiring to combine duplicate keys; "
                "create it with semiring="
            )
        return table_dict(self.to_table(), self._src.plain)

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame: one column per variable, then ``value``.

        Rows are sorted by key (first variable first), whichever backend computed
        the factor, so the output is the same from run to run; the index is
        ``0 .. n-1``.  Collects a distributed factor (⊕-combining repeated keys).
        """
        return table_frame(self.to_table(), self._src.plain)

    def to_numpy(self, shape: Sequence[int] | None = None) -> np.ndarray:
        """A dense array indexed by the (non-negative integer) keys; absent entries are zero.

        ``shape`` (non-negative ints, one per variable) defaults to one more than the
        largest key per axis; a key outside it, or another shape, is a ValueError.  With no
        variables (an empty head): a 0-d array of the value (zero when there is no row).
        """
        return dense_array(self.to_table(), self._src.plain, shape, self._label())

    def scalar(self) -> Any:
        """The value of a factor with no variables (the semiring zero when it has no row)."""
        if self.vars:
            raise ValueError(
                f"{self._label()} has variables {self.vars!r}; scalar() needs a factor "
                "with none (a query with an empty head)"
            )
        return self.to_dict().get((), self._src.plain.zero)

    def count(self) -> int:
        """Number of rows (of the stored DataFrame; a trusted one is counted once, remembered)."""
        src = self._src
        if src.keyed is not None:
            return src.keyed.rows
        t = self.local_table()
        if t is not None:
            return t.rows
        if src.checked is not None and src.stats is not None and src.stats.exact:
            return src.stats.rows
        if self._memo.count is None or src.checked is None:
            self._memo.count = self.df.count()
        return self._memo.count

    def unpersist(self) -> None:
        """Release the cached data behind a query result."""
        df = self._src.df if self._src.df is not None else self._memo.df
        if df is not None:
            df.unpersist()
