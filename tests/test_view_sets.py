"""Set relations in incremental views (``sets=``): a tuple is present at most once.

The property test draws ticks for set relations with :func:`incremental.testing.ticks`
(``sets=``: keys inserted again, retractions of what a set does not hold, rows repeated,
dropped by ``"ignore"``; each key once for ``"refuse"``) and replays them with
:func:`incremental.testing.assert_incremental`, whose model reads a set relation by the
rules of :mod:`incremental.sets` (retractions first, then insertions): after every tick
``step()``, ``result()`` and ``relation()`` equal a batch solve and the brute-force
reference evaluator over the sets, and an illegal tick is refused and changes nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import semirings
from faq import query
from incremental import IncrementalView
from incremental.testing import assert_incremental, ticks

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
EDGES = "src bigint, dst bigint, _weight bigint"
GRAPH = [(0, 1, 1), (1, 2, 1), (0, 2, 1), (2, 3, 1)]


def edges(spark, rows):
    return spark.createDataFrame(rows, EDGES)


def test_bags_are_the_default_an_edge_inserted_twice_counts_twice(spark):
    view = IncrementalView(query(TRIANGLE, semiring="counting"), E=edges(spark, GRAPH))
    view.step(E=edges(spark, [(0, 1, 1)]))
    assert view.result().scalar() == 2


def test_ignore_drops_an_edge_already_present(spark):
    view = IncrementalView(
        query(TRIANGLE, semiring="counting"),
        sets={"E": "ignore"},
        E=edges(spark, [*GRAPH, (0, 1, 1)]),  # a duplicate in the initial contents too
    )
    assert view.result().scalar() == 1
    d = view.step(E=edges(spark, [(0, 1, 1), (1, 2, 3), (1, 3, 1), (1, 3, 1), (5, 6, -1)]))
    assert view.result().scalar() == 2 and d.scalar() == 1  # only (1, 3) is new
    assert view.relation("E").to_dict() == {e[:2]: 1 for e in [*GRAPH, (1, 3, 1)]}
    view.step(E=edges(spark, [(1, 3, -1), (1, 3, -1)]))  # the second retraction is dropped
    assert view.result().scalar() == 1


def test_refuse_refuses_an_edge_already_present_and_leaves_the_view_unchanged(spark):
    view = IncrementalView(
        query(TRIANGLE, semiring="counting"), sets="refuse", E=edges(spark, GRAPH)
    )
    bad = {
        "already holds": [(0, 1, 1)],
        "more than once": [(1, 3, 1), (1, 3, 1)],
        "does not hold": [(5, 6, -1)],
    }
    for what, rows in bad.items():
        with pytest.raises(
            ValueError, match=f"set relation 'E' .*{what}.*\\(0, 1\\)|set relation 'E' .*{what}"
        ):
            view.step(E=edges(spark, rows))
        assert view.result().scalar() == 1 and view.tick == 0
    with pytest.raises(
        ValueError, match="set relation 'E' inserts a tuple the set already holds: \\(0, 1\\)"
    ):
        view.step(E=edges(spark, [(0, 1, 1)]))
    view.step(E=edges(spark, [(0, 1, -1), (0, 1, 1)]))  # retract then insert: allowed
    assert view.result().scalar() == 1 and view.tick == 1
    with pytest.raises(ValueError, match="set relation 'E'"):
        IncrementalView(
            query(TRIANGLE, semiring="counting"), sets="refuse", E=edges(spark, [*GRAPH, (0, 1, 1)])
        )


def test_bad_sets_arguments_are_refused(spark, tmp_path):
    q = query(TRIANGLE, semiring="counting")
    with pytest.raises(ValueError, match="unknown mode 'drop'"):
        IncrementalView(q, sets="drop")
    with pytest.raises(ValueError, match="unknown relation 'F'"):
        IncrementalView(q, sets={"F": "ignore"})
    # the Spark state keeps set relations too (tests/test_view_contract.py compares them)
    assert IncrementalView(q, sets="ignore", state="spark").where == "spark"
    view = IncrementalView(q, sets="ignore", state_dir=tmp_path / "v", E=edges(spark, GRAPH))
    view.step(E=edges(spark, [(0, 1, 1)]))
    with pytest.raises(ValueError, match="set relations are"):
        IncrementalView(q, state_dir=tmp_path / "v")
    with pytest.raises(ValueError, match="set relations are"):
        IncrementalView(q, sets="refuse", state_dir=tmp_path / "v")
    again = IncrementalView(q, sets={"E": "ignore"}, state_dir=tmp_path / "v")
    again.step(E=edges(spark, [(0, 1, 1)]))
    assert again.result().scalar() == 1


SEMIRINGS = {"counting": semirings.COUNTING, "real": semirings.REAL, "min-plus": semirings.MIN_PLUS}
RULES = ["Q(a) :- E(a, b), E(b, c), E(a, c)", "Q(a, c) :- R(a, b), S(b, c)"]


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@given(data=st.data())
def test_ticks_on_set_relations_match_batch_over_the_sets(semiring, data):
    q = query(data.draw(st.sampled_from(RULES), label="rule"), semiring=SEMIRINGS[semiring])
    mode = data.draw(st.sampled_from(["ignore", "refuse"]), label="mode")
    t = data.draw(ticks(q, keys=range(3), max_ticks=4, sets=mode), label="ticks")
    out = assert_incremental(q, t, sets=mode, state="driver")
    assert out.outcomes == ["committed"] * len(t.steps)
