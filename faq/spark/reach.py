"""The Spark half of reading a change's reach: ``IN``-list and semi-join scans.

The hops a change takes are planned from the rule (:mod:`faq.plan.reach`), and
the bounds on what the driver may look for are decided there too; this module
only scans.  A relation's rows at some values are one filtered scan: per condition
(column -> allowed values, all of which must hold) a conjunction of ``IN`` lists,
the conditions OR-ed (:func:`matching`); values not in the driver give a left
semi-join with the values broadcast instead (:func:`semi_joined`).  Rows come to the
driver either bounded by a ``limit`` (:func:`collect_bounded`), or, for several
relations of one key signature in one job with no shuffle, bounded per partition
(:func:`fetch_tagged`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faq.rule import VALUE
from faq.spark.ops import all_of, isin_literals, union_all

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["Scan", "collect_bounded", "fetch_tagged", "matching", "semi_joined"]

Conds = Mapping[int, np.ndarray]
"""A condition on a relation's rows: column index -> allowed values (all must hold)."""


def matching(vars_: Sequence[str], types: Sequence[str], conds: Sequence[Conds]) -> Column:
    """The rows (columns ``vars_`` of Spark types ``types``) matching any of ``conds``:
    ``IN`` lists, AND-ed within a condition and OR-ed across them (at least one)."""
    out = None
    for c in conds:
        part = all_of([isin_literals(vars_[k], types[k], v) for k, v in c.items()])
        out = part if out is None else out | part
    assert out is not None
    return out


def semi_joined(
    rows: DataFrame, vars_: Sequence[str], given: DataFrame, pairs: Sequence[tuple[int, int]]
) -> DataFrame:
    """``rows`` (columns ``vars_``) having, for every ``(k, g)`` of ``pairs``, column ``k``
    equal to column ``g`` of some row of ``given`` (a left semi-join, ``given``'s
    columns broadcast)."""
    from pyspark.sql import functions as F

    named = [(k, g, f"__seed{n}") for n, (k, g) in enumerate(pairs)]
    keys = given.select(*(F.col(given.columns[g]).alias(s) for _, g, s in named))
    on = all_of([F.col(vars_[k]) == F.col(s) for k, _, s in named])
    return rows.join(F.broadcast(keys), on=on, how="left_semi")


def collect_bounded(rows: DataFrame, most: int) -> pa.Table | None:
    """``rows`` in the driver as Arrow, or None when they are more than ``most``."""
    at = rows.limit(most + 1).toArrow()
    return None if at.num_rows > most else at


@dataclass(frozen=True)
class Scan:
    """One relation read by :func:`fetch_tagged`.

    Attributes
    ----------
    df : DataFrame
        Its rows: columns ``vars`` and the annotation.
    vars, types : tuple of str
        Its key columns and their Spark types.
    cols : dict of int to ndarray
        Per column, values: the rows whose column holds one of them are read (OR-ed).
    keys : tuple of ndarray or None
        Values per column, all of which must hold: the rows at them are marked (and
        read whatever the bound).
    partitions : int
        The partitions ``df`` is split into.
    """

    df: DataFrame
    vars: tuple[str, ...]
    types: tuple[str, ...]
    cols: Mapping[int, np.ndarray]
    keys: tuple[np.ndarray, ...] | None = None
    partitions: int = 1


TAG = "__reach"
ROW = "__row"
_ROW_BITS = (1 << 33) - 1  # monotonically_increasing_id: partition << 33 | row in partition


def fetch_tagged(
    scans: Sequence[Scan], most: int
) -> tuple[list[pa.Table] | None, dict[int, pa.Table]]:
    """The rows of each scan (its key columns ``k0, k1…`` and the annotation), in one
    Spark job for all of them (they must share key and value types), or None (with,
    per scan having ``keys``, its rows at them: one more job) when they may be more
    than ``most``.

    The bound is kept in the same job, with no shuffle (a ``limit`` would add one):
    each of the job's P partitions sends at most ``most // P + 1`` rows, and None means
    that one of them had more.  So the driver holds at most about ``most + P`` rows; a
    hub's rows (all in its key's partition) are refused past ``most // P``.  The plan
    is built in as few DataFrame calls as it takes (a filter and a projection per scan,
    one filter over their union): each call analyses the whole plan again, ``IN`` lists
    of thousands of values included.
    """
    from pyspark.sql import functions as F

    each = max(1, most // sum(s.partitions for s in scans))
    row = F.expr(f"monotonically_increasing_id() & {_ROW_BITS}")  # index in its part

    def tagged(k: int, s: Scan, cond: Column, *more: Column) -> DataFrame:
        """Scan ``k``'s rows meeting ``cond``: columns ``k0, k1…``, the annotation, its tag."""
        cols = [F.col(v).alias(f"k{i}") for i, v in enumerate(s.vars)]
        return s.df.filter(cond).select(*cols, VALUE, F.lit(k).alias(TAG), *more)

    frames = [
        tagged(k, s, matching(s.vars, s.types, [{c: v} for c, v in s.cols.items()]), row.alias(ROW))
        for k, s in enumerate(scans)
    ]
    at = union_all(frames).filter(F.col(ROW) <= each).toArrow()
    if (at.column(ROW).to_numpy() >= each).any():  # a partition had more rows
        keyed = [  # the rows at each scan's keys: read whatever the bound
            tagged(k, s, matching(s.vars, s.types, [dict(enumerate(s.keys))]))
            for k, s in enumerate(scans)
            if s.keys is not None
        ]
        if not keyed:
            return None, {}
        rows = union_all(keyed).toArrow()
        tags = rows.column(TAG).to_numpy()
        return None, {
            k: rows.filter(tags == k).drop_columns([TAG])
            for k, s in enumerate(scans)
            if s.keys is not None
        }
    tags = at.column(TAG).to_numpy()
    at = at.drop_columns([ROW])
    return [at.filter(tags == k).drop_columns([TAG]) for k in range(len(scans))], {}
