"""Views that keep witnesses: ``IncrementalView(q, witness=True)`` (issue 41, point 1).

After every tick, ``view.result()`` must equal a batch ``solve(witness=True)`` of the
current relations value for value, and each key's witness must attain its value (the ⊗
of the atoms' annotations at the witness assignment, recomputed here from the
relations).  Ties may pick another witness than the batch solve's.
"""

from __future__ import annotations

import math
import operator

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import faq
import semirings
from faq import query
from incremental import IncrementalView
from incremental.testing import assert_incremental, check_witnesses, ticks

USER_MIN = semirings.Semiring(
    name="user-min-plus", zero=math.inf, one=0.0, add=min, mul=operator.add
)
BOTTLENECK = semirings.Semiring(  # ⊕ max, ⊗ min: selective, not tight
    name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min
)
SEMIRINGS = ["min-plus", "max-plus", "max-product", "boolean", USER_MIN, BOTTLENECK]
RULES = [
    "Q(a, c) :- E(a, b), E(b, c)",  # two-hop paths
    "Q(a) :- R(a, b), S(b, c)",  # a chain, two bound variables
    "Q(a, b) :- E(a, b), E(b, c), E(a, c)",  # a triangle
    "Q() :- R(a, b), S(b, c)",  # one key, no head
    "Q(a) :- R(a, 1, b), S(b)",  # a constant
    "Q(a) :- E(a, b), E(b, b)",  # a repeated variable
    "Q(a) :- R(a, b), S(b, c), T(c, d)",  # three bound variables: the restricted solve
]


def _name(S: object) -> str:
    return S if isinstance(S, str) else S.name  # type: ignore[attr-defined]


def _product(q: faq.Query, key: tuple, w: dict, rels: dict) -> object:
    """The ⊗ of the rule's atoms at the head ``key`` and the witness ``w``."""
    S, rule = q.semiring, q.rule
    env = dict(zip(rule.head, key, strict=True)) | w
    acc = S.one
    for atom in rule.atoms:
        cols = dict(atom.consts)
        cols.update((p, env[v]) for v, p in zip(atom.vars, atom.positions, strict=True))
        at = tuple(cols[p] for p in range(atom.arity))
        acc = S.mul(acc, rels[atom.relation].get(at, S.zero))
    return acc


def _check_against_batch(q: faq.Query, view: IncrementalView, label: str) -> None:
    """``view.result()`` equals a batch ``solve(witness=True)`` exactly, and every
    witness attains its key's value (and names every bound variable)."""
    names = list(q.rule.relations)
    rels = {n: view.relation(n).to_dict() for n in names}
    batch = q.solve(witness=True, **{n: view.relation(n) for n in names})
    got = view.result()
    values = got.to_dict()
    assert values == batch.to_dict(), f"{label}: values differ from a batch solve"
    found = got.witnesses()
    assert set(found) == set(values), f"{label}: witnesses of other keys than the answer's"
    assert set(batch.witnesses()) == set(values)
    frame = got.witness_frame
    assert list(frame.columns[: len(q.rule.head)]) == list(q.rule.head)
    for key, value in values.items():
        w = found[key]
        assert set(w) == set(q.rule.bound), f"{label}: witness {w} of {key}"
        p = _product(q, key, w, rels)
        assert p == value, f"{label}: witness {w} of key {key} gives {p}, not {value}"


@pytest.mark.parametrize("S", SEMIRINGS, ids=_name)
@pytest.mark.parametrize("rule", RULES)
def test_random_ticks_keep_witnesses(rule: str, S: object) -> None:
    q = query(rule, semiring=S)

    @hsettings(max_examples=8)
    @given(ticks(q, keys=range(4), max_ticks=5))
    def check(t) -> None:  # type: ignore[no-untyped-def]
        view = IncrementalView(q, witness=True, **t.initial)
        _check_against_batch(q, view, "initial")
        for i, step in enumerate(t.steps):
            view.step(**step)
            _check_against_batch(q, view, f"tick {i + 1}")

    check()


@pytest.mark.parametrize("S", ["min-plus", "boolean", USER_MIN], ids=_name)
def test_the_testing_kit_replays_witness_views(S: object) -> None:
    """``assert_incremental(..., witness=True)`` (refusals, batch ids, the oracle)."""
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring=S)

    @hsettings(max_examples=6)
    @given(ticks(q, keys=range(4), max_ticks=4))
    def check(t) -> None:  # type: ignore[no-untyped-def]
        assert_incremental(q, t, witness=True)

    check()


