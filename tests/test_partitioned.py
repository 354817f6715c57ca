"""The path past the driver: HyperCube shares, one shuffle, the kernel in every cell.

Every test here forces it with ``faq.settings(local_rows=0)`` on relations held in
Spark, as a user with more data than the driver holds meets it.  The property tests
of every semiring against ``reference_solve`` on this path are in
tests/test_conformance.py (backend ``partitioned``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import functions as F

import faq
import semirings
from faq import Factor, query, reference_solve
from faq.plan.shares import choose_shares
from faq.rule import parse_rule
from faq.spark.partitioned import murmur3_int, routing_keys, run_partitioned
from faq.testing import NAMED_RULES, power_law_graph, triangle_count_numpy
from semirings import Semiring
from tests.helpers import packed_rows, spark_jobs


@pytest.fixture(autouse=True, scope="module")
def partitioned_steps():
    """These tests are about steps partitioned over the cluster, not a whole solve
    gathered into one Spark task (``query_task_rows``, :mod:`faq.query_task`)."""
    with faq.settings(query_task_rows=0):
        yield


TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"


def _edges_df(spark, edges: np.ndarray):
    import pandas as pd

    return spark.createDataFrame(pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]}))


# -- shares ------------------------------------------------------------------------------
def test_shares_cut_a_triangle_in_three_and_a_chain_on_its_join_variable():
    tri = [(("a", "b"), 1e6), (("b", "c"), 1e6), (("a", "c"), 1e6)]
    s = choose_shares(tri, (), tasks=8, cell_rows=1e9)
    assert dict(s.shares) == {"a": 2, "b": 2, "c": 2} and s.cells == 8
    assert s.load == pytest.approx(3e6 / 4) and s.rows == pytest.approx(6e6)
    assert s.combine  # every variable is eliminated and cut
    chain = [(("i", "j"), 1e6), (("j", "k"), 2e6)]
    s = choose_shares(chain, ("i", "k"), tasks=4, cell_rows=1e9)
    assert dict(s.shares) == {"i": 1, "j": 4, "k": 1} and s.combine
    s = choose_shares(chain, ("i", "j", "k"), tasks=4, cell_rows=1e9)
    assert not s.combine  # the cut variable is kept: each key comes from one cell
    assert "j=4: 4 cells" in s.describe()


def test_shares_double_the_cells_until_a_cell_fits_the_budget():
    tri = [(("a", "b"), 1e7), (("b", "c"), 1e7), (("a", "c"), 1e7)]
    small = choose_shares(tri, (), tasks=2, cell_rows=1e9)
    assert small.cells == 2
    fit = choose_shares(tri, (), tasks=2, cell_rows=4e6)
    assert fit.load <= 4e6 and fit.cells > 2
    assert math.prod(s for _, s in fit.shares) == fit.cells


def test_shares_split_off_values_too_heavy_for_their_cell():
    """A hub's rows all go to one coordinate of its variable: when they would put that
    cell over the budget, they get a grid of their own where the variable is not cut."""
    tri = [(("a", "b"), 1e6), (("b", "c"), 1e6), (("a", "c"), 1e6)]
    hub = {"b": ((7, 400_000), (3, 2_000))}
    top = [hub, {"b": ((7, 300_000),)}, {}]
    plain = choose_shares(tri, (), tasks=8, cell_rows=1e6)
    assert plain.heavy == ()  # no statistics of the values: nothing to split
    s = choose_shares(tri, (), tasks=8, cell_rows=1e6, top=top)
    (h,) = s.heavy
    assert h.var == "b" and h.values == (7,)
    assert h.rows == pytest.approx(700_000)
    assert h.shares.share("b") == 1 and h.shares.cells > 1
    assert s.total == s.cells + h.shares.cells and s.combine
    assert "heavy b (1 value: 7; ~700,000 rows) split over shares" in s.describe()
    # the same hub under a budget it fits: not split
    assert choose_shares(tri, (), tasks=8, cell_rows=1e7, top=top).heavy == ()
    # a kept heavy variable needs no combine of its own (each of its keys stays in a grid)
    path = [(("a", "b"), 1e6), (("b", "c"), 1e6)]
    s = choose_shares(path, ("a", "b", "c"), tasks=4, cell_rows=3e5, top=[hub, hub])
    assert [h.var for h in s.heavy] == ["b"] and not s.combine
    assert s.renamed({"b": "hub"}).heavy[0].var == "hub"


def test_hubs_on_several_variables_are_each_split():
    """A triangle whose hubs are heavy on a and on b: the first split takes the heavier
    variable's values, the rows left light split the other's, and a split's own grid
    splits what it still cuts (before, only the heaviest variable was split, and the
    other hub kept overflowing its cell)."""
    from faq.spark.partitioned import grids

    tri = [(("a", "b"), 1e6), (("b", "c"), 1e6), (("a", "c"), 1e6)]
    top = [
        {"a": ((1, 600_000),), "b": ((2, 500_000),)},
        {"b": ((2, 500_000),)},
        {"a": ((1, 600_000),)},
    ]
    s = choose_shares(tri, (), tasks=8, cell_rows=1e6, top=top)
    assert [h.var for h in s.heavy] == ["a", "b"]
    assert s.heavy[0].shares.heavy and s.heavy[0].shares.heavy[0].var == "b"
    assert s.total == s.cells + sum(h.shares.total for h in s.heavy)
    text = s.describe()
    assert "heavy a (1 value: 1;" in text and "heavy b (1 value: 2;" in text
    assert "[within it; heavy b" in text
    found = grids(s)
    assert sum(g.cells for g, _, _ in found) == s.total
    assert [first for _, first, _ in found] == sorted({first for _, first, _ in found})
    # every assignment of the three variables meets exactly one grid
    for a in (1, 5):
        for b in (2, 6):
            for c in (2, 7):
                got = {"a": a, "b": b, "c": c}
                meets = [
                    g
                    for g, _, conds in found
                    if all((got[v] in vals) == heavy for v, vals, heavy in conds)
                ]
                assert len(meets) == 1, (a, b, c)


def two_hubs() -> np.ndarray:
    """Issue 37's graph: 42 edges ``u < v``, two hubs (0 and 1) joined to each other and to
    the same 19 vertices, and a triangle 2-3-4 that makes 0-4 a 5-clique (5 4-cliques)."""
    hubs = [(h, j) for h in (0, 1) for j in range(2, 21)]
    return np.array(sorted({*hubs, (0, 1), (2, 3), (2, 4), (3, 4)}), dtype=np.int64)


def clique_bag(e: np.ndarray) -> tuple[list, list]:
    """The 4-clique's one bag over the edges ``e``: ``(variables, rows)`` per atom, and the
    most frequent values per variable as the check job reports them (8 per column)."""
    tops = [tuple(Counter(e[:, i].tolist()).most_common(8)) for i in (0, 1)]
    atoms = parse_rule(NAMED_RULES["4-clique"]).atoms
    rels = [(a.vars, float(len(e))) for a in atoms]
    return rels, [dict(zip(a.vars, tops, strict=True)) for a in atoms]


def test_no_budget_gives_a_step_more_cells_than_its_rows_or_a_few_waves():
    """Issue 37: under ``cell_rows=5`` a 4-clique on 42 edges with two hubs got 11,056
    cells (grids of 4,096 cells, and more for each hub's split) for 252 input rows: a
    Spark stage of thousands of tasks, each deserialising the whole routing plan.  The
    cells of all grids together are capped by the rows, and by ``waves`` × the task
    slots, and the shares say which limit decided, the cells wanted and given."""
    rels, top = clique_bag(two_hubs())
    rows_only = choose_shares(rels, (), tasks=4, cell_rows=5, top=top, cores=2)
    assert rows_only.total <= 252, rows_only.total  # 11,056 before the cap
    assert rows_only.cap is not None and rows_only.cap.cells == 252
    assert rows_only.cap.wanted > 10_000 and rows_only.cap.given == rows_only.total
    s = choose_shares(rels, (), tasks=4, cell_rows=5, top=top, cores=2, waves=4)
    assert s.total <= 8 and s.cap is not None and s.cap.given == s.total
    assert s.cap.limit == "max_cell_waves=4 × 2 task slots" and s.cap.budget > 5
    assert s.load <= s.cap.budget  # the budget the search allowed instead
    text = s.describe()
    assert "capped at 8 cells by max_cell_waves=4 × 2 task slots" in text, text
    assert f"{s.total} given where cell_rows wanted {s.cap.wanted:,}" in text, text
    # a budget the cap does not reach: the search is as before, and says nothing
    loose = choose_shares(rels, (), tasks=4, cell_rows=1e3, top=top, cores=2, waves=4)
    assert loose.cap is None and "capped" not in loose.describe()


@given(
    shape=st.sampled_from(["triangle", "4-clique", "path", "star"]),
    rows=st.lists(st.integers(0, 2_000_000), min_size=6, max_size=6),
    cell_rows=st.sampled_from([1, 5, 100, 10_000, 10**6, 10**9]),
    cores=st.integers(1, 16),
    waves=st.sampled_from([0, 1, 2, 4, 8]),
    min_rows=st.sampled_from([0, 1000, 500_000]),
    heavy=st.floats(0.0, 0.9),
)
def test_the_cap_holds_for_every_budget(shape, rows, cell_rows, cores, waves, min_rows, heavy):
    """Whatever the budget, the cells of every grid together stay within the rows and
    ``waves`` × the task slots; a capped step records the limit, wanted > cap ≥ given."""
    bags = {
        "triangle": [("a", "b"), ("b", "c"), ("a", "c")],
        "4-clique": [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")],
        "path": [("a", "b"), ("b", "c"), ("c", "d")],
        "star": [("a", "b"), ("a", "c"), ("a", "d")],
    }
    rels = [(vs, float(r)) for vs, r in zip(bags[shape], rows, strict=False)]
    # one hub per input, holding a share ``heavy`` of its rows on its first variable
    top = [{vs[0]: ((7, int(heavy * r)), (8, 1))} for vs, r in rels]
    s = choose_shares(rels, (), 2 * cores, cell_rows, top, min_rows, cores, waves=waves)
    cap = max(1, int(sum(r for _, r in rels)))
    if waves:
        cap = min(cap, max(1, waves * cores))
    assert 1 <= s.total <= cap, (s.total, cap, s.describe())
    if s.cap is not None:
        assert s.cap.cells == cap and s.cap.given == s.total and s.cap.wanted > cap


def test_each_hub_gets_cells_of_its_own_and_the_answers_agree(spark):
    """Hubs heavy on every variable of the triangle (one as a source, one as a target),
    under a budget both overflow: the heaviest cell holds fewer rows than with only
    the first split, and the count equals the driver's."""
    import pandas as pd

    from faq.spark.partitioned import route

    rng = np.random.default_rng(2)
    hubs = [(0, j) for j in range(1, 60)] + [(j, 999) for j in range(100, 160)]
    rest = [tuple(map(int, x)) for x in rng.integers(1, 200, size=(40, 2)) if x[0] < x[1]]
    edges = pd.DataFrame(sorted(set(hubs + rest)), columns=["src", "dst"])
    df = spark.createDataFrame(edges)
    q = query(TRIANGLE, semiring="counting")
    # a cap above the 96 cells this budget wants (max_cell_waves): the splits are tested here
    with faq.settings(local_rows=0, cell_rows=60, max_cell_waves=64):
        run = q.run(E=df)
    assert run.result.scalar() == q.solve(E=Factor.from_pandas(edges)).scalar()
    (step,) = [t for t in run.trace.steps if t.choice.shares is not None]
    shares = step.choice.shares
    assert len({h.var for h in shares.heavy}) >= 2, shares.describe()
    assert set(dict(shares.shares)) == {"a", "b", "c"}, shares.describe()
    frames = [
        (vs, df.selectExpr(f"src AS {vs[0]}", f"dst AS {vs[1]}", "1L AS value"))
        for vs in (("a", "b"), ("b", "c"), ("a", "c"))
    ]

    def heaviest(grid):
        return max(
            Counter(c for c, *_ in packed_rows(route(frames, grid, "bigint"), grid.total)).values()
        )

    assert heaviest(shares) < heaviest(replace(shares, heavy=shares.heavy[:1]))


def test_string_heavy_values_are_routed_to_their_own_grid(spark):
    """Heavy values of a string variable (one with a quote and a backslash) select their
    rows for the split's grid, and only those: a hub's rows land in the split's cells,
    the others in the first grid's."""
    from faq.spark.partitioned import route

    hub = "o'k\\"
    path = [(("a", "b"), 1e6), (("b", "c"), 1e6)]
    top = [{"b": ((hub, 900_000),)}, {"b": ((hub, 900_000),)}]
    shares = choose_shares(path, ("a", "b", "c"), tasks=4, cell_rows=3e5, top=top)
    assert [h.values for h in shares.heavy] == [(hub,)]
    rows = [("x", hub), ("y", hub), ("x", "q"), ("z", "o'k")]
    df = spark.createDataFrame(rows, "src string, dst string")
    frames = [
        (("a", "b"), df.selectExpr("src AS a", "dst AS b", "1L AS value")),
        (("b", "c"), df.selectExpr("dst AS b", "src AS c", "1L AS value")),
    ]
    placed = packed_rows(route(frames, shares, "bigint"), shares.total)
    b_of = [vs.index("b") for vs, _ in frames]
    assert {keys[b_of[i]] for _, i, keys, _ in placed} == {hub, "q", "o'k"}
    for cell, i, keys, _ in placed:
        assert (cell >= shares.cells) == (keys[b_of[i]] == hub), (keys, cell)


def test_heavy_values_split_over_cells_give_the_same_answers(spark):
    """A graph with a hub, the budget set so that the hub overflows its cell: every
    answer equals the driver's, and explain() names the split."""
    import pandas as pd

    rng = np.random.default_rng(1)
    hub = [(0, j) for j in range(1, 120)] + [(j, 0) for j in range(200, 230)]
    rest = [tuple(map(int, x)) for x in rng.integers(1, 300, size=(150, 2)) if x[0] != x[1]]
    edges = pd.DataFrame(sorted(set(hub + rest)), columns=["src", "dst"])
    df = spark.createDataFrame(edges)
    local = Factor.from_pandas(edges)
    cases = [
        (TRIANGLE, "counting"),
        ("Q(a) :- E(a, b), E(b, c), E(a, c)", "min-plus"),
        ("Q(b, c) :- E(a, b), E(b, c)", "counting"),
    ]
    for rule, S in cases:
        q = query(rule, semiring=S)
        with faq.settings(local_rows=0, cell_rows=120, max_cell_waves=64):  # cap: 128 cells
            run = q.run(E=df)
        cells = [t.choice.shares for t in run.trace.steps if t.choice.shares is not None]
        assert any(c.heavy for c in cells), rule
        assert "heavy " in q.explain(run)
        assert run.result.to_dict() == q.solve(E=local).to_dict(), rule


def test_variables_named_like_the_packs_columns_are_routed_by_their_own_values(spark):
    """A step's rows are packed under columns of their own (``__k0``, ``__h0``, ``__cell``,
    ``__rel``...).  Queries reach :func:`run_partitioned` with private names (``v0``, ...),
    but a caller of it with variables of those names must have its rows routed by their
    own values, or rows would go to the wrong cells and triangles be lost."""
    e = power_law_graph(300, 2_000, seed=5)
    df = _edges_df(spark, e)
    want = triangle_count_numpy(e)
    S = semirings.get("counting")
    for a, b, c in (("__k1", "__cell", "__k0"), ("__rel", "__h0", "__k2"), ("__g", "o", "__pack")):
        bag = [((a, b), 2e3), ((b, c), 2e3), ((a, c), 2e3)]
        shares = choose_shares(bag, (), tasks=2, cell_rows=2e3)
        assert all(s > 1 for _, s in shares.shares)  # every input is spread over a share
        frames = [
            (vs, df.selectExpr(f"src AS `{vs[0]}`", f"dst AS `{vs[1]}`", "1L AS value"))
            for vs, _ in bag
        ]
        out = run_partitioned(frames, shares, (a, b, c), (), S).collect()
        assert sum(r.value for r in out) == want, (a, b, c)


def test_routing_keys_send_each_cell_to_its_own_partition(spark):
    """murmur3_int is Spark's hash() of an int, so repartition(P, key) puts cell c in
    partition c (balance only: a task splits its rows by cell in any case)."""
    from pyspark.sql import functions as F

    ks = list(range(-50, 50)) + [2**31 - 1, -(2**31)]
    df = spark.createDataFrame([(k,) for k in ks], "k int")
    got = {r[0]: r[1] for r in df.select("k", F.hash("k")).collect()}
    assert got == {k: murmur3_int(k) for k in ks}
    for P in (1, 3, 8):
        keys = routing_keys(P)
        rows = spark.createDataFrame([(k, c) for c, k in enumerate(keys)], "k int, c int")
        placed = rows.repartition(P, "k").select("c", F.spark_partition_id().alias("p"))
        assert all(r.c == r.p for r in placed.collect())


# -- queries on the path ------------------------------------------------------------------
def test_triangles_and_4_cliques_in_a_few_jobs(spark):
    """Several cells (``cell_min_rows=0``: these 3,000 edges would get one cell)."""
    e = power_law_graph(400, 3_000, seed=2)
    df = _edges_df(spark, e)
    tri = query(TRIANGLE, semiring="counting")
    clique = query(NAMED_RULES["4-clique"], semiring="counting")
    key = "spark.sql.adaptive.enabled"
    adaptive = spark.conf.get(key)
    spark.conf.set(key, "true")  # as a default session has it (the tests' one: off)
    try:
        with faq.settings(local_rows=0, cell_min_rows=0):
            run, jobs = spark_jobs(spark, lambda: tri.run(E=df))
            assert spark.conf.get(key) == "true"  # given back
            with faq.settings(spark_adaptive=True):
                again, again_jobs = spark_jobs(spark, lambda: tri.run(E=_edges_df(spark, e)))
    finally:
        spark.conf.set(key, adaptive)
    with faq.settings(local_rows=0, cell_min_rows=0):
        assert run.result.scalar() == triangle_count_numpy(e)
        (step,) = run.trace.steps
        assert step.choice.backend == "spark" and step.choice.shares is not None
        # one job checks and counts the edges, one runs the shuffle and the cells (with
        # adaptive execution off during the run: with it, each shuffle is a job of its
        # own); no job per variable, no pairwise-size job
        assert jobs == 2, jobs
        # with adaptive execution left on, each shuffle stage is a job of its own
        assert again.result.scalar() == run.result.scalar() and again_jobs > 2, again_jobs
        text = tri.explain(run)
        assert "cells partitioned over Spark" in text and "cells    shares " in text
        assert "a=" in text or "b=" in text or "c=" in text  # the user's variable names
        four = clique.solve(E=df).scalar()
    assert four == clique.solve(E=df).scalar()  # the driver path agrees


def test_a_4_clique_with_two_hubs_under_a_tiny_budget_runs_in_a_few_waves(spark):
    """Issue 37, as reported: ``local_rows=0, cell_rows=5, cell_min_rows=0`` on the
    4-clique of 42 edges with two hubs was still running after 18 minutes (a stage of
    more than 1,150 tasks).  Now its cells are at most ``max_cell_waves`` (4) × the task
    slots, the count is right and explain() says the cap decided."""
    e = two_hubs()
    df = _edges_df(spark, e)
    q = query(NAMED_RULES["4-clique"], semiring="counting")
    t0 = time.perf_counter()
    with faq.settings(local_rows=0, cell_rows=5, cell_min_rows=0):
        run = q.run(E=df)
    seconds = time.perf_counter() - t0
    edges = {(int(u), int(v)): 1 for u, v in e}
    want = reference_solve(NAMED_RULES["4-clique"], "counting", {"E": edges})
    assert want == {(): 5} and run.result.to_dict() == want
    slots = faq.spark.parallelism(spark)
    cells = [t.choice.shares for t in run.trace.steps if t.choice.shares is not None]
    assert cells and all(c.total <= 4 * slots for c in cells), [c.total for c in cells]
    assert any(c.cap is not None for c in cells)
    text = q.explain(run)
    assert f"capped at {4 * slots} cells by max_cell_waves=4 × {slots} task slots" in text
    assert seconds < 120, seconds  # minutes before, a few seconds now (a shared machine)


def test_explain_marks_estimates_of_relations_kept_in_spark(spark):
    """Issue 37: for edges kept in Spark, explain() printed "estimate join 281 rows" for a
    join of 1.18M triangles with no mark.  The inputs' figures are marked as estimates
    (approximate distinct counts) and the join's size as a guess; the same edges read
    into the driver have counted inputs, unmarked."""
    import pandas as pd

    e = power_law_graph(400, 3_000, seed=2)
    q = query(TRIANGLE, semiring="counting")
    with faq.settings(local_rows=0):
        text = q.explain(q.run(E=_edges_df(spark, e)))
    rows = f"{len(e):,} rows"
    (line,) = [ln for ln in text.splitlines() if ln.startswith("  E(a, b)")]
    assert rows in line and line.endswith(
        "(estimates: rows before repeated keys are combined, distinct counts approximate in Spark)"
    ), line
    (line,) = [ln for ln in text.splitlines() if ln.startswith("  estimate join")]
    assert line.startswith("  estimate join ~") and "(guess: no join statistics)" in line
    local = q.explain(E=Factor.from_pandas(pd.DataFrame(e, columns=["src", "dst"])))
    (line,) = [ln for ln in local.splitlines() if ln.startswith("  E(a, b)")]
    assert rows in line and "estimates" not in line, line


def test_parquet_edges_under_local_rows_0_never_enter_the_driver(spark, tmp_path, caplog):
    """Spark has no row count for files, only their size: a Parquet relation of a few KB
    was read into the driver (size under ``local_bytes``) even with ``local_rows=0``.
    Its rows are now bounded by the files' footers: with ``local_rows=0`` it stays in
    Spark (checked, then the cells: 2 jobs).  The triangle's one bag holds three atoms
    over the edges: below three times their rows they stay in Spark too (a copy in the
    driver would only be sent back to the cells; before, at 10M edges, that took twice
    as long and 0.5 GB of driver memory), and at three times they are read into the
    driver, where the bag then runs."""
    import logging

    import pyarrow as pa
    import pyarrow.parquet as pq

    from faq.spark.checks import size_hint

    e = power_law_graph(300, 2_000, seed=4)
    folder = tmp_path / "edges"
    folder.mkdir()
    for k, part in enumerate(np.array_split(e, 3)):
        t = pa.table({"src": part[:, 0], "dst": part[:, 1]})
        pq.write_table(t, folder / f"part-{k}.parquet")
    df = spark.read.parquet(str(folder))
    assert size_hint(df)[0] == len(e)  # from the footers
    assert size_hint(df.filter("src > 10").select("dst", "src"))[0] == len(e)  # a bound
    assert size_hint(df.join(df, "src"))[0] is None  # a join adds rows: no bound
    with faq.settings(footer_files=len(df.inputFiles()) - 1):  # too many footers to read
        assert size_hint(df)[0] is None
    tri = query(TRIANGLE, semiring="counting")
    want = triangle_count_numpy(e)
    n = 3 * len(e)  # the rows of the bag E(a, b), E(b, c), E(a, c)
    for local_rows, where in [(0, "kept in Spark"), (n - 1, "kept in Spark"),
                              (n, "into the driver")]:  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="faq"), faq.settings(local_rows=local_rows):
            run, jobs = spark_jobs(spark, lambda: tri.run(E=df))
        assert run.result.scalar() == want
        loads = [r.getMessage() for r in caplog.records if r.getMessage().startswith("load ")]
        assert loads and all(where in m for m in loads), (local_rows, loads)
        (step,) = run.trace.steps
        assert step.choice.backend == ("driver" if local_rows == n else "spark"), local_rows
        if local_rows < n:
            assert jobs == 2, jobs  # the check job, then the shuffle and the cells


