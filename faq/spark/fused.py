"""One-cell steps run together: a chain of small partitioned steps in one Spark task.

A partitioned step (:mod:`faq.spark.partitioned`) whose shares come out as one
cell (its inputs are small: the ``cell_min_rows`` setting) needs no routing: all
its rows go to one task.  Such a step is not run on its own.  It becomes a
:class:`Program`: its inputs (DataFrames) and one :class:`Op` (the kernel's
binding order, the output variables, the semiring).  The next step, when it too
has one cell and reads that output, adds its own op to the same program instead
of shuffling the output to a task of its own; so do the steps after it.  A
program is run (:func:`realise`) when something else reads its output: a step
of several cells, a local step, or the end of the query.

Running it is one narrow pass: every input's rows, tagged with the input's
index, are unioned and coalesced into one partition (an input that is itself
the output of a partitioned step is first shuffled into one partition, so that
its cells still run in tasks of their own), and one task (``mapInArrow``)
splits them into kernel tables and runs the ops in order, each reading the
inputs and earlier ops' outputs it names, with :func:`faq.kernel.generic_join`.
So consecutive one-cell steps cost one Spark stage together, where each cost a
shuffle and a stage of its own (the alarm network's 25 partitioned steps: one
stage instead of 25).

A program's inputs are held by one task at once, so a step joins a program only
while their rows together stay under the per-cell budget (``cell_rows``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faq.kernel.join import generic_join
from faq.kernel.table import Table
from faq.rule import VALUE
from faq.spark.ops import union_all
from faq.spark.partitioned import REL, kernel_table, row_columns, variable_types
from faq.spark.tasks import arrow_type, marked, table_batch
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["Input", "Op", "Program", "can_fuse", "fuse", "realise"]

Ref = tuple[str, int]
"""An op's argument: ``("in", i)`` the program's input ``i``, ``("op", j)`` op ``j``'s output."""


@dataclass(frozen=True)
class Input:
    """A DataFrame a program reads: key columns named by ``vars``, then ``value`` (keys
    may repeat: the kernel's index ⊕-combines them).  ``shuffled``: the output of a
    partitioned step, shuffled into one partition rather than coalesced into the
    program's task, so its own cells keep their tasks."""

    vars: tuple[str, ...]
    df: DataFrame
    rows: float
    shuffled: bool = False


@dataclass(frozen=True)
class Op:
    """One step of a program: the kernel over ``args`` in binding ``order``, its
    eliminated variables ⊕-folded (in ``S``) onto ``keep``."""

    args: tuple[Ref, ...]
    order: tuple[str, ...]
    keep: tuple[str, ...]
    S: Semiring


@dataclass(frozen=True)
class Program:
    """One-cell steps that run in one task: their inputs, and their ops in order (the
    last op's output is the program's).  ``vtype`` is the Spark type of every value."""

    inputs: tuple[Input, ...]
    ops: tuple[Op, ...]
    vtype: str

    @property
    def rows(self) -> float:
        """The rows of all the inputs (what the task holds at once, at least)."""
        return sum(i.rows for i in self.inputs)

    @property
    def keep(self) -> tuple[str, ...]:
        """The program's output variables."""
        return self.ops[-1].keep


def fuse(
    args: Sequence[Program | Input],
    order: Sequence[str],
    keep: Sequence[str],
    S: Semiring,
) -> Program:
    """A program that runs one more step over ``args``: an input read where it is, or
    the output of a program (whose ops come first, in ``args``' order).

    Raises ValueError when the programs' values are not of the step's Spark type
    (the caller runs those programs first: :func:`can_fuse`).
    """
    vtype = sops.ops(S).type
    inputs: list[Input] = []
    ops: list[Op] = []
    refs: list[Ref] = []
    for a in args:
        if isinstance(a, Input):
            refs.append(("in", len(inputs)))
            inputs.append(a)
            continue
        if a.vtype != vtype:
            raise ValueError(f"a program of {a.vtype} values cannot feed a step of {vtype}")
        first_in, first_op = len(inputs), len(ops)
        inputs += a.inputs
        for op in a.ops:
            moved = tuple(
                (kind, k + (first_in if kind == "in" else first_op)) for kind, k in op.args
            )
            ops.append(Op(moved, op.order, op.keep, op.S))
        refs.append(("op", len(ops) - 1))
    ops.append(Op(tuple(refs), tuple(order), tuple(keep), S))
    return Program(tuple(inputs), tuple(ops), vtype)


def can_fuse(p: Program, S: Semiring, rows: float, budget: float) -> bool:
    """Whether a step in ``S`` whose other inputs hold ``rows`` rows can join program
    ``p``: the same Spark value type, and all their inputs within ``budget`` rows."""
    return p.vtype == sops.ops(S).type and p.rows + rows <= budget


def realise(p: Program) -> DataFrame:
    """The program's output, lazily: its inputs in one partition, the ops run by one
    task (``keep`` columns, then ``value``; one row per key, zeros dropped)."""
    frames = [(i.vars, i.df) for i in p.inputs]
    types = variable_types(frames)
    parts = []
    for k, i in enumerate(p.inputs):
        df = i.df.repartition(1) if i.shuffled else i.df
        parts.append(df.selectExpr(*row_columns(k, i.vars, types, p.vtype)))
    rows = union_all(parts)
    keep = p.keep
    schema = ", ".join([f"`{v}` {types[v]}" for v in keep] + [f"`{VALUE}` {p.vtype}"])
    task = _Task(tuple(i.vars for i in p.inputs), p.ops, p.vtype)
    return rows.coalesce(1).mapInArrow(task, schema)


class _Task:
    """What the program's task runs: its ops in order over its inputs (picklable)."""

    def __init__(self, inputs: tuple[tuple[str, ...], ...], ops: tuple[Op, ...], vtype: str):
        self.inputs = inputs
        self.ops = ops
        self.vtype = vtype
        self.value_type = arrow_type(vtype)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        got = [b for b in batches if b.num_rows]
        if not got:
            return
        rows = pa.Table.from_batches(got)
        rels = rows.column(REL).to_numpy()
        outs: list[Table] = []
        try:
            for op in self.ops:
                ops = local_ops(op.S)
                tables = [
                    kernel_table(rows, np.flatnonzero(rels == k), self.inputs[k], self.vtype, ops)
                    if kind == "in"
                    else outs[k]
                    for kind, k in op.args
                ]
                outs.append(generic_join(tables, op.order, op.keep, ops))
            out = outs[-1]
        except Exception as exc:
            raise marked(exc) from exc
        if out.rows:
            yield table_batch(out, local_ops(self.ops[-1].S), self.value_type)
