"""One writer per view folder: an OS file lock plus a lease file that names the holder.

A durable view holds its ``state_dir`` exclusively for its whole life:

* an exclusive ``flock`` on ``state_dir/.lock`` (released by the operating
  system when the process ends, even by ``kill -9``, so a restart after a
  crash opens normally);
* the lease ``state_dir/lease.json``: host, pid, a random token, when the hold
  began and when the view last committed.  It names the holder in the message
  that refuses a second writer, and it is the lock itself where the
  filesystem has no ``flock`` (then a lease whose pid is dead on this host is
  taken over; a lease from another host is honoured until deleted by hand).

Before every commit the view checks that the lease still holds its token
(:meth:`FolderLock.verify`), so a view that lost its hold never commits.
Inside one process a second view opened on the same folder takes it over
and the older view object is fenced (its later steps raise
:class:`LockError`).  Closing a view (or its garbage collection, or the
interpreter's exit) removes the lease and the lock file.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import errno
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from incremental.store import StateError

__all__ = ["LEASE", "LOCK", "FolderLock", "LockError"]

log = logging.getLogger("faq.incremental")

LOCK = ".lock"
"""The file a view ``flock``s in its ``state_dir``."""

LEASE = "lease.json"
"""The lease file that names the holder of a ``state_dir``."""

_BUSY = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES}


class LockError(StateError):
    """A view's ``state_dir`` is held by another writer, or this view lost its hold."""


@dataclass
class _Held:
    """What this process holds on one folder: the locked file descriptor (None where the
    filesystem has no ``flock``), and the token of the view object that owns it."""

    root: Path
    fd: int | None
    token: str
    owner: Any = None  # weakref to the owning FolderLock
    since: str = field(default_factory=lambda: _now())


_HELD: dict[str, _Held] = {}
_GUARD = threading.Lock()
_DEFERRED: list[tuple[str, str]] = []
"""Releases of view objects collected while ``_GUARD`` was held (see :func:`_collected`)."""
if hasattr(os, "register_at_fork"):  # a forked child holds nothing of its own
    os.register_at_fork(after_in_child=_HELD.clear)


