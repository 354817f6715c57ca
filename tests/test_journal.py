"""A durable view's journal: each tick one checksummed frame, checkpoints now and then.

Oracle: the live view.  A view reopened from its folder after journaled ticks (and
checkpoints between them) holds exactly the live view's result and relations, in
every regime (counting, the ``real`` ring, boolean, min-plus, user semirings with
float and with Python-int annotations, string keys).  Damage is refused by
``StateError`` naming the journal; a frame cut short (what a crash during the
append leaves) is dropped and the view reopens at the tick before; an append that
fails leaves the view and the folder at the old tick; and a process killed with
SIGKILL at a random moment while ticking reopens at a tick it committed (the last
one it reported, or the one it was committing), equal to a fresh replay of the
same deltas up to that tick.  A tick writes its intent (its deltas) first, synced on
the journal's thread while the tick runs, then its commit frame unsynced: an intent
whose commit frame is missing or torn is applied again on reopen, one that is
refused then is cut off, and a refused tick leaves no intent behind.

A view closed cleanly records its last tick in the manifest: its journal cut short
later (at a frame boundary or inside a frame) lost committed ticks, and reopening it
raises ``StateError`` naming the journal and the ticks missing, unless the caller
passes ``if_ticks_lost="accept"``: then the view is at the last tick the journal
holds, equal to a batch solve of the inputs of that tick.  The crash cases above
leave the folder as a killed process does (:func:`_killed`: no such record).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from faq import Factor, query, settings
from incremental import IncrementalView, StateError
from incremental.journal import HEADER, INTENT, encode_intent, read_frames, read_journal
from semirings import Semiring
from tests.helpers import frames_at
from tests.journal_ticker import CHECKPOINT_TICKS, Ticks, ticker_query

ROOT = Path(__file__).resolve().parent.parent
TICKER = Path(__file__).with_name("journal_ticker.py")
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
PATH = "Q(a, c) :- E(a, b), F(b, c)"


def _bottleneck() -> Semiring:
    return Semiring("bottleneck", -float("inf"), float("inf"), max, min)


def _int_bottleneck() -> Semiring:
    return Semiring("int-bottleneck", 0, 10**6, max, min)


SEMIRINGS = {
    "counting": lambda: "counting",
    "real": lambda: "real",
    "boolean": lambda: "boolean",
    "min-plus": lambda: "min-plus",
    "user float": _bottleneck,
    "user int": _int_bottleneck,
}


class Deltas:
    """Random valid deltas of the relations E and F of ``PATH`` for a semiring: signed
    annotations for rings and counting (never a negative count), insertions and
    retractions of held rows (``_weight``) for the others."""

    def __init__(self, semiring: str, seed: int, keys: str = "int") -> None:
        self.kind = semiring
        self.rng = np.random.default_rng(seed)
        self.held: dict[str, list[tuple]] = {"E": [], "F": []}
        self.keys = keys

    def _key(self) -> tuple:
        a, b = (int(x) for x in self.rng.integers(0, 6, size=2))
        return (f"n{a}", f"n{b}") if self.keys == "str" else (a, b)

    def _value(self):
        k = self.kind
        if k == "real":
            return float(self.rng.normal())
        if k == "boolean":
            return True
        if k == "user int":
            return int(self.rng.integers(1, 100))
        return float(self.rng.integers(1, 50)) / 4  # min-plus, user float

    def delta(self, name: str, n: int = 4) -> pd.DataFrame:
        rows = []
        held = self.held[name]
        for _ in range(n):
            if held and self.rng.random() < 0.35:
                row = held.pop(int(self.rng.integers(len(held))))
                rows.append((*row, -1))
            else:
                row = (*self._key(), self._value())
                if self.kind == "counting":
                    row = (*row[:2], 1)
                held.append(row)
                rows.append((*row, 1))
        df = pd.DataFrame(rows, columns=["a", "b", "value", "_weight"])
        if self.kind == "user int":
            df["value"] = df["value"].astype(object)
        if self.kind in ("counting", "real"):  # signed annotations, no weights
            df["value"] = df["value"] * df["_weight"]
            df = df.drop(columns="_weight")
        return df


def _view(semiring: str, folder: Path, seed: int = 0, keys: str = "int", **kw):
    S = SEMIRINGS[semiring]()
    d = Deltas(semiring, seed, keys)
    q = query(PATH, semiring=S)
    view = IncrementalView(q, state_dir=folder, state="driver", E=d.delta("E", 6), **kw)
    return view, d, q


def _same(a: IncrementalView, b: IncrementalView) -> None:
    assert b.tick == a.tick and b.batch_id == a.batch_id
    assert b.result().to_dict() == a.result().to_dict()
    for n in ("E", "F"):
        assert b.relation(n).to_dict() == a.relation(n).to_dict(), n


def _journal(folder: Path) -> tuple[Path, dict]:
    m = json.loads((folder / "manifest.json").read_text())
    return folder / m["journal"], m


def _killed(view: IncrementalView, folder: Path) -> bytes:
    """Close ``view`` and leave its folder as ``kill -9`` would have: without the last tick
    that closing records in the manifest (the manifest from before the close is put
    back).  Returns that manifest's bytes."""
    manifest = (folder / "manifest.json").read_bytes()
    view.close()
    (folder / "manifest.json").write_bytes(manifest)
    return manifest


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("lease.json", ".lock")
    }