def test_a_csv_relation_enters_the_driver_only_within_local_rows(spark, tmp_path, caplog):
    """A CSV file has no row count and no footers: under ``local_bytes`` it is read with a
    bound of ``local_rows + 1`` rows, so one row more than ``local_rows`` keeps it in
    Spark (before, any file under ``local_bytes`` was read whole into the driver)."""
    import logging

    rows = [(i % 7, i) for i in range(50)]
    (tmp_path / "e.csv").write_text("".join(f"{a},{b}\n" for a, b in rows))
    df = spark.read.csv(str(tmp_path / "e.csv"), schema="a bigint, b bigint")
    q = query("Q(a) :- E(a, b)", semiring="counting")
    want = {(a,): sum(1 for x, _ in rows if x == a) for a in range(7)}
    for local_rows, where in [(len(rows) - 1, "kept in Spark"), (len(rows), "into the driver")]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="faq"), faq.settings(local_rows=local_rows):
            assert q.solve(E=df).to_dict() == want
        loads = [r.getMessage() for r in caplog.records if r.getMessage().startswith("load ")]
        assert loads and all(where in m for m in loads), (local_rows, loads)


def test_a_local_relation_read_by_several_atoms_goes_to_spark_once(spark, monkeypatch):
    """A relation held in the driver, past ``local_rows``, read by the three atoms of a
    triangle: one Spark DataFrame for all three, routed as one group (a self-join's rows
    packed once).  It was converted and routed once per atom."""
    import faq.executor as executor
    import faq.spark.partitioned as partitioned

    made, groups = [], []
    to_spark, route = executor.to_spark, partitioned.route

    def routed(*a, **k):
        out = route(*a, **k)
        groups.append(out.groups)
        return out

    monkeypatch.setattr(executor, "to_spark", lambda *a: made.append(a) or to_spark(*a))
    monkeypatch.setattr(partitioned, "route", routed)
    e = power_law_graph(300, 3000, seed=4)
    E = Factor.from_dict({(int(a), int(b)): 1 for a, b in e}, ["u", "v"], "counting")
    with faq.settings(local_rows=0, cell_min_rows=0):
        run = query(NAMED_RULES["triangle"], semiring="counting").run(E=E, join="wcoj")
    assert run.result.scalar() == triangle_count_numpy(e)
    assert run.trace.steps[0].choice.shares.total > 1
    assert len(made) == 1
    assert [len(g) for g in groups] == [1], groups


