"""The planner names each step's runner; the executor and every cell run that one.

Oracle: the same query with ``library_runners=False`` (every step by the Generic Join
kernel), itself checked against :func:`faq.reference_solve` by the conformance tests,
and numpy for the dense chain.  The choice is made from statistics alone
(:func:`faq.plan.physical.choose_runner`), shown by ``explain()`` with its reason, and
what a runner declines at run time (a 64-bit sum no bound proves safe) is run by the
Generic Join kernel and reported on the step's ``ran`` line.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import Factor, query
from faq.plan import runners
from faq.plan.logical import PlanFactor, Step
from faq.plan.physical import InputInfo, choose
from semirings.local import local_ops
from tests.helpers import assert_same

CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"
HOP = "Q(a, c) :- E(a, b), E(b, c)"
EDGE_TRIANGLES = "Q(a, c) :- E(a, b), E(b, c), E(a, c)"


def runs(run) -> list[str]:
    return [t.choice.runs for t in run.trace.steps]


def edges(n: int, m: int, seed: int, semiring: str) -> Factor:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a < b
    df = pd.DataFrame({"a": a[keep], "b": b[keep]}).drop_duplicates()
    S = semirings.get(semiring)
    kind = np.dtype(local_ops(S).dtype).kind
    if kind in "iu":
        df["value"] = rng.integers(1, 4, len(df))
    elif kind == "b":
        df["value"] = True
    else:
        df["value"] = rng.choice([0.5, 1.0, 2.0, 3.0], len(df))
    return Factor.from_pandas(df, vars=("a", "b"), semiring=S)


def test_a_dense_chain_runs_on_blas_and_equals_numpy():
    rng = np.random.default_rng(0)
    A, B, C = rng.random((40, 150)), rng.random((150, 40)), rng.random((40, 150))
    q = query(CHAIN, semiring="real")
    fs = {
        n: Factor.from_numpy(m, vars=v)
        for n, m, v in zip("ABC", (A, B, C), (("i", "j"), ("j", "k"), ("k", "l")), strict=True)
    }
    run = q.run(**fs)
    assert runs(run) == ["driver/blas", "driver/blas"]
    assert np.allclose(run.result.to_numpy(), A @ B @ C)
    report = q.explain(run)
    assert "runner   driver/blas   [estimated" in report and "< generic-join" in report
    with faq.settings(library_runners=False):
        off = q.run(**fs)
    assert runs(off) == ["driver/generic-join", "driver/generic-join"]
    assert "runner   driver/generic-join   [library_runners=False]" in q.explain(off)
    assert np.allclose(off.result.to_numpy(), A @ B @ C)


def test_a_sparse_min_plus_two_hop_runs_on_graphblas():
    E = edges(400, 40000, 1, "min-plus")  # many paths per pair: GraphBLAS folds them
    q = query(HOP, semiring="min-plus")
    run = q.run(E=E)
    assert runs(run) == ["driver/graphblas-mxm"]
    with faq.settings(library_runners=False):
        want = q.solve(E=E)
    assert_same(run.result.to_dict(), want.to_dict(), semirings.MIN_PLUS)


def test_the_planner_and_the_bounds_call_no_float_blas(monkeypatch):
    """A float ``np.dot`` runs OpenBLAS, whose threads then spin for about a tenth of a
    second, taking the cores from the GraphBLAS product that runs next (about twice as
    slow on two cores): the planner's join sizes and the runners' overflow bounds sum
    their products without it, and still pick the library runners."""
    dot = np.dot

    def no_float_dot(a, b, *args, **kwargs):
        assert np.result_type(a, b).kind not in "fc", "a float np.dot (BLAS)"
        return dot(a, b, *args, **kwargs)

    monkeypatch.setattr(np, "dot", no_float_dot)
    run = query(HOP, semiring="min-plus").run(E=edges(400, 40000, 1, "min-plus"))
    assert runs(run) == ["driver/graphblas-mxm"]
    E = edges(400, 40000, 3, "integer")  # weights 1-3: the bound reads their magnitudes
    run = query(HOP, semiring="integer").run(E=E)
    assert runs(run) == ["driver/graphblas-mxm"] and run.trace.steps[0].ran == ""
    with faq.settings(library_runners=False):
        want = query(HOP, semiring="integer").solve(E=E)
    assert run.result.to_dict() == want.to_dict()


def test_a_join_size_is_exact_while_it_fits_64_bits():
    """``Σ deg_a · deg_b`` in integers while no product or sum can leave 64 bits (a
    float sum would round past 2**53), else rounded from floats."""
    from faq.kernel.stats import products_sum

    a = np.array([2**26 + 1, 3, 2**25], dtype=np.int64)
    b = np.array([2**27 + 3, 5, 7], dtype=np.int64)
    assert products_sum(a, b) == sum(int(x) * int(y) for x, y in zip(a, b, strict=True))
    big = np.array([2**40, 2**40], dtype=np.int64)
    assert products_sum(big, big) == 2**81
    assert products_sum(np.empty(0, np.int64), np.empty(0, np.int64)) == 0


def test_the_planner_reads_the_bag_and_names_the_runner():
    """choose() alone (no data, no Spark): a triangle-shaped bag keeping an edge, with
    many more wedges than edges, goes to the masked product, its readings in the choice;
    ``log`` declares no library: the Generic Join kernel; tasks and binary joins keep
    their own."""
    tri = [
        InputInfo(vs, 1e6, True, {v: 2e5 for v in vs})
        for vs in (("a", "b"), ("b", "c"), ("a", "c"))
    ]
    factors = tuple(
        PlanFactor(f"E{n}", vs, 1e6, {v: 2e5 for v in vs}, atom=n)
        for n, vs in enumerate(i.vars for i in tri)
    )
    out = PlanFactor("φ1", ("a", "c"), 1e6, {"a": 2e5, "c": 2e5})
    step = Step(("b",), factors[:2], factors[2:], out, 4e9, True)
    c = choose(step, tri, pair_rows=4e9, semiring=semirings.COUNTING)
    assert c.runner == runners.GRAPHBLAS_MASKED and c.runs == "driver/graphblas-masked"
    assert [s.m for s in c.shape] == ["b"] and "< generic-join" in c.runner_why
    c = choose(step, tri, pair_rows=4e9, semiring=semirings.LOG)
    assert c.runner == runners.GENERIC_JOIN and c.runs == "driver/generic-join"
    c = choose(step, tri, pair_rows=4e9, semiring=semirings.COUNTING, backend="tasks")
    assert c.runs == "tasks/generic-join"  # the kernel in tasks slices the Generic Join
    c = choose(step, tri, pair_rows=4e9, semiring=semirings.COUNTING, join="binary")
    assert c.runs == "driver/binary-join"


def test_a_sum_no_bound_proves_safe_runs_on_the_generic_join_and_says_so():
    """2**62 - 2**62 over `integer`: a library would wrap past 64 bits on the way, so the
    runner declines; the Generic Join kernel gets the exact 0 (no row), and the run's
    report names the runner that ran and why."""
    big = 2**62
    rows = [(i, j, v) for i in range(30) for j, v in ((0, big), (1, -big))]
    rows += [(i, 2 + j, 1) for i in range(30) for j in range(60)]
    A = pd.DataFrame(rows, columns=["i", "j", "value"])
    B = pd.DataFrame(
        [(j, k, 1) for j in range(62) for k in range(30)], columns=list("jk") + ["value"]
    )
    q = query("Q(i, k) :- A(i, j), B(j, k)", semiring="integer")
    run = q.run(A=A, B=B)
    (chosen,) = runs(run)
    assert chosen in ("driver/blas", "driver/graphblas-mxm"), q.explain(run)
    t = run.trace.steps[0]
    assert t.ran == "generic-join" and f"{chosen.split('/')[1]} declined" in t.ran_why
    assert "overflow" in t.ran_why and "  ran      generic-join" in q.explain(run)
    assert run.result.to_dict() == {(i, k): 60 for i in range(30) for k in range(30)}


BUILTINS = [S for S in semirings.BUILTINS if S.library is not None]


@pytest.mark.parametrize("S", BUILTINS, ids=lambda S: S.name)
@settings(max_examples=4, deadline=None)
@given(
    n=st.integers(3, 40),
    m=st.integers(0, 300),
    seed=st.integers(0, 10**6),
    rule=st.sampled_from([HOP, EDGE_TRIANGLES, "Q() :- E(a, b), E(b, c), E(a, c)", CHAIN]),
)
def test_the_runner_chosen_gives_the_generic_joins_answer(S, n, m, seed, rule):
    E = edges(n, m, seed, S.name)
    rels = {"E": E} if "E(" in rule else {"A": E, "B": E.renamed(("b", "c")), "C": E}
    q = query(rule, semiring=S)
    run = q.run(**rels)
    with faq.settings(library_runners=False):
        want = q.solve(**rels)
    assert_same(run.result.to_dict(), want.to_dict(), S, f"{rule} by {runs(run)}")


def test_partitioned_cells_run_the_runner_the_planner_named(spark):
    """Past the driver every cell runs the step's runner (one thread each): a min-plus
    2-hop over a sparse graph in Spark, in several cells, by GraphBLAS in each."""
    E = edges(400, 40000, 2, "min-plus")
    df = spark.createDataFrame(E.to_pandas().rename(columns={"a": "src", "b": "dst"}))
    q = query(HOP, semiring="min-plus")
    with faq.settings(local_rows=0, cell_min_rows=0, cell_rows=4000, query_task_rows=0):
        run = q.run(E=df)
    (c,) = [t.choice for t in run.trace.steps if t.choice.shares is not None]
    assert c.shares.total > 1 and c.runs == "cells/graphblas-mxm", q.explain(run)
    with faq.settings(library_runners=False):
        want = q.solve(E=E)
    assert_same(run.result.to_dict(), want.to_dict(), semirings.MIN_PLUS)


def test_each_backend_is_looked_up_and_an_unknown_one_is_refused_by_name():
    """``backend=`` is read through ``backend_policy``: what each asks of the engine, and
    a clear error naming the bad value and the valid ones, from ``solve`` too."""
    from faq.plan.physical import BACKENDS, backend_policy

    got = {b: backend_policy(b) for b in BACKENDS}
    assert [b for b in BACKENDS if got[b].collects] == ["auto", "driver", "tasks"]
    assert [b for b in BACKENDS if got[b].by_size] == ["auto"]
    assert [b for b in BACKENDS if got[b].needs_session] == ["tasks", "spark"]
    with pytest.raises(ValueError, match=r"unknown backend 'gpu'; valid backends: auto, driver"):
        backend_policy("gpu")
    q = query("Q(a) :- R(a, b)", semiring="counting")
    r = Factor.from_dict({(1, 2): 1}, ("a", "b"), semiring="counting")
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        q.solve(backend="gpu", R=r)
