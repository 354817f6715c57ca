"""Precision of ``real`` views: compensated sums and re-anchoring (incremental.precision).

Oracle: the exact answer, computed with Python fractions by the brute-force reference
evaluator over the exact contents of the relations.  A maintained key must be within
1e-9 of the exact answer relative to itself, plus what a batch solve of the final
relations may itself lose to rounding: a few units of 2⁻⁵³ of the magnitude of the
final terms (Σ |products| at that key), which is zero unless the *current* relations
cancel at that key.  What the history cancelled (a large row inserted, then
retracted) must leave no trace.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query, reference_solve
from faq.rule import parse_rule
from incremental import IncrementalView

SCHEMA = "x bigint, value double, _weight bigint"
EXACT = semirings.Semiring(
    name="exact", zero=Fraction(0), one=Fraction(1), add=operator.add, mul=operator.mul
)


def _step(spark, view, rows):
    return view.step(R=spark.createDataFrame(rows, SCHEMA))


def _batch(view):
    return view.query.solve(R=view.relation("R")).to_dict()


@pytest.mark.parametrize("same_key", [False, True])
def test_a_small_row_survives_a_large_one_inserted_and_retracted(spark, same_key):
    view = IncrementalView(query("Q() :- R(x)", semiring="real"), state="driver")
    _step(spark, view, [(1, 1e16, 1)])
    _step(spark, view, [(1 if same_key else 2, 1.0, 1)])
    d = _step(spark, view, [(1, 1e16, -1)])
    assert view.result().to_dict() == _batch(view) == {(): 1.0}
    assert d.to_dict() == {(): 1.0 - 1e16}
    assert view.relation("R").to_dict() == {(1 if same_key else 2,): 1.0}


def test_an_overflowed_sum_recovers_when_a_row_is_retracted(spark):
    view = IncrementalView(query("Q() :- R(x)", semiring="real"), state="driver")
    _step(spark, view, [(1, 1e308, 1), (2, 1e308, 1)])
    assert view.result().to_dict() == {(): float("inf")}  # as a batch solve says
    _step(spark, view, [(1, 1e308, -1)])
    assert view.result().to_dict() == _batch(view) == {(): 1e308}


def test_a_tuple_annotation_past_the_float_range_is_refused(spark):
    view = IncrementalView(query("Q() :- R(x)", semiring="real"), state="driver")
    _step(spark, view, [(1, 1e308, 1)])
    with pytest.raises(OverflowError, match="relation 'R' would hold 1 tuple"):
        _step(spark, view, [(1, 1e308, 1)])
    assert view.relation("R").to_dict() == {(1,): 1e308} and view.tick == 1


def test_a_durable_real_view_keeps_its_compensation(spark, tmp_path):
    q = query("Q() :- R(x)", semiring="real")
    view = IncrementalView(q, state="driver", state_dir=tmp_path / "v")
    _step(spark, view, [(1, 1e16, 1)])
    _step(spark, view, [(1, 1.0, 1)])
    again = IncrementalView(q, state_dir=tmp_path / "v")
    _step(spark, again, [(1, 1e16, -1)])
    assert again.result().to_dict() == {(): 1.0}


VALUES = [1.0, 2.0, -3.0, 0.5, 1e16, -1e16, 3e16, 1e20, 2.0**-30]
QUERIES = [
    "Q(a) :- R(a, b)",
    "Q(a, c) :- R(a, b), S(b, c)",
    "Q() :- R(a, b), S(b, c)",
    "Q(a) :- R(a, b), R(b, a)",
]


@st.composite
def tick(draw, held: list, arity: int) -> list[tuple]:
    """Insertions of small and large values, retractions of rows inserted before."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        if held and draw(st.booleans()):
            key, v = held.pop(draw(st.integers(0, len(held) - 1)))
            out.append((*key, v, -1))
        else:
            key = draw(st.tuples(*[st.integers(0, 1)] * arity))
            v = draw(st.sampled_from(VALUES))
            held.append((key, v))
            out.append((*key, v, 1))
    return out


@settings(max_examples=max(4, settings.default.max_examples // 2))
@given(data=st.data())
def test_real_ticks_with_large_and_small_values_match_the_exact_answer(spark, data):
    text = data.draw(st.sampled_from(QUERIES), label="query")
    rule = parse_rule(text)
    view = IncrementalView(query(text, semiring="real"), state="driver")
    exact = {n: defaultdict(Fraction) for n in rule.relations}
    held: dict[str, list] = {n: [] for n in rule.relations}
    schema = {
        n: ", ".join([*(f"c{i} bigint" for i in range(k)), "value double", "_weight bigint"])
        for n, k in rule.relations.items()
    }
    for t in range(6):
        deltas = {
            n: data.draw(tick(held[n], k), label=f"tick {t}: Δ{n}")
            for n, k in rule.relations.items()
        }
        view.step(**{n: spark.createDataFrame(r, schema[n]) for n, r in deltas.items()})
        for n, rows in deltas.items():
            for *key, v, w in rows:
                exact[n][tuple(key)] += w * Fraction(v)
        rels = {n: {k: v for k, v in r.items() if v} for n, r in exact.items()}
        want = reference_solve(rule, EXACT, rels)
        size = reference_solve(
            rule, EXACT, {n: {k: abs(v) for k, v in r.items()} for n, r in rels.items()}
        )
        got = view.result().to_dict()
        for k in set(got) | set(want):
            g, w = Fraction(got.get(k, 0.0)), want.get(k, Fraction(0))
            tol = Fraction(1, 10**9) * abs(w) + Fraction(8, 2**53) * size.get(k, 0)
            assert abs(g - w) <= tol, f"tick {t}, key {k}: view {float(g)!r}, exact {float(w)!r}"


def test_large_terms_cancelling_inside_one_tick_are_re_anchored(spark):
    # ΔQ(0) = ΔR ⋈ S + R' ⋈ ΔS = 1e16 - (1e16 + 3) rounds to -4 (exactly -3): the magnitude
    # of the tick's terms (1e16, not |ΔQ|) says the key must be recomputed
    q = query("Q(a) :- R(a, b), S(b)", semiring="real")
    r = spark.createDataFrame([(0, 1, 3.0), (0, 2, 1.0)], "a bigint, b bigint, value double")
    s = spark.createDataFrame([(1, 1.0), (2, 100.0)], "b bigint, value double")
    view = IncrementalView(q, state="driver", R=r, S=s)
    assert view.result().to_dict() == {(0,): 103.0}
    view.step(
        R=spark.createDataFrame([(0, 1, 1e16)], "a bigint, b bigint, value double"),
        S=spark.createDataFrame([(1, 1.0, -1)], "b bigint, value double, _weight bigint"),
    )
    batch = q.solve(R=view.relation("R"), S=view.relation("S")).to_dict()
    assert view.result().to_dict() == batch == {(0,): 100.0}
