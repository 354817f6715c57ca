"""InsideOut on Spark against the brute-force reference evaluator.

Oracle: ``faq.reference_solve`` (pure Python enumeration) for random
hypergraphs and data in every built-in semiring and a user-defined one;
numpy for matrix chains; published counts for triangles.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import semirings
from faq import Factor, einsum, query, reference_solve
from faq.io import read_edge_list
from faq.testing import random_relations
from semirings import Semiring
from tests.helpers import assert_same, factors_from

DATA = Path(__file__).parent / "data"
BOTTLENECK = Semiring(name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min)
ALL_SEMIRINGS = [*semirings.BUILTINS, BOTTLENECK]


def test_every_order_gives_the_same_answer(spark):
    S = semirings.COUNTING
    rule = "Q(a) :- R(a, b), S(b, c), T(c, d), R(d, b)"
    rels = random_relations(query(rule).rule, S, seed=7, domain=4, density=0.5)
    want = reference_solve(rule, S, rels)
    q = query(rule, semiring=S)
    factors = factors_from(rels, S)
    for order in itertools.permutations(q.rule.bound):
        assert_same(q.solve(order=list(order), **factors).to_dict(), want, S, f"order {order}")


# -- matrix chains ----------
def minplus(x, y):
    return np.min(x[:, :, None] + y[None, :, :], axis=1)


def maxprod(x, y):
    return np.max(x[:, :, None] * y[None, :, :], axis=1)


@pytest.fixture(scope="module")
def chain():
    rng = np.random.default_rng(3)
    shapes = [(7, 3), (3, 9), (9, 2), (2, 6)]
    mats = [rng.random(s) * (rng.random(s) < 0.7) for s in shapes]
    return mats


def test_real_chain_matches_numpy(spark, chain):
    A, B, C, D = chain
    q = query("Q(i, m) :- A(i, j), B(j, k), C(k, l), D(l, m)", semiring="real")
    fs = {
        n: Factor.from_numpy(m, vars=v)
        for n, m, v in zip(
            "ABCD", chain, [("i", "j"), ("j", "k"), ("k", "l"), ("l", "m")], strict=True
        )
    }
    out = q.solve(**fs)
    np.testing.assert_allclose(out.to_numpy(shape=(7, 6)), A @ B @ C @ D, rtol=1e-9)
    report = q.explain(**fs)
    assert "actual" in report and "variable order" in report


@pytest.mark.parametrize(
    ("semiring", "op", "zero"), [("max-product", maxprod, 0.0), ("min-plus", minplus, math.inf)]
)
def test_tropical_chains_match_numpy(spark, chain, semiring, op, zero):
    mats = [np.where(m == 0, zero, m) for m in chain]
    out = einsum("ij,jk,kl,lm->im", *mats, semiring=semiring)
    want = op(op(op(mats[0], mats[1]), mats[2]), mats[3])
    np.testing.assert_allclose(out.to_numpy(shape=want.shape), want, rtol=1e-9)


def test_einsum_numpy_operands_and_trace(spark):
    a = np.arange(9.0).reshape(3, 3)
    assert einsum("ii->", a).scalar() == pytest.approx(np.trace(a))
    assert einsum("ij->", a).scalar() == pytest.approx(a.sum())


# -- triangles ----------
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"


def test_karate_has_45_triangles(spark):
    # Zachary's karate club: 45 triangles (LAGraph's test data; networkx agrees)
    edges = read_edge_list(DATA / "karate.txt", spark)
    assert edges.count() == 78
    assert query(TRIANGLE, semiring="counting").solve(E=edges).scalar() == 45


def numpy_triangles(edges: np.ndarray, n: int) -> int:
    a = np.zeros((n, n), dtype=np.int64)
    a[edges[:, 0], edges[:, 1]] = 1
    return int(((a @ a) * a).sum())


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_graph_triangles(spark, seed):
    rng = np.random.default_rng(seed)
    n = 40
    pairs = rng.integers(0, n, size=(300, 2))
    pairs = np.unique(np.sort(pairs[pairs[:, 0] != pairs[:, 1]], axis=1), axis=0)
    df = spark.createDataFrame([tuple(map(int, p)) for p in pairs], "src long, dst long")
    got = query(TRIANGLE, semiring="counting").solve(E=df).scalar()
    assert got == numpy_triangles(pairs, n)


# -- factors ----------
def test_factor_round_trips(spark):
    m = np.array([[0.0, 2.5], [1.0, 0.0]])
    f = Factor.from_numpy(m, vars=("i", "j"))
    assert f.to_dict() == {(0, 1): 2.5, (1, 0): 1.0}
    np.testing.assert_array_equal(f.to_numpy(), m)
    assert f.df.columns == ["i", "j", "value"]
    s = Factor.from_numpy(np.array([[0, 3]]), vars=("i", "j"), semiring="counting")
    assert s.to_dict() == {(0, 1): 3}
    mp = Factor.from_numpy(np.array([math.inf, 2.0]), vars=("i",), semiring="min-plus")
    assert mp.to_dict() == {(1,): 2.0}
    np.testing.assert_array_equal(mp.to_numpy(shape=(3,)), [math.inf, 2.0, math.inf])


def test_results_carry_distinct_counts(spark):
    """Regression: a result's statistics claimed distinct == rows for every column."""
    A = Factor.from_numpy(np.ones((20, 3)), vars=("i", "j"))
    B = Factor.from_numpy(np.ones((3, 2)), vars=("j", "k"))
    for backend in ("driver", "spark"):
        out = query("Q(i, k) :- A(i, j), B(j, k)").solve(A=A, B=B, backend=backend)
        assert out.stats.rows == 40 and out.stats.distinct == (20, 2), backend


