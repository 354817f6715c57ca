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

A polynomial is held as a canonical string: terms sorted, symbols sorted
within a term, ``**`` for powers of 2 or more (a power 1 is the bare symbol,
a power 0 is one), so two equal polynomials are equal strings (``"0"`` is
zero, ``"1"`` is one).  Only canonical strings are values of the semiring;
:func:`polynomial` gives the canonical string of any polynomial text.
Coefficients and exponents are at most ``2**63 - 1`` (:data:`LIMIT`).  The
local kernel adds and multiplies them through a parsed form (a dict from
monomials to coefficients), ⊕-reducing each group in one pass; on Spark they
run through Python UDFs.  Polynomials can grow large: the scalar triangle
count of a graph with T triangles is a polynomial of T·(number of orderings)
derivations.

>>> from semirings.provenance import PROVENANCE
>>> PROVENANCE.mul("a + b", "a")
'a*b + a**2'
>>> PROVENANCE.add("a*b", "a*b")
'2*a*b'
>>> PROVENANCE.add("a**0", "1")
'2'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from semirings.core import NumpyOps, Semiring, SparkOps, canonical, guarded
from semirings.registry import get

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = [
    "LIMIT",
    "PROVENANCE",
    "SPARK_SYMBOL",
    "SYMBOL",
    "evaluate",
    "is_symbol",
    "parse",
    "polynomial",
    "spark_is_symbol",
    "specialise",
    "symbols",
    "to_sympy",
]

SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A tag (provenance symbol), matched whole: an ASCII letter or underscore, then ASCII
letters, digits or underscores."""

SPARK_SYMBOL = r"\A(?:" + SYMBOL.pattern + r")\z"
""":data:`SYMBOL` anchored for Spark's ``rlike`` (Java regex), so it matches whole strings
only: ``\\A`` and ``\\z`` are the start and the very end; ``$`` would also match before
a final line break and accept ``'e1\\n'``."""

LIMIT = 2**63 - 1
"""The largest coefficient or exponent of a provenance polynomial (the range of counting)."""

_FACTOR = re.compile(r"([0-9]+)|(" + SYMBOL.pattern + r")(?:\*\*([0-9]+))?")

Monomial = tuple[tuple[str, int], ...]
Poly = dict[Monomial, int]


def is_symbol(x: Any) -> bool:
    """True when ``x`` is a string that is a provenance symbol (a legal tag) as a whole.

    >>> is_symbol("e01"), is_symbol("pi"), is_symbol("e1\\n"), is_symbol("0a")
    (True, True, False, False)
    """
    return isinstance(x, str) and SYMBOL.fullmatch(x) is not None


def spark_is_symbol(c: Column) -> Column:
    """The Spark form of :func:`is_symbol`: true where ``c`` is a non-null legal tag."""
    return c.isNotNull() & c.rlike(SPARK_SYMBOL)


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."


def _malformed(text: str, why: str) -> ValueError:
    return ValueError(f"not a provenance polynomial: {_short(text)} ({why})")


def _number(text: str, digits: str, what: str) -> int:
    significant = digits.lstrip("0") or "0"  # no int() of thousands of digits
    if len(significant) > 19 or int(significant) > LIMIT:
        raise _malformed(text, f"{what} {_short(digits)} is above 2**63 - 1")
    return int(significant)


def _term(text: str, term: str) -> tuple[Monomial, int]:
    """The monomial and coefficient of one term ``term`` of ``text`` (factors joined by ``*``)."""
    coef, powers, pos = 1, {}, 0
    while True:
        m = _FACTOR.match(term, pos)
        if m is None:
            raise _malformed(text, f"cannot read {_short(term[pos:])}")
        num, name, exp = m.groups()
        if num is not None:
            coef *= _number(text, num, "coefficient")
            if coef > LIMIT:  # stop before a long product of long numbers
                raise _malformed(text, f"the coefficient of {_short(term)} is above 2**63 - 1")
        else:
            powers[name] = powers.get(name, 0) + (
                1 if exp is None else _number(text, exp, "exponent")
            )
        pos = m.end()
        if pos == len(term):
            break
        if term[pos] != "*":
            raise _malformed(text, f"cannot read {_short(term[pos:])}")
        pos += 1
    if coef > LIMIT or any(e > LIMIT for e in powers.values()):
        raise _malformed(text, f"a coefficient or exponent of {_short(term)} is above 2**63 - 1")
    return tuple(sorted((s, e) for s, e in powers.items() if e)), coef


@functools.lru_cache(maxsize=65536)
def _parse(text: str) -> tuple[tuple[Monomial, int], ...]:
    terms: Poly = {}
    for raw in text.split("+"):
        term = raw.strip()
        if not term:
            raise _malformed(text, "an empty term")
        mono, coef = _term(text, term)
        terms[mono] = terms.get(mono, 0) + coef
    if any(c > LIMIT for c in terms.values()):
        raise _malformed(text, "a coefficient is above 2**63 - 1")
    return tuple((m, c) for m, c in terms.items() if c)


def parse(text: str) -> Poly:
    """The polynomial written as ``text`` (canonical or not), as {monomial: coefficient}.

    A monomial is a sorted tuple of ``(symbol, exponent)`` pairs, exponents at
    least 1 (``a**0`` is one, the empty monomial); zero terms are left out.
    Terms are joined by ``+``, factors by ``*``: natural coefficients, symbols
    and ``symbol**exponent``.

    >>> parse("3*b*a**2 + a**0 + 0*c")
    {(('a', 2), ('b', 1)): 3, (): 1}

    Raises
    ------
    ValueError
        ``text`` is not a string or not a polynomial (the message shows it), or a
        coefficient or exponent is above :data:`LIMIT`.
    """
    if not isinstance(text, str):
        raise ValueError(f"not a provenance polynomial: {_short(text)} (a string is expected)")
    return dict(_parse(text))


def _format(p: Mapping[Monomial, int]) -> str:
    """The canonical string of a polynomial whose monomials are already canonical."""
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


def _count(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool) and 0 <= x <= LIMIT


def _from_mapping(terms: Mapping[Any, Any]) -> Poly:
    """``{monomial: coefficient}`` checked and canonicalised (powers merged, zeros dropped)."""
    out: Poly = {}
    for mono, coef in terms.items():
        where = f"polynomial(): term {_short(mono)}"
        if not _count(coef):
            raise ValueError(f"{where}: coefficient {_short(coef)} is not an int from 0 to 2**63-1")
        if not isinstance(mono, tuple):
            raise ValueError(f"{where}: a monomial is a tuple of (symbol, exponent) pairs")
        powers: dict[str, int] = {}
        for pair in mono:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"{where}: {_short(pair)} is not a (symbol, exponent) pair")
            sym, exp = pair
            if not is_symbol(sym):
                raise ValueError(f"{where}: {_short(sym)} is not a provenance symbol")
            if not _count(exp):
                raise ValueError(f"{where}: exponent {_short(exp)} is not an int from 0 to 2**63-1")
            powers[sym] = powers.get(sym, 0) + int(exp)
        key = tuple(sorted((s, e) for s, e in powers.items() if e))
        out[key] = out.get(key, 0) + int(coef)
    if any(c > LIMIT for c in out.values()) or any(e > LIMIT for m in out for _, e in m):
        raise ValueError("polynomial(): a coefficient or exponent is above 2**63 - 1")
    return out


def polynomial(terms: Mapping[Monomial, int] | str) -> str:
    """The canonical string of a polynomial given as {monomial: coefficient} or as text.

    >>> polynomial("b*a + a**0 + a**1"), polynomial({(("x", 2), ("x", 0)): 3})
    ('1 + a + a*b', '3*x**2')

    Raises
    ------
    ValueError
        Malformed text, a symbol that is not a legal tag, a coefficient or
        exponent that is not an int from 0 to :data:`LIMIT`.
    """
    if isinstance(terms, str):
        return _format(parse(terms))
    if not isinstance(terms, Mapping):
        raise ValueError(f"polynomial(): {_short(terms)} is neither text nor a dict of terms")
    return _format(_from_mapping(terms))


def _overflow(p: Poly) -> str:
    """The canonical string of an arithmetic result, refusing coefficients above LIMIT."""
    if any(c > LIMIT for c in p.values()):
        raise OverflowError(
            "'provenance': a coefficient overflowed 2**63 - 1 "
            "(more derivations than counting can hold)"
        )
    return _format(p)


def _sum(values: Iterable[str]) -> str:
    acc: Poly = {}
    for v in values:
        for mono, coef in _parse(v):
            acc[mono] = acc.get(mono, 0) + coef
    return _overflow(acc)


def _mul_poly(a: tuple[tuple[Monomial, int], ...], b: tuple[tuple[Monomial, int], ...]) -> Poly:
    out: Poly = {}
    for ma, ca in a:
        for mb, cb in b:
            powers = dict(ma)
            for s, e in mb:
                powers[s] = powers.get(s, 0) + e
                if powers[s] > LIMIT:
                    raise OverflowError(f"'provenance': the exponent of {s!r} overflowed 2**63 - 1")
            mono = tuple(sorted(powers.items()))
            out[mono] = out.get(mono, 0) + ca * cb
    return out


def _add(a: str, b: str) -> str:
    return _sum((a, b))


def _mul(a: str, b: str) -> str:
    return _overflow(_mul_poly(_parse(a), _parse(b)))


@functools.lru_cache(maxsize=65536)
def _canonical(x: str) -> bool:
    try:
        return _format(dict(_parse(x))) == x
    except ValueError:
        return False


def _contains(x: Any) -> bool:
    return isinstance(x, str) and _canonical(x)


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


def _local_valid(values: np.ndarray) -> np.ndarray:
    return np.fromiter((_contains(x) for x in values), dtype=bool, count=len(values))


def _local_ones(counts: np.ndarray) -> np.ndarray:
    """n-fold ⊕ of one: the constant polynomial n."""
    return np.array([str(int(x)) for x in np.asarray(counts).tolist()], dtype=object)


def _local_nonzero(values: np.ndarray) -> np.ndarray:
    return np.array([x != "0" for x in values], dtype=bool)


def local_reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """⊕ of each segment ``values[starts[i]:starts[i+1]]``, one pass per segment."""
    v = np.asarray(values, dtype=object)
    ends = np.append(starts[1:], len(v))
    out = np.empty(len(starts), dtype=object)
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        out[i] = v[s] if e - s == 1 else _sum(v[s:e])
    return out


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
    numpy=NumpyOps(
        object,
        np.frompyfunc(_mul, 2, 1),
        local_reduceat,
        _local_ones,
        _local_nonzero,
        _local_valid,
    ),
    domain=(
        "canonical polynomial strings with natural coefficients, e.g. '2*a*b + c**2'; "
        "semirings.provenance.polynomial(text) gives the canonical string"
    ),
)
canonical(PROVENANCE.name, PROVENANCE)


def _entries(result: Any, caller: str) -> dict[Any, Any]:
    """``{key: polynomial text}`` of a provenance Factor or of a dict."""
    if isinstance(result, Mapping):
        return dict(result)
    got = getattr(result, "semiring", None)
    if got is not PROVENANCE:
        shown = got.name if isinstance(got, Semiring) else got
        raise ValueError(f"{caller} takes a result of the 'provenance' semiring, not of {shown!r}")
    return result.to_dict()


def _parsed(entries: Mapping[Any, Any], caller: str) -> dict[Any, tuple[tuple[Monomial, int], ...]]:
    out = {}
    for key, text in entries.items():
        try:
            out[key] = tuple(parse(text).items())
        except ValueError as exc:
            raise ValueError(f"{caller}, key {_short(key)}: {exc}") from None
    return out


def to_sympy(result: Any) -> dict[tuple[Any, ...], Any]:
    """``{key: sympy expression}`` of a provenance result Factor (or a ``{key: text}`` dict).

    Each symbol becomes ``sympy.Symbol(name)``, built explicitly (names are never
    read as sympy code), so tags such as ``I``, ``E``, ``pi``, ``N``, ``S`` or
    ``lambda`` stay plain symbols.

    >>> to_sympy({(): "I**2 + pi"})[()]
    I**2 + pi

    Raises
    ------
    ValueError
        A Factor of another semiring, or a value that is not a polynomial
        (the message names its key).
    """
    import sympy

    made: dict[str, Any] = {}

    def sym(name: str) -> Any:
        if name not in made:
            made[name] = sympy.Symbol(name)
        return made[name]

    def expr(terms: tuple[tuple[Monomial, int], ...]) -> Any:
        return sympy.Add(
            *(
                sympy.Integer(c) * sympy.Mul(*(sym(s) ** sympy.Integer(e) for s, e in mono))
                for mono, c in terms
            )
        )

    parsed = _parsed(_entries(result, "to_sympy()"), "to_sympy()")
    return {k: expr(terms) for k, terms in parsed.items()}


def _member(S: Semiring, x: Any) -> bool:
    try:
        return bool(S.contains(x))  # type: ignore[misc]
    except Exception:  # a membership test that fails is a "no"
        return False


def _power(op: Callable[[Any, Any], Any], x: Any, n: int) -> Any:
    """``x op x op ... op x`` (``n >= 1`` copies) by squaring: at most 2·log2(n) ops."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else op(result, base)
        n >>= 1
        if n:
            base = op(base, base)
    return result


