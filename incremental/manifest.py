"""A view folder's manifest: its format and part names, read and checked, old folders
upgraded, written atomically, and its last tick.

``state_dir/manifest.json`` names the last checkpoint: every file of it with its size
and SHA-256, the journal of the ticks committed since, and a SHA-256 of the manifest
itself (``checksum``).  :func:`read_manifest` checks all of them before anything is
read; :func:`check_view` then refuses a manifest of another view (format, rule,
semiring and its fingerprint, set relations: :class:`ViewId`); :func:`upgraded` reads
the Spark state's old format into the one format; :func:`write_manifest` replaces the
manifest atomically (a temporary file, flushed to disk, ``os.replace``d over the old
one, the folder synced).

**The format** (:data:`FORMAT`, one for every view state)::

    format, state, rule, semiring, keys, sets   the view (``ViewId``, ``state``)
    tick, batch_id                              the checkpoint's tick
    parts: {name: {base, over, rows}}           per part, its files (relative paths)
    files: {path: {bytes, sha256}}              every file of the checkpoint
    journal                                     the journal of the ticks since
    fingerprint                                 a user semiring's (``incremental.fingerprint``)
    types                                       the Spark state's key types per part
    last_tick                                   see below
    checksum                                    SHA-256 of all the rest

**Part names** (:func:`relation_part`, :func:`rows_part`, :func:`low_part`,
:data:`OUTPUT`, :data:`OUTPUT_LOW`, :data:`OUTPUT_MAGNITUDE`): a relation's
annotations ``rel-E`` (or, for the ``general`` regime, its multiset of rows
``rows-E``), the output ``out``, and for ``real`` views the low parts of the
compensated sums ``lo-E`` and ``out-lo`` and the output's magnitudes ``out-mag``.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from incremental.fingerprint import FINGERPRINT, check_fingerprint
from incremental.journal import StateError

__all__ = [
    "FORMAT",
    "IF_TICKS_LOST",
    "LAST_TICK",
    "MANIFEST",
    "OUTPUT",
    "OUTPUT_LOW",
    "OUTPUT_MAGNITUDE",
    "OWN",
    "ViewId",
    "abs_part",
    "check_last_tick",
    "check_view",
    "digest",
    "file_problem",
    "file_sha256",
    "holds_view",
    "low_part",
    "read_manifest",
    "relation_part",
    "rows_part",
    "upgraded",
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

OUTPUT = "out"
"""Part name of a view's output."""

OUTPUT_LOW = "out-lo"
"""Part name of the low parts of a ``real`` view's output (compensated sums)."""

OUTPUT_MAGNITUDE = "out-mag"
"""Part name of the magnitudes of what flowed into a ``real`` view's output keys."""


def relation_part(name: str) -> str:
    """Part name of relation ``name``'s annotations."""
    return f"rel-{name}"


def rows_part(name: str) -> str:
    """Part name of relation ``name``'s multiset of annotated rows (``general`` regime)."""
    return f"rows-{name}"


def low_part(name: str) -> str:
    """Part name of the low parts of relation ``name``'s compensated sums (``real``)."""
    return f"lo-{name}"


def trace_part(name: str) -> str:
    """Part name of the rounds a program view keeps of defined relation ``name`` (a linear
    recursive ring or counting group, :class:`incremental.traced.Rounds`)."""
    return f"trace-{name}"


def abs_part(name: str) -> str:
    """Name of relation ``name``'s absolute annotations (``real``): derived, never written."""
    return f"abs-{name}"


log = logging.getLogger("faq.incremental")

IF_TICKS_LOST = ("error", "accept")
"""What reopening a folder whose journal lost committed ticks does: ``"error"`` raises
:class:`StateError` naming them; ``"accept"`` resumes at the last tick the journal holds."""


