"""The front door: :func:`query` reads rule text, :func:`einsum` a numpy-style spec.

``query`` returns a :class:`faq.Query` for one rule and a
:class:`faq.Program` for several (or recursive) rules; ``einsum`` solves at
once.  They live above both classes, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faq.build import ROWS, relation_kind, type_name
from faq.factor import Factor
from faq.query import Query
from faq.recursion import Program, is_program
from faq.rule import Atom, parse_einsum
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

    ``einsum("ij,jk->ik", A, B)`` is the product of A and B.  Operands follow
    ``numpy.einsum``: a plain numpy array is a dense tensor (its indices are the
    keys, its entries the annotations, zeros dropped, as
    ``Factor.from_numpy(arr, vars=...)`` reads it), and a Python or numpy scalar or a
    0-d array an operand with no subscripts (``einsum("a,->a", x, 2.0)`` is
    ``2.0 ⊗ x``).  Einsum names no relations, so it takes numpy's convention; every
    other operand means what it means everywhere (:func:`faq.build.relation_kind`):
    a Factor as it is, and a Spark or pandas DataFrame, a pyarrow Table or a numpy
    structured array rows of keys (bound to the subscripts by position) and an
    optional ``value`` column.  ``aggregates`` gives summed-out letters their own
    operators, as in :func:`query` (``einsum("ij,jk->i", A, B, aggregates={"j": "max"})``).

    Raises
    ------
    TypeError
        An operand that is none of these (a list, a dict...): the message names it
        by position and lists what is accepted.
    """
    factors = tuple(_operand(o, i) for i, o in enumerate(operands))
    names = [f"T{i}" for i in range(len(factors))]
    rule = parse_einsum(spec, names)
    _check_sizes(spec, rule.atoms, operands)
    q = Query(rule, semiring, aggregates)
    return q.solve(
        order=order, join=join, backend=backend, **dict(zip(names, factors, strict=True))
    )


def _check_sizes(spec: str, atoms: Sequence[Atom], operands: Sequence[Any]) -> None:
    """ValueError when the dense-array operands give one subscript two sizes.

    numpy refuses such operands, or broadcasts an axis of size 1; the engine joins on
    the keys both arrays hold, which would be another answer.  Factors are relations, so
    their keys need not cover the same range and are not compared."""
    seen: dict[str, tuple[int, int]] = {}
    for i, (atom, o) in enumerate(zip(atoms, operands, strict=True)):
        if not isinstance(o, np.ndarray) or o.dtype.names is not None or o.ndim != len(atom.vars):
            continue  # not a dense array, or one whose dimensions the query refuses
        for letter, n in zip(atom.vars, o.shape, strict=True):
            j, m = seen.setdefault(letter, (i, n))
            if m != n:
                where = "the same operand" if i == j else f"operand {j}"
                raise ValueError(
                    f"einsum spec {spec!r}: subscript {letter!r} has size {n} in operand {i} "
                    f"but {m} in {where}; dense arrays must agree on each subscript's size "
                    "(the engine does not broadcast axes of size 1 as numpy.einsum does; "
                    "to join on the keys both hold, pass Factor.from_numpy(...) operands)"
                )


def _operand(o: Any, i: int) -> Any:
    """Operand ``i`` of :func:`einsum`: a plain numpy array (or a scalar, as a 0-d array) as
    the dense tensor numpy reads it; anything else as it is, once checked to be an input
    the one rule accepts (rows, a Factor)."""
    if isinstance(o, bool | int | float | np.bool_ | np.integer | np.floating):
        o = np.asarray(o)
    if isinstance(o, np.ndarray) and o.dtype.names is None:
        return Factor.from_numpy(o, vars=[f"k{d}" for d in range(o.ndim)], name=f"T{i}")
    if not isinstance(o, Factor):
        try:
            relation_kind(o, f"einsum operand {i}")
        except TypeError:
            listed = isinstance(o, list | tuple)
            hint = "; for a dense tensor pass np.asarray(...)" if listed else ""
            raise TypeError(
                f"einsum operand {i}: expected a numpy array or a number (a dense tensor, as "
                f"numpy.einsum reads it), or rows: {ROWS}; got {type_name(o)}{hint}"
            ) from None
    return o
