"""A maintained path program's ticks as compiled graph walks (:mod:`incremental.linear_dred`).

After every tick of insertions, deletions and changed weights, of edges and of sources,
the view that walks equals the view that runs its delta queries round by round
(``path_walks=False``) and a batch solve, for min-plus, max-plus and max-product; the
walks ran (a spy counts them); a view keeping witnesses takes the walks' (every
witness attains its key's value, every path its distance); and a tick they cannot take
(an edge value that could improve a path) takes the general path with the same answer
or the same refusal."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import faq
import incremental.linear_dred as walks
import semirings
from faq import query
from incremental import IncrementalView
from incremental.witness_programs import ProgramWitnesses
from tests.test_view_witnesses import _paths_attain as paths_attain
from tests.test_view_witnesses import _predecessors_sum_up as predecessors_sum_up

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
N = 7
WEIGHTS = {  # values that make no path better, ties likely
    "min-plus": [0.0, 1.0, 1.0, 2.0, 3.0],
    "max-plus": [0.0, -1.0, -1.0, -2.0],
    "max-product": [1.0, 0.5, 0.5, 0.25],
}
SOURCE = {"min-plus": [0.0, 2.0], "max-plus": [0.0, -3.0], "max-product": [1.0, 0.5]}


def frame(rows: dict[tuple[int, ...], float], sign: int, cols: tuple[str, ...]) -> pd.DataFrame:
    """Rows ``key -> value`` as a delta of multiplicity ``sign``."""
    keys = list(rows)
    data: dict[str, Any] = {c: [k[i] for k in keys] for i, c in enumerate(cols)}
    data["value"] = [rows[k] for k in keys]
    data["_weight"] = [sign] * len(keys)
    types = {**{c: "int64" for c in cols}, "value": "float64", "_weight": "int64"}
    return pd.DataFrame(data).astype(types)


@st.composite
def streams(draw: Any, name: str) -> tuple[dict, dict, list]:
    """A graph, its sources and a few ticks, each a set of changes of edges and sources
    (a changed weight is a retraction and an insertion)."""
    w = st.sampled_from(WEIGHTS[name])
    pair = st.tuples(st.integers(0, N - 1), st.integers(0, N - 1))
    E = draw(st.dictionaries(pair, w, min_size=4, max_size=18))
    S = {(0,): SOURCE[name][0]}
    ticks = []
    for _ in range(draw(st.integers(2, 5))):
        gone = draw(st.lists(st.sampled_from(sorted(E)), max_size=4, unique=True)) if E else []
        new = draw(st.dictionaries(pair, w, max_size=4))
        out = {k: E.pop(k) for k in gone}
        add = {k: v for k, v in new.items() if k not in E and out.get(k) != v}
        E.update(add)
        s_out, s_add = {}, {}
        if draw(st.booleans()):  # move or re-weigh the source
            s_out = dict(S)
            S = {(draw(st.integers(0, N - 1)),): draw(st.sampled_from(SOURCE[name]))}
            s_add = dict(S)
        ticks.append((out, add, s_out, s_add))
    first = {k: v for k, v in E.items()}
    for out, add, _, _ in reversed(ticks):  # undo the ticks: the graph the view starts from
        for k in add:
            first.pop(k)
        first.update(out)
    return first, {(0,): SOURCE[name][0]}, ticks


def deltas(out: dict, add: dict, cols: tuple[str, ...]) -> pd.DataFrame | None:
    """A tick's retractions and insertions of one relation (None: no change)."""
    if not out and not add:
        return None
    return pd.concat([frame(out, -1, cols), frame(add, 1, cols)], ignore_index=True)


@pytest.mark.parametrize("name", sorted(WEIGHTS))
@given(data=st.data())
def test_walked_ticks_equal_the_general_path_and_the_batch(name, data, monkeypatch):
    E, S, ticks = data.draw(streams(name), label="stream")
    walked = []
    real = walks.path_repair
    monkeypatch.setattr(walks, "path_repair", lambda *a: walked.append(1) or real(*a))
    p = query(SSSP, semiring=name)
    edges, src = frame(E, 1, ("a", "b")), frame(S, 1, ("a",))
    fast = IncrementalView(p, S=src, E=edges)
    with faq.settings(path_walks=False):
        slow = IncrementalView(p, S=src, E=edges)
    for out, add, s_out, s_add in ticks:
        E = {k: v for k, v in E.items() if k not in out} | add
        S = {k: v for k, v in S.items() if k not in s_out} | s_add
        step = {"E": deltas(out, add, ("a", "b")), "S": deltas(s_out, s_add, ("a",))}
        got = fast.step(**step).to_dict()
        with faq.settings(path_walks=False):
            want = slow.step(**step).to_dict()
        assert got == want
        batch = p.solve(
            S=faq.Factor.from_dict(S, ("a",), name), E=faq.Factor.from_dict(E, ("a", "b"), name)
        )
        assert fast.result().to_dict() == slow.result().to_dict() == batch.to_dict()
    assert walked or not any(out or add for out, add, _, _ in ticks)  # edges changed: walks


