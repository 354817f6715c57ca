"""A brute-force reference evaluator: the oracle the Spark engine is tested against.

Pure Python, no Spark.  It enumerates every assignment of the variables that
matches a tuple in each atom (a nested-loop join over the active domain; a
constant in an atom matches only the tuples holding it), ⊗s the annotations of
the matched tuples and ⊕s the products per head tuple.

>>> import semirings
>>> E = {(0, 1): 1, (1, 2): 1, (0, 2): 1}
>>> reference_solve("Q() :- E(a, b), E(b, c), E(a, c)", semirings.COUNTING, {"E": E})
{(): 1}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import semirings
from faq.rule import Rule, parse_rule
from semirings import Semiring

__all__ = ["reference_fixpoint", "reference_solve"]


def reference_solve(
    rule: str | Rule,
    semiring: str | Semiring,
    relations: Mapping[str, Mapping[tuple[Any, ...], Any]],
    aggregates: Mapping[str, str] | None = None,
) -> dict[tuple[Any, ...], Any]:
    """Evaluate ``rule`` over ``relations`` (``{name: {key tuple: annotation}}``).

    With ``aggregates`` (``{variable: operator}``, see :func:`faq.query`) the listed
    variables are aggregated outermost, first listed outermost, each with its own
    operator (``"sum"``, ``"max"``, ``"min"``, ``"or"``, ``"logsumexp"``, or ``"add"``
    for the semiring's ⊕), the others innermost with the semiring's ⊕: the matching
    assignments are enumerated and folded one variable at a time from the inside.

    Returns ``{head tuple: annotation}`` without zero annotations.

    >>> R = {(0, 0): 2.0, (0, 1): 3.0, (1, 0): 5.0}
    >>> S = {(0, 0): 1.0, (0, 1): 1.0, (1, 0): 4.0}
    >>> reference_solve("Q(x) :- R(x, y), S(y, z)", "real", {"R": R, "S": S}, {"y": "max"})
    {(0,): 12.0, (1,): 10.0}
    """
    r = parse_rule(rule) if isinstance(rule, str) else rule
    S = semirings.get(semiring)
    rels = {
        name: [(k, v) for k, v in relations[name].items() if not S.is_zero(v)]
        for name in r.relations
    }
    if aggregates:
        return _nested(r, S, rels, dict(aggregates))
    out = _assignments(r, S, rels, r.head)
    return {k: v for k, v in out.items() if not S.is_zero(v)}


def _assignments(
    r: Rule, S: Semiring, rels: dict[str, list[tuple[tuple[Any, ...], Any]]], keep: Sequence[str]
) -> dict[tuple[Any, ...], Any]:
    """Every assignment matching a tuple in each atom, its product ⊕-ed per ``keep`` key."""
    out: dict[tuple[Any, ...], Any] = {}
    consts = [a.consts for a in r.atoms]

    def walk(i: int, env: dict[str, Any], acc: Any) -> None:
        if i == len(r.atoms):
            key = tuple(env[v] for v in keep)
            out[key] = S.add(out[key], acc) if key in out else acc
            return
        atom = r.atoms[i]
        for key, val in rels[atom.relation]:
            if any(
                isinstance(key[p], str) != isinstance(c, str) or key[p] != c for p, c in consts[i]
            ):
                continue  # a constant selects the rows holding it (no cast: 1 is not '1')
            bound: dict[str, Any] = {}
            ok = True
            for var, x in zip(atom.vars, (key[p] for p in atom.positions), strict=True):
                have = env.get(var, bound.get(var, _MISSING))
                if have is _MISSING:
                    bound[var] = x
                elif have != x:
                    ok = False
                    break
            if ok:
                walk(i + 1, {**env, **bound}, S.mul(acc, val))

    walk(0, {}, S.one)
    return out


_OPERATORS = {
    "sum": lambda a, b: a + b,
    "max": max,
    "min": min,
    "or": lambda a, b: a or b,
    "logsumexp": semirings.logaddexp,
}


def _nested(
    r: Rule,
    S: Semiring,
    rels: dict[str, list[tuple[tuple[Any, ...], Any]]],
    aggregates: dict[str, str],
) -> dict[tuple[Any, ...], Any]:
    """Per-variable aggregates: every assignment of all variables, then one fold per
    variable from the innermost (absent assignments are zero, neutral for each fold)."""
    names = list(r.variables)
    full = _assignments(r, S, rels, names)
    nesting = [*aggregates, *(v for v in r.bound if v not in aggregates)]
    table = full
    for v in reversed(nesting):  # innermost first
        op = aggregates.get(v, "add")
        add = S.add if op == "add" else _OPERATORS[op]
        i = names.index(v)
        folded: dict[tuple[Any, ...], Any] = {}
        for key, val in table.items():
            k = key[:i] + key[i + 1 :]
            folded[k] = add(folded[k], val) if k in folded else val
        names.pop(i)
        table = folded
    pos = [names.index(v) for v in r.head]
    return {tuple(k[p] for p in pos): x for k, x in table.items() if not S.is_zero(x)}


def reference_fixpoint(
    program: str | Sequence[str],
    semiring: str | Semiring,
    relations: Mapping[str, Mapping[tuple[Any, ...], Any]],
    max_rounds: int = 1000,
) -> dict[str, dict[tuple[Any, ...], Any]]:
    """The least fixpoint of a program of rules, by naive (Kleene) iteration.

    ``program`` holds rules separated by line ends or ``;`` (or is a list of
    rules); every relation named in a head is defined by its rules (their
    results ⊕-combined), the others are read from ``relations``.  Starting from
    empty relations, every rule is evaluated with :func:`reference_solve` over
    the current ones, until a round changes nothing.

    Returns ``{relation: {key tuple: annotation}}`` for every defined relation.

    Raises
    ------
    ValueError
        No fixpoint after ``max_rounds`` rounds.

    >>> E = {(0, 1): 2.0, (1, 2): 3.0, (0, 2): 9.0}
    >>> prog = "D(x) :- S(x); D(y) :- D(x), E(x, y)"
    >>> reference_fixpoint(prog, "min-plus", {"S": {(0,): 0.0}, "E": E})["D"]
    {(0,): 0.0, (1,): 2.0, (2,): 5.0}
    """
    from faq.rule import split_rules

    texts = split_rules(program) if isinstance(program, str) else list(program)
    rules = [parse_rule(t, recursive=True) for t in texts]
    S = semirings.get(semiring)
    state: dict[str, dict[tuple[Any, ...], Any]] = {r.name: {} for r in rules}
    for _ in range(max_rounds):
        new: dict[str, dict[tuple[Any, ...], Any]] = {name: {} for name in state}
        for r in rules:
            out = new[r.name]
            for k, v in reference_solve(r, S, {**relations, **state}).items():
                out[k] = S.add(out[k], v) if k in out else v
        new = {n: {k: v for k, v in t.items() if not S.is_zero(v)} for n, t in new.items()}
        if new == state:
            return {n: dict(sorted(t.items())) for n, t in state.items()}
        state = new
    raise ValueError(f"reference_fixpoint: no fixpoint after {max_rounds} rounds")


_MISSING = object()
