"""Incremental views checked against batch evaluation.

Oracle: integrating the deltas equals the batch answer.  The property tests draw
ticks and replay them with the testing kit (:mod:`incremental.testing`): after every
tick, ``view.result()`` and every ``view.relation()`` equal the brute-force reference
evaluator (:func:`faq.reference_solve`) and a batch solve on the relations accumulated
so far, and the change a step returns equals the difference of those answers (rings
and counting) or the new annotations of the keys that changed (other semirings).

Their deltas are pandas frames and the views' states are in the driver, so those ticks
run no Spark job; the test of Spark delta queries (a large delta's path) runs dozens of
Spark jobs a tick and draws few examples.  The named cases use Spark DataFrames; the
triangle case runs the default join (worst-case optimal Generic Join at cyclic bags).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import Factor, query, reference_solve
from faq.rule import parse_rule
from faq.session import checkpoint_ids
from incremental import IncrementalView
from incremental.testing import assert_incremental, ticks
from tests.helpers import spark_jobs

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"


# -- helpers --------------------------------------------------------------------------------
def add(S, acc: dict, delta: dict) -> dict:
    out = dict(acc)
    for k, v in delta.items():
        out[k] = S.add(out[k], v) if k in out else v
    return {k: v for k, v in out.items() if not S.is_zero(v)}


# -- named cases ----------------------------------------------------------------------------
def test_triangle_insert_and_delete(spark):
    # 0-1-2 and 1-2-3 are the two triangles of this 5-edge graph (oriented a < b < c)
    tri = query(TRIANGLE, semiring="counting")
    edges = spark.createDataFrame(
        [(0, 1), (1, 2), (0, 2), (2, 3), (1, 3)], "src bigint, dst bigint"
    )
    view = IncrementalView(tri, E=edges)
    assert view.tick == 0 and view.result().scalar() == 2
    # add 0-3 (closes 0-1-3 and 0-2-3), delete 0-1 (opens 0-1-2 and 0-1-3): net 0
    delta = spark.createDataFrame([(0, 3, 1), (0, 1, -1)], "src bigint, dst bigint, value bigint")
    d = view.step(E=delta)
    assert d.scalar() == 0 and view.result().scalar() == 2 and view.tick == 1


@pytest.mark.parametrize("local", [True, False], ids=["driver", "spark"])
def test_refused_steps_leave_the_view_unchanged(spark, local):
    r = query("Q(a) :- R(a, b), S(b)", semiring="counting")
    R = spark.createDataFrame([(1, 2), (1, 3)], "a bigint, b bigint")
    S = spark.createDataFrame([(2,), (3,)], "b bigint")
    view = IncrementalView(r, state="driver" if local else "spark", R=R, S=S)
    view.local = local
    before = view.result().to_dict()
    assert before == {(1,): 2}
    bad = {
        "unknown relation": dict(T=S),
        "arity": dict(R=S),
        "type": dict(S=spark.createDataFrame([(2, 0.5)], "b bigint, value double")),
        "null key": dict(S=spark.createDataFrame([(None, 1)], "b bigint, value bigint")),
        "key type": dict(S=spark.createDataFrame([("x", 1)], "b string, value bigint")),
        # the first delta is fine, the second deletes a tuple that is not there
        "negative": dict(
            R=spark.createDataFrame([(5, 2, 1)], "a bigint, b bigint, value bigint"),
            S=spark.createDataFrame([(2, -1), (9, -1)], "b bigint, value bigint"),
        ),
    }
    messages = {
        "unknown relation": "unknown relation",
        "arity": "takes 2 key column",
        "type": "type double",
        "null key": "null",
        "key type": "string",
        "negative": "negative multiplicity",
    }
    for case, deltas in bad.items():
        with pytest.raises(ValueError, match=messages[case]):
            view.step(**deltas)
        assert view.tick == 0, case
    assert view.result().to_dict() == before
    assert view.relation("S").to_dict() == {(2,): 1, (3,): 1}
    # and the view still works
    d = view.step(S=spark.createDataFrame([(2, -1)], "b bigint, value bigint"))
    assert d.to_dict() == {(1,): -1} and view.result().to_dict() == {(1,): 1}


def test_non_ring_views_refuse_values_outside_the_semiring(spark):
    q = query("Q(a) :- R(a, b), S(b)", semiring="max-product")
    R = spark.createDataFrame([(1, 2, 0.5)], "a bigint, b bigint, value double")
    S = spark.createDataFrame([(2, 0.5)], "b bigint, value double")
    view = IncrementalView(q, R=R, S=S)
    with pytest.raises(ValueError, match="max-product"):
        view.step(S=spark.createDataFrame([(2, -0.5)], "b bigint, value double"))
    assert view.tick == 0
    d = view.step(S=spark.createDataFrame([(2, 2.0)], "b bigint, value double"))
    assert d.to_dict() == {(1,): 1.0} and view.result().to_dict() == {(1,): 1.0}


def test_empty_start_and_self_join(spark):
    # E named twice: one delta feeds both atoms.  Paths of length two from a.
    q = query("Q(a) :- E(a, b), E(b, c)", semiring="integer")
    view = IncrementalView(q, join="binary")
    assert view.result().to_dict() == {}
    d = view.step(E=spark.createDataFrame([(1, 2), (2, 3), (2, 4)], "x bigint, y bigint"))
    assert d.to_dict() == {(1,): 2} and view.result().to_dict() == {(1,): 2}
    d = view.step(
        E=spark.createDataFrame([(2, 4, -1), (0, 1, 3)], "x bigint, y bigint, value bigint")
    )
    assert d.to_dict() == {(0,): 3, (1,): -1} and view.result().to_dict() == {(0,): 3, (1,): 1}
    assert view.tick == 2


def test_small_deltas_run_in_the_driver_with_generic_join(spark):
    # karate: 45 triangles.  Delete two edges and insert two; the same ticks by the
    # driver-side delta rule and by Spark delta queries give the numpy count.
    from pathlib import Path

    import numpy as np

    from faq.io import edges_dataframe, load_edge_array, undirected_simple
    from faq.testing import triangle_count_numpy

    edges = undirected_simple(load_edge_array(Path(__file__).parent / "data" / "karate.txt"))
    tri = query(TRIANGLE, semiring="counting")
    views = {where: IncrementalView(tri, E=edges_dataframe(edges, spark)) for where in "ds"}
    views["s"].local = False
    current = {tuple(e) for e in edges.tolist()}
    ticks = [[(1, 2, -1), (3, 4, -1), (6, 21, 1)], [(1, 2, 1), (10, 31, 1), (21, 22, 1)]]
    for tick in ticks:
        delta = spark.createDataFrame(tick, "src bigint, dst bigint, value bigint")
        got = {w: v.step(E=delta).scalar() for w, v in views.items()}
        before = triangle_count_numpy(np.asarray(sorted(current)))
        for u, v, w in tick:
            (current.add if w > 0 else current.discard)((u, v))
        after = triangle_count_numpy(np.asarray(sorted(current)))
        assert got == {"d": after - before, "s": after - before}
        assert views["d"].result().scalar() == views["s"].result().scalar() == after
        terms = views["d"].last_step.terms
        assert [t.where for t in terms] == ["driver"] * 3
        assert [t.methods for t in terms] == [("wcoj",)] * 3
        assert {t.where for t in views["s"].last_step.terms} == {"spark"}
    assert views["d"].relation("E").count() == len(current)


def test_string_keys_in_the_driver(spark):
    # lookups by string keys (no SQL IN string), and an empty relation typed by its delta
    q = query("Q(a) :- R(a, b), S(b)", semiring="counting")
    R = spark.createDataFrame([("x", "p"), ("x", "q"), ("y", "q")], "a string, b string")
    view = IncrementalView(q, R=R)
    d = view.step(S=spark.createDataFrame([("q", 2)], "b string, value bigint"))
    assert d.to_dict() == {("x",): 2, ("y",): 2}
    d = view.step(
        R=spark.createDataFrame([("x", "q", -1), ("z", "q", 1)], "a string, b string, value bigint")
    )
    assert d.to_dict() == {("x",): -2, ("z",): 2}
    assert view.result().to_dict() == {("y",): 2, ("z",): 2}
    assert [t.where for t in view.last_step.terms] == ["driver"]


def test_a_step_the_delta_does_not_reach_runs_in_spark(spark):
    # T(c) shares no variable with R: its aggregation is a query over all of T
    q = query("Q(a) :- R(a), T(c)", semiring="integer")
    T = spark.createDataFrame([(1, 2), (2, 3)], "c bigint, value bigint")
    view = IncrementalView(q, T=T)
    d = view.step(R=spark.createDataFrame([(7, 2)], "a bigint, value bigint"))
    assert d.to_dict() == {(7,): 10} and view.result().to_dict() == {(7,): 10}
    assert [t.where for t in view.last_step.terms] == ["spark"]
    # and from T's side, R is a Cartesian factor: all of it is needed, so again Spark
    d = view.step(T=spark.createDataFrame([(5, 1)], "c bigint, value bigint"))
    assert d.to_dict() == {(7,): 2} and view.result().to_dict() == {(7,): 12}
    assert [t.where for t in view.last_step.terms] == ["spark"]


def test_overflow_in_a_delta_term_is_an_overflow_error_and_refused(spark):
    q = query("Q(a) :- R(a, b), S(b)", semiring="counting")
    R = spark.createDataFrame([(1, 2, 2**62)], "a bigint, b bigint, value bigint")
    view = IncrementalView(q, R=R)
    for local in (True, False):
        view.local = local
        with pytest.raises(OverflowError, match="overflowed 64-bit integers"):
            view.step(S=spark.createDataFrame([(2, 4)], "b bigint, value bigint"))
        assert view.tick == 0 and view.relation("S").to_dict() == {}
    d = view.step(S=spark.createDataFrame([(2, 1)], "b bigint, value bigint"))
    assert d.to_dict() == {(1,): 2**62}


def test_user_semiring_view_in_the_driver(spark):
    # bottleneck paths (max, min) have no native Spark path: the driver applies the
    # semiring's own Python functions
    bottleneck = semirings.Semiring(
        name="bottleneck-view-test", zero=0.0, one=float("inf"), add=max, mul=min
    )
    q = query("Q(a) :- E(a, b), E(b, c)", semiring=bottleneck)
    E = spark.createDataFrame([(1, 2, 5.0), (2, 3, 3.0)], "a bigint, b bigint, value double")
    view = IncrementalView(q, E=E)
    assert view.result().to_dict() == {(1,): 3.0}
    d = view.step(E=spark.createDataFrame([(2, 4, 4.0)], "a bigint, b bigint, value double"))
    assert [t.where for t in view.last_step.terms] == ["driver", "driver"]
    assert view.result().to_dict() == {(1,): 4.0} and d.to_dict() == {(1,): 4.0}


def _plan_text(df) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(mode="simple")
    return re.sub(r"#\d+L?|plan_id=\d+|\[\d+\]", "#", buf.getvalue())


def _cached(spark) -> dict[int, int]:
    """Cached RDDs of the session (id -> cached partitions), once Spark's cleaner (a
    background thread) is idle."""

    def now() -> dict[int, int]:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        return {int(i.id()): int(i.numCachedPartitions()) for i in infos}

    last, current = None, now()
    for _ in range(20):  # at most 2 s
        if current == last:
            break
        time.sleep(0.1)
        last, current = current, now()
    return current


def _run_spark_view(spark, ticks: int, at: tuple[int, ...]):
    """A Spark-resident integer view over ``ticks`` ticks; at the ticks in ``at``, the plans
    of its state, the cached RDDs of the session and the checkpoints its state reads."""
    q = query("Q(a, b) :- E(a, b)", semiring="integer")
    E = Factor.from_dict({(0, 0): 1}, ("a", "b"), "integer")
    cached = {0: _cached(spark)}
    view = IncrementalView(q, state="spark", E=E)
    plans, live = {}, {}
    expected = {(0, 0): 1}
    for t in range(1, ticks + 1):
        # insert (t, t % 7) with weight 2, delete one copy of the tuple of t - 1
        delta = {(t, t % 7): 2, (t - 1, (t - 1) % 7): -1}
        view.step(E=Factor.from_dict(delta, ("a", "b"), "integer"))
        expected = add(semirings.INTEGER, expected, delta)
        if t in at:
            result, relation = view.result().df, view.relation("E").df
            plans[t] = (_plan_text(result), _plan_text(relation))
            live[t] = checkpoint_ids(result) | checkpoint_ids(relation)
            cached[t] = _cached(spark)
    assert view.tick == ticks
    assert view.result().to_dict() == expected
    return plans, cached, live


def test_plans_and_cached_blocks_of_a_spark_view_stay_bounded_over_many_ticks(spark, use_settings):
    """Regression: cached blocks grew with every tick (14 at tick 10, 135 at 300: about
    0.4 a tick), and, waiting on Spark's cleaner with both collectors run every 10
    ticks, still from 22 to 50 late in a full run.  The view now frees the checkpoints
    a commit replaces.  (75 ticks with the collectors run every 5: the 12 rounds of
    garbage collection between the two looks that 150 ticks gave at the default, in
    half the time; the old growth would add about 25 blocks between them.)"""
    use_settings(gc_ticks=5)
    plans, cached, live = _run_spark_view(spark, 75, (15, 75))
    assert plans[15] == plans[75]  # the plans of the state do not grow with the ticks
    assert "ExistingRDD" in plans[75][0]  # a scan of the checkpoint, no lineage
    blocks = {t: sum(c.values()) for t, c in cached.items()}
    assert blocks[75] <= blocks[15] + 12, blocks
    # sharper: of the RDDs cached since the view began, only the state of tick 75 is
    # left, besides what result() and relation() handed out at tick 15 (those wait on
    # the cleaner: a caller may still hold them)
    made = set(cached[75]) - set(cached[0]) - live[15]
    assert made <= live[75], sorted(made - live[75])


def test_dataframes_handed_out_by_a_spark_view_stay_readable(spark):
    """A result, a relation or a change the caller keeps is never freed under it."""
    q = query("Q(a) :- E(a, b), F(b)", semiring="integer")
    E = Factor.from_dict({(1, 1): 1, (2, 1): 1}, ("a", "b"), "integer")
    F = Factor.from_dict({(1,): 2}, ("b",), "integer")
    view = IncrementalView(q, state="spark", E=E, F=F)
    view.step(E=Factor.from_dict({(3, 1): 1}, ("a", "b"), "integer"))
    kept_result, kept_relation = view.result(), view.relation("E")
    derived = kept_result.df.filter("a > 1")  # the caller's own DataFrame over the result
    view.local = False  # a change computed by Spark delta queries
    kept_change = view.step(F=Factor.from_dict({(1,): 1}, ("b",), "integer"))
    view.local = True
    for t in range(4, 4 + 2 * faq.settings().gc_ticks):  # past two rounds of garbage collection
        view.step(E=Factor.from_dict({(t, 1): 1}, ("a", "b"), "integer"))
    assert kept_result.to_dict() == {(1,): 2, (2,): 2, (3,): 2}
    assert kept_relation.to_dict() == {(1, 1): 1, (2, 1): 1, (3, 1): 1}
    assert sorted(r[0] for r in derived.collect()) == [2, 3]
    assert kept_change.to_dict() == {(1,): 1, (2,): 1, (3,): 1}
    assert len(view.result().to_dict()) == 3 + 2 * faq.settings().gc_ticks


def test_a_refused_step_of_a_spark_view_leaves_no_checkpoint_behind(
    spark, monkeypatch, use_settings
):
    import incremental.spark_keyed as keyed

    made: list[frozenset[int]] = []
    materialise = keyed.SparkContext.materialise

    def spy(self, df):
        out = materialise(self, df)
        made.append(checkpoint_ids(out))
        return out

    monkeypatch.setattr(keyed.SparkContext, "materialise", spy)
    # every change is folded into a new base at once: the refused step materialises one
    use_settings(log_rows=0, log_fraction=0.0)
    q = query("Q(a) :- E(a, b)", semiring="counting")
    view = IncrementalView(
        q, state="spark", E=Factor.from_dict({(1, 1): 1}, ("a", "b"), "counting")
    )
    view.local = False
    made.clear()
    with pytest.raises(ValueError, match="negative"):
        view.step(E=Factor.from_dict({(1, 1): -2, (5, 5): 1}, ("a", "b"), "integer"))
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}
    assert made, "the refused step materialised nothing: the test no longer covers the case"
    left = set().union(*made) & set(_cached(spark))
    assert not left, sorted(left)


def test_a_durable_driver_view_keeps_few_files_over_300_ticks(spark, tmp_path):
    """Old tick folders are collected: the folder holds the last commit's files only."""
    q = query("Q(a) :- E(a, b)", semiring="integer")
    E = Factor.from_dict({(0, 0): 1}, ("a", "b"), "integer")
    view = IncrementalView(q, state_dir=tmp_path, E=E)
    counts = {}
    for t in range(1, 301):
        d = {(t, t % 5): 1, (t - 1, (t - 1) % 5): -1}
        view.step(E=Factor.from_dict(d, ("a", "b"), "integer"))
        if t in (30, 300):
            # the view's lease and lock files aside (incremental.lock)
            counts[t] = sum(
                len([f for f in files if f not in ("lease.json", ".lock")])
                for _, _, files in os.walk(tmp_path)
            )
    assert view.result().to_dict() == {(300,): 1}
    assert counts[300] <= counts[30] <= 6, counts
    assert len(list(tmp_path.glob("tick-*"))) <= 3


