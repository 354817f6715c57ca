"""Steps past the driver: one HyperCube shuffle, then the compiled kernel in every cell.

A step whose inputs do not fit in the driver runs here.  Its shares
(:mod:`faq.plan.shares`) cut the bag's variables into a grid of cells; then:

1. **one shuffle** (:mod:`faq.spark.routing`): the tasks that read each input compute
   every row's cells (the hash of its value on each variable it has, modulo the share,
   and every coordinate of the variables it lacks; values too heavy for one cell,
   ``Shares.heavy``, to grids of cells of their own) and pack each cell's rows as Arrow
   IPC; the packs, a few rows of bytes, are repartitioned by cell into one Spark
   partition per cell.  A relation several atoms read (a self-join) is read and packed
   once: each of its rows goes once to every cell any of its atoms sends it to, with the
   mask of the atoms it serves there;
2. **the kernel in every cell**: each task (``mapInArrow``) unpacks its cell's rows (no
   copy), splits them by atom into kernel tables, and runs the step's runner
   (:func:`faq.kernel.runners.run`: the Generic Join kernel or a library runner the
   planner named) with the step's binding order, ⊕-folding the eliminated variables as
   it goes;
3. when an output key can come from several cells (an eliminated variable is
   cut), the cells' outputs are ⊕-combined by key (a Spark aggregation).

The result is a lazy DataFrame (output variables, then ``value``): the next
step reads it where it is, and nothing passes through the driver.

Cells are routed to partitions by a key whose Spark hash lands it in its own
partition (:func:`routing_keys`), so every task gets one cell.  Each task still
splits its rows by cell: were two cells to share a partition, each is joined
on its own, so the routing affects balance, never the answer.

Notes
-----
Afrati, Ullman, "Optimizing joins in a map-reduce environment" (EDBT 2010);
Beame, Koutris, Suciu, "Communication steps for parallel query processing"
(PODS 2013); Chu, Balazinska, Suciu, "From theory to practice: efficient join
query evaluation in a parallel database system" (SIGMOD 2015).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.pointers import back_pointers
from faq.kernel.runners import GENERIC_JOIN, Params, run
from faq.kernel.table import Table, concat, empty_table
from faq.plan.shares import Shares
from faq.rule import VALUE
from faq.spark.ops import sql_name, value_expr
from faq.spark.routing import (
    MASK,
    Group,
    Routed,
    Source,
    grids,
    murmur3_int,
    route,
    routing_keys,
    unpacked,
    variable_types,
)
from faq.spark.tasks import arrow_type, marked, table_batch
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, local_ops
from semirings.spark import typed_python_values

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "CellKernel",
    "Routed",
    "Source",
    "grids",
    "kernel_table",
    "murmur3_int",
    "route",
    "routing_keys",
    "row_columns",
    "run_partitioned",
    "run_pointers",
    "variable_types",
]

REL = "__rel"
"""The input index of a row tagged for one task (:func:`row_columns`: the one-cell and
delta-rule tasks, which read their inputs' rows unpacked)."""


def run_partitioned(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    shares: Shares,
    order: Sequence[str],
    keep: Sequence[str],
    S: Semiring,
    *,
    combine: bool = True,
    runner: str = GENERIC_JOIN,
    shape: Any = None,
    sources: Sequence[Source | None] | None = None,
) -> DataFrame:
    """The step's bag joined and ⊕-aggregated onto ``keep``, cell by cell (lazy).

    Parameters
    ----------
    frames : sequence of (variables, DataFrame)
        The step's inputs: key columns named by the variables, then ``value``.
    shares : Shares
        The grid of cells (:func:`faq.plan.shares.choose_shares`).
    order : sequence of str
        The kernel's binding order over the bag's variables.
    keep : sequence of str
        The output variables.
    S : Semiring
        The step's semiring.
    combine : bool
        ⊕-combine the outputs of different cells by key in Spark when the shares
        need it; without it, a key may come in several rows (one per cell, for a
        caller that combines them itself, e.g. a scalar in the driver).
    runner, shape : str, object
        The kernel runner every cell runs (:func:`faq.kernel.runners.run`, one thread
        each) and how it reads the bag, as the planner named them.
    sources : sequence of Source or None, optional
        Where each input's rows come from, when known: inputs of one source are routed
        together, once per cell (:func:`route_once`).

    Returns
    -------
    DataFrame
        ``keep`` columns, then ``value``: one row per key (with ``combine``),
        zeros dropped.
    """

    out = _in_cells(
        frames, shares, order, tuple(keep), S, runner=runner, shape=shape, sources=sources
    )
    if combine and shares.combine:
        out = sops.consolidate(S, out, list(keep), VALUE)
    return out


def run_pointers(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    shares: Shares,
    order: Sequence[str],
    keep: Sequence[str],
    elim: Sequence[str],
    S: Semiring,
) -> DataFrame:
    """The step's back-pointers, found in its cells (lazy): per output key and cell, the
    row of the cell's join that attains the key's ⊕ in that cell
    (:func:`faq.kernel.pointers.back_pointers`).

    Returns ``keep``, ``elim`` and ``value`` columns: one row per key when no eliminated
    variable is cut (``not shares.combine``), else one per key and cell, for the caller
    to pick the best of.
    """
    return _in_cells(frames, shares, order, (*keep, *elim), S, pointers=len(keep))


def _in_cells(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    shares: Shares,
    order: Sequence[str],
    out: tuple[str, ...],
    S: Semiring,
    pointers: int | None = None,
    runner: str = GENERIC_JOIN,
    shape: Any = None,
    sources: Sequence[Source | None] | None = None,
) -> DataFrame:
    """The inputs routed to their cells and the kernel run in each (lazy): ``out`` columns
    and ``value`` (see :class:`CellKernel` for ``pointers``)."""
    vtype = sops.ops(S).type
    plain = vtype in ("bigint", "double")
    routed = route(frames, shares, vtype, sources, one=S.one if plain else None)
    types = routed.types
    schema = ", ".join([f"`{v}` {types[v]}" for v in out] + [f"`{VALUE}` {vtype}"])
    relations = tuple(vars_ for vars_, _ in frames)
    groups = routed.groups
    cell = CellKernel(relations, groups, tuple(order), out, S, vtype, pointers, runner, shape)
    return routed.rows.mapInArrow(cell, schema)


def row_columns(i: int, vars_: tuple[str, ...], types: dict[str, str], vtype: str) -> list[str]:
    """SQL text of input ``i``'s columns for a task that reads several inputs' rows tagged,
    unpacked: ``__rel`` (``i``), every variable of ``types`` (null where the input lacks
    it) and ``value`` (of Spark type ``vtype``)."""
    cols = [
        f"CAST({sql_name(v) if v in vars_ else 'NULL'} AS {types[v]}) AS {sql_name(v)}"
        for v in types
    ]
    return [f"CAST({i} AS INT) AS {REL}", *cols, value_expr(vtype)]


class CellKernel:
    """What each task runs: the kernel over the rows of each of its cells (picklable).

    The cells' rows come packed (:mod:`faq.spark.routing`): ``groups`` say which group
    holds each input, under which bit of its masks, in which columns.
    """

    def __init__(
        self,
        relations: tuple[tuple[str, ...], ...],
        groups: Sequence[Group],
        order: tuple[str, ...],
        keep: tuple[str, ...],
        S: Semiring,
        vtype: str,
        pointers: int | None = None,
        runner: str = GENERIC_JOIN,
        shape: Any = None,
    ) -> None:
        self.relations = relations
        # per input: its group in the packs, its bit in the group's masks, its columns
        held = {i: (g, 1 << k, group.columns(k)) for g, group in enumerate(groups)
                for k, i in enumerate(group.inputs)}  # fmt: skip
        self.held = tuple(held[i] for i in range(len(relations)))
        self.order = order
        self.keep = keep
        self.S = S
        self.vtype = vtype
        self.value_type = arrow_type(vtype)
        # back-pointers: ``keep`` is the output key (its first ``pointers`` variables)
        # and the eliminated variables; each cell keeps the best row per key
        self.pointers = pointers
        # the runner the planner named, one thread per cell (cells share executors' cores)
        self.runner = runner
        self.params = Params(shape, threads=1)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ops = local_ops(self.S)
        for _, packs in sorted(unpacked(batches).items()):
            masks = {g: [t.column(MASK).to_numpy() for t in ts] for g, ts in packs.items()}
            try:
                tables = []
                for vars_, (g, bit, cols) in zip(self.relations, self.held, strict=True):
                    parts = [
                        kernel_table(t, np.flatnonzero(m & bit), vars_, self.vtype, ops, columns=c)
                        for t, m, c in zip(packs.get(g, ()), masks.get(g, ()), repeat(cols))
                    ]
                    tables.append(_joined(parts, vars_, ops))
                if any(t.rows == 0 for t in tables):
                    continue
                out = run(self.runner, tables, self.order, self.keep, ops, self.params).table
                if self.pointers is not None:
                    k = self.pointers
                    out = back_pointers(out, self.keep[:k], self.keep[k:], ops, self.S)
            except Exception as exc:
                raise marked(exc) from exc
            if out.rows:
                yield table_batch(out, ops, self.value_type)


def _joined(parts: list[Table], vars_: tuple[str, ...], ops: LocalOps) -> Table:
    """One input's rows of a cell from its packs' tables (none: an empty table); without
    annotations when no pack has any."""
    if not parts:
        return empty_table(vars_, ops)
    if len(parts) == 1:
        return parts[0]
    if any(t.values is not None for t in parts):
        return concat(parts, ops)
    cols = tuple(np.concatenate([t.cols[i] for t in parts]) for i in range(len(vars_)))
    return Table(vars_, cols, None, unique=False)


def kernel_table(
    rows: pa.Table,
    idx: np.ndarray,
    vars_: tuple[str, ...],
    vtype: str,
    ops: LocalOps,
    *,
    columns: tuple[str, ...] | None = None,
) -> Table:
    """The rows ``idx`` of a task's routed rows, over ``vars_`` (read from the columns
    ``columns``, by default those named by the variables), as a kernel table whose
    keys may repeat (the kernel's index ⊕-combines them); values of Spark type ``vtype``.

    Annotations that are all the semiring's one (a relation given without a ``value``
    column) are left out, as a local table without annotations has them: the kernel
    then counts intersections instead of multiplying annotations, several times faster
    on a triangle.  Nothing here needs a Spark session: it runs in a task."""
    names = list(columns if columns is not None else vars_)
    valued = VALUE in rows.column_names  # a pack of annotations all one carries none
    part = rows.select([*dict.fromkeys(names), *([VALUE] if valued else [])]).take(idx)
    cols = []
    for v in names:
        a = part.column(v).to_numpy(zero_copy_only=False)
        cols.append(a.astype(np.int64) if a.dtype.kind in "iu" else a)
    if not valued:
        return Table(vars_, tuple(cols), None, unique=False)
    raw = part.column(VALUE).to_numpy(zero_copy_only=False)
    values: np.ndarray | None
    if ops.dtype is object:
        values = typed_python_values(raw.astype(object), vtype)
    else:
        values = raw.astype(ops.dtype)
        if cols and len(values) and bool(np.all(values == ops.semiring.one)):
            values = None  # (a table of no key columns keeps them: they are its rows)
    return Table(vars_, tuple(cols), values, unique=False)
