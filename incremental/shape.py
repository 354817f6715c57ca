"""What a view reads of what it maintains: a one-rule query or a program, read once.

:class:`Shape` answers, for :class:`incremental.IncrementalView`, the questions whose
answers differ between a :class:`faq.Query` and a :class:`faq.Program`: which relations
a step takes changes of (a program's input relations only), every relation's key names
(a program's defined relations too), the atom a delta is checked against, the text a
durable view's manifest names, and the refusal of an unknown relation.  The view picks
its state from it once (a program's is :class:`incremental.program_state.ProgramState`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faq import Program, Query, Rule
from incremental.deltas import key_names, unknown_message
from incremental.program_state import program_keys, program_text, unknown_input

__all__ = ["Shape"]


@dataclass(frozen=True)
class Shape:
    """A view's query or program, as the view reads it.

    Attributes
    ----------
    rule : faq.Rule
        The query's rule; a program's first rule (its head is the answer).
    program : faq.Program or None
        The program, None for a one-rule query.
    inputs : mapping of str to int
        The relations a step takes changes of, with their arities.
    keys : dict of str to tuple of str
        Every relation's key names (a program's defined relations too).
    text : str
        The rule (a program's rules, one per line) as a durable view's manifest names it.
    """

    rule: Rule
    program: Program | None
    inputs: Mapping[str, int]
    keys: dict[str, tuple[str, ...]]
    text: str

    @classmethod
    def of(cls, query: Any) -> Shape:
        """The shape of ``query`` (a :class:`faq.Query` or :class:`faq.Program`).

        Raises
        ------
        TypeError
            ``query`` is neither.
        ValueError
            A query a view cannot maintain (:meth:`faq.Query.check_incremental`).
        """
        if isinstance(query, Program):
            keys = program_keys(query)
            return cls(query.rule, query, query.inputs, keys, program_text(query))
        if not isinstance(query, Query):
            raise TypeError(
                "IncrementalView takes a faq.Query or faq.Program (from faq.query(...)), "
                f"not {type(query).__name__}"
            )
        query.check_incremental("IncrementalView")
        r = query.rule
        return cls(r, None, r.relations, {n: key_names(r, n) for n in r.relations}, str(r))

    def check(self, state: str, max_rounds: int | None) -> None:
        """Refuse what a view of this shape does not take.

        Raises
        ------
        ValueError
            ``state="spark"`` for a program (its state is in the driver only), or
            ``max_rounds`` for a one-rule query.
        """
        if self.program is not None and state == "spark":
            raise ValueError(
                'IncrementalView over a program: state="spark" is not supported (a program '
                'view keeps its fixpoint in the driver); use state="auto" or "driver"'
            )
        if self.program is None and max_rounds is not None:
            raise ValueError("max_rounds= applies to views of programs (recursive queries) only")

    def atom(self, name: str) -> str:
        """The first atom of input relation ``name`` (deltas of it are checked against it)."""
        rules = (self.rule,) if self.program is None else self.program.rules
        return str(next(a for r in rules for a in r.atoms if a.relation == name))

    def unknown(self, names: Sequence[str]) -> str:
        """The refusal of ``names``, which are not relations of the view (or, of a
        program, not its input relations)."""
        if self.program is not None:
            return unknown_input(self.program, names)
        return unknown_message(self.rule, list(names))