def test_a_chain_keeps_its_intermediates_in_spark(spark):
    """Every step of a chain is partitioned on its join variable; intermediate outputs
    stay lazy DataFrames (estimated in the trace) and the last is computed once."""
    rng = np.random.default_rng(3)
    mats = [rng.random((6, 5)), rng.random((5, 7)), rng.random((7, 4)), rng.random((4, 6))]
    mats = [np.where(m > 0.4, m, 0.0) for m in mats]
    fs = [
        Factor.from_numpy(m, vars=(f"x{i}", f"x{i + 1}"), semiring="real")
        for i, m in enumerate(mats)
    ]
    dfs = {f"M{i}": f.df for i, f in enumerate(fs)}
    q = query("Q(x0, x4) :- M0(x0, x1), M1(x1, x2), M2(x2, x3), M3(x3, x4)", semiring="real")
    with faq.settings(local_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(**dfs))
    want = mats[0] @ mats[1] @ mats[2] @ mats[3]
    assert np.allclose(run.result.to_numpy(shape=want.shape), want)
    *middle, last = run.trace.steps
    assert middle and all(t.estimated for t in middle) and not last.estimated
    # one job checks the matrices, one computes every step and keeps the answer, its
    # counts observed on the way (they took a job of their own before)
    assert jobs == 2, jobs
    assert last.rows == np.count_nonzero(want) == run.result.stats.rows
    assert all(t.choice.shares is not None for t in run.trace.steps)
    assert "computed with the next step" in q.explain(run)
    assert not run.result.is_local  # the answer stays in Spark too


