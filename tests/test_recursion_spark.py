"""Recursion partitioned over the cluster (issue 41, point 2): past ``local_rows`` a
recursive group's state, changes and joins stay in Spark (:mod:`faq.spark.fixpoint`)."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings

import faq
from faq import query
from faq.plan import DivergenceError
from faq.plan.physical import fixpoint_in_spark
from faq.reference import reference_fixpoint
from faq.rule import parse_rule
from tests.helpers import spark_jobs
from tests.test_recursion import SSSP, cases

PARTITIONED = "fixpoint partitioned in Spark"


def frame(spark, entries: dict, S: str, arity: int):
    """``entries`` as a Spark DataFrame of ``arity`` key columns and ``value``."""
    from pyspark.sql import types as T

    value = {"boolean": T.BooleanType(), "counting": T.LongType()}.get(S, T.DoubleType())
    fields = [T.StructField(f"k{i}", T.LongType()) for i in range(arity)]
    schema = T.StructType([*fields, T.StructField("value", value)])
    return spark.createDataFrame([(*k, v) for k, v in entries.items()], schema)


def run_in_spark(spark, text: str, S: str, rels: dict, *, task: bool = False, **kw):
    """Run the program over ``rels`` as DataFrames kept in Spark (``local_rows=0``),
    partitioned in Spark or (``task``) whole in one Spark task."""
    q = query(text, semiring=S)
    given_ = {n: frame(spark, rels[n], S, a) for n, a in q.inputs.items()}
    one_task = {} if task else {"program_task_rows": 0}
    with faq.settings(local_rows=0, **one_task):
        return q, q.run(**given_, **kw)


@settings(max_examples=6, deadline=None)
@given(cases())
def test_programs_kept_in_spark_match_the_reference_fixpoint(spark, case):
    """Every built-in semiring, linear and non-linear programs, mutual recursion: the
    answer equals the reference fixpoint; a linear program's rounds ran in Spark and its
    answer stays there."""
    S, text, E, src = case
    q, run = run_in_spark(spark, text, S, {"E": E, "S": src})
    ref = {"E": E, "S": src}
    want = reference_fixpoint(text, S, {n: ref[n] for n in q.inputs})[q.answer]
    assert run.result.to_dict() == pytest.approx(want)
    linear = all(
        sum(a.relation in g.names for a in q.rules[i].atoms) == 1
        for g in q.groups
        for i in g.recursive
    )
    if linear:
        assert PARTITIONED in run.explain()
        assert not run.result.is_local  # the driver holds no relation
        assert all(r.where == ("spark",) for r in run.rounds if r.round)


@pytest.mark.parametrize("broadcast_rows", [None, 0])
def test_shortest_paths_in_spark_equal_the_driver_and_explain_each_round(spark, broadcast_rows):
    """By default every change here is broadcast to the edges; with ``broadcast_rows=0``
    the edges are partitioned by ``x`` once and every change is partitioned to meet them."""
    E = {(i, (i * 7 + 3) % 40): float(1 + i % 5) for i in range(40)}
    E |= {(i, i + 1): 2.0 for i in range(39)}
    scope = faq.settings(broadcast_rows=broadcast_rows) if broadcast_rows is not None else None
    with scope or contextlib.nullcontext():
        _, run = run_in_spark(spark, SSSP, "min-plus", {"E": E, "S": {(0,): 0.0}})
    driver = query(SSSP, semiring="min-plus").solve(
        S=faq.Factor.from_dict({(0,): 0.0}, ["a"], "min-plus"),
        E=faq.Factor.from_dict(E, ["a", "b"], "min-plus"),
    )
    assert run.result.to_dict() == driver.to_dict()
    text = run.explain()
    assert f"{PARTITIONED} (inputs kept in Spark: E)" in text, text
    rounds = [r for r in run.rounds if r.round]
    assert rounds[-1].delta == (("D", 0),)  # the last round finds nothing
    assert all(r.derived >= dict(r.delta)["D"] for r in rounds)
    assert all(r.rows_in == dict(p.delta)["D"] for p, r in zip(run.rounds, rounds, strict=False))
    assert all(f"round {r.round}: ΔD {dict(r.delta)['D']:,} rows [spark]" in text for r in rounds)


def test_a_round_in_spark_costs_a_few_jobs_and_the_edges_are_read_once(spark):
    """The edges are cached once; each round is one checkpoint of the state (Spark's
    adaptive execution adds a job per exchange it runs).  A chain of 26 rounds: when the
    ⊕-merge was a join, Spark's size estimate (kept by each checkpoint) squared every
    round, and round 24 spent minutes multiplying its digits."""
    chain = {(i, i + 1): 1.0 for i in range(26)}  # 27 rounds
    q = query(SSSP, semiring="min-plus")
    E, S = frame(spark, chain, "min-plus", 2), frame(spark, {(0,): 0.0}, "min-plus", 1)
    with faq.settings(local_rows=0, program_task_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(S=S, E=E), "fixpoint-jobs")
    assert run.result.to_dict() == {(i,): float(i) for i in range(27)}
    rounds = len(run.rounds) - 1
    assert rounds == 27
    assert jobs <= 6 * rounds, (jobs, rounds)
    assert max(r.seconds for r in run.rounds) < 60, [r.seconds for r in run.rounds]


def test_witnesses_keep_the_driver_path_and_explain_says_why(spark):
    E = {(0, 1): 1.0, (1, 2): 1.0, (0, 2): 5.0}
    _, run = run_in_spark(spark, SSSP, "min-plus", {"E": E, "S": {(0,): 0.0}}, witness=True)
    assert run.result.to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 2.0}
    assert run.result.path((2,)) == [(0,), (1,), (2,)]
    assert "fixpoint in the driver: witnesses are found from a state in the driver" in (
        run.explain()
    )


@pytest.mark.parametrize("task", [False, True])
def test_a_negative_cycle_in_spark_is_refused(spark, task):
    E = {(0, 1): 1.0, (1, 2): -3.0, (2, 0): 1.0}
    with pytest.raises(DivergenceError, match="improves values each time around"):
        run_in_spark(spark, SSSP, "min-plus", {"E": E, "S": {(0,): 0.0}}, task=task)


@pytest.mark.parametrize("task", [False, True])
def test_counting_around_a_cycle_in_spark_is_refused_after_max_rounds(spark, task):
    text = "P(x) :- S(x); P(y) :- P(x), E(x, y)"
    E = {(0, 1): 1, (1, 0): 1}
    with pytest.raises(DivergenceError, match="still changing after 7 rounds"):
        run_in_spark(spark, text, "counting", {"E": E, "S": {(0,): 1}}, max_rounds=7, task=task)


@pytest.mark.parametrize("task", [False, True])
def test_max_product_diverging_to_infinity_in_spark_is_refused(spark, task):
    text = "P(x) :- S(x); P(y) :- P(x), E(x, y)"
    E = {(0, 1): 1e200, (1, 2): 1e200}
    with pytest.raises(DivergenceError, match="outside the semiring's values"):
        run_in_spark(spark, text, "max-product", {"E": E, "S": {(0,): 1.0}}, task=task)


def test_a_later_group_reads_a_relation_kept_in_spark(spark):
    text = "Q(x) :- R(x), T(x)\nR(x) :- S(x)\nR(y) :- R(x), E(x, y)"
    E = {(0, 1): True, (1, 2): True, (5, 6): True}
    rels = {"E": E, "S": {(0,): True}, "T": {(2,): True, (6,): True}}
    _, run = run_in_spark(spark, text, "boolean", rels)
    assert run.result.to_dict() == {(2,): True}
    assert PARTITIONED in run.explain()


@pytest.mark.parametrize(
    ("backend", "spark_in", "witness", "rule", "words"),
    [
        ("auto", [], False, "D(y) :- D(x), E(x, y)", "fits in the driver"),
        ("driver", ["E"], False, "D(y) :- D(x), E(x, y)", "backend='driver'"),
        ("auto", ["E"], True, "D(y) :- D(x), E(x, y)", "witnesses"),
        ("auto", ["E"], False, "D(y) :- D(x), D(y)", "not linear"),
        ("auto", ["E"], False, "D(y) :- D(x), E(x, y, 3)", "constants"),
        ("spark", [], False, "D(y) :- D(x), E(x, y)", "partitioned in Spark (backend='spark')"),
        ("auto", ["E"], False, "D(y) :- D(x), E(x, y)", "partitioned in Spark (inputs kept"),
    ],
)
def test_the_planner_says_where_a_fixpoint_runs_and_why(backend, spark_in, witness, rule, words):
    import semirings

    r = parse_rule(rule, recursive=True)
    ok, why = fixpoint_in_spark(semirings.get("min-plus"), [r], ["D"], spark_in, backend, witness)
    assert words in why and ok == why.startswith("partitioned")


def test_a_user_semiring_without_native_spark_operations_keeps_the_driver_path(spark):
    import semirings

    widest = semirings.Semiring(
        name="widest-spark", zero=-math.inf, one=math.inf, add=max, mul=min, idempotent=True
    )
    r = parse_rule("D(y) :- D(x), E(x, y)", recursive=True)
    ok, why = fixpoint_in_spark(widest, [r], ["D"], ["E"], "auto", False)
    assert not ok and "no native Spark operations" in why


ONE_TASK = "fixpoint in one Spark task: the inputs kept in Spark hold"


@settings(max_examples=5, deadline=None)
@given(cases())
def test_programs_in_one_spark_task_match_the_reference_fixpoint(spark, case):
    """Past ``local_rows``, inputs that fit ``program_task_rows`` run the whole program in
    one Spark task: every built-in semiring, linear and non-linear programs, mutual
    recursion equal the reference fixpoint; the answer stays in Spark."""
    S, text, E, src = case
    q, run = run_in_spark(spark, text, S, {"E": E, "S": src}, task=True)
    ref = {"E": E, "S": src}
    want = reference_fixpoint(text, S, {n: ref[n] for n in q.inputs})[q.answer]
    assert not run.result.is_local  # the driver holds no relation
    assert run.result.to_dict() == pytest.approx(want)
    text_ = run.explain()
    assert all(r.where == ("one task",) for r in run.rounds), text_
    assert text_.count(ONE_TASK) == sum(1 for g in q.groups if g.recursive), text_


def test_a_program_in_one_task_is_one_spark_job_whatever_its_rounds(spark):
    """A chain of 27 rounds: partitioned in Spark it is a few jobs a round; in one task the
    whole run (inputs checked, gathered, every round, the answer checkpointed) is a few
    jobs in all, and the rounds are still reported one by one."""
    chain = {(i, i + 1): 1.0 for i in range(26)}
    q = query(SSSP, semiring="min-plus")
    E, S = frame(spark, chain, "min-plus", 2), frame(spark, {(0,): 0.0}, "min-plus", 1)
    with faq.settings(local_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(S=S, E=E), "one-task-jobs")
    assert len(run.rounds) - 1 == 27
    assert jobs <= 4, jobs
    assert run.result.to_dict() == {(i,): float(i) for i in range(27)}
    assert "round 27: ΔD 0 rows [one task]" in run.explain()


def test_one_task_takes_inputs_held_in_the_driver_and_string_keys(spark):
    """The source held in the driver travels with the task's function; string keys come
    back as strings."""
    q = query(SSSP, semiring="min-plus")
    E = spark.createDataFrame(
        [("a", "b", 1.0), ("b", "c", 2.0), ("a", "c", 5.0)], "x string, y string, value double"
    )
    S = faq.Factor.from_dict({("a",): 0.0}, ["x"], "min-plus")
    with faq.settings(local_rows=0):
        run = q.run(S=S, E=E)
    assert run.result.to_dict() == {("a",): 0.0, ("b",): 1.0, ("c",): 3.0}
    assert ONE_TASK in run.explain()


@pytest.mark.parametrize(
    ("backend", "rows", "types", "witness", "rule", "words"),
    [
        ("auto", {}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "fits in the driver"),
        ("driver", {"E": 10}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "backend='driver'"),
        ("auto", {"E": 10}, ["bigint"], True, "D(y) :- D(x), E(x, y)", "witnesses"),
        ("auto", {"E": 10}, ["bigint"], False, "D(y) :- D(x), E(x, y, 3)", "constants"),
        ("auto", {"E": 10}, ["bigint", "string"], False, "D(y) :- D(x), E(x, y)", "types"),
        ("auto", {"E": None}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "not known"),
        ("auto", {"E": 10**9}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "> program_task"),
        ("auto", {"E": 10}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "hold 10 rows ≤"),
        ("spark", {"E": 10}, ["bigint"], False, "D(y) :- D(x), E(x, y)", "backend='spark'"),
    ],
)
def test_the_planner_says_whether_a_program_runs_in_one_task_and_why(
    backend, rows, types, witness, rule, words
):
    from faq.plan.physical import in_one_task

    r = parse_rule(rule, recursive=True)
    ok, why = in_one_task("program_task_rows", [r], rows, types, backend, witness)
    assert words in why and ok == why.startswith("in one Spark task"), why


@pytest.mark.parametrize(
    ("S", "rows", "schema", "words"),
    [
        ("min-plus", [(0, 1, 1.0), (None, 2, 1.0)], "x bigint, y bigint, value double", "'x'"),
        ("counting", [(0, 1, 2), (1, 2, -1)], "x bigint, y bigint, value bigint", "'value'"),
        ("min-plus", [(0, 1, 1.0), (1, 2, None)], "x bigint, y bigint, value double", "'value'"),
    ],
)
def test_bad_rows_gathered_into_one_task_raise_the_drivers_error(spark, S, rows, schema, words):
    """The inputs of a program in one task are checked in the task, not by a Spark job
    before it: a null key, a null annotation or one outside the semiring raises a
    ValueError naming the relation and the column, as the driver does for the same rows
    (the same text, but for a null annotation: the driver reads it as a value outside the
    semiring)."""
    q = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring=S)
    E = spark.createDataFrame(rows, schema)
    src = faq.Factor.from_dict({(0,): 0.0 if S == "min-plus" else 1}, ["x"], S)
    with pytest.raises(ValueError) as in_driver:
        q.run(S=src, E=E)
    with faq.settings(local_rows=0), pytest.raises(ValueError) as in_task:
        q.run(S=src, E=E)
    for e in (in_driver, in_task):
        assert "factor 'E'" in str(e.value) and words in str(e.value), str(e.value)
    if rows[1][2] is not None:
        assert str(in_task.value) == str(in_driver.value)


def test_an_empty_input_in_one_task(spark):
    q = query(SSSP, semiring="min-plus")
    E = spark.createDataFrame([], "a bigint, b bigint, value double")
    S = spark.createDataFrame([(3, 0.0)], "a bigint, value double")
    with faq.settings(local_rows=0):
        run = q.run(S=S, E=E)
    assert run.result.to_dict() == {(3,): 0.0}
    assert ONE_TASK in run.explain()


def test_a_program_in_one_task_is_never_silent(spark, caplog):
    """The one job runs every round: while it runs the progress lines name it (with the
    tasks of its stages), and a line at the end gives its rounds and time."""
    import logging

    caplog.set_level(logging.INFO, logger="faq")
    chain = {(i, i + 1): 1.0 for i in range(30)}
    q = query(SSSP, semiring="min-plus")
    E, S = frame(spark, chain, "min-plus", 2), frame(spark, {(0,): 0.0}, "min-plus", 1)
    with faq.settings(local_rows=0, progress_seconds=0.01):
        q.run(S=S, E=E)
    lines = [r.getMessage() for r in caplog.records if r.name == "faq"]
    what = "program D: every round in one Spark task"
    assert any(m.startswith(f"{what}: running") for m in lines), lines
    assert any(m.startswith(f"{what}: 31 rounds in ") for m in lines), lines


def test_a_program_in_one_task_keeps_every_round_in_that_task(spark):
    """The driver's settings travel into the task, but not its placement: with
    ``local_rows=0`` and changes past ``local_delta_rows`` (a transitive closure, which
    the GraphBLAS rounds do not take), every round still runs on the task's kernel."""
    text = "T(x, y) :- E(x, y)\nT(x, z) :- T(x, y), E(y, z)"
    E = {(i, i + 1): True for i in range(12)}
    q = query(text, semiring="boolean")
    with faq.settings(local_rows=0, local_delta_rows=1):
        run = q.run(E=frame(spark, E, "boolean", 2))
    want = {(i, j): True for i in range(13) for j in range(i + 1, 13)}
    assert run.result.to_dict() == want
    assert all(r.where == ("one task",) for r in run.rounds)


