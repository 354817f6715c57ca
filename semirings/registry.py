"""Semirings found by name."""

from __future__ import annotations

from semirings.builtins import BUILTINS
from semirings.core import Semiring

_REGISTRY: dict[str, Semiring] = {s.name: s for s in BUILTINS}


def names() -> list[str]:
    """Names of every registered semiring, built-ins first."""
    return list(_REGISTRY)


def get(name: str | Semiring) -> Semiring:
    """Return the semiring called ``name`` (a Semiring is returned unchanged).

    >>> get("max-product").add(0.2, 0.5)
    0.5

    Raises
    ------
    ValueError
        For an unknown name; the message lists the known names.
    """
    if isinstance(name, Semiring):
        return name
    if not isinstance(name, str):
        raise TypeError(f"semiring must be a name or a Semiring, not {type(name).__name__}")
    key = name.strip().lower().replace("_", "-")
    try:
        return _REGISTRY[key]
    except KeyError:
        known = ", ".join(repr(n) for n in _REGISTRY)
        raise ValueError(f"unknown semiring {name!r}; known semirings: {known}") from None


def register(semiring: Semiring, *, replace: bool = False) -> Semiring:
    """Make ``semiring`` available to :func:`get` under its name."""
    if not isinstance(semiring, Semiring):
        raise TypeError("register() takes a Semiring")
    if semiring.name in _REGISTRY and not replace:
        raise ValueError(f"a semiring named {semiring.name!r} is already registered")
    _REGISTRY[semiring.name] = semiring
    return semiring