@pytest.mark.parametrize("cell_min_rows", [500_000, 0], ids=["one-cell", "cells"])
def test_string_keys_user_semiring_and_aggregates_on_the_path(spark, cell_min_rows):
    rows = [("a", "b", 2.0), ("b", "c", 3.0), ("a", "c", 5.0), ("c", "d", 1.0), ("b", "d", 4.0)]
    df = spark.createDataFrame(rows, "x string, y string, value double")
    widest = Semiring(name="widest-test", zero=0.0, one=math.inf, add=max, mul=min)
    for S in ("min-plus", "max-product", widest):
        q = query("Q(a) :- E(a, b), E(b, c), E(a, c)", semiring=S)
        with faq.settings(local_rows=0, cell_min_rows=cell_min_rows):
            far = q.solve(E=df).to_dict()
        assert far == q.solve(E=df).to_dict() and far
    q = query("Q(a) :- E(a, b), E(b, c)", semiring="real", aggregates={"b": "max"})
    with faq.settings(local_rows=0, cell_min_rows=cell_min_rows):
        far = q.solve(E=df).to_dict()
    assert far == pytest.approx(q.solve(E=df).to_dict())


@pytest.mark.parametrize("cell_min_rows", [500_000, 0], ids=["one-cell", "cells"])
def test_witnesses_and_provenance_on_the_path(spark, cell_min_rows):
    rows = [(0, 1, 0.5), (1, 2, 0.25), (0, 2, 0.125), (2, 3, 0.5), (1, 3, 1.0)]
    df = spark.createDataFrame(rows, "a bigint, b bigint, value double")
    q = query("Q(a) :- E(a, b), E(b, c)", semiring="max-product")
    with faq.settings(local_rows=0, cell_min_rows=cell_min_rows):
        far = q.solve(E=df, witness=True)
    near = q.solve(E=df, witness=True)
    assert far.to_dict() == near.to_dict() and far.witnesses() == near.witnesses()
    tagged = [(0, 1, "e0_1"), (1, 2, "e1_2"), (0, 2, "e0_2"), (2, 3, "e2_3"), (1, 3, "e1_3")]
    E = Factor.tagged(spark.createDataFrame(tagged, "a bigint, b bigint, tag string"), name="E")
    p = query("Q(a) :- E(a, b), E(b, c), E(a, c)", "provenance")
    with faq.settings(local_rows=0, cell_min_rows=cell_min_rows):
        got = p.solve(E=E).to_dict()
    assert got == {(0,): "e0_1*e0_2*e1_2", (1,): "e1_2*e1_3*e2_3"}


