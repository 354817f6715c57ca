"""A query solved whole inside one Spark task: one Spark job, no statistics job, no shuffle.

Past ``local_rows`` a query's inputs stay out of the driver, and each of its steps is
partitioned over the cluster (:mod:`faq.spark.partitioned`): a statistics job first (row
and distinct counts, frequent values, which the plan and the cells' shares need), then a
shuffle of the rows to their cells.  On inputs of a few million rows these fixed costs are
most of the time.  When the inputs kept in Spark hold at most ``query_task_rows`` rows
(:func:`faq.plan.physical.query_in_task`, from Spark's own estimates: no job), one job
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
from faq.one_task import estimated_rows, key_types, run_in_one_task
from faq.plan.logical import Plan
from faq.plan.physical import backend_policy, query_in_task
from faq.plan.report import Trace
from faq.plan.settings import current
from faq.rule import Rule
from faq.source import Source
from faq.spark.checks import explain_cost
from semirings import Semiring

__all__ = ["InTask", "query_in_one_task", "task_placement"]

log = logging.getLogger("faq")


@dataclass(frozen=True)
class InTask:
    """A query's inputs as Factors, how errors name them, the plans (``explain_cost``
    texts) of those kept in Spark and the planner's reason for solving it in one task."""

    factors: dict[str, Factor]
    labels: dict[str, str]
    plans: dict[str, str | None]
    why: str


def task_placement(
    rule: Rule,
    S: Semiring,
    relations: Mapping[str, Any],
    read: Callable[[Mapping[str, Any]], tuple[dict[str, Factor], dict[str, str]]],
    backend: str,
) -> InTask | None:
    """The query's inputs when :func:`faq.plan.physical.query_in_task` puts the whole solve
    in one Spark task (read from Spark's estimates: no job), else None.

    The relations are read by ``read`` as :meth:`faq.Query.solve` reads them (missing or
    extra ones, arities and constants' types raise its errors).  Only ``backend="auto"`` past
    ``local_rows``, without constants in atoms, and with inputs whose rows Spark knows
    (a checkpoint, local rows, Parquet footers) and that stay out of the driver."""
    st = current()
    if not backend_policy(backend).by_size or st.query_task_rows <= st.local_rows:
        return None  # the planner would decline (backend, limits) before any plan is read
    if any(a.consts for a in rule.atoms):
        return None
    factors, labels = read(relations)
    remote = {n: f for n, f in factors.items() if not f.is_local}
    if not remote:
        return None
    plans = {n: explain_cost(f.df) for n, f in remote.items()}  # read once for rows and scans
    rows = estimated_rows(remote, plans, S, backend, labels)
    if rows is None:
        return None
    ok, why = query_in_task([rule], rows, key_types(factors), backend, False)
    return InTask(factors, labels, plans, why) if ok else None


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
    S, head = query.semiring, query.rule.head
    body = _QueryBody(query, order, join, trace)
    what = f"query {query.rule}: every step in one Spark task"
    answer, (plan, tr, read, scalar) = run_in_one_task(
        body, placed.factors, head, S, placed.plans, what, placed.labels
    )
    if answer is None:
        result = Factor.from_table(scalar, S, query.rule.name)
    else:
        src = Source.spark(answer, head, S, checked=True, consolidated=True)
        result = Factor.from_source(src, query.rule.name)
    seconds = time.perf_counter() - t0
    job = seconds - tr.seconds - read
    task = (
        f"{placed.why}; one Spark job of {seconds:.2f} s: the task read its inputs in "
        f"{read:.2f} s and solved in {tr.seconds:.2f} s, gathering and answer {job:.2f} s"
    )
    log.info("%s: %.2f s", what, seconds)
    here = "every step in the task, planned there from exact counts"
    steps = tuple(replace(t, choice=replace(t.choice, why=here)) for t in tr.steps)
    return result, plan, replace(tr, steps=steps, seconds=seconds, task=task)


class _QueryBody:
    """The query's run in the one task (picklable): :meth:`faq.Query.run` with
    ``backend="driver"``; its record is the plan, the trace, the seconds spent reading and,
    for a query without free variables, its value's table (else None)."""

    def __init__(self, query: Any, order: str | Sequence[str], join: str, trace: bool) -> None:
        self.query, self.order, self.join, self.trace = query, order, join, trace

    def __call__(self, factors: dict[str, Factor], read: float) -> tuple[Table | None, Any]:
        run = self.query.run(self.order, self.join, self.trace, "driver", False, **factors)
        table = run.result.to_table()
        if not self.query.rule.head:
            return None, (run.plan, run.trace, read, table)
        return table, (run.plan, run.trace, read, None)