def state_folder(root: str | os.PathLike[str]) -> Path:
    """The folder ``root``, created with its parents if missing; a ValueError when it is a
    file, and an OSError of the same kind naming ``state_dir`` when it cannot be made
    (no permission, a parent that is a file or cannot exist)."""
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise ValueError(f"state_dir {str(path)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise type(e)(e.errno, f"state_dir {str(path)!r} cannot be created: {e.strerror}") from e
    return path


class FolderLock:
    """An exclusive hold on a view's folder (see the module docstring).

    Parameters
    ----------
    root : path-like
        The view's ``state_dir`` (created if missing).

    Raises
    ------
    LockError
        Another process holds the folder; the message names it (host, pid,
        since when, last commit).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = state_folder(root)
        self.key = os.path.realpath(self.root)
        self.token = uuid.uuid4().hex
        self._closed = False
        self._fenced = False
        self._pending = False
        self._recorded = -float("inf")  # when committed() last wrote the lease (monotonic)
        self._confirmed: tuple[int, ...] | None = None  # the lease file last read as ours
        with _GUARD:
            _drain()
            if self.key in _HELD:  # another view object of this process: taken over on claim()
                self._pending = True
            else:
                self._take()
        self._finalizer = weakref.finalize(self, _collected, self.key, self.token)

    def _take(self) -> None:
        """Acquire the folder for this process (the caller holds ``_GUARD``)."""
        fd, flock = _acquire(self.root)
        held = _Held(self.root, fd if flock else None, self.token)
        held.owner = weakref.ref(self)
        _HELD[self.key] = held
        _write_lease(self.root, self._lease(held, None))

    # -- state --------------------------------------------------------------------------------
    @property
    def flock(self) -> bool:
        """True when the hold is an OS lock; False when it is the lease alone."""
        held = _HELD.get(self.key)
        return held is not None and held.fd is not None

    def claim(self) -> None:
        """Become the folder's owner in this process (an older view object is fenced)."""
        with _GUARD:
            _drain()
            if not self._pending:
                return
            self.check()
            held = _HELD.get(self.key)
            if held is None:  # the older view object released it meanwhile
                self._take()
                self._pending = False
                return
            self._pending = False
            old = held.owner() if held.owner is not None else None
            if old is not None and old is not self:
                old._fenced = True
            held.token, held.owner, held.since = self.token, weakref.ref(self), _now()
            _write_lease(self.root, self._lease(held, None))
            log.warning(
                "state_dir %s was held by another view object in this process: this view "
                "takes it over, and the older one refuses every later step",
                self.root,
            )

    def check(self) -> None:
        """Raise :class:`LockError` when this view was closed or fenced (no file is read)."""
        if self._closed:
            raise LockError(
                f"state_dir {str(self.root)!r}: this view was closed; open the folder again "
                "to change it"
            )
        held = _HELD.get(self.key)
        if self._fenced or (not self._pending and (held is None or held.token != self.token)):
            raise LockError(
                f"state_dir {str(self.root)!r}: another view in this process took the "
                "folder over (a view opened on it later); this view refuses to step (its "
                "result() still reads); use the newer view"
            )

    def verify(self) -> None:
        """Before a commit: :meth:`check`, then the lease must still hold this view's token."""
        if self._pending:
            self.claim()
        self.check()
        stamp = _stamp(self.root / LEASE)  # taken before the read: a change after it shows
        if stamp is not None and stamp == self._confirmed:
            return  # the very file that named this view (a lease is replaced, never edited)
        lease = _read_lease(self.root)
        if not isinstance(lease, dict) or lease.get("token") != self.token:
            self._confirmed = None
            who = describe(lease) if isinstance(lease, dict) else "it is missing or unreadable"
            raise LockError(
                f"state_dir {str(self.root)!r}: this view lost its lease ({self.root / LEASE} "
                f"no longer names it: {who}); the step is refused and nothing is committed"
            )
        self._confirmed = stamp

    def committed(self, tick: int | None, every: float = 0.0) -> None:
        """After a commit: record its time (and tick) in the lease, if it is still ours,
        unless the lease was written less than ``every`` seconds ago (a journaled tick
        passes the ``lease_seconds`` setting: the lease's time has whole seconds anyway)."""
        now = time.monotonic()
        if every and now - self._recorded < every:
            return
        self._recorded = now
        held = _HELD.get(self.key)
        lease = _read_lease(self.root)
        if held is None or not isinstance(lease, dict) or lease.get("token") != self.token:
            return
        _write_lease(self.root, self._lease(held, tick))

    def release(self) -> None:
        """Give the folder up (idempotent): the lease and the lock file are removed."""
        self._closed = True
        if self._finalizer.detach() is not None:
            _release(self.key, self.token)

    def _lease(self, held: _Held, tick: int | None) -> dict[str, Any]:
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "token": self.token,
            "since": held.since,
            "last_commit": _now() if tick is not None else None,
            "tick": tick,
            "lock": "flock" if held.fd is not None else "lease only",
        }


def describe(lease: dict[str, Any]) -> str:
    """The holder a lease names, for messages: host, pid, since when, last commit."""
    last = lease.get("last_commit") or "none yet"
    return (
        f"host {lease.get('host')!r}, pid {lease.get('pid')}, since {lease.get('since')}, "
        f"last commit {last}"
    )


# -- acquiring and releasing ------------------------------------------------------------------
def _acquire(root: Path) -> tuple[int | None, bool]:
    """Take the folder for this process: ``(fd, True)`` with an OS lock, ``(None, False)``
    with the lease alone (no ``flock`` here).  Raises LockError naming the holder."""
    fd = _flock(root / LOCK)
    if fd is not None:
        lease = _read_lease(root)
        if isinstance(lease, dict) and lease.get("pid") is not None:
            log.info("state_dir %s: the previous holder (%s) is gone", root, describe(lease))
        return fd, True
    log.warning(
        "state_dir %s: the filesystem has no file locks (flock); the lease file %s alone "
        "keeps a second writer out",
        root,
        LEASE,
    )
    lease = _read_lease(root)
    if lease is not None and not _stale(lease):
        raise LockError(_busy_message(root, lease, flock=False))
    return None, False


