"""A query solved whole inside one Spark task (:mod:`faq.query_task`): past ``local_rows``,
inputs kept in Spark that hold at most ``query_task_rows`` rows are gathered into one task
by one job, planned there from exact counts and solved on the driver's kernel.  The
hypothesis property against the reference evaluator is the ``one-task`` backend of
``tests/test_conformance.py``."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import faq
from faq import query
from faq.rule import parse_rule
from tests.helpers import spark_jobs

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
TWO_HOP = "Q(a, c) :- E(a, b), E(b, c)"
IN_TASK = "whole solve in one Spark task"


def _edges(n: int = 300, m: int = 2000, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(m, 2))
    e = np.sort(e[e[:, 0] != e[:, 1]], axis=1)
    return np.unique(e, axis=0)


def _frame(spark, e: np.ndarray, value=None):
    pdf = pd.DataFrame({"u": e[:, 0], "v": e[:, 1]})
    if value is not None:
        pdf["value"] = value
    return spark.createDataFrame(pdf)


def test_a_triangle_count_past_the_driver_is_one_job_and_explains_where_it_ran(spark):
    e = _edges()
    q = query(TRIANGLE, semiring="counting")
    want = q.solve(E=pd.DataFrame({"u": e[:, 0], "v": e[:, 1]})).to_dict()
    E = _frame(spark, e)
    with faq.settings(local_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(E=E), "query-one-task")
    assert run.result.to_dict() == want and run.result.is_local  # a scalar comes back
    assert jobs == 1, jobs
    text = run.explain()
    assert f"{IN_TASK}: the inputs kept in Spark hold {len(e):,} rows" in text, text
    assert "runs on  local kernel in the one Spark task" in text, text
    assert "cells" not in text, text


def test_an_answer_with_free_variables_stays_in_spark(spark):
    """String keys, a value column and an input held in the driver beside one kept in
    Spark: the answer is kept in Spark and equals the driver's."""
    e = _edges(seed=5)
    names = np.array([f"n{i}" for i in range(300)], dtype=object)
    es = names[e]
    w = (np.arange(len(e)) % 7 + 1).astype(float)
    q = query("Q(a, c) :- E(a, b), E(b, c), W(c)", semiring="min-plus")
    W = faq.Factor.from_dict(
        {(f"n{i}",): float(i % 3) for i in range(0, 300, 2)}, ["c"], "min-plus"
    )
    pdf = pd.DataFrame({"u": es[:, 0], "v": es[:, 1], "value": w})
    want = q.solve(E=pdf, W=W).to_dict()
    with faq.settings(local_rows=0):
        run = q.run(E=spark.createDataFrame(pdf), W=W)
    assert not run.result.is_local
    assert run.result.to_dict() == want
    assert IN_TASK in run.explain()


def test_explain_before_a_run_says_the_solve_runs_in_one_task(spark):
    E = _frame(spark, _edges())
    q = query(TWO_HOP, semiring="counting")
    with faq.settings(local_rows=0):
        text = q.explain(E=E)
    assert f"{IN_TASK}: the inputs kept in Spark hold" in text, text
    assert "cells" not in text and "runs on" not in text, text


@pytest.mark.parametrize("task_rows", [0, 100])
def test_past_query_task_rows_the_steps_are_partitioned(spark, task_rows):
    e = _edges()
    q = query(TRIANGLE, semiring="counting")
    want = q.solve(E=pd.DataFrame({"u": e[:, 0], "v": e[:, 1]})).to_dict()
    with faq.settings(local_rows=0, query_task_rows=task_rows):
        run = q.run(E=_frame(spark, e))
    assert run.result.to_dict() == want
    assert run.trace.task == "" and IN_TASK not in run.explain()
    assert all(t.choice.backend == "spark" for t in run.trace.steps)


