"""A view's state held in Spark (``IncrementalView(..., state="spark")``), for relations
beyond the driver.

:class:`SparkState` follows :class:`incremental.protocol.ViewState` and keeps
every relation (and the output) as a :class:`incremental.spark_keyed.RemoteKeyed`:
a materialised DataFrame hash-partitioned by its keys, plus the keys changed
since it was written.  A tick runs the same regime code as the driver state
(:mod:`incremental.regimes`): its deltas and the rows of the state they reach
come to the driver (in the additive regimes, one Spark job per hop from the
changed atoms: :mod:`incremental.reach`; otherwise a semi-join per relation
read, one job each), the delta queries read those rows, or the relations as
DataFrames (:func:`faq.solve_delta`: small deltas in the driver, reading only
the rows they reach; larger ones, or ``view.local = False``, as Spark jobs),
and only the changed keys are kept; so ``step()`` and ``result()`` are those of
the driver state.

Initial contents are loaded by Spark jobs (they need not fit in the driver):
per relation one job to check and count them, one to materialise what is
stored, and, for the ``general`` regime's rows repeated with weights, one for
their distinct multiplicities.  ``real`` sums of the initial contents are
Spark's (not compensated); the ticks after are compensated as in the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq import VALUE, Factor, Rule, settings
from faq.session import checkpoint_ids, get_spark
from faq.spark import parallelism
from incremental import zset
from incremental.deltas import WEIGHT, Rows, check_weight_type, layout
from incremental.journal import Frame
from incremental.manifest import (
    OUTPUT,
    OUTPUT_LOW,
    OUTPUT_MAGNITUDE,
    abs_part,
    low_part,
    relation_part,
    rows_part,
)
from incremental.protocol import Change, How
from incremental.reach import OUT, Beyond, Near, gather, one_hop
from incremental.regimes import Maintained, Sizes, compensated, step_semiring, stored_semiring
from incremental.regimes import regime as regime_of
from incremental.spark_keyed import RemoteKeyed, SparkContext
from incremental.store import Store
from incremental.tables import ANNOTATION
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkState"]


@dataclass(frozen=True)
class SparkState(Sizes):
    """A view's relations and output in Spark (:class:`incremental.protocol.ViewState`)."""

    m: Maintained
    ctx: SparkContext
    where: str = "spark"

    # -- the protocol -------------------------------------------------------------------------
    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None
    ) -> tuple[SparkState, Change]:
        """The next state and the change of the output (see :meth:`Maintained.apply`).

        In the additive regimes, the rows the tick reads are fetched first, one Spark
        job per hop from the changed atoms, when the rule bounds them
        (:mod:`incremental.reach`) and they are at most ``max_fetch_rows`` (a setting);
        the delta rule then runs in the driver over them.  Otherwise the delta queries
        read the relations in Spark; when those rows are more than the bound, as Spark
        jobs from the start (:func:`faq.solve_delta` with ``local=False``).
        """
        m = self.m.journaled().typed(deltas)  # a key type refused before any fetch
        near = self._gather(m, deltas, how)
        beyond = near if isinstance(near, Beyond) else None
        if beyond is not None:  # the driver's own lookups would meet the same bound
            how, near = how._replace(local=False), None
            held = {n: m.rels[n].with_rows_at(deltas[n].cols, r) for n, r in beyond.at_keys.items()}
            m = replace(m, rels={**m.rels, **held})  # the tick's own lookups read them
        if near is not None:
            exact = one_hop(m.rule, deltas)  # the delta rule may read them as keyed tables
            rels = {n: r.with_near(*near[n], exact=exact) for n, r in m.rels.items() if n in near}
            out = m.out.with_near(*near[OUT]) if OUT in near else m.out
            m = replace(m, rels={**m.rels, **rels}, out=out)
        m, change = m.apply(deltas, how, sets)
        if near is not None or beyond is not None:
            rels = {n: r.without_near() for n, r in m.rels.items()}
            m = replace(m, rels=rels, out=m.out.without_near())
        return replace(self, m=m), change

    @staticmethod
    def _gather(m: Maintained, deltas: Mapping[str, Rows], how: How) -> Near | Beyond | None:
        """The rows a tick of state ``m`` (its deltas' key types checked) reads, fetched
        hop by hop (:func:`incremental.reach.gather`), when that applies: an additive
        regime, delta queries allowed in the driver (``how``), integer or string keys,
        within the bounds of :func:`faq.plan.bounds` (``max_literals`` values to look for
        in a round, ``max_fetch_rows`` rows)."""
        if m.regime == "general" or m.comp or not how.local:
            return None
        if any(k not in ("int", "str") for r in m.rels.values() for k in r.kinds()):
            return None
        return gather(m.rule, deltas, m.rels, m.out)

    def result(self) -> Factor:
        """The output in the view's semiring (a DataFrame over the state: no job)."""
        return self._handed(self.m.shown(self.m.out, self.m.rule.name))

    def relation(self, name: str) -> Factor:
        """Relation ``name`` in the view's semiring."""
        return self._handed(self.m.shown(self.m.rels[name], name))

    def _handed(self, f: Factor) -> Factor:
        self.ctx.shared |= checkpoint_ids(f.df) & self.ctx.owned  # the caller may keep it
        return f

    def describe(self) -> dict[str, Any]:
        """What the manifest records besides the parts: the key types of each part."""
        return {"types": {p: list(r.types) for p, r in self.parts().items()}}

    def settle(self) -> None:
        """Free the checkpoints this state no longer reads (after every step)."""
        m = self.m
        live: set[int] = set()
        for r in (*m.rels.values(), *m.rows.values(), m.out, *m.comp.values()):
            live |= r.checkpoints()  # type: ignore[attr-defined]
        self.ctx.settle(live)

    # -- creating -------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        rule: Rule,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        initial: Mapping[str, Any],
        how: How,
    ) -> SparkState:
        """A state holding ``initial`` (Spark DataFrames or factors, in the delta format),
        loaded by Spark jobs, and its output by one batch solve.

        Raises
        ------
        ValueError
            As a delta would: wrong columns, null keys or multiplicities, annotations
            outside the semiring, a negative multiplicity.
        """
        spark = get_spark()
        R = step_semiring(S)  # counting's values are read signed, as deltas are
        frames = {n: _rows_frame(rule, n, g, R) for n, g in initial.items() if g is not None}
        checked = {n: _check(f, R, keys[n], n) for n, f in frames.items()}
        ctx = SparkContext(spark, _partitions(spark, sum(c[1] for c in checked.values())))
        m = _empty(ctx, rule, S, keys, {n: c[2] for n, c in checked.items()})
        W = m.stored
        rels, rows = dict(m.rels), dict(m.rows)
        for n, (df, _, _types) in checked.items():
            label = f"initial contents of relation {n!r}"
            if m.regime == "general":
                counted = df.groupBy(*keys[n], VALUE).agg(F().sum(WEIGHT).alias("__n"))
                ms = counted.select(
                    *keys[n], F().col(VALUE).alias(ANNOTATION), F().col("__n").alias(VALUE)
                )
                rows[n] = _stored(ctx, ms, m.rows[n], label, "retracts rows it does not hold")
                rels[n] = _annotations(ctx, rows[n], m.rels[n], S)
                continue
            if m.regime == "boolean":
                value = F().col(WEIGHT)
            else:
                value = F().col(VALUE).cast(sops.ops(W).type) * F().col(WEIGHT)
            stored = zset.consolidate(df.select(*keys[n], value.alias(VALUE)), W)
            rels[n] = _stored(ctx, stored, m.rels[n], label, _negative(m.regime, S))
        m = replace(m, rels=rels, rows=rows)
        m = replace(m, out=_output(ctx, m, how))
        if m.comp:
            m = replace(m, comp=_magnitudes(ctx, m))
        return cls(m, ctx)

    @classmethod
    def restore(
        cls,
        rule: Rule,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        store: Store,
        manifest: dict[str, Any],
        frames: Sequence[Frame] = (),
    ) -> SparkState:
        """A state from a manifest (of either state: the format is one) and the journal's
        ``frames`` after it, replayed by the store (:meth:`incremental.store.Store.replay`)."""
        spark = get_spark()
        parts = manifest["parts"]
        rels_rows = sum(int(e["rows"]) for p, e in parts.items() if p != OUTPUT)
        ctx = SparkContext(spark, _partitions(spark, rels_rows))
        m = _empty(ctx, rule, S, keys, {})
        probe = {relation_part(n): r for n, r in m.rels.items()}
        probe |= {rows_part(n): r for n, r in m.rows.items()} | {OUTPUT: m.out, **m.comp}
        types = manifest.get("types", {})
        read = {}
        for p, e in parts.items():
            like = probe[p]
            t = tuple(types.get(p, like.types))
            df = spark.read.parquet(str(store.root / e["base"]))
            df = df.toDF(*like.vars, VALUE).select(
                *[F().col(v).cast(ty) for v, ty in zip(like.vars, t, strict=True)],
                F().col(VALUE).cast(like.vtype),
            )
            base = ctx.materialise(df)
            r = RemoteKeyed.of(ctx, like.vars, like.ops, t, like.vtype, base, int(e["rows"]))
            if e.get("over"):
                over = store.read_table(e["over"], like.vars, like.ops)
                r = replace(r, over=over)
            read[p] = r
        read = store.replay(manifest, read, frames)
        if m.regime == "general":
            rows = {n: read[rows_part(n)] for n in keys}
            rels = {n: _annotations(ctx, r, m.rels[n], S) for n, r in rows.items()}
            m = replace(m, rels=rels, rows=rows, out=read[OUTPUT])
        else:
            m = replace(m, rels={n: read[relation_part(n)] for n in keys}, out=read[OUTPUT])
        if m.comp:
            comp = {p: read.get(p, r) for p, r in m.comp.items()}
            m = replace(m, comp=_magnitudes(ctx, replace(m, comp=comp), OUTPUT_MAGNITUDE in read))
        return cls(m, ctx)


