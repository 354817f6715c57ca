"""A view's folder on disk: checkpoints with a verified, atomic manifest, and a journal.

Layout of ``state_dir``::

    manifest.json                 the last checkpoint (replaced atomically)
    tick-00000012-1a2b3c4d/       files written by the checkpoint of tick 12
        rel-E.base.parquet        a relation's rows as of its last rewrite
        rel-E.over.parquet        the rows changed since (small)
        out.over.parquet          ...
        journal.bin               the ticks committed since (13, 14, ...)

A tick is committed in the journal (:mod:`incremental.journal`): its intent (the
deltas, :meth:`Store.intend`) is appended and synced while the tick runs, after the
folder's lock confirmed the hold (``Guard.verify``); then :meth:`Store.save_tick`
appends its commit frame (per changed part, the tables the tick replaced in it,
checksummed) and waits for that sync.  When the journal holds the
``journal_ticks`` setting's ticks or would pass ``journal_bytes``, when a part
cannot say what it changed, or when a file of the checkpoint is missing, the
tick is a *checkpoint* instead (:meth:`Store.save`): its files, a new empty
journal, then the manifest to a temporary file (flushed to disk) renamed over
the old one (``os.replace`` is atomic), then the tick folders and journals no
longer named are removed.

The manifest names every file of the checkpoint, with its size and SHA-256,
plus a SHA-256 of the manifest itself, and the journal.  Reopening checks all
of them before anything is read, then replays the journal, and refuses
damaged state with :class:`StateError` naming the file: a truncated, changed
or missing file, an edited manifest, a folder that holds tick data but no
manifest, a missing journal or a damaged frame.

What ``kill -9`` leaves: the last checkpoint and every whole frame after it;
an append cut short (a torn frame, or zeros) is dropped on reopen and cut off
before the next append, and an intent without its commit frame is applied again.
A view's state in memory changes only after its commit returned: a failed commit
leaves view and folder at the old tick.  A view closed cleanly records its last
tick in the manifest (:mod:`incremental.manifest`), so a journal of it cut short
later is refused, naming the ticks it lost, unless the caller accepts the loss
(``if_ticks_lost``).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from faq import settings
from faq.kernel import KeyedTable, Table
from incremental.fingerprint import (
    FINGERPRINT,
    builtin,
    check_fingerprint,
    semiring_fingerprint,
)
from incremental.journal import (
    Delta,
    Frame,
    Intent,
    Journal,
    Pending,
    StateError,
    encode,
    encode_intent,
    read_journal,
)
from incremental.manifest import (
    FORMAT,
    LAST_TICK,
    MANIFEST,
    check_last_tick,
    file_sha256,
    holds_view,
    read_manifest,
    view_fields,
    with_last_tick,
    write_manifest,
)
from semirings import Semiring
from semirings.local import LocalOps

if TYPE_CHECKING:  # pragma: no cover
    from incremental.protocol import Part

__all__ = ["FINGERPRINT", "FORMAT", "MANIFEST", "StateError", "Store", "semiring_fingerprint"]

log = logging.getLogger("faq.incremental")

JOURNAL = "journal.bin"
"""Name of a checkpoint's journal file, in the checkpoint's tick folder."""


class Guard(Protocol):
    """What a :class:`Store` asks of the hold on its folder (``incremental.lock.FolderLock``)."""

    def check(self) -> None: ...
    def claim(self) -> None: ...
    def verify(self) -> None: ...
    def committed(self, tick: int | None, every: float = 0.0) -> None: ...
    def release(self) -> None: ...


class Store:
    """A view's folder: verified reads, atomic commits, garbage collection.

    Parameters
    ----------
    root : Path
        The folder.
    semiring : Semiring, optional
        The view's semiring: a user semiring's fingerprint goes into every
        manifest (:func:`semiring_fingerprint`) and is compared on reopen.
    guard : Guard, optional
        The hold on the folder: checked before every manifest rename and every
        journal append (a view that lost it commits nothing) and told of every
        commit.
    if_ticks_lost : {"error", "accept"}
        What :meth:`open_journal` does with a journal that lost ticks the view
        committed before it was closed (:data:`incremental.manifest.IF_TICKS_LOST`).
    """

    def __init__(
        self,
        root: Path,
        semiring: Semiring | None = None,
        guard: Guard | None = None,
        if_ticks_lost: str = "error",
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.semiring = semiring
        self.guard = guard
        self.if_ticks_lost = if_ticks_lost
        self.tick: int | None = None  # the last tick committed (None: none read or written)
        self._body: dict[str, Any] | None = None  # the manifest on disk, without its checksum
        self._live = False  # opened(): the view opened, so close() records its last tick
        self._accepted: int | None = None  # the tick a view accepting lost ticks resumes at
        self.fingerprint = (
            None if semiring is None or builtin(semiring) else (semiring_fingerprint(semiring))
        )
        self.journal: Journal | None = None
        self._owed: bytes | None = None  # see owe(): a commit frame, or b"": a checkpoint
        self._head: dict[str, Any] | None = None  # the last checkpoint's view fields
        self._files: list[tuple[str, int]] | None = None  # the checkpoint's paths, sizes

    def check(self) -> None:
        """Raise :class:`StateError` (a LockError) when this view may not change the folder."""
        if self.guard is not None:
            self.guard.check()

    def opened(self) -> None:
        """The view opened on this folder: claim the hold (:meth:`Guard.claim`), and when
        it accepted lost ticks, record the tick it resumes at (:meth:`record_last_tick`)."""
        if self.guard is not None:
            self.guard.claim()
        self._live = True
        if self._accepted is not None:
            self.record_last_tick(self._accepted, accepted=True)
            self._accepted = None

    def close(self) -> None:
        """Give the folder up (the journal, synced, then the lock and the lease;
        idempotent), recording the view's last tick first (:meth:`record_last_tick`)."""
        if self.journal is not None:
            self.journal.close()
            if self._live and self.tick is not None:
                self.record_last_tick(self.tick)
            self._live = False
        if self.guard is not None:
            self.guard.release()

    def record_last_tick(self, tick: int, accepted: bool = False) -> None:
        """Write the manifest again with ``tick`` as its last tick (``last_tick``, see
        :mod:`incremental.manifest`), the hold verified: at close, when the journal holds
        ticks the manifest does not name (a warning when it cannot be written: the hold
        lost, a disk error), or the tick a view that ``accepted`` lost ticks resumes at
        (then an error propagates)."""
        body, journal = self._body, self.journal
        if body is None or journal is None or body.get("journal") != self._rel(journal.path):
            return  # no manifest of this journal (an old Spark manifest: none)
        if not accepted and tick <= int(body.get(LAST_TICK, body["tick"])):
            return
        new = with_last_tick(body, tick)
        try:
            write_manifest(self.root, new, self.guard.verify if self.guard else None)
        except (OSError, StateError) as exc:  # StateError: the hold lost (another holds it)
            if accepted:
                raise
            if isinstance(exc, OSError):
                log.warning("state_dir %s: last tick %d not recorded (%s)", self.root, tick, exc)
            return
        self._body = new

    def exists(self) -> bool:
        """True when the folder holds a committed view (refuses tick data without a
        manifest: :func:`incremental.manifest.holds_view`)."""
        return holds_view(self.root)

    # -- reading ------------------------------------------------------------------------------
    def read(self) -> dict[str, Any]:
        """The manifest, after checking it and every file it names (no file is changed;
        :func:`incremental.manifest.read_manifest`)."""
        m = read_manifest(self.root)
        self._body = {k: v for k, v in m.items() if k != "checksum"}
        return m

    def check_semiring(self, m: dict[str, Any]) -> None:
        """Refuse a manifest written with another definition of this store's semiring
        (:func:`incremental.fingerprint.check_fingerprint`)."""
        if self.semiring is not None:
            where = f"state_dir {str(self.root)!r}"
            check_fingerprint(where, self.semiring, self.fingerprint, m.get(FINGERPRINT, ...))

    def read_keyed(
        self, entry: dict[str, Any], vars_: tuple[str, ...], ops: LocalOps
    ) -> KeyedTable:
        """A keyed table from its manifest entry (``base``, ``over``, ``rows``)."""
        base = self.read_table(entry["base"], vars_, ops)
        over = self.read_table(entry["over"], vars_, ops) if entry.get("over") else None
        if over is None:
            over = Table(vars_, tuple(c[:0] for c in base.cols), base.values[:0])  # type: ignore[index]
        return KeyedTable(base, over, ops, int(entry["rows"]))

    def read_table(self, rel: str, vars_: tuple[str, ...], ops: LocalOps) -> Table:
        """A table written by :meth:`write_table` (or a Parquet folder of columns ``c0``,
        ``c1``, ..., ``value`` written by Spark)."""
        import pyarrow.parquet as pq

        at = pq.read_table(self.root / rel)
        cols = tuple(_numpy(at.column(f"c{i}")) for i in range(len(vars_)))
        values = _numpy(at.column("value"))
        if ops.dtype is not object:
            values = values.astype(ops.dtype)
        return Table(vars_, cols, values)

    # -- writing ------------------------------------------------------------------------------
    def new_folder(self, tick: int) -> Path:
        """A fresh folder for the files of ``tick``."""
        folder = self.root / f"tick-{tick:08d}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        return folder

    def write_table(self, t: Table, path: Path) -> tuple[str, dict[str, Any]]:
        """Write ``t`` as one Parquet file; its path relative to the root and its record."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        data = {f"c{i}": _arrow(c) for i, c in enumerate(t.cols)}
        assert t.values is not None
        data["value"] = _arrow(t.values)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.table(data), tmp)
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return self.record(path)

    def record(self, path: Path) -> tuple[str, dict[str, Any]]:
        """The manifest record of a written file: relative path, size and SHA-256."""
        return self._rel(path), {
            "bytes": path.stat().st_size,
            "sha256": file_sha256(path),
        }

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def record_tree(self, folder: Path) -> dict[str, dict[str, Any]]:
        """Records of every file under ``folder`` (a Spark-written Parquet folder)."""
        out = {}
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                rel, rec = self.record(p)
                out[rel] = rec
        return out

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest`` (with its checksum) atomically, then drop unnamed tick folders."""
        body = {k: v for k, v in manifest.items() if k not in ("checksum", LAST_TICK)}
        if self.semiring is not None:
            body[FINGERPRINT] = self.fingerprint
        verify = self.guard.verify if self.guard is not None else None
        write_manifest(self.root, body, verify)  # a view that lost its hold never commits
        self._body = body
        self.tick = int(body["tick"])
        journal = body.get("journal")
        keep = {Path(rel).parts[0] for rel in body["files"]}
        self.collect_garbage(keep | ({Path(journal).parts[0]} if journal else set()), journal)
        if self.guard is not None:
            self.guard.committed(body.get("tick"))

    def save(
        self, parts: Mapping[str, Part], head: dict[str, Any], written: dict[str, Any]
    ) -> dict[str, Any]:
        """Commit ``parts`` with the manifest fields ``head`` (which holds ``tick``).

        A part's base is written when it changed since ``written`` (what the last
        commit wrote, as this method returns it) or when its committed files are
        missing or of another size (then with a warning: it is written again from
        memory, nothing is lost); its overrides when they changed.  The files go to a
        new tick folder, then the manifest is replaced atomically (:meth:`commit`).
        On any error the new folder is removed and nothing is committed.

        Returns
        -------
        dict
            What this commit wrote, for the next call.
        """
        folder = self.new_folder(int(head["tick"]))
        done: dict[str, Any] = {}
        try:
            for name, part in parts.items():
                entry = dict(written.get(name, {}))
                if entry.get("token") is not part.base_token or self._lost(
                    entry["base_files"], folder
                ):
                    path = folder / f"{name}.base.parquet"
                    files = part.write_base(self, path)
                    base = str(path.relative_to(self.root))
                    entry = {"token": part.base_token, "base": base, "base_files": files}
                over = part.over
                if over.rows and (
                    entry.get("over_token") is not over or self._lost(entry["over_files"], folder)
                ):
                    rel, rec = self.write_table(over, folder / f"{name}.over.parquet")
                    entry.update(over_token=over, over=rel, over_files={rel: rec})
                elif not over.rows:
                    entry.update(over_token=None, over=None, over_files={})
                entry["rows"] = part.rows
                entry["current"] = part
                done[name] = entry
            files: dict[str, Any] = {}
            for e in done.values():
                files |= e["base_files"] | e["over_files"]
            entries = {
                p: {"base": e["base"], "over": e["over"], "rows": e["rows"]}
                for p, e in done.items()
            }
            journal = Journal.create(folder / JOURNAL)
            rel = str(journal.path.relative_to(self.root))
            self.commit(
                {"format": FORMAT, **head, "parts": entries, "files": files, "journal": rel}
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if self.journal is not None:
            self.journal.close()
        self.journal = journal
        self._head, self._files = view_fields(head), None
        return done

    def intend(
        self, tick: int, batch_id: int | None, deltas: Mapping[str, Delta]
    ) -> Pending | None:
        """Append tick ``tick``'s intent (its deltas) after any frame the reopen owes
        (:meth:`owe`), the hold verified, and start its sync
        (:meth:`incremental.journal.Journal.intend`); None when the tick is a checkpoint."""
        if self.journal is None or self._owed == b"":
            return None
        verify = self.guard.verify if self.guard is not None else None
        if self._owed is not None:
            self.journal.append(self._owed, verify, sync=False)
            self._owed, verify = None, None
        return self.journal.intend(encode_intent(tick, batch_id, deltas), verify)

    def owe(
        self, parts: Mapping[str, Part], head: dict[str, Any], written: dict[str, Any]
    ) -> dict[str, Any]:
        """Commit tick ``head["tick"]`` (applied again on reopen from an intent without its
        commit frame) in memory only, so a reopen writes nothing: its frame goes before the
        next intent (:meth:`intend`), or the next tick is a checkpoint.  Returns what
        :meth:`save_tick` returns."""
        frame = self._frame(parts, head, written)
        self.tick = int(head["tick"])
        if frame is None or self.journal is None:
            self._owed = b""  # the next tick: a checkpoint, with no intent
            return written
        self._owed = frame
        return _current(parts, written)

    def save_tick(
        self,
        parts: Mapping[str, Part],
        head: dict[str, Any],
        written: dict[str, Any],
        pending: Pending | None = None,
    ) -> dict[str, Any]:
        """Commit tick ``head["tick"]``: one frame appended to the journal when every part
        says what changed since the last commit, the checkpoint's files look intact
        (:meth:`intact`) and the journal stays under the ``journal_bytes`` and
        ``journal_ticks`` settings; otherwise a checkpoint (:meth:`save`, which starts
        a new journal).  After the tick's intent (``pending``) the frame is not synced
        on its own: the tick is durable once the intent's sync is done, which this
        waits for.  Returns what :meth:`save` returns.
        """
        frame = self._frame(parts, head, written) if self._owed != b"" else None
        if frame is not None and self.journal is not None and self.intact(written):
            st = settings()
            if (
                self.journal.frames < st.journal_ticks
                and self.journal.end + len(frame) <= st.journal_bytes
            ):
                verify = self.guard.verify if self.guard is not None and pending is None else None
                self.journal.append(frame, verify, sync=pending is None)
                if pending is not None:
                    pending.wait()
                self.tick = int(head["tick"])
                if self.guard is not None:
                    self.guard.committed(int(head["tick"]), st.lease_seconds)
                return _current(parts, written)
        if pending is not None:
            pending.wait()  # the checkpoint commits the tick; its intent must not fail later
        done = self.save(parts, head, written)
        self._owed = None
        return done

    def _frame(
        self, parts: Mapping[str, Part], head: dict[str, Any], written: dict[str, Any]
    ) -> bytes | None:
        """Tick ``head["tick"]``'s commit frame (what changed since the last commit); None
        when it needs a checkpoint: new view fields, or a part cannot say (:meth:`changes`)."""
        changes = self.changes(parts, written) if view_fields(head) == self._head else None
        return None if changes is None else encode(int(head["tick"]), head.get("batch_id"), changes)

    def intact(self, written: dict[str, Any]) -> bool:
        """Whether every file of the last checkpoint looks intact by a cheap ``stat`` (a
        checkpoint writes a missing or damaged one again, see :meth:`save`)."""
        if self._files is None:  # the same files until the next checkpoint
            root = str(self.root)
            self._files = [
                (os.path.join(root, rel), rec["bytes"])
                for e in written.values()
                for rel, rec in (e["base_files"] | e["over_files"]).items()
            ]
        try:
            return all(os.stat(p).st_size == n for p, n in self._files)
        except OSError:
            return False

    @staticmethod
    def changes(
        parts: Mapping[str, Part], written: dict[str, Any]
    ) -> dict[str, tuple[tuple[Table, ...], int]] | None:
        """Per part changed since the last commit, the tables replaced in it and its rows;
        None when a part cannot say (it was rebuilt, or is of a kind that keeps no
        changes): then the tick needs a checkpoint."""
        out = {}
        for name, part in parts.items():
            entry = written.get(name)
            if entry is None or "current" not in entry:
                return None
            before = entry["current"]
            if part.token == before.token:
                continue
            if part.origin is None or part.origin != before.token:
                return None
            out[name] = (part.changes, part.rows)
        if set(written) != set(parts):
            return None
        return out

    def open_journal(self, m: dict[str, Any]) -> tuple[list[Frame], Intent | None]:
        """The frames committed after the checkpoint ``m`` (a verified manifest) and the
        pending intent after them (:func:`incremental.journal.read_journal`), with the
        journal opened for the next append, after the intent (none before journals: the
        next tick is a checkpoint); the view owes (:meth:`owe`) or drops the intent.

        Raises
        ------
        StateError
            Besides a damaged journal: one that ends before the last tick the view
            committed before it was closed (:func:`incremental.manifest.check_last_tick`),
            unless this store accepts lost ticks (``if_ticks_lost="accept"``: then the
            view resumes at the last tick the journal holds, with a warning).
        """
        self.tick = int(m["tick"])
        rel = m.get("journal")
        if rel is None:
            return [], None
        path = self.root / rel
        if not path.is_file():
            raise StateError(
                f"{path}: the journal {JOURNAL!r} of the committed state is missing (the "
                "ticks committed since the last checkpoint are lost)"
            )
        frames, end, intent = read_journal(path, int(m["tick"]), m.get(LAST_TICK))
        if frames:
            self.tick = frames[-1].tick
        reach = self.tick if intent is None else intent.tick
        if check_last_tick(path, m, reach, self.if_ticks_lost == "accept"):
            self._accepted = reach
        self.journal = Journal(path, end if intent is None else intent.end, len(frames))
        self._head, self._files = view_fields(m), None
        return frames, intent

    def drop_intent(self, intent: Intent) -> None:
        """Forget a pending intent: the next append cuts it (and what follows it) off."""
        if self.journal is not None:
            self.journal.drop_after(intent.offset)

    @staticmethod
    def written(
        manifest: dict[str, Any],
        parts: Mapping[str, Part],
        current: Mapping[str, Part] | None = None,
    ) -> dict[str, Any]:
        """What the commit of ``manifest`` wrote, as :meth:`save` returns it, for ``parts``
        read from it (so the next commit rewrites nothing that did not change), with the
        parts after the journal's ticks (``current``, default ``parts``)."""
        current = parts if current is None else current
        files = manifest["files"]

        def under(rel: str | None) -> dict[str, Any]:
            if rel is None:
                return {}
            return {f: r for f, r in files.items() if f == rel or f.startswith(rel + "/")}

        out = {}
        for name, e in manifest["parts"].items():
            part = parts[name]
            out[name] = {
                "token": part.base_token,
                "base": e["base"],
                "base_files": under(e["base"]),
                "over_token": part.over if e.get("over") else None,
                "over": e.get("over"),
                "over_files": under(e.get("over")),
                "rows": e["rows"],
                "current": current[name],
            }
        return out

    def _lost(self, files: dict[str, Any], folder: Path) -> bool:
        """Whether a committed file that the new commit would keep is missing or of another
        size (a warning says it is written again into ``folder``)."""
        for rel, rec in sorted(files.items()):
            problem = self.damaged(rel, rec)
            if problem is not None:
                log.warning(
                    "state_dir %s: file %s of the committed state %s; written again from "
                    "memory into %s (nothing is lost)",
                    self.root,
                    rel,
                    problem,
                    folder.name,
                )
                return True
        return False

    def damaged(self, rel: str, record: dict[str, Any]) -> str | None:
        """How the committed file ``rel`` differs from its ``record`` by a cheap ``stat``
        (missing, or another size), or None when it looks intact."""
        f = self.root / rel
        try:
            size = f.stat().st_size
        except FileNotFoundError:
            return "is missing"
        except OSError as exc:
            return f"cannot be read ({exc})"
        if size != record["bytes"]:
            return f"has {size} bytes, the commit wrote {record['bytes']}"
        return None

    def collect_garbage(self, keep: set[str], journal: str | None = None) -> None:
        """Remove tick folders not in ``keep``, journals but ``journal`` and stale
        temporary manifests."""
        for p in self.root.glob("tick-*"):
            if p.is_dir() and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        for p in self.root.glob(f"tick-*/{JOURNAL}"):
            if str(p.relative_to(self.root)) != journal:
                p.unlink(missing_ok=True)
        for p in self.root.glob(f".{MANIFEST}.*.tmp"):
            p.unlink(missing_ok=True)


def _current(parts: Mapping[str, Part], written: dict[str, Any]) -> dict[str, Any]:
    return {n: {**e, "current": parts[n]} for n, e in written.items()}  # after the tick


def _arrow(a: np.ndarray) -> Any:
    import pyarrow as pa

    if a.dtype == object:
        return pa.array(a.tolist())
    return pa.array(a)


def _numpy(col: Any) -> np.ndarray:
    a = col.to_numpy(zero_copy_only=False)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    return a
