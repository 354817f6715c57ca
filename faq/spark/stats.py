"""Statistics of Spark relations: every figure a query needs, gathered in one job.

The local figures (exact row and distinct counts, pairwise join sizes from
degrees) are in :mod:`faq.kernel.stats`; here each figure is a one-row
aggregate DataFrame and :func:`spark_figures` collects them all at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["spark_figures", "spark_pair_size"]


def spark_pair_size(
    a: DataFrame, a_cols: Sequence[str], b: DataFrame, b_cols: Sequence[str], name: str
) -> DataFrame:
    """A one-row DataFrame with column ``name``: the rows of ``a ⋈ b`` on the given columns."""
    from pyspark.sql import functions as F

    keys = [f"__k{i}" for i in range(len(a_cols))]
    left = a.select(*[F.col(c).alias(k) for c, k in zip(a_cols, keys, strict=True)])
    right = b.select(*[F.col(c).alias(k) for c, k in zip(b_cols, keys, strict=True)])
    left = left.groupBy(*keys).agg(F.count(F.lit(1)).alias("__l"))
    right = right.groupBy(*keys).agg(F.count(F.lit(1)).alias("__r"))
    joined = left.join(right, on=keys)
    total = F.sum(F.col("__l").cast("double") * F.col("__r").cast("double"))
    return joined.agg(F.coalesce(total, F.lit(0.0)).alias(name))


def spark_figures(parts: Sequence[DataFrame]) -> dict[str, Any]:
    """Collect several one-row aggregate DataFrames with one Spark job: ``{column: value}``."""
    if not parts:
        return {}
    row = parts[0]
    for p in parts[1:]:
        row = row.crossJoin(p)
    return row.collect()[0].asDict()
