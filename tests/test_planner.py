"""Rule parsing and planning: pure Python, no Spark session needed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from faq.plan.logical import STRATEGIES, AtomStats, get_strategy, is_acyclic, make_plan
from faq.plan.report import render
from faq.rule import parse_einsum, parse_rule


# -- parsing ---------------------------------------------------------------------------------
def test_parse_chain():
    r = parse_rule("Q(i, l) :- A(i, j), B(j, k), C(k, l)")
    assert r.head == ("i", "l") and r.bound == ("j", "k")
    assert r.relations == {"A": 2, "B": 2, "C": 2}


def test_parse_empty_head_and_repeated_relation():
    r = parse_rule("Q() :- E(a, b), E(b, c), E(a, c)")
    assert r.head == () and r.relations == {"E": 2} and len(r.atoms) == 3


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("Q(i) - A(i)", "expected 'Head"),
        ("Q(i) :- A(i), B(i", "unbalanced"),
        ("Q(i) :- A(i),, B(i)", "malformed atom '\\(empty\\)'"),
        ("Q(i) :- A(i j)", "'i j' is not a variable name"),
        ("Q(x) :- A(i, j)", "variable 'x' does not appear in the body"),
        ("Q(i, i) :- A(i, j)", "repeats a variable"),
        ("Q(i) :- A(i, j), A(j)", "atom A\\(j\\).*arity 2 in A\\(i, j\\) but 1 here"),
        ("Q(i) :- ", "the body has no atoms"),
        ("Q(value) :- A(value)", "reserved"),
        ("Q(i) :- Q(i)", "recursive"),
        ("Q(i) :- A((i))", "nested"),
    ],
)
def test_malformed_rules(rule, message):
    with pytest.raises(ValueError, match=message):
        parse_rule(rule)


def test_einsum_spec():
    assert str(parse_einsum("ij,jk,kl->il", ["A", "B", "C"])) == (
        "Q(i, l) :- A(i, j), B(j, k), C(k, l)"
    )
    assert parse_einsum("ij,jk", ["A", "B"]).head == ("i", "k")  # implicit output
    assert parse_einsum("ii->", ["A"]).head == ()  # trace
    # Regression: "->" named no operand, so numpy's einsum("->", x) of a 0-d x was refused
    assert str(parse_einsum("->", ["A"])) == "Q() :- A()"
    with pytest.raises(ValueError, match="names 1 operands but 0"):
        parse_einsum("->", [])
    with pytest.raises(ValueError, match="names 2 operands but 3"):
        parse_einsum("ij,jk->ik", ["A", "B", "C"])
    with pytest.raises(ValueError, match="output subscript 'z'"):
        parse_einsum("ij,jk->iz", ["A", "B"])
    with pytest.raises(ValueError, match="ellipsis"):
        parse_einsum("...ij,jk->ik", ["A", "B"])


# -- cost model and order ----------------------------------------------------------------------
def dense_chain_stats(shapes):
    names = "ijklmnopqrs"
    atoms = ", ".join(f"A{n}({names[n]}, {names[n + 1]})" for n in range(len(shapes)))
    rule = parse_rule(f"Q({names[0]}, {names[len(shapes)]}) :- {atoms}")
    stats = [AtomStats(p * q, {names[n]: p, names[n + 1]: q}) for n, (p, q) in enumerate(shapes)]
    return rule, stats


def multi_dot_cost(dims):
    """numpy.linalg.multi_dot's dynamic program: the least number of scalar multiplications."""
    n = len(dims) - 1
    m = np.zeros((n, n))
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i, j] = min(
                m[i, k] + m[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1] for k in range(i, j)
            )
    return m[0, n - 1]