def _edges(rows: list[tuple[int, int, float]], weight: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "s": [r[0] for r in rows],
            "d": [r[1] for r in rows],
            "value": [r[2] for r in rows],
            "_weight": [weight] * len(rows),
        }
    )


def test_a_deletion_that_cuts_the_best_path_is_repaired() -> None:
    """0 → 1 → 3 costs 2, 0 → 2 → 3 costs 5: deleting 1 → 3 makes the witness b = 2."""
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    E = _edges([(0, 1, 1.0), (1, 3, 1.0), (0, 2, 1.0), (2, 3, 4.0)])
    view = IncrementalView(q, witness=True, E=E)
    assert view.result().witnesses()[(0, 3)] == {"b": 1}
    view.step(E=_edges([(1, 3, 1.0)], -1))
    assert view.result().to_dict()[(0, 3)] == 5.0
    assert view.result().witnesses()[(0, 3)] == {"b": 2}
    _check_against_batch(q, view, "after the cut")


def test_a_cut_witness_of_a_key_whose_value_stays_is_repaired() -> None:
    """Two routes of the same cost: the value of (0, 3) does not change when the route
    its witness takes is cut, but the witness must move to the other route."""
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    E = _edges([(0, 1, 1.0), (1, 3, 1.0), (0, 2, 1.0), (2, 3, 1.0)])
    view = IncrementalView(q, witness=True, E=E)
    first = view.result().witnesses()[(0, 3)]["b"]
    cut = (first, 3, 1.0)
    change = view.step(E=_edges([cut], -1))
    assert (0, 3) not in change.to_dict()  # the value stayed 2.0
    assert view.result().to_dict()[(0, 3)] == 2.0
    assert view.result().witnesses()[(0, 3)] == {"b": 3 - first}
    _check_against_batch(q, view, "after the cut")


def test_a_worse_annotation_moves_the_witness() -> None:
    """A row replaced by a worse one (retract, insert) in one tick, value kept by a tie."""
    q = query("Q(a) :- R(a, b), S(b)", semiring="max-product")
    R = pd.DataFrame({"a": [0, 0], "b": [1, 2], "value": [0.5, 0.5]})
    S = pd.DataFrame({"b": [1, 2], "value": [1.0, 1.0]})
    view = IncrementalView(q, witness=True, R=R, S=S)
    b = view.result().witnesses()[(0,)]["b"]
    delta = pd.DataFrame({"b": [b, b], "value": [1.0, 0.25], "_weight": [-1, 1]})
    view.step(S=delta)
    assert view.result().to_dict() == {(0,): 0.5}
    assert view.result().witnesses() == {(0,): {"b": 3 - b}}
    _check_against_batch(q, view, "after the change")


def test_keys_that_go_and_come_back() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="boolean")
    E = pd.DataFrame({"s": [0, 1], "d": [1, 2]})
    view = IncrementalView(q, witness=True, E=E)
    assert view.result().witnesses() == {(0, 2): {"b": 1}}
    view.step(E=pd.DataFrame({"s": [1], "d": [2], "_weight": [-1]}))
    assert view.result().witnesses() == {}
    view.step(E=pd.DataFrame({"s": [1, 5], "d": [2, 1]}))
    assert view.result().witnesses() == {(0, 2): {"b": 1}, (5, 2): {"b": 1}}
    _check_against_batch(q, view, "back")


def test_string_keys_and_set_relations() -> None:
    """String keys, an empty initial relation typed by its first delta, and a set relation
    whose repeated insertion is dropped."""
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="max-plus")
    view = IncrementalView(q, witness=True, sets="ignore")
    view.step(E=pd.DataFrame({"s": ["x", "y"], "d": ["y", "z"], "value": [1.0, 2.0]}))
    view.step(
        E=pd.DataFrame({"s": ["x", "w", "x"], "d": ["w", "z", "y"], "value": [5.0, 2.0, 1.0]})
    )
    assert view.result().witnesses() == {("x", "z"): {"b": "w"}}
    view.step(E=pd.DataFrame({"s": ["x"], "d": ["w"], "value": [5.0], "_weight": [-1]}))
    assert view.result().witnesses() == {("x", "z"): {"b": "y"}}
    _check_against_batch(q, view, "strings")


def test_a_rule_without_bound_variables_has_empty_witnesses() -> None:
    q = query("Q(a, b) :- E(a, b)", semiring="min-plus")
    view = IncrementalView(q, witness=True, E=_edges([(0, 1, 2.0)]))
    view.step(E=_edges([(1, 2, 3.0)]))
    assert view.result().witnesses() == {(0, 1): {}, (1, 2): {}}
    check_witnesses(q, view.result(), {"E": view.relation("E").to_dict()})


