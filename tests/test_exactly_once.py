"""Exactly-once steps (``batch_id``), the ``foreach_batch`` sink function, and where a
view keeps its state."""

from __future__ import annotations

import pytest

from faq import Factor, query
from incremental import IncrementalView, StateError, StepReport

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
SCHEMA = "src bigint, dst bigint, _weight bigint"


def test_a_batch_at_or_below_the_last_one_is_skipped_across_restarts(spark, tmp_path):
    tri = query(TRIANGLE, semiring="counting")
    edges = spark.createDataFrame([(0, 1), (1, 2)], "src bigint, dst bigint")
    view = IncrementalView(tri, state_dir=tmp_path, E=edges)
    assert view.batch_id is None
    d = view.step(batch_id=0, E=spark.createDataFrame([(0, 2, 1)], SCHEMA))
    assert d.scalar() == 1 and view.tick == 1 and view.batch_id == 0
    again = view.step(batch_id=0, E=spark.createDataFrame([(0, 2, 1)], SCHEMA))
    assert again.to_dict() == {} and view.tick == 1
    assert isinstance(view.last_step, StepReport) and view.last_step.skipped is True
    assert view.last_step.batch_id == 0 and view.last_step.terms == ()
    assert view.result().scalar() == 1
    view.step(E=spark.createDataFrame([(2, 3, 1)], SCHEMA))  # no id: keeps the last one
    assert view.batch_id == 0 and view.tick == 2
    reopened = IncrementalView(tri, state_dir=tmp_path)
    assert reopened.batch_id == 0 and reopened.tick == 2
    reopened.step(batch_id=0, E=spark.createDataFrame([(1, 3, 1)], SCHEMA))
    assert reopened.last_step.skipped and reopened.result().scalar() == 1
    reopened.step(batch_id=5, E=spark.createDataFrame([(1, 3, 1)], SCHEMA))
    assert reopened.result().scalar() == 2 and reopened.batch_id == 5
    for bad in (-1, 1.5, "7", True):
        with pytest.raises(ValueError, match="batch_id"):
            reopened.step(batch_id=bad, E=spark.createDataFrame([(1, 4, 1)], SCHEMA))
    assert reopened.tick == 3


def test_foreach_batch_applies_micro_batches_once(spark):
    tri = query(TRIANGLE, semiring="counting")
    view = IncrementalView(tri)
    sink = view.foreach_batch("E")
    sink(spark.createDataFrame([(0, 1, 1), (1, 2, 1)], SCHEMA), 0)
    sink(spark.createDataFrame([(0, 2, 1)], SCHEMA), 1)
    sink(spark.createDataFrame([(0, 2, 1)], SCHEMA), 1)  # a replay
    assert view.result().scalar() == 1 and view.tick == 2 and view.batch_id == 1
    cdc = view.foreach_batch("E", kind="op")
    cdc(spark.createDataFrame([(0, 2, "-"), (2, 3, "+")], "src bigint, dst bigint, op string"), 2)
    assert view.result().scalar() == 0 and view.relation("E").count() == 3
    with pytest.raises(ValueError, match="unknown relation"):
        view.foreach_batch("F")
    with pytest.raises(ValueError, match="unknown change kind"):
        view.foreach_batch("E", kind="debezium")


def test_state_in_spark_takes_retractions_in_every_semiring(spark):
    edges = spark.createDataFrame([(0, 1), (1, 2), (0, 2)], "src bigint, dst bigint")
    view = IncrementalView(query(TRIANGLE, semiring="counting"), state="spark", E=edges)
    assert view.where == "spark"
    view.step(E=spark.createDataFrame([(0, 2, -1)], SCHEMA))
    assert view.result().scalar() == 0
    q = query("Q(a) :- E(a, b)", semiring="max-plus")
    e = spark.createDataFrame([(0, 1, 2.0), (0, 2, 1.0)], "src bigint, dst bigint, value double")
    mp = IncrementalView(q, state="spark", E=e)
    # a retraction (once refused here: "insertions only"), as in the driver state
    d = mp.step(
        E=spark.createDataFrame(
            [(0, 1, 2.0, -1)], "src bigint, dst bigint, value double, _weight bigint"
        )
    )
    assert d.to_dict() == {(0,): 1.0} and mp.result().to_dict() == {(0,): 1.0} and mp.tick == 1
    with pytest.raises(ValueError, match="does not hold"):  # a row it never held
        mp.step(
            E=spark.createDataFrame(
                [(0, 1, 2.0, -1)], "src bigint, dst bigint, value double, _weight bigint"
            )
        )
    assert mp.result().to_dict() == {(0,): 1.0} and mp.tick == 1
    with pytest.raises(ValueError, match="unknown state"):
        IncrementalView(q, state="disk")


def test_bad_weights_are_refused_and_the_view_is_unchanged(spark):
    q = query("Q(a) :- E(a, b)", semiring="min-plus")
    e = Factor.from_dict({(0, 1): 2.0, (0, 2): 3.0}, ("a", "b"), "min-plus")
    view = IncrementalView(q, E=e)
    bad = {
        "does not hold": spark.createDataFrame(
            [(0, 1, 5.0, -1)], "a bigint, b bigint, value double, _weight bigint"
        ),
        "null multiplicit": spark.createDataFrame(
            [(0, 1, 5.0, None)], "a bigint, b bigint, value double, _weight bigint"
        ),
        "integer column": spark.createDataFrame(
            [(0, 1, 5.0, 1.0)], "a bigint, b bigint, value double, _weight double"
        ),
    }
    for match, df in bad.items():
        with pytest.raises(ValueError, match=match):
            view.step(E=df)
        assert view.tick == 0 and view.result().to_dict() == {(0,): 2.0}
    # lowering the minimum: retract the 2.0 row, insert a 4.0 one for the same key
    d = view.step(
        E=spark.createDataFrame(
            [(0, 1, 2.0, -1), (0, 1, 4.0, 1)], "a bigint, b bigint, value double, _weight bigint"
        )
    )
    assert d.to_dict() == {(0,): 3.0} and view.result().to_dict() == {(0,): 3.0}
    assert view.relation("E").to_dict() == {(0, 1): 4.0, (0, 2): 3.0}


def test_a_folder_with_tick_data_but_no_manifest_is_refused(spark, tmp_path):
    (tmp_path / "tick-00000003-abcdef12").mkdir()
    with pytest.raises(StateError, match="no manifest.json"):
        IncrementalView(query(TRIANGLE, semiring="counting"), state_dir=tmp_path)