def _flock(path: Path) -> int | None:
    """A descriptor of ``path`` holding an exclusive ``flock``; None when the filesystem
    has none (ENOLCK, EOPNOTSUPP, ...).  Raises LockError when another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not a POSIX system
        return None
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _BUSY:
                raise LockError(_busy_message(path.parent, _read_lease(path.parent))) from None
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        # a holder that released the folder meanwhile unlinked this file: lock the new one
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _release(key: str, token: str) -> None:
    """Give up the folder ``key`` if the view of ``token`` still holds it (blocking)."""
    with _GUARD:
        _drain()
        _release_held(key, token)


def _collected(key: str, token: str) -> None:
    """The finalizer of a view object: release its folder, never blocking.

    The garbage collector may run it at any allocation, also inside a section
    that holds ``_GUARD`` (``_GUARD`` is not reentrant: waiting there would
    deadlock the process); then the release is deferred to the next section
    that takes ``_GUARD``, or to the interpreter's exit.
    """
    if _GUARD.acquire(blocking=False):
        try:
            _drain()
            _release_held(key, token)
        finally:
            _GUARD.release()
    else:
        _DEFERRED.append((key, token))


def _drain() -> None:
    """Carry out the deferred releases (the caller holds ``_GUARD``)."""
    while _DEFERRED:
        _release_held(*_DEFERRED.pop())


def _release_held(key: str, token: str) -> None:
    """Remove the lease and the lock of ``key`` if ``token`` holds it (caller holds _GUARD)."""
    held = _HELD.get(key)
    if held is None or held.token != token:
        return
    del _HELD[key]
    lease = _read_lease(held.root)
    if isinstance(lease, dict) and lease.get("token") == token:
        with contextlib.suppress(OSError):
            (held.root / LEASE).unlink()
    if held.fd is not None:
        with contextlib.suppress(OSError):
            (held.root / LOCK).unlink()  # while still locked: see _flock
        os.close(held.fd)


@atexit.register
def _release_deferred_at_exit() -> None:
    with _GUARD:
        _drain()


def _stale(lease: Any) -> bool:
    """A lease that may be taken over without flock: its pid is dead on this host."""
    if not isinstance(lease, dict) or lease.get("host") != socket.gethostname():
        return False
    pid = lease.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return True  # no view of this process holds it (checked first): left over
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _busy_message(root: Path, lease: Any, flock: bool = True) -> str:
    if isinstance(lease, dict):
        who = f"another view holds it: {describe(lease)}"
    else:
        who = f"another process holds its lock ({LEASE} is missing or unreadable)"
    text = f"state_dir {str(root)!r} is in use: {who}. Stop or close that view first"
    if flock:
        return text + " (a process that died releases the lock by itself)"
    return text + (
        f". Without file locks on this filesystem the lease decides: a lease of a dead "
        f"process on this host is taken over, but one from another host is honoured; if "
        f"that process is gone, delete {root / LEASE} to break the lease"
    )


# -- the lease file ---------------------------------------------------------------------------
def _read_lease(root: Path) -> dict[str, Any] | str | None:
    """The lease (None when there is none; the text when it is not a JSON object)."""
    try:
        text = (root / LEASE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc})"
    try:
        lease = json.loads(text)
    except json.JSONDecodeError:
        return text[:200]
    return lease if isinstance(lease, dict) else text[:200]


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What tells one lease file from another without reading it: device, inode, size
    and change times (None when it cannot be read).  Leases are written to a new file
    and renamed over the old one, so a lease written since has another inode."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _write_lease(root: Path, lease: dict[str, Any]) -> None:
    tmp = root / f".{LEASE}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json.dumps(lease, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, root / LEASE)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