# -- reopen equals the live view --------------------------------------------------------------
@pytest.fixture
def needs_spark(request):
    """A SparkSession when the test's semiring is a user one (its operations are UDFs)."""
    if request.node.callspec.params.get("semiring", "").startswith("user"):
        request.getfixturevalue("spark")


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
def test_reopen_after_journaled_ticks_equals_the_live_view(semiring, tmp_path, needs_spark):
    view, d, q = _view(semiring, tmp_path / "v")
    for t in range(12):
        view.step(batch_id=10 + t, E=d.delta("E"), F=d.delta("F"))
    path, m = _journal(tmp_path / "v")
    assert m["tick"] == 0  # no checkpoint since the first commit: all 12 in the journal
    assert len(read_frames(path, 0)[0]) == 12
    view.close()
    again = IncrementalView(q, state_dir=tmp_path / "v")
    _same(view, again)
    again.step(E=d.delta("E"))  # and it goes on ticking from there, in the same journal
    assert _journal(tmp_path / "v")[1]["tick"] == 0 and len(read_frames(path, 0)[0]) == 13
    again.close()
    once_more = IncrementalView(q, state_dir=tmp_path / "v")
    _same(again, once_more)
    once_more.close()


@pytest.mark.parametrize("semiring", ["counting", "real", "min-plus"])
def test_a_spark_state_journals_its_ticks_too(semiring, spark, tmp_path):
    S = SEMIRINGS[semiring]()
    d = Deltas(semiring, 5)
    q = query(PATH, semiring=S)
    with settings(journal_ticks=4):
        view = IncrementalView(q, state_dir=tmp_path / "v", state="spark", E=d.delta("E", 6))
        for t in range(6):
            view.step(batch_id=t, E=d.delta("E"), F=d.delta("F"))
    path, m = _journal(tmp_path / "v")
    assert m["state"] == "spark" and m["tick"] == 5  # 1-4 journaled, 5 a checkpoint
    assert len(read_frames(path, 5)[0]) == 1
    view.close()
    again = IncrementalView(q, state_dir=tmp_path / "v")
    assert again.where == "spark"
    _same(view, again)
    again.close()


def test_a_user_semiring_redefined_is_refused_after_journaled_ticks(spark, tmp_path):
    import operator

    view, d, q = _view("user float", tmp_path / "v")
    for _ in range(3):
        view.step(E=d.delta("E"), F=d.delta("F"))
    view.close()
    other = Semiring("bottleneck", 0.0, 1.0, operator.add, operator.mul)
    with pytest.raises(ValueError, match="defined differently"):
        IncrementalView(query(PATH, semiring=other), state_dir=tmp_path / "v")
    _same(view, IncrementalView(q, state_dir=tmp_path / "v"))


def test_string_keys_go_through_the_journal(tmp_path):
    view, d, q = _view("counting", tmp_path / "v", keys="str")
    for _ in range(5):
        view.step(E=d.delta("E"), F=d.delta("F"))
    view.close()
    again = IncrementalView(q, state_dir=tmp_path / "v")
    _same(view, again)
    assert all(isinstance(k, str) for key in again.relation("E").to_dict() for k in key)
    again.close()


@pytest.mark.parametrize("semiring", ["counting", "real", "user int"])
def test_checkpoints_between_journaled_ticks(semiring, tmp_path, needs_spark):
    with settings(journal_ticks=3):
        view, d, q = _view(semiring, tmp_path / "v")
        for _ in range(8):
            view.step(E=d.delta("E"), F=d.delta("F"))
    path, m = _journal(tmp_path / "v")
    # ticks 1-3 journaled, 4 a checkpoint, 5-7 journaled, 8 a checkpoint
    assert m["tick"] == 8 and read_frames(path, 8)[0] == []
    with settings(journal_ticks=3):
        view.step(E=d.delta("E"))
    path, m = _journal(tmp_path / "v")
    assert m["tick"] == 8 and len(read_frames(path, 8)[0]) == 1
    assert len(list((tmp_path / "v").glob("tick-*/journal.bin"))) == 1  # old ones removed
    view.close()
    _same(view, IncrementalView(q, state_dir=tmp_path / "v"))