def test_duplicate_keys_are_added(spark):
    df = spark.createDataFrame([(1, 2, 3), (1, 2, 4), (2, 3, 1)], "a long, b long, value long")
    out = query("Q(a, b) :- R(a, b)", semiring="counting").solve(R=df)
    assert out.to_dict() == {(1, 2): 7, (2, 3): 1}
    mp = query("Q(a, b) :- R(a, b)", semiring="min-plus").solve(R=df)
    assert mp.to_dict() == {(1, 2): 3.0, (2, 3): 1.0}


def test_relation_without_value_column_is_one(spark):
    df = spark.createDataFrame([(1, 2), (2, 3), (1, 3)], "src long, dst long")
    out = query("Q(a) :- E(a, b)", semiring="counting").solve(E=df)
    assert out.to_dict() == {(1,): 2, (2,): 1}


def test_empty_relation_gives_zero(spark):
    df = spark.createDataFrame([], "a long, b long")
    out = query(TRIANGLE, semiring="counting").solve(E=df)
    assert out.scalar() == 0 and out.to_dict() == {}


def test_self_loop_atom_selects_the_diagonal(spark):
    df = spark.createDataFrame([(1, 1), (1, 2), (2, 3), (3, 3)], "a long, b long")
    out = query("Q(a) :- E(a, a), E(a, b)", semiring="counting").solve(E=df)
    assert out.to_dict() == {(1,): 2, (3,): 1}


# -- errors ----------
@pytest.fixture(scope="module")
def ab(spark):
    return spark.createDataFrame([(1, 2, 1.0)], "a long, b long, value double")


def test_missing_and_extra_relations(spark, ab):
    q = query("Q(a) :- A(a, b), B(b, c)")
    with pytest.raises(ValueError, match="missing relation\\(s\\) 'B'"):
        q.solve(A=ab)
    with pytest.raises(ValueError, match="unexpected relation\\(s\\) 'C'"):
        q.solve(A=ab, B=ab, C=ab)


def test_arity_mismatch_names_the_atom(spark, ab):
    with pytest.raises(ValueError, match="relation 'A': atom A\\(a, b, c\\) takes 3"):
        query("Q(a) :- A(a, b, c)").solve(A=ab)
    f = Factor(ab, vars=("x", "y"))
    with pytest.raises(ValueError, match="atom A\\(a\\) takes 1 variable"):
        query("Q(a) :- A(a)").solve(A=f)


def test_null_keys_are_rejected(spark):
    df = spark.createDataFrame([(1, None), (2, 3)], "a long, b long")
    with pytest.raises(ValueError, match="relation 'E': key column 'b' .* 1 null"):
        query("Q(a) :- E(a, b)", semiring="counting").solve(E=df)


@pytest.mark.parametrize(
    ("semiring", "rows", "schema", "message"),
    [
        ("counting", [(1, -2)], "a long, value long", "not values of the 'counting'"),
        ("real", [(1, float("nan"))], "a long, value double", "not values of the 'real'"),
        ("max-product", [(1, -0.5)], "a long, value double", "not values of the 'max-product'"),
        ("counting", [(1, 2.5)], "a long, value double", "has type double"),
        ("boolean", [(1, 1)], "a long, value long", "has type bigint"),
        ("real", [(1, None)], "a long, value double", r"1 null annotation\(s\).*'real'"),
    ],
)
def test_values_outside_the_semiring(spark, semiring, rows, schema, message):
    df = spark.createDataFrame(rows, schema)
    with pytest.raises(ValueError, match=message):
        query("Q(a) :- R(a)", semiring=semiring).solve(R=df)


