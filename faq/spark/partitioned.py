"""Steps past the driver: one HyperCube shuffle, then the compiled kernel in every cell.

A step whose inputs do not fit in the driver runs here.  Its shares
(:mod:`faq.plan.shares`) cut the bag's variables into a grid of cells; then:

1. **one shuffle**: every input row gets the cells it belongs to (a native
   expression: ``pmod(xxhash64(key), share)`` per variable it has, and every
   coordinate of the variables it lacks, by ``explode``) and all inputs,
   unioned, are repartitioned by cell into one Spark partition per cell;
   Values too heavy for one cell (``Shares.heavy``) have their rows routed
   to grids of cells of their own in the same shuffle (:mod:`faq.plan.shares`,
   :func:`grids`).  A relation several atoms read (a self-join) is read once: each of
   its rows goes once to every cell any of its atoms sends it to, with the mask of the
   atoms it serves there and its keys by position (:func:`route_once`);
2. **the kernel in every cell**: each task (``mapInArrow``, Arrow batches in
   and out, no Python per row) takes its cell's rows, splits them by relation
   into kernel tables, and runs the step's runner (:func:`faq.kernel.runners.run`: the
   Generic Join kernel or a library runner the planner named) with the step's
   binding order, ⊕-folding the eliminated variables as it goes;
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

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.pointers import back_pointers
from faq.kernel.runners import GENERIC_JOIN, Params, run
from faq.kernel.table import Table
from faq.plan.shares import Shares
from faq.rule import VALUE
from faq.spark.ops import all_of, isin_literals, key_type, sql_name, union_all
from faq.spark.tasks import arrow_type, marked, table_batch
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, local_ops
from semirings.spark import typed_python_values

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = [
    "CellKernel",
    "Routed",
    "Source",
    "grids",
    "kernel_table",
    "murmur3_int",
    "route",
    "route_once",
    "routing_keys",
    "row_columns",
    "run_partitioned",
    "run_pointers",
    "variable_types",
]

CELL = "__cell"
REL = "__rel"
OFFSET = "__offset"  # the lambda variable over a row's offsets (see _cells)
KEY = "__k"  # routed rows by source: key columns by position (``__k0``, ``__k1``...)
ROLES = "__a"  # ... and, while routing, the cells of each atom a source row serves


@dataclass(frozen=True)
class Source:
    """Where an input's rows are read from: ``df`` (key columns ``keys``, then ``value``),
    the input's variables being its columns ``columns`` (one per variable, in order).
    Inputs with the same ``df`` (a self-join: atoms of one relation) are routed together
    by :func:`route_once`."""

    df: DataFrame
    keys: tuple[str, ...]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Routed:
    """Routed rows (:func:`route`, :func:`route_once`) and how a cell reads them: per
    input, the columns holding its variables; ``masked``: ``__rel`` is a bit mask of the
    inputs a row serves (bit ``i``: input ``i``), else the one input's index."""

    rows: DataFrame
    types: dict[str, str]
    columns: tuple[tuple[str, ...], ...]
    masked: bool


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
    routed = route_once(frames, shares, vtype, sources) if sources else None
    if routed is None:
        rows, types = route(frames, shares, vtype)
        routed = Routed(rows, types, tuple(vars_ for vars_, _ in frames), masked=False)
    types = routed.types
    schema = ", ".join([f"`{v}` {types[v]}" for v in out] + [f"`{VALUE}` {vtype}"])
    relations = tuple(vars_ for vars_, _ in frames)
    cell = CellKernel(
        relations,
        tuple(order),
        out,
        S,
        vtype,
        pointers,
        runner,
        shape,
        columns=routed.columns,
        masked=routed.masked,
    )
    return routed.rows.mapInArrow(cell, schema)


