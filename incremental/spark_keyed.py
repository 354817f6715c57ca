"""A relation of a Spark-resident view: a materialised DataFrame plus the keys changed since.

:class:`RemoteKeyed` is the Spark side of :class:`incremental.regimes.Keyed`.  Its
``base`` is a DataFrame computed once and cut from its lineage
(``localCheckpoint``), hash-partitioned by its keys; ``over`` holds, in the
driver, the annotation of every key changed since the base was written (zero
where the key is gone).  A tick reads the base only at the keys it touches (one
Spark job: a semi-join with those keys, collected), and changes only ``over``;
once ``over`` outgrows :func:`over_limit` it is folded into a new base (one
job).  So neither lineage nor plans grow with the ticks, and a tick does not
copy the relation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from faq import VALUE, Factor, settings
from faq.kernel import KeyedTable, Table, match_keys, spark_type
from faq.session import checkpoint_ids, fixed_plans, free_checkpoints, release_unreferenced
from faq.spark import all_of, arrow_to_table, isin_literals
from incremental import zset
from incremental.hot import HotRows
from incremental.protocol import Contents
from incremental.tables import concat, distinct_keys, drop_zeros, empty_table, with_values
from semirings import Semiring
from semirings import spark as sops
from semirings.local import LocalOps, sort_rows
from semirings.local import distinct as distinct_values

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["RemoteKeyed", "SparkContext", "over_limit"]

_KINDS = {"bigint": "int", "int": "int", "smallint": "int", "tinyint": "int"}
_EXACT = 1 << 60  # base, overrides and their negations sum without overflow below this


def over_limit(rows: int) -> float:
    """How many changed keys a relation of ``rows`` rows keeps before a fold."""
    st = settings()
    return max(st.log_rows, st.log_fraction * rows)


class SparkContext:
    """What the relations of one Spark-resident view share: the session, the partition count
    of their bases, and the checkpoints the view made (and those it handed out)."""

    def __init__(self, spark: SparkSession, partitions: int) -> None:
        self.spark = spark
        self.partitions = partitions
        self.owned: set[int] = set()
        self.shared: set[int] = set()
        self.settled = 0

    def materialise(self, df: DataFrame) -> DataFrame:
        """Compute ``df`` partitioned by its keys once and cut its lineage.

        Adaptive execution is switched off while the checkpoint is computed: the
        checkpoint of an adaptive plan does not know its partitioning.
        """
        with fixed_plans(self.spark):
            out = zset.partition(df, self.partitions).localCheckpoint(eager=True)
        self.owned |= checkpoint_ids(out)
        return out

    def frame(self, t: Table, types: Sequence[str], vtype: str) -> DataFrame:
        """A driver table as a DataFrame of its keys (``types``) and ``value`` (``vtype``)."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        assert t.values is not None
        arrays = [_arrow(c) for c in t.cols] + [_arrow(t.values)]
        names = [*(f"c{i}" for i in range(len(t.cols))), VALUE]
        if not t.rows:
            schema = ", ".join(f"`{n}` {ty}" for n, ty in zip(names, [*types, vtype], strict=True))
            return self.spark.createDataFrame([], schema).toDF(*t.vars, VALUE)
        df = self.spark.createDataFrame(pa.Table.from_arrays(arrays, names=names))
        keys = zip(names[:-1], types, t.vars, strict=True)
        cols = [F.col(n).cast(ty).alias(v) for n, ty, v in keys]
        return df.select(*cols, F.col(VALUE).cast(vtype).alias(VALUE))

    def settle(self, live: set[int]) -> None:
        """Free now the checkpoints this view made that ``live`` (what its state reads) does
        not hold, except those handed out (left to Spark's cleaner, run every
        ``gc_ticks`` calls, a setting)."""
        self.settled += 1
        if self.owned:
            dead = self.owned - live
            free_checkpoints(self.spark, dead - self.shared)
            self.owned -= dead
            self.shared -= dead
        if self.settled % settings().gc_ticks == 0:
            release_unreferenced(self.spark)


