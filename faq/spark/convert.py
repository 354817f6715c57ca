"""Arrow <-> Table: Spark rows into the kernel's numpy tables and back.

:func:`arrow_to_table` reads the Arrow batches a DataFrame is collected as
(keys checked for nulls, annotations typed and checked for the semiring,
repeated keys ⊕-combined); :func:`to_spark` turns a local table into a
DataFrame whose ``value`` column has the semiring's Spark type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.table import Table, distinct_rows
from faq.kernel.values import check_annotations, key_column, spark_type, typed_values
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["arrow_to_table", "to_spark"]


def arrow_to_table(
    at: pa.Table,
    vars_: tuple[str, ...],
    S: Semiring,
    label: str,
    *,
    check: bool,
    unique: bool,
    consolidate: bool = True,
) -> Table:
    """An Arrow table (key columns, then optionally ``value``) as a local table for ``S``.

    With ``check``, null keys and annotations outside the semiring raise
    ValueError; unless ``unique``, equal keys are ⊕-combined (or, without
    ``consolidate``, left for the kernel's index).  Zeros are dropped.
    """
    names = at.column_names
    keys = [c for c in names if c != VALUE]
    cols = []
    for i, (k, v) in enumerate(zip(keys, vars_, strict=True)):
        col = at.column(k)
        if col.null_count:
            raise ValueError(
                f"{label}: key column {v!r} (position {i}) has {col.null_count} null "
                "value(s); keys must not be null"
            )
        cols.append(key_column(col.to_numpy(), label, v, i))
    o = local_ops(S)
    values = None
    if VALUE in names:
        col = at.column(VALUE)
        if col.null_count and check:
            raise ValueError(
                f"{label}: column {VALUE!r} has {col.null_count} null annotation(s); an "
                f"annotation is a value of the {S.name!r} semiring (domain: {S.domain})"
            )
        values = typed_values(col.to_numpy(zero_copy_only=False), S, label, str(col.type))
        if check:
            check_annotations(values, S, label)
    table = Table(vars_, tuple(cols), values, unique=unique)
    zeros = values is not None and not o.nonzero(values).all()
    if (not unique and consolidate) or zeros:
        table = distinct_rows(table, o)
    return table


def to_spark(t: Table, S: Semiring) -> DataFrame:
    """A local table as a Spark DataFrame (through Arrow), ``value`` of the semiring's type."""
    import pyarrow as pa

    from faq.session import get_spark

    spark = get_spark()
    vtype = sops.ops(S).type
    names = [*t.vars, VALUE]
    types = [spark_type(c) for c in t.cols] + [vtype]
    schema = ", ".join(f"`{n}` {ty}" for n, ty in zip(names, types, strict=True))
    values = t.values if t.values is not None else local_ops(S).ones(np.ones(t.rows, np.int64))
    arrays = [*t.cols, values]
    if t.rows == 0:
        return spark.createDataFrame([], schema)
    if vtype in ("bigint", "double", "boolean") and all(ty != "string" for ty in types[:-1]):
        tbl: pa.Table = pa.table({n: np.asarray(a) for n, a in zip(names, arrays, strict=True)})
        return spark.createDataFrame(tbl.to_pandas(), schema=schema)
    rows = list(zip(*(_py(a) for a in arrays), strict=True))
    return spark.createDataFrame(rows, schema=schema)


def _py(a: np.ndarray) -> list[Any]:
    return a.tolist()
