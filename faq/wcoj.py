"""Worst-case optimal join on DataFrames: Generic Join, BiGJoin style.

Bind variables one at a time.  A DataFrame of *prefixes* (the variables bound
so far plus ``__w``, the ⊗-product of annotations of relations already fully
bound) is extended by the next variable ``x`` in three moves:

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
from typing import TYPE_CHECKING

from faq.engine import Frame
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["generic_join", "variable_order"]

W = "__w"


def variable_order(frames: Sequence[Frame], distinct: dict[str, float] | None = None) -> list[str]:
    """Binding order for Generic Join, from distinct counts.

    Start with the variable of fewest distinct values; then repeatedly bind the
    variable that the most relations already constrain (they intersect), ties
    broken by fewer distinct values.  Connected variables come before
    unconnected ones, so prefixes never grow by a Cartesian product when a
    join exists.
    """
    vars_: list[str] = []
    for f in frames:
        vars_ += [v for v in f.vars if v not in vars_]
    dist = dict(distinct or {})
    for v in vars_:
        dist.setdefault(v, min((f.rows for f in frames if v in f.vars), default=0.0))
    order: list[str] = []
    while len(order) < len(vars_):
        bound = set(order)

        def score(v: str) -> tuple[int, float, int]:
            constrained = sum(1 for f in frames if v in f.vars and bound & set(f.vars))
            return (-constrained, dist[v], vars_.index(v))

        order.append(min((v for v in vars_ if v not in bound), key=score))
    return order


def generic_join(
    frames: Sequence[Frame],
    S: Semiring,
    order: Sequence[str] | None = None,
    distinct: dict[str, float] | None = None,
    *,
    trace: bool = False,
) -> tuple[Frame, int | None]:
    """Natural join of ``frames`` with ⊗ of annotations, computed by Generic Join.

    Returns the joined Frame (variables in binding order, then ``value``) and,
    with ``trace``, the largest prefix count over all levels (one more Spark
    job per level).  Each level's prefixes are checkpointed, so lineage does
    not grow with the number of variables.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    o = sops.ops(S)
    spark = frames[0].df.sparkSession
    order = list(order) if order is not None else variable_order(frames, distinct)
    one = F.lit(S.one).cast(o.type)

    prefix: DataFrame = spark.range(1).select(one.alias(W))
    for f in (f for f in frames if not f.vars):  # scalar factors
        prefix = prefix.crossJoin(f.df.select(F.col(VALUE).alias("__s")))
        prefix = prefix.select(o.mul(F.col(W), F.col("__s")).alias(W))

    bound: list[str] = []
    largest = 0
    for x in order:
        rels = [f for f in frames if x in f.vars]
        keys = [[v for v in f.vars if v in bound] for f in rels]
        completes = [set(f.vars) <= set(bound) | {x} for f in rels]
        projections = [
            f.df.select(*k, x).distinct() if not c or len(f.vars) != len(k) + 1 else f.df.select(*k, x)
            for f, k, c in zip(rels, keys, completes, strict=True)
        ]

        # count: candidates each relation offers per prefix (inner joins drop dead prefixes)
        counted = prefix
        for j, (k, proj) in enumerate(zip(keys, projections, strict=True)):
            table = proj.groupBy(*k).agg(F.count(F.lit(1)).alias(f"__c{j}"))
            counted = counted.join(table, on=k, how="inner") if k else counted.crossJoin(table)
        cnt = [F.col(f"__c{j}") for j in range(len(rels))]
        best = F.least(*cnt) if len(cnt) > 1 else cnt[0]
        chooser = F.lit(len(rels) - 1)
        for j in reversed(range(len(rels) - 1)):
            chooser = F.when(cnt[j] == best, F.lit(j)).otherwise(chooser)
        counted = counted.select(*bound, W, chooser.alias("__p"))
        if len(rels) > 1:  # every proposer's part reads it: compute it once
            counted = counted.persist(StorageLevel.MEMORY_AND_DISK)

        # propose and intersect, one part per proposing relation
        parts = []
        for j, (f, k) in enumerate(zip(rels, keys, strict=True)):
            part = counted.filter(F.col("__p") == j).drop("__p") if len(rels) > 1 else counted.drop("__p")
            weights = [F.col(W)]
            part, w = _extend(part, f, k, x, completes[j], projections[j], f"__v{j}")
            if w is not None:
                weights.append(w)
            for i, (g, kk) in enumerate(zip(rels, keys, strict=True)):
                if i == j:
                    continue
                if completes[i]:
                    part = part.join(g.df.withColumnRenamed(VALUE, f"__v{i}"), on=[*kk, x], how="inner")
                    weights.append(F.col(f"__v{i}"))
                else:
                    part = part.join(projections[i], on=[*kk, x], how="left_semi")
            product = weights[0]
            for wcol in weights[1:]:
                product = o.mul(product, wcol)
            parts.append(part.select(*bound, x, product.alias(W)))
        nxt = parts[0]
        for p in parts[1:]:
            nxt = nxt.unionByName(p)
        bound.append(x)
        prefix = nxt.localCheckpoint(eager=True)
        if len(rels) > 1:
            counted.unpersist()  # safe: the checkpoint above no longer depends on it
        if trace:
            largest = max(largest, prefix.count())
    result = prefix.select(*bound, F.col(W).alias(VALUE))
    return Frame(tuple(bound), result, float(largest)), (largest if trace else None)


def _extend(
    part: DataFrame, rel: Frame, key: list[str], x: str, completes: bool, projection: DataFrame, wname: str
) -> tuple[DataFrame, object | None]:
    """Join ``part`` with its proposer; carry the annotation when ``x`` completes the relation."""
    from pyspark.sql import functions as F

    if completes:
        source = rel.df.withColumnRenamed(VALUE, wname)
        joined = part.join(source, on=key, how="inner") if key else part.crossJoin(source)
        return joined, F.col(wname)
    joined = part.join(projection, on=key, how="inner") if key else part.crossJoin(projection)
    return joined, None
