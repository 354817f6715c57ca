"""Row weights in incremental views: ⊕ of ``w`` copies in closed form, never ``w`` copies.

A delta row ``(k, v, _weight=w)`` adds ``w`` copies of the annotated row ``(k, v)``.  In
the semirings without inverses a relation is a multiset of annotated rows: the view
keeps each distinct row once with its multiplicity, and a tuple's annotation is the ⊕
over its rows of ``w`` copies of the value (``w · x``, ``x``, ``x + ln w``, or repeated
doubling for a user semiring).  Oracle: the testing kit's model (:mod:`incremental.testing`;
it ⊕-s the copies by repeated doubling) and :func:`faq.reference_solve`.
"""

from __future__ import annotations

import math
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query
from incremental import IncrementalView
from incremental.testing import assert_incremental, ticks
from tests.test_deletions import BOTTLENECK

SCHEMA = "x bigint, value double, _weight bigint"

GENERAL = {
    "log": semirings.LOG,
    "max-product": semirings.MAX_PRODUCT,
    "min-plus": semirings.MIN_PLUS,
    "bottleneck": BOTTLENECK,
}


@pytest.mark.parametrize(
    "semiring, expected",
    [
        ("log", lambda x, w: x + math.log(w)),
        ("max-product", lambda x, w: x),
        ("max-plus", lambda x, w: x),
        ("bottleneck", lambda x, w: x),
    ],
)
def test_a_huge_weight_is_a_closed_form_not_copies(spark, semiring, expected):
    S = GENERAL.get(semiring) or semirings.get(semiring)
    view = IncrementalView(query("Q(x) :- R(x)", semiring=S), state="driver")
    tracemalloc.start()
    try:
        view.step(R=spark.createDataFrame([(1, 0.5, 10**7), (2, 0.25, 3)], SCHEMA))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"a weight of 10**7 allocated {peak / 2**20:.0f} MB"
    # one distinct row each, with its multiplicity: nothing is copied per unit
    rows = view._state.m.rows["R"].table()
    assert rows.rows == 2 and sorted(rows.values.tolist()) == [3, 10**7]
    view.step(R=spark.createDataFrame([(1, 0.5, 2**62 - 10**7)], SCHEMA))
    got = view.result().to_dict()
    assert math.isclose(got[(1,)], expected(0.5, 2**62), rel_tol=1e-12)
    assert math.isclose(got[(2,)], expected(0.25, 3), rel_tol=1e-12)
    # retracting all but one copy leaves one copy
    view.step(R=spark.createDataFrame([(1, 0.5, -(2**62 - 1))], SCHEMA))
    assert view.result().to_dict()[(1,)] == 0.5
    assert view.relation("R").to_dict() == {(1,): 0.5, (2,): pytest.approx(expected(0.25, 3))}


def test_a_multiplicity_past_64_bits_is_refused_and_the_view_is_unchanged(spark):
    view = IncrementalView(query("Q(x) :- R(x)", semiring="log"), state="driver")
    view.step(R=spark.createDataFrame([(1, 0.0, 2**62)], SCHEMA))
    before = view.result().to_dict()
    for delta in ([(1, 0.0, 2**62)], [(2, 0.0, 2**62), (2, 0.0, 2**62)]):
        with pytest.raises(OverflowError, match="relation 'R': a row's multiplicity"):
            view.step(R=spark.createDataFrame(delta, SCHEMA))
        assert view.result().to_dict() == before and view.tick == 1


@pytest.mark.parametrize("semiring", list(GENERAL))
@settings(max_examples=max(3, settings.default.max_examples // 3))
@given(data=st.data())
def test_ticks_with_weights_match_batch(request, semiring, data):
    # the testing kit's ticks: insertions of 1 to 3 copies, retractions of up to every copy
    # of a present row; its model ⊕-s the copies by doubling, the view in closed form
    S = GENERAL[semiring]
    if S.spark is None:  # a user semiring's local values are read by its Spark UDFs
        request.getfixturevalue("spark")
    text = data.draw(
        st.sampled_from(["Q(a, c) :- R(a, b), S(b, c)", "Q(a) :- R(a, b), R(b, c), R(a, c)"])
    )
    q = query(text, semiring=S)
    assert_incremental(q, data.draw(ticks(q, keys=range(3), max_ticks=3)), state="driver")
