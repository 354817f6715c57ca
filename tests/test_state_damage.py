"""Verified state: a durable view refuses to reopen over damaged files.

Contract ("Verified state"): reopening ``IncrementalView(q, state_dir=d)`` over
damaged state raises :class:`incremental.StateError` (a ValueError) whose
message names the damaged file, and a refused reopen changes nothing on disk.

The tests do not know the folder's layout: one small durable view (triangle
count, three ticks of insertions and deletions) is built once, and then every
regular file found under its folder is damaged in turn (truncated to half its
size, deleted, or with bytes flipped in its middle), each time in a fresh copy
of the whole folder.  Each damage kind is one test that tries every file and
lists, in one failure message, every file whose damage was not refused as the
contract says.  The manifest gets three cases of its own (deleted while tick
folders exist, its tick edited, not JSON), and an undamaged copy must reopen to
the original's answer.

The view is closed cleanly, so its journal (``journal.bin``,
:mod:`incremental.journal`) cut short is refused too: the manifest records the last
tick, and a journal that ends before it lost committed ticks.  (Before, a cut journal
passed for what a crash in the middle of an append leaves, and reopened at an older
tick.  A crash's torn last frame is still dropped: tests/test_journal.py.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from faq import query
from incremental import IncrementalView, StateError

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
MANIFEST = "manifest.json"
JOURNAL = "journal.bin"
ANSWERS = (2, 4, 2, 5)
"""The fixture's answer after each tick."""

Snapshot = tuple[dict[str, bytes], frozenset[str]]


# -- the view under test ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def durable(spark, tmp_path_factory) -> tuple[Path, int]:
    """A committed durable triangle-count view: its folder and its answer.

    Four edges form two triangles; tick 1 inserts (1, 4) (4 triangles), tick 2
    deletes (1, 3) (2 left), tick 3 inserts (1, 3), (3, 5) and (4, 5) (5).
    """
    root = tmp_path_factory.mktemp("durable") / "view"
    edges = spark.createDataFrame([(1, 2), (2, 3), (1, 3), (3, 4), (2, 4)], "a bigint, b bigint")
    view = IncrementalView(_triangle(), state_dir=root, E=edges)
    schema = "a bigint, b bigint, value bigint"
    answers = [view.result().scalar()]
    for rows in ([(1, 4, 1)], [(1, 3, -1)], [(1, 3, 1), (3, 5, 1), (4, 5, 1)]):
        view.step(E=spark.createDataFrame(rows, schema))
        answers.append(view.result().scalar())
    assert view.tick == 3 and tuple(answers) == ANSWERS
    view.close()
    answer = answers[-1]
    assert (root / MANIFEST).is_file()
    assert any(p.is_dir() for p in root.iterdir()), "no tick folder under the state_dir"
    return root, answer


def _triangle():
    return query(TRIANGLE, semiring="counting")


