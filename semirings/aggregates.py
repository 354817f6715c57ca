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

Every semiring also accepts ``"add"``: its own ⊕, whatever it is called.

>>> import semirings
>>> with_add(semirings.REAL, "max").name
'max-product'
>>> with_add(semirings.MIN_PLUS, "max")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: aggregate 'max' is not allowed in the 'min-plus' semiring: max's identity is -inf, ...
"""

from __future__ import annotations

import operator

from semirings import builtins as B
from semirings.core import Semiring, SparkOps, canonical

__all__ = ["COUNTING_MAX", "OPERATORS", "needs_nonnegative", "own_add", "with_add"]

OPERATORS: tuple[str, ...] = ("sum", "max", "min", "or", "logsumexp", "add")
"""Operator names a query's ``aggregates`` may use (which ones a semiring allows varies)."""

COUNTING_MAX = Semiring(
    name="max-times",
    zero=0,
    one=1,
    add=max,
    mul=operator.mul,
    idempotent=True,
    contains=lambda x: isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63,
    spark=SparkOps(
        "bigint",
        mul=B._c_mul,
        add=B._c_max,
        agg=B._agg_max,
        valid=B._valid_nonneg_int,
    ),
    domain="non-negative 64-bit integers",
)
canonical(COUNTING_MAX.name, COUNTING_MAX)
"""(ℕ, max, ×, 0, 1): the ⊕ of ``max`` aggregates in counting and integer queries."""

_OWN: dict[str, str] = {
    "counting": "sum",
    "integer": "sum",
    "real": "sum",
    "max-product": "max",
    "max-plus": "max",
    "log": "logsumexp",
    "boolean": "or",
    "min-plus": "min",
}

_OTHER: dict[str, dict[str, Semiring]] = {
    "counting": {"max": COUNTING_MAX},
    "integer": {"max": COUNTING_MAX},
    "real": {"max": B.MAX_PRODUCT},
    "max-product": {"sum": B.REAL},
    "max-plus": {"logsumexp": B.LOG},
    "log": {"max": B.MAX_PLUS},
}

_NONNEGATIVE = {("integer", "max"), ("real", "max")}

_TIMES = ("counting", "integer", "real", "max-product")
_PLUS = ("min-plus", "max-plus", "log")


def _builtin(S: Semiring) -> bool:
    return any(S is b for b in B.BUILTINS)


def own_add(S: Semiring) -> str:
    """The name of ``S``'s own ⊕ (``"add"`` for a user-defined semiring).

    >>> import semirings
    >>> own_add(semirings.MIN_PLUS), own_add(semirings.COUNTING)
    ('min', 'sum')
    """
    return _OWN[S.name] if _builtin(S) else "add"


def _canonical(S: Semiring, op: str) -> str:
    if op == "add":
        return own_add(S)
    if _builtin(S) and S.name == "boolean" and op == "max":
        return "or"
    return op


def allowed(S: Semiring) -> list[str]:
    """The operator names ``S`` accepts, its own ⊕ first.

    >>> import semirings
    >>> allowed(semirings.REAL)
    ['sum', 'max']
    """
    own = own_add(S)
    return [own, *(_OTHER.get(S.name, {}) if _builtin(S) else {})]


def needs_nonnegative(S: Semiring, op: str) -> bool:
    """True when aggregating with ``op`` in ``S`` is sound only on non-negative values."""
    return _builtin(S) and (S.name, _canonical(S, op)) in _NONNEGATIVE


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
    other = _OTHER.get(S.name, {}) if _builtin(S) else {}
    if name in other:
        return other[name]
    raise ValueError(
        f"aggregate {op!r} is not allowed in the {S.name!r} semiring: {_why(S, name)}; "
        f"allowed: {_allowed_text(S)}"
    )


def _allowed_text(S: Semiring) -> str:
    names = allowed(S)
    return ", ".join(f"{n!r} (its own ⊕)" if i == 0 else repr(n) for i, n in enumerate(names))


def _why(S: Semiring, op: str) -> str:
    if not _builtin(S):
        return (
            "a user-defined semiring takes only its own ⊕ ('add'): nothing shows that "
            "another operator distributes over its ⊗"
        )
    if S.name in _PLUS and op == "sum":
        return (
            "its ⊗ is +, so a sum aggregate would be a product aggregate (⊗ itself, "
            "over the whole domain of the variable), which is not supported"
        )
    identity = {"max": "-inf", "min": "inf", "sum": "0", "or": "False", "logsumexp": "-inf"}
    if S.name in _TIMES and op == "min":
        return (
            "min's identity is inf, not the semiring's zero 0, so a tuple absent from a "
            "relation (annotation 0) would win every min"
        )
    if S.name == "boolean":
        return f"{op} is not an operation on booleans that distributes over and"
    if op in ("or", "logsumexp") or (S.name in _TIMES and op == "sum"):
        return f"{op} is not an operation on the values of {S.name!r} that distributes over ⊗"
    return (
        f"{op}'s identity is {identity[op]}, not the semiring's zero {S.zero!r}, so a tuple "
        "absent from a relation would not stay neutral"
    )