@pytest.mark.parametrize(
    ("rows", "schema", "words"),
    [
        ([(0, 1, 1.0), (None, 2, 1.0)], "x bigint, y bigint, value double", "'x'"),
        ([(0, 1, 1.0), (1, 2, float("nan"))], "x bigint, y bigint, value double", "'value'"),
    ],
)
def test_bad_rows_in_one_task_raise_the_drivers_error(spark, rows, schema, words):
    """The rows are checked in the task, as the driver checks them: the same error."""
    q = query(TWO_HOP, semiring="min-plus")
    E = spark.createDataFrame(pd.DataFrame(rows, columns=["x", "y", "value"]), schema)
    with pytest.raises(ValueError) as in_driver:
        q.run(E=E)
    with faq.settings(local_rows=0), pytest.raises(ValueError) as in_task:
        q.run(E=E)
    assert words in str(in_task.value), str(in_task.value)
    assert str(in_task.value) == str(in_driver.value)


def test_an_overflow_in_the_task_is_an_overflow_error(spark):
    e = np.array([[0, 1], [1, 2]])
    q = query(TWO_HOP, semiring="counting")
    E = _frame(spark, e, value=np.array([2**62, 4], dtype=np.int64))
    with faq.settings(local_rows=0), pytest.raises(OverflowError):
        q.run(E=E)


def test_an_empty_input_kept_in_spark(spark):
    """Zero rows fit any ``local_rows``: read into the driver, not gathered into a task."""
    q = query(TWO_HOP, semiring="counting")
    E = spark.createDataFrame(pd.DataFrame({"u": [], "v": []}, dtype=np.int64), "u long, v long")
    with faq.settings(local_rows=0):
        run = q.run(E=E)
    assert run.result.to_dict() == {}
    assert IN_TASK not in run.explain()


def test_a_query_in_one_task_is_never_silent(spark, caplog):
    caplog.set_level(logging.INFO, logger="faq")
    q = query(TRIANGLE, semiring="counting")
    with faq.settings(local_rows=0, progress_seconds=0.01):
        q.run(E=_frame(spark, _edges(n=2000, m=200_000)))
    lines = [r.getMessage() for r in caplog.records if r.name == "faq"]
    what = f"query {TRIANGLE}: every step in one Spark task"
    assert any(m.startswith(f"{what}: ") for m in lines), lines


def test_parquet_edges_are_counted_from_their_footers_not_by_a_job(spark, tmp_path):
    """Spark's plan of a Parquet scan has no row count; the files' footers give it, so the
    solve is one job (the task reads the files itself)."""
    e = _edges()
    path = str(tmp_path / "e.parquet")
    pd.DataFrame({"u": e[:, 0], "v": e[:, 1]}).to_parquet(path)
    q = query(TRIANGLE, semiring="counting")
    want = q.solve(E=pd.DataFrame({"u": e[:, 0], "v": e[:, 1]})).to_dict()
    E = spark.read.parquet(path)
    with faq.settings(local_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(E=E), "query-one-task-parquet")
    assert run.result.to_dict() == want
    assert jobs == 1, jobs
    assert IN_TASK in run.explain()


@pytest.mark.parametrize(
    ("backend", "rows", "types", "witness", "rule", "words"),
    [
        ("auto", {"E": 10}, ["bigint"] * 2, False, TWO_HOP, "in one Spark task"),
        ("spark", {"E": 10}, ["bigint"] * 2, False, TWO_HOP, "backend='spark'"),
        ("auto", {}, ["bigint"] * 2, False, TWO_HOP, "every input fits in the driver"),
        ("auto", {"E": 10}, ["bigint"] * 2, True, TWO_HOP, "witnesses"),
        ("auto", {"E": 10}, ["bigint", "string"], False, TWO_HOP, "several types"),
        ("auto", {"E": None}, ["bigint"] * 2, False, TWO_HOP, "not known"),
        ("auto", {"E": 10**9}, ["bigint"] * 2, False, TWO_HOP, "> query_task_rows"),
        ("auto", {"E": 10}, ["bigint"], False, "Q(c) :- E(0, c)", "constants"),
    ],
)
def test_the_planner_says_whether_a_query_runs_in_one_task_and_why(
    backend, rows, types, witness, rule, words
):
    from faq.plan.physical import in_one_task

    ok, why = in_one_task("query_task_rows", [parse_rule(rule)], rows, types, backend, witness)
    assert words in why and ok == why.startswith("in one Spark task"), why
