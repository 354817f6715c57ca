"""A view folder's manifest: read and checked, written atomically, and its last tick.

``state_dir/manifest.json`` names the last checkpoint: every file of it with its size
and SHA-256, the journal of the ticks committed since, and a SHA-256 of the manifest
itself (``checksum``).  :func:`read_manifest` checks all of them before anything is
read; :func:`write_manifest` replaces the manifest atomically (a temporary file,
flushed to disk, ``os.replace``d over the old one, the folder synced).

**The last tick.**  A journal cut short at a frame boundary looks like a journal that
never held more, and one cut inside a frame like a crash during an append.  So when a
view is closed, its store writes the manifest again with one more field, ``last_tick``:
the last tick the view committed, after the journal's last frame was synced.  A journal
whose whole frames (and a pending intent, applied again) end before it lost committed
ticks, and reopening it raises :class:`StateError` naming the journal and the ticks
missing (:func:`check_last_tick`), unless the caller accepts that loss
(``if_ticks_lost="accept"``, :data:`IF_TICKS_LOST`): the view then resumes at the last
tick the journal holds, and the manifest says so (``last_tick`` rewritten) before any
tick is committed.  A checkpoint writes a manifest without ``last_tick`` (its journal is
empty: the manifest's own ``tick`` is the last one).  Ticks cost nothing for it: the
field is written at close, at most once per view opened.  A view that never closed (a
crash, ``kill -9``) has no record newer than what its journal holds, so a torn last frame
of it is still dropped as a crash's unfinished append.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from incremental.fingerprint import FINGERPRINT
from incremental.journal import StateError

__all__ = [
    "FORMAT",
    "IF_TICKS_LOST",
    "LAST_TICK",
    "MANIFEST",
    "OWN",
    "check_last_tick",
    "digest",
    "file_sha256",
    "holds_view",
    "read_manifest",
    "view_fields",
    "with_last_tick",
    "write_manifest",
]

MANIFEST = "manifest.json"
"""Name of the manifest file in a view's ``state_dir``."""

FORMAT = 2
"""The manifest format, one for both states: ``parts`` names, per part, its base, its
overrides and its rows (see :meth:`incremental.store.Store.save`)."""

LAST_TICK = "last_tick"
"""Manifest key of the last tick the view committed when it was closed (see the module
notes); absent when the manifest's own ``tick`` is the last one."""

OWN = (
    "format",
    "parts",
    "files",
    "journal",
    "checksum",
    FINGERPRINT,
    "tick",
    "batch_id",
    LAST_TICK,
)
"""Manifest fields of the store and of the tick; the rest is the view's (its ``head``)."""

log = logging.getLogger("faq.incremental")

IF_TICKS_LOST = ("error", "accept")
"""What reopening a folder whose journal lost committed ticks does: ``"error"`` raises
:class:`StateError` naming them; ``"accept"`` resumes at the last tick the journal holds."""


def view_fields(m: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest's (or a commit head's) fields that are the view's: all but the store's
    and the tick's (``OWN``)."""
    return {k: v for k, v in m.items() if k not in OWN}


def holds_view(root: Path) -> bool:
    """True when the folder ``root`` holds a committed view (its manifest).

    Raises
    ------
    StateError
        The folder holds tick data but no manifest (it was deleted or lost).
    """
    if (root / MANIFEST).is_file():
        return True
    ticks = sorted(p.name for p in root.glob("tick-*"))
    if ticks:
        raise StateError(
            f"state_dir {str(root)!r} holds tick data ({', '.join(ticks[:3])}"
            f"{', …' if len(ticks) > 3 else ''}) but no {MANIFEST}: the manifest was "
            "deleted or lost, so the state cannot be trusted; restore it or use an empty folder"
        )
    return False


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the folder ``root``, after checking its checksum and every file it
    names (size and SHA-256); no file is changed.

    Raises
    ------
    StateError
        The manifest is unreadable, not a view manifest, or edited; a file it names is
        missing, of another size or does not match its checksum (the message names it).
    """
    path = root / MANIFEST
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(f"{path}: {MANIFEST} is not a readable view manifest ({exc})") from exc
    if not isinstance(m, dict) or "checksum" not in m or "files" not in m:
        raise StateError(
            f"{path}: {MANIFEST} is not a view manifest of this version (no checksum or file list)"
        )
    if digest({k: v for k, v in m.items() if k != "checksum"}) != m["checksum"]:
        raise StateError(
            f"{path}: {MANIFEST} does not match its own checksum: it was edited or damaged"
        )
    for rel, want in sorted(m["files"].items()):
        f = root / rel
        if not f.is_file():
            raise StateError(f"{f}: file {f.name!r} of the committed state is missing")
        size = f.stat().st_size
        if size != want["bytes"]:
            raise StateError(
                f"{f}: file {f.name!r} has {size} bytes, the commit wrote {want['bytes']} "
                "(truncated or damaged)"
            )
        if file_sha256(f) != want["sha256"]:
            raise StateError(f"{f}: file {f.name!r} does not match its SHA-256 checksum (damaged)")
    return m


def write_manifest(
    root: Path, body: dict[str, Any], verify: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Replace the manifest of ``root`` atomically by ``body`` with its checksum, which
    this returns; ``verify`` runs just before the rename (the folder's lock: a view that
    lost its hold replaces nothing, and its temporary file is removed)."""
    full = {**body, "checksum": digest(body)}
    tmp = root / f".{MANIFEST}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(full, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        if verify is not None:
            verify()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, root / MANIFEST)
    with contextlib.suppress(OSError):  # make the rename itself durable where supported
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return full


def check_last_tick(journal: Path, m: Mapping[str, Any], reach: int, accept: bool) -> bool:
    """Whether the journal ``journal`` of the manifest ``m``, whose whole frames (and a
    pending intent) reach tick ``reach``, lost ticks the view committed before it was
    closed (``m``'s ``last_tick``); True only when ``accept``, else no loss.

    Raises
    ------
    StateError
        Ticks were lost and ``accept`` is false: the message names the journal, the tick
        it ends at and the ticks missing.
    """
    last = m.get(LAST_TICK)
    if last is None or int(last) <= reach:
        return False
    missing = f"tick {last} is" if int(last) == reach + 1 else f"ticks {reach + 1}-{last} are"
    if accept:
        log.warning(
            "journal %s ends at tick %d, but the view committed tick %d before it was closed: "
            '%s lost, and the view resumes at tick %d (if_ticks_lost="accept")',
            journal,
            reach,
            last,
            missing,
            reach,
        )
        return True
    raise StateError(
        f"journal {journal} ends at tick {reach}, but the view committed tick {last} "
        f"before it was closed ({missing} missing: the journal was cut short or replaced "
        'by an older copy). Restore the journal, or reopen with if_ticks_lost="accept" to '
        f"resume at tick {reach} without them"
    )


def with_last_tick(body: Mapping[str, Any], tick: int) -> dict[str, Any]:
    """The manifest ``body`` (without its checksum) with ``tick`` as its last tick: none
    when it is the manifest's own tick."""
    new = {k: v for k, v in body.items() if k != LAST_TICK}
    if tick > int(body["tick"]):
        new[LAST_TICK] = tick
    return new


def digest(body: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of ``body`` as canonical JSON: a manifest's ``checksum``."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of the file ``path``, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
