"""Witnesses: an assignment of the bound variables that attains each answer.

For a *selective* semiring (one that declares ``selective``, ⊕ is max or min:
max-product, max-plus, min-plus, boolean, or a user semiring whose ``add`` is the
builtin ``max``/``min``, see :class:`semirings.Semiring`) the
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

Values are compared as the semiring's own values, never as floats made from
them: a row of a step's bag attains its output key when its value ``==`` the
⊕ of all the key's rows, that ⊕ computed by the semiring itself (numpy for the
built-ins, ``S.add`` for a user semiring).  So integers past 2**53 (Python
ints of any size in the driver), strings and tuples are exact.  Ties are broken
deterministically: among the rows that attain the ⊕, the one with the smallest
eliminated values (lexicographically, in the order of ``step.vars``) wins.

Where it runs: a step partitioned over Spark finds its back-pointers in its
cells: each cell's kernel keeps the best row per output key
(:func:`faq.kernel.pointers.back_pointers`); when an eliminated variable is cut,
a key has a candidate per cell and Spark picks the best of them as below.  Any
other step run on Spark computes them with Spark: a
window ``row_number`` per output key, ordered by the value when the semiring's
``SparkOps`` declares ``ordered`` (the built-ins: double, bigint or boolean, whose
Spark order is theirs) and, for any other semiring, over the rows whose value
equals the key's ⊕ (computed with
the semiring's Spark side, UDFs for a user semiring).  Every other step (the
local kernel in the driver, and the "tasks" backend, which falls back to the
driver kernel for the back-pointers) computes them with the local kernel: one
sort, one segment ⊕ and one comparison.  The back-pointer tables (one row per
key of each step's output) and the backward pass are held in the driver as
pandas frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from faq.kernel import join as kernel
from faq.kernel.pointers import back_pointers
from faq.plan.physical import join_order
from faq.rule import VALUE
from faq.spark import ops as spark_ops
from faq.spark.partitioned import run_pointers
from semirings import Semiring
from semirings import spark as spark_semirings

if TYPE_CHECKING:  # pragma: no cover
    from faq.executor import Data, Executor
    from faq.plan.logical import Step
    from faq.plan.physical import Choice

__all__ = ["Paths", "WitnessRecorder", "Witnesses", "direction", "witness_frame"]


class Paths(Protocol):
    """Paths along the witnesses of a program's answer (:class:`faq.paths.WitnessPaths`)."""

    def path(self, key: Any) -> list[tuple[Any, ...]]:
        """The keys from a source to ``key``, along witnesses."""


@dataclass(frozen=True)
class Witnesses:
    """What a result solved with ``witness=True`` carries; its Factor is built with it.

    Attributes
    ----------
    frame : pandas.DataFrame
        The head columns, one column per bound variable (a witness), then ``value``
        (:attr:`faq.Factor.witness_frame`).
    paths : Paths or None
        A recursive program's answer: the paths its witnesses make
        (:meth:`faq.Factor.path`); None for a query's result.
    """

    frame: pd.DataFrame
    paths: Paths | None = None