def test_witness_frame_matches_the_batch_layout() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    E = _edges([(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)])
    view = IncrementalView(q, witness=True, E=E)
    frame = view.result().witness_frame
    batch = q.solve(witness=True, E=view.relation("E")).witness_frame
    pd.testing.assert_frame_equal(frame, batch, check_dtype=False)


def test_a_view_without_witness_still_has_none() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    view = IncrementalView(q, E=_edges([(0, 1, 1.0), (1, 2, 1.0)]))
    with pytest.raises(ValueError, match="no witnesses"):
        view.result().witnesses()


# -- refusals: a clear ValueError naming the option, nothing left behind ---------------------
def test_a_semiring_that_is_not_selective_is_refused() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="counting")
    with pytest.raises(ValueError, match=r"IncrementalView: witness=True needs a selective"):
        IncrementalView(q, witness=True, E=pd.DataFrame({"s": [0], "d": [1]}))


def test_the_spark_state_is_refused() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    with pytest.raises(ValueError, match=r'witness=True is not supported with state="spark"'):
        IncrementalView(q, witness=True, state="spark", E=_edges([(0, 1, 1.0)]))


def test_a_durable_view_is_refused_and_leaves_no_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    folder = tmp_path / "view"
    with pytest.raises(ValueError, match="witness=True is not supported with state_dir"):
        IncrementalView(q, witness=True, state_dir=folder, E=_edges([(0, 1, 1.0)]))
    assert not folder.exists()


def test_auto_keeps_a_witness_view_in_the_driver() -> None:
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    E = _edges([(i, i + 1, 1.0) for i in range(20)])
    with faq.settings(local_rows=5):
        view = IncrementalView(q, witness=True, E=E)
    assert view.where == "driver"
    _check_against_batch(q, view, "initial")


