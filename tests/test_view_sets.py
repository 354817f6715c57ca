"""Set relations in incremental views (``sets=``): a tuple is present at most once.

Oracle: the test keeps each set relation as a Python dict ``{key: annotation}`` and
applies a delta by the rules of :mod:`incremental.sets` (retractions first, then
insertions); after every tick ``view.result()`` equals the brute-force reference
evaluator over those dicts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query, reference_solve
from faq.rule import parse_rule
from incremental import IncrementalView
from tests.helpers import assert_same

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


def model_apply(held: dict, rows: list, mode: str) -> None:
    """Apply a delta to a set ``{key: annotation}`` ("ignore" mode: never refuses here)."""
    for *key, v, w in sorted(rows, key=lambda r: r[-1]):  # retractions first
        key = tuple(key)
        if w < 0 and held.get(key) == v:
            del held[key]
    for *key, v, w in rows:
        key = tuple(key)
        if w > 0 and key not in held:
            held[key] = v


SEMIRINGS = {"counting": semirings.COUNTING, "real": semirings.REAL, "min-plus": semirings.MIN_PLUS}


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@settings(max_examples=max(3, settings.default.max_examples // 3))
@given(data=st.data())
def test_ticks_on_set_relations_match_batch_over_the_sets(spark, semiring, data):
    S = SEMIRINGS[semiring]
    text = data.draw(
        st.sampled_from(["Q(a) :- E(a, b), E(b, c), E(a, c)", "Q(a, c) :- R(a, b), S(b, c)"])
    )
    rule = parse_rule(text)
    values = [1] if S is semirings.COUNTING else [1.0, 2.0]
    view = IncrementalView(query(text, semiring=S), sets="ignore", state="driver")
    held = {n: {} for n in rule.relations}
    row = st.tuples(
        st.integers(0, 2),
        st.integers(0, 2),
        st.sampled_from(values),
        st.sampled_from([1, 1, -1, 2]),
    )
    vtype = "bigint" if S is semirings.COUNTING else "double"
    schema = f"x bigint, y bigint, value {vtype}, _weight bigint"
    for t in range(4):
        deltas = {}
        for n in rule.relations:
            rows = data.draw(st.lists(row, max_size=5), label=f"tick {t}: Δ{n}")
            # one annotation per tuple among a delta's insertions (else refused: tested above)
            first = {}
            rows = [r for r in rows if r[3] < 0 or first.setdefault(r[:2], r[2]) == r[2]]
            deltas[n] = rows
        view.step(**{n: spark.createDataFrame(r, schema) for n, r in deltas.items()})
        for n, rows in deltas.items():
            model_apply(held[n], rows, "ignore")
        want = reference_solve(rule, S, held)
        assert_same(view.result().to_dict(), want, S, f"tick {t}")
