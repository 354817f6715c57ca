"""The text of ``Query.explain()``: a plan, its physical choices and, after a run, its trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faq.plan.logical import ESTIMATE, EXACT, Plan
from faq.plan.physical import Choice
from faq.plan.runners import GENERIC_JOIN
from faq.plan.settings import Settings

__all__ = ["StepTrace", "Trace", "render"]


@dataclass(frozen=True)
class StepTrace:
    """What happened in one step: the physical choice and the actual figures."""

    choice: Choice
    rows: int
    seconds: float
    proposed: int | None = None  # candidates the local kernel proposed
    largest: int | None = None  # largest intermediate (Spark, with ``trace``)
    estimated: bool = False  # a lazy output (computed with a later step): ``rows`` estimated
    ran: str = ""  # the runner that computed a driver step, when not the one chosen
    ran_why: str = ""  # why (a library runner declined: the data could overflow, ...)


@dataclass(frozen=True)
class Trace:
    """Runtime figures of one solve: one :class:`StepTrace` per step of the plan."""

    steps: tuple[StepTrace, ...]
    seconds: float
    options: tuple[tuple[str, str], ...] = ()
    task: str = ""
    """Where the whole solve ran when it ran in one Spark task (:mod:`faq.query_task`), and
    why; its steps then ran on the local kernel in that task."""


DECIDING = ("local_rows", "task_work", "thread_work", "cell_rows", "cell_min_rows")
"""The settings :func:`faq.plan.physical.choose` reads, shown at the top of every report."""

_INEXACT = "estimates: rows before repeated keys are combined, distinct counts approximate in Spark"
"""The mark of an input whose statistics are not counts (:attr:`RelationStats.exact` False)."""

_WHERE = {
    "driver": "local kernel in the driver",
    "tasks": "local kernel in {n} Spark tasks",
    "spark": "Spark DataFrame joins",
}


def render(
    plan: Plan,
    choices: Sequence[Choice] | None = None,
    semiring: str = "",
    trace: Trace | None = None,
    settings: Settings | None = None,
    placement: str = "",
) -> str:
    """The plan as readable text, with each step's physical choice when given and, with
    ``trace``, the actual figures of the run; with ``settings``, the thresholds that
    decide where steps run (and any other setting changed from its default); with
    ``placement`` (or a trace's ``task``), where the whole solve runs."""
    lines = [f"FAQ plan for {plan.rule}" + (f"   [semiring: {semiring}]" if semiring else "")]
    if settings is not None:
        lines.append(f"settings: {settings.describe(DECIDING)}")
    placement = trace.task if trace is not None and trace.task else placement
    if placement:
        lines.append(f"whole solve {placement}")
    lines.append("inputs:")
    for a in plan.atoms:
        d = ", ".join(f"{v}={_fmt(n)}" for v, n in a.distinct.items())
        line = f"  {a}: {_fmt(a.rows)} rows" + (f"; distinct {d}" if d else "")
        if a.basis != EXACT:
            line += f"   ({_INEXACT})"
        lines.append(line)
    order = ", ".join(plan.order) if plan.order else "(none)"
    lines.append(
        f"variable order (eliminated first to last): {order}   "
        f"[strategy: {plan.strategy}; estimated cost {_fmt(plan.cost)} joined rows]"
    )
    lines.append(f"free variables: {', '.join(plan.rule.head) or '(none: scalar result)'}")
    lines.extend(_precedence(plan))
    reader = {id(f): m for m, s in enumerate(plan.steps, 1) for f in s.factors}
    for n, s in enumerate(plan.steps, 1):
        c = choices[n - 1] if choices is not None else None
        what = f"eliminate {', '.join(s.vars)}" if s.vars else "multiply onto the head"
        if s.op is not None and s.vars:
            what += f"   [⊕ = {s.op}]"
        lines.append(f"step {n}: {what}")
        lines.append(f"  join     {' ⋈ '.join(str(f) for f in s.inputs)}")
        if s.absorbed:
            lines.append(
                "  absorb   "
                + ", ".join(str(f) for f in s.absorbed)
                + "  (contained in the bag's variables)"
            )
        shape = "cyclic" if s.cyclic else "acyclic"
        if c is None:
            lines.append(f"  bag      {shape}")
        else:
            label = "worst-case optimal (Generic Join)" if c.method == "wcoj" else "binary"
            if c.method == "wcoj" and c.runner != GENERIC_JOIN:
                label = f"{c.runner} (a library runner)"
            lines.append(f"  method   {label} ({shape} bag)")
            where = _WHERE[c.backend].format(n=c.tasks)
            if placement and c.placement == "driver":
                where = "local kernel in the one Spark task"
            if c.threads > 1:
                where += f" ({c.threads} threads)"
            if c.one_cell:
                where = "local kernel in one Spark task (one cell)"
                m = reader.get(id(s.output))
                if choices is not None and m is not None and _one_cell(choices[m - 1], plan, m):
                    where += f", with step {m}"
            elif c.shares is not None:
                where = f"local kernel in {c.shares.total} cells partitioned over Spark"
            lines.append(f"  runs on  {where}   [{c.why}]")
            if c.method == "wcoj":
                lines.append(
                    f"  runner   {c.runs}" + (f"   [{c.runner_why}]" if c.runner_why else "")
                )
            if c.shares is not None and c.one_cell:
                lines.append(f"  cells    one: ~{_fmt(c.shares.load)} rows, read where they are")
            elif c.shares is not None:
                lines.append(f"  cells    {c.shares.describe()}")
            if c.method == "wcoj":
                lines.append(f"  binding  {', '.join(c.order)}")
            if c.pair_rows is not None:
                lines.append(f"  pairwise {c.pair_rows:,.0f} rows: the cheapest join of two atoms")
        lines.append(f"  output   {s.output}")
        lines.append(
            f"  estimate join {_sized(s.est_join, s.join_basis)} -> output "
            f"{_sized(s.output.rows, s.output.basis)}"
        )
        if trace is not None and n <= len(trace.steps):
            t = trace.steps[n - 1]
            extra = ""
            if t.proposed:
                extra += f"; {t.proposed:,} candidates proposed"
            if t.largest is not None:
                extra += f"; largest intermediate {t.largest:,} rows"
            if t.estimated:
                lines.append(
                    f"  actual   output kept in Spark, computed with the next step "
                    f"(estimate {_sized(t.rows, s.output.basis)}); planned in {t.seconds:.2f} s"
                )
            else:
                lines.append(f"  actual   output {t.rows:,} rows{extra}; {t.seconds:.2f} s")
            if t.ran:
                lines.append(f"  ran      {t.ran}   [{t.ran_why}]")
    if trace is None:
        lines.append("(estimates: q.explain(q.run(...)) reports a run with its actual sizes)")
    else:
        lines.append(f"total {trace.seconds:.2f} s")
    return "\n".join(lines)


def _one_cell(c: Choice, plan: Plan, m: int) -> bool:
    """Whether step ``m`` (choice ``c``) runs in the task of a one-cell step it reads
    (:mod:`faq.spark.fused`): it has one cell too, or aggregates that step's output alone."""
    return c.in_spark and (c.one_cell or len(plan.steps[m - 1].factors) == 1)


def _precedence(plan: Plan) -> list[str]:
    """Per-variable aggregates: the nesting and which orders were allowed, and why."""
    if not plan.blocks:
        return []
    nest = " ".join(f"{op}_{{{', '.join(vs)}}}" for op, vs in plan.blocks)
    lines = [f"aggregates (outermost first): {nest} ⊗ atoms"]
    inner = list(reversed(plan.blocks))
    if len(inner) == 1:
        lines.append("allowed orders: any (one operator for every bound variable)")
        return lines
    seq = " before ".join(f"{{{', '.join(vs)}}} ({op})" for op, vs in inner)
    lines.append(f"allowed orders: eliminate {seq}; any order within a block")
    lines.append(
        "  (an operator commutes with itself, not with another: no variable is eliminated "
        "before one nested inside it under another operator)"
    )
    return lines


def _sized(rows: float, basis: str) -> str:
    """``rows`` as a size, marked by what it rests on: a count as it is, an estimate
    from statistics with ``~`` and "(estimate)", one that no statistic of its join backs
    with ``~`` and "(guess: no join statistics)" (:data:`faq.plan.logical.GUESS`)."""
    if basis == EXACT:
        return f"{_fmt(rows)} rows"
    if basis == ESTIMATE:
        return f"~{_fmt(rows)} rows (estimate)"
    return f"~{_fmt(rows)} rows (guess: no join statistics)"


def _fmt(x: float) -> str:
    if x >= 1e7:
        return f"{x:.3g}"
    return f"{round(x):,}"
