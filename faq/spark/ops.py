"""Spark DataFrame operations of the executor: joins, aggregation, materialisation.

The shuffle-based backend, for relations that do not fit in the driver.
Binary joins are pairwise equi-joins with ⊗ of annotations; cyclic bags can
use Generic Join on DataFrames (BiGJoin style): bind variables one at a time;
a DataFrame of *prefixes* (the variables bound so far plus ``__w``, the
⊗-product of annotations of relations already fully bound) is extended by
the next variable ``x`` in three moves:

* **count**: every relation containing ``x`` reports, per prefix, how many
  ``x``-values it offers (a join with a per-key count table);  a prefix that
  a relation offers nothing drops out here;
* **propose**: the prefixes are split by the relation offering the fewest
  candidates, and each part is joined with its proposer;
* **intersect**: the other relations keep only candidates they contain
  (semi-joins), or, when ``x`` is their last variable, join in their
  annotation, which is ⊗-multiplied into ``__w``.

Notes
-----
Ngo, Ré, Rudra, "Skew strikes back" (SIGMOD Record 2013) and Ammar, McSherry,
Salihoglu, Joglekar, "Distributed evaluation of subgraph queries using
worst-case optimal low-memory dataflows" (VLDB 2018).  Every prefix set is
bounded by the AGM bound of the bound variables, so the work on a triangle
with N edges is O(N^1.5), where a binary plan may build N² rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faq.plan.settings import current
from faq.rule import VALUE, Atom
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "Frame",
    "aggregate",
    "atom_frame",
    "binary_join",
    "generic_join",
    "materialize",
]

W = "__w"


def small(df: DataFrame, rows: float) -> DataFrame:
    """``df`` with a broadcast hint when ``rows`` (an estimate) is at most the
    ``broadcast_rows`` setting."""
    from pyspark.sql import functions as F

    return F.broadcast(df) if 0 < rows <= current().broadcast_rows else df


@dataclass(frozen=True)
class Frame:
    """A factor during execution: variables and a DataFrame (vars..., value)."""

    vars: tuple[str, ...]
    df: DataFrame
    rows: float = 0.0


def atom_frame(atom: Atom, relation: DataFrame, key_names: Sequence[str]) -> DataFrame:
    """The relation seen through ``atom``: columns renamed to the atom's variables.

    A variable repeated in the atom keeps only rows whose columns agree.
    """
    from pyspark.sql import functions as F

    df = relation
    first: dict[str, str] = {}
    for col, v in zip(key_names, atom.vars, strict=True):
        if v in first:
            df = df.filter(F.col(first[v]) == F.col(col))
        else:
            first[v] = col
    return df.select(*[F.col(c).alias(v) for v, c in first.items()], F.col(VALUE))


def binary_join(frames: Sequence[Frame], S: Semiring, *, broadcast: bool = False) -> Frame:
    """Natural join of ``frames``, in the order given, by pairwise equi-joins with ⊗.

    The caller orders the frames (:func:`faq.plan.physical.join_order`: the
    smallest first, then the smallest sharing a variable).  With ``broadcast``
    (the first frame is small: a delta) the rows joined so far are broadcast to
    every next join, so the other frames are scanned, never shuffled.
    """
    from pyspark.sql import functions as F

    o = sops.ops(S)
    first, *rest = frames
    vars_ = list(first.vars)
    df = first.df.withColumnRenamed(VALUE, "__w0")
    for nxt in rest:
        on = [v for v in nxt.vars if v in vars_]
        if broadcast:
            df, other = F.broadcast(df), nxt.df.withColumnRenamed(VALUE, "__w1")
        else:
            other = small(nxt.df.withColumnRenamed(VALUE, "__w1"), nxt.rows)
        df = df.join(other, on=on, how="inner") if on else df.crossJoin(other)
        vars_ += [v for v in nxt.vars if v not in vars_]
        df = df.select(*vars_, o.mul(F.col("__w0"), F.col("__w1")).alias("__w0"))
    df = df.select(*vars_, F.col("__w0").alias(VALUE))
    return Frame(tuple(vars_), df)


def aggregate(frame: Frame, keep: Sequence[str], S: Semiring) -> DataFrame:
    """⊕-aggregate every variable not in ``keep`` away and drop zero annotations."""
    from pyspark.sql import functions as F

    df = frame.df
    if tuple(keep) != frame.vars:
        df = sops.reduce(S, df.select(*keep, VALUE), list(keep), VALUE)
    return df.filter(sops.nonzero(S, F.col(VALUE))).select(*keep, VALUE)


def materialize(df: DataFrame) -> tuple[DataFrame, int, tuple[int, ...]]:
    """Compute ``df`` once, keep it on the executors, and cut its lineage.

    Returns the materialised DataFrame, its row count and the approximate
    distinct count of each key column (one job after the checkpoint, so
    results reused as inputs carry real statistics).  ``localCheckpoint``
    rather than ``persist``: a later ``unpersist`` of an input would otherwise
    drop the cached data of everything computed from it.
    """
    from pyspark.sql import functions as F

    out = df.localCheckpoint(eager=True)
    keys = [c for c in out.columns if c != VALUE]
    row = out.agg(
        F.count(F.lit(1)).alias("__rows"), *[F.approx_count_distinct(k) for k in keys]
    ).collect()[0]
    return out, int(row[0]), tuple(int(x) for x in row[1:])


def trace_binary(frames: Sequence[Frame], S: Semiring) -> int:
    """The largest row count among the pairwise joins of ``frames`` joined in the order
    given (counted: one Spark job per join)."""
    return max(binary_join(frames[:k], S).df.count() for k in range(2, len(frames) + 1))


def generic_join(
    frames: Sequence[Frame],
    S: Semiring,
    order: Sequence[str],
    distinct: dict[str, float] | None = None,
    *,
    trace: bool = False,
    start: Frame | None = None,
) -> tuple[Frame, int | None, list[DataFrame]]:
    """Natural join of ``frames`` with ⊗ of annotations, computed by Generic Join.

    Returns the joined Frame (variables in binding order, then ``value``), the
    largest prefix count over all levels when ``trace`` (one Spark job per
    level) or None, and the DataFrames cached along the way, which the caller
    unpersists once it has materialised what it computes from the join.

    ``order`` is the binding order (:func:`faq.plan.physical.binding_order`;
    variables of ``start`` are skipped).  ``distinct`` holds estimated distinct
    counts per variable: they stand in for the count of a relation that shares
    no bound variable with the prefix (its offer is then the same for every
    prefix).  Estimates only steer the choice of proposer; the answer never
    depends on them.

    ``start`` (one of ``frames``, typically a small delta) seeds the prefixes:
    its variables are bound first, all at once, by its own rows; the
    remaining variables are bound one at a time as usual.  Every relation is
    then first reduced, level by level, to the rows that match a prefix
    (a semi-join with the broadcast prefix keys), so the work follows the
    size of ``start`` and the degrees it touches, not the size of the other
    relations.  This is the delta query of BiGJoin (Ammar et al., §4), which
    :mod:`incremental` uses for every term of the delta rule.
    """
    from pyspark.sql import functions as F

    o = sops.ops(S)
    spark = frames[0].df.sparkSession
    dist = dict(distinct or {})
    for f in frames:
        for v in f.vars:
            dist[v] = min(dist.get(v, f.rows), f.rows) if f.rows else dist.get(v, 0.0)
    bound: list[str] = []
    cached: list[DataFrame] = []
    if start is None:
        prefix: DataFrame = spark.range(1).select(sops.constant(S, S.one).alias(W))
        rest = list(frames)
    else:
        prefix = start.df.select(*start.vars, F.col(VALUE).alias(W))
        bound = list(start.vars)
        rest = [f for f in frames if f is not start]
    for f in [f for f in rest if set(f.vars) <= set(bound)]:  # scalars; relations on start
        rest.remove(f)
        if f.vars:
            source = f.df.withColumnRenamed(VALUE, "__s")
            prefix = F.broadcast(prefix).join(source, on=list(f.vars), how="inner")
        else:
            prefix = prefix.crossJoin(f.df.select(F.col(VALUE).alias("__s")))
        prefix = prefix.select(*bound, o.mul(F.col(W), F.col("__s")).alias(W))
    order = [v for v in order if v not in bound]

    largest = 0
    for x in order:
        if start is not None:
            prefix = prefix.persist()
            cached.append(prefix)
        prefix, held = _extend_level(prefix, bound, x, rest, S, dist, reduce=start is not None)
        cached += held
        bound.append(x)
        if trace:
            prefix = prefix.localCheckpoint(eager=True)
            largest = max(largest, prefix.count())
    result = prefix.select(*bound, F.col(W).alias(VALUE))
    return Frame(tuple(bound), result), (largest if trace else None), cached


def _extend_level(
    prefix: DataFrame,
    bound: list[str],
    x: str,
    frames: Sequence[Frame],
    S: Semiring,
    dist: dict[str, float],
    *,
    reduce: bool = False,
) -> tuple[DataFrame, list[DataFrame]]:
    """Extend every prefix by ``x``: count, propose, intersect.  Returns (prefixes, cached).

    With ``reduce`` every relation that shares bound variables is first cut
    down to the rows matching a prefix (semi-join with the broadcast distinct
    prefix keys; cached), and the reduced relations are what the count,
    propose and intersect moves read and broadcast.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    o = sops.ops(S)
    rels = [f for f in frames if x in f.vars]
    keys = [[v for v in f.vars if v in bound] for f in rels]
    cached: list[DataFrame] = []
    if reduce:
        reduced = []
        for f, k in zip(rels, keys, strict=True):
            if k:
                hits = F.broadcast(prefix.select(*k).distinct())
                df = f.df.join(hits, on=k, how="left_semi").select(*f.vars, VALUE).persist()
                cached.append(df)
                f = Frame(f.vars, df, 1.0)  # small enough to broadcast: bounded by the prefixes
            reduced.append(f)
        rels = reduced
    completes = [set(f.vars) <= {*bound, x} for f in rels]
    projections = [
        f.df.select(*k, x) if c and len(f.vars) == len(k) + 1 else f.df.select(*k, x).distinct()
        for f, k, c in zip(rels, keys, completes, strict=True)
    ]

    # count: what each relation offers per prefix; inner joins drop prefixes offered nothing.
    # A relation that shares no bound variable offers the same to every prefix: its
    # estimated distinct count stands in, with no Spark work.
    keyed = [j for j, k in enumerate(keys) if k]
    if keyed:
        counted = prefix
        for j in keyed:
            table = projections[j].groupBy(*keys[j]).agg(F.count(F.lit(1)).alias(f"__c{j}"))
            counted = counted.join(small(table, rels[j].rows), on=keys[j], how="inner")
        # reducing: a relation sharing no bound variable is not cut down, so it never
        # proposes while a reduced one can
        static = float("inf") if reduce else float(dist.get(x, 0.0))
        cnt = [F.col(f"__c{j}") if keys[j] else F.lit(static) for j in range(len(rels))]
        if len(rels) > 1:
            best = F.least(*cnt)
            chooser = F.lit(len(rels) - 1)
            for j in reversed(range(len(rels) - 1)):
                chooser = F.when(cnt[j] == best, F.lit(j)).otherwise(chooser)
            counted = counted.select(*bound, W, chooser.alias("__p"))
            counted = counted.persist(StorageLevel.MEMORY_AND_DISK)  # every part reads it
            cached.append(counted)
            sources = [(j, counted.filter(F.col("__p") == j).drop("__p")) for j in range(len(rels))]
        else:
            sources = [(0, counted.select(*bound, W))]
    else:  # the same offer for every prefix: one static proposer, the smallest relation
        j = min(range(len(rels)), key=lambda i: (rels[i].rows, i))
        sources = [(j, prefix)]

    # propose from the chosen relation, then intersect with the others
    parts = []
    for j, part in sources:
        weights = [F.col(W)]
        part, w = _extend(part, rels[j], keys[j], x, completes[j], projections[j], f"__v{j}")
        if w is not None:
            weights.append(w)
        for i, (g, kk) in enumerate(zip(rels, keys, strict=True)):
            if i == j:
                continue
            if reduce and not kk:  # not reduced: stream it past the (small) prefixes
                if completes[i]:
                    source = g.df.withColumnRenamed(VALUE, f"__v{i}")
                    part = F.broadcast(part).join(source, on=[x], how="inner")
                    weights.append(F.col(f"__v{i}"))
                # else: only a filter; the relation's last variable joins it exactly
            elif completes[i]:
                source = small(g.df.withColumnRenamed(VALUE, f"__v{i}"), g.rows)
                part = part.join(source, on=[*kk, x], how="inner")
                weights.append(F.col(f"__v{i}"))
            else:
                part = part.join(small(projections[i], g.rows), on=[*kk, x], how="left_semi")
        product = weights[0]
        for wcol in weights[1:]:
            product = o.mul(product, wcol)
        parts.append(part.select(*bound, x, product.alias(W)))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out, cached


def _extend(
    part: DataFrame,
    rel: Frame,
    key: list[str],
    x: str,
    completes: bool,
    projection: DataFrame,
    wname: str,
) -> tuple[DataFrame, object | None]:
    """Join ``part`` with its proposer; carry the annotation when ``x`` completes the relation."""
    from pyspark.sql import functions as F

    if completes:
        source = small(rel.df.withColumnRenamed(VALUE, wname), rel.rows)
        joined = part.join(source, on=key, how="inner") if key else part.crossJoin(source)
        return joined, F.col(wname)
    source = small(projection, rel.rows)
    joined = part.join(source, on=key, how="inner") if key else part.crossJoin(source)
    return joined, None
