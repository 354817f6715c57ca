"""Witnesses: an assignment of the bound variables that attains each answer (issue 12).

For a *selective* semiring (⊕ is max or min: max-product, max-plus, min-plus,
boolean, or a user semiring whose ``add`` is the builtin ``max``/``min``) the
aggregate of every output key is attained by at least one assignment of the
bound variables.  :class:`WitnessRecorder` finds one by InsideOut with
back-pointers, never enumerating the joined relation of the whole query:

* forward: while the executor runs a step, the recorder joins that step's
  bag (its input factors only) and keeps, per key of the step's output, the
  row that wins the ⊕ (the back-pointer table: output vars -> eliminated vars);
* backward: from the result rows it walks the steps from last to first; each
  step's output variables are known by then (head variables, or variables
  bound by a later step), so one equi-join with the step's back-pointer table
  binds the variables it eliminated.

Ties are broken deterministically: among the rows of a step's bag that attain
the best value, the one with the smallest eliminated values (lexicographically,
in the order of ``step.vars``) wins.

Where it runs: a step run on Spark computes its back-pointers with Spark (a
window ``row_number`` per output key, native); every other step (the local
kernel in the driver, and the "tasks" backend, which falls back to the driver
kernel for the back-pointers) computes them with the local kernel and a numpy
sort.  The back-pointer tables (one row per key of each step's output) and the
backward pass are held in the driver as pandas frames.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from faq import kernel, spark_ops
from faq.rule import VALUE
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    from faq.executor import Data, Executor
    from faq.physical import Choice
    from faq.planner import Step

__all__ = ["WitnessRecorder", "direction"]


def direction(S: Semiring) -> str:
    """``"max"`` or ``"min"``: which value ⊕ selects, for a selective semiring.

    Raises
    ------
    ValueError
        ⊕ of ``S`` is not selective (sum, logaddexp...): no single assignment
        attains the aggregate in general.
    """
    add = S.add
    if add is max or add is operator.or_:
        return "max"
    if add is min or add is operator.and_:
        return "min"
    raise ValueError(
        f"witness=True needs a selective ⊕ (max or min, e.g. max-product, max-plus, "
        f"min-plus, boolean); semiring {S.name!r} does not have one"
    )


class WitnessRecorder:
    """Back-pointer tables of one solve and the backward pass that reads them."""

    def __init__(self, S: Semiring) -> None:
        self.S = S
        self.best = direction(S)
        self.pointers: list[tuple[Step, pd.DataFrame]] = []

    # -- forward ------------------------------------------------------------------------
    def record(self, ex: Executor, step: Step, inputs: list[Data], choice: Choice) -> None:
        """Keep the back-pointer table of ``step`` (before the executor runs it)."""
        if not step.vars:
            return
        keep = tuple(step.output.vars)
        if choice.backend == "spark":
            table = self._spark(ex, step, inputs, keep)
        else:
            table = self._local(ex, step, inputs, keep)
        self.pointers.append((step, table))

    def _local(self, ex: Executor, step: Step, inputs: list[Data], keep: tuple[str, ...]):
        tables = [ex.table(d) for d in inputs]
        allv = (*keep, *step.vars)
        joined = kernel.generic_join(tables, allv, allv, ex.ops)
        n = joined.rows
        values = joined.values
        if values is None:
            values = np.full(n, self.S.one, dtype=object if self.S.name != "boolean" else bool)
        vals = np.asarray(values)
        # lexsort: last key is primary; keys: output vars, then value (best first), then
        # eliminated vars ascending.
        score = vals.astype(float) if vals.dtype != object else vals.astype(float)
        if self.best == "max":
            score = -score
        keys = [*reversed([joined.col(v) for v in step.vars]), score]
        keys += list(reversed([joined.col(v) for v in keep]))
        idx = np.lexsort(keys) if n else np.zeros(0, dtype=np.int64)
        df = pd.DataFrame({v: joined.col(v)[idx] for v in allv})
        return df.drop_duplicates(list(keep), keep="first") if keep else df.head(1)

    def _spark(self, ex: Executor, step: Step, inputs: list[Data], keep: tuple[str, ...]):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        frames = [spark_ops.Frame(d.vars, ex.dataframe(d), d.rows) for d in inputs]
        joined = frames[0] if len(frames) == 1 else spark_ops.binary_join(frames, self.S)
        value = F.col(VALUE)
        if self.S.name == "boolean" or joined.df.schema[VALUE].dataType.typeName() == "boolean":
            value = value.cast("int")
        first = value.desc() if self.best == "max" else value.asc()
        w = Window.partitionBy(*keep).orderBy(first, *[F.col(v).asc() for v in step.vars])
        df = (
            joined.df.withColumn("__rank", F.row_number().over(w))
            .filter(F.col("__rank") == 1)
            .select(*keep, *step.vars)
        )
        return df.toPandas()

    # -- backward -----------------------------------------------------------------------
    def assign(self, result: pd.DataFrame, head: tuple[str, ...]) -> pd.DataFrame:
        """``result`` (head columns and ``value``) with one column per bound variable.

        Walks the back-pointer tables from the last step to the first.
        """
        w = result
        for step, table in reversed(self.pointers):
            keep = list(step.output.vars)
            w = w.merge(table, on=keep, how="left") if keep else w.merge(table, how="cross")
        bound = [v for step, _ in self.pointers for v in step.vars]
        w = w[[*head, *bound, VALUE]]
        return w.sort_values(list(head)).reset_index(drop=True) if head else w


def witness_frame(ex: Executor, d: Data, head: tuple[str, ...], rec: WitnessRecorder):
    """The result rows (head, value) of a solve as pandas, then with the witnesses."""
    if d.table is not None:
        t = d.table
        vals = t.values if t.values is not None else np.full(t.rows, rec.S.one)
        base = pd.DataFrame({**{v: t.col(v) for v in head}, VALUE: vals})
    else:
        assert d.df is not None
        base = d.df.select(*head, VALUE).toPandas()
    return rec.assign(base, head)