def test_bad_factor_construction(spark, ab):
    with pytest.raises(ValueError, match="3 variables .* 2 key columns"):
        Factor(ab, vars=("a", "b", "c"))
    with pytest.raises(ValueError, match="not a value of the 'counting'"):
        Factor.from_numpy(np.array([[-1, 2]]), vars=("i", "j"), semiring="counting")
    with pytest.raises(ValueError, match="NaN"):
        Factor.from_numpy(np.array([np.nan]), vars=("i",))
    with pytest.raises(ValueError, match="2 dimensions"):
        Factor.from_numpy(np.eye(2), vars=("i",))
    with pytest.raises(ValueError, match="scalar\\(\\) needs a factor with none"):
        Factor.from_numpy(np.eye(2), vars=("i", "j")).scalar()


def test_factor_from_another_semiring(spark):
    m = np.array([[0.0, 0.5], [2.0, 0.0]])
    real = Factor.from_numpy(m, vars=("i", "j"), semiring="real")
    # same zero: accepted, values re-checked against max-product
    assert query("Q(i) :- A(i, j)", semiring="max-product").solve(A=real).to_dict() == {
        (0,): 0.5,
        (1,): 2.0,
    }
    with pytest.raises(ValueError, match="zero 0.0.*'min-plus' \\(zero inf\\)"):
        query("Q(i) :- A(i, j)", semiring="min-plus").solve(A=real)
    negative = Factor.from_numpy(-m, vars=("i", "j"), semiring="real")
    with pytest.raises(ValueError, match="not values of the 'max-product'"):
        query("Q(i) :- A(i, j)", semiring="max-product").solve(A=negative)


def test_unknown_semiring_and_join_method(spark, ab):
    with pytest.raises(ValueError, match="unknown semiring 'tropical'"):
        query("Q(a) :- A(a, b)", semiring="tropical")
    with pytest.raises(ValueError, match="unknown join method 'hash'"):
        query("Q(a) :- A(a, b)").solve(A=ab, join="hash")
    with pytest.raises(ValueError, match="unknown order strategy"):
        query("Q(a) :- A(a, b)").solve(A=ab, order="fastest")


def test_counting_overflow_raises_overflow_error(spark):
    big = 2**62
    df = spark.createDataFrame([(1, big), (2, 4)], "a long, value long")
    with pytest.raises(OverflowError, match="'counting' annotation overflowed"):
        query("Q() :- R(a), R(b)", semiring="counting").solve(R=df)


def test_plain_array_factor_in_any_semiring(spark):
    """Regression: a from_numpy factor made without a semiring was refused by a min-plus
    query (and its dropped zeros are entries, not absences, in min-plus)."""
    m = np.array([[0.0, 2.0], [1.0, 0.0]])
    A = Factor.from_numpy(m, vars=("i", "j"))
    assert A.to_dict() == {(0, 1): 2.0, (1, 0): 1.0}
    got = query("Q(i) :- A(i, j)", semiring="min-plus").solve(A=A).to_dict()
    assert got == {(0,): 0.0, (1,): 0.0}
    assert einsum("ij->i", A, semiring="max-plus").to_dict() == {(0,): 2.0, (1,): 1.0}
    with pytest.raises(ValueError, match="not a value of the 'counting'"):
        query("Q(i) :- A(i, j)", semiring="counting").solve(A=Factor.from_numpy(-m, ("i", "j")))


@pytest.mark.parametrize("backend", ["driver", "tasks", "spark"])
def test_duplicate_rows_of_a_dataframe_are_added_on_every_backend(spark, backend):
    """Repeated keys of a DataFrame are ⊕-combined wherever the query runs (the local
    kernel finds them while it builds its index)."""
    df = spark.createDataFrame(
        [(1, 2), (1, 2), (2, 3), (1, 3), (1, 3), (1, 3)], "src long, dst long"
    )
    tri = query(TRIANGLE, semiring="counting")
    assert tri.solve(E=df, backend=backend).scalar() == 2 * 1 * 3
    assert query("Q(a, b) :- E(a, b)", semiring="counting").solve(
        E=df, backend=backend
    ).to_dict() == {(1, 2): 2, (2, 3): 1, (1, 3): 3}


