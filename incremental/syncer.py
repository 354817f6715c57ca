"""A file's ``fdatasync`` run beside the caller, in a helper process of its own.

A durable view's tick syncs its journal's intent while the tick computes
(:mod:`incremental.journal`).  A Python thread cannot do that for free: the tick's
Python code holds the interpreter's lock (GIL), which the thread needs to start
its sync and again to report it, and each hand-over stops the tick (measured on a
1M-edge triangle view, one-edge ticks: a thread made a durable tick 1.9 ms slower
than a plain one, against 1.4 ms for syncing in the tick itself).  A process has
no share in the lock: :class:`Syncer` starts ``python -I -S -c HELPER path`` once
per journal file, which opens the file and, for each byte read from its stdin,
runs ``fdatasync`` on it (data written through any descriptor of the file is
flushed) and answers with four bytes, the ``errno`` of a failure or 0.  A request
and its answer are a pipe write and a pipe read.

The helper ends when its stdin closes: :meth:`Syncer.close`, or the death of the
process that started it, even by ``kill -9``.  When no helper can be started, or
one stops answering, the sync runs in the caller (:meth:`Syncer.start` returns
False): slower, never less durable.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
from pathlib import Path

__all__ = ["Syncer"]

HELPER = """
import os, struct, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
while os.read(0, 1):
    try:
        os.fdatasync(fd)
        code = 0
    except OSError as exc:
        code = exc.errno or -1
    os.write(1, struct.pack("<i", code))
"""
"""What the helper process runs (no imports beyond ``os``, ``struct`` and ``sys``)."""


class Syncer:
    """Syncs of the file ``path``, asked for one at a time, run by a helper process.

    Attributes
    ----------
    answered : int
        Syncs the helper has reported done (for tests and benchmarks).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answered = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._asked = False

    def start(self) -> bool:
        """Ask for a sync of everything written to the file so far; False when no helper
        can run it (the caller syncs the file itself)."""
        proc = self._helper()
        if proc is None:
            return False
        try:
            assert proc.stdin is not None
            os.write(proc.stdin.fileno(), b"s")
        except OSError:
            self._drop()
            return False
        self._asked = True
        return True

    def result(self) -> None:
        """Wait for the sync asked for by :meth:`start`.

        Raises
        ------
        OSError
            The sync failed (the helper's ``errno``), or the helper ended without an
            answer (then the next :meth:`start` starts another).
        """
        if not self._asked:
            return
        self._asked = False
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            reply = os.read(proc.stdout.fileno(), 4)
        except OSError:
            reply = b""
        if len(reply) != 4:
            self._drop()
            raise OSError(f"the sync helper of {self.path} ended without an answer")
        (code,) = struct.unpack("<i", reply)
        if code:
            raise OSError(code, f"{os.strerror(code)} (fdatasync of {self.path})")
        self.answered += 1

    def close(self) -> None:
        """End the helper (its stdin closed; idempotent).  An unanswered sync is waited
        for first."""
        if self._asked:
            with contextlib.suppress(OSError):
                self.result()
        self._drop()

    def _helper(self) -> subprocess.Popen[bytes] | None:
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", HELPER, str(self.path)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                )
            except OSError:
                self._proc = None
        return self._proc

    def _drop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
