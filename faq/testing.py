"""Seeded random instances for tests and fuzzing: rules, relations, values.

>>> rule = random_rule(3)
>>> rule.head == tuple(v for v in rule.head if v in rule.variables)
True
"""

from __future__ import annotations

import math
import random
from typing import Any

from faq.rule import Atom, Rule
from semirings import Semiring

__all__ = ["NAMED_RULES", "random_rule", "random_relations", "random_value"]

NAMED_RULES: dict[str, str] = {
    "triangle": "Q() :- E(a, b), E(b, c), E(a, c)",
    "triangle-free": "Q(a, b, c) :- R(a, b), S(b, c), T(a, c)",
    "4-cycle": "Q() :- R(a, b), S(b, c), T(c, d), U(d, a)",
    "4-clique": "Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)",
    "two-triangles": "Q(b) :- R(a, b), S(b, c), T(a, c), U(b, d), V(c, d)",
    "cycle-pendant": "Q(e) :- R(a, b), S(b, c), T(a, c), P(c, e)",
    "chain": "Q(i, l) :- A(i, j), B(j, k), C(k, l)",
    "star": "Q(x) :- A(x, a), B(x, b), C(x, c)",
    "self-loop": "Q(a) :- E(a, a), E(a, b)",
}
"""Small named queries, shared by tests and examples."""


def random_value(S: Semiring, rng: random.Random) -> Any:
    """A random non-zero value of a built-in semiring, on a grid where ⊕ and ⊗ are exact.

    Floats are multiples of 1/4 in a small range so sums and products are exact;
    the log semiring uses arbitrary floats (compare it approximately).
    """
    name = S.name
    if name == "counting":
        return rng.randint(1, 5)
    if name == "integer":
        return rng.choice([-3, -2, -1, 1, 2, 3, 4])
    if name == "boolean":
        return True
    if name in ("real",):
        return rng.choice([-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.0, 3.0])
    if name == "max-product":
        return rng.choice([0.25, 0.5, 1.0, 2.0, 4.0])
    if name in ("min-plus", "max-plus"):
        return float(rng.randint(-8, 8))
    if name == "log":
        return round(rng.uniform(-3.0, 3.0), 3)
    zero, one = S.zero, S.one
    if isinstance(zero, float) and isinstance(one, float):
        lo = zero if math.isfinite(zero) else -8.0
        hi = one if math.isfinite(one) else 8.0
        return float(rng.randint(int(min(lo, hi)), int(max(lo, hi))))
    return one


def random_rule(
    seed: int,
    n_vars: tuple[int, int] = (2, 5),
    n_atoms: tuple[int, int] = (1, 4),
    max_arity: int = 3,
    repeat_prob: float = 0.3,
) -> Rule:
    """A random rule: 2-5 variables, 1-4 atoms of arity 1-3, some free variables.

    Some atoms reuse an earlier relation (same name, same arity), so repeated
    relations are exercised; every variable appears in at least one atom.
    """
    rng = random.Random(seed)
    nv = rng.randint(*n_vars)
    na = rng.randint(*n_atoms)
    variables = [f"x{i}" for i in range(nv)]
    atoms: list[Atom] = []
    arities: dict[str, int] = {}
    uncovered = list(variables)
    rng.shuffle(uncovered)
    for k in range(na):
        reuse = [r for r in arities if rng.random() < repeat_prob]
        if reuse and k > 0:
            name = reuse[0]
            arity = arities[name]
        else:
            name = "R" + str(len(arities))
            arity = rng.randint(1, min(max_arity, nv))
            arities[name] = arity
        vs = []
        for _ in range(arity):
            if uncovered and (k >= na - 2 or rng.random() < 0.8):
                vs.append(uncovered.pop())
            else:
                vs.append(rng.choice(variables))
        atoms.append(Atom(name, tuple(vs)))
    while uncovered:  # make sure every variable occurs
        v = uncovered.pop()
        name = "R" + str(len(arities))
        arities[name] = 1
        atoms.append(Atom(name, (v,)))
    used = list(dict.fromkeys(v for a in atoms for v in a.vars))
    head = tuple(v for v in used if rng.random() < 0.35)
    return Rule("Q", head, tuple(atoms))


def random_relations(
    rule: Rule,
    S: Semiring,
    seed: int,
    domain: int = 4,
    density: float = 0.5,
) -> dict[str, dict[tuple[int, ...], Any]]:
    """Random sparse relations for every relation of ``rule``: ``{name: {key: value}}``."""
    rng = random.Random(seed)
    out: dict[str, dict[tuple[int, ...], Any]] = {}
    for name, arity in rule.relations.items():
        rel: dict[tuple[int, ...], Any] = {}
        cells = domain**arity
        n = max(1, int(cells * density * rng.uniform(0.3, 1.0)))
        for _ in range(n):
            key = tuple(rng.randrange(domain) for _ in range(arity))
            rel[key] = random_value(S, rng)
        out[name] = rel
    return out
