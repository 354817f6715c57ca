"""A recursive program solved whole inside one Spark task: one Spark job, not a few a round.

A fixpoint partitioned in Spark (:mod:`faq.spark.fixpoint`) pays a few Spark jobs a
round (the change's broadcast or shuffle, the ⊕-merge's ``groupBy``, the checkpoint),
about a second each on a small cluster whatever the change holds, and so do the
PySpark loops and Pregel programs users would write instead.  When the inputs kept in
Spark are small enough for one task's memory (``program_task_rows``, chosen by
:func:`faq.plan.physical.in_one_task`), one Spark job runs the whole program
(:func:`faq.one_task.run_in_one_task`): the task runs :meth:`faq.Program.run` over its
inputs with ``backend="driver"``, every round on the driver's kernel, none of them a
Spark job, and the answer's rows go back to Spark with the run's rounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from faq.factor import Factor
from faq.kernel.table import Table
from faq.one_task import may_fit, placement, run_in_one_task
from faq.plan.settings import current
from faq.program_run import ProgramRun
from semirings import Semiring

__all__ = ["TASK", "program_in_one_task"]

log = logging.getLogger("faq")

TASK = "one task"
"""A round's place (:attr:`faq.program_run.Round.where`) when the whole program ran in
one Spark task."""


def program_in_one_task(
    program: Any,
    inputs: Mapping[str, Factor],
    opts: Mapping[str, Any],
    max_rounds: int,
    t0: float,
    witness: bool,
    checked: bool = True,
) -> ProgramRun | None:
    """Run ``program`` whole inside one Spark task over ``inputs`` when the planner says
    so (:func:`faq.one_task.placement`), and return its record; else None.

    Parameters
    ----------
    program : faq.Program
        The program; it is rebuilt in the task from its text and semiring.
    inputs : mapping of str to Factor
        Its input relations, read and checked (``checked``) or as given: those kept in
        Spark are gathered into the task by the job, the others travel with the task's
        function.
    opts : mapping
        ``order``, ``join`` and ``backend`` of the run (in the task, every step runs on
        the driver's kernel).
    max_rounds : int
        As for :meth:`faq.Program.run`.
    t0 : float
        When the run started (``time.perf_counter()``), before its inputs were read.
    witness : bool
        Whether the run keeps witnesses (then it does not run in a task).
    checked : bool
        Whether ``inputs`` were read and checked (:meth:`faq.Factor.validated`: one
        Spark job, exact row counts).  Unchecked, the planner decides from Spark's own
        estimates (:func:`faq.one_task.estimated_rows`), and returns None when those do
        not say that an input stays out of the driver and how many rows it holds (the
        caller then checks the inputs and asks again); the task checks the rows
        instead, as the driver would (:func:`faq.spark.convert.arrow_to_table`).

    Returns
    -------
    ProgramRun or None
        The answer as a Factor kept in Spark, the rounds as the task ran them (each
        one's place :data:`TASK`), the driver's reading and the job's own cost (the
        gathering of the inputs, the answer's checkpoint) in ``read_seconds``; the
        planner's reason in ``plans`` for every recursive group.

    Raises
    ------
    Exception
        What the run raised in the task, with its type and message
        (:class:`faq.plan.convergence.DivergenceError`, OverflowError, ...).
    """
    S: Semiring = program.semiring
    backend = opts["backend"]
    if witness or not may_fit(current().program_task_rows, backend):
        return None
    limit = "program_task_rows"
    placed = placement(inputs, S, program.rules, backend, witness, limit, checked=checked)
    if placed is None:
        return None
    read_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    head = program.vars[program.answer]
    body = _ProgramBody(type(program), program.text, S, opts, max_rounds)
    what = f"program {program.answer}: every round in one Spark task"
    result, (rounds, groups, task_read) = run_in_one_task(
        body, inputs, head, S, placed, program.answer, what
    )
    job = _since(t0) - sum(r.seconds for r in rounds) - task_read
    plans = tuple((names, placed.why) for names, _ in groups)
    rounds = tuple(replace(r, where=(TASK,), spark_reads=()) for r in rounds)
    log.info("%s: %d rounds in %.2f s", what, sum(1 for r in rounds if r.round), _since(t0))
    return ProgramRun(result, rounds, program, read_seconds + task_read + job, plans)


def _since(t0: float) -> float:
    return time.perf_counter() - t0


class _ProgramBody:
    """The program's run in the one task (picklable): rebuilt there from its text and
    semiring, run with ``backend="driver"``; its record is the rounds, the planner's
    groups and the seconds spent reading."""

    def __init__(
        self, kind: type, text: str, S: Semiring, opts: Mapping[str, Any], max_rounds: int
    ) -> None:
        self.kind, self.text, self.S = kind, text, S
        self.order, self.join = opts["order"], opts["join"]
        self.max_rounds = max_rounds

    def __call__(self, factors: dict[str, Factor], read: float) -> tuple[Table, Any]:
        program = self.kind(self.text, self.S)
        run = program.run(
            order=self.order,
            join=self.join,
            backend="driver",
            max_rounds=self.max_rounds,
            **factors,
        )
        return run.result.to_table(), (run.rounds, run.plans, read + run.read_seconds)