def route(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]], shares: Shares, vtype: str
) -> tuple[DataFrame, dict[str, str]]:
    """Every input row once per cell it goes to, in one Spark partition per cell (the
    shuffle), and the Spark type of every variable.

    The rows have the columns ``__cell`` (the cell's routing key), ``__rel`` (the
    index of the input), one per variable of the bag (null where the input lacks
    it; integer keys as ``bigint``) and ``value`` (of Spark type ``vtype``).

    Each input's routing is one ``selectExpr`` of SQL expressions: building the same
    plan from ``Column`` objects takes a Py4J round trip per function, and those round
    trips were most of a small partitioned solve's time in the driver.
    """
    types = variable_types(frames)
    keys = "array(" + ", ".join(str(k) for k in routing_keys(shares.total)) + ")"
    parts = []
    for i, (vars_, df) in enumerate(frames):
        cols = row_columns(i, vars_, types, vtype)
        for grid, first, conds in grids(shares):
            mine = [(v, vals, heavy) for v, vals, heavy in conds if v in vars_]
            part = df.filter(_where(mine, types)) if mine else df
            cell = _cells(vars_, grid, types, keys, first)
            parts.append(part.selectExpr(f"{cell} AS {CELL}", *cols))
    return union_all(parts).repartition(shares.total, CELL), types


def route_once(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    shares: Shares,
    vtype: str,
    sources: Sequence[Source | None],
) -> Routed | None:
    """:func:`route` reading each source once: a row of a relation several atoms read (a
    self-join) goes once to each cell any of them sends it to, with the bit mask of the
    atoms it serves there, and its keys by position (``__k0``, ``__k1``...) rather than one
    column per variable of the bag.  A triangle count over 4 cells routes 3 rows per edge
    instead of 5, of 5 columns instead of 6.

    None (route them with :func:`route`) when no two inputs share a source, when the
    shares split heavy values (rows then meet per-grid conditions), when the inputs'
    keys differ in type at some position, or past 62 inputs (the mask's bits).
    """
    if shares.heavy or len(frames) > 62 or len(sources) != len(frames):
        return None
    srcs = [
        s if s is not None else Source(df, vars_, vars_)
        for (vars_, df), s in zip(frames, sources, strict=True)
    ]
    groups: list[list[int]] = []
    for i, s in enumerate(srcs):
        for g in groups:
            if srcs[g[0]].df is s.df and srcs[g[0]].keys == s.keys:
                g.append(i)
                break
        else:
            groups.append([i])
    if len(groups) == len(frames):
        return None
    types = variable_types(frames)
    width = max(len(srcs[g[0]].keys) for g in groups)
    at: list[str | None] = [None] * width  # the Spark type of each key position
    for g in groups:
        s = srcs[g[0]]
        fields = {f.name: f.dataType for f in s.df.schema.fields}
        for p, k in enumerate(s.keys):
            t = key_type(fields[k])
            if at[p] not in (None, t):
                return None
            at[p] = t
    for i in range(len(frames)):
        s = srcs[i]
        for v, c in zip(frames[i][0], s.columns, strict=True):
            if types[v] != at[s.keys.index(c)]:
                return None
    keys = "array(" + ", ".join(str(k) for k in routing_keys(shares.total)) + ")"
    value = sql_name(VALUE)
    if vtype in ("bigint", "double", "boolean", "string"):
        value = f"CAST({value} AS {vtype})"
    parts = []
    for g in groups:
        s = srcs[g[0]]
        cols = [
            f"CAST({sql_name(s.keys[p]) if p < len(s.keys) else 'NULL'} AS {at[p]}) AS {KEY}{p}"
            for p in range(width)
        ]
        roles = [
            _cell_array(
                frames[i][0],
                shares,
                types,
                keys,
                dict(zip(frames[i][0], srcs[i].columns, strict=True)),
            )
            for i in g
        ]
        named = [f"{a} AS {ROLES}{r}" for r, a in enumerate(roles)]
        every = ", ".join(f"{ROLES}{r}" for r in range(len(g)))
        mask = " + ".join(
            f"IF(array_contains({ROLES}{r}, {CELL}), {1 << i}, 0)" for r, i in enumerate(g)
        )
        kept = [f"{KEY}{p}" for p in range(width)]
        part = (
            s.df.selectExpr(*named, *cols, f"{value} AS {VALUE}")
            .selectExpr(f"explode(array_distinct(concat({every}))) AS {CELL}", "*")
            .selectExpr(CELL, f"CAST({mask} AS BIGINT) AS {REL}", *kept, VALUE)
        )
        parts.append(part)
    columns = tuple(
        tuple(f"{KEY}{srcs[i].keys.index(c)}" for c in srcs[i].columns) for i in range(len(frames))
    )
    rows = union_all(parts).repartition(shares.total, CELL)
    return Routed(rows, types, columns, masked=True)


