"""Deletions in every semiring: the delta format of incremental views, checked against batch.

A delta holds key columns, a ``value`` column (the annotation) and a ``_weight``
column (+1 adds the annotated row, -1 retracts one copy of it).  The test keeps
its own model of each relation, a multiset of annotated rows ``(key, value)``:

* for rings and counting the annotation of a key is ``Σ weight · value`` over its
  rows, and a step returns ΔQ, the signed difference of the outputs;
* for every other semiring (boolean, max-product, min-plus, max-plus and a user
  semiring) the annotation of a key is the ⊕ of the values of the rows present,
  each counted with its multiplicity; rows annotated zero are ignored; a step
  returns the new annotation of every output key whose annotation changed (the
  semiring's zero for a key that is gone), and retracting a row that is not
  present is refused with ValueError, leaving the view as it was.

Oracle: after every tick ``view.result()`` equals the brute-force reference
evaluator (:func:`faq.reference_solve`) on the model's annotations, and the
factor the step returned equals the change those reference answers define.
Ticks mix insertions, retractions of rows the model holds, annotation changes
(retract ``(k, old)`` and insert ``(k, new)`` in one delta) and retraction of
every row of a key.  Each tick costs a few Spark jobs: few examples, few ticks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query, reference_solve
from faq.rule import parse_rule
from incremental import IncrementalView
from semirings import Semiring
from tests.helpers import assert_same

Key = tuple[int, ...]
Row = tuple[Key, Any, int]  # (key, annotation, weight)

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

NODES = st.integers(0, 2)  # three node values: dense enough for joins to meet

# a tick reads each delta (one Spark job) and runs the delta rule: the "ci" profile
# (10 examples) gets 3 examples per semiring here, "long" 66
MANY = max(3, settings.default.max_examples // 3)


def additive(S: Semiring) -> bool:
    """True when a row changes its key's annotation by ``weight · value`` (rings, counting)."""
    return S.is_ring or S is semirings.COUNTING


def insert_values(S: Semiring) -> list[Any]:
    """Annotations of inserted rows, the semiring's zero last (inserting it changes nothing)."""
    if S is semirings.BOOLEAN:
        return [True, False]
    if S is semirings.COUNTING:
        return [1, 2, 3, 0]
    if S is semirings.INTEGER:
        return [1, 2, -1, 3, -2, 0]
    return [1.0, 0.5, 2.0, 0.25, S.zero]


# -- the model: a multiset of annotated rows per relation ----------------------------------
def apply(S: Semiring, rows: Counter, delta: list[Row]) -> None:
    """Add ``delta`` to the multiset ``rows`` (rows annotated zero are ignored outside rings)."""
    for key, value, weight in delta:
        if not additive(S) and S.is_zero(value):
            continue
        rows[(key, value)] += weight
        assert additive(S) or rows[(key, value)] >= 0, "the test retracted a missing row"
        if rows[(key, value)] == 0:
            del rows[(key, value)]


def annotations(S: Semiring, rows: Counter) -> dict[Key, Any]:
    """``{key: annotation}``: Σ weight · value, or the ⊕ of the present rows' values."""
    out: dict[Key, Any] = {}
    for (key, value), n in sorted(rows.items()):
        if additive(S):
            out[key] = out.get(key, 0) + n * value
            continue
        for _ in range(n):
            out[key] = S.add(out[key], value) if key in out else value
    return {k: v for k, v in out.items() if not S.is_zero(v)}


def current(S: Semiring, model: dict[str, Counter]) -> dict[str, dict[Key, Any]]:
    return {n: annotations(S, rows) for n, rows in model.items()}


def expected_change(S: Semiring, before: dict, after: dict) -> dict:
    """The factor a step returns: ΔQ for rings and counting, else the changed keys' new values."""
    keys = before.keys() | after.keys()
    if additive(S):
        diff = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
        return {k: v for k, v in diff.items() if v != 0}
    return {k: after.get(k, S.zero) for k in keys if before.get(k, S.zero) != after.get(k, S.zero)}


