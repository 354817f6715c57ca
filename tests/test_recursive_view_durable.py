"""Program views as a third view state (issue 40, point 4): durable (``state_dir``), with
set input relations (``sets=``), and ``state="spark"`` refused.

A durable program view commits every tick through the same store as a one-rule view: it
survives a close and a reopen, and a ``kill -9`` at any point of its last tick (simulated
as tests/test_journal.py does: the manifest put back as it was before the close, the
journal cut inside the tick's intent or commit frame), resumes with the same batch id
(exactly once), and then equals both a view that was never interrupted and a batch solve.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faq import Factor, query, reference_fixpoint, settings
from incremental import IncrementalView, StateError
from incremental.journal import INTENT
from incremental.testing import assert_incremental, ticks
from tests.helpers import frames_at

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
PATHS = "P(x) :- S(x)\nP(y) :- P(x), E(x, y)"


def edges(rows: list[tuple[int, int, float]], weight: int = 1) -> pd.DataFrame:
    a, b, v = zip(*rows, strict=True) if rows else ((), (), ())
    return pd.DataFrame({"a": a, "b": b, "value": v, "_weight": [weight] * len(rows)})


SOURCES = pd.DataFrame({"a": [0], "value": [0.0]})
EDGES = edges([(0, 1, 4.0), (0, 2, 1.0), (2, 1, 2.0), (1, 3, 1.0), (2, 3, 7.0)])
TICKS = [  # batch id, delta of E: insertions, a deletion that rederives, a worse value
    (10, edges([(3, 4, 2.0), (4, 5, 1.0)])),
    (11, edges([(0, 2, 1.0)], -1)),
    (12, pd.concat([edges([(2, 1, 2.0)], -1), edges([(2, 1, 0.5)])])),
    (13, edges([(5, 0, 3.0), (1, 4, 1.0)])),
]


def oracle(view: IncrementalView) -> dict:
    """The answer of the view's current inputs by the brute-force fixpoint."""
    rels = {n: view.relation(n).to_dict() for n in ("S", "E")}
    return reference_fixpoint(SSSP, "min-plus", rels)["D"]


def same(a: IncrementalView, b: IncrementalView) -> None:
    assert (b.tick, b.batch_id) == (a.tick, a.batch_id)
    assert b.result().to_dict() == a.result().to_dict()
    for n in ("S", "E", "D"):
        assert b.relation(n).to_dict() == a.relation(n).to_dict(), n


def killed(view: IncrementalView, folder: Path) -> bytes:
    """Close ``view`` and leave the folder as ``kill -9`` would have (the manifest from
    before the close put back); that manifest's bytes."""
    manifest = (folder / "manifest.json").read_bytes()
    view.close()
    (folder / "manifest.json").write_bytes(manifest)
    return manifest


def test_a_durable_shortest_path_view_survives_close_and_reopen(spark, tmp_path):
    sp = query(SSSP, semiring="min-plus")
    folder = tmp_path / "paths"
    live = IncrementalView(sp, S=SOURCES, E=EDGES)
    view = IncrementalView(sp, state_dir=folder, S=SOURCES, E=EDGES)
    for i, (batch, delta) in enumerate(TICKS[:3]):
        assert (
            view.step(batch_id=batch, E=delta).to_dict()
            == live.step(batch_id=batch, E=delta).to_dict()
        )
        if i == 1:  # closed and reopened between ticks too
            view.close()
            view = IncrementalView(sp, state_dir=folder)
    m = json.loads((folder / "manifest.json").read_text())
    assert m["tick"] == 0 and {"rel-D", "rel-E", "rows-E"} <= set(m["parts"])  # journaled
    view.close()
    again = IncrementalView(sp, state_dir=folder, if_exists="resume", S=SOURCES, E=EDGES)
    same(live, again)
    assert (again.tick, again.batch_id, again.where) == (3, 12, "driver")
    # exactly once: the batches committed before the close are skipped after it
    sink = again.foreach_batch("E")
    for batch, delta in TICKS[:3]:
        sink(delta, batch)
        assert again.last_step.skipped and again.tick == 3
    batch, delta = TICKS[3]
    sink(delta, batch)
    live.step(batch_id=batch, E=delta)
    same(live, again)
    S, E = again.relation("S"), again.relation("E")
    assert again.result().to_dict() == sp.solve(S=S, E=E).to_dict() == oracle(again)
    assert again.result().to_dict()[(4,)] == 5.0  # 0 -> 1 -> 4 (0 -> 2 is gone)
    again.close()