Cond = tuple[str, tuple[Any, ...], bool]
"""A grid's condition on one variable: its value is (True) or is not (False) one of these."""


def grids(shares: Shares, first: int = 0) -> list[tuple[Shares, int, tuple[Cond, ...]]]:
    """Every grid of ``shares`` (its own, then its splits' and theirs, depth first), the
    number of its first cell, and the conditions its rows meet: the grid of split ``k``
    takes the rows heavy on its variable and light on those of the splits before it,
    the grid itself the rows light on every split's variable.  A row goes to the grids
    whose conditions on the variables it has hold (all of them, for the variables it
    lacks); every combination of rows that joins agrees on every variable's value, so
    it meets in exactly one grid."""
    out = [(shares, first, tuple((h.var, h.values, False) for h in shares.heavy))]
    at = first + shares.cells
    for k, h in enumerate(shares.heavy):
        light = tuple((g.var, g.values, False) for g in shares.heavy[:k])
        for grid, start, conds in grids(h.shares, at):
            out.append((grid, start, (*light, (h.var, h.values, True), *conds)))
        at += h.shares.total
    return out


def _where(conds: Sequence[Cond], types: dict[str, str]) -> Column:
    """The rows that meet every condition of ``conds`` (at least one)."""
    tests = [isin_literals(v, types[v], np.asarray(vals, dtype=object)) for v, vals, _ in conds]
    return all_of([t if heavy else ~t for t, (_, _, heavy) in zip(tests, conds, strict=True)])


def variable_types(frames: Sequence[tuple[tuple[str, ...], DataFrame]]) -> dict[str, str]:
    """The Spark type of every variable of the inputs (integer keys as ``bigint``), in the
    order they first appear."""
    types: dict[str, str] = {}
    for vars_, df in frames:
        for v in vars_:
            if v not in types:
                types[v] = key_type(df.schema[v].dataType)
    return types


def row_columns(i: int, vars_: tuple[str, ...], types: dict[str, str], vtype: str) -> list[str]:
    """SQL text of input ``i``'s routed columns: ``__rel`` (``i``), every variable of
    ``types`` (null where the input lacks it) and ``value`` (of Spark type ``vtype``)."""
    value = sql_name(VALUE)
    if vtype in ("bigint", "double", "boolean", "string"):
        value = f"CAST({value} AS {vtype})"
    cols = [
        f"CAST({sql_name(v) if v in vars_ else 'NULL'} AS {types[v]}) AS {sql_name(v)}"
        for v in types
    ]
    return [f"CAST({i} AS INT) AS {REL}", *cols, f"{value} AS {VALUE}"]


def _cells(
    vars_: tuple[str, ...], shares: Shares, types: dict[str, str], keys: str, first: int = 0
) -> str:
    """The SQL expression of the routing key of every cell a row of an input over
    ``vars_`` goes to: the row's own coordinate on each of its variables,
    ``pmod(xxhash64(key), share)``, and every coordinate of the variables it lacks
    (an ``explode``, a row per cell), the grid's cells numbered from ``first``."""
    base, offsets, o = _coordinates(vars_, shares, types, first, {})
    if offsets == [0]:
        return f"element_at({keys}, CAST({base} AS INT))"
    at = ", ".join(str(x) for x in offsets)
    each = f"element_at({keys}, CAST({base} + {o} AS INT))"
    return f"explode(transform(array({at}), {o} -> {each}))"


def _cell_array(
    vars_: tuple[str, ...], shares: Shares, types: dict[str, str], keys: str, col_of: dict
) -> str:
    """:func:`_cells` as an array of routing keys (no explode), the variables read from
    the columns ``col_of`` names (a source's, :func:`route_once`)."""
    base, offsets, o = _coordinates(vars_, shares, types, 0, col_of)
    if offsets == [0]:
        return f"array(element_at({keys}, CAST({base} AS INT)))"
    at = ", ".join(str(x) for x in offsets)
    return f"transform(array({at}), {o} -> element_at({keys}, CAST({base} + {o} AS INT)))"