def test_a_program_view_refuses_what_a_rule_view_refuses(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sp = query(SSSP, semiring="counting")
    with pytest.raises(ValueError, match="IncrementalView: witness=True needs a selective"):
        IncrementalView(sp, witness=True, S=pd.DataFrame({"x": [0]}))
    sp = query(SSSP, semiring="min-plus")
    with pytest.raises(ValueError, match="state_dir"):
        IncrementalView(sp, witness=True, state_dir=tmp_path / "v", S=pd.DataFrame({"x": [0]}))
    assert not (tmp_path / "v").exists()


# -- programs: witnesses of the answer over the maintained fixpoint ---------------------------
SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
PATH_VALUES = {  # no improving cycle (a negative weight, a factor above 1): no divergence
    "min-plus": st.sampled_from([0.0, 1.0, 2.0, 5.0]),
    "max-product": st.sampled_from([1.0, 0.5, 0.25]),
}


def _predecessors_sum_up(sp: faq.Program, view: IncrementalView) -> None:
    """Each key's witness names a predecessor whose distance ⊗ the edge is the key's."""
    S = sp.semiring
    D = view.result().to_dict()
    E = view.relation("E").to_dict()
    sources = view.relation("S").to_dict()
    for (y,), w in view.result().witnesses().items():
        x = w.get("x_")
        if x is None:  # attained by the base rule
            assert sources.get((y,), S.zero) == D[(y,)], (y, w)
        else:
            assert S.mul(D[(x,)], E[(x, y)]) == D[(y,)], (y, w)


def _paths_attain(sp: faq.Program, view: IncrementalView) -> None:
    """Each key's ``path`` starts at a source, follows edges the view holds, and its
    source's value ⊗ the edges' is the key's distance."""
    S = sp.semiring
    out = view.result()
    E = view.relation("E").to_dict()
    sources = view.relation("S").to_dict()
    for key, value in out.to_dict().items():
        path = out.path(key)
        assert path[-1] == key and path[0] in sources, (key, path)
        total = sources[path[0]]
        for (x,), (y,) in zip(path, path[1:], strict=False):
            total = S.mul(total, E[(x, y)])
        assert total == value, (key, path, total, value)


@pytest.mark.parametrize("S", ["min-plus", "max-product", "boolean", BOTTLENECK], ids=_name)
def test_program_views_keep_witnesses(S: object) -> None:
    sp = query(SSSP, semiring=S)

    @hsettings(max_examples=6)
    @given(
        ticks(
            sp, keys=range(5), max_ticks=4, min_rows=2, max_rows=8, values=PATH_VALUES.get(_name(S))
        )
    )
    def check(t) -> None:  # type: ignore[no-untyped-def]
        assert_incremental(sp, t, witness=True)
        view = IncrementalView(sp, witness=True, **t.initial)
        for step in t.steps:
            view.step(**step)
            _predecessors_sum_up(sp, view)
            _paths_attain(sp, view)  # view.result().path(key), as a batch answer's
            batch = sp.solve(witness=True, **{n: view.relation(n) for n in ("S", "E")})
            assert view.result().to_dict() == batch.to_dict()

    check()


@pytest.mark.parametrize("S", ["min-plus", "boolean"])
def test_a_mutually_recursive_answer_finds_its_witnesses_when_read(S: str) -> None:
    """Ev reads Od, a defined relation besides the answer: witnesses found when read."""
    even_odd = query("Ev(x) :- S(x)\nEv(y) :- Od(x), E(x, y)\nOd(y) :- Ev(x), E(x, y)", semiring=S)

    @hsettings(max_examples=5)
    @given(ticks(even_odd, keys=range(5), max_ticks=3, values=PATH_VALUES.get(S)))
    def check(t) -> None:  # type: ignore[no-untyped-def]
        assert_incremental(even_odd, t, witness=True)

    check()


def test_a_program_view_repairs_a_cut_shortest_path() -> None:
    sp = query(SSSP, semiring="min-plus")
    E = _edges([(0, 1, 4.0), (0, 2, 1.0), (2, 1, 2.0), (1, 7, 1.0)])
    view = IncrementalView(sp, witness=True, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=E)
    assert view.result().witnesses()[(1,)] == {"x_": 2}
    assert view.result().path((7,)) == [(0,), (2,), (1,), (7,)]
    before = view.result()
    view.step(E=_edges([(2, 1, 2.0)], -1))
    assert view.result().to_dict()[(7,)] == 5.0
    assert view.result().witnesses()[(1,)] == {"x_": 0}
    # the maintained route, not a stale one; a result read before the tick keeps its own
    assert view.result().path((7,)) == [(0,), (1,), (7,)]
    assert before.path((7,)) == [(0,), (2,), (1,), (7,)]
    _predecessors_sum_up(sp, view)


def test_back_pointers_join_a_sparse_bag_without_a_cartesian_product(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The back-pointer join of a step binds its variables in the planner's binding order:
    binding the kept variables first (a, c of a two-hop step) made every pair of them a
    candidate, 40 s for 50,000 edges where the plain solve takes 1 s (a view's initial
    witnesses are one such solve)."""
    import numpy as np

    from faq import witness as batch_witness

    joins: list[tuple[tuple[str, ...], list[set[str]]]] = []
    join = batch_witness.kernel.generic_join

    def spy(tables, order, keep, ops, **kw):  # type: ignore[no-untyped-def]
        joins.append((tuple(order), [set(t.vars) for t in tables]))
        return join(tables, order, keep, ops, **kw)

    monkeypatch.setattr(batch_witness.kernel, "generic_join", spy)
    rng = np.random.default_rng(0)
    E = pd.DataFrame({"s": rng.integers(0, 300, 600), "d": rng.integers(0, 300, 600)})
    E = E.drop_duplicates().assign(value=1.0)
    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
    out = q.solve(witness=True, backend="driver", E=E)
    assert joins, "the back-pointers were not joined on the local kernel"
    for order, bag in joins:  # every variable bound after the first meets a bound one
        for i, v in enumerate(order[1:], 1):
            assert any(v in t and t & set(order[:i]) for t in bag), (order, bag)
    assert len(out.witnesses()) == len(out.to_dict())


def test_the_benchmark_runs_on_a_tiny_graph() -> None:
    """``python benchmarks/view_witness.py`` (a smoke run: no timing is asserted)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "view_witness.py"
    args = ["--nodes", "40", "--edges", "120", "--changes", "4", "--ticks", "2"]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "4 changes: plain" in done.stdout and "witnesses" in done.stdout


def test_a_program_view_moves_a_cut_witness_whose_distance_stays() -> None:
    """1 is reached at cost 2 through 2 or through 3: cutting its witness's edge keeps the
    distance, and the witness moves to the other predecessor."""
    sp = query(SSSP, semiring="min-plus")
    E = _edges([(0, 2, 1.0), (0, 3, 1.0), (2, 1, 1.0), (3, 1, 1.0)])
    view = IncrementalView(sp, witness=True, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=E)
    first = view.result().witnesses()[(1,)]["x_"]
    change = view.step(E=_edges([(first, 1, 1.0)], -1))
    assert (1,) not in change.to_dict()
    assert view.result().witnesses()[(1,)] == {"x_": 5 - first}
    _predecessors_sum_up(sp, view)