def test_explain_after_a_solve_is_never_stale(spark):
    """Regression: explain() after a solve returned that solve's report even when asked
    about another order, join method or backend."""
    edges = read_edge_list(DATA / "karate.txt", spark)
    q = query(TRIANGLE, semiring="counting")
    run = q.run(E=edges, join="wcoj", backend="driver")
    ran = "  actual   output"
    same = q.explain(run)
    assert ran in same and "worst-case optimal" in same and same == run.explain()
    assert ran not in q.explain(E=edges, join="wcoj", backend="driver")  # plans, never a cache
    other = q.explain(E=edges, join="binary", backend="spark")
    assert ran not in other and "binary (cyclic bag)" in other and "Spark DataFrame" in other
    forced = q.explain(E=edges, order=["c", "b", "a"], join="wcoj", backend="driver")
    assert ran not in forced and "variable order (eliminated first to last): c, b, a" in forced
    assert ran not in q.explain(E=read_edge_list(DATA / "karate.txt", spark))
    assert not hasattr(q, "last_plan") and not hasattr(q, "last_trace")  # no state kept


def test_explain_refuses_a_run_of_another_query_or_a_run_with_relations():
    """q2.explain(run) of q's run reported q's plan under q2; q.explain(run, E=...)
    dropped E without a word."""
    E = pd.DataFrame({"a": [1, 2, 3], "b": [2, 3, 1]})
    hop = query("Q(a, c) :- E(a, b), E(b, c)", semiring="counting")
    run = hop.run(E=E)
    assert query("Q(a, c) :- E(a, b), E(b, c)", semiring="counting").explain(run)
    with pytest.raises(ValueError, match=r"the run is of Q\(a, c\) :- .* not of this query"):
        query("Q(a) :- E(a, b)", semiring="counting").explain(run)
    with pytest.raises(ValueError, match="over 'counting', not of this query.*over 'integer'"):
        query("Q(a, c) :- E(a, b), E(b, c)", semiring="integer").explain(run)
    with pytest.raises(ValueError, match="relation\\(s\\) 'E' given as well would not be read"):
        hop.explain(run, E=E)
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    prun = sp.run(S=pd.DataFrame({"x": [1], "value": [0.0]}), E=E.assign(value=1.0))
    assert query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus").explain(prun)
    with pytest.raises(ValueError, match="the run is of program .* not of this one"):
        query("D(x) :- S(x)\nD(y) :- D(x), E(y, x)", semiring="min-plus").explain(prun)


def test_pairwise_join_sizes_are_exact_locally_and_none_are_counted_on_spark(spark):
    """The physical choices read exact pairwise join sizes (Σ deg·deg) of local relations,
    from numpy: on a skewed graph a uniform estimate from distinct counts is off by orders
    of magnitude.  Relations kept in Spark get none (their steps are partitioned, which
    needs none): no Spark job counts them."""
    from faq.io import edges_dataframe
    from faq.testing import pairwise_join_sizes, power_law_graph

    e = power_law_graph(2_000, 12_000, seed=4)
    want = pairwise_join_sizes(e)
    cheapest = min(want.values())
    df = edges_dataframe(e, spark)
    q = query(TRIANGLE, semiring="counting")
    (step,) = q.run(E=df, backend="driver", join="wcoj").trace.steps
    assert step.choice.pair_rows == cheapest, (step.choice.pair_rows, want)
    (step,) = q.run(E=df, backend="spark").trace.steps
    assert step.choice.pair_rows is None and step.choice.shares is not None
    plan = q.plan(E=df)
    assert plan.steps[0].est_join < cheapest / 10  # what distinct counts alone would say


def test_show_progress_prints_one_line_per_step(spark, capsys):
    from faq.session import show_progress

    A = Factor.from_numpy(np.ones((3, 2)), vars=("i", "j"))
    B = Factor.from_numpy(np.ones((2, 4)), vars=("j", "k"))
    show_progress()
    try:
        query("Q(i, k) :- A(i, j), B(j, k)").solve(A=A, B=B)
    finally:
        show_progress(False)
    err = capsys.readouterr().err
    assert "step 1/1: eliminate j: driver/blas -> 12 rows" in err  # dense: BLAS
    query("Q(i, k) :- A(i, j), B(j, k)").solve(A=A, B=B)
    assert "step 1/1" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "backend, where", [("auto", "into the driver"), ("spark", "checked, kept in Spark")]
)
def test_show_progress_prints_a_line_per_load(spark, capsys, backend, where):
    from faq.session import show_progress

    E = spark.createDataFrame([(0, 1), (1, 2), (0, 2), (2, 3), (2, 3)], ["src", "dst"])
    show_progress()
    try:
        query(TRIANGLE, semiring="counting").solve(backend=backend, E=E)
    finally:
        show_progress(False)
    err = capsys.readouterr().err
    assert re.search(rf"load E\(src, dst\): 5 rows {where} in \d+\.\d\d s", err), err
    # loaded once per relation, before the steps
    assert err.count("load E") == 1 and err.index("load E") < err.index("step 1/")