def test_a_deleted_edge_is_rederived_through_another_path_and_unreached_keys_leave():
    p = query(SSSP, semiring="min-plus")
    E = {(0, 1): 1.0, (1, 2): 1.0, (0, 3): 5.0, (3, 2): 0.0, (2, 4): 2.0, (5, 6): 1.0}
    view = IncrementalView(p, S=frame({(0,): 0.0}, 1, ("a",)), E=frame(E, 1, ("a", "b")))
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 2.0, (3,): 5.0, (4,): 4.0}
    change = view.step(E=frame({(1, 2): 1.0}, -1, ("a", "b")))  # 2 now through 3
    assert change.to_dict() == {(2,): 5.0, (4,): 7.0}
    assert view.last_step.where == "driver"
    view.step(E=frame({(0, 3): 5.0}, -1, ("a", "b")))  # 2, 3 and 4 unreachable
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0}
    view.step(E=frame({(1, 3): 0.5}, 1, ("a", "b")))  # reached again, through 1
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (3,): 1.5, (2,): 1.5, (4,): 3.5}


def test_an_edge_that_could_improve_a_path_takes_the_general_path(monkeypatch):
    walked = []
    real = walks.path_repair
    monkeypatch.setattr(walks, "path_repair", lambda *a: walked.append(1) or real(*a))
    p = query(SSSP, semiring="min-plus")
    E = {(0, 1): 1.0, (1, 2): 1.0}
    view = IncrementalView(p, S=frame({(0,): 0.0}, 1, ("a",)), E=frame(E, 1, ("a", "b")))
    view.step(E=frame({(0, 2): 3.0}, 1, ("a", "b")))
    assert walked == [1]
    view.step(E=frame({(0, 2): -1.0}, 1, ("a", "b")))  # a negative weight: no walk
    assert walked == [1]
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): -1.0}
    with pytest.raises(faq.plan.DivergenceError):  # an improving cycle: the batch's refusal
        view.step(E=frame({(2, 0): -1.0}, 1, ("a", "b")))
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): -1.0}


def test_a_user_semiring_without_library_operations_takes_the_general_path(monkeypatch):
    walked = []
    real = walks.path_repair
    monkeypatch.setattr(walks, "path_repair", lambda *a: walked.append(1) or real(*a))
    M = semirings.MIN_PLUS
    copy = semirings.Semiring(
        "shortest", M.zero, M.one, M.add, M.mul, idempotent=True, selective="min", tight=True
    )
    assert walks.path_order(copy) is None and walks.path_order(M) == (True, False)
    p = query(SSSP, semiring=copy)
    E = {(0, 1): 1.0, (1, 2): 1.0}
    view = IncrementalView(p, S=frame({(0,): 0.0}, 1, ("a",)), E=frame(E, 1, ("a", "b")))
    view.step(E=frame({(0, 1): 1.0}, -1, ("a", "b")))
    assert view.result().to_dict() == {(0,): 0.0} and not walked


@pytest.mark.parametrize("name", ["min-plus", "max-product"])
@given(data=st.data())
def test_a_walked_view_keeps_witnesses_that_attain_their_values(name, data, monkeypatch):
    E, S, ticks = data.draw(streams(name), label="stream")
    kept = []
    real = ProgramWitnesses.walked

    def spy(self, program, walk):  # type: ignore[no-untyped-def]
        got = real(self, program, walk)
        kept.append(got is not None)
        return got

    monkeypatch.setattr(ProgramWitnesses, "walked", spy)
    p = query(SSSP, semiring=name)
    view = IncrementalView(p, witness=True, S=frame(S, 1, ("a",)), E=frame(E, 1, ("a", "b")))
    for out, add, s_out, s_add in ticks:
        view.step(E=deltas(out, add, ("a", "b")), S=deltas(s_out, s_add, ("a",)))
        predecessors_sum_up(p, view)
        paths_attain(p, view)
    assert all(kept) and (kept or not any(out or add for out, add, _, _ in ticks))


def test_witnesses_of_negative_keys_name_their_edges():
    # keys -1 and -2 are nodes like any other: how a key was set is not read off its value
    p = query(SSSP, semiring="min-plus")
    E = {(-2, -1): 1.0, (-1, 0): 1.0, (-2, 0): 3.0, (0, 1): 1.0}
    src = frame({(-2,): 0.0}, 1, ("a",))
    view = IncrementalView(p, witness=True, S=src, E=frame(E, 1, ("a", "b")))
    view.step(E=frame({(-1, 0): 1.0}, -1, ("a", "b")))  # 0 now through the edge from -2
    assert view.result().to_dict() == {(-2,): 0.0, (-1,): 1.0, (0,): 3.0, (1,): 4.0}
    assert view.result().witnesses()[(0,)] == {"x_": -2}
    assert view.result().path((1,)) == [(-2,), (0,), (1,)]
    predecessors_sum_up(p, view)