def _evaluate(
    terms: tuple[tuple[Monomial, int], ...], S: Semiring, values: Mapping[str, Any], where: str
) -> Any:
    """The value in ``S`` of a parsed polynomial, every ⊗ and n-fold ⊕ checked to stay in ``S``."""
    add, mul = guarded(S, "add"), guarded(S, "mul")
    total = S.zero
    for mono, coef in terms:

        def within(x: Any, mono: Monomial = mono, coef: int = coef) -> Any:
            if not _member(S, x):
                raise ValueError(
                    f"{where}: term {_format({mono: coef})!r} evaluates outside the "
                    f"{S.name!r} semiring ({S.domain}): it reaches {_short(x)}"
                )
            return x

        if any(S.is_zero(values[s]) for s, _ in mono):
            continue  # zero annihilates: no need to raise the other factors to their powers
        term = S.one
        for s, e in mono:
            term = within(mul(term, _power(lambda a, b: within(mul(a, b)), values[s], e)))
        total = add(total, _power(lambda a, b: within(add(a, b)), term, coef))
    if not _member(S, total):
        raise ValueError(
            f"{where}: the sum of the terms evaluates outside the {S.name!r} semiring "
            f"({S.domain}): {_short(total)}"
        )
    return total


def _check_values(used: Iterable[str], S: Semiring, values: Any, caller: str) -> None:
    if not isinstance(values, Mapping):
        raise TypeError(
            f"{caller}: values must be a dict {{symbol: value}}, not {type(values).__name__}"
        )
    missing = sorted(set(used) - set(values))
    if missing:
        raise ValueError(
            f"{caller}: no value for symbol(s) {', '.join(map(repr, missing))}; "
            "give one per symbol the provenance uses"
        )
    for sym in sorted(set(used)):
        S.check_value(values[sym], f"{caller}, symbol {sym!r}")


