"""Change data capture: a feed of row changes as a delta with a ``_weight`` column.

:func:`changes` turns the rows of a change feed, each marked as an insertion or a
deletion, into the delta format of :class:`incremental.IncrementalView`: the key
columns, the ``value`` column if there is one, and ``_weight`` (+1 adds the row,
-1 retracts it).  It reads two shapes: a Delta Lake change data feed
(``kind="delta"``) and a table with an ``op`` column (``kind="op"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from faq import VALUE

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["DELTA_CHANGE_TYPES", "KINDS", "OP_STRINGS", "WEIGHT", "changes"]

WEIGHT = "_weight"
"""Name of the multiplicity column of a delta: +1 adds a row, -1 retracts it."""

KINDS = ("delta", "op")
"""The change feed shapes :func:`changes` reads."""

CHANGE_TYPE = "_change_type"
"""The column of a Delta Lake change data feed that says what happened to a row."""

COMMIT_METADATA = ("_commit_version", "_commit_timestamp")
"""Columns of a Delta Lake change data feed that :func:`changes` drops."""

DELTA_CHANGE_TYPES = {
    "insert": 1,
    "update_postimage": 1,
    "delete": -1,
    "update_preimage": -1,
}
"""``_change_type`` value -> weight (exact, lower case, as Delta Lake writes them)."""

OP = "op"
"""The column of an ``op`` change feed."""

OP_STRINGS = {"+": 1, "insert": 1, "i": 1, "-": -1, "delete": -1, "d": -1}
"""String ``op`` value, lower-cased -> weight (a string op is compared case-insensitively)."""

OP_INTEGERS = {1: 1, -1: -1}
"""Integer ``op`` value -> weight."""

_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


def changes(df: DataFrame, kind: Literal["delta", "op"], *, check: bool = False) -> DataFrame:
    """The delta that a change feed describes: its rows with a ``_weight`` of +1 or -1.

    Lazy: the result is a ``df.select`` (no Spark job runs unless ``check`` is True).
    Uses only the DataFrame API, so it works on Spark Connect too.

    Parameters
    ----------
    df : DataFrame
        The change feed, one row per changed row.  Its column names must be distinct,
        and it must not have a ``_weight`` column already.
    kind : {"delta", "op"}
        Its shape:

        ``"delta"``
            A Delta Lake change data feed (``spark.read.option("readChangeFeed",
            "true")``).  A string column ``_change_type`` whose values are exactly
            (lower case, as Delta Lake writes them) ``"insert"`` or
            ``"update_postimage"`` (weight +1), ``"delete"`` or ``"update_preimage"``
            (weight -1).  An update is thus a retraction of the old row and an
            insertion of the new one.  The metadata columns ``_commit_version`` and
            ``_commit_timestamp`` are dropped when present.
        ``"op"``
            A column ``op``, either of string type, whose accepted values are
            ``"+"``, ``"insert"``, ``"i"`` (weight +1) and ``"-"``, ``"delete"``,
            ``"d"`` (weight -1), compared case-insensitively (``"INSERT"``, ``"I"``
            and ``"Delete"`` are accepted; surrounding spaces are not); or of integer
            type (tinyint, smallint, int, bigint), whose accepted values are 1
            (weight +1) and -1 (weight -1).
    check : bool, default False
        Also verify the values of the change column: run one Spark job over ``df``
        and raise ValueError if any row holds a value that is not accepted (or
        null).  Without it such rows get a null ``_weight``, which
        :meth:`IncrementalView.step <incremental.IncrementalView.step>` refuses.

    Returns
    -------
    DataFrame
        The columns of ``df`` other than the change column (and, for ``"delta"``,
        the commit metadata), in their order: the key columns and ``value`` if
        present; then ``_weight`` (bigint): +1, -1, or null for a value that is not
        accepted.

    Raises
    ------
    TypeError
        When ``df`` is not a Spark DataFrame.
    ValueError
        Read from the schema, without a Spark job: ``kind`` is not one of
        ``"delta"``, ``"op"``; the change column (``_change_type`` or ``op``) is
        missing; it has a type that is not accepted; ``df`` already has a
        ``_weight`` column or repeats a column name; no key column is left.  With
        ``check=True`` also when a row holds a value that is not accepted; the
        message names the column, one such value and how many rows hold one.

    Examples
    --------
    >>> feed = spark.createDataFrame(                               # doctest: +SKIP
    ...     [(1, 2, "insert", 3), (1, 3, "update_preimage", 4), (1, 3, "update_postimage", 4)],
    ...     "src bigint, dst bigint, _change_type string, _commit_version bigint")
    >>> changes(feed, kind="delta").collect()                         # doctest: +SKIP
    [Row(src=1, dst=2, _weight=1), Row(src=1, dst=3, _weight=-1), Row(src=1, dst=3, _weight=1)]
    >>> ops = spark.createDataFrame(                                # doctest: +SKIP
    ...     [("+", 7, 0.5), ("D", 8, 2.0)], "op string, k bigint, value double")
    >>> changes(ops, kind="op").collect()                             # doctest: +SKIP
    [Row(k=7, value=0.5, _weight=1), Row(k=8, value=2.0, _weight=-1)]
    >>> view.step(E=changes(feed, kind="delta"))                      # doctest: +SKIP
    """
    from pyspark.sql import DataFrame as SparkDataFrame

    where = f"incremental.changes(kind={kind!r})"
    if kind not in KINDS:
        raise ValueError(
            f"incremental.changes: unknown kind {kind!r}; the kinds are "
            + ", ".join(repr(k) for k in KINDS)
        )
    if not isinstance(df, SparkDataFrame):
        top = type(df).__module__.split(".")[0]  # "pandas DataFrame", never a bare "DataFrame"
        kind = type(df).__name__ if top == "builtins" else f"{top} {type(df).__name__}"
        raise TypeError(f"{where}: expects a Spark DataFrame, got {kind}")
    schema = df.schema.fields  # the schema only: no Spark job
    fields = {f.name: f.dataType for f in schema}
    columns = [f.name for f in schema]
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise ValueError(f"{where}: repeated column names {repeated!r}; columns found: {columns!r}")
    clash = [c for c in columns if c.lower() == WEIGHT]
    if clash:
        raise ValueError(
            f"{where}: df already has a {clash[0]!r} column; changes() computes {WEIGHT!r} "
            f"from the change column (a df with {WEIGHT!r} is a delta already: pass it "
            f"to the view as it is)"
        )

    change = CHANGE_TYPE if kind == "delta" else OP
    if change not in fields:
        raise ValueError(f"{where}: no column {change!r}; columns found: {columns!r}")
    dtype = fields[change]
    if kind == "delta":
        if not _is_string(dtype):
            raise ValueError(
                f"{where}: column {change!r} has type {dtype.simpleString()}; "
                f"a change data feed's {change!r} is a string"
            )
        weight, accepted = _delta_weight(_col(change))
        dropped = {change, *COMMIT_METADATA}
    else:
        if _is_string(dtype):
            weight, accepted = _op_string_weight(_col(change))
        elif dtype.simpleString() in _INTEGER_TYPES:
            weight, accepted = _op_integer_weight(_col(change))
        else:
            raise ValueError(
                f"{where}: column {change!r} has type {dtype.simpleString()}; accepted: "
                f"a string type ('+', '-', 'insert', 'delete', 'i', 'd') or an integer type "
                f"({', '.join(_INTEGER_TYPES)}; 1, -1)"
            )
        dropped = {change}

    kept = [c for c in columns if c not in dropped]
    if not [c for c in kept if c != VALUE]:
        raise ValueError(
            f"{where}: no key column is left once {sorted(dropped & set(columns))!r}"
            f"{' and ' + repr(VALUE) if VALUE in kept else ''} are set aside; "
            f"columns found: {columns!r}"
        )

    if check:
        _check_values(df, change, weight, accepted, where)
    return df.select(*[_col(c) for c in kept], weight.cast("bigint").alias(WEIGHT))


def _col(name: str) -> Column:
    """The column named ``name`` exactly (a dot in the name is not a struct field)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _is_string(dtype: DataType) -> bool:
    from pyspark.sql.types import CharType, StringType, VarcharType

    return isinstance(dtype, StringType | CharType | VarcharType)


