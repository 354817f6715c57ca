"""The record of a program's run (:class:`ProgramRun`: the answer and every semi-naive
:class:`Round`) and the text of ``Program.explain``.

Each round says where its joins ran and what it cost: its wall time, which includes
the Spark jobs it ran (the lookups of the delta rule's driver path in relations kept
in Spark, or whole Spark queries), the rows of the change it read and the rows it
derived, and the size of the change it made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faq.factor import Factor
from faq.plan.settings import current

__all__ = ["ProgramRun", "Round", "RoundProgress"]

log = logging.getLogger("faq")

_LEGEND = (
    "per round: its change Δ; [where its joins ran: driver = the local kernel, spark = Spark,\n"
    "  one task = the local kernel in the one Spark task that ran the whole program;\n"
    "  lookups in Spark: the driver kernel over rows fetched by filtered Spark scans];\n"
    "  the rows of Δ it read and the rows its rules derived; its wall time, Spark jobs included"
)


@dataclass(frozen=True)
class Round:
    """One semi-naive round of a group: its change, where its joins ran and its cost.

    Attributes
    ----------
    group : tuple of str
        The group's relations.
    round : int
        0 for the base rules, then 1, 2, ...
    delta : tuple of (str, int)
        Per relation of the group, the rows of the change this round made (Δ).
    where : tuple of str
        Where the round's joins ran: ``"driver"`` (the local kernel), ``"tasks"``
        (the kernel in Spark tasks), ``"spark"`` (Spark queries or cells) or ``"one
        task"`` (the local kernel inside the one Spark task that ran the whole program,
        :mod:`faq.program_task`).
    seconds : float
        The round's wall time, its Spark jobs (lookups, queries) included.
    rows_in : int
        The rows of the change the round read (the previous round's Δ; 0 in round 0).
    derived : int
        The rows the round's rules derived, before the improvements were kept.
    spark_reads : tuple of str
        The input relations kept in Spark that the round's driver-side delta rule read
        by filtered Spark scans (one Spark job each, per rule and round).
    """

    group: tuple[str, ...]
    round: int
    delta: tuple[tuple[str, int], ...]
    where: tuple[str, ...]
    seconds: float = 0.0
    rows_in: int = 0
    derived: int = 0
    spark_reads: tuple[str, ...] = ()

    def describe(self) -> str:
        """The round as one line of ``explain()``."""
        sizes = ", ".join(f"Δ{n} {k:,} rows" for n, k in self.delta)
        where = list(self.where)
        if self.spark_reads:
            where.append(f"lookups in Spark: {', '.join(self.spark_reads)}")
        shown = f" [{'; '.join(where)}]" if where else ""
        if self.round == 0:
            work = "base rules"
        else:
            work = f"read {self.rows_in:,} rows of Δ, derived {self.derived:,}"
        return f"round {self.round}: {sizes}{shown}; {work}; {self.seconds:.2f} s"


@dataclass(frozen=True)
class ProgramRun:
    """The record of one :meth:`faq.Program.run`: the answer and every round."""

    result: Factor
    rounds: tuple[Round, ...]
    program: Any  # the faq.Program that ran (it imports this module)
    read_seconds: float = 0.0  # reading and checking the inputs, before round 0
    plans: tuple[tuple[tuple[str, ...], str], ...] = ()  # per recursive group: where, why

    @property
    def seconds(self) -> float:
        """The run's wall time: the inputs read, then every round."""
        return self.read_seconds + sum(r.seconds for r in self.rounds)

    def explain(self) -> str:
        """The groups in evaluation order and, per round, its change, where its joins ran
        and what it cost."""
        p = self.program
        lines = [f"program ({p.semiring.name}), answer {p.answer}:"]
        lines += [f"  {r}" for r in p.rules]
        lines.append(_LEGEND)
        lines.append(f"inputs read and checked: {self.read_seconds:.2f} s")
        for g in p.groups:
            kind = "recursive" if g.recursive else "non-recursive"
            mine = [rd for rd in self.rounds if rd.group == g.names]
            spent = sum(rd.seconds for rd in mine)
            lines.append(f"group {', '.join(g.names)} ({kind}): {spent:.2f} s")
            lines += [f"  fixpoint {why}" for names, why in self.plans if names == g.names]
            lines += [f"  {rd.describe()}" for rd in mine]
        lines.append(f"total {self.seconds:.2f} s")
        return "\n".join(lines)


class RoundProgress:
    """Progress lines of one group's fixpoint on the ``"faq"`` logger (INFO): the round
    and its Δ at most every ``progress_seconds`` (the first round always), and one line
    when the group converges, so that a long fixpoint is never silent."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = ", ".join(names)
        self.every = current().progress_seconds
        self.start = self.last = time.perf_counter()
        self.on = log.isEnabledFor(logging.INFO) and self.every > 0

    def round(self, k: int, delta: tuple[tuple[str, int], ...]) -> None:
        """Round ``k`` made the change ``delta`` (rows per relation)."""
        now = time.perf_counter()
        if not self.on or (k > 1 and now - self.last < self.every):
            return
        self.last = now
        sizes = ", ".join(f"Δ{n} {rows:,} rows" for n, rows in delta)
        log.info("fixpoint of %s: round %d: %s; %.1f s", self.names, k, sizes, now - self.start)

    def done(self, rounds: int) -> None:
        """The group converged after ``rounds`` rounds."""
        if self.on and rounds:
            seconds = time.perf_counter() - self.start
            log.info(
                "fixpoint of %s: converged after %d rounds in %.2f s", self.names, rounds, seconds
            )
