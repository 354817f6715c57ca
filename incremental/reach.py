"""The rows of a Spark-resident view that one tick reads, fetched in one Spark job.

A tick of the additive regimes (rings, counting, boolean) reads its relations
in two ways: each changed relation at the keys of its delta (to ⊕ the delta in),
and every relation through the terms of the delta rule.  When every atom of the
rule shares a variable with every atom of a changed relation ("one hop": a
triangle, a clique, a star), each term reads only rows that agree with its delta
on such a shared variable.  So the rows whose column holds one of the delta's
values there, for every such pair of atoms, are all a tick reads:
:func:`reach` names them (per relation, per column, the values) and
:func:`fetch` collects them from the relations' bases in one Spark job per key
signature (a filter of ``IN`` lists, one plan), instead of one job per read.

A rule with a longer path (an atom sharing no variable with a changed one), or
with constants, has no such bound: :func:`reach` returns None and the tick
reads as it did.  So does a tick whose rows are more than ``max_fetch_rows`` (a
setting; :func:`fetch` stops there): its delta queries then read the relations
in Spark (:func:`faq.solve_delta`, which moves them to Spark jobs past that
setting too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from faq import VALUE, Rule
from faq.kernel import Table
from incremental.tables import distinct_keys

if TYPE_CHECKING:  # pragma: no cover
    from incremental.spark_keyed import RemoteKeyed

__all__ = ["Reach", "fetch", "reach"]

Reach = dict[str, dict[int, np.ndarray]]
"""Per relation, per key column, the values whose rows a tick reads (sorted, distinct)."""

TAG = "__reach"
ROW = "__row"
_ROW_BITS = (1 << 33) - 1  # monotonically_increasing_id: partition << 33 | row in partition


def reach(rule: Rule, deltas: Mapping[str, Sequence[np.ndarray]]) -> Reach | None:
    """The rows of each relation that a tick with ``deltas`` (key columns per changed
    relation) reads: for every atom of a changed relation and every atom of the rule, the
    column of their first shared variable in the other atom, at the delta's values of it.
    Each changed relation also gets its own delta's leading values at its column 0 (its
    lookups at the delta's keys).  None when some atom shares no variable with a changed
    one, or an atom has constants.
    """
    if any(a.consts for a in rule.atoms):
        return None
    out: dict[str, dict[int, list[np.ndarray]]] = {}

    def add(rel: str, col: int, values: np.ndarray) -> None:
        out.setdefault(rel, {}).setdefault(col, []).append(values)

    for name, cols in deltas.items():
        if not cols or not len(cols[0]):
            continue
        add(name, 0, cols[0])
        for d in (a for a in rule.atoms if a.relation == name):
            for other in rule.atoms:
                if other is d:
                    continue
                shared = [v for v in d.vars if v in other.vars]
                if not shared:
                    return None
                v = shared[0]
                add(other.relation, other.vars.index(v), cols[d.vars.index(v)])
    return {
        rel: {c: _distinct(np.concatenate(vs)) for c, vs in by_col.items()}
        for rel, by_col in out.items()
    }


def fetch(
    rels: Mapping[str, RemoteKeyed], plan: Reach, most: int | None = None
) -> dict[str, Table] | None:
    """The base rows of each relation of ``plan`` whose column ``c`` holds one of
    ``plan[rel][c]`` for some ``c`` (without the changed keys' overrides): one Spark job
    for all relations of one key signature (key and value types).

    With ``most``, None when they may be more than ``most`` rows: a change at a hub of a
    large relation reaches rows the driver should not hold, and its tick reads another
    way.  The bound is kept in the same job, with no shuffle (a ``limit`` would add one
    to every tick): each of the job's P partitions (a relation's base is split into
    ``ctx.partitions``) sends at most ``most // P + 1`` rows, and None means that one of
    them had more.  So the driver holds at most about ``most + P`` rows; a hub's rows
    (all in its key's partition) are refused past ``most // P``.
    """
    from pyspark.sql import functions as F

    groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for name in plan:
        r = rels[name]
        if r.rows:
            groups.setdefault((r.types, r.vtype), []).append(name)
    out = {n: rels[n].near_rows(()) for n in plan}  # empty, typed
    for names in groups.values():
        frames = []
        for k, name in enumerate(names):
            r = rels[name]
            cond = " OR ".join(_in_list(r.vars[c], vals) for c, vals in plan[name].items())
            cols = [F.col(v).alias(f"k{i}") for i, v in enumerate(r.vars)]
            frames.append(r.base.filter(F.expr(cond)).select(*cols, VALUE, F.lit(k).alias(TAG)))
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        if most is None:
            at = union.toArrow()
        else:
            each = max(1, most // sum(rels[n].ctx.partitions for n in names))
            row = F.expr(f"monotonically_increasing_id() & {_ROW_BITS}")  # index in its part
            at = union.withColumn(ROW, row).filter(F.col(ROW) <= each).toArrow()
            if (at.column(ROW).to_numpy() >= each).any():  # a partition had more rows
                return None
            at = at.drop_columns([ROW])
        tags = at.column(TAG).to_numpy()
        for k, name in enumerate(names):
            part = at.filter(tags == k).drop_columns([TAG])
            out[name] = rels[name].near_rows(part)
    return out


def _in_list(column: str, values: np.ndarray) -> str:
    """``column IN (v1, v2, ...)`` as SQL text, for integer or string values (a parsed IN
    list costs one call; literals built one by one cost one each)."""
    if values.dtype == object:
        text = ", ".join(_string(str(v)) for v in values)
    else:
        text = ", ".join(str(int(v)) for v in values)
    return "`" + column.replace("`", "``") + f"` IN ({text})"


def _string(v: str) -> str:
    """A SQL string literal of ``v`` (backslash escapes, as Spark parses them)."""
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _distinct(values: np.ndarray) -> np.ndarray:
    return distinct_keys((values,))[0]