def test_last_step_times_the_commit_of_a_durable_tick_only(tmp_path, monkeypatch):
    """``last_step.commit_s`` is the tick's own durable work: the intent, the commit frame
    and the wait for the sync, each counted (a slow wait shows in it), and 0 for a view
    without a ``state_dir``."""
    from incremental.journal import Pending

    view, d, q = _view("counting", tmp_path / "v")
    plain = IncrementalView(q, E=view.relation("E"), F=view.relation("F"))
    wait = Pending.wait

    def slow(self):
        time.sleep(0.05)
        wait(self)

    t0 = time.perf_counter()
    view.step(E=d.delta("E"))
    assert 0 < view.last_step.commit_s <= time.perf_counter() - t0  # no bound: load varies
    monkeypatch.setattr(Pending, "wait", slow)
    delta = d.delta("E")
    t0 = time.perf_counter()
    view.step(E=delta)
    whole = time.perf_counter() - t0
    assert 0.05 <= view.last_step.commit_s <= whole
    plain.step(E=delta)
    assert plain.last_step.commit_s == 0.0
    view.close()


def test_a_journal_over_its_byte_limit_is_checkpointed(tmp_path):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    path, _ = _journal(tmp_path / "v")
    frame = path.stat().st_size
    with settings(journal_bytes=2 * frame + frame // 2):
        for _ in range(4):
            view.step(E=d.delta("E"))
    path, m = _journal(tmp_path / "v")
    assert m["tick"] in (3, 4, 5) and path.stat().st_size <= 2 * frame + frame // 2
    view.close()
    _same(view, IncrementalView(q, state_dir=tmp_path / "v"))


def test_a_checkpoint_file_lost_while_open_makes_the_next_tick_a_checkpoint(tmp_path):
    """A journaled tick relies on the checkpoint's files: one gone (or cut) while the view
    is open is seen by the next tick, which writes a checkpoint instead of a frame."""
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    _, m = _journal(tmp_path / "v")
    assert m["tick"] == 0  # the tick went to the journal
    lost = next(tmp_path.joinpath("v").rglob("*.parquet"))
    lost.write_bytes(lost.read_bytes()[:-1])  # cut by one byte: its size no longer matches
    view.step(E=d.delta("E"))
    path, m = _journal(tmp_path / "v")
    assert m["tick"] == 2 and path.stat().st_size == 0  # a checkpoint, a new journal
    view.close()
    _same(view, IncrementalView(q, state_dir=tmp_path / "v"))


# -- a torn last frame, damage --------------------------------------------------------------------


def _flags(path: Path) -> list[tuple[int, int]]:
    """(flags, tick) of every frame of the journal ``path``, in order."""
    return [(flags, tick) for _, flags, tick in frames_at(path)]


def test_a_tick_syncs_its_intent_in_the_journals_helper_process(tmp_path, monkeypatch):
    """Each tick appends its intent, then its commit frame; the one sync a tick waits for
    is the intent's, run by the journal's helper process while the tick computes: the
    view's own process calls no ``fdatasync`` in a tick (before, it synced the commit
    frame itself, after the tick)."""
    import incremental.journal as journal

    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    syncer = view._store.journal._syncer
    answered = syncer.answered
    calls: list[int] = []
    monkeypatch.setattr(journal.os, "fdatasync", calls.append)
    for _ in range(2):
        view.step(E=d.delta("E"), F=d.delta("F"))
    monkeypatch.undo()
    assert calls == [] and syncer.answered == answered + 2
    path, m = _journal(tmp_path / "v")
    assert _flags(path) == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2), (INTENT, 3), (0, 3)]
    frames, end, pending = read_journal(path, m["tick"])
    assert [f.tick for f in frames] == [1, 2, 3] and end == path.stat().st_size
    assert pending is None
    helper = syncer._proc
    view.close()
    assert helper is not None and helper.poll() is not None  # the helper ended with the view


def test_the_sync_helper_reports_a_failed_sync_and_its_death(tmp_path):
    from incremental.syncer import Syncer

    failing = Syncer(Path("/dev/null"))  # fdatasync of a character device: EINVAL
    assert failing.start()
    with pytest.raises(OSError, match="fdatasync of /dev/null"):
        failing.result()
    failing.close()
    path = tmp_path / "f"
    path.write_bytes(b"x")
    s = Syncer(path)
    assert s.start()
    s.result()
    assert s.answered == 1
    helper = s._proc
    os.kill(helper.pid, signal.SIGSTOP)  # the helper takes the request, then dies unanswered
    assert s.start() and s._proc is helper
    helper.kill()
    with pytest.raises(OSError, match="ended without an answer"):
        s.result()
    assert s.start() and s._proc is not helper  # a new helper for the next sync
    s.result()
    assert s.answered == 2
    s.close()