def _delta_weight(c: Column) -> tuple[Column, str]:
    from pyspark.sql import functions as F

    plus = [v for v, w in DELTA_CHANGE_TYPES.items() if w == 1]
    minus = [v for v, w in DELTA_CHANGE_TYPES.items() if w == -1]
    weight = F.when(c.isin(plus), F.lit(1)).when(c.isin(minus), F.lit(-1))
    return weight, ", ".join(repr(v) for v in DELTA_CHANGE_TYPES)


def _op_string_weight(c: Column) -> tuple[Column, str]:
    from pyspark.sql import functions as F

    plus = [v for v, w in OP_STRINGS.items() if w == 1]
    minus = [v for v, w in OP_STRINGS.items() if w == -1]
    lower = F.lower(c)
    weight = F.when(lower.isin(plus), F.lit(1)).when(lower.isin(minus), F.lit(-1))
    return weight, ", ".join(repr(v) for v in OP_STRINGS) + " (any case)"


def _op_integer_weight(c: Column) -> tuple[Column, str]:
    from pyspark.sql import functions as F

    weight = F.when(c == 1, F.lit(1)).when(c == -1, F.lit(-1))
    return weight, ", ".join(str(v) for v in OP_INTEGERS)


def _check_values(df: DataFrame, change: str, weight: Column, accepted: str, where: str) -> None:
    """Raise ValueError if a row of ``df`` has a ``change`` value without a weight (one job).

    One global aggregate over the rows without a weight, rather than
    ``filter(...).limit(1)``: a limit scans its input in rounds of growing numbers of
    partitions, a job each (two already on four partitions), whereas the aggregate
    reads every partition at once in one job (with adaptive query execution on, the
    small shuffle before the final aggregate is a job of its own).  ``min`` makes
    the value named in the message deterministic.
    """
    from pyspark.sql import functions as F

    c = _col(change)
    row = (
        df.filter(weight.isNull())
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.when(c.isNull(), 1).otherwise(0)).alias("nulls"),
            F.min(c).alias("example"),
        )
        .collect()[0]
    )
    if not row["rows"]:
        return
    example = "null" if row["example"] is None else repr(row["example"])
    nulls = f" ({row['nulls']} of them null)" if row["nulls"] and row["example"] is not None else ""
    raise ValueError(
        f"{where}: column {change!r} holds a value that is not accepted: {example}; "
        f"{row['rows']} row(s) hold such a value{nulls}; accepted: {accepted}"
    )
