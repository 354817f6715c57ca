"""The reach of a change, planned from the rule alone: which atoms a term reads, hop by hop.

A term of the delta rule joins one changed atom's change with every other atom; it
reads only the rows of those atoms that can join with the change.  Which rows those
are is found hop by hop: the atoms sharing a variable with the changed atom are read
at the change's values of those variables (hop 1); the variables they bring name the
rows of the atoms one hop further (hop 2); and so on until every atom is read.  Which
atom is read at which hop, and through which of its columns, depends on the rule
only: :func:`hops` plans it, with no data.  An atom sharing no variable with what the
change reaches (a Cartesian product) bounds nothing: the term's hops are incomplete.

The fetch half reads the rows each hop names: keyed lookups and masks in the driver
(:mod:`faq.kernel.reach`), ``IN``-list or semi-join scans in Spark
(:mod:`faq.spark.reach`).  What the driver may look for is bounded here, in one place
(:class:`Bounds`): at most ``max_literals`` values in one scan's ``IN`` lists, and at
most ``max_fetch_rows`` rows fetched into the driver.  Every reader of a change's
reach (the driver delta rule, the one-task Spark delta, the Spark view state,
recursion through them) asks :func:`bounds` and words a refusal with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from faq.plan.settings import Settings, current
from faq.rule import Rule

__all__ = ["Bounds", "Hop", "Reach", "bounds", "hops"]


@dataclass(frozen=True)
class Hop:
    """One atom a term reads at one hop.

    Attributes
    ----------
    atom : int
        The atom's index in the rule.
    cols : tuple of (int, str)
        The atom's columns whose variable the term knows when it reads it (column
        index, variable), in column order: its rows are read at the values those
        variables can take (the first alone, or all together).
    """

    atom: int
    cols: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Reach:
    """The hops of one term of the delta rule (see :func:`hops`).

    Attributes
    ----------
    atom : int
        The changed atom: the term reads its change.
    rounds : tuple of tuple of Hop
        Per hop, the atoms read then.
    complete : bool
        Whether the hops read every other atom (False: some atom shares no variable
        with what the change reaches; ``rounds`` stop before it).
    """

    atom: int
    rounds: tuple[tuple[Hop, ...], ...]
    complete: bool

    @property
    def one_hop(self) -> bool:
        """Whether the term reads every other atom at hop 1 (or there is none): what it
        reads is known from its change alone."""
        return self.complete and len(self.rounds) <= 1

    def first(self, j: int) -> tuple[tuple[int, str], ...]:
        """The columns atom ``j`` is read at in hop 1 (none when it is not one hop away)."""
        for h in self.rounds[0] if self.rounds else ():
            if h.atom == j:
                return h.cols
        return ()


def hops(rule: Rule, atom: int) -> Reach:
    """The hops of the term whose change is atom ``atom``'s: per hop, the atoms read then.

    Hop 1 reads the atoms sharing a variable with atom ``atom``; hop ``k + 1`` those
    sharing a variable with the atoms read so far, through the columns of those
    variables.  The hops stop, incomplete, where no unread atom shares a variable with
    them (the change bounds nothing of it).
    """
    known = set(rule.atoms[atom].vars)
    read = {atom}
    out: list[tuple[Hop, ...]] = []
    while len(read) < len(rule.atoms):
        now = tuple(
            Hop(j, tuple((k, v) for k, v in enumerate(b.vars) if v in known))
            for j, b in enumerate(rule.atoms)
            if j not in read and any(v in known for v in b.vars)
        )
        if not now:
            return Reach(atom, tuple(out), False)
        out.append(now)
        for h in now:
            read.add(h.atom)
            known.update(rule.atoms[h.atom].vars)
    return Reach(atom, tuple(out), True)


@dataclass(frozen=True)
class Bounds:
    """What the driver may look for while reading a change's reach (from the settings).

    Attributes
    ----------
    max_literals : int
        Values in the ``IN`` lists of one scan (more: a semi-join in Spark instead).
    max_fetch_rows : int
        Rows fetched into the driver (more: the terms run as Spark queries).
    """

    max_literals: int
    max_fetch_rows: int

    def literals_over(self, n: int, what: str) -> str:
        """Why ``n`` values to look for ``what`` are refused, or "" when they fit."""
        if n <= self.max_literals:
            return ""
        return f"{n:,} {what} > max_literals={self.max_literals:,}"

    def rows_over(self, what: str) -> str:
        """Why rows past ``max_fetch_rows`` are refused: ``what`` (say, "a tick reaches")
        over the bound."""
        return f"{what} over max_fetch_rows={self.max_fetch_rows:,} rows"


def bounds(st: Settings | None = None) -> Bounds:
    """The bounds of the settings ``st`` (those in force when None)."""
    st = st or current()
    return Bounds(st.max_literals, st.max_fetch_rows)