def test_an_intent_without_its_commit_frame_is_applied_again(tmp_path, caplog):
    """Cut anywhere inside the last tick's commit frame (or right after its intent: a
    crash between the two, or a power loss that took the unsynced commit frame), the
    journal reopens at that tick: its deltas, read back from the intent, are applied
    again.  The reopen writes nothing; the tick's commit frame goes to the journal before
    the next tick's intent.  Cut inside the intent, the tick was never durable: the view
    reopens at the tick before."""
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    first = (view.result().to_dict(), view.relation("E").to_dict())
    view.step(E=d.delta("E"), F=d.delta("F"))
    last = (view.result().to_dict(), view.relation("E").to_dict())
    nxt = d.delta("E")
    view.step(E=nxt)
    after = view.result().to_dict()
    path, _ = _journal(tmp_path / "v")
    manifest = _killed(view, tmp_path / "v")
    starts = [p for p, _, _ in frames_at(path)]
    assert len(starts) == 6  # an intent and a commit frame per tick
    data = path.read_bytes()[: starts[4]]  # as if tick 3 never ran
    for cut in [starts[2], starts[2] + 9, starts[3] - 1]:  # inside the intent of tick 2
        path.write_bytes(data[:cut])
        (tmp_path / "v" / "manifest.json").write_bytes(manifest)
        with IncrementalView(q, state_dir=tmp_path / "v") as v:
            assert (v.tick, (v.result().to_dict(), v.relation("E").to_dict())) == (1, first)
    for cut in [starts[3], starts[3] + 1, starts[3] + HEADER.size + 3, len(data) - 1]:
        path.write_bytes(data[:cut])
        (tmp_path / "v" / "manifest.json").write_bytes(manifest)
        with IncrementalView(q, state_dir=tmp_path / "v") as v:
            got = (v.result().to_dict(), v.relation("E").to_dict())
            assert (v.tick, got) == (2, last), cut
        assert path.read_bytes() == data[:cut]  # a reopen writes nothing
        assert _reopened_answers(q, tmp_path / "v") == (2, last[0])  # and again
        with IncrementalView(q, state_dir=tmp_path / "v") as v:
            v.step(E=nxt)  # tick 2's commit frame goes first, then tick 3's frames
            assert (v.tick, v.result().to_dict()) == (3, after)
        assert _flags(path) == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2), (INTENT, 3), (0, 3)]
        assert _reopened_answers(q, tmp_path / "v") == (3, after)
    assert "applied again from its intent" in caplog.text


def test_a_refused_tick_leaves_no_intent_behind(tmp_path):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    path, _ = _journal(tmp_path / "v")
    before = path.read_bytes()
    gone = pd.DataFrame([(5, 5, -3)], columns=["a", "b", "value"])  # a negative count
    with pytest.raises(ValueError, match="negative"):
        view.step(E=gone)
    assert path.read_bytes() == before and view.tick == 1
    view.step(E=d.delta("E"))  # the next tick appends where the refused one began
    view.close()
    assert _reopened_answers(q, tmp_path / "v")[0] == 2


def test_an_intent_refused_when_applied_again_is_cut_off(tmp_path, caplog):
    """An intent left by a process killed in a tick that was refused (between writing the
    intent and taking it back) is refused again on reopen: the tick was never
    committed, so the view resumes before it, with a warning, and its next commit cuts
    the intent off (the reopen writes nothing)."""
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    answer = view.result().to_dict()
    path, _ = _journal(tmp_path / "v")
    view.close()
    before = path.read_bytes()
    cols = (np.array([5]), np.array([5]))
    bad = encode_intent(2, None, {"E": (cols, np.array([-3]), np.array([1]))})
    path.write_bytes(before + bad)
    assert _reopened_answers(q, tmp_path / "v") == (1, answer)
    assert "never committed" in caplog.text
    assert path.read_bytes() == before + bad
    with IncrementalView(q, state_dir=tmp_path / "v") as v:
        v.step(E=d.delta("E"))
        live = (v.tick, v.result().to_dict())
    assert _flags(path) == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2)]
    assert _reopened_answers(q, tmp_path / "v") == live


def test_a_journal_without_intents_still_reads(tmp_path):
    """Journals written before intents hold commit frames only: they reopen as before."""
    view, d, q = _view("counting", tmp_path / "v")
    for _ in range(3):
        view.step(E=d.delta("E"), F=d.delta("F"))
    live = (view.tick, view.result().to_dict())
    path, _ = _journal(tmp_path / "v")
    view.close()
    data, pos, kept = path.read_bytes(), 0, b""
    while pos < len(data):
        _, _, flags, _, length, _, _ = HEADER.unpack_from(data, pos)
        if flags != INTENT:
            kept += data[pos : pos + HEADER.size + length]
        pos += HEADER.size + length
    path.write_bytes(kept)
    assert _flags(path) == [(0, 1), (0, 2), (0, 3)]
    assert _reopened_answers(q, tmp_path / "v") == live


