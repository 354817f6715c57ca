"""Source records from what users give: Spark and pandas DataFrames, arrays, dicts, tagged rows.

Each function checks its input (names, shapes, types, values when a semiring
is given) and returns the :class:`faq.source.Source` a :class:`faq.Factor`
holds; the ``Factor`` constructors and class methods are thin wrappers around
them.  Errors name ``label`` (``"factor 'E'"``) and what is wrong.

:func:`relation_kind` is the one rule by which a relation given *by name*
(``solve(E=...)``, ``run``, ``explain``, programs, ``solve_delta``, a view's
initial contents and ``step`` deltas) is read: a Spark DataFrame, a pandas
DataFrame, a pyarrow Table or RecordBatch and a numpy *structured* array are
rows (key columns bound to the atom's variables by position, then an optional
``value`` column); a number or 0-d array is a relation without keys; a plain
numpy array of one or more dimensions is ambiguous (a dense tensor, or rows of
keys?) and refused, naming both explicit constructors.  :func:`rows_source`
reads the local kinds (pandas, Arrow, structured) as the pandas rows they are.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import GridTable, Table, group_reduce
from faq.kernel.values import (
    check_key_types,
    check_members,
    checked_table,
    key_array,
    key_type,
    numpy_values,
    pandas_table,
    raw_pandas,
)
from faq.rule import VALUE
from faq.session import is_spark_dataframe
from faq.source import Source
from semirings import Semiring
from semirings.local import has_nan, local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = [
    "ACCEPTED",
    "ROWS",
    "ambiguous_array",
    "array_source",
    "check_columns",
    "check_vars",
    "dict_source",
    "frame_source",
    "is_pandas",
    "is_spark_dataframe",
    "label_of",
    "pandas_source",
    "plain_array_source",
    "relation_kind",
    "rows_source",
    "tagged_frame",
    "trusted_source",
    "type_name",
    "unchecked_read",
]

ROWS = (
    "a Factor, a Spark DataFrame, a pandas DataFrame, a pyarrow Table or RecordBatch, or a "
    "numpy structured array"
)
"""The inputs that are rows (or a factor) wherever they are given, for messages."""
ACCEPTED = (
    "a Factor, a Spark DataFrame, a pandas DataFrame, a pyarrow Table or RecordBatch, a numpy "
    "structured array, or a number (a relation without keys)"
)
"""What a relation given by name may be (see :func:`relation_kind`), for messages."""

_WEIGHT = "_weight"  # a delta's multiplicity column (incremental.deltas.WEIGHT)
_NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating)


def label_of(name: str | None) -> str:
    """How messages name a factor: ``"factor 'E'"``, or ``"factor"`` without a name."""
    return f"factor {name!r}" if name else "factor"


def check_vars(vars_: Sequence[str], where: str) -> tuple[str, ...]:
    """``vars_`` as a tuple of distinct, non-empty names other than ``value``."""
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


def is_pandas(data: Any) -> bool:
    """True for a pandas DataFrame (tested without importing pandas)."""
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns")


# -- what a relation given by name is: the one rule ----------------------------------------
def type_name(obj: Any) -> str:
    """How messages name the type of ``obj``: ``"pandas DataFrame"``, ``"Spark DataFrame"``,
    ``"pyarrow Table"``, ``"numpy array of shape (5, 2)"``, ``"list"``... (never a bare
    ``"DataFrame"``)."""
    if is_spark_dataframe(obj):
        return "Spark DataFrame"
    if isinstance(obj, np.ndarray):
        kind = "structured array" if obj.dtype.names is not None else "array"
        return f"numpy {kind} of shape {obj.shape}"
    t = type(obj)
    top = t.__module__.split(".")[0]
    if top in ("builtins", ""):
        return t.__name__
    return f"{'numpy' if top == 'numpy' else top} {t.__name__}"


def relation_kind(given: Any, label: str) -> str:
    """How a relation given by name is read: the one rule of every entry point.

    A :class:`faq.Factor` is taken as it is and is not this function's business
    (callers test for it first).  Everything else is:

    * ``"spark"``: a Spark DataFrame (classic or Connect);
    * ``"pandas"``, ``"arrow"`` (a pyarrow Table or RecordBatch), ``"structured"``
      (a numpy structured array): rows held in this process;
    * ``"scalar"``: a bool, int or float (Python or numpy) or a 0-d numpy array, the
      annotation of the one tuple of a relation without keys.

    Rows bind their key columns (every column but ``value``, and ``_weight`` in a
    view's changes) to the atom's variables by position; ``value`` holds the
    annotations (one on every row without it).

    Raises
    ------
    TypeError
        A plain (not structured) numpy array of one or more dimensions: it could be
        a dense tensor or rows of keys, so the message names both explicit
        constructors; or anything else (a list, a dict...), naming what is accepted.
    """
    if is_spark_dataframe(given):
        return "spark"
    if is_pandas(given):
        return "pandas"
    if isinstance(given, np.ndarray):
        if given.dtype.names is not None:
            return "structured"
        if given.ndim == 0:
            return "scalar"
        raise TypeError(ambiguous_array(given, label))
    if isinstance(given, _NUMBERS):
        return "scalar"
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(given, pa.Table | pa.RecordBatch):
        return "arrow"
    hint = ""
    if isinstance(given, list | tuple) and given and isinstance(given[0], np.ndarray):
        hint = (
            "; for columns of keys (and annotations), pass a numpy structured array or "
            f"pandas.DataFrame({{'a': keys_a, 'b': keys_b, {VALUE!r}: values}})"
        )
    elif isinstance(given, Mapping):
        hint = "; for {key tuple: annotation}, pass Factor.from_dict(d, vars=(...))"
    raise TypeError(f"{label}: expected {ACCEPTED}; got {type_name(given)}{hint}")


def ambiguous_array(arr: np.ndarray, label: str) -> str:
    """The message refusing a plain numpy array where a relation is given by name."""
    letters = [repr(chr(ord("i") + k)) for k in range(arr.ndim)]
    dense = f"Factor.from_numpy(arr, vars=({', '.join(letters)}{',' if arr.ndim == 1 else ''}))"
    if arr.ndim > 2:
        return (
            f"{label}: a plain numpy array (shape {arr.shape}) is not read as rows here; "
            f"for the dense tensor it is, pass {dense} (its indices are the keys, its "
            "entries the annotations)"
        )
    width = 1 if arr.ndim == 1 else arr.shape[1]
    cols = [repr(chr(ord("a") + k)) for k in range(min(width, 3))] + ["..."] * (width > 3)
    return (
        f"{label}: a plain numpy array (shape {arr.shape}) is ambiguous here: a dense "
        f"tensor or rows of keys? Say which: {dense} for a dense tensor (its indices are "
        f"the keys, its entries the annotations), or pandas.DataFrame(arr, columns=["
        f"{', '.join(cols)}]) (or Factor.from_pandas of it, or a numpy structured array) "
        f"for rows of keys, one column per key, then an optional {VALUE!r} column"
    )


def check_columns(cols: Sequence[Any], arity: int, label: str, atom: str) -> None:
    """Refuse rows whose columns are not ``arity`` keys and an optional ``value``: a
    repeated name, a ``_weight`` column (read in a view's changes only) or the wrong
    number of key columns."""
    names = list(cols)
    repeated = sorted({str(c) for c in names if names.count(c) > 1})
    if repeated:
        raise ValueError(f"{label}: columns {repeated!r} repeat a name (columns: {names!r})")
    if _WEIGHT in names:
        raise ValueError(
            f"{label}: column {_WEIGHT!r} holds multiplicities, which only the changes of an "
            "IncrementalView have (step deltas and initial contents); here a relation is key "
            f"columns and an optional {VALUE!r} column (columns found: {names!r})"
        )
    keys = [c for c in names if c != VALUE]
    if len(keys) != arity:
        raise ValueError(
            f"{label}: atom {atom} takes {arity} key column(s) but the rows have "
            f"{len(keys)}: {keys!r} (columns found: {names!r}; the annotation column must "
            f"be named {VALUE!r})"
        )


def rows_source(given: Any, kind: str, arity: int, label: str, atom: str) -> Source:
    """Local rows given by name (``kind`` from :func:`relation_kind`: ``"pandas"``,
    ``"arrow"``, ``"structured"`` or ``"scalar"``) as an unchecked source, read by each
    query for its semiring as :meth:`faq.Factor.from_pandas` reads a DataFrame: key columns
    by position (the source's variables are ``k0``, ``k1``...), then ``value``.

    An Arrow table and a structured array mean the pandas DataFrame they convert to
    (nulls are refused first, as Spark reads them); a scalar is the one tuple of a
    relation without keys, annotated with it.
    """
    import pandas as pd

    if kind == "scalar":
        if arity:
            raise ValueError(
                f"{label}: a number is the annotation of a relation without keys, but atom "
                f"{atom} takes {arity} key column(s)"
            )
        return plain_array_source(np.asarray(given), (), label)
    if kind == "structured":
        if given.ndim != 1:
            raise ValueError(
                f"{label}: a structured array is rows, one record a row: it must be 1-D, got "
                f"shape {given.shape}"
            )
        names = list(given.dtype.names)
        check_columns(names, arity, label, atom)
        pdf = pd.DataFrame({n: given[n] for n in names}, columns=names)
    elif kind == "arrow":
        names = list(given.column_names)
        check_columns(names, arity, label, atom)
        keys = [c for c in names if c != VALUE]
        for n, col in zip(names, given.columns, strict=True):
            if col.null_count and n == VALUE:
                raise ValueError(
                    f"{label}: column {VALUE!r} has {col.null_count} null annotation(s); an "
                    "annotation is a value of the semiring"
                )
            if col.null_count:
                raise ValueError(
                    f"{label}: key column {n!r} (position {keys.index(n)}) has "
                    f"{col.null_count} null value(s); keys must not be null"
                )
        pdf = given.to_pandas()
    elif kind == "pandas":
        names = list(given.columns)
        check_columns(names, arity, label, atom)
        pdf = given
    else:
        raise ValueError(f"{label}: {kind!r} rows are not local")
    keys = [c for c in names if c != VALUE]
    vars_ = tuple(f"k{i}" for i in range(len(keys)))
    return Source.unchecked_rows(raw_pandas(pdf, keys, vars_, label))


# -- Spark DataFrames ---------------------------------------------------------------------
def frame_source(
    df: DataFrame, vars: Sequence[str] | None, semiring: str | Semiring | None, label: str
) -> Source:
    """An unchecked ``df`` source: key columns bound to ``vars`` by position, then ``value``."""
    if not is_spark_dataframe(df):
        hint = ""
        if is_pandas(df):
            hint = "; for a pandas DataFrame use Factor.from_pandas(df)"
        elif isinstance(df, np.ndarray):
            hint = "; for an array use Factor.from_numpy(arr, vars=(...))"
        raise TypeError(f"{label}: expected a Spark DataFrame, got {type_name(df)}{hint}")
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
    vars_ = check_vars(keys if vars is None else vars, label)
    if len(vars_) != len(keys):
        raise ValueError(
            f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
            f"{len(keys)} key columns {keys!r} (columns found: {cols!r}; "
            f"the annotation column must be named {VALUE!r})"
        )
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}  # no Spark job
    check_key_types(label, [(k, types[k]) for k in keys])
    shaped = df
    if cols != [*vars_, *([VALUE] if has_value else [])]:  # else no select (JVM round trips)
        selected = [df[k].alias(v) for k, v in zip(keys, vars_, strict=True)]
        if has_value:
            selected.append(df[VALUE])
        shaped = df.select(*selected)
    S = None if semiring is None else semirings.get(semiring)
    return Source.spark(shaped, vars_, S, has_value=has_value, original=df)


def trusted_source(
    data: DataFrame | pd.DataFrame,
    vars: Sequence[str],
    S: Semiring,
    label: str,
    *,
    rows: int,
    distinct: Sequence[int] | None,
    consolidated: bool,
) -> Source:
    """A source the caller vouches for (see :meth:`faq.Factor.trusted`): nothing is checked."""
    vars_ = check_vars(vars, label)
    dist = tuple(int(d) for d in distinct) if distinct is not None else (int(rows),) * len(vars_)
    if len(dist) != len(vars_):
        raise ValueError(f"{label}: {len(dist)} distinct counts for {len(vars_)} variables")
    if is_pandas(data):
        table = pandas_table(data, vars_, S, label, check=False)
        if not consolidated:
            table = group_reduce(
                Table(vars_, table.cols, table.values, unique=False), vars_, local_ops(S)
            )
        return Source.local(table, S, table_stats(table))
    src = frame_source(data, vars_, S, label)
    if not src.has_value:
        raise ValueError(f"{label}: trusted data needs a {VALUE!r} column")
    assert src.df is not None
    stats = RelationStats(int(rows), dist, exact=False)
    return Source.spark(
        src.df, vars_, S, checked=True, consolidated=consolidated, stats=stats,
        original=src.original,
    )  # fmt: skip


# -- arrays, dicts, pandas ------------------------------------------------------------------
def _array_vars(arr: np.ndarray, vars_: Sequence[str], label: str) -> tuple[str, ...]:
    """The variables of an array, one per dimension."""
    out = check_vars(vars_, label)
    if arr.ndim != len(out):
        raise ValueError(
            f"{label}: array has {arr.ndim} dimensions {arr.shape} but {len(out)} variables {out!r}"
        )
    return out


def plain_array_source(arr: np.ndarray, vars: Sequence[str], label: str) -> Source:
    """An array of plain numbers or booleans, kept unchecked (read per query's semiring):
    a copy, so that the factor does not change when the caller writes to its array."""
    vars_ = _array_vars(arr, vars, label)
    if arr.dtype.kind == "f" and has_nan(arr):
        raise ValueError(f"{label}: NaN is not a value of any semiring")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{label}: an array of numbers or booleans, got {arr.dtype}")
    own = arr.copy()  # the factor's: writing to the caller's array later leaves it as it was
    own.flags.writeable = False  # and nothing of the engine's writes to it
    return Source.unchecked_array(own, vars_)


def array_source(
    arr: np.ndarray, vars: Sequence[str], S: Semiring, label: str, own: bool = False
) -> Source:
    """The non-zero entries of a dense array as local rows of ``S`` (each entry checked).

    An array without a zero entry becomes a :class:`~faq.kernel.table.GridTable` (its
    cells in row-major order; key columns spelled out only if read).  ``own``: ``arr``
    is a factor's own read-only copy, checked for NaN (:func:`plain_array_source`), which
    the rows may share instead of copying it again."""
    vars_ = _array_vars(arr, vars, label)
    values = numpy_values(arr, S, label)
    if arr.ndim and arr.size and bool((values != S.zero).all()):  # every cell, row-major
        kept = values.reshape(-1)
        if not own and np.may_share_memory(kept, arr):  # the factor's own, not the caller's
            kept = kept.copy()
        check_members(kept, S, label, nan_free=own)
        grid = GridTable(vars_, tuple(np.arange(n, dtype=np.int64) for n in arr.shape), kept)
        return Source.local(grid, S, RelationStats(kept.size, tuple(int(n) for n in arr.shape)))
    mask = values != S.zero
    if arr.ndim == 0:
        idx: tuple[np.ndarray, ...] = ()
        kept = values.reshape(1)[np.atleast_1d(mask)]
    else:
        idx = np.nonzero(mask)
        kept = values[mask]
    check_members(kept, S, label, nan_free=own)
    table = Table(vars_, tuple(np.asarray(ix, dtype=np.int64) for ix in idx), kept)
    distinct = tuple(
        int(np.count_nonzero(np.any(mask, axis=tuple(a for a in range(arr.ndim) if a != i))))
        for i in range(arr.ndim)
    )
    return Source.local(table, S, RelationStats(int(kept.size), distinct))


def dict_source(
    entries: Mapping[tuple[Any, ...], Any], vars: Sequence[str], S: Semiring, label: str
) -> Source:
    """``{key tuple: annotation}`` as local rows of ``S`` (zeros dropped, each value checked)."""
    vars_ = check_vars(vars, label)
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
    return Source.local(table, S, table_stats(table))


def pandas_source(
    pdf: pd.DataFrame, vars: Sequence[str] | None, semiring: str | Semiring | None, label: str
) -> Source:
    """A pandas DataFrame's rows: checked for ``S``, or kept unchecked without one."""
    keys = [c for c in pdf.columns if c != VALUE]
    vars_ = check_vars(keys if vars is None else vars, label)
    if len(vars_) != len(keys):
        raise ValueError(
            f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
            f"{len(keys)} key columns {keys!r}"
        )
    if semiring is None:  # kept as read: the factor's own columns, not views of the frame's
        return Source.unchecked_rows(raw_pandas(pdf, keys, vars_, label, own=True))
    raw = raw_pandas(pdf, keys, vars_, label)
    S = semirings.get(semiring)
    table, stats = checked_table(raw, S, label)
    return Source.local(table, S, stats)


def unchecked_read(src: Source, S: Semiring, label: str) -> Source:
    """An ``array`` or ``raw`` source checked for ``S``: local rows, zeros dropped."""
    if src.array is not None:
        return array_source(src.array, src.vars, S, label, own=True)
    if src.raw is None:
        raise ValueError(f"{label}: a {src.form} source is not read per semiring")
    table, stats = checked_table(src.raw, S, label)
    return Source.local(table, S, stats)


# -- provenance tags ------------------------------------------------------------------------
def tagged_frame(
    data: Any, vars: Sequence[str] | None, tag: str, label: str
) -> tuple[Any, tuple[str, ...]]:
    """Rows tagged with provenance symbols as a frame of key columns (named ``vars``) and
    ``value`` (the tag), of the same kind as ``data`` (pandas or Spark), and the variables.

    See :meth:`faq.Factor.tagged`; checking the tags costs one Spark job for a
    Spark DataFrame.
    """
    from semirings.provenance import is_symbol, spark_is_symbol

    cols = list(data.columns)
    if tag not in cols:
        raise ValueError(f"{label}: no tag column {tag!r} (columns found: {cols!r})")
    if VALUE in cols and tag != VALUE:
        raise ValueError(
            f"{label}: a tagged relation has no {VALUE!r} column besides its tag column "
            f"{tag!r}: the tag is the annotation"
        )
    keys = [c for c in cols if c != tag]
    vars_ = check_vars(keys if vars is None else vars, label)
    if len(vars_) != len(keys):
        raise ValueError(
            f"{label}: {len(vars_)} variables {vars_!r} but {len(keys)} key columns {keys!r}"
        )
    if is_pandas(data):  # the same test as on Spark: a whole string that is a symbol
        tags = data[tag]
        bad = ~tags.map(is_symbol).astype(bool)
        if bad.any():
            raise ValueError(_bad_tag(label, tag, tags[bad].iloc[0], int(bad.sum())))
        pdf = data[keys].copy()
        pdf.columns = list(vars_)
        pdf[VALUE] = tags.to_numpy(dtype=object)
        return pdf, vars_
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
    return df, vars_


def _bad_tag(label: str, tag: str, example: Any, count: int) -> str:
    return (
        f"{label}: tag column {tag!r} has {count} value(s) that are not provenance symbols "
        f"(an ASCII letter or underscore, then ASCII letters, digits or underscores, and "
        f"nothing else), e.g. {example!r}"
    )
