"""Variable-order planning for InsideOut: pure Python, no Spark.

The planner sees a query as a hypergraph (one hyperedge per atom) with cheap
statistics per atom: its row count and the distinct count of each variable.
A cost model estimates, for every elimination step, how many rows the join of
the step's bag produces; a plan's cost is the sum over its steps.  For dense
matrices this is exactly the number of scalar multiplications, so on a matrix
chain the optimal order is the one :func:`numpy.linalg.multi_dot` picks.

Strategies live in a registry (:data:`STRATEGIES`) and are found by name.

>>> from faq.rule import parse_rule
>>> r = parse_rule("Q(i, l) :- A(i, j), B(j, k), C(k, l)")
>>> stats = [AtomStats(10 * 100, {"i": 10, "j": 100}),
...          AtomStats(100 * 5, {"j": 100, "k": 5}),
...          AtomStats(5 * 50, {"k": 5, "l": 50})]
>>> plan = make_plan(r, stats)
>>> plan.order, plan.cost
(('j', 'k'), 7500.0)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from faq.rule import Atom, Rule

__all__ = [
    "ESTIMATE",
    "EXACT",
    "GUESS",
    "STRATEGIES",
    "AtomStats",
    "Pairs",
    "Plan",
    "PlanFactor",
    "Rank",
    "Step",
    "block_rank",
    "check_precedence",
    "get_strategy",
    "is_acyclic",
    "make_plan",
]

EXHAUSTIVE_LIMIT = 11
"""The "auto" strategy searches exhaustively up to this many bound variables (a chain of
12 matrices; about a second of planning), greedily beyond.  Greedy can be far from
optimal on chains, so the limit is as high as planning time allows."""


EXACT, ESTIMATE, GUESS = "exact", "estimate", "guess"
"""What a size of the plan rests on (:attr:`PlanFactor.basis`, :attr:`Step.join_basis`):
counted (``EXACT``: a local relation's rows and distinct values, a pairwise join
counted in the driver); derived from statistics (``ESTIMATE``: approximate counts of a
relation kept in Spark, or a bound by distinct counts); or resting on no statistic of the
join it sizes (``GUESS``: the containment formula over distinct counts, which assumes
values spread evenly and is off by orders of magnitude on skewed data)."""

_TRUST = {GUESS: 0, ESTIMATE: 1, EXACT: 2}


def _weakest(*bases: str) -> str:
    return min(bases, key=_TRUST.__getitem__, default=EXACT)


@dataclass(frozen=True)
class AtomStats:
    """Row count and per-variable distinct counts of one (prepared) atom; ``exact``
    False when they are estimates (approximate distinct counts, rows before repeated
    keys are combined)."""

    rows: int
    distinct: dict[str, int]
    exact: bool = True


@dataclass(frozen=True, eq=False)
class PlanFactor:
    """A factor as the planner sees it: a label, its variables, estimated size.

    ``atom`` is the index of the rule's atom it stands for, or None for the
    output of a step.
    """

    label: str
    vars: tuple[str, ...]
    rows: float
    distinct: dict[str, float]
    atom: int | None = None
    args: tuple[str, ...] = ()
    """How an atom with constants is shown (``M(0, b)``); empty: by its variables."""
    basis: str = EXACT
    """What ``rows`` rests on: ``EXACT``, ``ESTIMATE`` or ``GUESS`` (see :data:`GUESS`)."""

    def __str__(self) -> str:
        return f"{self.label}({', '.join(self.args or self.vars)})"


@dataclass(frozen=True, eq=False)
class Step:
    """One InsideOut step: join ``inputs`` (+ ``absorbed``), ⊕-aggregate ``vars`` away.

    ``vars`` is empty for the final product of the remaining factors onto the
    head.  It holds several variables when the next eliminations only
    aggregate this step's output further (one ⊕-aggregation does them all).
    """

    vars: tuple[str, ...]
    inputs: tuple[PlanFactor, ...]
    absorbed: tuple[PlanFactor, ...]
    output: PlanFactor
    est_join: float
    cyclic: bool
    op: str | None = None
    """The ⊕ aggregating ``vars`` away when the query gives variables their own operators
    (see :mod:`faq.plan.aggregates`); None for the semiring's own ⊕."""
    join_basis: str = EXACT
    """What ``est_join`` rests on: ``EXACT``, ``ESTIMATE`` or ``GUESS``."""

    @property
    def factors(self) -> tuple[PlanFactor, ...]:
        """Every factor multiplied in this step."""
        return (*self.inputs, *self.absorbed)


