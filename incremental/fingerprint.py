"""What a user semiring computes, recorded in a view's manifest and compared on reopen.

A built-in semiring is identified by its name; a user semiring by a fingerprint
(:func:`semiring_fingerprint`): the ``repr`` of its zero, one, and of ⊕, ⊗ (and
negation) on probe values of its own domain.  :func:`semiring_differences` says
how two fingerprints differ, :func:`check_fingerprint` refuses a folder written with
another definition (:meth:`incremental.store.Store.check_semiring`).
"""

from __future__ import annotations

import logging
from typing import Any

from semirings import Semiring

__all__ = [
    "FINGERPRINT",
    "builtin",
    "check_fingerprint",
    "kept",
    "semiring_differences",
    "semiring_fingerprint",
]

log = logging.getLogger("faq.incremental")

FINGERPRINT = "semiring_fingerprint"
"""Manifest key of a user semiring's fingerprint (None for a built-in semiring)."""

_FLOAT_PROBES = (0.5, 2.0, -1.5, 3.25)
_INT_PROBES = (2, 3, -1, 7)


def builtin(S: Semiring) -> bool:
    """True for the engine's own semirings, which a manifest identifies by name."""
    from semirings.core import canonical

    try:
        return canonical(S.name) is S
    except KeyError:
        return False


def semiring_fingerprint(S: Semiring) -> dict[str, Any]:
    """What a user semiring computes, JSON-safe: ``zero``, ``one``, and ``add``, ``mul``
    (and ``neg`` for a ring) on probe values of its own domain, and how a view keeps its
    annotations (:func:`kept`: a declared completion or presence changes what is stored).

    The probes are zero, one, values built from them (one ⊕ one, (one ⊕ one) ⊗ (one ⊕
    one), (one ⊕ one) ⊕ one, zero ⊕ one) and, when zero or one is a number, a few
    numbers of that type the semiring's ``contains`` accepts.  Each result is kept as its
    ``repr`` (``"raises TypeError"`` when the function raised), keyed by the probes'
    ``repr``, so two definitions are compared on the probes both have.
    """
    base: list[Any] = [S.zero, S.one]
    numbers = [S.zero, S.one]
    if any(isinstance(x, float) for x in numbers):
        base += _FLOAT_PROBES
    elif all(isinstance(x, int) and not isinstance(x, bool) for x in numbers):
        base += _INT_PROBES
    two = _quiet(S.add, S.one, S.one)
    derived = [
        two,
        _quiet(S.mul, two, two),
        _quiet(S.add, two, S.one),
        _quiet(S.add, S.zero, S.one),
    ]
    probes: dict[str, Any] = {}
    for x in (*base, *derived):
        if x is not _FAILED and _member(S, x):
            probes.setdefault(_repr(x), x)
    items = sorted(probes.items())
    pairs = [(a, b) for i, a in enumerate(items) for b in items[i:]]
    return {
        "zero": _repr(S.zero),
        "one": _repr(S.one),
        "add": {f"{ra}, {rb}": _outcome(S.add, a, b) for (ra, a), (rb, b) in pairs},
        "mul": {f"{ra}, {rb}": _outcome(S.mul, a, b) for (ra, a), (rb, b) in pairs},
        "neg": None if S.neg is None else {r: _outcome(S.neg, x) for r, x in items},
        "kept": kept(S),
    }


def kept(S: Semiring) -> str:
    """What ``S`` declares of how a view keeps its annotations (they are stored so):
    ``"completion <name>"``, ``"presence"`` or ``"as they are"``."""
    if S.completion is not None:
        return f"completion {S.completion.name}"
    return "presence" if S.presence else "as they are"


def semiring_differences(stored: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """How two fingerprints differ: one line for each of zero, one, how annotations are
    kept, add, mul, neg that does (the first probe that shows it, with both results)."""
    out = []
    for part in ("zero", "one"):
        if stored.get(part) != now.get(part):
            out.append(f"{part} is {stored.get(part)} in the folder, {now.get(part)} now")
    # a folder written before "kept" was recorded kept a user semiring's values as they are
    was = stored.get("kept", "as they are")
    if was != now.get("kept"):
        out.append(f"annotations are kept {was} in the folder, {now.get('kept')} now")
    for op in ("add", "mul", "neg"):
        a, b = stored.get(op), now.get(op)
        if (a is None) != (b is None):
            was, new = ("defined", "not") if b is None else ("not defined", "defined")
            out.append(f"neg is {was} in the folder, {new} now")
            continue
        if not isinstance(a, dict) or not isinstance(b, dict):
            continue
        for k in sorted(a.keys() & b.keys()):
            if a[k] != b[k]:
                out.append(f"{op}({k}) is {a[k]} in the folder, {b[k]} now")
                break
    return out


_FAILED = object()


def check_fingerprint(where: str, S: Semiring, now: dict[str, Any] | None, stored: Any) -> None:
    """Refuse a folder (``where``) whose manifest recorded ``stored`` as the fingerprint of
    a semiring named like ``S`` (``...``: recorded none), when ``S``'s own is ``now``
    (None: a built-in semiring, identified by name, compared by the view).  A manifest
    written before fingerprints were recorded is accepted, with a warning, for a user
    semiring.

    Raises
    ------
    ValueError
        Naming which of zero, one, add, mul, neg differs, with both values.
    """
    if stored is ...:
        if now is not None:
            log.warning(
                "%s was written before semiring fingerprints were recorded: its user "
                "semiring %r is identified by its name only",
                where,
                S.name,
            )
        return
    if stored is None and now is None:
        return
    if stored is None:
        raise ValueError(
            f"{where} holds a view over the built-in semiring {S.name!r}, not over a "
            "user semiring of the same name"
        )
    differences = semiring_differences(stored, semiring_fingerprint(S))
    if differences:
        raise ValueError(
            f"{where} holds a view over a semiring {S.name!r} defined differently: "
            + "; ".join(differences)
            + ". Reopen it with the semiring it was written with, or use another folder"
        )


def _quiet(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return _FAILED


def _member(S: Semiring, x: Any) -> bool:
    try:
        return bool(S.contains(x))  # type: ignore[misc]
    except Exception:
        return False


def _outcome(fn: Any, *args: Any) -> str:
    try:
        return _repr(fn(*args))
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def _repr(x: Any) -> str:
    import re

    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(x))
