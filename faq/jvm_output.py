"""The JVM's console output, without the notices every Spark 4 start prints on Java 17.

A JVM writes to the standard error it inherited when it started.  Spark's launcher always
adds the incubating vector module, so the JVM prints ``WARNING: Using incubator modules:
jdk.incubator.vector`` at every start, and Apache DataSketches (in Spark's catalyst jar)
prints ``Java versions > Java 11 can only operate in restricted mode`` the first time it is
loaded.  Neither is something a user can act on, and neither goes through log4j, so the
logging configuration cannot silence them.

:func:`filtered_stderr` starts processes (the JVM) with a pipe as their standard error; a
daemon thread copies what they write to this process's standard error line by line,
leaving out exactly those notices (:data:`NOISE`).  Every other line, warnings and errors
included, goes through unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import select
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["NOISE", "filtered_stderr", "is_noise"]

NOISE: tuple[re.Pattern[bytes], ...] = (
    re.compile(rb"^WARNING: Using incubator modules: jdk\.incubator\.vector\s*$"),
    re.compile(
        rb"^(WARNING|Warning): Java versions > Java 11 can only operate in restricted mode"
        rb"( where no off-heap operations are allowed!)?\s*$"
    ),
)
"""The lines left out: notices the JVM prints on every start, nothing a user can act on."""

CHUNK = 1 << 16
"""Bytes read at a time; a line longer than this is copied in pieces, never dropped."""


def is_noise(line: bytes) -> bool:
    """Whether ``line`` (one line of the JVM's standard error) is one of :data:`NOISE`."""
    return any(p.match(line.rstrip(b"\r\n")) for p in NOISE)


def copy_lines(read_fd: int, write_fd: int) -> None:
    """Copy ``read_fd`` to ``write_fd`` line by line, leaving out :data:`NOISE`, until the
    writing end is closed by every process holding it; then close ``read_fd``."""
    pending = b""
    try:
        while chunk := os.read(read_fd, CHUNK):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(ln + b"\n" for ln in lines if not is_noise(ln))
            if len(pending) >= CHUNK:  # no newline in sight: pass it on as it is
                out, pending = out + pending, b""
            if out:
                write_all(write_fd, out)
        if pending and not is_noise(pending):
            write_all(write_fd, pending)
    except OSError:  # this process's standard error went away: nothing left to copy to
        pass
    finally:
        os.close(read_fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def drain(read_fd: int, copier: threading.Thread, most: float = 1.0) -> None:
    """Give the copier up to ``most`` seconds to pass on what is still in the pipe.

    Run at exit: the copier is a daemon thread, and the JVM stops only after this
    process's exit handlers, so lines it wrote just before would otherwise be lost.
    """
    deadline = time.monotonic() + most
    while copier.is_alive() and time.monotonic() < deadline:
        try:
            waiting, _, _ = select.select([read_fd], [], [], 0.05)
        except (OSError, ValueError):  # the copier reached the end and closed the pipe
            return
        if not waiting:
            time.sleep(0.05)  # the copier may be writing the last chunk it read
            return
        time.sleep(0.01)


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """Processes started inside the block write their standard error through a filter
    that leaves out :data:`NOISE` (for as long as they run); this process's own standard
    error is restored when the block ends.

    Where file descriptors cannot be redirected (no descriptor 2, as under some embedded
    interpreters), the block runs with nothing changed.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    copier = threading.Thread(
        target=copy_lines, args=(read_fd, saved), name="faq-jvm-stderr", daemon=True
    )
    copier.start()
    atexit.register(drain, read_fd, copier)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        # ``saved`` stays open: the copier writes the JVM's lines to it for as long as the
        # JVM runs; it ends (and closes the pipe) when the JVM closes its end