# -- helpers ------------------------------------------------------------------------------------
def F() -> Any:  # noqa: N802 - the pyspark.sql.functions module, imported on first use
    """``pyspark.sql.functions``."""
    from pyspark.sql import functions

    return functions


def _empty(
    ctx: SparkContext,
    rule: Rule,
    S: Semiring,
    keys: dict[str, tuple[str, ...]],
    types: Mapping[str, tuple[str, ...]],
) -> Maintained:
    """Empty relations and output (key types ``types`` where given)."""
    W = stored_semiring(S)
    o, io = local_ops(W), local_ops(semirings.INTEGER)
    vtype, itype = sops.ops(W).type, sops.ops(semirings.INTEGER).type
    rels = {n: RemoteKeyed.empty(ctx, k, o, types.get(n), vtype) for n, k in keys.items()}
    rows = {}
    if regime_of(S) == "general":
        atype = sops.ops(S).type
        rows = {
            n: RemoteKeyed.empty(
                ctx, (*k, ANNOTATION), io, (*(types.get(n) or ("bigint",) * len(k)), atype), itype
            )
            for n, k in keys.items()
        }
    head = _head_types(rule, {n: r.types for n, r in rels.items()})
    out = RemoteKeyed.empty(ctx, rule.head, o, head, vtype)
    comp = {}
    if compensated(S):
        comp = {p(n): rels[n] for n in keys for p in (low_part, abs_part)}
        comp |= {p: out for p in (OUTPUT_LOW, OUTPUT_MAGNITUDE)}
    return Maintained(rule, S, dict(keys), rels, rows, out, comp)