@pytest.mark.parametrize("backend", ["driver", "spark"])
def test_scalar_results_to_numpy(spark, backend):
    E = spark.createDataFrame([(0, 1), (1, 2), (0, 2), (2, 3)], ["a", "b"])
    tri = query(TRIANGLE, semiring="counting").solve(backend=backend, E=E)
    got = tri.to_numpy()
    assert got.shape == () and got.dtype == np.int64 and got.item() == 1
    # no row at all: the semiring's zero, still a 0-d array
    none = query(TRIANGLE, semiring="counting").solve(backend=backend, E=E.limit(2))
    assert none.to_numpy().shape == () and none.to_numpy().item() == 0
    with pytest.raises(ValueError, match="shape \\(3,\\) has 1 axes, expected 0"):
        tri.to_numpy(shape=(3,))
    assert Factor.from_dict({(): 2.5}, vars=()).to_numpy().item() == 2.5


@pytest.mark.parametrize("backend", ["driver", "spark"])
def test_to_pandas_rows_sorted_by_key(spark, backend):
    rng = np.random.default_rng(3)
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, 30, size=(200, 2)) if a != b}
    E = spark.createDataFrame(sorted(pairs, key=lambda p: (-p[1], p[0])), ["a", "b"])
    out = query("Q(b, a) :- E(a, x), E(x, b)", semiring="counting").solve(backend=backend, E=E)
    pdf = out.to_pandas()
    assert list(pdf.columns) == ["b", "a", "value"]
    keys = list(zip(pdf["b"].tolist(), pdf["a"].tolist(), strict=True))
    assert len(keys) > 50 and keys == sorted(keys)
    assert dict(zip(keys, pdf["value"].tolist(), strict=True)) == out.to_dict()
    words = Factor.from_dict({("b", 1): 1.0, ("a", 2): 2.0, ("a", 1): 3.0}, vars=("w", "n"))
    assert words.to_pandas()["w"].tolist() == ["a", "a", "b"]
    assert words.to_pandas()["n"].tolist() == [1, 2, 1]


@pytest.mark.parametrize(
    "scalar", [2.0, 2, np.float64(2.0), np.int64(2), np.float32(2.0), np.array(2.0)]
)
def test_einsum_scalar_operands_as_in_numpy(scalar):
    # Regression (issue 23, point 5): a Python or numpy scalar was a TypeError.
    x = np.array([1.0, 0.0, 3.0])
    out = einsum("a,->a", x, scalar)
    assert out.to_numpy(shape=(3,)).tolist() == np.einsum("a,->a", x, scalar).tolist()
    assert einsum(",->", scalar, 3.0).scalar() == np.einsum(",->", scalar, 3.0)
    tropical = einsum("a,->a", np.array([1.0, 5.0]), scalar, semiring="min-plus")
    assert tropical.to_dict() == {(0,): 3.0, (1,): 7.0}
    assert einsum("a,->", np.array([True, False]), True, semiring="boolean").scalar() is True


@pytest.mark.parametrize(
    "spec, shapes, message",
    [
        ("ij,jk->ik", [(2, 3), (4, 2)], r"'j' has size 4 in operand 1 but 3 in operand 0"),
        ("ij,jk->ik", [(2, 1), (3, 2)], r"'j' has size 3 in operand 1 but 1 in operand 0"),
        ("ii->i", [(2, 3)], r"'i' has size 3 in operand 0 but 2 in the same operand"),
    ],
)
def test_einsum_refuses_dense_arrays_whose_sizes_disagree(spec, shapes, message):
    # Regression: numpy refuses these (or broadcasts the axis of size 1) but the engine
    # joined on the keys both arrays held and answered something else (3.0 for the first)
    arrays = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError, match=message):
        einsum(spec, *arrays)
    # Factors are relations: their keys are joined, whatever ranges they cover
    factors = [Factor.from_numpy(a, vars=[f"k{d}" for d in range(a.ndim)]) for a in arrays]
    if spec == "ij,jk->ik" and shapes[0] == (2, 3):
        assert einsum(spec, *factors).to_numpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_einsum_refuses_operands_that_are_not_numbers():
    with pytest.raises(TypeError, match=r"einsum operand 1: expected a numpy array.*got str"):
        einsum("a,->a", np.array([1.0]), "2.0")