def test_a_durable_spark_view_keeps_few_tick_folders(spark, tmp_path):
    """Old tick folders of a Spark-resident view are collected too (its relations are a
    base and a log, which may sit in different folders)."""
    q = query("Q(a) :- E(a, b)", semiring="integer")
    E = Factor.from_dict({(0, 0): 1}, ("a", "b"), "integer")
    view = IncrementalView(q, state="spark", state_dir=tmp_path, E=E)
    folders = []
    for t in range(1, 9):
        d = {(t, t % 5): 1, (t - 1, (t - 1) % 5): -1}
        view.step(E=Factor.from_dict(d, ("a", "b"), "integer"))
        folders.append(len(list(tmp_path.glob("tick-*"))))
    assert view.result().to_dict() == {(8,): 1}
    assert max(folders) <= 3, folders


def test_deltas_gather_in_a_log_that_is_folded_into_the_relation(spark, use_settings):
    use_settings(log_rows=2, log_fraction=0.0)
    q = query("Q(a) :- R(a, b), S(b)", semiring="integer")
    R = Factor.from_dict({(1, 2): 1, (1, 3): 1, (4, 3): 2}, ("a", "b"), "integer")
    S = Factor.from_dict({(2,): 1, (3,): 1}, ("b",), "integer")
    view = IncrementalView(q, state="spark", R=R, S=S)
    state = {"R": R.to_dict(), "S": S.to_dict()}
    ticks = [
        {"R": {(1, 2): -1, (5, 2): 3}},
        # 3 changed keys pass the limit of 2: they are folded into R's base
        {"R": {(5, 2): -3, (6, 3): 1}, "S": {(3,): 2}},
        {"R": {(7, 2): 1, (8, 2): 1}},  # a new log
        {"S": {(2,): -1}},
    ]
    logged = []
    for tick in ticks:
        view.step(
            **{
                n: Factor.from_dict(d, R.vars if n == "R" else S.vars, "integer")
                for n, d in tick.items()
            }
        )
        state = {n: add(semirings.INTEGER, state[n], tick.get(n, {})) for n in state}
        logged.append(view._state.m.rels["R"].over.rows > 0)
        want = reference_solve(parse_rule("Q(a) :- R(a, b), S(b)"), semirings.INTEGER, state)
        assert view.result().to_dict() == want
        assert view.relation("R").to_dict() == state["R"]
    assert logged == [True, False, True, True]