@pytest.mark.parametrize("semiring", ["min-plus", "counting", "real", "boolean", "max-product"])
def test_a_kill_inside_the_last_tick_resumes_at_a_committed_tick(semiring, tmp_path):
    """Cut inside the intent of the last tick: it was never durable, the view resumes at
    the tick before; cut after its intent (inside its commit frame): it is applied again.
    Either way the batch ids are exactly-once, and the resumed view goes on equal to one
    that never stopped.  Semirings: delete-and-rederive (min-plus, boolean,
    max-product) and the traced rounds of a ring (counting, real)."""
    text = SSSP if semiring in ("min-plus", "max-product") else PATHS
    p = query(text, semiring=semiring)
    value = {"min-plus": 1.0, "max-product": 0.5, "real": 0.5}.get(semiring)

    def delta(rows: list[tuple[int, int]], weight: int = 1) -> pd.DataFrame:
        d = pd.DataFrame({"a": [r[0] for r in rows], "b": [r[1] for r in rows]})
        if value is not None:
            d["value"] = value
        return d.assign(_weight=weight)

    S = pd.DataFrame({"a": [0]}).assign(**({"value": 1.0} if value is not None else {}))
    E = delta([(0, 1), (1, 2), (2, 3), (0, 2)])
    steps = [(1, delta([(3, 4), (1, 4)])), (2, delta([(0, 2)], -1)), (3, delta([(4, 5)]))]
    folder = tmp_path / "v"
    view = IncrementalView(p, state_dir=folder, S=S, E=E)
    for batch, d in steps[:2]:
        view.step(batch_id=batch, E=d)
    answers = []
    ref = IncrementalView(p, S=S, E=E)
    for batch, d in steps[:2]:
        ref.step(batch_id=batch, E=d)
        answers.append((ref.tick, ref.batch_id, ref.result().to_dict()))
    m = json.loads((folder / "manifest.json").read_text())
    path = folder / m["journal"]
    manifest = killed(view, folder)
    data = path.read_bytes()
    at = frames_at(path)
    assert [f[1:] for f in at] == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2)]
    cuts = {at[2][0] + 5: answers[0], at[3][0] + 3: answers[1], len(data) - 1: answers[1]}
    for cut, want in cuts.items():
        path.write_bytes(data[:cut])
        (folder / "manifest.json").write_bytes(manifest)
        with IncrementalView(p, state_dir=folder) as v:
            assert (v.tick, v.batch_id, v.result().to_dict()) == want, cut
            for batch, d in steps:  # the committed batches are skipped, the others run
                v.step(batch_id=batch, E=d)
            live = IncrementalView(p, S=S, E=E)
            for batch, d in steps:
                live.step(batch_id=batch, E=d)
            assert (v.tick, v.batch_id) == (3, 3)
            assert v.result().to_dict() == live.result().to_dict()
            for n in p.inputs:
                assert v.relation(n).to_dict() == live.relation(n).to_dict()
        with IncrementalView(p, state_dir=folder) as v:  # and after a clean close
            assert v.result().to_dict() == live.result().to_dict() and v.tick == 3
        rels = {n: live.relation(n).to_dict() for n in p.inputs}
        want_answer = reference_fixpoint(text, semiring, rels)[p.answer]
        got = live.result().to_dict()
        assert got.keys() == want_answer.keys()
        assert all(math.isclose(got[k], want_answer[k]) for k in got)


def test_checkpoints_of_a_program_view_reopen_equal(tmp_path):
    """Every tick a checkpoint (``journal_ticks=1``): the parts, the traced rounds of a
    counting program included, are written and read back from Parquet."""
    p = query(PATHS, semiring="counting")
    S = pd.DataFrame({"a": [0]})
    E = pd.DataFrame({"a": [0, 1, 2, 0], "b": [1, 2, 3, 2]})
    more = [
        pd.DataFrame({"a": [3, 1], "b": [4, 4]}),
        pd.DataFrame({"a": [0], "b": [2], "_weight": [-1]}),
    ]
    live = IncrementalView(p, S=S, E=E)
    with settings(journal_ticks=1):
        view = IncrementalView(p, state_dir=tmp_path / "v", S=S, E=E)
        for d in more:
            view.step(E=d)
            live.step(E=d)
        m = json.loads((tmp_path / "v" / "manifest.json").read_text())
        assert m["tick"] == 2 and "trace-P" in m["parts"]
        view.close()
        with IncrementalView(p, state_dir=tmp_path / "v") as v:
            assert (
                v.result().to_dict()
                == live.result().to_dict()
                == {
                    (0,): 1,
                    (1,): 1,
                    (2,): 1,
                    (3,): 1,
                    (4,): 2,
                }
            )
            v.step(E=pd.DataFrame({"a": [4], "b": [5]}))
            live.step(E=pd.DataFrame({"a": [4], "b": [5]}))
            assert v.result().to_dict() == live.result().to_dict()


