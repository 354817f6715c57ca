"""A view folder's journal: checksummed frames appended per tick between checkpoints.

A durable view commits most ticks in its journal (``tick-…/journal.bin``, the file its
manifest names), with no new folder, no Parquet file and no manifest.  A tick writes two
frames:

* an *intent* frame, before the tick runs: the tick's deltas as the view read them
  (per relation its key columns, annotations and multiplicities) and its batch id.  Its
  ``fdatasync`` runs in a helper process while the tick computes
  (:meth:`Journal.intend`, :mod:`incremental.syncer`), and the tick is not committed
  until it is done;
* a *commit* frame, after: per part that changed (:meth:`incremental.store.Store.save`
  names the parts), the tables the tick replaced in it, in order (each key's new
  annotation, zero where the key is gone), and the part's row count after the tick.
  It is written without a sync of its own: the next tick's intent syncs the file, and
  until then the intent stands for it.

So a tick is durable once its intent is on disk, and the disk's sync costs the tick
only what it takes beyond the tick's own computation.  Reopening reads the parts as
the manifest names them and replays the commit frames in order (:func:`replay`),
which rebuilds exactly the contents the view had; an intent whose commit frame is
missing or torn (a crash between the two, or a power loss before the commit frame
reached the disk) is returned as *pending* (:func:`read_journal`), and the view
applies its deltas again (:mod:`incremental.view`).  A tick that is refused removes
its intent before the step raises.  Journals written before intents (commit frames
only, each synced on its own) read as before.

A frame is a 64-byte header and a payload::

    magic b"FAQJ" | format u16 | flags u16 | tick u64 | payload bytes u64 |
    SHA-256 of the payload (32 bytes) | CRC-32 of the preceding header bytes u32 |
    4 bytes reserved

``flags`` is 1 for an intent, 0 for a commit frame.  The payload is a JSON
description (tick, batch id, per part or relation its arrays) followed by the
arrays: numbers as raw numpy bytes, other values as an Arrow IPC stream.

What reading accepts: commit frames whose ticks follow the manifest's tick one by
one, each after the intent of its own tick or (older journals) straight after the
last.  A *torn* last frame (the file ends inside it: the process died during its
append) is dropped, as is a tail of zero bytes (what a crash can leave after an
unfinished append); the next append first cuts the file back to the last whole frame.
A journal that ends before the last tick of a view closed cleanly (the manifest's
``last_tick``) lost ticks, and reopening refuses it (:mod:`incremental.manifest`).
A damaged header, a payload that does not match its checksum, or a tick out of
sequence raise :class:`incremental.store.StateError` naming the file and the frame.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from faq.kernel import Table
from incremental.syncer import Syncer
from semirings.local import group_starts

__all__ = [
    "HEADER",
    "INTENT",
    "MAGIC",
    "Delta",
    "Frame",
    "Intent",
    "Journal",
    "Pending",
    "StateError",
    "encode",
    "encode_intent",
    "read_frames",
    "read_journal",
    "replay",
]

MAGIC = b"FAQJ"
"""The first bytes of every frame."""

VERSION = 1
"""The frame format."""

HEADER = struct.Struct("<4sHHQQ32sI4x")
"""A frame's header: magic, format, flags, tick, payload length, payload SHA-256,
CRC-32 of the fields before it, padding (64 bytes)."""

INTENT = 1
"""The header flag of an intent frame (a tick's deltas, written before it runs)."""

Delta = tuple[tuple[np.ndarray, ...], np.ndarray | None, np.ndarray]
"""A relation's delta in an intent: key columns, annotations (None: all one), weights."""


class StateError(ValueError):
    """A view's ``state_dir`` is damaged or is not a view's folder; the message names the file."""


log = logging.getLogger("faq.incremental")

_NUMERIC = "biufcmMSU"
"""numpy kinds written as raw bytes (anything else goes through Arrow)."""


@dataclass(frozen=True)
class Frame:
    """One committed tick read back: its number, batch id and, per changed part, the
    tables it replaced (in order) and the part's rows after the tick."""

    tick: int
    batch_id: int | None
    parts: dict[str, tuple[list[Table], int]]
    offset: int


@dataclass(frozen=True)
class Intent:
    """A tick's intent frame read back: its number, batch id and, per changed relation,
    its delta (:data:`Delta`); the frame spans bytes ``offset`` to ``end``."""

    tick: int
    batch_id: int | None
    deltas: dict[str, Delta]
    offset: int
    end: int


# -- writing ------------------------------------------------------------------------------------
def encode(
    tick: int, batch_id: int | None, parts: Mapping[str, tuple[Sequence[Table], int]]
) -> bytes:
    """The frame of tick ``tick``: header and payload (see the module notes).

    Parameters
    ----------
    tick, batch_id
        The tick the frame commits and its batch id.
    parts : mapping of str to (tables, rows)
        Per changed part, the tables the tick replaced in it, in order, and its rows
        after the tick.
    """
    buffers: list[bytes] = []
    described = {
        name: {"rows": int(rows), "tables": [_describe(t, buffers) for t in tables]}
        for name, (tables, rows) in parts.items()
    }
    return _frame(tick, {"batch_id": batch_id, "parts": described}, buffers)


def encode_intent(tick: int, batch_id: int | None, deltas: Mapping[str, Delta]) -> bytes:
    """The intent frame of tick ``tick``: its batch id and, per changed relation, its
    delta (key columns, annotations or None, multiplicities) as the view read it."""
    buffers: list[bytes] = []
    described = {
        name: {
            "cols": [_array(c, buffers) for c in cols],
            "values": None if values is None else _array(values, buffers),
            "weights": _array(weights, buffers),
        }
        for name, (cols, values, weights) in deltas.items()
    }
    return _frame(tick, {"batch_id": batch_id, "deltas": described}, buffers, INTENT)


def _frame(tick: int, meta: dict[str, Any], buffers: list[bytes], flags: int = 0) -> bytes:
    """A frame of tick ``tick``: header, then the payload (``meta`` with the tick, as
    JSON after its length, then ``buffers``)."""
    text = json.dumps({"tick": tick, **meta}, separators=(",", ":")).encode("utf-8")
    payload = b"".join([struct.pack("<I", len(text)), text, *buffers])
    digest = hashlib.sha256(payload).digest()
    head = HEADER.pack(MAGIC, VERSION, flags, tick, len(payload), digest, 0)
    crc = zlib.crc32(head[: HEADER.size - 8])
    return HEADER.pack(MAGIC, VERSION, flags, tick, len(payload), digest, crc) + payload


def _describe(t: Table, buffers: list[bytes]) -> dict[str, Any]:
    assert t.values is not None
    return {
        "vars": list(t.vars),
        "cols": [_array(c, buffers) for c in t.cols],
        "values": _array(t.values, buffers),
    }


def _array(a: np.ndarray, buffers: list[bytes]) -> list[Any]:
    a = np.asarray(a)
    if a.dtype.kind in _NUMERIC:
        data = np.ascontiguousarray(a).tobytes()
        buffers.append(data)
        return ["raw", a.dtype.str, len(a), len(data)]
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    table = pa.table({"a": pa.array(a.tolist())})
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    data = sink.getvalue().to_pybytes()
    buffers.append(data)
    return ["arrow", a.dtype.str, len(a), len(data)]


# -- reading ------------------------------------------------------------------------------------
def read_frames(path: Path, after: int) -> tuple[list[Frame], int]:
    """The whole commit frames of the journal ``path`` and the offset where the last one
    ends (see :func:`read_journal`, which also returns a pending intent)."""
    frames, end, _ = read_journal(path, after)
    return frames, end


def read_journal(
    path: Path, after: int, last: int | None = None
) -> tuple[list[Frame], int, Intent | None]:
    """The whole commit frames of the journal ``path``, the offset where the last one
    ends, and the intent of the next tick when it has no whole commit frame (pending).

    ``after`` is the tick of the manifest: the commit frames must be of ticks
    ``after + 1``, ``after + 2``, ..., each after its own tick's intent or (a journal
    written before intents) right after the last.  A torn last frame, or a tail of zero
    bytes, is dropped, with a warning that a crash left it, unless the frames end before
    ``last`` (the last tick of a view closed cleanly: no crash, ticks were lost, which
    the caller says, :func:`incremental.manifest.check_last_tick`).

    Raises
    ------
    StateError
        The file is missing or unreadable, a header is damaged, a whole frame does not
        match its checksum, or a tick is out of sequence (the message names the file,
        the frame's offset and its tick).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StateError(
            f"{path}: the journal of the committed state cannot be read ({exc}); the ticks "
            "committed since the last checkpoint are in it"
        ) from exc
    frames: list[Frame] = []
    intent: Intent | None = None
    pos = end = 0
    n = 0
    while pos < len(data):
        left = len(data) - pos
        n += 1
        where = f"{path}: frame {n} (at byte {pos}"
        headless = left < HEADER.size or data[pos : pos + len(MAGIC)] != MAGIC
        if headless and not data[pos:].strip(b"\0"):
            break  # an unfinished append's zero-filled tail
        if left < HEADER.size:
            break  # a torn last frame (its header not all written)
        magic, version, flags, tick, length, digest, crc = HEADER.unpack_from(data, pos)
        if magic != MAGIC or crc != zlib.crc32(data[pos : pos + HEADER.size - 8]):
            raise StateError(f"{where}): damaged frame header; the journal cannot be trusted")
        if version != VERSION or flags not in (0, INTENT):
            raise StateError(f"{where}): unknown journal frame format {version}.{flags}")
        stop = pos + HEADER.size + length
        if stop > len(data):
            break  # a torn last frame
        payload = data[pos + HEADER.size : stop]
        if hashlib.sha256(payload).digest() != digest:
            raise StateError(
                f"{where}, tick {tick}): the frame does not match its SHA-256 checksum (damaged)"
            )
        want = after + len(frames) + 1
        what = "an intent" if flags == INTENT else "a commit frame"
        if tick != want:
            raise StateError(
                f"{where}): holds {what} of tick {tick} where tick {want} was expected (a gap "
                "or a frame out of order)"
            )
        if flags == INTENT and intent is not None:
            raise StateError(
                f"{where}): holds a second intent of tick {tick} before its commit frame (a "
                "frame out of order)"
            )
        if flags == INTENT:
            intent = _decode_intent(payload, pos, stop, f"{where}, tick {tick})")
        else:
            frames.append(_decode(payload, pos, f"{where}, tick {tick})"))
            intent, end = None, stop
        pos = stop
    whole = intent.end if intent is not None else end
    reach = intent.tick if intent is not None else after + len(frames)
    if whole < len(data) and (last is None or reach >= last):
        left = len(data) - whole
        if intent is not None:
            log.warning(
                "%s: the last %d bytes are not a whole frame (a commit interrupted by a "
                "crash, after the intent of tick %d was written); the tick is applied again "
                "from its intent",
                path,
                left,
                intent.tick,
            )
        else:
            log.warning(
                "%s: the last %d bytes are not a whole frame (an append interrupted by a "
                "crash: its tick was not committed); the view resumes at tick %d and the "
                "next commit cuts them off",
                path,
                left,
                after + len(frames),
            )
    return frames, end, intent


def _decode_intent(payload: bytes, offset: int, stop: int, where: str) -> Intent:
    try:
        (n,) = struct.unpack_from("<I", payload, 0)
        meta = json.loads(payload[4 : 4 + n].decode("utf-8"))
        at = 4 + n
        deltas: dict[str, Delta] = {}
        for name, d in meta["deltas"].items():
            cols, at = _unarrays(d["cols"], payload, at)
            values = None
            if d["values"] is not None:
                values, at = _unarray(d["values"], payload, at)
            weights, at = _unarray(d["weights"], payload, at)
            deltas[name] = (tuple(cols), values, weights)
        if at != len(payload):
            raise ValueError(f"{len(payload) - at} bytes left over")
        return Intent(int(meta["tick"]), meta["batch_id"], deltas, offset, stop)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise StateError(f"{where}: the intent's payload cannot be read ({exc})") from exc


def _decode(payload: bytes, offset: int, where: str) -> Frame:
    try:
        (n,) = struct.unpack_from("<I", payload, 0)
        meta = json.loads(payload[4 : 4 + n].decode("utf-8"))
        at = 4 + n
        parts: dict[str, tuple[list[Table], int]] = {}
        for name, p in meta["parts"].items():
            tables = []
            for d in p["tables"]:
                cols, at = _unarrays(d["cols"], payload, at)
                values, at = _unarray(d["values"], payload, at)
                tables.append(Table(tuple(d["vars"]), tuple(cols), values))
            parts[name] = (tables, int(p["rows"]))
        if at != len(payload):
            raise ValueError(f"{len(payload) - at} bytes left over")
        return Frame(int(meta["tick"]), meta["batch_id"], parts, offset)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise StateError(f"{where}: the frame's payload cannot be read ({exc})") from exc


def _unarrays(
    descs: list[list[Any]], payload: bytes, at: int
) -> tuple[tuple[np.ndarray, ...], int]:
    """The arrays ``descs`` describe, read from ``payload`` at byte ``at``, and where
    they end."""
    out = []
    for desc in descs:
        a, at = _unarray(desc, payload, at)
        out.append(a)
    return tuple(out), at


def _unarray(desc: list[Any], payload: bytes, at: int) -> tuple[np.ndarray, int]:
    how, dtype, n, size = desc
    data = payload[at : at + size]
    if len(data) != size:
        raise ValueError("the payload is shorter than its description")
    if how == "raw":
        a = np.frombuffer(data, dtype=np.dtype(dtype)).copy()
    else:
        import pyarrow as pa

        col = pa.ipc.open_stream(data).read_all().column(0)
        a = np.asarray(col.to_pylist(), dtype=object) if dtype == "|O" else col.to_numpy()
        a = a.astype(np.dtype(dtype), copy=False)
    if len(a) != n:
        raise ValueError(f"an array of {len(a)} rows where {n} were written")
    return a, at + size


def replay(parts: dict[str, Any], frames: Sequence[Frame], path: Path) -> dict[str, Any]:
    """``parts`` (keyed relations with ``replace``, ``vars`` and ``rows``) after the ticks
    of ``frames``: per part, the last annotation each key was given, replaced at once.

    Raises
    ------
    StateError
        A frame names a part the view does not have, or a part's rows after the last
        tick that changed it differ from those the frame recorded.
    """
    tables: dict[str, list[Table]] = {}
    rows: dict[str, tuple[int, int]] = {}
    for f in frames:
        for name, (changed, n) in f.parts.items():
            if name not in parts:
                raise StateError(
                    f"{path}: frame of tick {f.tick} changes part {name!r}, which this view "
                    "does not have"
                )
            tables.setdefault(name, []).extend(changed)
            rows[name] = (f.tick, n)
    out = dict(parts)
    for name, changed in tables.items():
        kt = out[name]
        if changed:
            kt = kt.replace(_last_per_key(kt.vars, changed))
        tick, n = rows[name]
        if kt.rows != n:
            raise StateError(
                f"{path}: after the frame of tick {tick}, part {name!r} holds {kt.rows} rows, "
                f"the tick committed {n}: the journal does not fit its checkpoint"
            )
        out[name] = kt
    return out


def _last_per_key(vars_: tuple[str, ...], tables: Sequence[Table]) -> Table:
    """The rows of ``tables`` (in order) with only the last row of each key."""
    if not vars_:
        return Table(vars_, (), tables[-1].values)
    cols = tuple(np.concatenate([t.cols[i] for t in tables]) for i in range(len(vars_)))
    values = np.concatenate([t.values for t in tables if t.values is not None])
    if len(tables) == 1:
        return Table(vars_, cols, values)
    perm, starts = group_starts(cols)  # a stable sort: a key's rows keep their order
    last = perm[np.append(starts[1:], len(perm)) - 1]
    return Table(vars_, tuple(c[last] for c in cols), values[last])


# -- the open journal ---------------------------------------------------------------------------
class Journal:
    """The journal file of the current checkpoint, opened for appends.

    Attributes
    ----------
    path : Path
        The file.
    end : int
        Where the last whole frame ends (the file may be longer: a torn frame, cut
        before the next append).
    frames : int
        Whole frames in the file.
    """

    def __init__(self, path: Path, end: int = 0, frames: int = 0) -> None:
        self.path = path
        self.end = end
        self.frames = frames
        self._fd: int | None = None
        self._syncer: Syncer | None = None
        try:
            self._cut = path.stat().st_size != end
        except OSError:
            self._cut = True

    @classmethod
    def create(cls, path: Path) -> Journal:
        """A new, empty journal file (on disk before the manifest that names it)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return cls(path)

    def append(
        self, frame: bytes, verify: Callable[[], None] | None = None, sync: bool = True
    ) -> None:
        """Append ``frame`` after the last whole frame and (``sync``) make it durable.

        ``verify`` runs first (the folder's lock: a view that lost its hold appends
        nothing).  When writing or syncing fails, the file is cut back to the last whole
        frame (if it can be; else before the next append) and the error propagates: the
        tick is not committed.
        """
        if verify is not None:
            verify()
        self._write(frame, sync)
        self.frames += 1

    def intend(self, frame: bytes, verify: Callable[[], None] | None = None) -> Pending:
        """Append the intent ``frame`` and start its ``fdatasync`` beside the caller (in
        the journal's helper process, :class:`incremental.syncer.Syncer`); the tick's
        commit frame then follows it (:meth:`append`, unsynced), and
        :meth:`Pending.wait` makes the tick durable, or :meth:`Pending.abort` takes the
        intent back.  A failed write raises here, the file cut back as by :meth:`append`;
        without a helper, the intent is synced here.
        """
        if verify is not None:
            verify()
        before = self.end
        self._write(frame, sync=False)
        if self._syncer is None:
            self._syncer = Syncer(self.path)
        if self._syncer.start():
            return Pending(self, before, self.frames, self._syncer)
        try:
            os.fdatasync(self._open())
        except BaseException:
            self.cut_back(before)
            raise
        return Pending(self, before, self.frames, None)

    def _write(self, frame: bytes, sync: bool) -> None:
        fd = self._open()
        try:
            if self._cut:
                os.ftruncate(fd, self.end)
                self._cut = False
            view = memoryview(frame)
            at = self.end
            while view:
                n = os.pwrite(fd, view, at)
                view, at = view[n:], at + n
            if sync:
                os.fdatasync(fd)
        except BaseException:
            self.cut_back(self.end)
            raise
        self.end += len(frame)

    def drop_after(self, end: int) -> None:
        """Take ``end`` as where the last whole frame ends: the bytes after it are cut off
        before the next append (nothing is written now)."""
        self.end = end
        self._cut = True

    def cut_back(self, end: int) -> None:
        """Cut the file back to ``end`` (a frame's start) and sync it; when that fails,
        the next append cuts it first."""
        self.end = end
        self._cut = True
        try:
            fd = self._open()
            os.ftruncate(fd, end)
            os.fdatasync(fd)
            self._cut = False
        except OSError:
            pass

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY)
        return self._fd

    def close(self) -> None:
        """Sync and close the file, and end the journal's helper (idempotent)."""
        if self._syncer is not None:
            syncer, self._syncer = self._syncer, None
            syncer.close()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.fdatasync(fd)  # the last commit frame, which no later intent synced
            os.close(fd)


class Pending:
    """A tick whose intent is written and being synced (:meth:`Journal.intend`): by
    ``syncer``, or already (None)."""

    def __init__(self, journal: Journal, before: int, frames: int, syncer: Syncer | None) -> None:
        self.journal = journal
        self.before = before  # where the intent starts
        self.frames = frames  # the journal's commit frames before the tick
        self.syncer = syncer

    def wait(self) -> None:
        """Return once the intent is on disk (the tick is durable); when the sync
        failed, take the intent back (:meth:`abort`) and raise its error."""
        if self.syncer is None:
            return
        try:
            self.syncer.result()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Take the intent back (and anything written after it): the tick is not
        committed.  Waits for the sync first, whatever it gives."""
        if self.syncer is not None:
            with contextlib.suppress(OSError):
                self.syncer.result()
        self.journal.cut_back(self.before)
        self.journal.frames = self.frames
