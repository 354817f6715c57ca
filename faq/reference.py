"""A brute-force reference evaluator: the oracle the Spark engine is tested against.

Pure Python, no Spark.  It enumerates every assignment of the variables that
matches a tuple in each atom (a nested-loop join over the active domain), ⊗s
the annotations of the matched tuples and ⊕s the products per head tuple.

>>> import semirings
>>> E = {(0, 1): 1, (1, 2): 1, (0, 2): 1}
>>> reference_solve("Q() :- E(a, b), E(b, c), E(a, c)", semirings.COUNTING, {"E": E})
{(): 1}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import semirings
from faq.rule import Rule, parse_rule
from semirings import Semiring

__all__ = ["reference_solve"]


def reference_solve(
    rule: str | Rule,
    semiring: str | Semiring,
    relations: Mapping[str, Mapping[tuple[Any, ...], Any]],
) -> dict[tuple[Any, ...], Any]:
    """Evaluate ``rule`` over ``relations`` (``{name: {key tuple: annotation}}``).

    Returns ``{head tuple: annotation}`` without zero annotations.
    """
    r = parse_rule(rule) if isinstance(rule, str) else rule
    S = semirings.get(semiring)
    rels = {
        name: [(k, v) for k, v in relations[name].items() if not S.is_zero(v)]
        for name in r.relations
    }
    out: dict[tuple[Any, ...], Any] = {}

    def walk(i: int, env: dict[str, Any], acc: Any) -> None:
        if i == len(r.atoms):
            key = tuple(env[v] for v in r.head)
            out[key] = S.add(out[key], acc) if key in out else acc
            return
        atom = r.atoms[i]
        for key, val in rels[atom.relation]:
            bound: dict[str, Any] = {}
            ok = True
            for var, x in zip(atom.vars, key, strict=True):
                have = env.get(var, bound.get(var, _MISSING))
                if have is _MISSING:
                    bound[var] = x
                elif have != x:
                    ok = False
                    break
            if ok:
                walk(i + 1, {**env, **bound}, S.mul(acc, val))

    walk(0, {}, S.one)
    return {k: v for k, v in out.items() if not S.is_zero(v)}


_MISSING = object()