@dataclass(frozen=True, eq=False)
class Plan:
    """A full InsideOut plan: variable order, steps, estimated total cost (immutable).

    What happens when it runs (join methods, where each step ran, actual
    sizes, seconds) is recorded apart, in a :class:`faq.executor.Trace`.
    """

    rule: Rule
    order: tuple[str, ...]
    steps: tuple[Step, ...]
    cost: float
    strategy: str
    atoms: tuple[PlanFactor, ...] = ()
    blocks: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per-variable aggregates: blocks of bound variables sharing one ⊕, outermost first
    (empty when every bound variable uses the semiring's ⊕)."""


# -- cost model ------------------------------------------------------------------------
def _join_estimate(
    factors: Sequence[PlanFactor], pairs: Pairs | None = None
) -> tuple[float, dict[str, float], str]:
    """Estimated rows of the natural join of ``factors``, each variable's distinct count,
    and what the rows rest on (:data:`GUESS`).

    For every variable shared by several factors the product of sizes is divided
    by all but the smallest distinct count (containment of value sets), and the
    result is capped by the product of the variables' distinct counts.  The
    join of two atoms whose exact join size is in ``pairs`` has that size.
    """
    if not factors:
        return 1.0, {}, EXACT
    known = _pair_size(factors, pairs)
    size = math.prod(max(f.rows, 0.0) for f in factors)
    dist: dict[str, float] = {}
    per_var: dict[str, list[float]] = {}
    for f in factors:
        for v in f.vars:
            per_var.setdefault(v, []).append(max(f.distinct.get(v, f.rows), 1.0))
    for v, ds in per_var.items():
        if len(ds) > 1:
            size /= math.prod(ds) / min(ds)
        dist[v] = min(ds)
    cap = math.prod(dist.values()) if dist else 1.0
    inputs = _weakest(*(f.basis for f in factors))
    if len(factors) == 1:
        basis = inputs
    elif known is not None:
        basis = _weakest(EXACT if known <= cap else ESTIMATE, inputs)
    else:  # the containment formula: a guess, unless the distinct counts bound it
        basis = _weakest(ESTIMATE if size >= cap else GUESS, inputs)
    size = min(size, cap) if known is None else min(known, cap)
    empty = [f.basis for f in factors if f.rows <= 0]
    if empty:
        size, basis = 0.0, max(empty, key=_TRUST.__getitem__)
    return size, {v: min(d, max(size, 1.0)) for v, d in dist.items()}, basis


Pairs = dict[frozenset[int], float]
"""Exact join sizes of pairs of atoms on their shared variables, by atom indices."""


def _pair_size(factors: Sequence[PlanFactor], pairs: Pairs | None) -> float | None:
    if pairs is None or len(factors) != 2:
        return None
    a, b = factors
    if a.atom is None or b.atom is None or a.atom == b.atom:
        return None
    return pairs.get(frozenset((a.atom, b.atom)))


def _merge(
    label: str, factors: Sequence[PlanFactor], keep: Sequence[str], pairs: Pairs | None = None
) -> tuple[float, PlanFactor, str]:
    """The join of ``factors`` projected (⊕-aggregated) onto ``keep``: (join rows, factor,
    what the join rows rest on).  A projection's rows are an estimate at best: a bound by
    the kept variables' distinct counts (a guess when those rest on a guess)."""
    joined, dist, basis = _join_estimate(factors, pairs)
    cap = math.prod(dist[v] for v in keep) if keep else 1.0
    rows = min(joined, cap)
    out = basis
    if len(keep) < len(dist):  # a projection
        bounded = rows < joined and GUESS not in (f.basis for f in factors)
        out = ESTIMATE if bounded else _weakest(ESTIMATE, basis)
    dist_out = {v: min(dist[v], max(rows, 1.0)) for v in keep}
    return joined, PlanFactor(label, tuple(keep), rows, dist_out, basis=out), basis


def _ordered(vars_: set[str], reference: Sequence[str]) -> tuple[str, ...]:
    return tuple(v for v in reference if v in vars_)


def is_acyclic(edges: Sequence[Sequence[str]]) -> bool:
    """α-acyclicity by GYO reduction: True when the hypergraph has a join tree.

    >>> is_acyclic([("a", "b"), ("b", "c")]), is_acyclic([("a", "b"), ("b", "c"), ("a", "c")])
    (True, False)
    """
    es = [set(e) for e in edges if e]
    changed = True
    while changed and len(es) > 1:
        changed = False
        counts: dict[str, int] = {}
        for e in es:
            for v in e:
                counts[v] = counts.get(v, 0) + 1
        for e in es:  # drop variables that occur in one edge only
            lone = {v for v in e if counts[v] == 1}
            if lone:
                e -= lone
                changed = True
        for i, e in enumerate(es):  # drop an edge contained in another
            if any(j != i and e <= f for j, f in enumerate(es)):
                es.pop(i)
                changed = True
                break
        es = [e for e in es if e]
    return len(es) <= 1


# -- canonical states for exhaustive search --------------------------------------------
class _Model:
    """Cost of eliminating ``v`` after a set of variables, independent of their order."""

    def __init__(self, rule: Rule, atoms: Sequence[PlanFactor], pairs: Pairs | None) -> None:
        self.rule = rule
        self.atoms = atoms
        self.pairs = pairs
        self.var_order = rule.variables
        self._cache: dict[frozenset[str], list[PlanFactor]] = {}

    def state(self, done: frozenset[str]) -> list[PlanFactor]:
        """The factors present once ``done`` has been eliminated (in any order)."""
        hit = self._cache.get(done)
        if hit is not None:
            return hit
        parent = {v: v for v in done}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a in self.atoms:
            inside = [v for v in a.vars if v in done]
            for x, y in itertools.pairwise(inside):
                parent[find(x)] = find(y)
        groups: dict[str, list[PlanFactor]] = {}
        out: list[PlanFactor] = []
        for a in self.atoms:
            inside = [v for v in a.vars if v in done]
            if inside:
                groups.setdefault(find(inside[0]), []).append(a)
            else:
                out.append(a)
        for root, members in groups.items():
            keep = _ordered({v for m in members for v in m.vars} - done, self.var_order)
            out.append(_merge(f"φ[{root}]", members, keep, self.pairs)[1])
        self._cache[done] = out
        return out

    def step_cost(self, done: frozenset[str], v: str) -> tuple[float, float]:
        factors = self.state(done)
        bag = [f for f in factors if v in f.vars]
        joined, _, _ = _join_estimate(bag, self.pairs)
        return joined, sum(f.rows for f in bag)


def _add(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return (a[0] + b[0], a[1] + b[1])


Rank = dict[str, int]
"""Per-variable aggregates as the planner sees them: each bound variable's block, counted
from the innermost (0).  An order is valid when ranks never decrease along it."""


def _allowed(remaining: Sequence[str], rank: Rank | None) -> list[str]:
    """The variables that may be eliminated next: those of the innermost unfinished block."""
    if not rank:
        return list(remaining)
    low = min(rank[v] for v in remaining)
    return [v for v in remaining if rank[v] == low]


def optimal_order(
    rule: Rule, atoms: Sequence[PlanFactor], pairs: Pairs | None = None, rank: Rank | None = None
) -> tuple[str, ...]:
    """The order of least estimated cost, by dynamic programming over variable subsets.

    With ``rank``, only over valid prefixes: every block inside the last one touched is done.
    """
    model = _Model(rule, atoms, pairs)
    bound = rule.bound
    best: dict[frozenset[str], tuple[tuple[float, float], tuple[str, ...]]] = {
        frozenset(): ((0.0, 0.0), ())
    }
    for size in range(1, len(bound) + 1):
        for combo in itertools.combinations(bound, size):
            done = frozenset(combo)
            candidates = []
            for v in combo:
                prev = best.get(done - {v})
                if prev is None:
                    continue
                if rank and v not in _allowed([u for u in bound if u not in prev[1]], rank):
                    continue
                prev_cost, prev_order = prev
                cost = _add(prev_cost, model.step_cost(done - {v}, v))
                candidates.append((cost, (*prev_order, v)))
            if candidates:
                best[done] = min(candidates)
    return best[frozenset(bound)][1]


def greedy_order(
    rule: Rule, atoms: Sequence[PlanFactor], pairs: Pairs | None = None, rank: Rank | None = None
) -> tuple[str, ...]:
    """Eliminate, at each step, the variable whose step is cheapest (among those allowed)."""
    model = _Model(rule, atoms, pairs)
    done: frozenset[str] = frozenset()
    order: list[str] = []
    remaining = list(rule.bound)
    while remaining:
        v = min(_allowed(remaining, rank), key=lambda x: model.step_cost(done, x))
        order.append(v)
        remaining.remove(v)
        done = done | {v}
    return tuple(order)


def auto_order(
    rule: Rule, atoms: Sequence[PlanFactor], pairs: Pairs | None = None, rank: Rank | None = None
) -> tuple[str, ...]:
    """Exhaustive (optimal) up to ``EXHAUSTIVE_LIMIT`` bound variables, greedy beyond."""
    if len(rule.bound) <= EXHAUSTIVE_LIMIT:
        return optimal_order(rule, atoms, pairs, rank)
    return greedy_order(rule, atoms, pairs, rank)


def textual_order(
    rule: Rule, atoms: Sequence[PlanFactor], pairs: Pairs | None = None, rank: Rank | None = None
) -> tuple[str, ...]:
    """Eliminate in order of first appearance in the rule (left to right for a chain);
    with ``rank``, block by block from the innermost, in that order within a block."""
    if not rank:
        return rule.bound
    return tuple(sorted(rule.bound, key=lambda v: rank[v]))


Strategy = Callable[[Rule, Sequence[PlanFactor], "Pairs | None", "Rank | None"], tuple[str, ...]]

STRATEGIES: dict[str, Strategy] = {
    "auto": auto_order,
    "optimal": optimal_order,
    "greedy": greedy_order,
    "textual": textual_order,
}
"""Order strategies by name; ``solve(order=NAME)`` picks one."""


def get_strategy(name: str) -> Strategy:
    """The order strategy called ``name``; ValueError listing the valid names otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        valid = ", ".join(repr(n) for n in STRATEGIES)
        raise ValueError(f"unknown order strategy {name!r}; valid strategies: {valid}") from None


# -- plans -------------------------------------------------------------------------------
def atom_factors(rule: Rule, stats: Sequence[AtomStats]) -> tuple[PlanFactor, ...]:
    """Planner factors for the rule's atoms (repeated variables collapsed)."""
    out = []
    for i, (a, s) in enumerate(zip(rule.atoms, stats, strict=True)):
        dv = a.distinct_vars
        dist = {v: float(s.distinct.get(v, s.rows)) for v in dv}
        args = a.arguments if a.consts else ()
        basis = EXACT if s.exact else ESTIMATE
        out.append(PlanFactor(a.relation, dv, float(s.rows), dist, i, args, basis))
    return tuple(out)


def make_plan(
    rule: Rule,
    stats: Sequence[AtomStats],
    order: str | Sequence[str] = "auto",
    pairs: Pairs | None = None,
    blocks: Sequence[tuple[str, Sequence[str]]] = (),
) -> Plan:
    """Choose a variable order (a strategy name or an explicit list) and lay out the steps.

    Each step's bag is every factor mentioning the variable; factors whose
    variables all lie inside the bag are absorbed into it (multiplied in,
    which also filters, as InsideOut's indicator projections do).  ``pairs``
    holds exact join sizes of pairs of atoms (see :mod:`faq.kernel.stats`).

    ``blocks`` gives per-variable aggregates (general FAQ): ``(operator, variables)``
    pairs, outermost first, covering the bound variables (see :mod:`faq.plan.aggregates`).
    Every strategy then eliminates a whole block before any variable of a block
    outside it; a forced order that does not raises ValueError naming the violation.

    >>> from faq.rule import parse_rule
    >>> r = parse_rule("Q(x) :- A(x, y), B(y, z)")
    >>> stats = [AtomStats(4, {"x": 2, "y": 2}), AtomStats(4, {"y": 2, "z": 2})]
    >>> make_plan(r, stats, "greedy", blocks=[("max", ["y"]), ("sum", ["z"])]).order
    ('z', 'y')
    >>> make_plan(r, stats, ["y", "z"], blocks=[("max", ["y"]), ("sum", ["z"])])
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: order ['y', 'z'] eliminates 'y' (max) before 'z' (sum), which is nested ...
    """
    atoms = atom_factors(rule, stats)
    blocks = tuple((op, tuple(vs)) for op, vs in blocks)
    rank = block_rank(blocks)
    if isinstance(order, str):
        strategy = order
        chosen = get_strategy(order)(rule, atoms, pairs, rank)
    else:
        chosen = tuple(order)
        strategy = "forced"
        bound = set(rule.bound)
        bad = [v for v in chosen if v not in bound]
        if bad or len(set(chosen)) != len(chosen) or set(chosen) != bound:
            raise ValueError(
                f"order {list(chosen)!r} must list each bound variable exactly once; "
                f"bound variables of {rule}: {list(rule.bound)!r}"
                + (f" (not bound: {bad!r})" if bad else "")
            )
        check_precedence(chosen, blocks)
    return lay_out(rule, atoms, chosen, strategy, pairs, blocks)


def block_rank(blocks: Sequence[tuple[str, Sequence[str]]]) -> Rank:
    """Each variable's block counted from the innermost (0); ``blocks`` are outermost first.

    >>> block_rank([("max", ["y"]), ("sum", ["z", "w"])])
    {'y': 1, 'z': 0, 'w': 0}
    """
    n = len(blocks)
    return {v: n - 1 - i for i, (_, vs) in enumerate(blocks) for v in vs}


def check_precedence(order: Sequence[str], blocks: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Raise ValueError when ``order`` eliminates a variable before one nested inside it
    under a different operator (a block must be finished before an outer one starts)."""
    rank = block_rank(blocks)
    if not rank:
        return
    op = {v: o for o, vs in blocks for v in vs}
    for i, u in enumerate(order):
        for v in order[i + 1 :]:
            if rank[v] < rank[u]:
                inner = next(vs for o, vs in blocks if v in vs)
                outer = next(vs for o, vs in blocks if u in vs)
                raise ValueError(
                    f"order {list(order)!r} eliminates {u!r} ({op[u]}) before {v!r} "
                    f"({op[v]}), which is nested inside it: {op[u]} and {op[v]} do not "
                    f"commute, so the block {{{', '.join(inner)}}} ({op[v]}) must be "
                    f"eliminated before {{{', '.join(outer)}}} ({op[u]})"
                )


def lay_out(
    rule: Rule,
    atoms: Sequence[PlanFactor],
    order: Sequence[str],
    strategy: str,
    pairs: Pairs | None = None,
    blocks: Sequence[tuple[str, Sequence[str]]] = (),
) -> Plan:
    """The steps of eliminating ``order`` innermost first, then the product onto the head.

    With ``blocks`` (per-variable aggregates) each step records its operator, and a step
    folds only variables that share one.
    """
    blocks = tuple((o, tuple(vs)) for o, vs in blocks)
    ops = {v: o for o, vs in blocks for v in vs}
    current = list(atoms)
    steps: list[Step] = []
    total = 0.0
    for v in order:
        bag = [f for f in current if v in f.vars]
        bag_vars = {u for f in bag for u in f.vars}
        absorbed = [f for f in current if v not in f.vars and set(f.vars) <= bag_vars]
        keep = _ordered(bag_vars - {v}, rule.variables)
        op = ops.get(v)
        if steps and not absorbed and bag == [steps[-1].output] and steps[-1].op == op:
            # only aggregates the previous output further: fold into that step
            prev = steps[-1]
            _, out, _ = _merge(prev.output.label, prev.factors, keep, pairs)
            steps[-1] = replace(prev, vars=(*prev.vars, v), output=out)
            total += out.rows
        else:
            joined, out, basis = _merge(f"φ{len(steps) + 1}", [*bag, *absorbed], keep, pairs)
            cyclic = not is_acyclic([f.vars for f in (*bag, *absorbed)])
            steps.append(Step((v,), tuple(bag), tuple(absorbed), out, joined, cyclic, op, basis))
            total += joined
        used = {id(f) for f in (*bag, *absorbed)}
        current = [f for f in current if id(f) not in used] + [out]
    head = rule.head
    if len(current) != 1 or current[0].vars != head:
        joined, out, basis = _merge("Q", current, head, pairs)
        cyclic = not is_acyclic([f.vars for f in current])
        steps.append(Step((), tuple(current), (), out, joined, cyclic, join_basis=basis))
        total += joined
    return Plan(rule, tuple(order), tuple(steps), total, strategy, tuple(atoms), blocks)


# -- private variable names ---------------------------------------------------------------
def private_rule(rule: Rule) -> tuple[dict[str, str], Rule]:
    """The rule over private variable names ``v0, v1, ...`` (first appearance order) and
    the map user name -> private name.  Internal columns all start with ``__``, so
    generated names never collide with them or with each other."""
    to = {v: f"v{i}" for i, v in enumerate(rule.variables)}
    atoms = tuple(Atom(a.relation, tuple(to[v] for v in a.vars)) for a in rule.atoms)
    return to, Rule(rule.name, tuple(to[v] for v in rule.head), atoms)


def rename_plan(plan: Plan, to: Mapping[str, str], rule: Rule) -> Plan:
    """``plan`` over the private names ``to`` (factors keep their identities one to one,
    as the executor follows them by identity)."""
    done: dict[int, PlanFactor] = {}

    def f(x: PlanFactor) -> PlanFactor:
        if id(x) not in done:
            done[id(x)] = replace(
                x,
                vars=tuple(to[v] for v in x.vars),
                distinct={to.get(v, v): n for v, n in x.distinct.items()},
            )
        return done[id(x)]

    def names(vs: Sequence[str]) -> tuple[str, ...]:
        return tuple(to[v] for v in vs)

    atoms = tuple(f(a) for a in plan.atoms)
    steps = tuple(
        replace(
            s,
            vars=names(s.vars),
            inputs=tuple(f(x) for x in s.inputs),
            absorbed=tuple(f(x) for x in s.absorbed),
            output=f(s.output),
        )
        for s in plan.steps
    )
    blocks = tuple((op, names(vs)) for op, vs in plan.blocks)
    return replace(
        plan, rule=rule, order=names(plan.order), steps=steps, atoms=atoms, blocks=blocks
    )
