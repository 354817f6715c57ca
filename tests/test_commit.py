"""A tick's commit is one transaction (incremental/commit.py): begun at the store, then
completed, or aborted leaving the folder and the store's bookkeeping as they were.

Oracle: the folder's bytes and the store's bookkeeping (one frozen ``Book``) before the
tick, and a view reopened from the folder, which must equal the live view.  Each tick
runs in the driver state with pandas deltas, so no test needs Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from faq import query, settings
from incremental import IncrementalView
from incremental.commit import Clear, OweCheckpoint, OweFrame
from incremental.journal import INTENT
from incremental.manifest import ViewId, check_view, read_manifest
from incremental.store import Store
from tests.helpers import frames_at

PATH = "Q(a, c) :- E(a, b), F(b, c)"


def _view(folder: Path) -> tuple[IncrementalView, object]:
    q = query(PATH, semiring="counting")
    e = pd.DataFrame([(1, 2, 1), (2, 3, 1), (3, 4, 2)], columns=["a", "b", "value"])
    return IncrementalView(q, state_dir=folder, state="driver", E=e), q


def _delta(*rows: tuple[int, int, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["a", "b", "value"])


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("lease.json", ".lock")
    }


def _answers(v: IncrementalView) -> tuple:
    return v.tick, v.result().to_dict(), v.relation("E").to_dict(), v.relation("F").to_dict()


def _journal(folder: Path) -> Path:
    return folder / json.loads((folder / "manifest.json").read_text())["journal"]


def test_a_refused_tick_leaves_the_folder_and_the_books_as_they_were(tmp_path):
    view, q = _view(tmp_path / "v")
    view.step(E=_delta((4, 5, 1)), F=_delta((2, 7, 1)))
    store = view._store
    book, before, old = store.book, _snapshot(tmp_path / "v"), _answers(view)
    with pytest.raises(ValueError, match="negative"):
        view.step(E=_delta((9, 9, -3)))  # a negative count: refused while applied
    assert store.book is book and store.tick == 1
    assert _snapshot(tmp_path / "v") == before and _answers(view) == old
    view.step(F=_delta((3, 8, 1)))
    live = _answers(view)
    view.close()
    with IncrementalView(q, state_dir=tmp_path / "v") as again:
        assert _answers(again) == live


def test_a_checkpoint_that_fails_leaves_the_folder_and_the_books_as_they_were(
    tmp_path, monkeypatch
):
    """A tick whose checkpoint fails while writing its files (a full disk) is aborted: the
    new tick folder is removed, the intent cut off, the bookkeeping kept."""
    view, q = _view(tmp_path / "v")
    view.step(E=_delta((4, 5, 1)))
    store = view._store
    book, before, old = store.book, _snapshot(tmp_path / "v"), _answers(view)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Store, "write_table", full)
    with settings(journal_ticks=0), pytest.raises(OSError, match="No space left"):
        view.step(E=_delta((5, 6, 1)), F=_delta((2, 7, 1)))
    assert store.book is book and store.tick == 1
    assert _snapshot(tmp_path / "v") == before and _answers(view) == old
    monkeypatch.undo()
    with settings(journal_ticks=0):
        view.step(E=_delta((5, 6, 1)), F=_delta((2, 7, 1)))  # now a checkpoint
    assert store.book is not book and read_manifest(tmp_path / "v")["tick"] == 2
    live = _answers(view)
    view.close()
    with IncrementalView(q, state_dir=tmp_path / "v") as again:
        assert _answers(again) == live


def test_a_refused_tick_after_a_reopen_leaves_the_frame_it_owes_owed(tmp_path):
    """A reopen that applied a tick again from its intent owes that tick's commit frame
    (a typed debt, ``OweFrame``).  A refused tick takes back what it wrote, the owed frame
    with its intent: the journal is as the reopen left it, and the frame still owed; the
    next tick writes it, then its own frames."""
    view, q = _view(tmp_path / "v")
    view.step(E=_delta((4, 5, 1)))
    view.step(F=_delta((2, 7, 1)))
    live = _answers(view)
    path = _journal(tmp_path / "v")
    manifest = (tmp_path / "v" / "manifest.json").read_bytes()
    view.close()
    (tmp_path / "v" / "manifest.json").write_bytes(manifest)  # as kill -9 leaves it
    last = frames_at(path)[-1]
    assert last[1:] == (0, 2)
    path.write_bytes(path.read_bytes()[: last[0]])  # tick 2's commit frame never written
    reopened = path.read_bytes()
    with IncrementalView(q, state_dir=tmp_path / "v") as v:
        assert _answers(v) == live
        assert isinstance(v._store.book.debt, OweFrame)
        with pytest.raises(ValueError, match="negative"):
            v.step(E=_delta((9, 9, -3)))
        assert path.read_bytes() == reopened  # the owed frame taken back with the intent
        assert isinstance(v._store.book.debt, OweFrame) and _answers(v) == live
        v.step(E=_delta((6, 6, 1)))
        assert isinstance(v._store.book.debt, Clear)
        after = _answers(v)
    flags = [(f, t) for _, f, t in frames_at(path)]
    assert flags == [(INTENT, 1), (0, 1), (INTENT, 2), (0, 2), (INTENT, 3), (0, 3)]
    with IncrementalView(q, state_dir=tmp_path / "v") as v:
        assert _answers(v) == after


def test_a_reopened_tick_no_frame_describes_makes_the_next_tick_a_checkpoint(tmp_path):
    """When the reopened tick's parts cannot say what changed (a part rebuilt), the debt is
    a checkpoint: the next tick writes no intent, and checkpoints."""
    view, q = _view(tmp_path / "v")
    view.step(E=_delta((4, 5, 1)))
    store = view._store
    store.book = type(store.book)(store.book.written, {}, store.book.head, Clear())
    store.owe(view._state, 2, None)  # no parts known: no frame can say what changed
    assert isinstance(store.book.debt, OweCheckpoint)
    commit = store.begin(3, None, {})
    assert commit.pending is None
    commit.abort()
    assert isinstance(store.book.debt, OweCheckpoint)
    view.close()


def test_a_folder_of_another_view_is_refused_by_the_manifest_check(tmp_path):
    view, _ = _view(tmp_path / "v")
    view.close()
    m = read_manifest(tmp_path / "v")
    keys = {"E": ("a", "b"), "F": ("b", "c")}
    same = ViewId(m["rule"], "counting", keys)
    check_view(tmp_path / "v", m, same, None, None)
    with pytest.raises(ValueError, match="holds a view of"):
        check_view(tmp_path / "v", m, ViewId("Q(a) :- E(a, b)", "counting", keys), None, None)
    with pytest.raises(ValueError, match="set relations"):
        check_view(
            tmp_path / "v", m, ViewId(m["rule"], "counting", keys, {"E": "ignore"}), None, None
        )
    with pytest.raises(ValueError, match="unknown manifest format"):
        check_view(tmp_path / "v", {**m, "format": 1}, same, None, None)