def evaluate(text: str, S: str | Semiring, values: Mapping[str, Any]) -> Any:
    """The value of polynomial ``text`` in semiring ``S`` with ``values`` per symbol.

    A coefficient n is the ⊕ of n copies, a power e the ⊗ of e copies, both by
    squaring (at most 2·63 operations each, since n, e ≤ :data:`LIMIT`).  Every
    intermediate value must stay in ``S`` (``S.contains``): counting and
    integer stay within 64 bits or the evaluation stops with a ValueError.

    Raises
    ------
    ValueError
        ``text`` is not a polynomial, a symbol it uses has no value or a value
        outside ``S`` (all are named), or a term leaves ``S`` (named).
    """
    K = get(S)
    terms = tuple(parse(text).items())
    _check_values({s for m, _ in terms for s, _ in m}, K, values, "evaluate()")
    return _evaluate(terms, K, values, f"evaluate({_short(text)})")


def symbols(text: str) -> set[str]:
    """The symbols a polynomial uses."""
    return {s for mono in parse(text) for s, _ in mono}


def specialise(result: Any, semiring: str | Semiring, values: Mapping[str, Any]) -> Any:
    """Map a provenance result into ``semiring``: each polynomial evaluated with ``values``.

    The evaluation homomorphism ℕ[X] → K sends each symbol to its value in
    ``values``, a coefficient n to the ⊕ of n copies of its term, and a power to
    repeated ⊗, both by squaring (O(log n) operations of K).  Since ℕ[X] is
    the free commutative semiring, specialising the provenance of a query
    equals solving the query in K with the inputs annotated by ``values``
    (tests check this for counting, boolean, max-product, min-plus and a user
    semiring).  Each intermediate value is checked to be in K, so counting and
    integer results stay within 64 bits or are refused, as the Factor form
    refuses them; a user semiring bounds its values through its ``contains``.

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
        A result of another semiring, a value that is not a polynomial (its
        key named), symbols missing from ``values`` (all are listed), a value
        outside ``semiring``, or a term whose value leaves ``semiring`` (key and
        term named; e.g. ``a**64`` with ``a = 2`` in counting).
    TypeError
        ``values`` is not a dict.
    """
    S = get(semiring)
    is_factor = not isinstance(result, Mapping)
    parsed = _parsed(_entries(result, "specialise()"), "specialise()")
    used = {s for terms in parsed.values() for m, _ in terms for s, _ in m}
    _check_values(used, S, values, "specialise()")
    out = {}
    for key, terms in parsed.items():
        v = _evaluate(terms, S, values, f"specialise(), key {_short(key)}")
        if not S.is_zero(v):
            out[key] = v
    if not is_factor:
        return out
    # The result's own class builds the answer (a Factor from a Factor): this
    # package never imports faq.
    return type(result).from_dict(out, result.vars, S, name=getattr(result, "name", None))