def test_durable_view_resumes_at_the_last_commit(spark, tmp_path):
    q = query("Q(a) :- R(a, b), S(b)", semiring="counting")
    R = spark.createDataFrame([(1, 2), (1, 3), (4, 3)], "a bigint, b bigint")
    view = IncrementalView(q, state_dir=tmp_path, R=R)
    view.step(S=spark.createDataFrame([(3, 2)], "b bigint, value bigint"))
    with pytest.raises(ValueError):  # refused: nothing is written
        view.step(S=spark.createDataFrame([(2, -1)], "b bigint, value bigint"))
    reopened = IncrementalView(q, state_dir=tmp_path)
    assert reopened.tick == 1
    assert reopened.result().to_dict() == {(1,): 2, (4,): 2}
    d = reopened.step(S=spark.createDataFrame([(2, 1)], "b bigint, value bigint"))
    assert d.to_dict() == {(1,): 1} and reopened.result().to_dict() == {(1,): 3, (4,): 2}
    assert len(list(tmp_path.glob("tick-*"))) <= 2  # old ticks' files are removed
    with pytest.raises(ValueError, match="already holds a view"):
        IncrementalView(q, state_dir=tmp_path, R=R)
    with pytest.raises(ValueError, match="holds a view of"):
        IncrementalView(query("Q(a) :- R(a, b), S(b)", semiring="integer"), state_dir=tmp_path)