def test_witnesses_are_found_in_the_cells(spark, monkeypatch):
    """A partitioned step's back-pointers come from its cells (no DataFrame join), with a
    cut eliminated variable (a key's candidates from several cells) and without."""
    from faq.spark import ops

    def no_join(*args, **kwargs):
        raise AssertionError("back-pointers of a partitioned step joined by DataFrames")

    rng = np.random.default_rng(5)
    edges = np.unique(rng.integers(0, 40, size=(300, 2)), axis=0)
    edges = edges[edges[:, 0] != edges[:, 1]]
    values = np.round(rng.uniform(0.1, 1.0, len(edges)), 2)
    rows = [(int(a), int(b), float(v)) for (a, b), v in zip(edges, values, strict=True)]
    df = spark.createDataFrame(rows, "a bigint, b bigint, value double")
    for rule in ("Q(a) :- E(a, b), E(b, c), E(a, c)", "Q(a, c) :- E(a, b), E(b, c)"):
        q = query(rule, semiring="min-plus")
        near = q.solve(E=df, witness=True)
        monkeypatch.setattr(ops, "binary_join", no_join)
        with faq.settings(local_rows=0):
            run = q.run(E=df, witness=True)
        monkeypatch.undo()
        assert any(t.choice.shares is not None for t in run.trace.steps)
        assert run.result.to_dict() == near.to_dict(), rule
        assert run.result.witnesses() == near.witnesses(), rule