def direction(S: Semiring) -> str:
    """``"max"`` or ``"min"``: which value ⊕ selects, for a selective semiring.

    Raises
    ------
    ValueError
        ⊕ of ``S`` is not selective (sum, logaddexp...): no single assignment
        attains the aggregate in general.
    """
    if S.selective is not None:
        return S.selective
    raise ValueError(
        f"witness=True needs a selective ⊕ (max or min, e.g. max-product, max-plus, "
        f"min-plus, boolean); semiring {S.name!r} does not declare one (selective=)"
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
        if choice.in_spark:
            table = self._spark(ex, step, inputs, keep, choice)
        else:
            table = self._local(ex, step, inputs, keep, choice.order)
        self.pointers.append((step, table))

    def _local(
        self,
        ex: Executor,
        step: Step,
        inputs: list[Data],
        keep: tuple[str, ...],
        order: tuple[str, ...] = (),
    ):
        tables = [ex.table(d) for d in inputs]
        allv = (*keep, *step.vars)
        # bound in the planner's binding order of the step (kept variables first would
        # make a Cartesian product of them in a sparse bag); back_pointers sorts the rows
        by = tuple(order) if sorted(order) == sorted(allv) else allv
        joined = kernel.generic_join(tables, by, allv, ex.ops)
        best = back_pointers(joined, keep, step.vars, ex.ops, self.S)
        return pd.DataFrame({v: best.col(v) for v in allv})

    def _spark(
        self,
        ex: Executor,
        step: Step,
        inputs: list[Data],
        keep: tuple[str, ...],
        choice: Choice,
    ):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if choice.shares is not None:  # found in the cells, the best of every cell's
            cells = [(d.vars, ex.rows_frame(d)) for d in inputs]
            found = run_pointers(cells, choice.shares, choice.order, keep, step.vars, self.S)
            if not choice.shares.combine:  # each key's rows all met in one cell
                return found.select(*keep, *step.vars).toPandas()
            joined = spark_ops.Frame((*keep, *step.vars), found, choice.shares.total)
        else:
            frames = [spark_ops.Frame(d.vars, ex.dataframe(d), d.rows) for d in inputs]
            ordered = [frames[i] for i in join_order([d.info() for d in inputs])]
            one = len(ordered) == 1
            joined = ordered[0] if one else spark_ops.binary_join(ordered, self.S)
        by = [F.col(v).asc() for v in step.vars]
        w = Window.partitionBy(*keep)
        if self.S.spark is not None and self.S.spark.ordered:  # Spark's order is ⊕'s
            value = F.col(VALUE)
            if joined.df.schema[VALUE].dataType.typeName() == "boolean":
                value = value.cast("int")
            first = value.desc() if self.best == "max" else value.asc()
            df = joined.df.withColumn("__rank", F.row_number().over(w.orderBy(first, *by)))
        else:  # the rows equal to the ⊕ of their key, computed by the semiring itself
            best = spark_semirings.reduce(self.S, joined.df, list(keep), VALUE)
            best = best.withColumnRenamed(VALUE, "__best")
            df = joined.df.join(best, on=list(keep)) if keep else joined.df.crossJoin(best)
            df = df.filter(F.col(VALUE) == F.col("__best"))
            df = df.withColumn("__rank", F.row_number().over(w.orderBy(*by)))
        df = df.filter(F.col("__rank") == 1).select(*keep, *step.vars)
        return df.toPandas()

    # -- backward -----------------------------------------------------------------------
    def assign(self, result: pd.DataFrame, head: tuple[str, ...]) -> pd.DataFrame:
        """``result`` (head columns and ``value``) with one column per bound variable.

        Walks the back-pointer tables from the last step to the first.

        Raises
        ------
        ValueError
            A key has no back-pointer: no row of a step equalled the ⊕ of its key.
        """
        w = result
        for step, table in reversed(self.pointers):
            keep = list(step.output.vars)
            w = w.merge(table, on=keep, how="left") if keep else w.merge(table, how="cross")
        bound = [v for step, _ in self.pointers for v in step.vars]
        if len(w) != len(result) or (bound and w[bound].isna().to_numpy().any()):
            raise ValueError(
                f"witness=True: semiring {self.S.name!r}: no assignment's value equals (==) "
                "the ⊕ of some output key; witnesses need a ⊕ that returns one of its "
                "arguments and values that equal themselves"
            )
        w = w[[*head, *bound, VALUE]]
        return w.sort_values(list(head)).reset_index(drop=True) if head else w


def witness_frame(d: Data, head: tuple[str, ...], rec: WitnessRecorder) -> pd.DataFrame:
    """The result rows (head, value) of a solve as pandas, then with the witnesses."""
    if d.table is not None:
        t = d.table
        vals = t.values if t.values is not None else np.full(t.rows, rec.S.one)
        base = pd.DataFrame({**{v: t.col(v) for v in head}, VALUE: vals})
    else:
        assert d.df is not None
        base = d.df.select(*head, VALUE).toPandas()
    return rec.assign(base, head)