def test_two_intents_in_a_row_are_refused(tmp_path):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    path, _ = _journal(tmp_path / "v")
    view.close()
    cols = (np.array([1]), np.array([2]))
    again = encode_intent(2, None, {"E": (cols, np.array([1]), np.array([1]))})
    path.write_bytes(path.read_bytes() + again + again)
    with pytest.raises(StateError, match="second intent of tick 2 before its commit frame"):
        IncrementalView(q, state_dir=tmp_path / "v")


def _reopened_answers(q, folder: Path) -> tuple[int, dict]:
    with IncrementalView(q, state_dir=folder) as v:
        return v.tick, v.result().to_dict()


def test_a_last_frame_cut_anywhere_is_dropped(tmp_path, caplog):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    before = (view.result().to_dict(), view.relation("E").to_dict(), view.relation("F").to_dict())
    view.step(E=d.delta("E"), F=d.delta("F"))
    path, _ = _journal(tmp_path / "v")
    manifest = _killed(view, tmp_path / "v")
    data = path.read_bytes()
    frames, end = read_frames(path, 0)
    assert len(frames) == 2 and end == len(data)
    _, _, intent = read_journal(path, 0)
    # the intent of tick 2 cut short: tick 2 was never durable (a cut past the intent
    # applies the intent again: test_an_intent_without_its_commit_frame_is_applied_again)
    at = frames_at(path)
    assert [f[1:] for f in at] == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2)] and intent is None
    start, stop = at[2][0], at[3][0]
    for cut in range(start, stop):
        path.write_bytes(data[:cut])
        (tmp_path / "v" / "manifest.json").write_bytes(manifest)
        with IncrementalView(q, state_dir=tmp_path / "v") as v:
            got = (v.result().to_dict(), v.relation("E").to_dict(), v.relation("F").to_dict())
            assert v.tick == 1 and got == before, cut
        assert path.read_bytes() == data[:cut]  # a reopen changes nothing
    assert "not a whole frame" in caplog.text
    # the next tick cuts the torn frame off and appends after the last whole one
    path.write_bytes(data[: start + 7])
    (tmp_path / "v" / "manifest.json").write_bytes(manifest)
    with IncrementalView(q, state_dir=tmp_path / "v") as v:
        v.step(E=d.delta("E"))
        live = (v.tick, v.result().to_dict())
    assert read_frames(path, 0)[1] == path.stat().st_size
    assert _reopened_answers(q, tmp_path / "v") == live == (2, live[1])


def test_a_zero_filled_tail_is_dropped(tmp_path):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    answer = view.result().to_dict()
    path, _ = _journal(tmp_path / "v")
    view.close()
    with path.open("ab") as fh:
        fh.write(b"\0" * 300)
    assert _reopened_answers(q, tmp_path / "v") == (1, answer)


def _damaged(tmp_path: Path, how) -> str:
    view, d, q = _view("counting", tmp_path / "v")
    for _ in range(4):
        view.step(E=d.delta("E"), F=d.delta("F"))
    path, _ = _journal(tmp_path / "v")
    view.close()
    frames, _ = read_frames(path, 0)
    data = bytearray(path.read_bytes())
    data = how(data, frames)
    path.write_bytes(bytes(data))
    before = _snapshot(tmp_path / "v")
    with pytest.raises(StateError) as err:
        IncrementalView(q, state_dir=tmp_path / "v")
    assert _snapshot(tmp_path / "v") == before  # the refused reopen changed nothing
    message = str(err.value)
    assert str(path) in message, message
    return message


def test_a_damaged_middle_frame_is_refused_naming_the_journal(tmp_path):
    def flip(data, frames):
        data[frames[1].offset + HEADER.size + 5] ^= 0xFF
        return data

    message = _damaged(tmp_path, flip)  # frame 4: the commit frame of tick 2, after intents
    assert "frame 4" in message and "tick 2)" in message and "SHA-256" in message


def test_a_damaged_last_frame_is_refused(tmp_path):
    def flip(data, frames):
        data[-1] ^= 0x01
        return data

    assert "frame 8" in _damaged(tmp_path, flip)  # 4 ticks: an intent and a commit frame each


def test_a_damaged_frame_header_is_refused(tmp_path):
    def length(data, frames):  # a damaged length must not pass for a torn last frame
        data[frames[1].offset + 20] ^= 0x40
        return data

    assert "damaged frame header" in _damaged(tmp_path, length)


def test_a_missing_frame_is_a_gap(tmp_path):
    def drop(data, frames):
        return data[: frames[1].offset] + data[frames[2].offset :]

    message = _damaged(tmp_path, drop)
    assert "tick 3" in message and "tick 2 was expected" in message


def test_a_missing_journal_is_refused(tmp_path):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    path, _ = _journal(tmp_path / "v")
    view.close()
    path.unlink()
    with pytest.raises(StateError, match="journal.bin"):
        IncrementalView(q, state_dir=tmp_path / "v")