@dataclass(frozen=True)
class RemoteKeyed:
    """A relation in Spark (:class:`incremental.regimes.Keyed`): ``base`` ⊕-overridden by
    ``over``.

    ``rows`` is exact; ``distinct`` (per key column) are upper bounds.  ``typed`` is
    False while the relation is the default empty one, whose key types the first delta
    may choose.  During a tick, ``near`` may hold the base rows the tick reads, fetched
    at once (:mod:`incremental.reach`): those whose column ``c`` holds one of
    ``cover[c]``; reads they answer run no job, and :meth:`factor` is then a local factor
    over them (the delta rule reads nothing else).  A tick that reaches past the bound
    may instead hold in ``at_rows`` base rows fetched at (a superset of) its changed keys
    ``at_keys``: lookups at those keys read them, and the relation stays in Spark for
    the delta queries.  ``under`` pairs ``over`` with the base rows at its keys (tracked
    by :meth:`replace` since the base was written; None when not known), so that a ring's
    delta rule can read the relation as the base plus a correction (:meth:`factor`).
    ``hot`` holds base rows kept in the driver from one tick to the next (hubs' rows a
    tick would fetch again, :mod:`incremental.hot`).  ``origin`` and ``changes`` are the
    journal's (:class:`incremental.protocol.Part`): a relation made by :meth:`journaled`
    records every table :meth:`replace` puts in it since; others record nothing.
    """

    vars: tuple[str, ...]
    ops: LocalOps
    types: tuple[str, ...]
    vtype: str
    base: DataFrame
    over: Table
    rows: int
    distinct: tuple[int, ...]
    ctx: SparkContext = field(compare=False, repr=False)
    typed: bool = True
    near: Table | None = field(default=None, compare=False, repr=False)
    cover: dict[int, np.ndarray] | None = field(default=None, compare=False, repr=False)
    at_rows: Table | None = field(default=None, compare=False, repr=False)
    at_keys: tuple[np.ndarray, ...] | None = field(default=None, compare=False, repr=False)
    under: tuple[Table, Table] | None = field(default=None, compare=False, repr=False)
    origin: object | None = field(default=None, compare=False, repr=False)
    changes: tuple[Table, ...] = field(default=(), compare=False, repr=False)
    hot: HotRows | None = field(default=None, compare=False, repr=False)
    exact: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        ctx: SparkContext,
        vars_: tuple[str, ...],
        ops: LocalOps,
        types: tuple[str, ...],
        vtype: str,
        base: DataFrame,
        rows: int,
        distinct: tuple[int, ...] | None = None,
        typed: bool = True,
    ) -> RemoteKeyed:
        """A relation whose contents are ``base`` (materialised, consolidated, no zeros)."""
        over = empty_table(vars_, ops, _empty_cols(types))
        dist = distinct if distinct is not None else (rows,) * len(vars_)
        return cls(vars_, ops, types, vtype, base, over, rows, dist, ctx, typed, under=(over, over))

    @classmethod
    def empty(
        cls,
        ctx: SparkContext,
        vars_: tuple[str, ...],
        ops: LocalOps,
        types: tuple[str, ...] | None,
        vtype: str,
    ) -> RemoteKeyed:
        """An empty relation (``types`` None: bigint keys until a delta chooses)."""
        typed = types is not None
        types = types if types is not None else tuple("bigint" for _ in vars_)
        base = ctx.frame(empty_table(vars_, ops, _empty_cols(types)), types, vtype)
        return cls.of(ctx, vars_, ops, types, vtype, base, 0, typed=typed)

    @property
    def fresh(self) -> bool:
        """Empty, and never given key types."""
        return not self.typed and self.rows == 0

    @property
    def keyed_table(self) -> None:
        """None: kept in Spark, the delta rule reads it through :meth:`factor`."""
        return None

    @property
    def token(self) -> object:
        """Identifies the contents: the base and the overrides (both kept by the state)."""
        return Contents(self.base, self.over)

    def journaled(self) -> RemoteKeyed:
        """The same relation, recording its changes from now on (for the journal)."""
        return replace(self, origin=self.token, changes=())

    def kinds(self) -> list[str]:
        """The kinds of the key columns."""
        return [_KINDS.get(t, "float" if t in ("double", "float") else "str") for t in self.types]

    def checkpoints(self) -> frozenset[int]:
        """The checkpoints the relation reads."""
        return checkpoint_ids(self.base)

    # -- reading ------------------------------------------------------------------------------
    def current(self) -> DataFrame:
        """The contents as a DataFrame (the base with the changed keys replaced; lazy)."""
        if not self.over.rows:
            return self.base
        kept = drop_zeros(self.over, self.ops)
        now = self.ctx.frame(kept, self.types, self.vtype)
        if not self.vars:
            return now
        return self._without(self.over.cols).unionByName(now)

    def table(self) -> Table:
        """The whole relation in the driver (one Spark job)."""
        return self._collect(self.current())

    def at(self, keys: Sequence[np.ndarray]) -> Table:
        """The rows whose whole key is one of ``keys`` (one Spark job at most)."""
        return self.matching(keys, whole=True)

    def matching(self, keys: Sequence[np.ndarray], whole: bool = False) -> Table:
        """The rows whose leading key columns are one of ``keys`` (one Spark job at most)."""
        if not self.vars and self.over.rows:  # a nullary relation's one key was changed
            return drop_zeros(self.over, self.ops)
        if not self.vars or not keys:
            return self.table()
        keys = distinct_keys(keys)
        k = len(keys)
        over = self.over
        hit = match_keys(over.cols[:k], keys)[0] if over.rows else np.zeros(0, bool)
        from_over = drop_zeros(over.take(np.flatnonzero(hit)), self.ops)
        ask = keys
        if whole and over.rows:  # keys the overrides answer need no lookup
            ask = tuple(c[~match_keys(keys, over.cols)[0]] for c in keys)
        if not len(ask[0]) or self.rows == 0:
            return from_over
        found = self._base_rows(ask)
        if k:  # the filter reads a superset: keep the rows whose leading key is asked
            found = found.take(np.flatnonzero(match_keys(found.cols[:k], ask)[0]))
        if over.rows:  # base rows whose key the overrides replace
            found = found.take(np.flatnonzero(~match_keys(found.cols, over.cols)[0]))
        return concat(found, from_over)

    def _base_rows(self, keys: tuple[np.ndarray, ...]) -> Table:
        """Base rows whose leading key columns take values in ``keys`` column by column (a
        superset of those at ``keys``): from ``near`` when it covers them, or from
        ``at_rows`` when every key is one of ``at_keys``, else one job."""
        at = self.at_keys
        whole = at is not None and len(keys) == len(self.vars)
        if self.at_rows is not None and whole and match_keys(keys, at)[0].all():
            return self.at_rows
        if self.near is not None and self.cover is not None:
            covered = np.zeros(len(keys[0]), dtype=bool)
            for c, values in self.cover.items():
                if c < len(keys):  # the key's row, if any, is fetched when one column is
                    covered |= np.isin(keys[c], values)
            if covered.all():
                return self.near
        return self._collect(self._near(keys))

    def with_near(
        self,
        rows: Table,
        cover: dict[int, np.ndarray],
        hot: HotRows | None = None,
        exact: bool = False,
    ) -> RemoteKeyed:
        """This relation with the base ``rows`` one tick reads, whose column ``c`` holds one
        of ``cover[c]`` (see :mod:`incremental.reach`), and the base rows it keeps in the
        driver from now on (``hot``; None: those it kept).  ``exact``: every lookup the
        delta rule's keyed runners make falls inside the cover (each term reads the other
        atoms at its change's values: one hop), so :meth:`factor` may hand them the rows
        as a keyed table."""
        hot = self.hot if hot is None else hot
        return replace(self, near=rows, cover=cover, hot=hot, exact=exact)

    def with_rows_at(self, keys: tuple[np.ndarray, ...], rows: Table) -> RemoteKeyed:
        """This relation with the base ``rows`` at (a superset of) the keys ``keys``,
        fetched for a tick whose delta queries read the relation in Spark."""
        return replace(self, at_rows=rows, at_keys=keys)

    def without_near(self) -> RemoteKeyed:
        """This relation without the rows fetched for a tick."""
        if self.near is None and self.at_rows is None:
            return self
        return replace(self, near=None, cover=None, at_rows=None, at_keys=None, exact=False)

    def near_rows(self, at: Any) -> Table:
        """Fetched base rows (an Arrow table of the keys, then ``value``; ``()``: none) as a
        table of this relation."""
        if isinstance(at, tuple):
            return empty_table(self.vars, self.ops, _empty_cols(self.types))
        t = arrow_to_table(
            at.rename_columns([*self.vars, VALUE]),
            self.vars,
            self.ops.semiring,
            "view state",
            check=False,
            unique=True,
        )
        return with_values(t, self.ops)

    def _without(self, keys: tuple[np.ndarray, ...]) -> DataFrame:
        """The base rows whose key is none of ``keys`` (distinct): an anti-join with a
        DataFrame of them.  (A filter of literal keys would spare the join's broadcast job,
        but its plan grows with the changed keys and its analysis slows every read.)"""
        probe = Table(self.vars, keys, np.ones(len(keys[0]), dtype=bool))
        frame = self.ctx.frame(probe, self.types, "boolean").select(*self.vars)
        return self.base.join(frame, on=list(self.vars), how="left_anti")

    def _near(self, keys: tuple[np.ndarray, ...]) -> DataFrame:
        """The base rows whose leading key columns take values in ``keys`` column by column
        (a superset of the rows at ``keys``): a filter of literals for few keys, a
        semi-join with the keys otherwise."""
        k = len(keys)
        values = [distinct_values(c) for c in keys]
        if max(len(v) for v in values) <= settings().filter_values:
            conds = [
                isin_literals(col, ty, v)
                for v, col, ty in zip(values, self.vars[:k], self.types[:k], strict=True)
            ]
            return self.base.filter(all_of(conds))
        probe = Table(self.vars[:k], keys, np.ones(len(keys[0]), dtype=bool))
        frame = self.ctx.frame(probe, self.types[:k], "boolean").select(*self.vars[:k])
        return self.base.join(frame.hint("broadcast"), on=list(self.vars[:k]), how="left_semi")

    def _collect(self, df: DataFrame) -> Table:
        at = df.toArrow()
        t = arrow_to_table(at, self.vars, self.ops.semiring, "view state", check=False, unique=True)
        return with_values(t, self.ops)

    # -- changing -----------------------------------------------------------------------------
    def plus(self, delta: Table) -> tuple[RemoteKeyed, Table, Table]:
        """``self ⊕ delta``, the rows before at its keys, the annotations after."""
        delta = with_values(delta, self.ops)
        if not delta.rows:  # nothing to read or change
            return self, delta, delta
        old = self.at(delta.cols)
        _, before, after = KeyedTable.of(old, self.ops).plus(delta)
        return self.replace(after, before), before, after

    def replace(self, new: Table, old: Table | None = None) -> RemoteKeyed:
        """``new``'s annotation at each of its keys (zero: removed); ``old``, the rows held
        before at (at least) those keys, spares a lookup."""
        new = with_values(Table(self.vars, new.cols, new.values), self.ops)
        if not new.rows:
            return self
        if old is None:
            old = self.at(new.cols)
        gone = int(match_keys(old.cols, new.cols)[0].sum()) if old.rows else 0
        if not self.vars:
            gone = min(old.rows, 1)
        added = int(self.ops.nonzero(new.values).sum())  # type: ignore[arg-type]
        rows = self.rows - gone + added
        if self.over.rows and self.vars:
            stale = match_keys(self.over.cols, new.cols)[0]
            over = concat(self.over.take(np.flatnonzero(~stale)), new)
        else:
            over = new
        over = Table(self.vars, over.cols, over.values)
        dist = tuple(min(rows, d + new.rows) for d in self.distinct)
        changes = (*self.changes, new) if self.origin is not None else ()
        under = self._under(over, new, old)
        out = replace(
            self, over=over, rows=rows, distinct=dist, typed=True, changes=changes, under=under
        )
        if over.rows > over_limit(rows):
            return out.folded()
        return out

    def folded(self) -> RemoteKeyed:
        """The same contents with the changed keys written into a new base (one job)."""
        if not self.over.rows:
            return self
        base = self.ctx.materialise(self.current())
        hot = None if self.hot is None else self.hot.folded(self.over, self.ops)
        over = empty_table(self.vars, self.ops, self.over.cols)
        gone = {"near": None, "cover": None, "at_rows": None, "at_keys": None, "exact": False}
        return replace(self, base=base, over=over, under=(over, over), hot=hot, **gone)

    def _under(self, over: Table, new: Table, old: Table) -> tuple[Table, Table] | None:
        """The base rows at the keys of ``over`` (which ``new`` joined): those known
        before, and ``old``'s rows at the keys ``new`` adds (the base's, as no override
        held them)."""
        if self.under is None or self.under[0] is not self.over or not self.vars:
            return None
        fresh = new
        if self.over.rows:
            fresh = new.take(np.flatnonzero(~match_keys(new.cols, self.over.cols)[0]))
        if not old.rows or not fresh.rows:
            return over, self.under[1]
        at = drop_zeros(old.take(np.flatnonzero(match_keys(old.cols, fresh.cols)[0])), self.ops)
        return over, concat(self.under[1], at)

    def emptied(self, like: Sequence[np.ndarray]) -> RemoteKeyed:
        """An empty relation with the key types of ``like``."""
        types = tuple(spark_type(c) for c in like)
        return RemoteKeyed.empty(self.ctx, self.vars, self.ops, types, self.vtype)

    # -- as factors ---------------------------------------------------------------------------
    def factor(self, S: Semiring, name: str) -> Factor:
        """The contents as a trusted Spark factor (no job); during a tick whose reads were
        fetched (``near``), a local factor over the fetched rows and the overrides: a
        keyed one when every lookup of the delta rule falls inside what was fetched
        (``exact``, see :meth:`with_near`), so that the tick runs the driver state's
        runners for keyed relations (:func:`incremental.terms.keyed_terms`: seeded joins
        on tries of the fetched rows) instead of planning and joining each term.

        With integer annotations in a ring (``S.is_ring``: the stored counts of the
        additive regimes), changed keys are not cut from the base by an anti-join (a
        broadcast job per read of the relation): the factor is the base plus a
        correction, the overrides and the negated base rows at their keys (``under``),
        left for the query to ⊕-combine.  The sums are exact: integers, far from
        overflow (checked).
        """
        if self.near is not None:
            if self.exact:
                return Factor.keyed(self._near_keyed(), S, name)
            return Factor.from_table(self._near_contents(), S, name)
        fix = self._correction(S)
        if fix is not None:
            df = self.base.unionByName(self.ctx.frame(fix, self.types, self.vtype))
            rows = self.rows + fix.rows
            return Factor.trusted(
                df, self.vars, S, rows=rows, distinct=self.distinct, name=name, consolidated=False
            )
        df = self.current()
        return Factor.trusted(df, self.vars, S, rows=self.rows, distinct=self.distinct, name=name)

    def _near_contents(self) -> Table:
        """The fetched rows with the changed keys written in (a key changed to zero gone)."""
        assert self.near is not None
        kept = self.near
        if self.over.rows:
            kept = kept.take(np.flatnonzero(~match_keys(kept.cols, self.over.cols)[0]))
        return concat(kept, drop_zeros(self.over, self.ops))

    def _near_keyed(self) -> KeyedTable:
        """The rows a tick fetched, with the changed keys, as a keyed table.

        Where the relation keeps hub rows in the driver (``hot``), the table is theirs
        (:meth:`incremental.hot.HotRows.keyed`, whose tries are built once and serve every
        tick until the kept rows change) with the tick's other rows and the changed keys
        as its overrides: a tick then sorts the rows it fetched from Spark, not the
        hundreds of thousands of hub rows it reads again.  Its contents are the
        relation's rows at every kept or fetched key (a base row holding a covered
        value is a kept one: :mod:`incremental.hot`)."""
        near, over, ops, hot = self.near, self.over, self.ops, self.hot
        assert near is not None
        if hot is None or not hot.rows.rows:
            return KeyedTable.of(self._near_contents(), ops)
        rest = near.take(np.flatnonzero(~hot.holds(near)))  # fetched, not kept
        if over.rows and rest.rows:
            rest = rest.take(np.flatnonzero(~match_keys(rest.cols, over.cols)[0]))
        changes = concat(rest, over) if over.rows else rest
        changes = changes.take(sort_rows(changes.cols))  # in key order, each key once
        base = hot.keyed(ops)
        # counted as KeyedTable.replace counts them (not replace itself: past log_rows it
        # begins a fold on the helper thread, for a table that lives one tick): the kept
        # rows, less those at changed keys, plus every non-zero override
        held = int(np.count_nonzero(ops.nonzero(base.values_at(over.cols)))) if over.rows else 0
        rows = base.rows - held + int(np.count_nonzero(ops.nonzero(changes.values)))
        return base.overridden(changes, rows)

    def _correction(self, S: Semiring) -> Table | None:
        """What turns the base into the contents when ⊕-added to it (see :meth:`factor`),
        or None where that does not hold exactly."""
        under = self.under
        if not self.over.rows or not self.vars or under is None or under[0] is not self.over:
            return None
        if not S.is_ring or self.vtype != "bigint":
            return None
        now, was = drop_zeros(self.over, self.ops), under[1]
        values = [t.values for t in (now, was) if t.rows]
        if any(np.abs(v).max() >= _EXACT for v in values):  # type: ignore[arg-type]
            return None
        negated = Table(self.vars, was.cols, -np.asarray(was.values, dtype=np.int64))
        return concat(now, negated)

    def indicator(self, S: Semiring, name: str) -> Factor:
        """Every present key annotated ``S.one`` (``S`` is boolean)."""
        df = self.current().select(*self.vars, sops.constant(S, S.one).alias(VALUE))
        return Factor.trusted(df, self.vars, S, rows=self.rows, distinct=self.distinct, name=name)


def _empty_cols(types: Sequence[str]) -> tuple[np.ndarray, ...]:
    return tuple(
        np.empty(0, np.int64)
        if _KINDS.get(t) == "int"
        else np.empty(0, np.float64 if t in ("double", "float") else object)
        for t in types
    )


def _arrow(a: np.ndarray) -> Any:
    import pyarrow as pa

    if a.dtype == object:
        return pa.array(a.tolist())
    return pa.array(a)
