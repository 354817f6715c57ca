"""A recursive group's fixpoint partitioned in Spark: state, changes and joins never leave it.

The driver path of :mod:`faq.recursion` keeps a group's state and every round's
⊕-merge in numpy tables, and fetches the input rows each change reaches; past
``local_rows`` that collects most of the graph anyway.  Here (chosen by
:func:`faq.plan.physical.fixpoint_in_spark`) every relation stays in Spark:

* **each input is read once** and cached: later rounds read it without
  re-planning it.  The first round whose change is too large to broadcast
  partitions it, once, by the columns it shares with its rule's recursive atom
  (the join variable: ``src`` of the edges of a shortest-path program), into as
  many parts as the cluster runs tasks at once (more when the rows exceed
  ``cell_rows`` a part); no round shuffles it again;
* **each round ships only Δ**: the rules' joins read the change of their
  recursive atom (broadcast when it holds at most ``broadcast_rows`` rows, else
  hash-partitioned like the input it meets, so the input is never shuffled
  again), ⊗ and ⊕ as Spark's own expressions (the semiring's native side);
* **the ⊕-merge runs in Spark too**: the state ``(keys, value, Δ)`` and the
  round's candidates are grouped by key in one ``groupBy``, which keeps
  ``old ⊕ new`` and marks as the next change the keys whose value moved (an
  idempotent ⊕: min, max, or) or every non-zero candidate (a sum: counting,
  real).  The state is checkpointed every round, which cuts the lineage; the
  round's figures (rows, change, values outside the semiring) are observed
  during that same job, and the driver holds no relation.

The rounds end, or are refused, exactly as the driver's
(:mod:`faq.plan.convergence`): an empty change, an improving cycle for an
idempotent ⊕, ``max_rounds`` for a sum, a value outside the semiring's domain,
an overflow.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faq.plan.convergence import (
    improving_cycle_error,
    nonconvergence,
    overflowed,
    value_outside,
)
from faq.plan.settings import current
from faq.program_run import Round, RoundProgress
from faq.rule import VALUE, Atom, Rule
from faq.spark.ops import Frame, atom_frame, binary_join, checkpointed, observation, union_all
from faq.spark.tasks import parallelism, query_error
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["Input", "SparkFixpoint"]

_DELTA = "__delta"


@dataclass(frozen=True)
class Input:
    """An input relation of the rounds: its DataFrame (key columns ``vars`` then
    ``value``, checked and consolidated) and its rows when known without a job (0)."""

    df: DataFrame
    vars: tuple[str, ...]
    rows: int = 0


class SparkFixpoint:
    """The semi-naive rounds of one recursive group, every relation in Spark.

    Parameters
    ----------
    S : Semiring
        The program's semiring (with native Spark operations).
    names : sequence of str
        The group's relations.
    rules : sequence of Rule
        The group's recursive rules, each with exactly one atom of the group.
    keys : mapping
        Each relation's key names (those of its first rule's head).
    inputs : mapping
        The other relations the rules read (:class:`Input`).
    idempotent : bool
        Whether ⊕ is idempotent: a round's change is then the keys whose value
        moved, else every candidate.
    max_rounds : int
        Most rounds for a ⊕ that is not idempotent.
    """

    def __init__(
        self,
        S: Semiring,
        names: Sequence[str],
        rules: Sequence[Rule],
        keys: Mapping[str, tuple[str, ...]],
        inputs: Mapping[str, Input],
        idempotent: bool,
        max_rounds: int,
    ) -> None:
        self.S = S
        self.ops = sops.ops(S)
        self.names = tuple(names)
        self.rules = tuple(rules)
        self.keys = {n: tuple(keys[n]) for n in self.names}
        self.inputs = inputs
        self.idempotent = idempotent
        self.max_rounds = max_rounds
        self.parts = 1
        self.parted: dict[tuple[str, tuple[str, ...]], DataFrame] = {}

    # -- the inputs, cached once -----------------------------------------------------------
    def _input(self, atom: Atom, shared: tuple[str, ...], partitioned: bool) -> DataFrame:
        """``atom``'s relation seen through it, cached on first use and kept for every
        later round; with ``partitioned``, hash-partitioned by the columns of ``shared``
        (a change too large to broadcast is partitioned the same way and meets it)."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        f = self.inputs[atom.relation]
        cols = tuple(f.vars[atom.vars.index(v)] for v in shared) if partitioned else ()
        key = (atom.relation, cols)
        if key not in self.parted:
            df = f.df
            self.parts = max(self.parts, math.ceil(f.rows / max(1, current().cell_rows)))
            if cols:
                df = df.repartition(self.parts, *[F.col(c) for c in cols])
            else:  # as many parts as tasks run at once, not a shuffle's 200: every round
                df = df.coalesce(self.parts)  # scans them all
            # cached, not checkpointed: a cached relation keeps its partitioning (a
            # checkpoint's scan loses it in Spark 4.3), so no round shuffles it again
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
            df.count()
            self.parted[key] = df
        return atom_frame(atom, self.parted[key], f.vars)

    def release(self) -> None:
        """Drop the inputs' cached rows (the answer, checkpointed, reads none of them)."""
        for df in self.parted.values():
            df.unpersist()
        self.parted.clear()

    def _candidates(self, rule: Rule, delta: DataFrame, rows: int) -> DataFrame:
        """The rule's derivations from the change ``delta`` (``rows`` rows) of its recursive
        atom, by its head, one row per derivation (the merge's ``groupBy`` ⊕-reduces
        them)."""
        from pyspark.sql import functions as F

        inner = next(a for a in rule.atoms if a.relation in self.names)
        seen = set(inner.vars)
        first = atom_frame(inner, delta, self.keys[inner.relation])
        frames = [Frame(tuple(dict.fromkeys(inner.vars)), first)]
        broadcast = rows <= current().broadcast_rows
        for a in rule.atoms:
            if a is inner:
                continue
            shared = tuple(v for v in dict.fromkeys(a.vars) if v in seen)
            df = self._input(a, shared, not broadcast and len(frames) == 1)
            frames.append(Frame(tuple(dict.fromkeys(a.vars)), df))
            seen |= set(a.vars)
        if not broadcast and len(frames) > 1:  # meet the first input where it lies
            on = [v for v in frames[1].vars if v in frames[0].vars]
            if on:
                moved = frames[0].df.repartition(self.parts, *[F.col(v) for v in on])
                frames[0] = Frame(frames[0].vars, moved)
        joined = binary_join(frames, self.S, broadcast=broadcast)
        return joined.df.select(*rule.head, VALUE)

    # -- rounds -----------------------------------------------------------------------------
    def run(
        self, delta0: Mapping[str, DataFrame], where: Sequence[str], rounds: list[Round], t0: float
    ) -> dict[str, DataFrame]:
        """Run every round from the base rules' change ``delta0`` (per relation, a DataFrame
        of its keys and ``value``, run ``where``), appending each round's record to
        ``rounds`` (round 0's from ``t0``); the fixpoint of each relation, in Spark."""
        from pyspark.sql import functions as F

        self.parts = max(1, parallelism(next(iter(delta0.values())).sparkSession))
        state: dict[str, DataFrame] = {}
        sizes: dict[str, tuple[int, int]] = {}
        for n in self.names:
            keys = self.keys[n]
            df = delta0[n].toDF(*keys, VALUE)
            df = df.select(*keys, VALUE, F.col(VALUE).alias(_DELTA))
            state[n], sizes[n] = self._materialized(n, df, 0)
        where = tuple(sorted({*where, "spark"}))
        rounds.append(Round(self.names, 0, self._sizes(sizes), where, time.perf_counter() - t0))
        progress = RoundProgress(self.names)
        k = 0
        while any(d for _, d in sizes.values()):
            k += 1
            if not self.idempotent and k > self.max_rounds:
                moving = {n: d for n, (_, d) in sizes.items()}
                raise nonconvergence(self.S, self.names, moving, self.max_rounds)
            t0 = time.perf_counter()
            held = sum(r for r, _ in sizes.values())
            rows_in = sum(d for _, d in sizes.values())
            state, new, derived = self._round(k, state, sizes)
            if self.idempotent and held < k and any(d for _, d in new.values()):
                moving = {n: d for n, (_, d) in new.items()}
                raise improving_cycle_error(self.S, self.names, moving, k)
            sizes = new
            rd = Round(
                self.names,
                k,
                self._sizes(sizes),
                ("spark",),
                time.perf_counter() - t0,
                rows_in,
                derived,
            )
            rounds.append(rd)
            progress.round(k, rd.delta)
        progress.done(k)
        nonzero = sops.nonzero(self.S, F.col(VALUE))
        return {n: state[n].select(*self.keys[n], VALUE).filter(nonzero) for n in self.names}

    def _round(
        self, k: int, state: dict[str, DataFrame], sizes: Mapping[str, tuple[int, int]]
    ) -> tuple[dict[str, DataFrame], dict[str, tuple[int, int]], int]:
        """Round ``k``: every rule joins its atom's change; each relation ⊕-merges its
        candidates into its state, which marks the next change.  Returns the new states,
        their (rows, change rows) and the candidates' rows."""
        from pyspark.sql import functions as F

        cand: dict[str, list[DataFrame]] = {n: [] for n in self.names}
        for r in self.rules:
            m = next(a.relation for a in r.atoms if a.relation in self.names)
            rows = sizes[m][1]
            if not rows:
                continue
            keys = self.keys[m]
            delta = (
                state[m].filter(F.col(_DELTA).isNotNull()).select(*keys, F.col(_DELTA).alias(VALUE))
            )
            derived = self._candidates(r, delta, rows).toDF(*self.keys[r.name], VALUE)
            cand[r.name].append(derived)
        out: dict[str, DataFrame] = {}
        new: dict[str, tuple[int, int]] = {}
        derived = 0
        for n in self.names:
            keys = list(self.keys[n])
            if not cand[n]:
                df = state[n].select(*keys, VALUE, F.lit(None).cast(self.ops.type).alias(_DELTA))
                out[n], new[n] = self._materialized(n, df, k)
                continue
            c = union_all(cand[n]) if len(cand[n]) > 1 else cand[n][0]
            seen = observation(c)
            c = c.observe(seen, F.count(F.lit(1)).alias("__cand"))
            df = self._merged(state[n], c.withColumnRenamed(VALUE, "__c"), keys)
            out[n], new[n] = self._materialized(n, df, k)
            with contextlib.suppress(Exception):  # Spark Connect: no metrics with a checkpoint
                derived += int(seen.get.get("__cand", 0))
        return out, new, derived

    def _merged(self, old: DataFrame, cand: DataFrame, keys: list[str]) -> DataFrame:
        """The state ⊕ the candidates, by key, with the next change marked.

        One ``groupBy`` over the state's rows and the candidates' (⊕ of each side apart,
        partial aggregation before the shuffle), not a join: Spark estimates a join's
        size as the product of its sides', and a checkpoint keeps the estimate of the
        plan it was made from, so a join per round squared the estimate every round
        (its digits doubled: round 25 spent minutes multiplying them)."""
        from pyspark.sql import functions as F

        t = self.ops.type
        none = F.lit(None).cast(t)
        rows = old.select(*keys, F.col(VALUE).alias("__v"), none.alias("__c")).unionByName(
            cand.select(*keys, none.alias("__v"), F.col("__c"))
        )
        assert self.ops.agg is not None  # fixpoint_in_spark asks for it
        merged = rows.groupBy(*keys).agg(
            self.ops.agg(F.col("__v")).alias("__v"), self.ops.agg(F.col("__c")).alias("__c")
        )
        d, c = F.col("__v"), F.col("__c")
        both = self.ops.add(d, c)
        value = F.when(d.isNull(), c).when(c.isNull(), d).otherwise(both)
        if self.idempotent:  # the keys whose value moved, with their new value
            moved = c.isNotNull() & (d.isNull() | (both != d))
        else:  # every non-zero candidate: the state is the sum of the rounds
            moved = c.isNotNull() & sops.nonzero(self.S, c)
        delta = F.when(moved, c if not self.idempotent else value)
        return merged.select(*keys, value.alias(VALUE), delta.alias(_DELTA))

    def _materialized(self, n: str, df: DataFrame, k: int) -> tuple[DataFrame, tuple[int, int]]:
        """``df`` checkpointed, with its rows and its change's rows; a value outside the
        semiring (in the change for an idempotent ⊕, in the state otherwise) or an
        overflow refuses the fixpoint."""
        from pyspark.sql import functions as F

        checked = F.col(_DELTA) if self.idempotent else F.col(VALUE)
        bad = checked.isNotNull() & ~self.ops.valid(checked)
        figures = {
            "__rows": F.count(F.lit(1)),
            "__delta": F.count(F.col(_DELTA)),
            "__bad": F.sum(F.when(bad, 1).otherwise(0)),
        }
        try:
            out, got = checkpointed(df, figures)
        except Exception as exc:
            err = query_error(exc, f"the fixpoint of {n!r}", self.S)
            if isinstance(err, OverflowError):
                raise overflowed(self.S, self.names, k, err) from exc
            raise err from exc
        if got["__bad"]:  # one more job, to name a key
            col = _DELTA if self.idempotent else VALUE
            row = out.filter(bad).select(*self.keys[n], col).limit(1).collect()[0]
            moving = {n: int(got["__delta"])}
            key = tuple(row[: len(self.keys[n])])
            raise value_outside(self.S, self.names, moving, k, n, key, row[-1], int(got["__bad"]))
        return out, (int(got["__rows"]), int(got["__delta"]))

    def _sizes(self, sizes: Mapping[str, tuple[int, int]]) -> tuple[tuple[str, int], ...]:
        return tuple((n, sizes[n][1]) for n in self.names)
