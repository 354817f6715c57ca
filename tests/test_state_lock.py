"""One writer per durable view folder: an OS lock plus a lease naming the holder.

Oracle: the folder's bytes.  A second writer is refused (``incremental.LockError``
naming the holder's host and pid) and changes nothing on disk; a view that lost
its hold (fenced by a newer view of the same process, or whose lease another
holder took) refuses to commit and leaves the folder exactly at the new owner's
state.  Cross-process cases run a real second Python process
(``tests/lock_holder.py``: a driver-state view, no SparkSession) that holds the
folder open; a ``kill -9`` of it must leave a folder that opens normally.
Where the filesystem has no ``flock`` (simulated by making ``fcntl.flock`` fail
with ENOLCK), the lease alone decides.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from faq import Factor, query, settings
from incremental import IncrementalView, LockError, StateError

ROOT = Path(__file__).resolve().parent.parent
HOLDER = Path(__file__).with_name("lock_holder.py")
RULE = "Q(a) :- E(a, b)"
LEASE, LOCK = "lease.json", ".lock"


def _q():
    return query(RULE, semiring="counting")


def _edges(d: dict) -> Factor:
    return Factor.from_dict(d, ("a", "b"), "integer")  # counting deltas are signed


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the committed state (the lease and lock aside)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name not in (LEASE, LOCK):
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


class Holder:
    """A second Python process that opens, closes and holds a view on a folder."""

    def __init__(self, folder: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, str(HOLDER), str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        assert line, f"lock holder ended without answering {command!r}"
        return line

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def holder(tmp_path):
    h = Holder(tmp_path / "view")
    yield h
    if h.proc.poll() is None:
        h.kill()


# -- another process ----------------------------------------------------------------------------
def test_lock_error_is_a_state_error():
    assert issubclass(LockError, StateError) and issubclass(LockError, ValueError)


def test_a_second_process_is_refused_naming_the_holder(holder, tmp_path):
    folder = tmp_path / "view"
    assert holder.ask("open") == "ready tick=0"
    before = _snapshot(folder)
    lease = json.loads((folder / LEASE).read_text())
    assert lease["pid"] == holder.proc.pid and lease["host"] == socket.gethostname()
    with pytest.raises(LockError) as err:
        IncrementalView(_q(), state_dir=folder)
    message = str(err.value)
    assert f"pid {holder.proc.pid}" in message and socket.gethostname() in message
    assert f"since {lease['since']}" in message
    assert _snapshot(folder) == before  # the refused open changed nothing
    assert json.loads((folder / LEASE).read_text())["token"] == lease["token"]
    # the holder still commits
    assert holder.ask("step") == "stepped tick=1"
    # after the holder closes, this process opens it, and the holder is refused in turn
    assert holder.ask("close") == "closed"
    assert not (folder / LEASE).exists() and not (folder / LOCK).exists()
    view = IncrementalView(_q(), state_dir=folder)
    assert view.tick == 1
    answer = holder.ask("open")
    assert answer.startswith("refused LockError") and f"pid {os.getpid()}" in answer, answer
    view.close()
    assert holder.ask("open") == "ready tick=1"


def test_a_holder_killed_with_sigkill_leaves_a_folder_that_opens(holder, tmp_path):
    folder = tmp_path / "view"
    assert holder.ask("open") == "ready tick=0"
    assert holder.ask("step") == "stepped tick=1"
    pid = holder.proc.pid
    holder.kill()
    assert json.loads((folder / LEASE).read_text())["pid"] == pid  # left behind
    with IncrementalView(_q(), state_dir=folder) as view:
        assert view.tick == 1 and view.result().to_dict() == {(1,): 1}
        assert json.loads((folder / LEASE).read_text())["pid"] == os.getpid()
        view.step(E=_edges({(2, 3): 1}))
    assert IncrementalView(_q(), state_dir=folder).result().to_dict() == {(1,): 1, (2,): 1}


# -- views of one process -------------------------------------------------------------------------
def test_a_newer_view_in_the_process_takes_over_and_fences_the_older(tmp_path):
    old = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
    old.step(E=_edges({(1, 3): 1}))
    new = IncrementalView(_q(), state_dir=tmp_path)
    new.step(E=_edges({(4, 5): 1}))
    state = _snapshot(tmp_path)
    with pytest.raises(LockError, match="another view in this process took the folder over"):
        old.step(E=_edges({(7, 8): 1}))
    with pytest.raises(LockError):
        old.step(batch_id=3, E=_edges({(7, 8): 1}))
    assert _snapshot(tmp_path) == state  # the folder is at the new owner's state
    assert old.tick == 1 and old.result().to_dict() == {(1,): 2}  # still reads
    with settings(lease_seconds=0):  # the lease records every journaled tick
        new.step(E=_edges({(1, 2): -1}))
    assert new.tick == 3 and new.result().to_dict() == {(1,): 1, (4,): 1}
    lease = json.loads((tmp_path / LEASE).read_text())
    assert lease["pid"] == os.getpid() and lease["tick"] == 3


def test_a_failed_open_in_the_process_does_not_fence_the_holder(tmp_path):
    view = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
    with pytest.raises(ValueError, match="holds a view of"):
        IncrementalView(query(RULE, semiring="integer"), state_dir=tmp_path)
    with pytest.raises(ValueError, match="already holds a view"):
        IncrementalView(_q(), state_dir=tmp_path, E=_edges({(5, 6): 1}))
    view.step(E=_edges({(3, 4): 1}))
    assert view.tick == 1 and (tmp_path / LEASE).exists()


def test_a_view_whose_lease_was_taken_commits_nothing(tmp_path):
    view = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
    state = _snapshot(tmp_path)
    lease = json.loads((tmp_path / LEASE).read_text())
    thief = {**lease, "token": "0" * 32, "pid": 1, "host": "elsewhere"}
    (tmp_path / LEASE).write_text(json.dumps(thief))
    with pytest.raises(LockError, match="lost its lease") as err:
        view.step(E=_edges({(3, 4): 1}))
    assert "elsewhere" in str(err.value)
    assert _snapshot(tmp_path) == state  # no manifest, no tick folder left behind
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


def test_a_view_whose_lease_was_taken_between_journaled_ticks_appends_nothing(tmp_path):
    view = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
    view.step(E=_edges({(3, 4): 1}))  # journaled ticks: no new manifest
    view.step(E=_edges({(5, 6): 1}))
    state = _snapshot(tmp_path)
    journal = [p for p in state if p.endswith("journal.bin")]
    assert len(journal) == 1 and state[journal[0]], state.keys()
    lease = json.loads((tmp_path / LEASE).read_text())
    (tmp_path / LEASE).write_text(json.dumps({**lease, "token": "0" * 32, "host": "elsewhere"}))
    with pytest.raises(LockError, match="lost its lease"):
        view.step(E=_edges({(7, 8): 1}))
    assert _snapshot(tmp_path) == state  # the journal has not grown
    assert view.tick == 2 and view.result().to_dict() == {(1,): 1, (3,): 1, (5,): 1}


def test_a_spark_view_whose_lease_was_taken_commits_nothing(spark, tmp_path):
    view = IncrementalView(_q(), state="spark", state_dir=tmp_path, E=_edges({(1, 2): 1}))
    state = _snapshot(tmp_path)
    lease = json.loads((tmp_path / LEASE).read_text())
    (tmp_path / LEASE).write_text(json.dumps({**lease, "token": "0" * 32, "pid": 1}))
    with pytest.raises(LockError, match="lost its lease"):
        view.step(E=_edges({(3, 4): 1}))
    assert _snapshot(tmp_path) == state
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


def test_close_and_with_release_the_folder(tmp_path):
    with IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1})) as view:
        assert (tmp_path / LEASE).exists() and (tmp_path / LOCK).exists()
        view.step(E=_edges({(1, 3): 1}))
    assert not (tmp_path / LEASE).exists() and not (tmp_path / LOCK).exists()
    with pytest.raises(LockError, match="closed"):
        view.step(E=_edges({(1, 4): 1}))
    assert view.result().to_dict() == {(1,): 2}
    view.close()  # idempotent
    again = IncrementalView(_q(), state_dir=tmp_path)
    assert again.tick == 1
    del again
    gc.collect()
    assert not (tmp_path / LEASE).exists()  # released by garbage collection


# -- without flock: the lease alone ---------------------------------------------------------------
@pytest.fixture
def no_flock(monkeypatch):
    def refuse(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)


def _lease(folder: Path, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lease = {"host": socket.gethostname(), "pid": os.getppid(), "token": "f" * 32}
    lease |= {"since": "2026-11-24T00:00:00+00:00", "last_commit": None, "tick": 3}
    (folder / LEASE).write_text(json.dumps({**lease, **fields}))


def test_without_flock_the_lease_keeps_a_live_holder(no_flock, tmp_path):
    view = IncrementalView(_q(), state_dir=tmp_path / "mine", E=_edges({(1, 2): 1}))
    lease = json.loads((tmp_path / "mine" / LEASE).read_text())
    assert lease["lock"] == "lease only" and not (tmp_path / "mine" / LOCK).exists()
    view.step(E=_edges({(1, 3): 1}))
    view.close()
    _lease(tmp_path / "live")  # the parent of this process: alive, on this host
    with pytest.raises(LockError, match=f"pid {os.getppid()}"):
        IncrementalView(_q(), state_dir=tmp_path / "live", E=_edges({(1, 2): 1}))
    _lease(tmp_path / "far", host="another-host", pid=os.getpid())
    with pytest.raises(LockError, match="another-host") as err:
        IncrementalView(_q(), state_dir=tmp_path / "far", E=_edges({(1, 2): 1}))
    assert f"delete {tmp_path / 'far' / LEASE}" in str(err.value)


def test_without_flock_a_dead_holders_lease_is_taken_over(no_flock, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _lease(tmp_path, pid=dead.pid)
    view = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
    assert json.loads((tmp_path / LEASE).read_text())["pid"] == os.getpid()
    view.step(E=_edges({(2, 3): 1}))
    assert view.tick == 1


def test_a_view_collected_while_the_lock_table_is_busy_does_not_deadlock(tmp_path):
    # Regression: the garbage collector ran a dropped view's finalizer inside a section that
    # held the (non-reentrant) lock table guard, while a new view wrote its lease; the
    # finalizer waited on the guard and the whole process hung.  Here the finalizer runs
    # inside the guard on purpose, in a thread, so a regression fails instead of hanging.
    import threading

    from incremental import lock

    old = lock.FolderLock(tmp_path / "a")
    done = threading.Event()

    def collect_while_busy():
        with lock._GUARD:
            old._finalizer()  # what gc does when it collects the view at that moment
        done.set()

    threading.Thread(target=collect_while_busy, daemon=True).start()
    assert done.wait(20), "the finalizer deadlocked on the lock table"
    new = lock.FolderLock(tmp_path / "a")  # the deferred release is carried out first
    assert json.loads((tmp_path / "a" / "lease.json").read_text())["token"] == new.token
    new.release()
    assert not (tmp_path / "a" / "lease.json").exists()


def test_a_lease_replaced_by_one_of_the_same_size_is_still_noticed(tmp_path, monkeypatch):
    """Ticks read the lease only when its file changed (same inode, size and times);
    a lease another holder writes is a new file renamed over it, so even one of exactly
    the same bytes' length stops the next commit."""
    import incremental.lock as lock

    with settings(lease_seconds=3600):  # no lease writes between the ticks (slow machines)
        view = IncrementalView(_q(), state_dir=tmp_path, E=_edges({(1, 2): 1}))
        view.step(E=_edges({(3, 4): 1}))
        reads = []
        real = lock._read_lease
        monkeypatch.setattr(lock, "_read_lease", lambda root: reads.append(root) or real(root))
        for k in range(5, 10):
            view.step(E=_edges({(k, k + 1): 1}))
        assert reads == []  # the lease file this view last read as its own, unchanged
        text = (tmp_path / LEASE).read_text()
        lease = json.loads(text)
        thief = text.replace(lease["token"], "0" * len(lease["token"]))
        assert len(thief) == len(text) and json.loads(thief)["token"] != lease["token"]
        (tmp_path / "thief.tmp").write_text(thief)
        os.replace(tmp_path / "thief.tmp", tmp_path / LEASE)
        state = _snapshot(tmp_path)
        with pytest.raises(LockError, match="lost its lease"):
            view.step(E=_edges({(20, 21): 1}))
        assert reads and _snapshot(tmp_path) == state
        assert view.tick == 6
