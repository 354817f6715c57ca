"""The front door: :func:`query` reads rule text, :func:`einsum` a numpy-style spec.

``query`` returns a :class:`faq.Query` for one rule and a
:class:`faq.Program` for several (or recursive) rules; ``einsum`` solves at
once.  They live above both classes, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faq.factor import Factor
from faq.query import Query
from faq.recursion import Program, is_program
from faq.rule import parse_einsum
from semirings import Semiring

__all__ = ["einsum", "query"]


def query(
    rule: str, semiring: str | Semiring = "real", aggregates: Mapping[str, str] | None = None
) -> Query | Program:
    """A query from a rule such as ``"Q(i, l) :- A(i, j), B(j, k), C(k, l)"``.

    Parameters
    ----------
    rule : str
        The head's variables are free; every other variable is aggregated.
        Several rules (one per line, or separated by ``;``), or a rule whose
        head is in its body, make a :class:`faq.recursion.Program`: its
        ``solve`` gives the least fixpoint of the first rule's head.
    semiring : str or Semiring
        The semiring: its ⊗ multiplies the atoms, its ⊕ aggregates bound variables.
    aggregates : dict, optional
        Per-variable operators (general FAQ), e.g. ``{"y": "max"}``: the listed
        variables are aggregated outermost, in the dict's order (first =
        outermost), each with its operator; the other bound variables innermost
        with the semiring's ⊕.  See docs/aggregates.md for the operators each
        semiring allows.

    >>> q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    >>> q.head, q.rule.bound
    ((), ('a', 'b', 'c'))
    >>> query("Q(x) :- A(x, y), B(y, z)", aggregates={"y": "max"}).aggregates.describe()
    'max_{y} sum_{z}'
    """
    if isinstance(rule, str) and is_program(rule):
        if aggregates:
            raise ValueError(
                f"query {rule!r}: per-variable aggregates are not supported in a program "
                "of several (or recursive) rules"
            )
        return Program(rule, semiring)
    return Query(rule, semiring, aggregates)


def einsum(
    spec: str,
    *operands: Factor | Any,
    semiring: str | Semiring = "real",
    order: str | Sequence[str] = "auto",
    join: str = "auto",
    backend: str = "auto",
    aggregates: Mapping[str, str] | None = None,
) -> Factor:
    """Evaluate a numpy-style einsum spec over factors, with any semiring.

    ``einsum("ij,jk->ik", A, B)`` is the product of A and B; operands are
    Factors, DataFrames or numpy arrays (dense arrays become sparse factors).
    A Python or numpy scalar, or a 0-d array, is an operand with no subscripts,
    as in numpy (``einsum("a,->a", x, 2.0)`` is ``2.0 ⊗ x``).  ``aggregates``
    gives summed-out letters their own operators, as in :func:`query`
    (``einsum("ij,jk->i", A, B, aggregates={"j": "max"})``).
    """
    operands = tuple(_scalar_operand(o) for o in operands)
    names = [f"T{i}" for i in range(len(operands))]
    rule = parse_einsum(spec, names)
    q = Query(rule, semiring, aggregates)
    return q.solve(
        order=order, join=join, backend=backend, **dict(zip(names, operands, strict=True))
    )


def _scalar_operand(o: Any) -> Any:
    """A Python or numpy scalar (bool, int, float) as a 0-d array; anything else as it is."""
    if isinstance(o, bool | int | float | np.bool_ | np.integer | np.floating):
        return np.asarray(o)
    return o