def test_scalar_intermediates_from_several_cells_are_combined(spark):
    """Intermediate outputs are left uncombined for the next step's cells; a nullary one
    (φ() from several cells) must still count once as the ⊕ of its rows (the conformance
    case that caught it: 225 instead of 1650)."""
    from faq import reference_solve
    from faq.testing import random_relations, random_rule
    from tests.helpers import factors_from

    S = semirings.COUNTING
    rule = random_rule(0)  # Q(x4) :- R0(x2, x2), R1(x0), R0(x2, x3), R1(x1), R2(x4)
    rels = random_relations(rule, S, 0, domain=4, density=0.6)
    given = {n: f.df for n, f in factors_from(rels, S).items()}
    with faq.settings(local_rows=0):
        got = query(str(rule), semiring=S).solve(**given).to_dict()
    assert got == reference_solve(rule, S, rels)


def test_overflow_in_a_cell_is_an_overflow_error(spark):
    big = 2**62
    df = spark.createDataFrame([(1, 2, big), (2, 3, 4), (1, 3, 1)], "a long, b long, value long")
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    with faq.settings(local_rows=0), pytest.raises(OverflowError, match="overflow"):
        q.solve(E=df)


def test_a_user_semiring_failing_in_a_cell_names_its_error(spark):
    def bad_mul(x: float, y: float) -> float:
        raise ZeroDivisionError("this semiring cannot multiply")

    S = Semiring(name="fails-in-cells", zero=0.0, one=1.0, add=max, mul=bad_mul)
    df = spark.createDataFrame(
        [(1, 2, 0.5), (2, 3, 0.5), (1, 3, 0.5)], "a long, b long, value double"
    )
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring=S)
    with faq.settings(local_rows=0), pytest.raises(Exception, match="cannot multiply") as info:
        q.solve(E=df)
    assert "Py4J" not in type(info.value).__name__ and "Traceback" not in str(info.value)
    assert semirings.get("real")  # the registry is untouched


def test_repeated_keys_are_combined_in_the_cells(spark):
    """Relations kept in Spark are not consolidated by a shuffle of their own on this path:
    the cells' index ⊕-combines repeated keys, and keys whose rows cancel vanish."""
    rows = [(0, 1, 1.0), (0, 1, 2.0), (1, 2, 0.5), (0, 2, 4.0), (2, 3, 1.0), (2, 3, -1.0)]
    rows += [(1, 3, 3.0), (0, 3, 1.0), (0, 3, 1.0)]
    df = spark.createDataFrame(rows, "a bigint, b bigint, value double")
    for rule in ("Q(a) :- E(a, b), E(b, c), E(a, c)", "Q(a, c) :- E(a, b), E(b, c)"):
        q = query(rule, semiring="real")
        with faq.settings(local_rows=0):
            far = q.run(E=df)
        assert all(t.choice.shares is not None for t in far.trace.steps)
        assert far.result.to_dict() == pytest.approx(q.solve(E=df).to_dict()), rule
    q = query("Q(a, b) :- E(a, b)", semiring="real")  # no join: a Spark aggregation
    with faq.settings(local_rows=0):
        got = q.solve(E=df).to_dict()
    assert got == {(0, 1): 3.0, (1, 2): 0.5, (0, 2): 4.0, (1, 3): 3.0, (0, 3): 2.0}


def test_relations_are_checked_a_few_per_job_and_errors_name_theirs(spark, monkeypatch):
    """CHECKS_PER_JOB + 2 relations kept in Spark: checked CHECKS_PER_JOB at a time, so
    the one with a null key in the second job is named, and a clean chain gets its
    answer (CHECKS_PER_JOB set to 4 here: a chain of 66 atoms would take long)."""
    from faq.spark import checks

    monkeypatch.setattr(checks, "CHECKS_PER_JOB", 4)
    CHECKS_PER_JOB = checks.CHECKS_PER_JOB
    names = "ABCDEFGHIJKLMNOP"[: CHECKS_PER_JOB + 2]
    rule = "Q(x0, x6) :- " + ", ".join(f"{n}(x{i}, x{i + 1})" for i, n in enumerate(names))
    rows = [(0, 0, 2), (0, 1, 3)]
    rels = {n: spark.createDataFrame(rows, "i bigint, j bigint, value bigint") for n in names}
    q = query(rule, semiring="counting")
    with faq.settings(local_rows=0):
        got = q.solve(**rels).to_dict()
    assert (
        got
        == q.solve(
            **{
                n: Factor.from_dict({(i, j): v for i, j, v in rows}, ("i", "j"), "counting")
                for n in names
            }
        ).to_dict()
    )
    bad = spark.createDataFrame([(0, None, 1)], "i bigint, j bigint, value bigint")
    last = names[-1]
    with faq.settings(local_rows=0), pytest.raises(ValueError, match=f"relation '{last}'.*null"):
        q.solve(**{**rels, last: bad})


