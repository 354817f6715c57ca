"""Incremental views over programs (issue 23 item 4): after every tick of insertions and
deletions the view equals a batch solve of the program over the current inputs.

The property tests draw their ticks with :func:`incremental.testing.ticks` and replay
them with :func:`incremental.testing.assert_incremental` (step()'s change, result() and
relation() of every relation against a batch solve and ``reference_fixpoint``, refusals,
batch ids)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import semirings
from faq import Factor, query
from faq.kernel import Table
from incremental import IncrementalView
from incremental.testing import assert_incremental, ticks

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
EVEN_ODD = "Ev(x) :- S(x)\nEv(y) :- Od(x), E(x, y)\nOd(y) :- Ev(x), E(x, y)"
WIDEST = semirings.Semiring(name="widest", zero=-math.inf, one=math.inf, add=max, mul=min)

SEMIRINGS: dict[str, semirings.Semiring] = {
    "min-plus": semirings.MIN_PLUS,
    "boolean": semirings.BOOLEAN,
    "max-product": semirings.MAX_PRODUCT,
    "widest": WIDEST,
    "counting": semirings.COUNTING,
}
# the annotations drawn where the semiring's own would make cycles diverge (a negative
# min-plus weight, a max-product factor above 1): those are refused like the batch
# (tests/test_testing_kit.py), these tests are about the paths kept
VALUES: dict[str, Any] = {
    "min-plus": st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0]),
    "max-product": st.sampled_from([1.0, 0.5, 0.25, 0.9]),
}
N = 6  # nodes 0..5


def dag(name: str, key: tuple) -> bool:
    """Edges ``a < b`` only: no cycles (counting along a cycle has no fixpoint)."""
    return name != "E" or key[0] < key[1]


def replay(text: str, name: str, data: Any, acyclic: bool = False) -> None:
    """Draw ticks for ``text`` over semiring ``name`` and check the view tick by tick."""
    program = query(text, semiring=SEMIRINGS[name])
    strategy = ticks(
        program,
        keys=range(N),
        max_ticks=4,
        min_ticks=2,
        min_rows=3,
        max_rows=10,
        values=VALUES.get(name),
        key_filter=dag if acyclic else None,
    )
    out = assert_incremental(program, data.draw(strategy, label="ticks"))
    assert out.outcomes == ["committed"] * len(out.outcomes)  # none of these diverges


# -- property tests: the view equals the batch solve after every tick ------------------------
@pytest.mark.parametrize("name", ["min-plus", "boolean", "max-product", "widest"])
@given(data=st.data())
def test_single_source_paths_match_batch_after_every_tick(name, data):
    replay(SSSP, name, data)


@given(data=st.data())
def test_path_counts_on_a_dag_match_batch_after_every_tick(data):
    replay("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", "counting", data, acyclic=True)


@pytest.mark.parametrize("name", ["min-plus", "boolean"])
@given(data=st.data())
def test_mutual_recursion_matches_batch_after_every_tick(name, data):
    replay(EVEN_ODD, name, data)


@given(data=st.data())
def test_non_linear_counting_program_is_recomputed_and_matches_batch(data):
    # T's recursive rule reads T twice: the group is recomputed each tick and diffed
    text = "P(x) :- S(x)\nP(y) :- S(x), T(x, y)\nT(x, y) :- E(x, y)\nT(x, z) :- T(x, y), T(y, z)"
    replay(text, "counting", data, acyclic=True)


# -- worked cases ----------------------------------------------------------------------------
def sssp_view(**extra: Any) -> tuple[Any, Any]:
    sp = query(SSSP, semiring="min-plus")
    E = pd.DataFrame({"a": [0, 0, 2, 1, 2], "b": [1, 2, 1, 3, 3], "value": [4.0, 1.0, 2, 1, 7]})
    return sp, IncrementalView(sp, S=pd.DataFrame({"a": [0], "value": [0.0]}), E=E, **extra)


def test_a_deletion_rederives_from_the_remaining_paths():
    sp, view = sssp_view()
    assert view.result().to_dict() == {(0,): 0.0, (1,): 3.0, (2,): 1.0, (3,): 4.0}
    gone = pd.DataFrame({"a": [0], "b": [2], "value": [1.0], "_weight": [-1]})
    assert view.step(E=gone).to_dict() == {(1,): 4.0, (2,): math.inf, (3,): 5.0}
    assert view.result().to_dict() == {(0,): 0.0, (1,): 4.0, (3,): 5.0}
    assert view.relation("E").to_dict() == {(0, 1): 4.0, (2, 1): 2.0, (1, 3): 1.0, (2, 3): 7.0}
    assert view.relation("D").to_dict() == view.result().to_dict()
    assert view.last_step.tick == 1 and view.last_step.where == "driver"


def test_a_tick_making_a_negative_cycle_is_refused_and_changes_nothing():
    sp, view = sssp_view()
    before = view.result().to_dict()
    cycle = pd.DataFrame({"a": [3, 1], "b": [1, 5], "value": [-2.0, 1.0]})
    with pytest.raises(ValueError, match=r"'D' does not converge.*negative cycle"):
        view.step(E=cycle)
    with pytest.raises(ValueError, match=r"'D' does not converge.*negative cycle"):
        sp.solve(
            S=Factor.from_dict({(0,): 0.0}, ["a"], "min-plus"),
            E=Factor.from_dict(
                {**{k: v for k, v in view.relation("E").to_dict().items()}, (3, 1): -2.0},
                ["a", "b"],
                "min-plus",
            ),
        )
    assert view.result().to_dict() == before and view.tick == 0
    assert (
        view.relation("E").to_dict()[(0, 1)] == 4.0 and (3, 1) not in view.relation("E").to_dict()
    )
    # the view still works: a harmless tick afterwards
    view.step(E=pd.DataFrame({"a": [3], "b": [5], "value": [1.0]}))
    assert view.result().to_dict() == {(0,): 0.0, (1,): 3.0, (2,): 1.0, (3,): 4.0, (5,): 5.0}


def test_a_tick_making_a_counting_cycle_is_refused_and_changes_nothing():
    paths = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="counting")
    S, E = pd.DataFrame({"a": [0]}), pd.DataFrame({"a": [0, 1], "b": [1, 2]})
    view = IncrementalView(paths, S=S, E=E, max_rounds=30)
    assert view.result().to_dict() == {(0,): 1, (1,): 1, (2,): 1}
    with pytest.raises(ValueError, match=r"'P' does not converge.*30 rounds.*not idempotent"):
        view.step(E=pd.DataFrame({"a": [2], "b": [1]}))
    assert view.result().to_dict() == {(0,): 1, (1,): 1, (2,): 1}
    assert view.relation("E").to_dict() == {(0, 1): 1, (1, 2): 1} and view.tick == 0
    assert view.step(E=pd.DataFrame({"a": [0], "b": [2]})).to_dict() == {(2,): 1}


def test_integer_ring_deletions_by_negative_weights():
    q = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="integer")
    E = pd.DataFrame({"a": [0, 0, 1], "b": [1, 2, 2], "value": [2, 3, -1]})
    view = IncrementalView(q, S=pd.DataFrame({"a": [0], "value": [1]}), E=E)
    assert view.result().to_dict() == {(0,): 1, (1,): 2, (2,): 1}
    change = view.step(E=pd.DataFrame({"a": [0], "b": [2], "value": [3], "_weight": [-1]}))
    assert change.to_dict() == {(2,): -3}
    assert view.result().to_dict() == {(0,): 1, (1,): 2, (2,): -2}


def test_batch_ids_skip_replays_and_foreach_batch_applies():
    sp, view = sssp_view()
    add = pd.DataFrame({"a": [3], "b": [4], "value": [1.0]})
    assert view.step(batch_id=5, E=add).to_dict() == {(4,): 5.0}
    assert view.step(batch_id=5, E=add).to_dict() == {} and view.last_step.skipped
    assert view.tick == 1 and view.batch_id == 5
    apply = view.foreach_batch("E")
    apply(pd.DataFrame({"a": [4], "b": [5], "value": [1.0]}), 6)
    apply(pd.DataFrame({"a": [4], "b": [5], "value": [1.0]}), 6)
    assert view.result().to_dict()[(5,)] == 6.0 and view.tick == 2 and view.batch_id == 6
    with pytest.raises(ValueError, match="batch_id must be a non-negative integer"):
        view.step(batch_id=-1, E=add)
    with pytest.raises(ValueError, match="defined by rule"):
        view.foreach_batch("D")


# -- bad input: clear errors, the view unchanged ---------------------------------------------
def test_bad_input_is_refused_clearly_and_leaves_the_view_unchanged():
    sp, view = sssp_view()
    before = view.result().to_dict()
    with pytest.raises(ValueError, match=r"unknown relation\(s\) 'F'.*input relations are: S, E"):
        view.step(F=pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match="relation 'D' is defined by rule D"):
        view.step(D=pd.DataFrame({"a": [1], "value": [0.0]}))
    with pytest.raises(ValueError, match="takes 2 key column"):
        view.step(E=pd.DataFrame({"a": [1], "value": [0.0]}))
    with pytest.raises(ValueError, match="retracts 1 annotated row"):
        view.step(E=pd.DataFrame({"a": [0], "b": [1], "value": [9.0], "_weight": [-1]}))
    with pytest.raises(ValueError, match="key column at position 0 holds string"):
        view.step(E=pd.DataFrame({"a": ["x"], "b": [1], "value": [1.0]}))
    with pytest.raises(TypeError, match="expected a Factor, a Spark DataFrame.*got list"):
        view.step(E=[(0, 1)])
    with pytest.raises(TypeError, match="plain numpy array.*ambiguous.*Factor.from_numpy"):
        view.step(E=np.array([[0, 1]]))
    # a bad delta among good ones: nothing is applied
    with pytest.raises(ValueError, match="retracts"):
        view.step(
            S=pd.DataFrame({"a": [3], "value": [0.0]}),
            E=pd.DataFrame({"a": [0], "b": [1], "value": [9.0], "_weight": [-1]}),
        )
    assert view.result().to_dict() == before and view.tick == 0
    with pytest.raises(ValueError, match=r"unknown relation\(s\) 'Q'"):
        view.relation("Q")


def test_unsupported_options_are_refused_with_the_reason(tmp_path):
    sp = query(SSSP, semiring="min-plus")
    with pytest.raises(ValueError, match='state="spark" is not supported'):
        IncrementalView(sp, state="spark", state_dir=tmp_path / "v")
    assert not (tmp_path / "v").exists()
    with pytest.raises(ValueError, match="sets: unknown relation 'D'"):
        IncrementalView(sp, sets={"D": "ignore"})  # a defined relation is no set
    with pytest.raises(ValueError, match="max_rounds must be a positive integer"):
        IncrementalView(sp, max_rounds=0)
    with pytest.raises(ValueError, match="unknown join method"):
        IncrementalView(sp, join="hash")
    with pytest.raises(ValueError, match=r"unknown relation\(s\) 'T'"):
        IncrementalView(sp, T=pd.DataFrame({"a": [1]}))
    counting = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="counting")
    S, E = pd.DataFrame({"a": [0]}), pd.DataFrame({"a": [0], "b": [1]})
    view = IncrementalView(counting, S=S, E=E)
    with pytest.raises(ValueError, match="negative multiplicity"):
        view.step(E=pd.DataFrame({"a": [0], "b": [1], "value": [2], "_weight": [-1]}))
    assert view.result().to_dict() == {(0,): 1, (1,): 1}


# -- the whole-key lookups the ticks make ------------------------------------------------------
def pairs(t: Table) -> dict:
    keys = zip(t.cols[0].tolist(), t.cols[1].tolist(), strict=True)
    return dict(zip(keys, t.values.tolist(), strict=True))


@given(
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b", "c"])), max_size=15),
    st.lists(st.tuples(st.integers(-1, 5), st.sampled_from(["a", "c", "z"])), max_size=8),
    st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b"]), st.integers(0, 2))),
)
def test_keyed_whole_key_lookup_matches_a_scan(rows, keys, changes):
    from faq.kernel import KeyedTable
    from semirings.local import local_ops

    o = local_ops(semirings.INTEGER)
    data = dict.fromkeys(rows, 1)
    cols = (np.array([k for k, _ in data], dtype=np.int64), np.array([s for _, s in data]))
    kt = KeyedTable.of(Table(("x", "s"), cols, np.ones(len(data), np.int64)), o)
    if changes:  # overrides on top of the base: a count of 0 removes the key
        new = {(k, s): v for k, s, v in changes}
        c = (np.array([k for k, _ in new], dtype=np.int64), np.array([s for _, s in new]))
        kt = kt.replace(Table(("x", "s"), c, np.array(list(new.values()), dtype=np.int64)))
        data = {k: v for k, v in {**data, **new}.items() if v}
    q = (np.array([k for k, _ in keys], dtype=np.int64), np.array([s for _, s in keys]))
    got = kt.at(q)
    found = pairs(got)
    assert found == {k: v for k, v in data.items() if k in set(keys)}
    assert got.rows == len(found)
    lead = kt.at_prefix((q[0],))  # the rows whose first column is one of the keys'
    found = pairs(lead)
    assert found == {k: v for k, v in data.items() if k[0] in set(q[0].tolist())}


# -- issue 37, points 3 and 4: exact views, divergence refused -----------------------------------
def test_stale_non_linear_ring_view_is_exact():
    # the reproduction: step() returned {} and result() stayed {(1, 0): 5}
    p = query(
        "A(x, y) :- T(x, y), F(x)\nT(x, y) :- E(x, y)\nT(x, z) :- T(x, y), T(y, z)",
        semiring="integer",
    )
    v = IncrementalView(
        p,
        E=pd.DataFrame({"a": [1], "b": [0], "value": [1]}),
        F=pd.DataFrame({"a": [1], "value": [5]}),
    )
    change = v.step(E=pd.DataFrame({"a": [1], "b": [0], "value": [-2]}))
    assert change.to_dict() == {(1, 0): -10}
    assert v.result().to_dict() == {(1, 0): -5} and v.relation("T").to_dict() == {(1, 0): -1}
    # two retractions of one row in a tick
    gone = pd.DataFrame({"a": [1, 1], "b": [0, 0], "value": [-2, -2], "_weight": [-1, -1]})
    assert v.step(E=gone).to_dict() == {(1, 0): 20}
    assert v.result().to_dict() == {(1, 0): 15}


def test_a_legal_counting_tick_whose_nested_rounds_diverge_is_accepted():
    # the reproduction: OverflowError, where the batch answer is {}
    p = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="counting")
    v = IncrementalView(p, S=pd.DataFrame({"a": [0]}), E=pd.DataFrame({"a": [1], "b": [2]}))
    change = v.step(
        S=pd.DataFrame({"a": [0], "_weight": [-1]}),
        E=pd.DataFrame({"a": [0], "b": [0], "value": [2]}),
    )
    assert change.to_dict() == {(0,): -1} and v.result().to_dict() == {}
    assert v.relation("E").to_dict() == {(1, 2): 1, (0, 0): 2} and v.tick == 1


def test_a_cycle_of_weight_one_left_without_its_source_is_not_kept():
    # continuing from the old state finds *a* solution of D = S + D·E, D(1) = 2 here, not
    # the least one: the view keeps the batch's rounds instead
    p = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="counting")
    v = IncrementalView(p, S=pd.DataFrame({"a": [0]}), E=pd.DataFrame({"a": [0], "b": [1]}))
    v.step(S=pd.DataFrame({"a": [0], "_weight": [-1]}), E=pd.DataFrame({"a": [1], "b": [1]}))
    assert v.result().to_dict() == {}
    assert v.step(S=pd.DataFrame({"a": [2]}), E=pd.DataFrame({"a": [2], "b": [3]})).to_dict() == {
        (2,): 1,
        (3,): 1,
    }


def test_a_tick_diverging_to_infinity_is_refused_and_changes_nothing():
    p = query(SSSP, semiring="max-product")
    E = pd.DataFrame({"a": [0], "b": [1], "value": [0.5]})
    v = IncrementalView(p, S=pd.DataFrame({"a": [0], "value": [1.0]}), E=E)
    for w in (10.0, 1e100):  # the view answered {(0,): inf, (1,): inf}
        with pytest.raises(ValueError, match=r"'D' does not converge.*above 1 in max-product"):
            v.step(E=pd.DataFrame({"a": [0], "b": [0], "value": [w]}))
        assert v.result().to_dict() == {(0,): 1.0, (1,): 0.5} and v.tick == 0
        assert v.relation("E").to_dict() == {(0, 1): 0.5}
    # no cycle, but a product past the floats
    with pytest.raises(ValueError, match=r"derives D\(3,\) = inf, outside"):
        v.step(E=pd.DataFrame({"a": [1, 2], "b": [2, 3], "value": [1e200, 1e200]}))
    assert v.relation("E").to_dict() == {(0, 1): 0.5} and v.tick == 0
    assert v.step(E=pd.DataFrame({"a": [1], "b": [2], "value": [0.5]})).to_dict() == {(2,): 0.25}


def test_a_long_chain_converges_in_a_view_past_max_rounds():
    # 121 rounds from the empty view, refused under max_rounds=50 before: a selective
    # semiring's rounds are bound by its keys (the chain: 1,500 under 1,000)
    n = 120
    E = pd.DataFrame({"a": range(n), "b": range(1, n + 1), "value": [1.0] * n})
    sp = query(SSSP, semiring="min-plus")
    v = IncrementalView(sp, S=pd.DataFrame({"a": [0]}), E=E, max_rounds=50)
    assert v.result().to_dict() == {(i,): float(i) for i in range(n + 1)}
    assert v.step(S=pd.DataFrame({"a": [0], "_weight": [-1], "value": [0.0]})).to_dict() == {
        (i,): math.inf for i in range(n + 1)
    }


def test_a_ring_view_tick_takes_the_steps_its_change_travels_not_every_round():
    # path counts along a chain of 80: 81 rounds; an edge near the end changes 3 keys
    n = 80
    E = pd.DataFrame({"a": range(n), "b": range(1, n + 1)})
    p = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="counting")
    v = IncrementalView(p, S=pd.DataFrame({"a": [0]}), E=E)
    assert v.result().to_dict() == {(i,): 1 for i in range(n + 1)}
    change = v.step(E=pd.DataFrame({"a": [n - 3], "b": [n - 1]}))
    assert change.to_dict() == {(n - 1,): 1, (n,): 1}
    assert len(v.last_step.terms) <= 8, len(v.last_step.terms)  # not one per round
    v.step(S=pd.DataFrame({"a": [0], "_weight": [-1]}), E=pd.DataFrame({"a": [n], "b": [0]}))
    assert v.result().to_dict() == {}  # the source gone: a cycle through it counts nothing


def test_a_loaded_program_view_holds_its_relations_in_their_bases():
    """A load fills every relation from empty; its rows are folded into the relations'
    bases, so a tick's lookups search sorted bases, not a log holding every row (each
    tick used to sort and match it whole)."""
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    edges = pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3], "value": [1.0, 2.0, 3.0]})
    view = IncrementalView(sp, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=edges)
    state = view._state
    for name, r in (*state.rels.items(), *state.rows.items()):
        assert r.kt.over.rows == 0 and r.kt.base.rows == r.kt.rows, name
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 3.0, (3,): 6.0}


def test_rounds_larger_than_local_delta_rows_stay_in_the_driver(spark, use_settings):
    # a round whose change holds more than local_delta_rows rows went to Spark although
    # every relation was in the driver (a 2M-edge shortest-paths view: 47 s to build,
    # 5.7 s now); now only local_rows sends such a round away
    from tests.helpers import spark_jobs

    use_settings(local_delta_rows=2, path_walks=False)
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    edges = pd.DataFrame({"a": a, "b": b, "value": rng.integers(1, 9, 300).astype(float)})
    edges = edges[edges.a != edges.b].drop_duplicates(["a", "b"])
    sp = query(SSSP, semiring="min-plus")
    S = pd.DataFrame({"x": [0], "value": [0.0]})
    view, jobs = spark_jobs(spark, lambda: IncrementalView(sp, S=S, E=edges), "wide-rounds")
    assert jobs == 0
    gone = edges.iloc[:20].assign(_weight=-1)
    _, jobs = spark_jobs(spark, lambda: view.step(E=gone), "wide-rounds-tick")
    assert jobs == 0 and view.last_step.where == "driver"
    now = Factor.from_pandas(edges.iloc[20:], semiring="min-plus", name="E")
    start = Factor.from_pandas(S, semiring="min-plus", name="S")
    assert view.result().to_dict() == sp.solve(S=start, E=now).to_dict()
