"""A view folder's journal: one checksummed frame appended per tick between checkpoints.

A durable view commits most ticks by appending one *frame* to the journal file
its manifest names (``tick-…/journal.bin``), then one ``fdatasync``: no new
folder, no Parquet file, no manifest.  A frame holds, per part that changed
(:meth:`incremental.store.Store.save` names the parts), the tables the tick
replaced in it, in order (each key's new annotation, zero where the key is
gone), and the part's row count after the tick; reopening reads the parts as
the manifest names them and replays the frames in order
(:func:`replay`), which rebuilds exactly the contents the view had.

A frame is a 64-byte header and a payload::

    magic b"FAQJ" | format u16 | flags u16 | tick u64 | payload bytes u64 |
    SHA-256 of the payload (32 bytes) | CRC-32 of the preceding header bytes u32 |
    4 bytes reserved

The payload is a JSON description (tick, batch id, per part its key names,
rows and arrays) followed by the arrays: numbers as raw numpy bytes, other
values as an Arrow IPC stream.

What reading accepts (:func:`read_frames`): frames whose ticks follow the
manifest's tick one by one.  A *torn* last frame (the file ends inside it: the
process died during its append, before the tick was committed) is dropped, as
is a tail of zero bytes (what a crash can leave after an unfinished append);
the next append first cuts the file back to the last whole frame.  A damaged
header, a payload that does not match its checksum, or a tick out of sequence
raise :class:`incremental.store.StateError` naming the file and the frame.
"""

from __future__ import annotations

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
from semirings.local import group_starts

__all__ = [
    "HEADER",
    "MAGIC",
    "Frame",
    "Journal",
    "StateError",
    "encode",
    "read_frames",
    "replay",
]

MAGIC = b"FAQJ"
"""The first bytes of every frame."""

VERSION = 1
"""The frame format."""

HEADER = struct.Struct("<4sHHQQ32sI4x")
"""A frame's header: magic, format, flags, tick, payload length, payload SHA-256,
CRC-32 of the fields before it, padding (64 bytes)."""


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
    described = {}
    for name, (tables, rows) in parts.items():
        described[name] = {
            "rows": int(rows),
            "tables": [_describe(t, buffers) for t in tables],
        }
    meta = json.dumps(
        {"tick": tick, "batch_id": batch_id, "parts": described}, separators=(",", ":")
    ).encode("utf-8")
    payload = b"".join([struct.pack("<I", len(meta)), meta, *buffers])
    return _header(tick, payload) + payload


def _header(tick: int, payload: bytes) -> bytes:
    digest = hashlib.sha256(payload).digest()
    head = HEADER.pack(MAGIC, VERSION, 0, tick, len(payload), digest, 0)
    crc = zlib.crc32(head[: HEADER.size - 8])
    return HEADER.pack(MAGIC, VERSION, 0, tick, len(payload), digest, crc)


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
    """The whole frames of the journal ``path`` and the offset where the last one ends.

    ``after`` is the tick of the manifest: the frames must be of ticks ``after + 1``,
    ``after + 2``, ... .  A torn last frame, or a tail of zero bytes, is dropped.

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
    pos = 0
    while pos < len(data):
        left = len(data) - pos
        where = f"{path}: frame {len(frames) + 1} (at byte {pos}"
        headless = left < HEADER.size or data[pos : pos + len(MAGIC)] != MAGIC
        if headless and not data[pos:].strip(b"\0"):
            break  # an unfinished append's zero-filled tail
        if left < HEADER.size:
            break  # a torn last frame (its header not all written)
        magic, version, _, tick, length, digest, crc = HEADER.unpack_from(data, pos)
        if magic != MAGIC or crc != zlib.crc32(data[pos : pos + HEADER.size - 8]):
            raise StateError(f"{where}): damaged frame header; the journal cannot be trusted")
        if version != VERSION:
            raise StateError(f"{where}): unknown journal frame format {version}")
        end = pos + HEADER.size + length
        if end > len(data):
            break  # a torn last frame: the tick was never committed
        payload = data[pos + HEADER.size : end]
        if hashlib.sha256(payload).digest() != digest:
            raise StateError(
                f"{where}, tick {tick}): the frame does not match its SHA-256 checksum (damaged)"
            )
        want = after + len(frames) + 1
        if tick != want:
            raise StateError(
                f"{where}): holds tick {tick} where tick {want} was expected (a gap or a "
                "frame out of order)"
            )
        frames.append(_decode(payload, pos, f"{where}, tick {tick})"))
        pos = end
    if pos < len(data):
        log.warning(
            "%s: the last %d bytes are not a whole frame (an append interrupted by a crash: "
            "its tick was not committed); the view resumes at tick %d and the next commit "
            "cuts them off",
            path,
            len(data) - pos,
            after + len(frames),
        )
    return frames, pos


def _decode(payload: bytes, offset: int, where: str) -> Frame:
    try:
        (n,) = struct.unpack_from("<I", payload, 0)
        meta = json.loads(payload[4 : 4 + n].decode("utf-8"))
        at = 4 + n
        parts: dict[str, tuple[list[Table], int]] = {}
        for name, p in meta["parts"].items():
            tables = []
            for d in p["tables"]:
                cols = []
                for desc in d["cols"]:
                    col, at = _unarray(desc, payload, at)
                    cols.append(col)
                values, at = _unarray(d["values"], payload, at)
                tables.append(Table(tuple(d["vars"]), tuple(cols), values))
            parts[name] = (tables, int(p["rows"]))
        if at != len(payload):
            raise ValueError(f"{len(payload) - at} bytes left over")
        return Frame(int(meta["tick"]), meta["batch_id"], parts, offset)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise StateError(f"{where}: the frame's payload cannot be read ({exc})") from exc


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
        """Append ``frame`` after the last whole frame and make it durable.

        ``verify`` runs first (the folder's lock: a view that lost its hold appends
        nothing).  When writing or syncing fails, the file is cut back to the last whole
        frame (if it can be; else before the next append) and the error propagates: the
        tick is not committed.
        """
        if verify is not None:
            verify()
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
            self._cut = True
            try:
                os.ftruncate(fd, self.end)
                os.fdatasync(fd)
                self._cut = False
            except OSError:
                pass
            raise
        self.end += len(frame)
        self.frames += 1

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY)
        return self._fd

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
