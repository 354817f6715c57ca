"""Provenance polynomials ℕ[X]: how each answer was derived, and what it maps to.

The ``"provenance"`` semiring (Green, Karvounarakis, Tannen, "Provenance
semirings", PODS 2007) annotates each input tuple with a symbol and computes,
for each output key, a polynomial with natural coefficients: a monomial per
derivation (the product of the symbols of the tuples it uses), its
coefficient the number of such derivations.  Because ℕ[X] is the free
commutative semiring, :func:`specialise` evaluates a provenance result in any
commutative semiring (the evaluation homomorphism): counting, boolean,
max-product, min-plus, a user semiring.  One provenance solve answers every
"what if" question about the inputs.

A polynomial is held as a canonical string that ``sympy.sympify`` reads:
terms sorted, symbols sorted within a term, ``**`` for powers, so two equal
polynomials are equal strings (``"0"`` is zero, ``"1"`` is one).  The local
kernel adds and multiplies them through a parsed form (a dict from
monomials to coefficients), ⊕-reducing each group in one pass; on Spark they
run through Python UDFs.  Polynomials can grow large: the scalar triangle
count of a graph with T triangles is a polynomial of T·(number of orderings)
derivations.

>>> from semirings.provenance import PROVENANCE
>>> PROVENANCE.mul("a + b", "a")
'a*b + a**2'
>>> PROVENANCE.add("a*b", "a*b")
'2*a*b'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from semirings.core import Semiring, SparkOps, canonical

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = [
    "PROVENANCE",
    "SYMBOL",
    "evaluate",
    "parse",
    "polynomial",
    "specialise",
    "symbols",
    "to_sympy",
]

SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A tag (provenance symbol): a letter or underscore, then letters, digits or underscores."""

Monomial = tuple[tuple[str, int], ...]
Poly = dict[Monomial, int]


@functools.lru_cache(maxsize=65536)
def _parse(text: str) -> tuple[tuple[Monomial, int], ...]:
    if text == "0":
        return ()
    terms: Poly = {}
    for term in text.split(" + "):
        coef = 1
        powers: dict[str, int] = {}
        for part in term.replace("**", "^").split("*"):
            if part.isdigit():
                coef *= int(part)
                continue
            name, _, exp = part.partition("^")
            if not SYMBOL.fullmatch(name) or (exp and not exp.isdigit()):
                raise ValueError(f"not a provenance polynomial: {text!r}")
            powers[name] = powers.get(name, 0) + (int(exp) if exp else 1)
        mono = tuple(sorted(powers.items()))
        terms[mono] = terms.get(mono, 0) + coef
    return tuple(terms.items())


def parse(text: str) -> Poly:
    """The polynomial written as ``text`` (canonical or not), as {monomial: coefficient}."""
    if not isinstance(text, str):
        raise ValueError(f"not a provenance polynomial: {text!r} (a string is expected)")
    return dict(_parse(text.strip()))


def _format(p: Poly) -> str:
    items = [(m, c) for m, c in p.items() if c]
    if not items:
        return "0"
    out = []
    for mono, coef in sorted(items):
        parts = [f"{s}**{e}" if e > 1 else s for s, e in mono]
        if coef != 1 or not parts:
            parts.insert(0, str(coef))
        out.append("*".join(parts))
    return " + ".join(out)


def polynomial(terms: Mapping[Monomial, int] | str) -> str:
    """The canonical string of a polynomial given as {monomial: coefficient} or as text."""
    return _format(parse(terms) if isinstance(terms, str) else dict(terms))


def _sum(values: Iterable[str]) -> str:
    acc: Poly = {}
    for v in values:
        for mono, coef in _parse(v):
            acc[mono] = acc.get(mono, 0) + coef
    return _format(acc)


def _mul_poly(a: tuple[tuple[Monomial, int], ...], b: tuple[tuple[Monomial, int], ...]) -> Poly:
    out: Poly = {}
    for ma, ca in a:
        for mb, cb in b:
            powers = dict(ma)
            for s, e in mb:
                powers[s] = powers.get(s, 0) + e
            mono = tuple(sorted(powers.items()))
            out[mono] = out.get(mono, 0) + ca * cb
    return out


def _add(a: str, b: str) -> str:
    return _sum((a, b))


def _mul(a: str, b: str) -> str:
    return _format(_mul_poly(_parse(a), _parse(b)))


def _contains(x: Any) -> bool:
    if not isinstance(x, str):
        return False
    try:
        return all(c >= 0 for _, c in _parse(x.strip()))
    except ValueError:
        return False


# -- Spark: Python UDFs (polynomials have no native Spark form) ------------------------
@functools.cache
def _udfs() -> tuple[Any, Any, Any, Any]:
    from pyspark.sql import functions as F

    return (
        F.udf(lambda a, b: None if a is None or b is None else _mul(a, b), "string"),
        F.udf(lambda a, b: None if a is None or b is None else _add(a, b), "string"),
        F.udf(lambda xs: _sum(xs), "string"),
        F.udf(lambda x: _contains(x), "boolean"),
    )


