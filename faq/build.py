"""Source records from what users give: Spark and pandas DataFrames, arrays, dicts, tagged rows.

Each function checks its input (names, shapes, types, values when a semiring
is given) and returns the :class:`faq.source.Source` a :class:`faq.Factor`
holds; the ``Factor`` constructors and class methods are thin wrappers around
them.  Errors name ``label`` (``"factor 'E'"``) and what is wrong.
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
    raw_pandas,
)
from faq.rule import VALUE
from faq.session import is_spark_dataframe
from faq.source import Source
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = [
    "array_source",
    "check_vars",
    "dict_source",
    "frame_source",
    "is_pandas",
    "is_spark_dataframe",
    "label_of",
    "pandas_source",
    "plain_array_source",
    "tagged_frame",
    "trusted_source",
    "unchecked_read",
]


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


# -- Spark DataFrames ---------------------------------------------------------------------
def frame_source(
    df: DataFrame, vars: Sequence[str] | None, semiring: str | Semiring | None, label: str
) -> Source:
    """An unchecked ``df`` source: key columns bound to ``vars`` by position, then ``value``."""
    if not is_spark_dataframe(df):
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
    vars_ = check_vars(keys if vars is None else vars, label)
    if len(vars_) != len(keys):
        raise ValueError(
            f"{label}: {len(vars_)} variables {vars_!r} but the DataFrame has "
            f"{len(keys)} key columns {keys!r} (columns found: {cols!r}; "
            f"the annotation column must be named {VALUE!r})"
        )
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
    """An array of plain numbers or booleans, kept unchecked (read per query's semiring)."""
    vars_ = _array_vars(arr, vars, label)
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{label}: NaN is not a value of any semiring")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{label}: an array of numbers or booleans, got {arr.dtype}")
    return Source.unchecked_array(arr, vars_)


def array_source(arr: np.ndarray, vars: Sequence[str], S: Semiring, label: str) -> Source:
    """The non-zero entries of a dense array as local rows of ``S`` (each entry checked)."""
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
    raw = raw_pandas(pdf, keys, vars_, label)
    if semiring is None:
        return Source.unchecked_rows(raw)
    S = semirings.get(semiring)
    table, stats = checked_table(raw, S, label)
    return Source.local(table, S, stats)


def unchecked_read(src: Source, S: Semiring, label: str) -> Source:
    """An ``array`` or ``raw`` source checked for ``S``: local rows, zeros dropped."""
    if src.array is not None:
        return array_source(src.array, src.vars, S, label)
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
