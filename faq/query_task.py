"""A query solved whole inside one Spark task: one Spark job, no statistics job, no shuffle.

Past ``local_rows`` a query's inputs stay out of the driver, and each of its steps is
partitioned over the cluster (:mod:`faq.spark.partitioned`): a statistics job first (row
and distinct counts, frequent values, which the plan and the cells' shares need), then a
shuffle of the rows to their cells.  On inputs of a few million rows these fixed costs are
most of the time.  When the inputs kept in Spark hold at most ``query_task_rows`` rows
(:func:`faq.plan.physical.in_one_task`, from Spark's own estimates: no job), one job
gathers them into one task (:func:`faq.one_task.run_in_one_task`), which runs
:meth:`faq.Query.run` over them with ``backend="driver"``: planned from exact counts,
every step on the driver's kernel and its library runners.  The answer's rows go back to
Spark; a query without free variables returns its value in the run's record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from faq.factor import Factor
from faq.kernel.table import Table
from faq.one_task import Placement, may_fit, placement, run_in_one_task
from faq.plan.logical import Plan
from faq.plan.report import Trace
from faq.plan.settings import current
from faq.rule import Rule
from semirings import Semiring

__all__ = ["InTask", "query_in_one_task", "task_placement"]

log = logging.getLogger("faq")


@dataclass(frozen=True)
class InTask:
    """A query's inputs as Factors, and why and how they go into one Spark task."""

    factors: dict[str, Factor]
    placed: Placement


def task_placement(
    rule: Rule,
    S: Semiring,
    relations: Mapping[str, Any],
    read: Callable[[Mapping[str, Any]], tuple[dict[str, Factor], dict[str, str]]],
    backend: str,
) -> InTask | None:
    """The query's inputs when the planner puts the whole solve in one Spark task
    (:func:`faq.one_task.placement`, limited by ``query_task_rows``: from Spark's
    estimates, no job), else None.

    The relations are read by ``read`` as :meth:`faq.Query.solve` reads them (missing or
    extra ones, arities and constants' types raise its errors), and only when the solve
    may go into a task at all (:func:`faq.one_task.may_fit`, no constants in atoms)."""
    if not may_fit(current().query_task_rows, backend) or any(a.consts for a in rule.atoms):
        return None
    factors, labels = read(relations)
    placed = placement(factors, S, [rule], backend, False, "query_task_rows", labels=labels)
    return None if placed is None else InTask(factors, placed)


def query_in_one_task(
    query: Any,
    placed: InTask,
    order: str | Sequence[str],
    join: str,
    trace: bool,
) -> tuple[Factor, Plan, Trace]:
    """Solve ``query`` inside one Spark task over the inputs ``placed`` there
    (:func:`task_placement`): its answer (kept in Spark, checkpointed; a query without
    free variables: its value, held in the driver), the plan the task made and its trace,
    whose ``task`` says where it ran and ``seconds`` are the whole call's.

    Raises what the solve raised in the task, with its type and message (ValueError for
    rows outside the semiring, OverflowError, ...)."""
    t0 = time.perf_counter()
    body = _QueryBody(query, order, join, trace)
    what = f"query {query.rule}: every step in one Spark task"
    result, (plan, tr, read) = run_in_one_task(
        body, placed.factors, query.rule.head, query.semiring, placed.placed, query.rule.name, what
    )
    seconds = time.perf_counter() - t0
    job = seconds - tr.seconds - read
    task = (
        f"{placed.placed.why}; one Spark job of {seconds:.2f} s: the task read its inputs in "
        f"{read:.2f} s and solved in {tr.seconds:.2f} s, gathering and answer {job:.2f} s"
    )
    log.info("%s: %.2f s", what, seconds)
    here = "every step in the task, planned there from exact counts"
    steps = tuple(replace(t, choice=replace(t.choice, why=here)) for t in tr.steps)
    return result, plan, replace(tr, steps=steps, seconds=seconds, task=task)


class _QueryBody:
    """The query's run in the one task (picklable): :meth:`faq.Query.run` with
    ``backend="driver"``; its record is the plan, the trace and the seconds spent
    reading."""

    def __init__(self, query: Any, order: str | Sequence[str], join: str, trace: bool) -> None:
        self.query, self.order, self.join, self.trace = query, order, join, trace

    def __call__(self, factors: dict[str, Factor], read: float) -> tuple[Table, Any]:
        run = self.query.run(self.order, self.join, self.trace, "driver", False, **factors)
        return run.result.to_table(), (run.plan, run.trace, read)