CHAINS = {
    "skewed-4": [(1000, 10), (10, 1000), (1000, 10), (10, 1000)],
    "classic-clrs": [(30, 35), (35, 15), (15, 5), (5, 10), (10, 20), (20, 25)],
    "wide-then-narrow": [(10, 100), (100, 5), (5, 50)],
    "vector-end": [(500, 400), (400, 300), (300, 1)],
    "eight": [(5, 40), (40, 3), (3, 60), (60, 8), (8, 70), (70, 2), (2, 90), (90, 4)],
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_chain_order_matches_multi_dot(name):
    shapes = CHAINS[name]
    rule, stats = dense_chain_stats(shapes)
    plan = make_plan(rule, stats)
    dims = [shapes[0][0]] + [q for _, q in shapes]
    assert plan.cost == pytest.approx(multi_dot_cost(dims))
    # the textual (left-to-right) order is never cheaper
    assert make_plan(rule, stats, "textual").cost >= plan.cost


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_gives_a_valid_order(strategy):
    rule, stats = dense_chain_stats(CHAINS["classic-clrs"])
    plan = make_plan(rule, stats, strategy)
    assert sorted(plan.order) == sorted(rule.bound)
    assert plan.steps[-1].output.vars == rule.head


def test_exhaustive_never_worse_than_greedy():
    for shapes in CHAINS.values():
        rule, stats = dense_chain_stats(shapes)
        assert make_plan(rule, stats, "optimal").cost <= make_plan(rule, stats, "greedy").cost


def test_optimal_agrees_with_brute_force_over_orders():
    rule, stats = dense_chain_stats(CHAINS["classic-clrs"])
    best = min(make_plan(rule, stats, list(p)).cost for p in itertools.permutations(rule.bound))
    assert make_plan(rule, stats, "optimal").cost == pytest.approx(best)


def test_unknown_strategy_lists_names():
    with pytest.raises(ValueError, match="unknown order strategy 'best'.*'greedy'"):
        get_strategy("best")


def test_forced_order_must_be_a_permutation_of_bound_vars():
    rule, stats = dense_chain_stats(CHAINS["wide-then-narrow"])
    with pytest.raises(ValueError, match="not bound: \\['i'\\]"):
        make_plan(rule, stats, ["i", "j"])
    with pytest.raises(ValueError, match="exactly once"):
        make_plan(rule, stats, ["j"])


def test_triangle_step_absorbs_third_atom_and_is_cyclic():
    rule = parse_rule("Q() :- E(a, b), E(b, c), E(a, c)")
    st = AtomStats(100, {"a": 50, "b": 50, "c": 50})
    plan = make_plan(rule, [st, st, st])
    first = plan.steps[0]
    assert len(first.inputs) == 2 and len(first.absorbed) == 1 and first.cyclic
    assert all(not s.cyclic for s in plan.steps[1:])
    assert "absorb" in render(plan, semiring="counting")


def test_acyclicity():
    assert is_acyclic([("a", "b"), ("b", "c"), ("c", "d")])
    assert is_acyclic([("a", "b", "c"), ("a", "b"), ("b", "c"), ("a", "c")])
    assert not is_acyclic([("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")])
    assert not is_acyclic([("a", "b"), ("b", "c"), ("a", "c")])


def test_ten_matrix_chain_is_optimal():
    """Regression: "auto" used to go greedy beyond 8 bound variables, 95x off here."""
    dims = [583, 839, 166, 451, 10, 124, 631, 2, 328, 8, 290]
    rule, stats = dense_chain_stats(list(itertools.pairwise(dims)))
    assert make_plan(rule, stats).cost == pytest.approx(multi_dot_cost(dims))
    assert make_plan(rule, stats, "greedy").cost > 10 * multi_dot_cost(dims)


# -- physical choices and what explain() says of them -------------------------------------------
def test_a_partitioned_steps_cells_are_capped_and_explain_names_the_limit():
    """Issue 37: ``choose`` caps a partitioned step's cells at ``max_cell_waves`` × the
    task slots whatever ``cell_rows`` says, and the report names the limit, the cells
    wanted and the cells given.  No Spark: statistics as a check job reports them."""
    from faq.plan.physical import InputInfo, choose
    from faq.plan.settings import Settings
    from faq.testing import NAMED_RULES

    rule = parse_rule(NAMED_RULES["4-clique"])
    hubs = ((0, 21), (1, 20), (2, 3), (3, 2))  # two hubs as the first vertex of an edge
    stats = [AtomStats(42, {a.vars[0]: 21, a.vars[1]: 21}) for a in rule.atoms]
    plan = make_plan(rule, stats)
    (step,) = plan.steps
    inputs = [InputInfo(f.vars, f.rows, False, f.distinct, {f.vars[0]: hubs}) for f in step.factors]
    tight = Settings(local_rows=0, cell_rows=5, cell_min_rows=0)
    c = choose(step, inputs, parallelism=3, settings=tight)
    assert c.backend == "spark" and c.shares is not None and c.tasks == c.shares.total
    assert c.shares.total <= 12 and c.shares.cap is not None
    assert c.shares.cap.wanted > 1000, c.shares.cap  # what cell_rows=5 alone asks for
    text = render(plan, [c], "counting")
    assert "capped at 12 cells by max_cell_waves=4 × 3 task slots" in text, text
    assert f"{c.shares.total} given where cell_rows wanted {c.shares.cap.wanted:,}" in text
    wide = choose(
        step, inputs, parallelism=3, settings=Settings(**{**vars(tight), "max_cell_waves": 8})
    )
    assert c.shares.total < wide.shares.total <= 24
    roomy = choose(step, inputs, parallelism=3, settings=Settings(local_rows=0, cell_min_rows=0))
    assert roomy.shares.cap is None and "capped" not in render(plan, [roomy])


def test_explain_marks_what_each_size_rests_on():
    """Issue 37: explain() printed "estimate join 281 rows" for a join that gave 1.18M
    triangles, unmarked.  Sizes are now marked: a count as it is, an estimate from
    statistics with "~" and "(estimate)", a join size no statistic backs (the containment
    formula over distinct counts) with "(guess: no join statistics)"."""
    tri = parse_rule("Q() :- E(a, b), E(b, c), E(a, c)")
    counted = AtomStats(100, {"a": 50, "b": 50})
    plan = make_plan(tri, [counted] * 3)
    text = render(plan, semiring="counting")
    assert "  E(a, b): 100 rows; distinct a=50, b=50\n" in text  # counted: unmarked
    (step,) = plan.steps
    assert step.join_basis == "guess" and step.output.basis == "estimate"
    guessed = f"estimate join ~{round(step.est_join):,} rows (guess: no join statistics)"
    assert guessed in text and "-> output ~1 rows (estimate)" in text, text
    # kept in Spark: approximate distinct counts, and the same guess
    spark = make_plan(tri, [AtomStats(100, {"a": 50, "b": 50}, exact=False)] * 3)
    text = render(spark, semiring="counting")
    assert "E(a, b): 100 rows; distinct a=50, b=50   (estimates: rows before repeated keys" in text
    assert "(guess: no join statistics)" in text
    # a join of two atoms whose size was counted (pairs): exact; its projection an estimate
    chain = parse_rule("Q(i, k) :- A(i, j), B(j, k)")
    stats = [AtomStats(6, {"i": 3, "j": 2}), AtomStats(8, {"j": 2, "k": 4})]
    text = render(make_plan(chain, stats, pairs={frozenset((0, 1)): 12.0}))
    assert "  estimate join 12 rows -> output ~12 rows (estimate)" in text, text
    # the same without the count: the distinct counts bound it (an estimate, not a guess)
    text = render(make_plan(chain, stats))
    assert "  estimate join ~24 rows (estimate) -> output ~12 rows (estimate)" in text, text
    # an aggregation of one counted input is a count; of a guess, a guess
    star = make_plan(parse_rule("Q(i) :- A(i, j)"), [stats[0]])
    assert star.steps[0].join_basis == "exact" and "estimate join 6 rows" in render(star)