# -- property tests -------------------------------------------------------------------------
# The ticks are drawn and replayed by the testing kit (incremental.testing): after every
# tick, step()'s change, result() and every relation() equal a batch solve and the
# brute-force oracle, an illegal tick is refused and changes nothing, a replayed batch id
# is skipped.
QUERIES = {
    "triangle": TRIANGLE,
    "chain": "Q(i, l) :- A(i, j), B(j, k), C(k, l)",
    "4-cycle": "Q() :- R(a, b), S(b, c), T(c, d), U(d, a)",
    "self-join": "Q(a) :- E(a, b), E(b, c), F(c)",
}

# a driver-side tick is a few lookups and joins, a tick of Spark delta queries dozens of
# Spark jobs: the "ci" profile (10 examples) gets 5, 3 and 2 examples here, "long" 100,
# 66 and 20
MANY = max(5, settings.default.max_examples // 2)
SOME = max(3, settings.default.max_examples // 3)
FEW = max(2, settings.default.max_examples // 10)


class SparkDeltaQueries(IncrementalView):
    """A view whose delta queries all run as Spark queries (``view.local = False``), as a
    large delta's do; every step checks that they did."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.local = False

    def step(self, batch_id: int | None = None, **deltas: Any) -> Factor:
        out = super().step(batch_id=batch_id, **deltas)
        assert self.last_step is not None
        assert {t.where for t in self.last_step.terms if not t.skipped} <= {"spark"}
        return out


# Small deltas run their delta rule in the driver (lookups, then the local kernel); the
# Spark path is what large deltas use: both are checked, with both joins.
@pytest.mark.parametrize("name", ["triangle", "self-join"])
@settings(max_examples=MANY)
@given(data=st.data())
def test_counting_views_match_batch(name, data):
    q = query(QUERIES[name], semiring="counting")
    join = data.draw(st.sampled_from(["auto", "binary"]), label="join")
    assert_incremental(q, data.draw(ticks(q, keys=range(4), max_ticks=3)), join=join)


@pytest.mark.parametrize("name", ["chain", "4-cycle"])
@settings(max_examples=MANY)
@given(data=st.data())
def test_integer_and_real_views_match_batch(name, data):
    q = query(QUERIES[name], semiring="real" if name == "chain" else "integer")
    join = data.draw(st.sampled_from(["auto", "binary"]), label="join")
    assert_incremental(q, data.draw(ticks(q, keys=range(4), max_ticks=3)), join=join)


@pytest.mark.parametrize("name", ["triangle", "4-cycle", "self-join"])
@settings(max_examples=FEW)
@given(data=st.data())
def test_spark_delta_queries_match_batch(spark, name, data):
    q = query(QUERIES[name], semiring="integer" if name == "4-cycle" else "counting")
    # the first example is the smallest drawn: two rows per relation keep it a join
    t = data.draw(ticks(q, keys=range(4), max_ticks=2, min_rows=2))
    assert_incremental(q, t, make_view=SparkDeltaQueries)


@pytest.mark.parametrize("semiring", ["max-product", "boolean"])
@settings(max_examples=SOME)
@given(data=st.data())
def test_insert_only_views_match_batch(semiring, data):
    q = query(QUERIES["chain" if semiring == "max-product" else "triangle"], semiring=semiring)
    t = data.draw(ticks(q, keys=range(4), max_ticks=3, retract=False))
    assert_incremental(q, t, join="binary")


def test_progress_lines_for_loads_and_ticks(spark, caplog):
    import logging

    edges = spark.createDataFrame([(1, 2), (2, 3), (1, 3)], "src long, dst long")
    with caplog.at_level(logging.INFO, logger="faq"):
        view = IncrementalView(query(TRIANGLE, semiring="counting"), E=edges)
        view.step(E=spark.createDataFrame([(3, 4, 1)], "src long, dst long, value long"))
    text = caplog.text
    assert "3 rows loaded, initial output 1 rows" in text
    assert "step 1/1" in text  # the engine's own step line
    assert "tick 1: ΔE 1 rows -> change of 0 rows (driver)" in text


def test_a_small_tick_runs_a_handful_of_spark_jobs(spark):
    """Regression: a delta made by ``createDataFrame(list)`` has no size estimate, so it was
    kept in Spark and every count of it ran jobs (23 jobs a tick).  Now it is read once,
    and the state it meets is in the driver."""
    edges = spark.createDataFrame([(1, 2), (2, 3), (1, 3), (3, 4)], "src long, dst long")
    view = IncrementalView(query(TRIANGLE, semiring="counting"), E=edges)
    delta = spark.createDataFrame([(2, 4, 1), (1, 4, 1)], "src long, dst long, value long")
    d, jobs = spark_jobs(spark, lambda: view.step(E=delta), "one-tick")
    assert d.scalar() == 3 and view.result().scalar() == 4  # K4 on 1..4, one triangle before
    # the state is in the driver: the only job reads the delta (parallelized rows)
    assert jobs <= 1, jobs
    # a delta made from pandas is a local relation: collected without any job
    import pandas as pd

    local = spark.createDataFrame(pd.DataFrame({"src": [1], "dst": [5], "value": [1]}))
    _, jobs = spark_jobs(spark, lambda: view.step(E=local), "local-tick")
    assert local.isLocal() and jobs == 0, jobs


def test_a_small_view_in_a_session_left_at_200_partitions(spark):
    """Regression: a view's state took the session's shuffle partitions (Spark's default
    200: a 4-edge view ran 200 tasks per merge).  It is sized by its rows now."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        edges = spark.createDataFrame([(1, 2), (2, 3), (1, 3), (3, 4)], "src long, dst long")
        tri = query(TRIANGLE, semiring="counting")
        view = IncrementalView(tri, state="spark", E=edges)
        view.step(E=spark.createDataFrame([(2, 4, 1)], "src long, dst long, value long"))
        assert view.result().scalar() == 2
        assert view._state.ctx.partitions <= 2
        assert view._state.m.rels["E"].base.rdd.getNumPartitions() <= 2
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
