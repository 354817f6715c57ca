"""Convergence of semi-naive fixpoints: when ⊕ is idempotent, when a round proves that a
fixpoint does not exist, and the error that refuses it.

A recursive group's fixpoint is refused (:class:`DivergenceError`, a ValueError) when

* ⊕ is idempotent and a round proves an *improving cycle* (:func:`improving_cycle`): no
  bound on the rounds is needed then, the proof comes at the latest one round after the
  group's keys are all derived;
* ⊕ is not idempotent (rings, counting, ``log``) and it still changes after
  ``max_rounds`` rounds;
* a round derives a value outside the semiring's domain, as the semiring's own value
  check says (:meth:`semirings.local.LocalOps.valid`: ``inf`` in ``max-product`` or
  ``real``, NaN anywhere; ``+inf`` is min-plus's zero and in its domain), or its
  arithmetic leaves the 64-bit integers (``counting``, ``integer``).

Read by batch programs (:mod:`faq.recursion`) and by incremental views of programs
(:mod:`incremental.fixpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from semirings import Semiring
from semirings.local import equal, local_ops

Table = Any
"""A kernel table (:class:`faq.kernel.Table`: ``vars``, ``cols``, ``rows`` and ``values``);
the planning layer does not import the kernel."""

__all__ = [
    "DivergenceError",
    "idempotent_on",
    "improving_cycle",
    "improving_cycle_error",
    "nonconvergence",
    "outside_domain",
    "overflowed",
    "value_outside",
]


class DivergenceError(ValueError):
    """A recursive program's fixpoint does not exist in its semiring: it still changes
    after the rounds allowed, a round proves a cycle that improves values forever, or
    a round derives values outside the semiring's domain.  A ValueError."""


def idempotent_on(S: Semiring, tables: list[Table], check: bool = True) -> bool:
    """Whether ``a ⊕ a == a`` for ``S``'s one and every value of ``tables`` (a user max
    or min semiring need not declare ``idempotent``).

    With ``check``, a failure is a ValueError: the rounds so far relied on it.
    """
    if S.idempotent:
        return True
    ops = local_ops(S)
    one = np.empty(1, dtype=ops.dtype)
    one[0] = S.one
    v = np.concatenate([one] + [t.values for t in tables if t.values is not None and t.rows])
    twice = ops.reduceat(np.repeat(v, 2), np.arange(0, 2 * len(v), 2))
    bad = np.flatnonzero(~equal(twice, v))
    if bad.size and check:
        raise ValueError(
            f"semiring {S.name!r}: ⊕ looked idempotent (a ⊕ a == a for one and the first "
            f"round's values) but is not for {v[bad[0]]!r}; a fixpoint needs ⊕ idempotent "
            "for every value or for none"
        )
    return not bad.size


def improving_cycle(k: int, now: Mapping[str, Any], delta: Mapping[str, Table]) -> bool:
    """Whether round ``k`` of a group whose ⊕ is idempotent proves an *improving cycle*:
    its change ``delta`` is not empty although the state before it, ``now`` (tables or
    keyed tables with ``rows``), holds fewer than ``k`` keys.

    Why it is sound, for any idempotent ⊕ (min-plus, max-plus, max-product, boolean, a
    user max/min semiring).  A derivation tree's value is the ⊗ of its leaves.  Cut
    the part of a tree between two nodes of the same key: the value changes from
    ``c ⊗ x`` to ``x``, where ``c`` is the ⊗ of the leaves cut off.  Unless some such
    ``c`` improves on one (``c ⊕ 1 ≠ 1``: a negative cycle in min-plus, a positive one in
    max-plus, a product above 1 in max-product), ``c ⊗ x ⊕ x = x`` (distributivity), so
    cutting never makes a tree better, and every key's value is the ⊕ of trees in which
    no key repeats on a path from the root.  The state before round ``k`` holds the
    ⊕ of every tree of depth ≤ ``k`` (round 0: the base rules, depth 1) and holds the
    whole fixpoint once ``k`` reaches the deepest of those trees; while it does not, the
    deepest path has ``k`` distinct keys whose (non-zero) subtrees it holds.  So a change
    at round ``k`` with fewer than ``k`` keys held proves an improving cycle, around
    which values improve forever; without one, a group converges after at most one
    round more than it has keys, whatever ``max_rounds`` says.  A state that continues
    from a sound earlier one (an incremental view's) holds at least as much.
    """
    if not any(t.rows for t in delta.values()):
        return False
    return sum(t.rows for t in now.values()) < k