# -- damage -----------------------------------------------------------------------------------
def _truncate(path: Path) -> bool:
    size = path.stat().st_size
    if size == 0:
        return False  # already empty: half of it is the same file
    with path.open("r+b") as fh:
        fh.truncate(size // 2)
    return True


def _delete(path: Path) -> bool:
    path.unlink()
    return True


def _flip(path: Path) -> bool:
    data = bytearray(path.read_bytes())
    if not data:
        return False  # no middle to change
    mid = len(data) // 2
    for i in range(mid, min(mid + 4, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return True


DAMAGE: dict[str, Callable[[Path], bool]] = {
    "truncate": _truncate,
    "delete": _delete,
    "flip": _flip,
}
"""Damage kinds: each changes the file in place and says whether it could (an empty file
cannot be truncated to half or changed in its middle)."""


def _is_hidden_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def _files(root: Path) -> list[str]:
    """Every regular file under ``root`` (relative paths, sorted), hidden temporaries aside."""
    found = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            p = Path(folder) / name
            if p.is_file() and not p.is_symlink() and not _is_hidden_temporary(name):
                found.append(p.relative_to(root).as_posix())
    return sorted(found)


def _snapshot(root: Path) -> Snapshot:
    """Every file's bytes (hidden ones too) and every folder under ``root``."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for folder, subdirs, names in os.walk(root):
        for d in subdirs:
            dirs.add((Path(folder) / d).relative_to(root).as_posix())
        for name in names:
            p = Path(folder) / name
            files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files, frozenset(dirs)


def _changes(before: Snapshot, after: Snapshot) -> list[str]:
    """How ``after`` differs from ``before`` (empty when nothing changed)."""
    (fb, db), (fa, da) = before, after
    out = [f"removed {p}" for p in sorted(fb.keys() - fa.keys())]
    out += [f"created {p}" for p in sorted(fa.keys() - fb.keys())]
    out += [f"rewrote {p}" for p in sorted(fb.keys() & fa.keys()) if fb[p] != fa[p]]
    out += [f"removed folder {p}" for p in sorted(db - da)]
    out += [f"created folder {p}" for p in sorted(da - db)]
    return out


def _names(message: str, name: str) -> bool:
    """Whether ``message`` names the file ``name`` as a whole name, not inside a longer one
    (``part-0.parquet`` is not named by ``.part-0.parquet.crc``, nor ``_SUCCESS`` by
    ``._SUCCESS.crc``); a sentence's full stop after it is allowed."""
    pattern = rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)"
    return re.search(pattern, message) is not None


def _refusal(copy: Path, damaged: str, after_damage: Snapshot) -> str | None:
    """Reopen ``copy``; None when refused as the contract says, else what went wrong."""
    name = os.path.basename(damaged)
    try:
        view = IncrementalView(_triangle(), state_dir=copy)
    except StateError as exc:
        problem = None
        if not _names(str(exc), name):
            problem = f"StateError does not name {name!r}: {str(exc)[:300]!r}"
    except Exception as exc:  # any other failure is a finding
        problem = f"{type(exc).__name__} instead of StateError: {str(exc)[:300]!r}"
    else:
        problem = f"reopened without error at tick {view.tick}"
        view.close()
    changed = _changes(after_damage, _snapshot(copy))
    if changed:
        touched = "; ".join(changed[:5]) + (f" (+{len(changed) - 5} more)" if changed[5:] else "")
        problem = f"{problem + '; ' if problem else ''}the reopen changed the state: {touched}"
    return problem


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# -- tests ------------------------------------------------------------------------------------
def test_state_error_is_a_value_error():
    assert issubclass(StateError, ValueError)


def test_an_undamaged_copy_reopens_at_the_same_answer(durable, tmp_path):
    root, answer = durable
    copy = _copy(root, tmp_path / "copy")
    reopened = IncrementalView(_triangle(), state_dir=copy)
    assert reopened.tick == 3
    assert reopened.result().scalar() == answer


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_every_damaged_file_is_refused(durable, tmp_path, kind):
    """For every file under the state_dir, damaged alone in a fresh copy: StateError naming
    it, and the copy exactly as the damage left it."""
    root, _ = durable
    files = _files(root)
    assert MANIFEST in files and len(files) > 1, files
    assert any(os.path.basename(f) == JOURNAL for f in files), files  # its ticks: journaled
    failures = []
    tried = 0
    for i, rel in enumerate(files):
        copy = _copy(root, tmp_path / f"copy-{i}")
        if not DAMAGE[kind](copy / rel):
            shutil.rmtree(copy)
            continue
        tried += 1
        problem = _refusal(copy, rel, _snapshot(copy))
        if problem is not None:
            failures.append(f"{kind} {rel}: {problem}")
        shutil.rmtree(copy)
    assert tried, f"no file could be damaged by {kind!r}: {files}"
    assert not failures, (
        f"{len(failures)} of {tried} damaged file(s) not refused as the contract says:\n"
        + "\n".join(failures)
    )


def test_a_deleted_manifest_with_tick_folders_is_refused(durable, tmp_path):
    root, _ = durable
    copy = _copy(root, tmp_path / "copy")
    (copy / MANIFEST).unlink()
    assert any(p.is_dir() for p in copy.iterdir())
    problem = _refusal(copy, MANIFEST, _snapshot(copy))
    assert problem is None, problem


def test_a_manifest_with_another_tick_is_refused(durable, tmp_path):
    root, _ = durable
    copy = _copy(root, tmp_path / "copy")
    manifest = json.loads((copy / MANIFEST).read_text(encoding="utf-8"))
    assert isinstance(manifest.get("tick"), int), manifest
    manifest["tick"] += 1
    (copy / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    problem = _refusal(copy, MANIFEST, _snapshot(copy))
    assert problem is None, problem


def test_a_manifest_that_is_not_json_is_refused(durable, tmp_path):
    root, _ = durable
    copy = _copy(root, tmp_path / "copy")
    (copy / MANIFEST).write_text("this is not JSON {", encoding="utf-8")
    problem = _refusal(copy, MANIFEST, _snapshot(copy))
    assert problem is None, problem


def test_a_state_dir_that_is_a_file_or_cannot_be_made_is_named(tmp_path):
    """Were Python's bare FileExistsError and FileNotFoundError ('[Errno 17] File
    exists'), which did not say it was the view's state_dir."""
    import pandas as pd

    q = query("Q(a) :- E(a, b)", semiring="counting")
    E = pd.DataFrame({"a": [1], "b": [2]})
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(ValueError, match=r"state_dir '.*notes.txt' is a file, not a folder"):
        IncrementalView(q, state_dir=file, E=E)
    assert file.read_text() == "mine"
    with pytest.raises(OSError, match=r"state_dir '.*notes.txt/v' cannot be created"):
        IncrementalView(q, state_dir=file / "v", E=E)
