"""Recursive views over rings and counting are exact (issue 37, point 4): after every tick
``result()``, ``relation()`` of every relation and ``step()``'s change equal a batch solve
(and the brute-force ``reference_fixpoint``), for non-linear programs, rules that read a
recursive relation, rows repeated within a tick (two retractions of one row) and sign
flips (rings: retractions of rows never inserted, negative annotations); a tick is
refused exactly where the batch solve refuses it (``max_rounds`` given to both), and a
refused tick changes nothing.

The ticks are drawn by :func:`incremental.testing.ticks` and replayed by
:func:`incremental.testing.assert_incremental`, which checks all of the above.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query
from incremental.testing import Ticks, assert_incremental, delta_frame, read_frame, ticks

PROGRAMS = {
    # linear recursion
    "paths": "P(x) :- S(x)\nP(y) :- P(x), E(x, y)",
    # non-linear recursion, and a rule reading the recursive relation
    "closure": "A(x, y) :- T(x, y), F(x)\nT(x, y) :- E(x, y)\nT(x, z) :- T(x, y), T(y, z)",
    # linear recursion read by a later rule that joins it with an input
    "reach-f": "A(x) :- T(x, y), F(y)\nT(x, y) :- E(x, y)\nT(x, z) :- T(x, y), E(y, z)",
    # mutual recursion
    "even-odd": "Ev(x) :- S(x)\nEv(y) :- Od(x), E(x, y)\nOd(y) :- Ev(x), E(x, y)",
    # a later rule reading the recursive relation twice
    "pairs": "Q(x, z) :- P(x), P(z), E(x, z)\nP(x) :- S(x)\nP(y) :- P(x), E(x, y)",
}
ROUNDS = 12  # max_rounds of the view and of the batch: cycles are refused quickly


def dag(name: str, key: tuple) -> bool:
    """Edges ``a < b`` only: a graph without cycles."""
    return name != "E" or key[0] < key[1]


def drawn(data, name: str, programs: list[str], acyclic: bool):
    """A program over ``name`` (drawn from ``programs``) and ticks for its view: on a graph
    without cycles, or with cycles, over few nodes and from few rows (a cycle a source
    reaches has no fixpoint in counting: most larger graphs would be refused whole)."""
    program = query(PROGRAMS[data.draw(st.sampled_from(programs), label="program")], semiring=name)
    if acyclic:
        strategy = ticks(program, range(4), 4, min_ticks=2, min_rows=2, key_filter=dag)
    else:
        strategy = ticks(program, range(3), 5, min_ticks=2, max_rows=3)
    return program, data.draw(strategy, label="ticks")


@pytest.mark.parametrize("name", ["integer", "real", "counting"])
@given(data=st.data())
def test_ring_views_match_batch_after_every_tick_on_dags(name, data):
    program, t = drawn(data, name, sorted(PROGRAMS), acyclic=True)
    out = assert_incremental(program, t, max_rounds=ROUNDS)
    assert out.outcomes == ["committed"] * len(t.steps)  # no cycle: nothing diverges


def negated(t: Ticks, name: str, arity: int, S: semirings.Semiring) -> dict:
    """A tick that negates relation ``name`` after ``t``'s steps: every row retracted
    twice as often as it is held (a ring's annotations change sign)."""
    held: Counter = Counter()
    for frames in [t.initial, *t.steps]:
        if name in frames:
            for key, value, w in read_frame(frames[name], name, arity, S):
                held[(key, value)] += w
    rows = [(key, value, -2 * n) for (key, value), n in sorted(held.items()) if n]
    return {name: delta_frame(rows, S, arity)}


@pytest.mark.parametrize("name", ["integer", "real"])
@given(data=st.data())
def test_a_non_linear_ring_program_is_exact_through_sign_flips(name, data):
    # the group is recomputed each tick and diffed with the old relations: a key whose
    # annotation changes sign (new = -old) must still be in the diff (issue 37, point 4);
    # drawn ticks, then one that negates every edge (a path of one edge changes sign)
    program = query(PROGRAMS["closure"], semiring=name)
    t = data.draw(ticks(program, range(4), 4, min_ticks=1, min_rows=2, key_filter=dag))
    flip = negated(t, "E", 2, program.semiring)
    out = assert_incremental(program, t.initial, [*t.steps, flip], max_rounds=ROUNDS)
    assert out.outcomes == ["committed"] * (len(t.steps) + 1)


@pytest.mark.parametrize("name", ["integer", "counting"])
def test_ring_views_refuse_exactly_what_batch_refuses_with_cycles(name):
    outcomes: list[str] = []

    @settings(database=None)
    @given(data=st.data())
    def check(data):
        program, t = drawn(data, name, ["paths", "closure", "even-odd"], acyclic=False)
        out = assert_incremental(program, t, max_rounds=ROUNDS)
        outcomes.extend(out.outcomes)
        if not out.outcomes and t.steps:  # the initial contents diverge: no view either
            outcomes.append("refused")

    check()
    # both happened: ticks the batch refuses (and the view with it), ticks it accepts
    assert {"committed", "refused"} <= set(outcomes), outcomes