def _head_types(rule: Rule, types: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    out = []
    for v in rule.head:
        t = "bigint"
        for a in rule.atoms:
            if v in a.vars:
                t = types[a.relation][a.positions[a.vars.index(v)]]
                break
        out.append(t)
    return tuple(out)


def _rows_frame(rule: Rule, name: str, given: Any, S: Semiring) -> DataFrame:
    """Initial contents as a DataFrame of key columns, ``value`` and ``_weight``."""
    from pyspark.sql import DataFrame as SparkDataFrame

    label = f"initial contents of relation {name!r}"
    if isinstance(given, Factor):
        given = given.df
    connect = type(given).__module__.startswith("pyspark.sql.connect")
    if not isinstance(given, SparkDataFrame) and not connect:
        raise TypeError(f"{label}: expected a Spark DataFrame or a Factor, got {type(given)}")
    atom = next(a for a in rule.atoms if a.relation == name)
    fields = given.schema.fields
    cols, value, weight = layout([f.name for f in fields], rule.relations[name], label, str(atom))
    if weight is not None:
        check_weight_type(fields[weight].dataType.simpleString(), label)
    t = sops.ops(S).type
    keys = [F().col(f"`{fields[i].name}`").alias(f"k{j}") for j, i in enumerate(cols)]
    v = F().col(f"`{fields[value].name}`") if value is not None else sops.constant(S, S.one)
    w = F().col(WEIGHT).cast("bigint") if weight is not None else F().lit(1).cast("bigint")
    return given.select(*keys, v.alias(VALUE), w.alias(WEIGHT)).withColumn(
        VALUE, F().col(VALUE).cast(t)
    )


def _check(
    df: DataFrame, S: Semiring, keys: tuple[str, ...], name: str
) -> tuple[DataFrame, int, tuple[str, ...]]:
    """Initial rows checked (one job): non-null keys and weights, annotations of ``S``; the
    rows (zeros and zero weights dropped, keys renamed), their count and key types."""
    label = f"initial contents of relation {name!r}"
    o = sops.ops(S)
    ks = [f"k{i}" for i in range(len(keys))]
    aggs = [F().count(F().lit(1)).alias("rows")]
    aggs += [F().sum(F().col(k).isNull().cast("int")).alias(f"null{k}") for k in ks]
    aggs.append(F().sum(F().col(WEIGHT).isNull().cast("int")).alias("nullw"))
    bad = F().col(VALUE).isNull() | ~F().coalesce(o.valid(F().col(VALUE)), F().lit(False))
    aggs.append(F().sum(bad.cast("int")).alias("bad"))
    row = df.agg(*aggs).collect()[0]
    for i, k in enumerate(ks):
        if row[f"null{k}"]:
            raise ValueError(
                f"{label}: key column {keys[i]!r} (position {i}) has {row[f'null{k}']} null "
                "value(s); keys must not be null"
            )
    if row["nullw"]:
        raise ValueError(f"{label}: column {WEIGHT!r} has {row['nullw']} null multiplicit(ies)")
    if row["bad"]:
        raise ValueError(
            f"{label}: column {VALUE!r} has {row['bad']} annotation(s) that are not values of "
            f"the {S.name!r} semiring (domain: {S.domain})"
        )
    types = tuple(
        "bigint"
        if f.dataType.simpleString() in ("int", "smallint", "tinyint")
        else f.dataType.simpleString()
        for f in df.schema.fields[: len(keys)]
    )
    kept = df.filter(sops.nonzero(S, F().col(VALUE)) & (F().col(WEIGHT) != 0))
    renamed = kept.select(
        *[F().col(k).cast(t).alias(v) for k, t, v in zip(ks, types, keys, strict=True)],
        VALUE,
        WEIGHT,
    )
    return renamed, int(row["rows"]), types


def _negative(regime: str, S: Semiring) -> str | None:
    if regime in ("counting", "boolean"):
        return f"holds a negative multiplicity (a {S.name!r} view can only retract rows it holds)"
    return None


def _stored(
    ctx: SparkContext, df: DataFrame, like: RemoteKeyed, label: str, negative: str | None
) -> RemoteKeyed:
    """``df`` (consolidated) materialised as a relation like ``like``, counted in one job;
    ValueError when ``negative`` and a value is below zero."""
    base = ctx.materialise(df.select(*like.vars, F().col(VALUE).cast(like.vtype).alias(VALUE)))
    aggs = [F().count(F().lit(1)).alias("rows")]
    aggs += [F().approx_count_distinct(k).alias(f"d{i}") for i, k in enumerate(like.vars)]
    if negative:
        aggs.append(F().sum((F().col(VALUE) < 0).cast("int")).alias("neg"))
    row = base.agg(*aggs).collect()[0]
    if negative and row["neg"]:
        raise ValueError(f"refused: {label} {negative}: {row['neg']} key(s); the view is unchanged")
    rows = int(row["rows"])
    distinct = tuple(min(int(row[f"d{i}"]), rows) for i in range(len(like.vars)))
    return RemoteKeyed.of(ctx, like.vars, like.ops, like.types, like.vtype, base, rows, distinct)


def _annotations(
    ctx: SparkContext, rows: RemoteKeyed, like: RemoteKeyed, S: Semiring
) -> RemoteKeyed:
    """Each key's annotation from a multiset of rows: the ⊕ of every row's annotation taken
    its count of times (``x ⊗ (1 ⊕ … ⊕ 1)``, the ⊕ of ones computed in the driver for each
    distinct count above one: one job to find them)."""
    o = sops.ops(S)
    keys = list(like.vars)
    ms = rows.current()
    x = F().col(ANNOTATION)
    counts = []
    if not S.idempotent:  # ⊕ of copies of x is x when ⊕ is idempotent
        many = ms.filter(F().col(VALUE) > 1).select(VALUE).distinct()
        counts = [r[0] for r in many.collect()]
    if counts:
        ones = local_ops(S).ones(np.asarray(counts, dtype=np.int64))
        table = ctx.spark.createDataFrame(
            [(int(c), _native(v)) for c, v in zip(counts, ones, strict=True)],
            f"__n bigint, __one {o.type}",
        )
        ms = ms.join(F().broadcast(table), ms[VALUE] == table["__n"], "left")
        x = F().when(F().col("__one").isNull(), x).otherwise(o.mul(x, F().col("__one")))
    ann = zset.consolidate(ms.select(*keys, x.alias(VALUE)), S)
    return _stored(ctx, ann, like, "relation", None)


def _output(ctx: SparkContext, m: Maintained, how: How) -> RemoteKeyed:
    """The output by one batch solve over the relations (in the stored semiring)."""
    W = m.stored
    out = m.out
    if any(r.rows == 0 for r in m.rels.values()):
        head = _head_types(m.rule, {n: r.types for n, r in m.rels.items()})  # type: ignore[attr-defined]
        return RemoteKeyed.empty(ctx, m.rule.head, out.ops, head, out.vtype)  # type: ignore[attr-defined]
    from faq import Query

    relations = {n: r.factor(W, n) for n, r in m.rels.items()}
    solved = Query(m.rule, W).solve(order=how.order, join=how.join, **relations)
    head = _head_types(m.rule, {n: r.types for n, r in m.rels.items()})  # type: ignore[attr-defined]
    like = RemoteKeyed.empty(ctx, m.rule.head, out.ops, head, out.vtype)  # type: ignore[attr-defined]
    df = solved.df.toDF(*m.rule.head, VALUE)
    df = df.select(*[F().col(v).cast(t) for v, t in zip(m.rule.head, head, strict=True)], VALUE)
    return _stored(ctx, df, like, "output", None)


def _magnitudes(ctx: SparkContext, m: Maintained, keep_mag: bool = False) -> dict[str, Any]:
    """``real``: the absolute annotations of each relation (a projection of its base) and,
    unless kept, the output's magnitudes taken as its absolute values."""
    comp = dict(m.comp)
    for n, r in m.rels.items():
        comp[abs_part(n)] = _absolute(r)
    if not keep_mag:
        comp[OUTPUT_MAGNITUDE] = _absolute(m.out)
    return comp


def _absolute(r: Any) -> RemoteKeyed:
    base = r.base.select(*r.vars, F().abs(F().col(VALUE)).alias(VALUE))
    out = RemoteKeyed.of(r.ctx, r.vars, r.ops, r.types, r.vtype, base, r.rows, r.distinct)
    if r.over.rows:
        out = replace(out, over=type(r.over)(r.vars, r.over.cols, np.abs(r.over.values)))
    return out


def _native(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def _partitions(spark: SparkSession, rows: int) -> int:
    """Partitions of a view's materialised state: one per ``rows_per_partition`` rows (a
    setting), at least the cores Spark runs on and at most the session's shuffle partitions (so a
    session left at Spark's 200 does not spread a small view over 200 tasks a tick)."""
    try:
        most = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    except (ValueError, TypeError):
        most = 1
    want = max(parallelism(spark), -(-rows // settings().rows_per_partition))
    return max(1, min(most, want))
