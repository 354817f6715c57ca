"""Deletions in every semiring: the delta format of incremental views, checked against batch.

A delta holds key columns, a ``value`` column (the annotation) and a ``_weight``
column (+1 adds the annotated row, -1 retracts one copy of it).  The testing kit
(:mod:`incremental.testing`) keeps its own model of each relation, a multiset of
annotated rows ``(key, value)``:

* for rings and counting the annotation of a key is ``Σ weight · value`` over its
  rows, and a step returns ΔQ, the signed difference of the outputs;
* for every other semiring (boolean, max-product, min-plus, max-plus and a user
  semiring) the annotation of a key is the ⊕ of the values of the rows present,
  each counted with its multiplicity; rows annotated zero are ignored; a step
  returns the new annotation of every output key whose annotation changed (the
  semiring's zero for a key that is gone), and retracting a row that is not
  present is refused with ValueError, leaving the view as it was.

Oracle: after every tick ``view.result()`` equals the brute-force reference
evaluator (:func:`faq.reference_solve`) and a batch solve on the model's relations,
and the factor the step returned equals the change those answers define
(:func:`incremental.testing.assert_incremental`).  Ticks
(:func:`incremental.testing.ticks`) mix insertions, retractions of rows the model
holds, annotation changes (retract ``(k, old)`` and insert ``(k, new)`` in one delta)
and retraction of every row of a key, with an illegal tick tried among them.  The
deltas are pandas frames and the views' states are in the driver: no Spark job.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query
from incremental.testing import assert_incremental, delta_frame, ticks
from semirings import Semiring

BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)

SEMIRINGS: dict[str, Semiring] = {
    "boolean": semirings.BOOLEAN,
    "max-product": semirings.MAX_PRODUCT,
    "min-plus": semirings.MIN_PLUS,
    "max-plus": semirings.MAX_PLUS,
    "bottleneck": BOTTLENECK,
    "counting": semirings.COUNTING,
    "integer": semirings.INTEGER,
}
NON_RING = ["boolean", "max-product", "min-plus", "max-plus", "bottleneck"]

CHAIN = "Q(a, c) :- R(a, b), S(b, c)"
QUERIES = {
    "chain": CHAIN,
    "triangle": "Q() :- E(a, b), E(b, c), E(a, c)",
    "grouped triangle": "Q(a) :- E(a, b), E(b, c), E(a, c)",
    "4-cycle": "Q(a, c) :- R(a, b), S(b, c), T(c, d), U(d, a)",
}
NAMES = list(QUERIES)

# a tick is a few driver-side lookups and joins: the "ci" profile (10 examples) gets 5
# examples per semiring here, "long" 100
MANY = max(5, settings.default.max_examples // 2)


def needs_session(request: pytest.FixtureRequest, S: Semiring) -> None:
    """A user semiring without declared Spark operations still builds its UDFs to read
    local values: those need a Spark session."""
    if S.spark is None:
        request.getfixturevalue("spark")


# -- property test: every semiring, every kind of change -----------------------------------
@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@settings(max_examples=MANY)
@given(data=st.data())
def test_ticks_of_insertions_and_retractions_match_batch(request, semiring, data):
    S = SEMIRINGS[semiring]
    needs_session(request, S)
    q = query(QUERIES[data.draw(st.sampled_from(NAMES), label="query")], semiring=S)
    t = data.draw(ticks(q, keys=range(3), max_ticks=3), label="ticks")
    replay = assert_incremental(q, t)
    assert replay.outcomes == ["committed"] * len(t.steps)


# -- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize("semiring", NON_RING)
def test_retracting_a_row_that_is_not_present_is_refused(request, semiring):
    S = SEMIRINGS[semiring]
    needs_session(request, S)
    lo, hi = (True, True) if S is semirings.BOOLEAN else (0.5, 2.0)

    def tick(**rows):
        return {n: delta_frame(r, S, 2) for n, r in rows.items()}

    initial = tick(
        R=[((1, 2), lo, 1), ((1, 2), hi, 1), ((3, 2), lo, 1)],  # boolean: (1, 2) twice
        S=[((2, 5), hi, 1), ((2, 7), lo, 1)],
    )
    good = tick(R=[((3, 2), lo, -1), ((0, 1), hi, 1)])  # one good tick first
    bad = {
        "absent key": tick(R=[((0, 0), lo, -1)]),
        "retracted at the last tick": tick(R=[((3, 2), lo, -1)]),
        "one copy retracted twice": tick(S=[((2, 5), hi, -1), ((2, 5), hi, -1)]),
        "beside a valid delta": tick(
            S=[((2, 6), hi, 1), ((2, 7), lo, -1)], R=[((1, 2), lo, -1), ((0, 0), lo, -1)]
        ),
    }
    if S is not semirings.BOOLEAN:
        bad["present key, other value"] = tick(R=[((1, 2), 1.0, -1)])
    # the view still works, and holds every row the refused steps would have touched
    last = tick(R=[((1, 2), lo, -1), ((1, 2), hi, -1)], S=[((2, 5), hi, -1)])
    replay = assert_incremental(query(CHAIN, semiring=S), initial, [good, *bad.values(), last])
    assert replay.outcomes == ["committed", *["refused"] * len(bad), "committed"], bad
    assert replay.refusals == len(bad)


@pytest.mark.parametrize(
    "name", ["min-plus", "max-plus", "max-product", "boolean", "counting", "real", "integer"]
)
def test_retracting_the_row_of_a_relation_without_keys(name):
    """A relation without key columns (``C()``) holds at most one row: retracting it empties
    the answer, and putting it back restores it, as a batch solve over the same relations
    says (a min/max view used to keep its old answer: the change of a key-less relation
    was read as no change)."""
    import pandas as pd

    from incremental import IncrementalView

    S = semirings.get(name)
    one = S.one if name != "real" else 2.0
    q = query("Q(a) :- E(a, b), C()", semiring=name)
    E = pd.DataFrame({"a": [1, 2, 2], "b": [3, 4, 5]})
    C = pd.DataFrame({"value": [one]})
    view = IncrementalView(q, E=E, C=C)

    def batch(c: pd.DataFrame) -> dict:
        return q.solve(E=E, C=c).to_dict()

    assert view.result().to_dict() == batch(C)
    view.step(C=C.assign(_weight=-1))
    assert view.result().to_dict() == batch(C.iloc[:0]) == {}
    view.step(C=C.assign(_weight=1))
    assert view.result().to_dict() == batch(C)