def delta_df(spark, S: Semiring, rows: list[Row], arity: int, weight: bool = True):
    """Key columns c0.., ``value`` and (when ``weight``) ``_weight``, by an explicit schema."""
    columns = [*(f"c{i} bigint" for i in range(arity)), f"value {S.spark_type}"]
    if weight:
        data = [(*k, v, w) for k, v, w in rows]
        columns.append("_weight bigint")
    else:
        assert all(w == 1 for _, _, w in rows)
        data = [(*k, v) for k, v, _ in rows]
    return spark.createDataFrame(data, ", ".join(columns))


# -- strategies --------------------------------------------------------------------------------
def annotated_rows(S: Semiring, arity: int) -> st.SearchStrategy[tuple[Key, Any]]:
    return st.tuples(st.tuples(*[NODES] * arity), st.sampled_from(insert_values(S)))


@st.composite
def initial_rows(draw, S: Semiring, arity: int) -> list[Row]:
    """3 to 8 inserted rows, some of them repeated (a multiset)."""
    rows = draw(st.lists(annotated_rows(S, arity), min_size=3, max_size=6))
    rows += draw(st.lists(st.sampled_from(rows), max_size=2))
    return [(k, v, 1) for k, v in rows]


@st.composite
def changes(draw, S: Semiring, rows: Counter, arity: int) -> list[Row]:
    """One delta: insertions, retractions of rows in ``rows``, annotation changes and
    retractions of every row of a key (and, in a ring, retractions of anything)."""
    available = Counter({r: n for r, n in rows.items() if n > 0})
    kinds = ["insert", "retract", "change", "delete key"]
    if S.is_ring:
        kinds.append("retract any")
    out: list[Row] = []
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3)):
        present = sorted(r for r, n in available.items() if n > 0)
        if not present and kind in ("retract", "change", "delete key"):
            kind = "insert"
        if kind in ("insert", "retract any"):
            key, value = draw(annotated_rows(S, arity))
            out.append((key, value, 1 if kind == "insert" else -1))
        elif kind == "retract":
            key, value = draw(st.sampled_from(present))
            available[(key, value)] -= 1
            out.append((key, value, -1))
        elif kind == "change":
            key, old = draw(st.sampled_from(present))
            new = draw(st.sampled_from([v for v in insert_values(S) if v != old]))
            available[(key, old)] -= 1
            out += [(key, old, -1), (key, new, 1)]
        else:  # every row of one key
            key = draw(st.sampled_from(sorted({k for k, _ in present})))
            for k, value in present:
                if k == key:
                    out += [(k, value, -1)] * available[(k, value)]
                    available[(k, value)] = 0
    return draw(st.permutations(out))


# -- property test: every semiring, every kind of change -----------------------------------
@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@settings(max_examples=MANY)
@given(data=st.data())
def test_ticks_of_insertions_and_retractions_match_batch(spark, semiring, data):
    S = SEMIRINGS[semiring]
    name = data.draw(st.sampled_from(NAMES), label="query")
    rule = parse_rule(QUERIES[name])
    model = {n: Counter() for n in rule.relations}
    initial = {}
    for n, arity in rule.relations.items():
        rows = data.draw(initial_rows(S, arity), label=f"initial {n}")
        apply(S, model[n], rows)
        weight = data.draw(st.booleans(), label=f"initial {n} has _weight")
        initial[n] = delta_df(spark, S, rows, arity, weight)
    view = IncrementalView(query(QUERIES[name], semiring=S), **initial)
    before = reference_solve(rule, S, current(S, model))
    assert_same(view.result().to_dict(), before, S, "initial result")
    for t in range(1, data.draw(st.integers(2, 3), label="ticks") + 1):
        names = data.draw(
            st.lists(st.sampled_from(sorted(rule.relations)), min_size=1, max_size=2, unique=True),
            label=f"tick {t}: relations",
        )
        tick = {
            n: data.draw(changes(S, model[n], rule.relations[n]), label=f"tick {t}: Δ{n}")
            for n in names
        }
        out = view.step(
            **{n: delta_df(spark, S, rows, rule.relations[n]) for n, rows in tick.items()}
        )
        for n, rows in tick.items():
            apply(S, model[n], rows)
        after = reference_solve(rule, S, current(S, model))
        assert view.tick == t
        assert_same(view.result().to_dict(), after, S, f"result after tick {t}")
        assert tuple(out.vars) == tuple(rule.head)
        assert_same(out.to_dict(), expected_change(S, before, after), S, f"change at tick {t}")
        before = after