# -- a closed view's journal cut short: ticks lost -------------------------------------------
LOST = 20
"""Ticks the view of the lost-tick tests commits before it is closed."""


def _closed_history(folder: Path, seed: int = 5, **kw) -> tuple[list[dict], object, Path]:
    """A counting view of ``PATH`` on ``folder``: its initial relations, then ``LOST`` ticks
    of deltas of E and F, closed cleanly.  Returns every tick's deltas (tick 0: the initial
    relations), the query and the journal."""
    d = Deltas("counting", seed)
    q = query(PATH, semiring="counting")
    history = [{"E": d.delta("E", 6)}]
    view = IncrementalView(q, state_dir=folder, state="driver", **history[0], **kw)
    for _ in range(LOST):
        history.append({"E": d.delta("E"), "F": d.delta("F")})
        view.step(**history[-1])
    path, m = _journal(folder)
    assert m["tick"] == 0 and view.tick == LOST  # every tick in the journal
    view.close()
    return history, q, path


def _inputs(history: list[dict]) -> dict[str, dict]:
    """The relations after ``history``'s deltas (counting: each key's values summed)."""
    out: dict[str, dict] = {"E": {}, "F": {}}
    for deltas in history:
        for name, df in deltas.items():
            for a, b, v in df[["a", "b", "value"]].itertuples(index=False):
                key = (int(a), int(b))
                out[name][key] = out[name].get(key, 0) + int(v)
    return {n: {k: v for k, v in r.items() if v} for n, r in out.items()}


def _batch(q, history: list[dict]) -> tuple[dict, dict[str, dict]]:
    """A batch solve of the inputs after ``history`` (no view), and those inputs."""
    rel = _inputs(history)
    E = Factor.from_dict(rel["E"], vars=["a", "b"], semiring="counting")
    F = Factor.from_dict(rel["F"], vars=["b", "c"], semiring="counting")
    return q.solve(E=E, F=F).to_dict(), rel


def _at(v: IncrementalView) -> tuple[dict, dict[str, dict]]:
    return v.result().to_dict(), {n: v.relation(n).to_dict() for n in ("E", "F")}


def test_a_closed_views_journal_cut_short_is_refused_naming_the_lost_ticks(tmp_path, caplog):
    """A view closed after 20 journaled ticks, its journal cut at a frame boundary or
    inside a frame: reopening raises StateError naming the journal, the tick it ends at
    and the ticks missing, and changes nothing (before, it reopened at the last whole
    frame with a warning: tick 8 of 20).  With ``if_ticks_lost="accept"`` it reopens at
    that tick, equal to a batch solve of the inputs of that tick; the manifest then says
    so, and the view goes on from there."""
    folder = tmp_path / "v"
    history, q, path = _closed_history(folder)
    data, manifest = path.read_bytes(), (folder / "manifest.json").read_bytes()
    at = frames_at(path)
    assert [f[1:] for f in at] == [(fl, t) for t in range(1, LOST + 1) for fl in (INTENT, 0)]
    intent = {t: at[2 * t - 2][0] for t in range(1, LOST + 1)}  # where tick t's intent starts
    commit = {t: at[2 * t - 1][0] for t in range(1, LOST + 1)}  # and its commit frame
    cuts = {  # where the journal is cut -> the tick it then ends at
        intent[9]: 8,  # at a frame boundary: ticks 9-20 gone
        intent[9] + 1: 8,  # inside the intent of tick 9
        intent[9] + HEADER.size: 8,
        intent[9] + HEADER.size + 7: 8,
        commit[9] - 1: 8,
        commit[9]: 9,  # tick 9's intent whole: tick 9 is applied again from it
        commit[9] + HEADER.size + 2: 9,
        0: 0,  # every tick gone
        intent[LOST] + 3: LOST - 1,  # the last tick alone
    }
    for cut, reach in cuts.items():
        path.write_bytes(data[:cut])
        (folder / "manifest.json").write_bytes(manifest)
        before = _snapshot(folder)
        with pytest.raises(StateError) as err:
            IncrementalView(q, state_dir=folder)
        message = str(err.value)
        missing = f"tick {LOST} is" if reach == LOST - 1 else f"ticks {reach + 1}-{LOST} are"
        assert f"journal {path} ends at tick {reach}, but the view committed tick {LOST}" in (
            message
        ), (cut, message)
        assert f"({missing} missing" in message and 'if_ticks_lost="accept"' in message
        assert _snapshot(folder) == before, cut  # the refused reopen changed nothing
        caplog.clear()
        with IncrementalView(q, state_dir=folder, if_ticks_lost="accept") as v:
            assert v.tick == reach, cut
            assert _at(v) == _batch(q, history[: reach + 1]), cut
        assert f"{missing} lost, and the view resumes at tick {reach}" in caplog.text
        m = json.loads((folder / "manifest.json").read_text())
        assert m.get("last_tick") == (reach or None), cut  # the loss accepted: recorded
        with IncrementalView(q, state_dir=folder) as v:  # so the next reopen is plain
            assert v.tick == reach
    # the accepted view goes on from its tick: the torn tail is cut off at the next commit
    path.write_bytes(data[: intent[9] + 5])
    (folder / "manifest.json").write_bytes(manifest)
    nxt = {"E": history[12]["E"]}
    with IncrementalView(q, state_dir=folder, if_ticks_lost="accept") as v:
        v.step(**nxt)
    assert _flags(path)[-2:] == [(INTENT, 9), (0, 9)] and len(_flags(path)) == 18
    with IncrementalView(q, state_dir=folder) as v:
        assert v.tick == 9 and _at(v) == _batch(q, [*history[:9], nxt])