def _coordinates(
    vars_: tuple[str, ...], shares: Shares, types: dict[str, str], first: int, col_of: dict
) -> tuple[str, list[int], str]:
    """The SQL sum of a row's own coordinates (plus ``first + 1``), the offsets of the
    coordinates of the variables it lacks, and the lambda variable's name."""
    stride = 1
    terms: list[str] = []
    spread: list[list[int]] = []
    for v, s in reversed(shares.shares):
        if s > 1:
            if v in vars_:
                h = f"pmod(xxhash64(CAST({sql_name(col_of.get(v, v))} AS {types[v]})), {s})"
                terms.append(h if stride == 1 else f"{h} * {stride}")
            else:
                spread.append([c * stride for c in range(s)])
        stride *= s
    offsets = sorted(sum(c) for c in itertools.product(*spread))
    o = OFFSET
    while o in types or o in col_of.values():  # the lambda's variable would hide a column
        o += "_"
    return " + ".join([*terms, str(first + 1)]), offsets, o


class CellKernel:
    """What each task runs: the kernel over the rows of each of its cells (picklable)."""

    def __init__(
        self,
        relations: tuple[tuple[str, ...], ...],
        order: tuple[str, ...],
        keep: tuple[str, ...],
        S: Semiring,
        vtype: str,
        pointers: int | None = None,
        runner: str = GENERIC_JOIN,
        shape: Any = None,
        *,
        columns: tuple[tuple[str, ...], ...] | None = None,
        masked: bool = False,
    ) -> None:
        self.relations = relations
        # the routed columns holding each relation's variables (:class:`Routed`)
        self.columns = columns if columns is not None else relations
        self.masked = masked
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
        import pyarrow as pa

        got = [b for b in batches if b.num_rows]
        if not got:
            return
        rows = pa.Table.from_batches(got)
        ops = local_ops(self.S)
        cells = rows.column(CELL).to_numpy()
        rels = rows.column(REL).to_numpy()
        serves = [
            (rels & (1 << i)) != 0 if self.masked else rels == i for i in range(len(self.relations))
        ]
        for c in np.unique(cells):
            here = cells == c
            try:
                tables = [
                    kernel_table(
                        rows, np.flatnonzero(here & mine), vars_, self.vtype, ops, columns=cols
                    )
                    for vars_, cols, mine in zip(self.relations, self.columns, serves, strict=True)
                ]
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
    Nothing here needs a Spark session: it runs in a task."""
    names = list(columns if columns is not None else vars_)
    part = rows.select([*dict.fromkeys(names), VALUE]).take(idx)
    cols = []
    for v in names:
        a = part.column(v).to_numpy(zero_copy_only=False)
        cols.append(a.astype(np.int64) if a.dtype.kind in "iu" else a)
    raw = part.column(VALUE).to_numpy(zero_copy_only=False)
    if ops.dtype is object:
        values = typed_python_values(raw.astype(object), vtype)
    else:
        values = raw.astype(ops.dtype)
    return Table(vars_, tuple(cols), values, unique=False)


# -- routing: one cell per Spark partition -----------------------------------------------
_M = 0xFFFFFFFF


def murmur3_int(x: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of a 32-bit integer (Murmur3 x86 32-bit, ``hashInt``), which its
    hash partitioning reads (``pmod(hash(key), partitions)``)."""

    def rotl(v: int, r: int) -> int:
        return ((v << r) | (v >> (32 - r))) & _M

    k1 = rotl((x & _M) * 0xCC9E2D51 & _M, 15) * 0x1B873593 & _M
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & _M
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@lru_cache(maxsize=64)
def routing_keys(cells: int) -> tuple[int, ...]:
    """For each cell ``c`` an integer that ``repartition(cells, key)`` sends to partition
    ``c``: the smallest non-negative one whose Spark hash is ``c`` modulo ``cells``."""
    found: dict[int, int] = {}
    k = 0
    while len(found) < cells:
        found.setdefault(murmur3_int(k) % cells, k)
        k += 1
    return tuple(found[c] for c in range(cells))
