"""A partitioned step's rows sent to their cells: packed where they are read, one shuffle of
the packs, unpacked in each cell.

A step past the driver (:mod:`faq.spark.partitioned`) needs every row of each input in
every cell of its HyperCube grid that the row's atom reaches.  Spelled out in Spark, that
is a row per (row, cell) pair: the triangle count of a 3M-edge graph over 16 cells shuffles
21M rows and hands each, column by column, from the JVM to the cells' Python workers as
Arrow, a per-value cost that was most of the step (docs/partitioned.md, "Where the time
goes").  Here the rows cross into Python once, where they are read:

1. **pack** (:class:`Packer`, a ``mapInArrow`` task over each input's rows): the task
   computes every row's cells in numpy (:func:`faq.kernel.route.placed`: the hash of the
   row's value on each variable the grid cuts, modulo its share, and every coordinate of
   the variables the atom lacks; heavy values to their own grids), and writes each cell's
   rows, with the mask of the atoms they serve there, into Arrow IPC *packs* of at most
   :data:`PACK_ROWS` rows: one Spark row ``(__cell, __g, __pack)`` per pack;
2. **one shuffle** of the packs by cell (``repartition`` by the cell's routing key: each
   cell its own partition), a few rows of bytes instead of millions of rows;
3. **unpack** (:func:`unpacked`, in the cell's task): each pack is read back as Arrow with
   no copy, and the cell's kernel takes its inputs' rows from them.

A relation that several atoms read (a self-join) is one *group*: its rows are read and
packed once, each going once to every cell any of its atoms sends it to, with the bit of
every atom it serves there.  A pack carries its rows in as few bytes as they take (integer
keys within 32 bits as ``int32``, a narrow mask, no ``value`` when every annotation is
one: each task decides for its own rows, so one cell may receive packs of one relation in
several shapes).  Integer keys are hashed in the task (:func:`faq.kernel.route.key_hash`);
keys of other types by Spark's ``xxhash64``, read with the row.  Every atom of a variable
reads its values as one type (:func:`variable_types`), so equal values meet in the same
cells whatever input they come from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.kernel.route import Route, key_hash, placed
from faq.plan.shares import Shares
from faq.rule import VALUE
from faq.spark.ops import key_type, sql_name, union_all, value_expr

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "CELL",
    "GROUP",
    "MASK",
    "PACK",
    "PACK_ROWS",
    "Group",
    "Packer",
    "Routed",
    "Source",
    "grids",
    "murmur3_int",
    "route",
    "routing_keys",
    "unpacked",
    "variable_types",
]

CELL = "__cell"
GROUP = "__g"
PACK = "__pack"
MASK = "__rel"
KEY = "__k"  # a group's key columns by position (``__k0``, ``__k1``...)
HASH = "__h"  # ... and Spark's hash of those of a type the task does not hash itself
PACK_ROWS = 1 << 20
"""The most rows of one pack (each pack is a Spark row of bytes: kept well under Arrow's
2 GiB binary arrays and Spark's row limits)."""
READ_ROWS = 1 << 21
"""The rows a packing task reads before it packs them, at the most."""
READ_PLACES = 1 << 24
"""The (row, cell) pairs a packing task places at once, at the most: it reads fewer rows
before packing them when each goes to many cells (its memory, not its output)."""
BATCH_BYTES = 1 << 28
"""The pack bytes of one output batch of a packing task, at the most (plus one pack)."""
BITS = 62
"""The most atoms of one group (their bits in an int64 mask)."""


@dataclass(frozen=True)
class Source:
    """Where an input's rows are read from: ``df`` (key columns ``keys``, then ``value``),
    the input's variables being its columns ``columns`` (one per variable, in order).
    Inputs with the same ``df`` and ``keys`` (a self-join: atoms of one relation) are
    packed together."""

    df: DataFrame
    keys: tuple[str, ...]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    """Inputs of a step read from one source and packed together.

    ``inputs`` are their indices in the step; ``positions`` per input, the key position
    of each of its variables; ``types`` the Spark type every key position is read as.
    Input ``inputs[k]`` has the bit ``1 << k`` in the packs' masks.
    """

    inputs: tuple[int, ...]
    positions: tuple[tuple[int, ...], ...]
    types: tuple[str, ...]

    def columns(self, k: int) -> tuple[str, ...]:
        """The pack's columns holding the variables of the group's ``k``-th input."""
        return tuple(f"{KEY}{p}" for p in self.positions[k])


@dataclass(frozen=True)
class Routed:
    """A step's rows packed for its cells (lazy): ``rows`` has one row per pack
    (``__cell``, the routing key of its cell; ``__g``, its group; ``__pack``, the bytes),
    partitioned by cell; ``groups`` says which inputs each group holds; ``types`` the Spark
    type of every variable."""

    rows: DataFrame
    groups: tuple[Group, ...]
    types: dict[str, str]


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


def variable_types(frames: Sequence[tuple[tuple[str, ...], DataFrame]]) -> dict[str, str]:
    """The Spark type of every variable of the inputs (integer keys as ``bigint``), in the
    order they first appear."""
    types: dict[str, str] = {}
    for vars_, df in frames:
        for v in vars_:
            if v not in types:
                types[v] = key_type(df.schema[v].dataType)
    return types


def route(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    shares: Shares,
    vtype: str,
    sources: Sequence[Source | None] | None = None,
    one: Any = None,
) -> Routed:
    """The step's inputs packed for their cells and shuffled by cell (lazy).

    Parameters
    ----------
    frames : sequence of (variables, DataFrame)
        The step's inputs: key columns named by the variables, then ``value``.
    shares : Shares
        The grid of cells, with its heavy values' grids.
    vtype : str
        The Spark type of the step's annotations (``value`` is cast to it).
    sources : sequence of Source or None, optional
        Where each input's rows come from, when known: inputs of one source (and one
        reading of its key types) are packed together.
    one : object, optional
        The semiring's one, given only when ``vtype`` is ``bigint`` or ``double``: a pack
        whose annotations are all one then carries no ``value`` column (None: every pack
        keeps its values).
    """
    types = variable_types(frames)
    keys = routing_keys(shares.total)
    every = tuple(grids(shares))
    cut = {v for grid, _, _ in every for v, s in grid.shares if s > 1}
    parts, groups = [], []
    for g, (df, src, group) in enumerate(_groups(frames, sources or [None] * len(frames), types)):
        cols = [f"CAST({sql_name(k)} AS {t}) AS {KEY}{p}" for p, (k, t) in enumerate(src)]
        # Spark's hash of the keys the task does not hash itself, where a grid cuts them
        hashed = sorted(
            {
                p
                for i, pos in zip(group.inputs, group.positions, strict=True)
                for v, p in zip(frames[i][0], pos, strict=True)
                if v in cut and group.types[p] != "bigint"
            }
        )
        variables = tuple(frames[i][0] for i in group.inputs)
        packer = Packer(g, group, variables, every, shares.total, keys, one)
        parts.append(
            df.selectExpr(*cols, value_expr(vtype))
            .selectExpr("*", *[f"xxhash64({KEY}{p}) AS {HASH}{p}" for p in hashed])
            .mapInArrow(packer, f"{CELL} int, {GROUP} int, {PACK} binary")
        )
        groups.append(group)
    rows = union_all(parts).repartition(shares.total, CELL)
    return Routed(rows, tuple(groups), types)


def _groups(
    frames: Sequence[tuple[tuple[str, ...], DataFrame]],
    sources: Sequence[Source | None],
    types: dict[str, str],
) -> list[tuple[DataFrame, tuple[tuple[str, str], ...], Group]]:
    """The inputs in groups of one source whose key positions they read as one type each
    (and at most :data:`BITS` inputs): per group, the source's DataFrame, its
    ``(column, type)`` by key position, and the group."""
    out: list[tuple[Any, tuple[tuple[str, str], ...], list[int], list[tuple[int, ...]]]] = []
    for i, ((vars_, df), s) in enumerate(zip(frames, sources, strict=True)):
        src = s if s is not None else Source(df, vars_, vars_)
        pos = tuple(src.keys.index(c) for c in src.columns)
        want = {p: types[v] for p, v in zip(pos, vars_, strict=True)}
        for key, cols, members, positions in out:
            if key is not src.df or tuple(c for c, _ in cols) != src.keys:
                continue
            if len(members) >= BITS or any(cols[p][1] != t for p, t in want.items()):
                continue
            members.append(i)
            positions.append(pos)
            break
        else:
            fields = src.df.schema
            cols = tuple(
                (k, want.get(p, key_type(fields[k].dataType))) for p, k in enumerate(src.keys)
            )
            out.append((src.df, cols, [i], [pos]))
    return [
        (df, cols, Group(tuple(members), tuple(positions), tuple(t for _, t in cols)))
        for df, cols, members, positions in out
    ]


class Packer:
    """What each task over a group's rows runs (picklable): its rows' cells computed, and
    each cell's rows packed as Arrow IPC, a Spark row ``(cell, group, pack)`` per pack.

    Parameters
    ----------
    index : int
        The group's number in the step (the packs' ``__g``).
    group : Group
        Its inputs and key positions.
    variables : tuple of tuple of str
        Each of the group's inputs' variables (by its key positions).
    grids : tuple
        The step's grids (:func:`grids`): shares, first cell, conditions.
    cells : int
        Every grid's cells together.
    routing : tuple of int
        Per cell, the routing key that sends it to its own partition.
    one : object, optional
        The semiring's one when its values are plain numbers: a pack whose annotations
        are all one leaves its ``value`` column out.
    """

    def __init__(
        self,
        index: int,
        group: Group,
        variables: tuple[tuple[str, ...], ...],
        grids: tuple[tuple[Shares, int, tuple[Cond, ...]], ...],
        cells: int,
        routing: tuple[int, ...],
        one: Any = None,
    ) -> None:
        self.index = index
        self.one = one
        self.group = group
        self.variables = variables
        self.grids = grids
        self.cells = cells
        self.routing = routing
        # the cells a row may go to, at the most: per atom and grid, the coordinates of
        # the variables the atom lacks
        spread = sum(
            math.prod(s for v, s in shares.shares if v not in vs)
            for vs in variables
            for shares, _, _ in grids
        )
        self.read_rows = max(1, min(READ_ROWS, READ_PLACES // max(spread, 1)))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        held: list[pa.RecordBatch] = []
        rows = 0
        for b in batches:
            if b.num_rows:
                held.append(b)
                rows += b.num_rows
            if rows >= self.read_rows:
                yield from self._packed(pa.Table.from_batches(held).combine_chunks())
                held, rows = [], 0
        if held:
            yield from self._packed(pa.Table.from_batches(held).combine_chunks())

    def _packed(self, t: pa.Table) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        n = t.num_rows
        width = len(self.group.types)
        keys = [f"{KEY}{p}" for p in range(width)]
        hashes: dict[int, np.ndarray] = {}

        def hashed(p: int) -> np.ndarray:
            if p not in hashes:
                if self.group.types[p] == "bigint":
                    hashes[p] = key_hash(t.column(keys[p]).to_numpy())
                else:
                    hashes[p] = t.column(f"{HASH}{p}").to_numpy().view(np.uint64)
            return hashes[p]

        routes = []
        for k, (vars_, pos) in enumerate(zip(self.variables, self.group.positions, strict=True)):
            at = dict(zip(vars_, pos, strict=True))
            for shares, first, conds in self.grids:
                base = np.full(n, first, dtype=np.int64)
                stride, spread = 1, []
                for v, s in reversed(shares.shares):
                    if s > 1:
                        if v in at:
                            base += (hashed(at[v]) % np.uint64(s)).astype(np.int64) * stride
                        else:
                            spread.append([c * stride for c in range(s)])
                    stride *= s
                ok = _meets(t, conds, at, self.group.types)
                if ok is not None:
                    base[~ok] = -1
                offsets = np.array(sorted(sum(c) for c in itertools.product(*spread)))
                routes.append(Route(1 << k, base, offsets))
        row, mask, starts = placed(n, routes, self.cells)
        data = _narrow(t, keys, self.one)
        bits = _mask_type(len(self.variables))
        cells: list[int] = []
        packs: list[bytes] = []
        size = 0
        for c in np.flatnonzero(np.diff(starts)):
            for lo in range(int(starts[c]), int(starts[c + 1]), PACK_ROWS):
                hi = min(lo + PACK_ROWS, int(starts[c + 1]))
                part = data.take(row[lo:hi])
                part = part.add_column(0, MASK, pa.array(mask[lo:hi].astype(bits)))
                cells.append(self.routing[c])
                packs.append(_ipc(part))
                size += len(packs[-1])
                if size >= BATCH_BYTES:  # an Arrow binary array holds under 2 GiB
                    yield self._batch(cells, packs)
                    cells, packs, size = [], [], 0
        if cells:
            yield self._batch(cells, packs)

    def _batch(self, cells: list[int], packs: list[bytes]) -> pa.RecordBatch:
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [
                pa.array(cells, pa.int32()),
                pa.array([self.index] * len(cells), pa.int32()),
                pa.array(packs, pa.binary()),
            ],
            names=[CELL, GROUP, PACK],
        )


def _narrow(t: pa.Table, keys: list[str], one: Any) -> pa.Table:
    """The columns a pack carries, as few bytes as they take: integer keys within 32 bits
    as ``int32``, and no ``value`` column when every annotation is the semiring's ``one``
    (and there is a key column: a pack of no keys keeps its values, its rows' count)."""
    import pyarrow as pa

    cols, names = [], []
    for k in keys:
        c = t.column(k)
        if pa.types.is_int64(c.type) and len(c):
            a = c.to_numpy()
            if a.min() >= -(2**31) and a.max() < 2**31:
                c = pa.array(a.astype(np.int32))
        cols.append(c)
        names.append(k)
    v = t.column(VALUE)
    if not (keys and one is not None and len(v) and bool(np.all(v.to_numpy() == one))):
        cols.append(v)
        names.append(VALUE)
    return pa.table(cols, names=names)


def _mask_type(atoms: int) -> Any:
    """The narrowest unsigned integer holding ``atoms`` bits."""
    for t in (np.uint8, np.uint16, np.uint32):
        if atoms <= 8 * np.dtype(t).itemsize:
            return t
    return np.int64


def _meets(
    t: pa.Table, conds: Sequence[Cond], at: dict[str, int], types: tuple[str, ...]
) -> np.ndarray | None:
    """The rows meeting a grid's conditions on the variables the input holds (None: no
    condition applies)."""
    ok = None
    for v, values, heavy in conds:
        if v not in at:
            continue
        p = at[v]
        col = t.column(f"{KEY}{p}")
        if types[p] == "bigint":
            test = np.isin(col.to_numpy(), np.asarray(values, dtype=np.int64))
        else:
            import pandas as pd

            test = pd.Series(col.to_pylist(), dtype=object).isin(list(values)).to_numpy()
        test = test if heavy else ~test
        ok = test if ok is None else ok & test
    return ok


def _ipc(part: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, part.schema) as w:
        w.write_table(part)
    return sink.getvalue().to_pybytes()


def unpacked(batches: Iterator[pa.RecordBatch]) -> dict[int, dict[int, list[pa.Table]]]:
    """The packs a cell's task received, read back (no copy): per cell (its routing key)
    and group, its packs as tables (``__rel``, the mask, first).  Packs of one group may
    differ in their columns' types (keys narrowed to 32 bits, or no ``value`` column:
    the tasks that wrote them chose so for their own rows)."""
    import pyarrow as pa

    got: dict[int, dict[int, list[pa.Table]]] = {}
    for b in batches:
        cells = b.column(CELL).to_numpy(zero_copy_only=False)
        groups = b.column(GROUP).to_numpy(zero_copy_only=False)
        packs = b.column(PACK)
        for i in range(b.num_rows):
            t = pa.ipc.open_stream(packs[i].as_buffer()).read_all()
            got.setdefault(int(cells[i]), {}).setdefault(int(groups[i]), []).append(t)
    return got


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