def test_one_check_job_gives_each_relation_its_own_figures(spark):
    """Relations of different arities and key types checked in one job: each one's rows,
    distinct values and errors are its own (the figures of one relation are null in the
    other relations' rows of the job)."""
    a = spark.createDataFrame(
        [(0, 1, 2), (0, 2, 1), (1, 2, 1), (1, 3, 1)], "x bigint, y bigint, value bigint"
    )
    b = spark.createDataFrame(
        [(1, "p", 1), (2, "q", 2), (3, "q", 1)], "y bigint, s string, value bigint"
    )
    c = spark.createDataFrame([("p", 1), ("q", 3)], "s string, value bigint")
    import semirings
    from faq.source import Source
    from faq.spark.checks import Check, spark_prepared_all

    S = semirings.get("counting")
    checks = [
        Check(Source.spark(df.toDF(*cols), tuple(cols[:-1]), S), S, f"relation {n!r}")
        for n, df, cols in (
            ("A", a, ["x", "y", "value"]),
            ("B", b, ["y", "s", "value"]),
            ("C", c, ["s", "value"]),
        )
    ]
    got, jobs = spark_jobs(spark, lambda: spark_prepared_all(checks))
    assert jobs == 1, jobs  # the three relations' checks and figures: one job
    stats = [st for _, st, _ in got]
    assert [(st.rows, st.distinct) for st in stats] == [(4, (2, 3)), (3, (3, 2)), (2, (2,))]
    assert stats[0].top[0][0][1] == 2 and stats[1].top[1][0] == ("q", 2), stats
    q = query("Q() :- A(x, y), B(y, s), C(s)", semiring="counting")
    want = 2 * 1 * 1 + 1 * 2 * 3 + 1 * 2 * 3 + 1 * 1 * 3
    assert q.solve(A=a, B=b, C=c).scalar() == want  # in the driver
    with faq.settings(local_rows=0):
        assert q.solve(A=a, B=b, C=c).scalar() == want
        nulls = spark.createDataFrame([(1, None, 1)], "y bigint, s string, value bigint")
        with pytest.raises(ValueError, match="relation 'B'.*key column 's'.*null"):
            q.solve(A=a, B=nulls, C=c)


def test_fixed_plans_nest_and_give_the_session_its_setting_back_after_an_error(spark):
    """The first block switches adaptive execution off, the last to close restores it,
    also when a query fails in its cells."""
    from faq.session import fixed_plans

    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    with fixed_plans(spark):
        with fixed_plans(spark):
            assert spark.conf.get(key) == "false"
        assert spark.conf.get(key) == "false"  # the outer block still holds it
    assert spark.conf.get(key) == before

    def boom(a, b):
        raise RuntimeError("no sum today")

    S = Semiring("boom", zero=0.0, one=1.0, add=boom, mul=lambda a, b: a * b)
    q = query("T(a) :- E(a,b), E(b,c), E(a,c)", semiring=S)
    df = _edges_df(spark, power_law_graph(60, 300, seed=5)).withColumn("value", F.lit(1.0))
    with faq.settings(local_rows=0), pytest.raises(Exception, match="no sum today"):
        q.solve(E=df)
    assert spark.conf.get(key) == before


def test_a_relation_read_by_several_atoms_is_packed_once_per_cell(spark):
    """A self-join's relation is read and packed once: each of its rows goes once to each
    cell any of its atoms sends it to, with the mask of the atoms it serves there.  Every
    row reaches exactly the cells HyperCube gives it (its hash on each cut variable it
    has, every coordinate of the others), so every combination of rows that joins meets
    in exactly one cell; a query routed so gives the driver's answers."""
    import pandas as pd

    from faq.kernel.route import key_hash
    from faq.spark.partitioned import Source, route

    rng = np.random.default_rng(5)
    edges = pd.DataFrame(rng.integers(0, 40, size=(300, 2)), columns=["src", "dst"])
    edges["value"] = rng.integers(1, 4, size=len(edges))
    other = pd.DataFrame({"x": np.arange(30), "value": np.arange(30) + 1})
    E, N = spark.createDataFrame(edges), spark.createDataFrame(other)
    roles = [("a", "b"), ("b", "c"), ("a", "c")]
    frames = [(vs, E.selectExpr(f"src AS {vs[0]}", f"dst AS {vs[1]}", "value")) for vs in roles]
    frames.append((("b",), N.selectExpr("x AS b", "value")))
    sources = [Source(E, ("src", "dst"), ("src", "dst"))] * 3 + [None]
    shares = choose_shares([(vs, 300.0) for vs, _ in frames], (), tasks=8, cell_rows=100)
    assert shares.total > 1 and not shares.heavy, shares.describe()

    routed = route(frames, shares, "bigint", sources)
    assert [g.inputs for g in routed.groups] == [(0, 1, 2), (3,)]
    got = Counter(packed_rows(routed, shares.total))

    def cells(vs, keys):  # the model: HyperCube's cells of one row of an atom over vs
        out = [0]
        for v, s in shares.shares:
            if v in vs:
                h = int(key_hash(np.array([keys[vs.index(v)]]))[0] % np.uint64(s))
                out = [c * s + h for c in out]
            else:
                out = [c * s + x for c in out for x in range(s)]
        return out

    rows = [(vs, i, df.collect()) for i, (vs, df) in enumerate(frames)]
    want = Counter(
        (c, i, tuple(r[v] for v in vs), r["value"])
        for vs, i, rs in rows
        for r in rs
        for c in cells(vs, tuple(r[v] for v in vs))
    )
    assert got == want
    # packed once: a cell holds an edge once, whatever atoms it serves there
    packs = routed.rows.toArrow()
    from faq.spark.routing import unpacked

    got_packs = unpacked(iter(packs.to_batches())).values()
    e_rows = sum(t.num_rows for by in got_packs for t in by.get(0, ()))
    assert e_rows < sum(n for (_, i, _, _), n in want.items() if i < 3)
    # every joining combination meets in exactly one cell
    by_cell: dict = {}
    for (c, i, keys, _), n in got.items():
        by_cell.setdefault(c, {}).setdefault(i, Counter())[keys] += n
    met = Counter()
    for atoms in by_cell.values():
        for (a, b), n1 in atoms.get(0, {}).items():
            for (b2, c), n2 in atoms.get(1, {}).items():
                if b2 == b and (a, c) in atoms.get(2, {}) and (b,) in atoms.get(3, {}):
                    met[(a, b, c)] += n1 * n2 * atoms[2][(a, c)] * atoms[3][(b,)]
    E_ = Counter(map(tuple, edges[["src", "dst"]].to_numpy().tolist()))
    N_ = set(other["x"])
    full = Counter(
        {
            (a, b, c): n1 * n2 * E_[(a, c)]
            for (a, b), n1 in E_.items()
            for (b2, c), n2 in E_.items()
            if b2 == b and (a, c) in E_ and b in N_
        }
    )
    assert met == full

    for name in ("counting", "max-plus"):
        q = query("Q(a, c) :- E(a, b), E(b, c), E(a, c)", semiring=name)
        with faq.settings(local_rows=0, cell_rows=200, cell_min_rows=10):
            run = q.run(E=E)
        assert any(t.choice.shares is not None for t in run.trace.steps), q.explain(run)
        local = q.solve(E=Factor.from_pandas(edges, semiring=name)).to_pandas()
        assert run.result.to_pandas().equals(local), name


