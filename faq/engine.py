"""InsideOut on Spark: turn a :class:`~faq.planner.Plan` into DataFrame operations.

Each step joins its bag (⊗ the annotations), ⊕-aggregates the eliminated
variable away with a native aggregate, drops zero annotations, and
materialises the result (``persist`` + ``count``) so that lineage stays short
and the step's actual size is known.  Binary joins are the default join
method; cyclic bags can use the worst-case optimal Generic Join
(:mod:`faq.wcoj`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faq.planner import Plan, Step
from faq.rule import VALUE, Atom
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["Frame", "binary_join", "execute", "execute_delta", "JOIN_METHODS"]

JOIN_METHODS = ("auto", "binary", "wcoj")

BROADCAST_ROWS = 2_000_000
"""Frames estimated at no more rows than this are broadcast to the joins that use them,
so the (possibly much larger) other side is never shuffled for them."""


def small(df: DataFrame, rows: float) -> DataFrame:
    """``df`` with a broadcast hint when ``rows`` (an estimate) is at most BROADCAST_ROWS."""
    from pyspark.sql import functions as F

    return F.broadcast(df) if 0 < rows <= BROADCAST_ROWS else df


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


def binary_join(frames: Sequence[Frame], S: Semiring, start: Frame | None = None) -> Frame:
    """Natural join of ``frames`` by pairwise equi-joins, multiplying annotations with ⊗.

    Joins greedily: start from the smallest frame, then repeatedly add the
    smallest frame that shares a variable with what is joined so far
    (a Cartesian product only when nothing shares one).

    With ``start`` (one of ``frames``, small: a delta), the join starts from
    it and the rows joined so far are broadcast to every next join, so the
    other frames are scanned, never shuffled.
    """
    from pyspark.sql import functions as F

    o = sops.ops(S)
    first, *rest = join_order(frames, start)
    vars_ = list(first.vars)
    df = first.df.withColumnRenamed(VALUE, "__w0")
    for nxt in rest:
        on = [v for v in nxt.vars if v in vars_]
        if start is not None:
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


SKEW_FACTOR = 8
"""Under ``join="auto"`` a cyclic bag uses binary joins when its cheapest pairwise join
has at most this many times the rows of its inputs (no skew for Generic Join to beat)."""


def skew_check(inputs: Sequence[Frame], step: Step) -> str:
    """Binary or worst-case optimal for a cyclic bag, from the exact pairwise join sizes.

    One Spark job computes, for every pair of inputs sharing variables K, the size
    Σ_K deg_1(K)·deg_2(K) of their join.  When the smallest is within
    ``SKEW_FACTOR`` times the total input rows, a binary plan starting with that
    pair builds no large intermediate and costs fewer Spark jobs than Generic
    Join; otherwise (skew, e.g. hubs) Generic Join is used.  Records the figure
    in ``step.pair_rows``.
    """
    from pyspark.sql import functions as F

    sizes = None
    for i, j in itertools.combinations(range(len(inputs)), 2):
        keys = [v for v in inputs[i].vars if v in inputs[j].vars]
        if not keys:
            continue
        left = inputs[i].df.groupBy(*keys).agg(F.count(F.lit(1)).alias("__l"))
        right = inputs[j].df.groupBy(*keys).agg(F.count(F.lit(1)).alias("__r"))
        size = left.join(right, on=keys).agg(F.sum(F.col("__l") * F.col("__r")).alias("n"))
        sizes = size if sizes is None else sizes.unionByName(size)
    if sizes is None:
        return "wcoj"
    smallest = sizes.agg(F.min("n")).collect()[0][0] or 0
    step.pair_rows = int(smallest)
    total = sum(f.rows for f in inputs)
    return "binary" if smallest <= SKEW_FACTOR * max(total, 1.0) else "wcoj"


def choose_method(step: Step, join: str) -> str:
    """The join method of a step: forced by ``join``, or by the bag's shape under "auto"."""
    if join == "binary" or (join == "auto" and not step.cyclic):
        return "binary"
    if len(step.factors) < 2:
        return "binary"
    return "wcoj"


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