def test_no_plan_is_read_for_one_task_when_no_input_can_take_it(spark, monkeypatch):
    """An input kept in Spark holds more than ``local_rows`` rows; with
    ``program_task_rows`` at most that (the defaults: 16M ≤ 20M) no input fits one task,
    so nothing is asked of Spark for it (whether an input fits the driver, its plan: each
    one more query to Spark per run, before the read that asks again); the input is read
    as before."""
    import faq.one_task as one_task

    read: list[object] = []
    real, fits = one_task.explain_cost, one_task.fits
    monkeypatch.setattr(one_task, "explain_cost", lambda df: read.append(df) or real(df))
    monkeypatch.setattr(one_task, "fits", lambda *a: read.append(a) or fits(*a))
    import pandas as pd

    # from pandas: Spark knows their rows (from a list of tuples it would not, and the
    # plans would be read again after the inputs' check job)
    E = spark.createDataFrame(pd.DataFrame({"a": [0], "b": [1], "value": [1.0]}))
    S = spark.createDataFrame(pd.DataFrame({"a": [0], "value": [0.0]}))
    q = query(SSSP, semiring="min-plus")
    assert q.run(S=S, E=E).result.to_dict() == {(0,): 0.0, (1,): 1.0}
    with faq.settings(local_rows=5, program_task_rows=5):
        q.run(S=S, E=E)
    assert read == []
    with faq.settings(local_rows=0):
        assert ONE_TASK in q.run(S=S, E=E).explain()
    assert len(read) == 4  # per input kept in Spark: whether it fits, and its plan, once


def test_a_program_whose_answer_has_no_keys_runs_in_one_task(spark):
    """An answer without keys travels in the task's record, as a query's does: it was
    yielded as a row beside the record, and the job's one row read back was that row,
    without a record (a TypeError)."""
    import pandas as pd

    q = query("Q() :- R(x)\nR(x) :- S(x)\nR(y) :- R(x), E(x, y)", semiring="counting")
    E = spark.createDataFrame(pd.DataFrame({"a": [0, 1, 2], "b": [1, 2, 3]}))
    S = spark.createDataFrame(pd.DataFrame({"a": [0]}))
    with faq.settings(local_rows=0):
        run = q.run(E=E, S=S)
    assert run.result.to_dict() == {(): 4}
    assert all(r.where == ("one task",) for r in run.rounds)
