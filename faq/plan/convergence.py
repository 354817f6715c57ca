"""Convergence of semi-naive fixpoints: when ⊕ is idempotent, when a round proves a
negative cycle, and the error that refuses a fixpoint that does not converge.

Read by batch programs (:mod:`faq.recursion`) and by incremental views of programs
(:mod:`incremental.fixpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import semirings
from semirings import Semiring
from semirings.local import equal, local_ops

Table = Any
"""A kernel table (:class:`faq.kernel.Table`: ``rows`` and ``values``); the planning layer
does not import the kernel."""

__all__ = ["idempotent_on", "negative_cycle", "nonconvergence"]


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


def negative_cycle(S: Semiring, k: int, now: Mapping[str, Any], delta: Mapping[str, Table]) -> bool:
    """Whether round ``k`` of a min-plus or max-plus group proves a negative (max-plus:
    positive) cycle: its change ``delta`` is not empty although the state before it,
    ``now`` (tables or keyed tables with ``rows``), holds fewer than ``k`` keys.

    Why it is sound: ⊗ is + there, so a derivation tree's value is the sum of its
    leaves.  Without such a cycle, cutting the part of a tree between two nodes of the
    same key never makes it worse, so every best value has a tree in which no key
    repeats on a path from the root.  The state before round ``k`` holds every value of
    a tree of depth ≤ ``k`` (round 0: the base rules, depth 1), and holds the whole
    fixpoint once ``k`` reaches the deepest of those trees; while it does not, the
    deepest path has ``k`` distinct keys whose subtrees it holds.  So a change at round
    ``k`` with fewer than ``k`` keys held means no finite fixpoint.  A state that
    continues from a sound earlier one (an incremental view's) holds at least as much.
    """
    if S.name not in _TROPICAL or semirings.get(S.name) is not S:
        return False
    if not any(t.rows for t in delta.values()):
        return False
    return sum(t.rows for t in now.values()) < k


_TROPICAL = ("min-plus", "max-plus")


def nonconvergence(
    S: Semiring,
    names: Sequence[str],
    delta: Mapping[str, Table],
    rounds: int,
    cycle: bool = False,
) -> ValueError:
    """The error refusing a fixpoint still changing (``delta``) after ``rounds`` rounds;
    ``cycle``: refused early by :func:`negative_cycle`."""
    moving = [n for n in names if delta[n].rows]
    if cycle:
        sign = "positive" if S.name == "max-plus" else "negative"
        cause = (
            f"a {sign} cycle: a best value never needs more rounds than there are keys, "
            f"and round {rounds} still changes with fewer keys derived"
        )
    elif S.idempotent:
        cause = "a negative cycle, say, in min-plus"
    else:
        cause = (
            f"a cycle, say: {S.name!r} ⊕ is not idempotent, so values around a cycle grow forever"
        )
    if cycle:
        return ValueError(
            f"the fixpoint of relation(s) {', '.join(map(repr, moving))} does not converge: "
            f"still changing after {rounds} rounds ({cause})"
        )
    return ValueError(
        f"the fixpoint of relation(s) {', '.join(map(repr, moving))} does not converge: "
        f"still changing after {rounds} rounds ({cause}); "
        "raise max_rounds if it converges slowly"
    )