def execute(
    plan: Plan,
    atom_frames: dict[int, Frame],
    S: Semiring,
    join: str = "auto",
    *,
    trace: bool = False,
) -> tuple[DataFrame, int, tuple[int, ...]]:
    """Run ``plan``; return the result (materialised), its rows and distinct counts per
    head variable.

    ``atom_frames`` maps ``id(PlanFactor)`` of each atom to its Frame.  With
    ``trace`` every intermediate of a join is counted (``Step.max_intermediate``)
    at the cost of extra Spark jobs.
    """
    frames: dict[int, Frame] = dict(atom_frames)
    result: DataFrame | None = None
    rows, distinct = 0, ()
    for step in plan.steps:
        t0 = time.perf_counter()
        inputs = [frames.pop(id(f)) for f in step.factors]
        cached: list[DataFrame] = []
        method = choose_method(step, join)
        if method == "wcoj" and join == "auto":
            method = skew_check(inputs, step)
        step.method = method
        if method == "wcoj":
            from faq.wcoj import generic_join

            joined, largest, cached = generic_join(
                inputs, S, distinct=step_distinct(step), trace=trace
            )
        elif len(inputs) == 1:
            joined, largest = inputs[0], None
        else:
            joined = binary_join(inputs, S)
            largest = _trace_binary(inputs, S) if trace else None
        out, rows, distinct = materialize(aggregate(joined, step.output.vars, S))
        for df in cached:  # the materialised output no longer depends on them
            df.unpersist()
        step.actual_rows = rows
        step.max_intermediate = largest
        step.seconds = time.perf_counter() - t0
        frames[id(step.output)] = Frame(step.output.vars, out, float(rows))
        result = out
    if result is None:  # no step: the head is a single atom
        (only,) = frames.values()
        result, rows, distinct = materialize(only.df.select(*plan.rule.head, VALUE))
    return result, rows, distinct


def execute_delta(
    plan: Plan, atom_frames: dict[int, Frame], S: Semiring, delta: int, join: str = "auto"
) -> tuple[DataFrame, list[DataFrame]]:
    """Run ``plan`` as one lazy DataFrame, starting every join from the delta factor.

    ``delta`` is ``id(PlanFactor)`` of a small factor (a change of one relation).
    Nothing is materialised between steps; every step whose bag holds the
    delta, or a result computed from it, starts from that frame: binary joins
    broadcast the rows joined so far, and cyclic bags (unless ``join`` is
    ``"binary"``) use Generic Join seeded by it (see
    :func:`faq.wcoj.generic_join`), so the other relations are scanned and cut
    down to what the delta touches, never shuffled.  Steps without the delta
    run as in :func:`execute`, lazily.

    Returns the result (head variables, then ``value``; zero annotations
    dropped) and the DataFrames cached on the way, to unpersist once the
    caller has materialised what it computes from the result.
    """
    frames: dict[int, Frame] = dict(atom_frames)
    seeded = {delta}
    cached: list[DataFrame] = []
    result: DataFrame | None = None
    for step in plan.steps:
        inputs = [frames.pop(id(f)) for f in step.factors]
        starts = [fr for fr, f in zip(inputs, step.factors, strict=True) if id(f) in seeded]
        start = starts[0] if starts else None
        method = choose_method(step, join)
        if method == "wcoj" and join == "auto" and start is None:
            method = skew_check(inputs, step)
        step.method = method
        if method == "wcoj":
            from faq.wcoj import generic_join

            joined, _, held = generic_join(inputs, S, distinct=step_distinct(step), start=start)
            cached += held
        elif len(inputs) == 1:
            joined = inputs[0]
        else:
            joined = binary_join(inputs, S, start=start)
        out = aggregate(joined, step.output.vars, S)
        frames[id(step.output)] = Frame(step.output.vars, out, step.output.rows)
        if start is not None:
            seeded.add(id(step.output))
        result = out
    if result is None:  # no step: the head is a single atom
        (only,) = frames.values()
        result = aggregate(only, plan.rule.head, S)
    return result.select(*plan.rule.head, VALUE), cached


def step_distinct(step: Step) -> dict[str, float]:
    """The smallest estimated distinct count of each variable among a step's factors."""
    dist: dict[str, float] = {}
    for f in step.factors:
        for v, d in f.distinct.items():
            dist[v] = min(dist.get(v, d), d)
    return dist


def _trace_binary(inputs: Sequence[Frame], S: Semiring) -> int:
    """The largest row count among the pairwise joins a binary plan builds (counted)."""
    ordered = join_order(inputs)
    return max(binary_join(ordered[:k], S).df.count() for k in range(2, len(ordered) + 1))


def join_order(frames: Sequence[Frame], start: Frame | None = None) -> list[Frame]:
    """The order :func:`binary_join` joins ``frames`` in: ``start`` or the smallest
    first, then repeatedly the smallest that shares a variable with those joined so far."""
    pending = sorted(frames, key=lambda f: f.rows)
    first = next(i for i, f in enumerate(pending) if f is start) if start is not None else 0
    order = [pending.pop(first)]
    vars_ = set(order[0].vars)
    while pending:
        sharing = [f for f in pending if set(f.vars) & vars_]
        nxt = sharing[0] if sharing else pending[0]
        pending.remove(nxt)
        order.append(nxt)
        vars_ |= set(nxt.vars)
    return order
