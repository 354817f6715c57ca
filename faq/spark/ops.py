"""Spark DataFrame operations of the executor: binary joins, aggregation, materialisation.

Binary joins are pairwise equi-joins with ⊗ of annotations, the DataFrame
plan of ``join="binary"`` on Spark (and of the witnesses' back-pointers of a
Spark step).  Joins of steps past the driver run in the compiled kernel, cell by
cell (:mod:`faq.spark.partitioned`); that replaced the Generic Join on
DataFrames (BiGJoin style: a DataFrame of prefixes extended one variable at a
time), which cost ~35 Spark jobs a step and lost to a hand-written Spark SQL
join on every graph measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faq.plan.settings import current
from faq.rule import VALUE, Atom
from faq.spark.tasks import is_connect
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyspark.sql import Column, DataFrame

__all__ = [
    "Frame",
    "aggregate",
    "all_of",
    "atom_frame",
    "binary_join",
    "checkpointed",
    "in_list",
    "isin_literals",
    "key_type",
    "materialize",
    "observation",
    "sql_name",
    "union_all",
    "value_expr",
]


def value_expr(vtype: str) -> str:
    """SQL text of the ``value`` column read as Spark type ``vtype`` (cast to the plain
    types; a nested type of a user semiring's values is read as it is)."""
    value = sql_name(VALUE)
    if vtype in ("bigint", "double", "boolean", "string"):
        value = f"CAST({value} AS {vtype})"
    return f"{value} AS {VALUE}"


def sql_name(name: str) -> str:
    """``name`` as a Spark SQL identifier (in backticks), for expressions given as text.

    A plan built from SQL text (``selectExpr``) costs one Py4J call per expression;
    built from ``Column`` functions it costs several per function.
    """
    return "`" + name.replace("`", "``") + "`"


def key_type(dt: Any) -> str:
    """The Spark SQL type a key column of type ``dt`` is read as: every integer type as
    ``bigint`` (so keys of one variable, or of one column of a check, agree), any other
    type as it is."""
    from pyspark.sql import types as T

    return "bigint" if isinstance(dt, T.IntegralType) else dt.simpleString()


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of every DataFrame of ``frames`` (at least one; columns matched by name)."""
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def small(df: DataFrame, rows: float) -> DataFrame:
    """``df`` with a broadcast hint when ``rows`` (an estimate) is at most the
    ``broadcast_rows`` setting."""
    from pyspark.sql import functions as F

    return F.broadcast(df) if 0 < rows <= current().broadcast_rows else df


@dataclass(frozen=True)
class Frame:
    """A factor during execution: variables and a DataFrame (vars..., value)."""

    vars: tuple[str, ...]
    df: DataFrame
    rows: float = 0.0


def atom_frame(atom: Atom, relation: DataFrame, key_names: Sequence[str]) -> DataFrame:
    """The relation seen through ``atom``: columns renamed to the atom's variables.

    A variable repeated in the atom keeps only rows whose columns agree.
    """
    from pyspark.sql import functions as F

    df = relation
    first: dict[str, str] = {}
    for col, v in zip(key_names, atom.vars, strict=True):
        if v in first:
            df = df.filter(F.col(first[v]) == F.col(col))
        else:
            first[v] = col
    return df.select(*[F.col(c).alias(v) for v, c in first.items()], F.col(VALUE))


def binary_join(frames: Sequence[Frame], S: Semiring, *, broadcast: bool = False) -> Frame:
    """Natural join of ``frames``, in the order given, by pairwise equi-joins with ⊗.

    The caller orders the frames (:func:`faq.plan.physical.join_order`: the
    smallest first, then the smallest sharing a variable).  With ``broadcast``
    (the first frame is small: a delta) the rows joined so far are broadcast to
    every next join, so the other frames are scanned, never shuffled.
    """
    from pyspark.sql import functions as F

    o = sops.ops(S)
    first, *rest = frames
    vars_ = list(first.vars)
    df = first.df.withColumnRenamed(VALUE, "__w0")
    for nxt in rest:
        on = [v for v in nxt.vars if v in vars_]
        if broadcast:
            df, other = F.broadcast(df), nxt.df.withColumnRenamed(VALUE, "__w1")
        else:
            other = small(nxt.df.withColumnRenamed(VALUE, "__w1"), nxt.rows)
        df = df.join(other, on=on, how="inner") if on else df.crossJoin(other)
        vars_ += [v for v in nxt.vars if v not in vars_]
        df = df.select(*vars_, o.mul(F.col("__w0"), F.col("__w1")).alias("__w0"))
    df = df.select(*vars_, F.col("__w0").alias(VALUE))
    return Frame(tuple(vars_), df)


def aggregate(frame: Frame, keep: Sequence[str], S: Semiring) -> DataFrame:
    """⊕-aggregate every variable not in ``keep`` away and drop zero annotations."""
    from pyspark.sql import functions as F

    df = frame.df
    if tuple(keep) != frame.vars:
        df = sops.reduce(S, df.select(*keep, VALUE), list(keep), VALUE)
    return df.filter(sops.nonzero(S, F.col(VALUE))).select(*keep, VALUE)


def materialize(df: DataFrame) -> tuple[DataFrame, int, tuple[int, ...]]:
    """Compute ``df`` once, keep it on the executors, and cut its lineage.

    Returns the materialised DataFrame, its row count and the approximate
    distinct count of each key column, so results reused as inputs carry real
    statistics.  The counts are observed during the checkpoint's own job
    (``DataFrame.observe``); a Spark Connect server sends none with a checkpoint
    (Spark 4.3), and there they take one job after it.  ``localCheckpoint`` rather than
    ``persist``: a later ``unpersist`` of an input would otherwise drop the cached
    data of everything computed from it.
    """
    from pyspark.sql import functions as F

    keys = [c for c in df.columns if c != VALUE]
    figures = {
        "__rows": F.count(F.lit(1)),
        **{f"__d{i}": F.approx_count_distinct(k) for i, k in enumerate(keys)},
    }
    out, got = checkpointed(df, figures)
    return out, int(got["__rows"]), tuple(int(got[f"__d{i}"]) for i in range(len(keys)))


def checkpointed(df: DataFrame, figures: Mapping[str, Column]) -> tuple[DataFrame, dict[str, Any]]:
    """``df`` computed once and ``localCheckpoint``-ed (its lineage cut; a scan of it
    knows no partitioning in Spark 4.3), and the aggregate ``figures`` (name → aggregate
    column) over its rows.

    The figures are observed during the checkpoint's own job (``DataFrame.observe``); a
    Spark Connect server sends none with a checkpoint (Spark 4.3), and there they take
    one job after it.
    """
    columns = [c.alias(name) for name, c in figures.items()]
    seen = observation(df)
    out = df.observe(seen, *columns).localCheckpoint(eager=True)
    try:  # a classic session waits for the checkpoint's job, which has finished
        got = dict(seen.get)
    except Exception:  # nothing observed
        got = {}
    if not all(name in got for name in figures):  # Spark Connect 4.x: no metrics sent
        row = out.agg(*columns).collect()[0]
        got = {name: row[name] for name in figures}
    return out, got


def observation(df: DataFrame) -> Any:
    """A new ``Observation`` of the kind ``df``'s session takes (classic or Spark Connect)."""
    if is_connect(df.sparkSession):
        from pyspark.sql.connect.observation import Observation
    else:
        from pyspark.sql import Observation
    return Observation()


def trace_binary(frames: Sequence[Frame], S: Semiring) -> int:
    """The largest row count among the pairwise joins of ``frames`` joined in the order
    given (counted: one Spark job per join)."""
    return max(binary_join(frames[:k], S).df.count() for k in range(2, len(frames) + 1))


def in_list(column: str, values: np.ndarray, spark_type: str | None = None) -> str:
    """``column IN (v1, v2, ...)`` as SQL text, for integer values or (an object array)
    strings: a parsed list costs one call to the JVM, literals built one by one one
    each.  For a ``bigint`` column (``spark_type``) the integers are written as bigint
    literals (``7L``): plain ones parse as ``int`` where they fit, and Spark's analysis
    then widens each to the column's type (1,000 values: 35 ms a filter, against 10 ms).
    """
    if values.dtype == object:
        text = ", ".join(_string(str(v)) for v in values)
    else:
        suffix = "L" if spark_type == "bigint" else ""
        text = ", ".join(f"{int(v)}{suffix}" for v in values)
    return f"{sql_name(column)} IN ({text})"


def isin_literals(col: str, spark_type: str, values: np.ndarray) -> Column:
    """``col IN values`` for a key column of Spark type ``spark_type``: integer and string
    keys as one parsed list (:func:`in_list`), others as literals."""
    import numpy as np
    from pyspark.sql import functions as F

    if len(values) and spark_type in _INTEGERS:
        return F.expr(in_list(col, np.asarray(values, dtype=np.int64), spark_type))
    if len(values) and spark_type == "string":
        return F.expr(in_list(col, values))
    return F.col(sql_name(col)).isin([v.item() if hasattr(v, "item") else v for v in values])


_INTEGERS = frozenset({"bigint", "int", "smallint", "tinyint"})


def _string(v: str) -> str:
    """A SQL string literal of ``v`` (backslash escapes, as Spark parses them)."""
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def all_of(conds: list[Column]) -> Column:
    """The conjunction of ``conds`` (at least one)."""
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out