def test_a_closed_journal_cut_anywhere_in_its_last_ticks_loses_no_tick_silently(tmp_path):
    """Cut every 13 bytes (and at every frame boundary) in the last two ticks' frames: a
    reopen either refuses, naming the tick the journal ends at, or (a cut inside the last
    commit frame, the last intent whole) is at the last tick, applied again from its
    intent, with that tick's answer."""
    folder = tmp_path / "v"
    history, q, path = _closed_history(folder)
    data, manifest = path.read_bytes(), (folder / "manifest.json").read_bytes()
    at = frames_at(path)
    first = at[-4][0]  # the intent of tick LOST - 1
    cuts = sorted({*range(first, len(data), 13), *(p for p, _, _ in at[-4:])})
    reached = set()
    for cut in cuts:
        path.write_bytes(data[:cut])
        (folder / "manifest.json").write_bytes(manifest)
        whole = [t for p, _, t in at if _frame_end(at, data, p) <= cut]
        reach = whole[-1] if whole else 0  # an intent whole: its tick is applied again
        if reach < LOST:
            with pytest.raises(StateError, match=rf"ends at tick {reach}, but .* tick {LOST} "):
                IncrementalView(q, state_dir=folder)
        else:
            with IncrementalView(q, state_dir=folder) as v:
                assert v.tick == LOST and _at(v) == _batch(q, history), cut
        reached.add(reach)
    assert reached == {LOST - 2, LOST - 1, LOST}


def _frame_end(at: list[tuple[int, int, int]], data: bytes, start: int) -> int:
    """Where the frame starting at ``start`` ends (the next frame's start, or the end)."""
    later = [p for p, _, _ in at if p > start]
    return later[0] if later else len(data)


def test_ticks_lost_are_named_in_a_spark_state_too(spark, tmp_path):
    """The Spark state commits in the same journal: a closed one cut short is refused."""
    folder = tmp_path / "v"
    d = Deltas("counting", 3)
    q = query(PATH, semiring="counting")
    history = [{"E": d.delta("E", 6), "F": d.delta("F", 4)}]
    view = IncrementalView(q, state_dir=folder, state="spark", **history[0])
    for _ in range(4):
        history.append({"E": d.delta("E"), "F": d.delta("F")})
        view.step(**history[-1])
    path, _ = _journal(folder)
    view.close()
    path.write_bytes(path.read_bytes()[: frames_at(path)[4][0]])  # ticks 3 and 4 gone
    with pytest.raises(StateError, match=r"ends at tick 2, .* \(ticks 3-4 are missing"):
        IncrementalView(q, state_dir=folder)
    with IncrementalView(q, state_dir=folder, if_ticks_lost="accept") as v:
        assert v.where == "spark" and v.tick == 2 and _at(v) == _batch(q, history[:3])


def test_a_crashed_views_reopen_records_its_last_tick_when_closed(tmp_path):
    """A view killed after its ticks recorded nothing: its torn last frame is dropped as
    a crash's (the tests above).  Reopened and closed cleanly, even without a tick, it
    records the tick its journal reached, and a cut is then refused too."""
    view, d, q = _view("counting", tmp_path / "v")
    for _ in range(3):
        view.step(E=d.delta("E"), F=d.delta("F"))
    path, _ = _journal(tmp_path / "v")
    _killed(view, tmp_path / "v")
    assert "last_tick" not in _journal(tmp_path / "v")[1]
    with IncrementalView(q, state_dir=tmp_path / "v") as v:
        assert v.tick == 3
    assert _journal(tmp_path / "v")[1]["last_tick"] == 3
    path.write_bytes(path.read_bytes()[: frames_at(path)[4][0]])
    with pytest.raises(StateError, match=r"ends at tick 2, .* \(tick 3 is missing"):
        IncrementalView(q, state_dir=tmp_path / "v")


