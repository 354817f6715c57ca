"""Semiring laws as library code: each check raises with its counterexample.

>>> import semirings
>>> semirings.check_laws(semirings.get("max-product"), [0.0, 0.5, 1.0, 2.0])
>>> broken = semirings.Semiring(name="minus", zero=0, one=1,
...                             add=lambda a, b: a - b, mul=lambda a, b: a * b)
>>> semirings.check_laws(broken, [0, 1, 2])
Traceback (most recent call last):
...
semirings.laws.LawError: semiring 'minus': ⊕ is not commutative: a=0, b=1: a ⊕ b = -1 but b ⊕ a = 1
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from semirings.core import Semiring

__all__ = ["LawError", "approx_equal", "check_laws"]


class LawError(AssertionError):
    """A semiring law fails; the message names the law and the counterexample."""


def approx_equal(a: Any, b: Any, rel: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Equality that tolerates float rounding (and treats equal infinities as equal)."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return False
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
    return a == b


def check_laws(
    semiring: Semiring,
    values: Sequence[Any],
    eq: Callable[[Any, Any], bool] = approx_equal,
) -> None:
    """Check the commutative-semiring laws on every tuple drawn from ``values``.

    Checks that ⊕ and ⊗ are associative and commutative, that ``zero`` and
    ``one`` are their identities, that ``zero`` annihilates, that ⊗
    distributes over ⊕, and, for rings, that ``a ⊕ neg(a) = zero``.  The
    identities are added to ``values``.  Raises :class:`LawError` naming the
    first law that fails and the values that break it; returns None otherwise.
    """
    S = semiring
    vals = (
        list(dict.fromkeys([*values, S.zero, S.one], None))
        if _hashable(values)
        else [
            *values,
            S.zero,
            S.one,
        ]
    )
    for a in vals:
        if not S.contains(a):  # type: ignore[misc]
            raise LawError(f"semiring {S.name!r}: test value {a!r} is not in the domain")

    def fail(law: str, detail: str) -> None:
        raise LawError(f"semiring {S.name!r}: {law}: {detail}")

    add, mul = S.add, S.mul
    for a in vals:
        if not eq(add(a, S.zero), a):
            fail("zero is not the identity of ⊕", f"a={a!r}: a ⊕ 0 = {add(a, S.zero)!r}")
        if not eq(mul(a, S.one), a):
            fail("one is not the identity of ⊗", f"a={a!r}: a ⊗ 1 = {mul(a, S.one)!r}")
        if not eq(mul(a, S.zero), S.zero):
            fail("zero does not annihilate", f"a={a!r}: a ⊗ 0 = {mul(a, S.zero)!r}")
        if S.idempotent and not eq(add(a, a), a):
            fail("⊕ is not idempotent", f"a={a!r}: a ⊕ a = {add(a, a)!r}")
        if S.neg is not None and not eq(add(a, S.neg(a)), S.zero):
            fail("neg is not the ⊕-inverse", f"a={a!r}: a ⊕ neg(a) = {add(a, S.neg(a))!r}")
    for a, b in itertools.product(vals, repeat=2):
        for op, sym in ((add, "⊕"), (mul, "⊗")):
            if not eq(op(a, b), op(b, a)):
                fail(
                    f"{sym} is not commutative",
                    f"a={a!r}, b={b!r}: a {sym} b = {op(a, b)!r} but b {sym} a = {op(b, a)!r}",
                )
    for a, b, c in itertools.product(vals, repeat=3):
        for op, sym in ((add, "⊕"), (mul, "⊗")):
            left, right = op(op(a, b), c), op(a, op(b, c))
            if not eq(left, right):
                fail(
                    f"{sym} is not associative",
                    f"a={a!r}, b={b!r}, c={c!r}: (a{sym}b){sym}c = {left!r}, "
                    f"a{sym}(b{sym}c) = {right!r}",
                )
        left, right = mul(a, add(b, c)), add(mul(a, b), mul(a, c))
        if not eq(left, right):
            fail(
                "⊗ does not distribute over ⊕",
                f"a={a!r}, b={b!r}, c={c!r}: a⊗(b⊕c) = {left!r}, (a⊗b)⊕(a⊗c) = {right!r}",
            )


def _hashable(values: Sequence[Any]) -> bool:
    try:
        for v in values:
            hash(v)
    except TypeError:
        return False
    return True
