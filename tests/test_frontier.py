"""A linear path program's rounds as GraphBLAS frontier products (faq/frontier.py): the
same fixpoint, the same rounds and the same refusals as the driver's loop of delta rules
(``library_runners=False``), for every selective semiring with library operations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
from faq import Factor, query
from faq.plan import DivergenceError
from faq.reference import reference_fixpoint

FORWARD = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
BACKWARD = "D(x) :- S(x)\nD(y) :- E(y, x), D(x)"
VALUES = {
    "min-plus": st.sampled_from([0.0, 1.0, 2.5, 7.0, -1.0]),
    "max-plus": st.sampled_from([0.0, -1.0, -2.5, 3.0]),
    "max-product": st.sampled_from([0.25, 0.5, 1.0, 2.0]),
    "boolean": st.just(True),
}
GRAPHBLAS = "every round one GraphBLAS product ΔD ⊕.⊗ E"


@st.composite
def cases(draw):
    S = draw(st.sampled_from(sorted(VALUES)))
    keys = st.integers(0, 7) if draw(st.booleans()) else st.sampled_from(list("abcdefgh"))
    pairs = draw(st.lists(st.tuples(keys, keys), max_size=20, unique=True))
    E = {p: draw(VALUES[S]) for p in pairs}
    src = {(x,): draw(VALUES[S]) for x in draw(st.sets(keys, max_size=2))}
    return S, draw(st.sampled_from([FORWARD, BACKWARD])), E, src


def run(S, text, E, src, **kw):
    q = query(text, semiring=S)
    rels = {"E": Factor.from_dict(E, ["a", "b"], S), "S": Factor.from_dict(src, ["a"], S)}
    with faq.settings(**kw):
        try:
            return q.run(**rels), None
        except DivergenceError as exc:
            return None, str(exc)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_frontier_rounds_equal_the_drivers_loop(case):
    """Values exactly, round by round (Δ rows, rows read, rows derived), and the same
    refusal of an improving cycle or a value outside the semiring."""
    S, text, E, src = case
    got, got_error = run(S, text, E, src)
    want, want_error = run(S, text, E, src, library_runners=False)
    assert got_error == want_error
    if want is None:
        return
    assert got.result.to_dict() == want.result.to_dict()
    strip = [(r.round, r.delta, r.rows_in, r.derived) for r in got.rounds]
    assert strip == [(r.round, r.delta, r.rows_in, r.derived) for r in want.rounds]
    assert GRAPHBLAS in got.explain() and GRAPHBLAS not in want.explain()
    ref = {"E": E, "S": src}
    assert want.result.to_dict() == pytest.approx(reference_fixpoint(text, S, ref)["D"])


def test_zero_weight_edges_witnesses_and_a_negative_cycle():
    E = {(0, 1): 0.0, (1, 2): 2.0, (0, 2): 5.0}
    d = query(FORWARD, semiring="min-plus").solve(
        S=Factor.from_dict({(0,): 0.0}, ["a"], "min-plus"),
        E=Factor.from_dict(E, ["a", "b"], "min-plus"),
        witness=True,
    )
    assert d.to_dict() == {(0,): 0.0, (1,): 0.0, (2,): 2.0}
    assert d.path((2,)) == [(0,), (1,), (2,)]
    E[(2, 0)] = -3.0
    _, error = run("min-plus", FORWARD, E, {(0,): 0.0})
    _, want = run("min-plus", FORWARD, E, {(0,): 0.0}, library_runners=False)
    assert error == want and "improves values each time around" in error


def test_a_product_reaching_zero_derives_no_row():
    """Max-product underflow: 1e-200 × 1e-200 is 0.0, the semiring's zero, which the
    delta rule drops; so does the frontier."""
    E = {(0, 1): 1e-200, (1, 2): 1e-200}
    got, _ = run("max-product", FORWARD, E, {(0,): 1.0})
    want, _ = run("max-product", FORWARD, E, {(0,): 1.0}, library_runners=False)
    assert got.result.to_dict() == want.result.to_dict() == {(0,): 1.0, (1,): 1e-200}


def test_other_shapes_and_semirings_keep_the_drivers_loop():
    for S, text, E in [
        ("counting", "P(x) :- S(x); P(y) :- P(x), E(x, y)", {(0, 1): 1}),  # ⊕ adds
        ("min-plus", "P(x) :- S(x); P(y) :- P(x), E(x, y), E(y, x)", {(0, 1): 1}),
        ("min-plus", "P(x) :- S(x); P(x) :- P(x), E(x, x)", {(0, 0): 1}),  # one variable
    ]:
        got, _ = run(S, text, E, {(0,): 1})
        assert "GraphBLAS product" not in got.explain()
