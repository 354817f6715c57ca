"""Per-variable aggregates (general FAQ): ``query(rule, S, aggregates={"y": "max"})``.

Oracle: ``faq.reference_solve(..., aggregates=...)``, which enumerates every
matching assignment and folds one variable at a time from the innermost.
Hypothesis draws random rules and random per-variable operators among those
each semiring allows, solved on the local kernel and as Spark joins with
every order strategy (and random valid forced orders); numpy checks marginal
MAP.  Planner tests (no Spark) check that no strategy ever picks an order
that moves a variable past one nested inside it under another operator.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import Factor, einsum, query, reference_solve, solve_delta
from faq.plan.logical import STRATEGIES, AtomStats, block_rank, make_plan
from faq.rule import parse_rule
from faq.testing import random_relations, random_rule
from incremental import IncrementalView
from semirings import Semiring
from semirings.aggregates import allowed
from tests.helpers import assert_same, factors_from

# semirings whose values are all non-negative here (real and integer drawn as |x|)
CASES = ["real", "counting", "integer", "max-product", "max-plus", "log", "min-plus", "boolean"]
EXAMPLES = {"driver": 30, "spark": 2}


def _relations(rule, S, seed):
    rels = random_relations(rule, S, seed, domain=3, density=0.6)
    if S.name in ("real", "integer"):  # max over × needs non-negative annotations
        rels = {n: {k: abs(v) for k, v in r.items()} for n, r in rels.items()}
    return rels


def _aggregates(rule, S, rng: random.Random) -> dict[str, str]:
    """A random subset of the bound variables, in random order, with random operators."""
    listed = [v for v in rule.bound if rng.random() < 0.6]
    rng.shuffle(listed)
    return {v: rng.choice(allowed(S)) for v in listed}


def _valid_order(q, rng: random.Random) -> list[str]:
    """A random order eliminating whole blocks from the innermost."""
    out: list[str] = []
    for _, vs in reversed(q.aggregates.blocks if q.aggregates else ((None, q.rule.bound),)):
        vs = list(vs)
        rng.shuffle(vs)
        out += vs
    return out


@pytest.mark.parametrize("backend", list(EXAMPLES))
@pytest.mark.parametrize("name", CASES)
def test_random_aggregates_match_reference(spark, name, backend):
    S = semirings.get(name)
    scale = settings().max_examples / 10

    @settings(max_examples=max(1, round(EXAMPLES[backend] * scale)))
    @given(
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.sampled_from(["auto", "greedy", "textual", "forced"]),
    )
    def check(rule_seed, data_seed, order):
        rng = random.Random(rule_seed ^ data_seed)
        rule = random_rule(rule_seed)
        rels = _relations(rule, S, data_seed)
        aggs = _aggregates(rule, S, rng)
        q = query(str(rule), semiring=S, aggregates=aggs)
        how = _valid_order(q, rng) if order == "forced" else order
        want = reference_solve(rule, S, rels, aggregates=aggs)
        run = q.run(order=how, backend=backend, **factors_from(rels, S))
        assert_same(run.result.to_dict(), want, S, f"{rule} aggregates={aggs} order={how}")
        if q.aggregates is not None:
            rank = block_rank(q.aggregates.blocks)
            ranks = [rank[v] for v in run.plan.order]
            assert ranks == sorted(ranks), (run.plan.order, q.aggregates.blocks)

    check()


# -- named cases ---------------------------------------------------------------------------
def _dense(a: np.ndarray, vars_) -> Factor:
    return Factor.from_numpy(a, vars=vars_, semiring="real")


@pytest.mark.parametrize("backend", ["driver", "spark"])
def test_marginal_map_matches_numpy(spark, backend):
    # Q(x) = max_y Σ_z A(x, y) B(y, z) C(z); numpy: (A * (B @ C)).max(axis=1)
    rng = np.random.default_rng(7)
    A = rng.integers(0, 4, (4, 5)).astype(float) / 4
    B = rng.integers(0, 4, (5, 6)).astype(float) / 4
    C = rng.integers(0, 4, 6).astype(float) / 4
    q = query("Q(x) :- A(x, y), B(y, z), C(z)", "real", aggregates={"y": "max"})
    rels = {"A": _dense(A, ("x", "y")), "B": _dense(B, ("y", "z")), "C": _dense(C, ("z",))}
    got = q.solve(backend=backend, **rels)
    want = (A * (B @ C)).max(axis=1)
    np.testing.assert_allclose(got.to_numpy(shape=(4,)), want)
    # the other nesting, Σ_z max_y, is a different number here
    q2 = query("Q(x) :- A(x, y), B(y, z), C(z)", "real", aggregates={"z": "sum", "y": "max"})
    got2 = q2.solve(backend=backend, **rels)
    want2 = (A[:, :, None] * B[None, :, :] * C[None, None, :]).max(axis=1).sum(axis=1)
    np.testing.assert_allclose(got2.to_numpy(shape=(4,)), want2)
    assert not np.allclose(want, want2)


def test_einsum_aggregates(spark):
    rng = np.random.default_rng(3)
    A = rng.integers(0, 4, (3, 4)).astype(float)
    B = rng.integers(0, 4, (4, 5)).astype(float)
    got = einsum("ij,jk->i", A, B, aggregates={"j": "max"}, backend="driver")
    np.testing.assert_allclose(got.to_numpy(shape=(3,)), (A * B.sum(axis=1)).max(axis=1))


def test_log_space_marginal_map(spark):
    # in the log semiring max is max-plus: max_y logsumexp_z equals log of max_y Σ_z
    rng = np.random.default_rng(5)
    P = rng.uniform(0.1, 1.0, (3, 4))
    R = rng.uniform(0.1, 1.0, (4, 5))
    lp = {(i, j): float(np.log(P[i, j])) for i in range(3) for j in range(4)}
    lr = {(j, k): float(np.log(R[j, k])) for j in range(4) for k in range(5)}
    q = query("Q(x) :- P(x, y), R(y, z)", "log", aggregates={"y": "max"})
    got = q.solve(backend="driver", **factors_from({"P": lp, "R": lr}, semirings.LOG))
    want = np.log((P * R.sum(axis=1)).max(axis=1))
    np.testing.assert_allclose([got.to_dict()[(i,)] for i in range(3)], want)


def test_counting_max_with_repeated_edges(spark):
    # an edge list without values: repeated rows count twice in counting, so the
    # largest number of 2-paths out of a successor of x is taken after that count.
    E = spark.createDataFrame([(0, 1), (1, 2), (1, 2), (1, 3), (0, 2), (2, 3)], ["a", "b"])
    rels = {"E": {(0, 1): 1, (1, 2): 2, (1, 3): 1, (0, 2): 1, (2, 3): 1}}
    rule = "Q(x) :- E(x, y), E(y, z)"
    want = reference_solve(rule, "counting", rels, aggregates={"y": "max"})
    assert want == {(0,): 3, (1,): 2}
    q = query(rule, "counting", aggregates={"y": "max"})
    for backend in ("driver", "spark"):
        assert q.solve(backend=backend, E=E).to_dict() == want


# -- refusals -------------------------------------------------------------------------------
RULE = "Q(x) :- A(x, y), B(y, z)"


@pytest.mark.parametrize(
    "semiring, aggs, match",
    [
        ("real", {"x": "max"}, "'x' is free"),
        ("real", {"w": "max"}, "'w' does not occur"),
        ("real", {"y": "median"}, "unknown aggregate 'median'"),
        ("real", {"y": "min"}, "min's identity is inf, not the semiring's zero 0"),
        ("counting", {"y": "logsumexp"}, "not allowed in the 'counting' semiring"),
        ("min-plus", {"y": "sum"}, "product aggregate"),
        ("min-plus", {"y": "max"}, "max's identity is -inf"),
        ("max-plus", {"y": "min"}, "min's identity is inf"),
        ("boolean", {"y": "sum"}, "not an operation on booleans"),
        ("real", ["y"], "must be a dict"),
    ],
)
def test_refused_aggregates(semiring, aggs, match):
    err = TypeError if isinstance(aggs, list) else ValueError
    with pytest.raises(err, match=match):
        query(RULE, semiring, aggregates=aggs)


def test_user_semiring_takes_only_its_own_add(spark):
    bottleneck = Semiring(name="bottleneck", zero=-np.inf, one=np.inf, add=max, mul=min)
    with pytest.raises(ValueError, match="user-defined semiring takes only its own"):
        query(RULE, bottleneck, aggregates={"y": "max"})
    assert query(RULE, bottleneck, aggregates={"y": "add"}).aggregates is None


@pytest.mark.parametrize("backend", ["driver", "spark"])
def test_negative_values_refused_under_max(spark, backend):
    A = {(0, 0): 1.0, (0, 1): -2.0}
    B = {(0, 0): 1.0, (1, 0): 3.0}
    rels = factors_from({"A": A, "B": B}, semirings.REAL)
    if backend == "spark":  # DataFrames kept in Spark: checked in the statistics job
        rels = {
            n: spark.createDataFrame([(*k, v) for k, v in r.items()], ["p", "q", "value"])
            for n, r in (("A", A), ("B", B))
        }
    q = query(RULE, "real", aggregates={"y": "max"})
    with pytest.raises(ValueError, match="relation 'A'.*non-negative.*-2.0"):
        q.solve(backend=backend, **rels)
    # sum alone is fine with negative values
    query(RULE, "real", aggregates={"y": "sum"}).solve(backend=backend, **rels)


def test_incremental_refused(spark):
    q = query(RULE, "real", aggregates={"y": "max"})
    rels = factors_from({"A": {(0, 0): 1.0}, "B": {(0, 0): 1.0}}, semirings.REAL)
    with pytest.raises(ValueError, match="IncrementalView.*not maintained incrementally"):
        IncrementalView(q, **rels)
    with pytest.raises(ValueError, match="solve_delta.*not maintained incrementally"):
        solve_delta(q, rels, {"A": rels["A"]})


def test_forced_order_violating_precedence(spark):
    q = query(RULE, "real", aggregates={"y": "max"})
    rels = factors_from({"A": {(0, 0): 1.0}, "B": {(0, 0): 1.0}}, semirings.REAL)
    with pytest.raises(ValueError, match=r"eliminates 'y' \(max\) before 'z' \(sum\)"):
        q.solve(order=["y", "z"], **rels)


def test_explain_names_operators_and_allowed_orders(spark):
    q = query("Q(x) :- A(x, y), B(y, z), C(z, w)", "real", aggregates={"y": "max"})
    rels = factors_from(
        {"A": {(0, 0): 1.0}, "B": {(0, 0): 1.0}, "C": {(0, 0): 2.0}}, semirings.REAL
    )
    text = q.explain(**rels)
    assert "aggregates (outermost first): max_{y} sum_{z, w}" in text
    assert "allowed orders: eliminate {z, w} (sum) before {y} (max); any order" in text
    assert "[⊕ = max]" in text and "[⊕ = sum]" in text


# -- the planner (no Spark) -------------------------------------------------------------------
def _stats(rule, rng):
    out = []
    for a in rule.atoms:
        rows = rng.randint(1, 1000)
        out.append(AtomStats(rows, {v: rng.randint(1, rows) for v in a.distinct_vars}))
    return out


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_no_strategy_breaks_precedence(strategy):
    for seed in range(150):
        rng = random.Random(seed)
        rule = random_rule(seed, n_vars=(3, 6))
        ops = ["sum", "max"]
        aggs = {v: rng.choice(ops) for v in rule.bound if rng.random() < 0.6}
        a = query(str(rule), "real", aggregates=aggs).aggregates
        if a is None:
            continue
        plan = make_plan(rule, _stats(rule, rng), strategy, blocks=a.blocks)
        rank = block_rank(a.blocks)
        ranks = [rank[v] for v in plan.order]
        assert ranks == sorted(ranks), (strategy, rule, a.blocks, plan.order)
        op = {v: o for o, vs in a.blocks for v in vs}
        for step in plan.steps:  # a step never folds variables of different operators
            assert len({op[v] for v in step.vars}) <= 1
            assert all(step.op == op[v] for v in step.vars)


def test_optimal_is_best_valid_order():
    # on a chain whose cheapest unrestricted order starts outside, the restricted
    # optimum is the cheapest of the valid orders (enumerated)
    rule = parse_rule("Q(a) :- A(a, b), B(b, c), C(c, d), D(d, e)")
    stats = [
        AtomStats(10, {"a": 10, "b": 1}),
        AtomStats(1000, {"b": 1, "c": 1000}),
        AtomStats(1000, {"c": 1000, "d": 1000}),
        AtomStats(10**6, {"d": 1000, "e": 1000}),
    ]
    blocks = [("max", ("b", "c")), ("sum", ("d", "e"))]
    free = make_plan(rule, stats, "optimal")
    plan = make_plan(rule, stats, "optimal", blocks=blocks)
    valid = [p for p in itertools.permutations(rule.bound) if set(p[:2]) == {"d", "e"}]
    costs = [make_plan(rule, stats, list(p), blocks=blocks).cost for p in valid]
    assert plan.order in valid
    assert plan.cost == pytest.approx(min(costs))
    assert free.order not in valid  # the restriction changed the choice


@pytest.mark.parametrize("backend", ["driver", "tasks", "spark"])
def test_duplicate_rows_summing_non_negative_accepted_under_max(spark, backend):
    # repeated keys are ⊕-combined first: (0, 1) is -1 + 3 = 2, a valid annotation, so
    # max over integer × accepts it on every backend (Spark once refused the row -1)
    rows = [(0, 0, 1), (0, 1, -1), (0, 1, 3), (1, 1, 2)]
    A = spark.createDataFrame(rows, ["p", "q", "value"])
    B = spark.createDataFrame([(0, 0, 1), (1, 0, 5)], ["p", "q", "value"])
    want = reference_solve(
        RULE,
        "integer",
        {"A": {(0, 0): 1, (0, 1): 2, (1, 1): 2}, "B": {(0, 0): 1, (1, 0): 5}},
        aggregates={"y": "max"},
    )
    assert want == {(0,): 10, (1,): 10}
    q = query(RULE, "integer", aggregates={"y": "max"})
    assert q.solve(backend=backend, A=A, B=B).to_dict() == want
    # a key whose rows sum to a negative value is still refused, naming that sum
    bad = spark.createDataFrame([*rows, (1, 0, 4), (1, 0, -7)], ["p", "q", "value"])
    with pytest.raises(ValueError, match="relation 'A'.*non-negative.*found -3"):
        q.solve(backend=backend, A=bad, B=B)
