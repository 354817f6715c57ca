"""Worst-case optimal joins: correctness on cyclic queries, and the row counts that
make them worth it.

Oracle: ``faq.reference_solve`` on named cyclic hypergraphs (triangle,
4-cycle, 4-clique, two triangles sharing an edge, a cycle with a pendant free
variable) under several semirings; every forced join method, backend and
elimination order must agree.  The structural tests count rows (never time
them): the Spark Generic Join's largest intermediate and the local kernel's
proposed candidates stay linear on the hub graph, where binary plans are
quadratic.
"""

from __future__ import annotations

import itertools
import math

import pytest

import faq
import semirings
from faq import Factor, query, reference_solve
from faq.testing import NAMED_RULES, random_relations
from semirings import Semiring
from tests.helpers import assert_same, factors_from

BOTTLENECK = Semiring(name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min)
CYCLIC = ["triangle", "triangle-free", "4-cycle", "4-clique", "two-triangles", "cycle-pendant"]
CASES = [
    ("triangle", semirings.COUNTING),
    ("triangle-free", semirings.REAL),
    ("4-cycle", semirings.MIN_PLUS),
    ("4-clique", semirings.COUNTING),
    ("two-triangles", semirings.MAX_PRODUCT),
    ("cycle-pendant", BOTTLENECK),
    ("cycle-pendant", semirings.LOG),
    ("triangle", semirings.BOOLEAN),
]


FORCED = [(n, s, j, b) for n, s in CASES[:3] for j in ("wcoj", "binary") for b in ("spark",)]
RUNS = (
    [(n, s, "auto", "auto") for n, s in CASES]
    + [(n, s, "auto", "spark") for n, s in CASES[:4]]
    + FORCED
)


@pytest.mark.parametrize(
    ("name", "S", "join", "backend"), RUNS, ids=[f"{n}-{s.name}-{j}-{b}" for n, s, j, b in RUNS]
)
def test_cyclic_queries_match_reference(spark, name, S, join, backend):
    rule = query(NAMED_RULES[name]).rule
    rels = random_relations(rule, S, seed=sum(map(ord, name)) % 1000, domain=4, density=0.6)
    want = reference_solve(rule, S, rels)
    q = query(NAMED_RULES[name], semiring=S)
    run = q.run(join=join, backend=backend, **factors_from(rels, S))
    assert_same(run.result.to_dict(), want, S, f"{name} join={join} backend={backend}")
    for step, t in zip(run.plan.steps, run.trace.steps, strict=True):
        c = t.choice
        if len(step.factors) < 2 or not step.cyclic:
            continue
        if join != "auto":
            assert c.method == join
        elif backend == "spark":  # local atoms: auto decided from the exact pairwise join size
            total = sum(f.rows for f in step.factors)
            assert c.pair_rows is not None
            assert c.method == ("binary" if c.pair_rows <= 8 * total else "wcoj")
        else:
            assert c.method == "wcoj" and c.backend == "driver"
        if c.backend == "spark" and c.method == "wcoj":  # one HyperCube shuffle, kernel per cell
            assert c.shares is not None and c.shares.total == c.tasks


def test_triangle_every_order_and_method_agree(spark):
    S = semirings.INTEGER
    rule = query(NAMED_RULES["triangle"]).rule
    rels = random_relations(rule, S, seed=11, domain=5, density=0.5)
    want = reference_solve(rule, S, rels)
    q = query(NAMED_RULES["triangle"], semiring=S)
    fs = factors_from(rels, S)
    orders = list(itertools.permutations(rule.bound))[::2]  # a, b and c each eliminated first
    combos = itertools.product(orders, ["wcoj", "binary"], ["driver", "spark"])
    for order, join, backend in combos:
        got = q.solve(order=list(order), join=join, backend=backend, **fs).to_dict()
        assert_same(got, want, S, f"order {order} join {join} backend {backend}")


def test_explain_names_the_method(spark):
    S = semirings.COUNTING
    rule = query(NAMED_RULES["triangle"]).rule
    fs = factors_from(random_relations(rule, S, seed=3), S)
    q = query(NAMED_RULES["triangle"], semiring=S)
    assert "worst-case optimal (Generic Join) (cyclic bag)" in q.explain(join="wcoj", **fs)
    assert "binary (cyclic bag)" in q.explain(join="binary", **fs)
    assert "Spark DataFrame joins" in q.explain(backend="spark", join="binary", **fs)
    text = q.explain(backend="spark", join="wcoj", **fs)
    assert "local kernel in one Spark task (one cell)" in text  # a small step: one cell
    with faq.settings(cell_min_rows=0):
        text = q.explain(backend="spark", join="wcoj", **fs)
    assert "cells partitioned over Spark" in text and "cells    shares" in text
    assert "in the driver" in q.explain(**fs)


def test_hub_graph_rows_wcoj_linear_binary_quadratic(spark):
    """Rows, not seconds: on the hub graph every binary plan for the triangle builds
    about N² rows while the answer has O(N); Generic Join stays within a constant of N,
    on Spark (largest intermediate) and in the local kernel (candidates proposed)."""
    from faq.io import edges_dataframe
    from faq.testing import hub_graph, triangle_count_numpy

    n = 300
    edges = hub_graph(n)
    df = edges_dataframe(edges, spark)
    q = query(NAMED_RULES["triangle"], semiring="counting")
    expected = triangle_count_numpy(edges)

    run = q.run(E=df, join="binary", backend="spark", trace=True)
    assert run.result.scalar() == expected
    binary_rows = max(s.largest or s.rows for s in run.trace.steps)
    assert binary_rows >= n * n / 2, binary_rows
    assert "largest intermediate" in q.explain(run)

    # past the driver the step is partitioned: the kernel runs in every cell
    run = q.run(E=df, backend="spark")
    assert run.result.scalar() == expected
    (step,) = run.trace.steps
    assert step.choice.method == "wcoj" and step.choice.shares is not None

    # the local kernel: candidates proposed grow linearly with n
    proposed = {}
    for m in (n, 4 * n):
        e = hub_graph(m)
        run = q.run(E=edges_dataframe(e, spark))
        assert run.result.scalar() == triangle_count_numpy(e)
        (step,) = run.trace.steps
        assert step.choice.backend == "driver" and step.choice.method == "wcoj"
        proposed[m] = step.proposed
    assert proposed[4 * n] <= 5 * proposed[n] and proposed[n] <= 12 * len(edges)


def test_auto_uses_binary_joins_without_skew_when_pairs_are_known(spark):
    """Karate, local, forced onto Spark: its pairwise joins are known and small, so auto
    runs the cyclic bag as binary DataFrame joins (``skew_factor``)."""
    from pathlib import Path

    from faq.io import read_edge_list

    edges = read_edge_list(Path(__file__).parent / "data" / "karate.txt", spark)
    q = query(NAMED_RULES["triangle"], semiring="counting")
    local = Factor.from_pandas(edges.toPandas(), vars=("src", "dst"), semiring="counting")
    run = q.run(E=local, backend="spark")
    assert run.result.scalar() == 45
    (step,) = run.trace.steps
    c = step.choice
    assert c.method == "binary" and c.pair_rows <= 8 * 3 * 78
    report = q.explain(run)
    assert "the cheapest join of two atoms" in report and "actual" in report