def improving_cycle_error(
    S: Semiring, names: Sequence[str], delta: Mapping[str, Table | int], k: int
) -> DivergenceError:
    """The error refusing a fixpoint whose round ``k`` proves an improving cycle
    (:func:`improving_cycle`)."""
    return DivergenceError(
        f"the fixpoint of relation(s) {_moving(names, delta)} does not converge: still "
        f"changing after {k} rounds with fewer keys derived, which proves a cycle that "
        f"improves values each time around it (a negative cycle in min-plus, a positive "
        f"cycle in max-plus, a product above 1 in max-product; {S.name!r} ⊕ is idempotent, "
        "so a best value never needs more rounds than there are keys)"
    )


def nonconvergence(
    S: Semiring, names: Sequence[str], delta: Mapping[str, Table | int], rounds: int
) -> DivergenceError:
    """The error refusing a fixpoint still changing (``delta``) after ``rounds`` rounds
    (a ⊕ that is not idempotent)."""
    return DivergenceError(
        f"the fixpoint of relation(s) {_moving(names, delta)} does not converge: "
        f"still changing after {rounds} rounds (a cycle, say: {S.name!r} ⊕ is not "
        "idempotent, so values around a cycle grow forever); raise max_rounds if it "
        "converges slowly"
    )


def outside_domain(
    S: Semiring, names: Sequence[str], tables: Mapping[str, Table], k: int | None
) -> DivergenceError | None:
    """The error refusing a fixpoint whose round ``k`` (None: a round not counted) derived
    a value of ``tables`` that is not in ``S`` (its own value check), or None when every
    value is in ``S``."""
    ops = local_ops(S)
    for n, t in tables.items():
        if t.values is None or not t.rows:
            continue
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~ops.valid(t.values))
        if bad.size:
            i = int(bad[0])
            key = tuple(_plain(c[i]) for c in t.cols)
            return value_outside(S, names, tables, k, n, key, t.values[i], int(bad.size))
    return None


def value_outside(
    S: Semiring,
    names: Sequence[str],
    changing: Mapping[str, Table | int],
    k: int | None,
    relation: str,
    key: tuple[Any, ...],
    value: Any,
    count: int,
) -> DivergenceError:
    """The error refusing a fixpoint whose round ``k`` derived ``relation{key} = value``,
    outside ``S``, with ``count`` such keys (``changing``: each relation's change, or
    its rows, naming those still moving)."""
    return DivergenceError(
        f"the fixpoint of relation(s) {_moving(names, changing)} does not converge in "
        f"{S.name!r} ({S.domain}): {_round(k)} derives {relation}{key!r} = "
        f"{_plain(value)!r}, outside the semiring's values ({count:,} such key(s)); the "
        "values diverge, or grow past what the semiring holds"
    )


def overflowed(
    S: Semiring, names: Sequence[str], k: int | None, exc: OverflowError
) -> DivergenceError:
    """The error refusing a fixpoint whose round ``k`` (None: a round not counted)
    overflowed ``S``'s integers."""
    return DivergenceError(
        f"the fixpoint of relation(s) {', '.join(map(repr, names))} does not converge in "
        f"{S.name!r} ({S.domain}): {_round(k)} overflows ({exc}); the values diverge, or "
        "grow past what the semiring holds"
    )


def _round(k: int | None) -> str:
    return "a round" if k is None else f"round {k}"


def _moving(names: Sequence[str], tables: Mapping[str, Table | int]) -> str:
    """The relations of ``names`` whose change (a table, or its rows) is not empty."""
    moving = [n for n in names if n in tables and _rows(tables[n])] or list(names)
    return ", ".join(map(repr, moving))


def _rows(t: Table | int) -> int:
    return t if isinstance(t, int) else t.rows


def _plain(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x
