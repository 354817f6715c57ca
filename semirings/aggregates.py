"""Other aggregates than a semiring's own ⊕: which operators may replace it, and the result.

A query may aggregate some variables with another operator than its semiring's
⊕ (general FAQ: marginal MAP is ``max_y Σ_z``).  That is sound only when the
operator, with the semiring's ⊗, is itself a commutative semiring that shares
the semiring's zero: then it distributes over ⊗ (so InsideOut may push it
inside products) and a tuple absent from a relation (annotation zero) stays
neutral for it.  :func:`with_add` returns that semiring, whose ⊕ the engine uses
for the steps eliminating such variables; everything else about the query
(input checks, ⊗, zero) stays the base semiring's.

==============  ===========  ==================================================
base semiring   own ⊕        other operators allowed (semiring used)
==============  ===========  ==================================================
counting        sum          max (max-times on ℕ)
integer         sum          max (max-times on ℕ; values must be non-negative)
real            sum          max (max-product; values must be non-negative)
max-product     max          sum (real)
max-plus        max          logsumexp (log)
log             logsumexp    max (max-plus)
boolean         or           (``max`` is an alias of or)
min-plus        min          none
user-defined    add          none
==============  ===========  ==================================================

Every semiring also accepts ``"add"``: its own ⊕, whatever it is called.  The
table is what the built-ins declare (:class:`~semirings.core.AggregateOps`, in
:mod:`semirings.builtins`); a semiring that declares nothing is "user-defined".

>>> import semirings
>>> with_add(semirings.REAL, "max").name
'max-product'
>>> with_add(semirings.MIN_PLUS, "max")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: aggregate 'max' is not allowed in the 'min-plus' semiring: max's identity is -inf, ...
"""

from __future__ import annotations

from collections.abc import Mapping

from semirings.builtins import COUNTING_MAX
from semirings.core import Semiring, canonical

__all__ = ["COUNTING_MAX", "OPERATORS", "needs_nonnegative", "own_add", "with_add"]

OPERATORS: tuple[str, ...] = ("sum", "max", "min", "or", "logsumexp", "add")
"""Operator names a query's ``aggregates`` may use (which ones a semiring allows varies)."""

_IDENTITY = {"max": "-inf", "min": "inf", "sum": "0", "or": "False", "logsumexp": "-inf"}


def _others(S: Semiring) -> Mapping[str, str]:
    """``{operator: name of the semiring it forms}`` as ``S`` declares it (none when it doesn't)."""
    return S.aggregates.others if S.aggregates is not None else {}


def own_add(S: Semiring) -> str:
    """The name of ``S``'s own ⊕ (``"add"`` for a user-defined semiring).

    >>> import semirings
    >>> own_add(semirings.MIN_PLUS), own_add(semirings.COUNTING)
    ('min', 'sum')
    """
    return S.aggregates.own if S.aggregates is not None else "add"


def _canonical(S: Semiring, op: str) -> str:
    if op == "add":
        return own_add(S)
    if S.aggregates is not None and op in S.aggregates.aliases:
        return S.aggregates.own
    return op


def allowed(S: Semiring) -> list[str]:
    """The operator names ``S`` accepts, its own ⊕ first.

    >>> import semirings
    >>> allowed(semirings.REAL)
    ['sum', 'max']
    """
    own = own_add(S)
    return [own, *_others(S)]


def needs_nonnegative(S: Semiring, op: str) -> bool:
    """True when aggregating with ``op`` in ``S`` is sound only on non-negative values."""
    return S.aggregates is not None and _canonical(S, op) in S.aggregates.nonnegative


def with_add(S: Semiring, op: str) -> Semiring:
    """The semiring whose ⊕ is the operator ``op`` and whose ⊗ and zero are ``S``'s.

    Raises
    ------
    ValueError
        For an unknown operator, or one that does not form a semiring with ``S``'s ⊗
        sharing its zero (the message says why and lists what ``S`` allows).
    """
    if not isinstance(op, str):
        raise TypeError(f"an aggregate operator is a name such as 'max', not {type(op).__name__}")
    name = op.strip().lower()
    if name not in OPERATORS:
        raise ValueError(
            f"unknown aggregate {op!r}; operators: {', '.join(map(repr, OPERATORS))} "
            f"(the {S.name!r} semiring allows {_allowed_text(S)})"
        )
    name = _canonical(S, name)
    if name == own_add(S):
        return S
    other = _others(S)
    if name in other:
        try:
            return canonical(other[name])
        except KeyError:
            raise ValueError(
                f"semiring {S.name!r} declares aggregate {name!r} as the semiring "
                f"{other[name]!r}, which is not one of the engine's semirings"
            ) from None
    raise ValueError(
        f"aggregate {op!r} is not allowed in the {S.name!r} semiring: {_why(S, name)}; "
        f"allowed: {_allowed_text(S)}"
    )


def _allowed_text(S: Semiring) -> str:
    names = allowed(S)
    return ", ".join(f"{n!r} (its own ⊕)" if i == 0 else repr(n) for i, n in enumerate(names))


def _why(S: Semiring, op: str) -> str:
    decl = S.aggregates
    if decl is None:
        return (
            "a user-defined semiring takes only its own ⊕ ('add'): nothing shows that "
            "another operator distributes over its ⊗"
        )
    if decl.times == "+" and op == "sum":
        return (
            "its ⊗ is +, so a sum aggregate would be a product aggregate (⊗ itself, "
            "over the whole domain of the variable), which is not supported"
        )
    if decl.times == "×" and op == "min":
        return (
            "min's identity is inf, not the semiring's zero 0, so a tuple absent from a "
            "relation (annotation 0) would win every min"
        )
    if decl.times == "and":
        return f"{op} is not an operation on booleans that distributes over and"
    if op in ("or", "logsumexp") or (decl.times == "×" and op == "sum"):
        return f"{op} is not an operation on the values of {S.name!r} that distributes over ⊗"
    return (
        f"{op}'s identity is {_IDENTITY[op]}, not the semiring's zero {S.zero!r}, so a tuple "
        "absent from a relation would not stay neutral"
    )
