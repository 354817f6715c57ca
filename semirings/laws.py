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
    distributes over ⊕, and, for rings, that ``a ⊕ neg(a) = zero``; then what
    the semiring declares: ``a ⊕ a = a`` (``idempotent``), ⊕ returns the larger or
    the smaller argument (``selective``), ⊗ by a non-zero value keeps a strictly
    better value strictly better (``tight``), every value is zero or one and
    ``1 ⊕ 1 = 1`` (``presence``), and the completion's ⊕ and ⊗ agree with the
    semiring's (``completion``).  The identities are added to ``values``.
    Raises :class:`LawError` naming the first law that fails and the values that
    break it; returns None otherwise.
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
    _check_declared(S, vals, eq, fail)
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


def _check_declared(
    S: Semiring,
    vals: list[Any],
    eq: Callable[[Any, Any], bool],
    fail: Callable[[str, str], None],
) -> None:
    """The laws of what ``S`` declares (``selective``, ``tight``, ``presence``,
    ``completion``) on every pair (and triple, for ``tight``) of ``vals``."""
    add, mul = S.add, S.mul
    if S.presence:
        for a in vals:
            if not (eq(a, S.zero) or eq(a, S.one)):
                fail("presence: a value is neither zero nor one", f"a={a!r}")
        if not eq(add(S.one, S.one), S.one):
            fail("presence: 1 ⊕ 1 is not 1", f"1 ⊕ 1 = {add(S.one, S.one)!r}")
    C = S.completion
    for a, b in itertools.product(vals, repeat=2):
        if S.selective is not None:
            pick = max if S.selective == "max" else min
            if not eq(add(a, b), pick(a, b)):
                fail(
                    f"⊕ is not selective ({S.selective})",
                    f"a={a!r}, b={b!r}: a ⊕ b = {add(a, b)!r}, {pick.__name__} is {pick(a, b)!r}",
                )
        if C is not None:
            for op, cop, sym in ((add, C.add, "⊕"), (mul, C.mul, "⊗")):
                if not eq(op(a, b), cop(a, b)):
                    fail(
                        f"completion {C.name!r}: its {sym} differs",
                        f"a={a!r}, b={b!r}: {op(a, b)!r} here, {cop(a, b)!r} in {C.name!r}",
                    )
    if not S.tight:
        return
    for a, b, c in itertools.product(vals, repeat=3):
        better = eq(add(a, b), a) and not eq(a, b)
        if better and not S.is_zero(c):
            ac, bc = mul(a, c), mul(b, c)
            if eq(ac, bc) or not eq(add(ac, bc), ac):
                fail(
                    "tight: ⊗ is not strictly monotone",
                    f"a={a!r} is better than b={b!r}, but a ⊗ c = {ac!r} and b ⊗ c = {bc!r} "
                    f"for c={c!r}",
                )


def _hashable(values: Sequence[Any]) -> bool:
    try:
        for v in values:
            hash(v)
    except TypeError:
        return False
    return True