def test_the_last_tick_costs_the_ticks_nothing(tmp_path):
    """The last tick is written when the view is closed, not by its ticks: a reopened
    view journals its ticks (the manifest's ``last_tick`` is not a view field, which
    would make every tick a checkpoint), the manifest unchanged; a checkpoint's manifest
    names no last tick (its journal is empty); an older view object fenced by a newer
    one records nothing when closed."""
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"))
    view.close()
    manifest = (tmp_path / "v" / "manifest.json").read_bytes()
    assert json.loads(manifest)["last_tick"] == 1
    with settings(journal_ticks=3):
        v = IncrementalView(q, state_dir=tmp_path / "v")
        for _ in range(2):
            v.step(E=d.delta("E"))
            assert (tmp_path / "v" / "manifest.json").read_bytes() == manifest
        newer = IncrementalView(q, state_dir=tmp_path / "v")  # takes the folder over
        v.close()
        assert (tmp_path / "v" / "manifest.json").read_bytes() == manifest
        newer.step(E=d.delta("E"))  # the journal holds 3 ticks: a checkpoint
        m = _journal(tmp_path / "v")[1]
        assert m["tick"] == 4 and "last_tick" not in m
        newer.step(E=d.delta("E"))
        newer.close()
    assert _journal(tmp_path / "v")[1]["last_tick"] == 5


def test_an_unknown_if_ticks_lost_is_refused(tmp_path):
    q = query(PATH, semiring="counting")
    with pytest.raises(ValueError, match="unknown if_ticks_lost 'ignore'; valid: error, accept"):
        IncrementalView(q, state_dir=tmp_path / "v", if_ticks_lost="ignore")
    assert not (tmp_path / "v").exists()


# -- a failed append ---------------------------------------------------------------------------
@pytest.mark.parametrize("fail", ["sync", "write"])
def test_a_failed_append_leaves_the_view_and_the_folder_at_the_old_tick(
    fail, tmp_path, monkeypatch
):
    view, d, q = _view("counting", tmp_path / "v")
    view.step(E=d.delta("E"), F=d.delta("F"))
    old = (view.tick, view.result().to_dict(), view.relation("E").to_dict())
    before = _snapshot(tmp_path / "v")
    real_pwrite = os.pwrite

    def broken_sync(fd):
        raise OSError(28, "No space left on device")

    def broken_write(fd, data, at):  # half the frame reaches the file
        real_pwrite(fd, bytes(data[: len(data) // 2]), at)
        raise OSError(28, "No space left on device")

    import incremental.journal as journal

    if fail == "sync":  # the helper's answer (the view's own syncs fail too)
        monkeypatch.setattr(journal.os, "fdatasync", broken_sync)
        real_result = journal.Syncer.result

        def failed(self):  # the helper answers, with an error
            real_result(self)
            broken_sync(0)

        monkeypatch.setattr(journal.Syncer, "result", failed)
    else:
        monkeypatch.setattr(journal.os, "pwrite", broken_write)
    delta = d.delta("E")
    with pytest.raises(OSError, match="No space left"):
        view.step(E=delta)
    assert (view.tick, view.result().to_dict(), view.relation("E").to_dict()) == old
    assert _snapshot(tmp_path / "v") == before
    monkeypatch.undo()
    view.step(E=delta)  # the same tick again, now committed
    assert view.tick == 2
    view.close()
    _same(view, IncrementalView(q, state_dir=tmp_path / "v"))


# -- kill -9 ----------------------------------------------------------------------------------
def _replayed(seed: int, tick: int) -> dict:
    """The ticker's view after ``tick`` ticks, replayed on a view without a folder."""
    ticks = Ticks(seed)
    view = IncrementalView(ticker_query(), state="driver", E=ticks.next())
    for _ in range(tick):
        view.step(E=ticks.next())
    return {"result": view.result().to_dict(), "E": view.relation("E").to_dict()}


def _committed(side: Path) -> list[int]:
    if not side.is_file():
        return []
    text = side.read_text()
    return [int(line.split()[0]) for line in text.splitlines(keepends=True) if line.endswith("\n")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_process_killed_while_ticking_reopens_at_a_tick_it_committed(seed, tmp_path):
    folder, side = tmp_path / "v", tmp_path / "committed.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(TICKER), str(folder), str(side), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ticking"
        # past two checkpoints, then a random moment: inside an append, a checkpoint, a step
        deadline = time.monotonic() + 120
        while len(_committed(side)) < 2 * CHECKPOINT_TICKS + 1 and proc.poll() is None:
            assert time.monotonic() < deadline, "the ticker does not tick"
            time.sleep(0.01)
        time.sleep(random.Random(seed).uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    last = _committed(side)[-1]
    with IncrementalView(ticker_query(), state_dir=folder) as v:
        tick = v.tick
        got = {"result": v.result().to_dict(), "E": v.relation("E").to_dict()}
    assert tick in (last, last + 1), (tick, last)
    assert got == _replayed(seed, tick)