def test_annotations_of_one_are_left_out_in_the_cells_but_not_a_scalars(spark):
    """A cell's rows whose annotations are all the semiring's one reach the kernel without
    them (it counts instead of multiplying), with the same answer; a factor with no key
    column keeps its one, which is its only row (dropped, the cell's join came out empty)."""
    import pandas as pd

    from faq.plan.shares import Shares

    S = semirings.get("integer")
    r = spark.createDataFrame(pd.DataFrame({"x": [1, 2, 3, 3], "value": [1, 1, 1, 1]}))
    for one in (1, -1):
        scalar = spark.createDataFrame(pd.DataFrame({"value": [one]}))
        shares = Shares((("x", 2),), 2, 2.0, 6.0, True)
        out = run_partitioned([(("x",), r), ((), scalar)], shares, ("x",), (), S).collect()
        assert sum(row.value for row in out) == 4 * one


def test_a_cell_reads_packs_that_their_tasks_wrote_differently(spark):
    """Each packing task narrows its own rows (keys within 32 bits as int32, no ``value``
    when all are one), so one cell can receive packs of one relation in several shapes:
    it reads them all (concatenating them as Arrow tables failed on the schemas)."""
    import pandas as pd

    from faq.plan.shares import Shares

    S = semirings.get("max-product")
    narrow = pd.DataFrame({"x": [1, 2, 3], "value": [1.0, 1.0, 1.0]})
    wide = pd.DataFrame({"x": [2**40, 2], "value": [0.5, 0.25]})
    r = spark.createDataFrame(narrow).union(spark.createDataFrame(wide))  # two tasks
    s = spark.createDataFrame(pd.DataFrame({"x": [2, 3, 2**40], "value": [0.5, 2.0, 4.0]}))
    shares = Shares((("x", 1),), 1, 8.0, 8.0, False)
    out = run_partitioned([(("x",), r), (("x",), s)], shares, ("x",), ("x",), S).collect()
    assert {row.x: row.value for row in out} == {2: 0.5, 3: 2.0, 2**40: 2.0}


def test_atoms_of_one_relation_that_read_a_key_as_different_types_are_packed_apart(spark):
    """Every atom of a variable reads its values as one type, so that equal values hash
    alike: where two atoms of one relation need one key position as different types (its
    first column is ``a``, a bigint, in one atom and ``c``, a string since ``F(c)`` comes
    first, in the other), they are packed in groups of their own, each cast its way."""
    import pandas as pd

    from faq.spark.partitioned import Source, route

    E = spark.createDataFrame(pd.DataFrame({"src": [1, 2, 3], "dst": [2, 3, 1], "value": 1}))
    F = spark.createDataFrame(pd.DataFrame({"x": ["1", "3"], "value": [1, 1]}))
    frames = [
        (("c",), F.selectExpr("x AS c", "value")),
        (("a", "b"), E.selectExpr("src AS a", "dst AS b", "value")),
        (("c", "d"), E.selectExpr("CAST(src AS STRING) AS c", "dst AS d", "value")),
    ]
    sources = [None, *[Source(E, ("src", "dst"), ("src", "dst"))] * 2]
    shares = choose_shares([(vs, 3.0) for vs, _ in frames], (), tasks=4, cell_rows=2)
    routed = route(frames, shares, "bigint", sources)
    assert [g.inputs for g in routed.groups] == [(0,), (1,), (2,)]
    assert routed.groups[2].types == ("string", "bigint")
    S = semirings.get("counting")
    out = run_partitioned(frames, shares, ("a", "b", "c", "d"), (), S, sources=sources).collect()
    assert sum(r.value for r in out) == 3 * 2  # E(a, b) × (E(c, d) with c in F)


def test_a_selection_of_a_checkpoint_has_the_checkpoints_rows_as_its_bound(spark):
    """Spark keeps a checkpoint's row count but none above a projection (its cost model
    is off): under projections and filters the count below is the bound, so a
    ``select`` of checkpointed edges is planned by its rows (a program in one task is
    decided without a Spark job); a join adds rows, and has none."""
    import pandas as pd

    from faq.spark.checks import size_hint

    pdf = pd.DataFrame({"src": np.arange(500), "dst": np.arange(500) + 1, "w": 1.0})
    df = spark.createDataFrame(pdf).localCheckpoint(eager=True)
    assert size_hint(df)[0] == 500
    assert size_hint(df.select("src", "dst"))[0] == 500
    assert size_hint(df.filter("src > 10").select("dst"))[0] == 500  # a bound from above
    assert size_hint(df.select("src").join(df.select("src"), "src"))[0] is None


def test_a_plain_scan_is_told_from_a_query(spark):
    from faq.spark.checks import explain_cost, plain_scan

    def plain(df):
        return plain_scan(explain_cost(df))

    df = spark.createDataFrame([(1, 2)], "a bigint, b bigint").localCheckpoint(eager=True)
    assert plain(df) and plain(df.filter("a > 0").select("b"))
    assert not plain(df.join(df, "a")) and not plain(df.groupBy("a").count())
    assert not plain_scan(None)
