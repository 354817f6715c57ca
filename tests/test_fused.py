"""Small steps past the driver: one cell each, and consecutive one-cell steps in one task.

A partitioned step whose inputs hold fewer than ``cell_min_rows`` rows gets one cell,
and the steps after it that also have one cell run in the same Spark task
(:mod:`faq.spark.fused`).  ``faq.settings(cell_min_rows=0)`` gives every step the
cluster's task slots, as before; tests/test_conformance.py runs random rules both ways
(backends ``partitioned`` and ``cells``).
"""

from __future__ import annotations

import numpy as np
import pytest

import faq
import semirings
from faq import Factor, query
from faq.spark import fused
from tests.helpers import spark_jobs


@pytest.fixture(autouse=True, scope="module")
def partitioned_steps():
    """These tests are about steps partitioned over the cluster, not a whole solve
    gathered into one Spark task (``query_task_rows``, :mod:`faq.query_task`)."""
    with faq.settings(query_task_rows=0):
        yield


CHAIN = "Q(x0, x4) :- M0(x0, x1), M1(x1, x2), M2(x2, x3), M3(x3, x4)"


def _chain(seed: int = 3) -> tuple[list[np.ndarray], dict[str, object]]:
    rng = np.random.default_rng(seed)
    shapes = [(6, 5), (5, 7), (7, 4), (4, 6)]
    mats = [np.where(m > 0.4, m, 0.0) for m in (rng.random(s) for s in shapes)]
    fs = [
        Factor.from_numpy(m, vars=(f"x{i}", f"x{i + 1}"), semiring="real")
        for i, m in enumerate(mats)
    ]
    return mats, {f"M{i}": f.df for i, f in enumerate(fs)}


def _stage_tasks_of_last_job(spark, group_fn):
    """``group_fn()`` and the tasks of each stage of the last Spark job it ran."""
    from benchmarks._common import job_group, new_job_group

    sc = spark.sparkContext
    with job_group(sc, new_job_group("test-stages"), "stages") as group:
        out = group_fn()
    tracker = sc.statusTracker()
    last = max(tracker.getJobIdsForGroup(group))
    stages = sorted(tracker.getJobInfo(last).stageIds)
    return out, [tracker.getStageInfo(s).numTasks for s in stages]


def _stages_of_last_job(spark, group_fn):
    """``group_fn()`` and the number of stages of the last Spark job it ran."""
    out, tasks = _stage_tasks_of_last_job(spark, group_fn)
    return out, len(tasks)


def test_a_small_chain_runs_its_steps_in_one_task(spark):
    """Three one-cell steps of a chain: one stage, no shuffle, where each step took a
    shuffle of its own before (and still does with ``cell_min_rows=0``); the answers
    agree, and ``explain()`` says which steps share a task."""
    mats, dfs = _chain()
    want = mats[0] @ mats[1] @ mats[2] @ mats[3]
    q = query(CHAIN, semiring="real")
    with faq.settings(local_rows=0):
        (run, jobs) = spark_jobs(spark, lambda: q.run(**dfs))
        _, stages = _stages_of_last_job(spark, lambda: q.solve(**dfs))
        text = q.explain(**dfs)
    with faq.settings(local_rows=0, cell_min_rows=0):
        spread, spread_stages = _stages_of_last_job(spark, lambda: q.solve(**dfs))
    assert np.allclose(run.result.to_numpy(shape=want.shape), want)
    assert np.allclose(spread.to_numpy(shape=want.shape), want)
    assert jobs == 2, jobs  # the check, then every step and the answer's counts
    assert stages == 1, stages  # the three steps read their inputs in one task
    assert spread_stages > 3, spread_stages  # a shuffle per step (and the answer's)
    assert all(t.choice.shares.total == 1 for t in run.trace.steps)
    assert "local kernel in one Spark task (one cell), with step 2" in text
    assert "local kernel in one Spark task (one cell), with step 3" in text


@pytest.mark.parametrize("S", ["real", "min-plus", "boolean"])
def test_a_bushy_plan_merges_two_tasks_programs(spark, S):
    """Step 3 reads the outputs of steps 1 and 2, each a one-cell program: their ops
    and inputs are merged into one task, the references renumbered (a wrong number
    would join the wrong tables)."""
    rng = np.random.default_rng(11)
    semiring = semirings.registry.get(S)
    rows = {}
    for name in "ABCD":
        keys = rng.integers(0, 4, size=(12, 2))
        vals = rng.random(12) if S != "boolean" else np.ones(12, dtype=bool)
        rows[name] = [(int(a), int(b), v.item()) for (a, b), v in zip(keys, vals, strict=True)]
    dfs = {n: spark.createDataFrame(r, ["l", "r", "value"]) for n, r in rows.items()}
    rule = "Q(a, c) :- A(a, x), B(x, b), C(b, y), D(y, c)"
    q = query(rule, semiring=semiring)
    order = ["x", "y", "b"]
    want = q.solve(order=order, **dfs).to_dict()  # the driver's answer
    with faq.settings(local_rows=0):
        run = q.run(order=order, **dfs)
        text = q.explain(order=order, **dfs)
    assert "with step 3" in text
    got = run.result.to_dict()
    assert set(got) == set(want)
    assert all(np.isclose(float(got[k]), float(want[k])) for k in want)


