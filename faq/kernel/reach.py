"""The driver half of reading a change's reach: rows of tables at given values.

The hops a change takes are planned from the rule (:mod:`faq.plan.reach`); their rows
are read in Spark by scans (:mod:`faq.spark.reach`) and in the driver here: a keyed
table by binary searches on its tries (:meth:`faq.kernel.KeyedTable.lookup`, no scan),
a plain table by masks.  A condition is column index -> allowed values, all of which
must hold; a read returns the rows matching any of its conditions.  What a term
knows after a hop (the values each variable can still take) is :func:`narrow`-ed by
the rows it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from faq.kernel.keyed import KeyedTable, mask_at
from faq.kernel.merge import match_keys
from faq.kernel.table import Table
from semirings.local import distinct

__all__ = ["at_keys", "filtered", "matching_rows", "narrow"]


def matching_rows(t: Table | KeyedTable, conds: Sequence[Mapping[int, np.ndarray]]) -> Table:
    """The rows of ``t`` matching any of ``conds`` (a keyed table's consolidated)."""
    if isinstance(t, KeyedTable):
        if not conds:
            return t.base.take(np.empty(0, np.int64))
        return t.lookup(conds)
    hit = np.zeros(t.rows, dtype=bool)
    for c in conds:
        hit |= mask_at(t, c)
    return t.take(np.flatnonzero(hit))


def filtered(t: Table, cond: Mapping[int, np.ndarray]) -> Table:
    """The rows of ``t`` matching ``cond``."""
    return t.take(np.flatnonzero(mask_at(t, cond)))


def at_keys(rows: Table, keys: Table) -> Table:
    """The rows of ``rows`` whose whole key is a key of ``keys``."""
    if rows.rows == 0 or keys.rows == 0:
        return rows.take(np.empty(0, dtype=np.int64))
    if not rows.cols:  # no key columns: every row has the one key
        return rows
    return rows.take(np.flatnonzero(match_keys(rows.cols, keys.cols)[0]))


def narrow(
    known: dict[str, np.ndarray], vars_: Sequence[str], cols: Sequence[np.ndarray]
) -> dict[str, np.ndarray]:
    """``known`` (per variable, the distinct values it can take) narrowed by rows read
    over ``vars_`` (columns ``cols``): each variable can take only the values of its
    columns too.  Updated in place and returned."""
    for v, c in zip(vars_, cols, strict=True):
        have = distinct(c)
        known[v] = np.intersect1d(known[v], have, assume_unique=True) if v in known else have
    return known