@dataclass(frozen=True)
class ViewId:
    """What a manifest records of the view that no tick changes, and a reopen compares.

    Attributes
    ----------
    rule : str
        The rule's text (a program's rules).
    semiring : str
        The semiring's name.
    keys : dict
        Each relation's key column names.
    sets : dict
        The set relations (``sets=``) and their modes; empty: every relation a bag.
    """

    rule: str
    semiring: str
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sets: Mapping[str, str] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """The manifest fields of the view (``sets`` only when some relation is a set)."""
        return {
            "rule": self.rule,
            "semiring": self.semiring,
            "keys": {n: list(k) for n, k in self.keys.items()},
            **({"sets": dict(self.sets)} if self.sets else {}),
        }


def check_view(
    root: Path, m: Mapping[str, Any], view: ViewId, semiring: Any, fingerprint: Any
) -> None:
    """Refuse the manifest ``m`` of the folder ``root`` unless it is of the format
    :data:`FORMAT` and of the view ``view``: its rule and semiring, the definition of a
    user ``semiring`` (its ``fingerprint``, :func:`incremental.fingerprint.check_fingerprint`;
    ``semiring`` None: not compared) and its set relations.

    Raises
    ------
    StateError
        An unknown manifest format, or a user semiring defined otherwise.
    ValueError
        A view of another rule, semiring or ``sets=``.
    """
    if m.get("format") != FORMAT:
        raise StateError(f"{root / MANIFEST}: unknown manifest format {m.get('format')!r}")
    if m.get("rule") != view.rule or m.get("semiring") != view.semiring:
        raise ValueError(
            f"state_dir {str(root)!r} holds a view of {m.get('rule')} over "
            f"{m.get('semiring')!r}, not of {view.rule} over {view.semiring!r}"
        )
    if semiring is not None:
        where = f"state_dir {str(root)!r}"
        check_fingerprint(where, semiring, fingerprint, m.get(FINGERPRINT, ...))
    sets = dict(view.sets)
    if m.get("sets", {}) != sets:
        raise ValueError(
            f"state_dir {str(root)!r} holds a view whose set relations are "
            f"{m.get('sets', {})!r} (sets=), not {sets!r}; reopen it with the same sets="
        )


def upgraded(root: Path, m: dict[str, Any], additive: bool) -> dict[str, Any]:
    """A manifest (of the folder ``root``) of the Spark state's old format (``relations``
    and ``output``, one Parquet folder each) in the one format (``parts``), when its
    semiring was kept ``additive`` (rings, counting: the stored annotations are what the
    old state stored); a manifest of the one format as it is.

    Raises
    ------
    StateError
        An old Spark manifest of another semiring (it kept ⊕-ed annotations, not the
        rows or counts a retraction needs): the message names the old format.
    """
    if "parts" in m or "relations" not in m:
        return m
    if not additive:
        raise StateError(
            f"{root / MANIFEST}: a manifest of the Spark state's old format (format 2 "
            "with 'relations' and 'output'), over a semiring whose old Spark state kept "
            "only ⊕-ed annotations (no rows or counts, so retractions cannot be "
            "maintained); rebuild the view from its relations"
        )
    parts = {
        relation_part(n): {
            "base": f"{r['folder']}/rel-{n}.parquet",
            "over": None,
            "rows": r["rows"],
        }
        for n, r in m["relations"].items()
    }
    out = m["output"]
    parts[OUTPUT] = {"base": f"{out['folder']}/output.parquet", "over": None, "rows": out["rows"]}
    types = {relation_part(n): r["types"] for n, r in m["relations"].items()}
    rest = {k: v for k, v in m.items() if k not in ("relations", "output")}
    return {**rest, "parts": parts, "types": types}


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


def file_problem(root: Path, rel: str, record: Mapping[str, Any]) -> str | None:
    """How the file ``rel`` (under ``root``) differs from its manifest ``record`` by a cheap
    ``stat`` (missing, or another size), or None when it looks intact."""
    f = root / rel
    try:
        size = f.stat().st_size
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc})"
    if size != record["bytes"]:
        return f"has {size} bytes, the commit wrote {record['bytes']}"
    return None


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of the file ``path``, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