def test_programs_merge_by_renumbering_their_references():
    """``fuse`` appends a program's inputs and ops after those already taken, so a
    reference keeps naming the same table."""
    real = semirings.registry.get("real")
    fake = object()  # fuse never looks inside a DataFrame
    a = fused.fuse([fused.Input(("x",), fake, 5), fused.Input(("x", "y"), fake, 7)],
                   ("x", "y"), ("y",), real)  # fmt: skip
    b = fused.fuse([fused.Input(("z",), fake, 2)], ("z",), ("z",), real)
    c = fused.fuse([b, a, fused.Input(("y", "z"), fake, 3)], ("y", "z"), (), real)
    assert [i.rows for i in c.inputs] == [2, 5, 7, 3] and c.rows == 17
    assert [op.args for op in c.ops] == [
        (("in", 0),),  # b's op
        (("in", 1), ("in", 2)),  # a's op, its inputs moved past b's
        (("op", 0), ("op", 1), ("in", 3)),
    ]
    assert c.keep == ()
    assert fused.can_fuse(c, real, 3, 20) and not fused.can_fuse(c, real, 4, 20)
    assert not fused.can_fuse(c, semirings.registry.get("counting"), 0, 20)  # bigint values
    with pytest.raises(ValueError, match="cannot feed a step of bigint"):
        fused.fuse([c], (), (), semirings.registry.get("counting"))


def test_cells_of_a_small_step_come_in_whole_waves():
    """A step starts from ``ceil(rows / cell_min_rows)`` cells when that is fewer than the
    task slots; above the cores it is rounded down to a multiple of them (3 cells on 2
    cores would take two waves, as 4 do)."""
    from faq.plan.shares import choose_shares

    tri = [(("a", "b"), 400.0), (("b", "c"), 400.0), (("a", "c"), 400.0)]
    cells = {
        m: choose_shares(tri, (), tasks=8, cell_rows=1e9, min_rows=m, cores=2).cells
        for m in (2000, 1200, 600, 400, 250, 100, 0)
    }
    assert cells == {2000: 1, 1200: 1, 600: 2, 400: 2, 250: 4, 100: 8, 0: 8}, cells


def test_an_empty_relation_checked_with_others_and_run_in_one_task(spark):
    """An empty relation has no group in the check job's aggregation: it gets zero rows
    (not another relation's figures), and the one-cell step over it gives no rows."""
    a = spark.createDataFrame([(0, 1, 2), (1, 2, 3)], "x bigint, y bigint, value bigint")
    empty = spark.createDataFrame([], "y bigint, z bigint, value bigint")
    q = query("Q(x, z) :- A(x, y), B(y, z)", semiring="counting")
    total = query("Q() :- A(x, y), B(y, z)", semiring="counting")
    with faq.settings(local_rows=0):
        run = q.run(A=a, B=empty)
        scalar = total.solve(A=a, B=empty).to_dict()
    assert run.result.to_dict() == {} and scalar in ({}, {(): 0}), scalar
    assert sorted(f.rows for f in run.plan.atoms) == [0, 2]


def test_a_one_cell_step_leaves_the_cells_it_reads_in_their_own_tasks(spark):
    """Step 1 (600 input rows, ``cell_min_rows=250``) has 2 cells; step 2 reads its
    output (at most 16 rows) and a 5-row matrix: one cell.  Step 1's output is shuffled
    into step 2's task, not coalesced into it, so step 1's cells still run as 2 tasks
    (coalesced, the whole job after step 1's routing would be one task)."""
    rng = np.random.default_rng(4)

    def rel(n, left, right):
        keys = zip(rng.integers(0, left, n), rng.integers(0, right, n), strict=True)
        return [(int(a), int(b), float(v)) for (a, b), v in zip(keys, rng.random(n), strict=True)]

    dfs = {
        n: spark.createDataFrame(r, "l bigint, r bigint, value double")
        for n, r in (("A", rel(300, 4, 100)), ("B", rel(300, 100, 4)), ("C", rel(5, 4, 4)))
    }
    q = query("Q(x0, x3) :- A(x0, x1), B(x1, x2), C(x2, x3)", semiring="real")
    order = ["x1", "x2"]
    want = q.solve(order=order, **dfs).to_dict()
    with faq.settings(local_rows=0, cell_min_rows=250):
        run, tasks = _stage_tasks_of_last_job(spark, lambda: q.run(order=order, **dfs))
    assert [t.choice.shares.total for t in run.trace.steps] == [2, 1]
    got = run.result.to_dict()
    assert set(got) == set(want) and all(np.isclose(got[k], want[k]) for k in want)
    assert tasks[-1] == 1 and 2 in tasks[:-1], tasks  # the program; step 1's two cells


