"""The delta rule in one Spark task: the mechanics (what is run there is given).

When the planner puts a delta rule in one task (:func:`faq.plan.physical.delta_in_one_task`),
each relation the changes reach is read once, by a filtered scan in its own
partitions (:func:`faq.spark.reach.matching`); the scans' rows are shuffled into one
task (``mapInArrow`` over one partition), which hands them to a function it is given
(the driver path of the delta rule, :mod:`faq.delta`) and returns that function's
table as Arrow.  Nothing here decides whether to run so, nor what the task computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from faq.kernel.table import Table
from faq.rule import VALUE
from faq.spark.ops import sql_name, union_all
from faq.spark.partitioned import REL, kernel_table, row_columns, variable_types
from faq.spark.tasks import arrow_type, marked, table_batch
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["RowsTask", "in_one_task", "materialised"]

Solve = Callable[[dict[int, Table]], Table]
"""What the task computes: from input ``k``'s rows (keys may repeat), a result table."""


def in_one_task(
    frames: Sequence[DataFrame],
    arities: Sequence[int],
    solve: Solve,
    S: Semiring,
    head: tuple[str, ...],
    head_types: Mapping[str, str],
) -> DataFrame:
    """``solve`` over the rows of ``frames`` (input ``k``: key columns, then the
    annotation; ``arities[k]`` key columns), run in one Spark task: a DataFrame over
    ``head`` (Spark types ``head_types``) and the annotation, not yet computed.

    The task runs even when no frame has a row (a row of no input is sent with them).
    ``solve`` must be picklable; its errors reach the driver as the task's own
    (:func:`faq.spark.tasks.marked`).
    """
    cols = tuple(tuple(f"r{k}_{c}" for c in range(n)) for k, n in enumerate(arities))
    named = [df.toDF(*c, VALUE) for c, df in zip(cols, frames, strict=True)]
    vtype = sops.ops(S).type
    types = variable_types(list(zip(cols, named, strict=True)))
    parts = [
        df.selectExpr(*row_columns(k, c, types, vtype))
        for k, (c, df) in enumerate(zip(cols, named, strict=True))
    ]
    schema = ", ".join(
        [f"{sql_name(v)} {head_types[v]}" for v in head] + [f"{sql_name(VALUE)} {vtype}"]
    )
    # a row of no relation, so that the task runs even when no relation's row is reached
    # (a term over R ⊕ ΔR still has ΔR's rows), whatever Spark does with empty partitions
    nulls = [f"CAST(NULL AS {ty}) AS {sql_name(v)}" for v, ty in types.items()]
    marker = (
        named[0]
        .sparkSession.range(0, 1, 1, 1)
        .selectExpr(
            f"CAST(-1 AS INT) AS {REL}", *nulls, f"CAST(NULL AS {vtype}) AS {sql_name(VALUE)}"
        )
    )
    task = RowsTask(solve, cols, vtype, S)
    return union_all([*parts, marker]).repartition(1).mapInArrow(task, schema)


class RowsTask:
    """What the one task of :func:`in_one_task` runs (picklable): the rows it is sent
    (input ``k`` in columns ``cols[k]``) as kernel tables, through ``solve``; its table
    as one Arrow batch."""

    def __init__(
        self, solve: Solve, cols: tuple[tuple[str, ...], ...], vtype: str, S: Semiring
    ) -> None:
        self.solve, self.cols, self.vtype, self.S = solve, cols, vtype, S
        self.value_type = arrow_type(vtype)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        ops = local_ops(self.S)
        got = [b for b in batches if b.num_rows]
        rows = pa.Table.from_batches(got) if got else None
        tags = rows.column(REL).to_numpy() if rows is not None else np.empty(0, np.int64)
        try:
            given = {}
            if rows is not None:
                for k, c in enumerate(self.cols):
                    given[k] = kernel_table(rows, np.flatnonzero(tags == k), c, self.vtype, ops)
            out = self.solve(given)
        except Exception as exc:
            raise marked(exc) from exc
        if out.rows:
            yield table_batch(out, ops, self.value_type)


def materialised(df: DataFrame, head: tuple[str, ...]) -> DataFrame | pa.Table:
    """``df`` computed in one action: kept in Spark (a local checkpoint) with a head,
    in the driver as Arrow without one (a scalar)."""
    return df.localCheckpoint(eager=True) if head else df.toArrow()