def test_a_program_folder_is_verified_on_reopen(tmp_path):
    sp = query(SSSP, semiring="min-plus")
    folder = tmp_path / "v"
    IncrementalView(sp, state_dir=folder, S=SOURCES, E=EDGES).close()
    with pytest.raises(ValueError, match="holds a view of D"):
        IncrementalView(query(SSSP, semiring="max-plus"), state_dir=folder)
    with pytest.raises(ValueError, match="holds a view of"):
        IncrementalView(
            query("D(x) :- S(x)\nD(y) :- E(x, y), D(x)", semiring="min-plus"), state_dir=folder
        )
    with pytest.raises(ValueError, match="already holds a view"):
        IncrementalView(sp, state_dir=folder, S=SOURCES)
    with pytest.raises(ValueError, match=r"set relations are \{\}"):
        IncrementalView(sp, state_dir=folder, sets="ignore")
    m = json.loads((folder / "manifest.json").read_text())
    base = folder / m["parts"]["rel-D"]["base"]
    raw = bytearray(base.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    base.write_bytes(bytes(raw))
    with pytest.raises(StateError, match="rel-D.base.parquet"):
        IncrementalView(sp, state_dir=folder)


def test_refused_options_of_a_program_view(tmp_path):
    sp = query(SSSP, semiring="min-plus")
    with pytest.raises(ValueError, match='state="spark" is not supported'):
        IncrementalView(sp, state="spark")
    with pytest.raises(ValueError, match="witness=True is not supported with state_dir"):
        IncrementalView(sp, witness=True, state_dir=tmp_path / "w")
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    with pytest.raises(ValueError, match="max_rounds= applies to views of programs"):
        IncrementalView(tri, max_rounds=3)
    with pytest.raises(TypeError, match="faq.Query or faq.Program"):
        IncrementalView(SSSP)
    assert not (tmp_path / "w").exists()


# -- sets ----------------------------------------------------------------------------------
def test_set_edges_are_counted_once_in_a_counting_program():
    """A counting program counts paths: an edge inserted twice into a bag doubles the
    paths through it; into a set it is one edge."""
    p = query(PATHS, semiring="counting")
    S = pd.DataFrame({"a": [0]})
    E = pd.DataFrame({"a": [0, 1, 0], "b": [1, 2, 2]})
    bag = IncrementalView(p, S=S, E=E)
    sets = IncrementalView(p, sets={"E": "ignore"}, S=S, E=E)
    again = pd.DataFrame({"a": [0, 0], "b": [1, 1]})  # twice, in one delta
    bag.step(E=again)
    sets.step(E=again)
    assert bag.result().to_dict() == {(0,): 1, (1,): 3, (2,): 4}
    assert sets.result().to_dict() == {(0,): 1, (1,): 1, (2,): 2}
    absent = pd.DataFrame({"a": [2], "b": [0], "_weight": [-1]})
    sets.step(E=absent)  # a retraction of an edge the set does not hold: dropped
    assert sets.relation("E").to_dict() == {(0, 1): 1, (1, 2): 1, (0, 2): 1}
    strict = IncrementalView(p, sets="refuse", S=S, E=E)
    with pytest.raises(ValueError, match="set relation 'E' inserts a tuple the set already"):
        strict.step(E=again)
    assert strict.tick == 0 and strict.result().to_dict() == {(0,): 1, (1,): 1, (2,): 2}
    with pytest.raises(ValueError, match="set relation 'E' retracts a tuple the set does not"):
        strict.step(E=absent)
    with pytest.raises(ValueError, match="sets: unknown relation 'P'"):
        IncrementalView(p, sets={"P": "ignore"})  # a defined relation is not a set


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
@given(data=st.data())
def test_set_inputs_of_a_durable_program_view_match_batch(mode, data, tmp_path_factory):
    """Drawn ticks over set inputs (inserting held edges, retracting absent ones), in a
    durable view closed and reopened at a drawn tick: equal to the batch and the oracle
    after every tick (:func:`incremental.testing.assert_incremental`)."""
    p = query(SSSP, semiring="min-plus")
    values = st.sampled_from([0.0, 1.0, 2.0, 5.0])
    t = data.draw(ticks(p, keys=range(5), max_ticks=4, values=values, sets=mode))
    folder = tmp_path_factory.mktemp("sets")
    out = assert_incremental(p, t, state_dir=folder, sets=mode)
    assert out.reopened == (t.reopen is not None)


@given(data=st.data())
def test_a_durable_counting_program_reopened_matches_batch(data, tmp_path_factory):
    """Path counts on a DAG (traced rounds), durable and reopened at a drawn tick."""
    p = query(PATHS, semiring="counting")
    t = data.draw(
        ticks(p, keys=range(5), max_ticks=4, key_filter=lambda n, k: n != "E" or k[0] < k[1])
    )
    assert_incremental(p, t, state_dir=tmp_path_factory.mktemp("paths"))


def test_factor_deltas_go_through_the_journal(tmp_path):
    """Deltas given as Factors (and string keys) are journaled as the view read them."""
    p = query("R(x) :- S(x)\nR(y) :- R(x), E(x, y)", semiring="boolean")
    E: Any = Factor.from_pandas(
        pd.DataFrame({"a": ["u", "v"], "b": ["v", "w"]}), semiring="boolean"
    )
    view = IncrementalView(p, state_dir=tmp_path / "v", S=pd.DataFrame({"a": ["u"]}), E=E)
    view.step(E=pd.DataFrame({"a": ["w"], "b": ["x"]}))
    view.step(E=pd.DataFrame({"a": ["u"], "b": ["v"], "_weight": [-1]}))
    want = view.result().to_dict()
    assert want == {("u",): True}
    killed(view, tmp_path / "v")
    with IncrementalView(p, state_dir=tmp_path / "v") as v:
        assert v.result().to_dict() == want and v.tick == 2
        assert v.relation("E").to_dict() == {("v", "w"): True, ("w", "x"): True}