def test_the_check_job_reads_all_relations_in_one_coalesced_stage(spark):
    """Four relations of 3 partitions each, checked together: one job of two stages (the
    relations read and aggregated by relation, then combined), the 12 partitions
    coalesced into the task slots; each relation keeps its own figures."""
    from faq.source import Source
    from faq.spark.checks import Check, spark_prepared_all
    from faq.spark.tasks import parallelism

    S = semirings.registry.get("counting")
    checks = [
        Check(
            Source.spark(
                spark.range(0, 10 * (k + 1), 1, 3).selectExpr(
                    "id AS x", f"id % {k + 2} AS y", "CAST(1 AS BIGINT) AS value"
                ),
                ("x", "y"),
                S,
            ),
            S,
            f"relation R{k}",
        )
        for k in range(4)
    ]
    got, tasks = _stage_tasks_of_last_job(spark, lambda: spark_prepared_all(checks))
    slots = parallelism(spark) * faq.settings().task_slices
    assert len(tasks) == 2 and tasks[0] <= slots < 12, (tasks, slots)
    assert [(st.rows, st.distinct[1]) for _, st, _ in got] == [(10, 2), (20, 3), (30, 4), (40, 5)]


def test_a_delta_term_scans_its_filtered_relation_in_parallel(spark):
    """A Spark delta term (past ``max_fetch_rows``) of a rule whose terms read atoms
    their change does not reach (a path: no one task, :func:`faq.delta._in_one_task`)
    reads each other atom's rows at the values it reaches: a filter over the whole
    relation.  Planned from the estimate of the rows it keeps
    (:func:`faq.kernel.stats.filtered_stats`), the term has one cell, and the filtered
    relation is shuffled into that cell's task, so the scan runs in the relation's own 4
    partitions (before, planned from the whole relation's rows, no stage had 4 tasks:
    [2, 2, 2, 2, 1])."""
    from faq import solve_delta

    rng = np.random.default_rng(5)
    edges = sorted({tuple(e) for e in rng.integers(0, 300, size=(3000, 2)).tolist()})
    rows = [(int(a), int(b), 1) for a, b in edges]
    df = spark.createDataFrame(rows, "a long, b long, value long").repartition(4)
    E = Factor.trusted(df, ("a", "b"), "counting", rows=len(rows), distinct=(300, 300))
    q = query("Q() :- E(a, b), E(b, c), E(c, d)", semiring="counting")
    change = Factor.from_dict({(3, 7): 1, (11, 5): 1}, ("a", "b"), "counting")
    want = solve_delta(q, {"E": E}, {"E": change}).change.scalar()
    res, tasks = _stage_tasks_of_last_job(
        spark, lambda: solve_delta(q, {"E": E}, {"E": change}, local=False)
    )
    assert res.where == "spark" and res.change.scalar() == want
    assert "one Spark task" not in res.why
    assert 4 in tasks, tasks  # the filtered scans, in the relation's partitions


def test_filtered_stats_estimate_the_rows_at_given_values():
    from faq.kernel.stats import RelationStats, filtered_stats

    whole = RelationStats(1_000_000, (200_000, 100_000))
    est = filtered_stats(whole, {0: 1_000})  # 0.5% of the first column's values
    assert (est.rows, est.distinct, est.exact, est.scanned) == (
        5_000,
        (1_000, 5_000),
        False,
        1_000_000,
    )
    both = filtered_stats(whole, {0: 20_000, 1: 50_000})  # 10% of one, 50% of the other
    assert both.rows == 50_000 and both.distinct == (20_000, 50_000)
    assert filtered_stats(whole, {0: 10**9}).rows == whole.rows  # never more than the whole
    assert filtered_stats(whole, None).rows == whole.rows  # values not known: the whole
    assert filtered_stats(RelationStats(0, (0, 0)), {0: 3}).rows == 1  # at least one row