# -- refusals ----------------------------------------------------------------------------------
def retractable(rows: Counter, delta: list[Row]) -> bool:
    """True when every retraction of ``delta`` removes a row that ``rows`` holds."""
    need = Counter((k, v) for k, v, w in delta if w < 0)
    return all(rows.get(r, 0) >= n for r, n in need.items())


@pytest.mark.parametrize("semiring", NON_RING)
def test_retracting_a_row_that_is_not_present_is_refused(spark, semiring):
    S = SEMIRINGS[semiring]
    rule = parse_rule(CHAIN)
    lo, hi = (True, True) if S is semirings.BOOLEAN else (0.5, 2.0)
    initial: dict[str, list[Row]] = {
        "R": [((1, 2), lo, 1), ((1, 2), hi, 1), ((3, 2), lo, 1)],  # boolean: (1, 2) twice
        "S": [((2, 5), hi, 1), ((2, 7), lo, 1)],
    }
    model = {n: Counter() for n in initial}
    for n, rows in initial.items():
        apply(S, model[n], rows)

    def df(n: str, rows: list[Row]):
        return delta_df(spark, S, rows, rule.relations[n])

    view = IncrementalView(query(CHAIN, semiring=S), **{n: df(n, r) for n, r in initial.items()})
    # one good tick first: the refused ones come at tick 1
    good = [((3, 2), lo, -1), ((0, 1), hi, 1)]
    view.step(R=df("R", good))
    apply(S, model["R"], good)
    before = reference_solve(rule, S, current(S, model))
    assert_same(view.result().to_dict(), before, S, "after the good tick")
    bad = {
        "absent key": {"R": [((0, 0), lo, -1)]},
        "retracted at the last tick": {"R": [((3, 2), lo, -1)]},
        "one copy retracted twice": {"S": [((2, 5), hi, -1), ((2, 5), hi, -1)]},
        "beside a valid delta": {
            "S": [((2, 6), hi, 1), ((2, 7), lo, -1)],
            "R": [((1, 2), lo, -1), ((0, 0), lo, -1)],
        },
    }
    if S is not semirings.BOOLEAN:
        bad["present key, other value"] = {"R": [((1, 2), 1.0, -1)]}
    for case, deltas in bad.items():
        assert not all(retractable(model[n], d) for n, d in deltas.items()), case
        with pytest.raises(ValueError):
            view.step(**{n: df(n, d) for n, d in deltas.items()})
        assert view.tick == 1, case
        assert_same(view.result().to_dict(), before, S, f"after the refused step: {case}")
    # the view still works, and holds every row the refused steps would have touched
    last = {"R": [((1, 2), lo, -1), ((1, 2), hi, -1)], "S": [((2, 5), hi, -1)]}
    out = view.step(**{n: df(n, d) for n, d in last.items()})
    for n, d in last.items():
        apply(S, model[n], d)
    after = reference_solve(rule, S, current(S, model))
    assert view.tick == 2
    assert_same(view.result().to_dict(), after, S, "after the last tick")
    assert_same(out.to_dict(), expected_change(S, before, after), S, "change at the last tick")
