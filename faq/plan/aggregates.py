"""Per-variable aggregates (general FAQ): a query's ``aggregates=`` checked against its rule.

The FAQ expression of ``query(rule, S, aggregates={"y": "max"})`` is

    Q(free) = ⊕⁽¹⁾_{v₁} ⊕⁽²⁾_{v₂} … ⊕⁽ⁿ⁾_{vₙ} ⊗ψ

where the listed variables are the outermost, in the dict's order (first =
outermost), and every other bound variable is aggregated innermost with the
semiring's own ⊕.  Consecutive variables with the same operator form a
*block*; within a block the operators commute, so any order is fine, but a
block must be finished before a block outside it starts (this is the
precedence of the FAQ paper's equivalent variable orders, restricted to whole
blocks).  Which operators a semiring allows: :mod:`semirings.aggregates`.

>>> from faq.rule import parse_rule
>>> import semirings
>>> a = resolve(parse_rule("Q(x) :- A(x, y), B(y, z)"), semirings.REAL, {"y": "max"})
>>> a.blocks
(('max', ('y',)), ('sum', ('z',)))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faq.rule import Rule
from semirings import Semiring
from semirings.aggregates import needs_nonnegative, own_add, with_add

__all__ = ["Aggregates", "resolve"]


@dataclass(frozen=True)
class Aggregates:
    """The operators of a query's bound variables.

    Attributes
    ----------
    given : dict
        The listed variables and their operators (canonical names), outermost first.
    blocks : tuple of (str, tuple of str)
        Every bound variable in blocks of one operator, outermost first.
    own : str
        The name of the semiring's own ⊕ (the innermost, unlisted variables use it).
    nonnegative : tuple of str
        The operators that need non-negative annotations in this semiring (checked
        on every relation when the query runs).
    """

    given: dict[str, str]
    blocks: tuple[tuple[str, tuple[str, ...]], ...]
    own: str
    nonnegative: tuple[str, ...]

    def describe(self) -> str:
        """The nesting as text, outermost first: ``max_{y} sum_{z, w}``."""
        return " ".join(f"{op}_{{{', '.join(vs)}}}" for op, vs in self.blocks)


def resolve(rule: Rule, S: Semiring, aggregates: Mapping[str, str] | None) -> Aggregates | None:
    """Check ``aggregates`` against ``rule`` and ``S``; None when every bound variable
    ends up with the semiring's own ⊕ (a plain query).

    Raises
    ------
    TypeError
        When ``aggregates`` is not a mapping of variable names to operator names.
    ValueError
        For a variable that is free or not in the rule, or an operator ``S`` does not
        allow (the message says why; see :func:`semirings.aggregates.with_add`).
    """
    if aggregates is None:
        return None
    if not isinstance(aggregates, Mapping):
        raise TypeError(
            "aggregates must be a dict of variable name -> operator name, e.g. "
            f"{{'y': 'max'}}, not {type(aggregates).__name__}"
        )
    given: dict[str, str] = {}
    for var, op in aggregates.items():
        if not isinstance(var, str):
            raise TypeError(f"aggregates: variable names are strings, got {var!r}")
        if var in rule.head:
            raise ValueError(
                f"aggregates: variable {var!r} is free (in the head of {rule}); only bound "
                f"variables are aggregated (bound: {', '.join(rule.bound) or 'none'})"
            )
        if var not in rule.variables:
            raise ValueError(
                f"aggregates: variable {var!r} does not occur in {rule} "
                f"(bound variables: {', '.join(rule.bound) or 'none'})"
            )
        try:
            with_add(S, op)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"aggregates[{var!r}]: {exc}") from None
        given[var] = _name(S, op)
    own = own_add(S)
    if all(op == own for op in given.values()):
        return None
    nesting = [*given.items(), *((v, own) for v in rule.bound if v not in given)]
    blocks: list[tuple[str, list[str]]] = []
    for v, op in nesting:
        if blocks and blocks[-1][0] == op:
            blocks[-1][1].append(v)
        else:
            blocks.append((op, [v]))
    nonneg = tuple(sorted({op for op in given.values() if needs_nonnegative(S, op)}))
    return Aggregates(given, tuple((op, tuple(vs)) for op, vs in blocks), own, nonneg)


def _name(S: Semiring, op: Any) -> str:
    """The canonical name of ``op`` in ``S``: the name of the semiring it yields."""
    name = op.strip().lower()
    derived = with_add(S, name)
    if derived is S:
        return own_add(S)
    return name