def _spark_reduce(df: DataFrame, keys: list[str], value: str) -> DataFrame:
    from pyspark.sql import functions as F

    grouped = df.groupBy(*keys).agg(F.collect_list(value).alias(value))
    return grouped.select(*keys, _udfs()[2](F.col(value)).alias(value))


def _spark_valid(c: Column) -> Column:
    return c.isNotNull() & _udfs()[3](c)


PROVENANCE = Semiring(
    name="provenance",
    zero="0",
    one="1",
    add=_add,
    mul=_mul,
    idempotent=False,
    contains=_contains,
    spark=SparkOps(
        "string",
        mul=lambda a, b: _udfs()[0](a, b),
        add=lambda a, b: _udfs()[1](a, b),
        valid=_spark_valid,
        reduce=_spark_reduce,
    ),
    spark_type="string",
    domain="polynomials with natural coefficients, e.g. '2*a*b + c**2'",
)
canonical(PROVENANCE.name, PROVENANCE)


def local_reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """⊕ of each segment ``values[starts[i]:starts[i+1]]``, one pass per segment."""
    v = np.asarray(values, dtype=object)
    ends = np.append(starts[1:], len(v))
    out = np.empty(len(starts), dtype=object)
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        out[i] = v[s] if e - s == 1 else _sum(v[s:e])
    return out


def to_sympy(result: Any) -> dict[tuple[Any, ...], Any]:
    """``{key: sympy expression}`` of a provenance result Factor (or a ``{key: text}`` dict)."""
    import sympy

    entries = result if isinstance(result, Mapping) else result.to_dict()
    return {k: sympy.sympify(v) for k, v in entries.items()}


def evaluate(text: str, S: Semiring, values: Mapping[str, Any]) -> Any:
    """The value of polynomial ``text`` in semiring ``S`` with ``values`` per symbol.

    A coefficient n is the ⊕ of n copies, a power e the ⊗ of e copies (both by
    doubling).  Symbols missing from ``values`` raise KeyError (the caller lists
    them).
    """
    total = S.zero
    for mono, coef in _parse(text):
        term = S.one
        for sym, exp in mono:
            term = S.mul(term, _power(S.mul, values[sym], exp))
        total = S.add(total, _power(S.add, term, coef))
    return total


def _power(op: Any, x: Any, n: int) -> Any:
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else op(result, base)
        n >>= 1
        if n:
            base = op(base, base)
    return result


def symbols(text: str) -> set[str]:
    """The symbols a polynomial uses."""
    return {s for mono, _ in _parse(text) for s, _ in mono}


def specialise(result: Any, semiring: str | Semiring, values: Mapping[str, Any]) -> Any:
    """Map a provenance result into ``semiring``: each polynomial evaluated with ``values``.

    The evaluation homomorphism ℕ[X] → K sends each symbol to its value in
    ``values``, a coefficient n to the ⊕ of n copies of its term, and a power to
    repeated ⊗.  Since ℕ[X] is the free commutative semiring, specialising
    the provenance of a query equals solving the query in K with the inputs
    annotated by ``values`` (tests check this for counting, boolean,
    max-product, min-plus and a user semiring).

    Parameters
    ----------
    result : Factor or dict
        A result of a ``"provenance"`` solve, or ``{key: polynomial text}``.
    semiring : str or Semiring
        The target commutative semiring.
    values : dict
        ``{symbol: value in the target semiring}`` for every symbol used.

    Returns
    -------
    Factor or dict
        The same keys (those that evaluate to zero dropped), as a local Factor
        in ``semiring`` over the result's variables when ``result`` is a
        Factor, else as a dict.

    Raises
    ------
    ValueError
        A result of another semiring, symbols missing from ``values`` (all are
        listed), or a value outside ``semiring``.
    """
    from semirings.registry import get

    S = get(semiring)
    is_factor = not isinstance(result, Mapping)
    if is_factor:
        got = getattr(result, "semiring", None)
        if got is not PROVENANCE:
            shown = got.name if isinstance(got, Semiring) else got
            raise ValueError(
                f"specialise() takes a result of the 'provenance' semiring, not of {shown!r}"
            )
        entries = result.to_dict()
    else:
        entries = dict(result)
    used = set().union(*(symbols(str(p)) for p in entries.values())) if entries else set()
    missing = sorted(used - set(values))
    if missing:
        raise ValueError(
            f"specialise(): no value for symbol(s) {', '.join(map(repr, missing))}; "
            "give one per symbol the provenance uses"
        )
    for sym in sorted(used):
        S.check_value(values[sym], f"specialise(), symbol {sym!r}")
    out = {}
    for key, poly in entries.items():
        v = evaluate(str(poly), S, values)
        if not S.is_zero(v):
            out[key] = v
    if not is_factor:
        return out
    from faq.factor import Factor

    return Factor.from_dict(out, result.vars, S, name=getattr(result, "name", None))
