"""A view's folder on disk: checkpoints with a verified, atomic manifest, and a journal.

Layout of ``state_dir``::

    manifest.json                 the last checkpoint (replaced atomically)
    tick-00000012-1a2b3c4d/       files written by the checkpoint of tick 12
        rel-E.base.parquet        a relation's rows as of its last rewrite
        rel-E.over.parquet        the rows changed since (small)
        out.over.parquet          ...
        journal.bin               the ticks committed since (13, 14, ...)

A tick is one transaction (:mod:`incremental.commit`): :meth:`Store.begin` appends
its intent (the deltas, :meth:`Store.intend`) to the journal
(:mod:`incremental.journal`) and starts its sync, after the folder's lock confirmed
the hold (``Guard.verify``); the view computes the next state; then
:meth:`incremental.commit.Commit.complete` has :meth:`Store.save_tick` append the
tick's commit frame (per changed part, the tables the tick replaced in it,
checksummed) and wait for the intent's sync, or
:meth:`incremental.commit.Commit.abort` takes the intent back.  When the journal
holds the ``journal_ticks`` setting's ticks or would pass ``journal_bytes``, when a
part cannot say what it changed, or when a file of the checkpoint is missing, the
tick is a *checkpoint* instead (:meth:`Store.save`): the store writes the tables
each part hands it (its base, a driver table or a Spark DataFrame, and its
overrides), a new empty journal, then the manifest to a temporary file (flushed to
disk) renamed over the old one (``os.replace`` is atomic), then the tick folders and
journals no longer named are removed.  The store keeps its bookkeeping (what the
last checkpoint wrote, the parts as of the last commit, what a reopen owes) as one
frozen :class:`incremental.commit.Book`, replaced only once a commit is done.

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
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from faq import VALUE, settings
from faq.kernel import KeyedTable, Table
from incremental.commit import Book, Clear, Commit, OweCheckpoint, OweFrame, Written
from incremental.fingerprint import FINGERPRINT, builtin, semiring_fingerprint
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
from incremental.journal import replay as replay_frames
from incremental.manifest import (
    FORMAT,
    LAST_TICK,
    MANIFEST,
    ViewId,
    check_last_tick,
    check_view,
    file_problem,
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
    from incremental.deltas import Rows
    from incremental.protocol import Part, ViewState

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
    view : ViewId, optional
        The view the folder holds: recorded in every manifest this store writes, and
        compared with the folder's on reopen (:meth:`read_view`).  Needed to commit ticks.

    Attributes
    ----------
    tick : int or None
        The last tick committed (None: none read or written).
    book : incremental.commit.Book
        The store's bookkeeping, replaced once a commit is done.
    """

    def __init__(
        self,
        root: Path,
        semiring: Semiring | None = None,
        guard: Guard | None = None,
        if_ticks_lost: str = "error",
        view: ViewId | None = None,
    ) -> None:
        self.root = Path(root)  # made (or refused, by name) by the view's FolderLock first
        self.root.mkdir(parents=True, exist_ok=True)
        self.semiring = semiring
        self.guard = guard
        self.if_ticks_lost = if_ticks_lost
        self.view = view
        self.tick: int | None = None
        self.book = Book()
        self._body: dict[str, Any] | None = None  # the manifest on disk, without its checksum
        self._live = False  # opened(): the view opened, so close() records its last tick
        self._accepted: int | None = None  # the tick a view accepting lost ticks resumes at
        self.fingerprint = (
            None if semiring is None or builtin(semiring) else (semiring_fingerprint(semiring))
        )
        self.journal: Journal | None = None

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

    def read_view(self) -> dict[str, Any]:
        """The manifest (:meth:`read`), refused unless it is of this store's view
        (:func:`incremental.manifest.check_view`: format, rule, semiring and its
        fingerprint, set relations)."""
        assert self.view is not None, "a store without its view reads no view"
        m = self.read()
        check_view(self.root, m, self.view, self.semiring, self.fingerprint)
        return m

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

    # -- one tick's commit --------------------------------------------------------------------
    def begin(self, tick: int, batch_id: int | None, deltas: Mapping[str, Rows]) -> Commit:
        """Begin committing tick ``tick``: its intent (``deltas``, the rows the view read)
        appended to the journal and its sync started (:meth:`intend`).  The view computes
        the tick, then completes the commit (:meth:`incremental.commit.Commit.complete`)
        or aborts it."""
        t0, book = time.perf_counter(), self.book
        given = {n: (r.cols, r.values, r.weights) for n, r in deltas.items()}
        pending = self.intend(tick, batch_id, given)
        return Commit(self, tick, batch_id, pending, time.perf_counter() - t0, book)

    def take_back(self, pending: Pending | None, book: Book) -> None:
        """Abort a tick (:meth:`incremental.commit.Commit.abort`): its intent and what was
        written with it cut off the journal (:meth:`incremental.journal.Pending.abort`),
        and ``book``, the bookkeeping of before it began, kept again."""
        if pending is not None:
            pending.abort()
        self.book = book

    def intend(
        self, tick: int, batch_id: int | None, deltas: Mapping[str, Delta]
    ) -> Pending | None:
        """Append tick ``tick``'s intent (its deltas) after any frame the reopen owes
        (:meth:`owe`), the hold verified, and start its sync
        (:meth:`incremental.journal.Journal.intend`); None when the tick is a checkpoint."""
        debt = self.book.debt
        if self.journal is None or isinstance(debt, OweCheckpoint):
            return None
        verify = self.guard.verify if self.guard is not None else None
        book, journal = self.book, self.journal
        end, frames = journal.end, journal.frames
        if isinstance(debt, OweFrame):  # the reopened tick's frame, before the intent
            journal.append(debt.frame, verify, sync=False)
            self.book, verify = replace(book, debt=Clear()), None
        try:
            pending = journal.intend(encode_intent(tick, batch_id, deltas), verify)
        except BaseException:  # nothing written: the frame owed is owed again
            journal.cut_back(end)
            journal.frames, self.book = frames, book
            raise
        pending.before, pending.frames = end, frames  # taken back with the intent
        return pending

    def save_tick(
        self, state: ViewState, tick: int, batch_id: int | None, pending: Pending | None = None
    ) -> None:
        """Commit ``state`` as tick ``tick``: one frame appended to the journal when every
        part says what changed since the last commit (:meth:`Book.changes`), the
        checkpoint's files look intact (:meth:`Book.intact`) and the journal stays under
        the ``journal_bytes`` and ``journal_ticks`` settings; otherwise a checkpoint
        (:meth:`save`, which starts a new journal).  After the tick's intent
        (``pending``) the frame is not synced on its own: the tick is durable once the
        intent's sync is done, which this waits for.  The bookkeeping is replaced only
        when the tick is committed.
        """
        parts, head = state.parts(), self.head(state, tick, batch_id)
        book = self.book
        owed = isinstance(book.debt, OweCheckpoint)
        frame = None if owed else self._frame(parts, head)
        if frame is not None and self.journal is not None and book.intact(str(self.root)):
            st = settings()
            if (
                self.journal.frames < st.journal_ticks
                and self.journal.end + len(frame) <= st.journal_bytes
            ):
                verify = self.guard.verify if self.guard is not None and pending is None else None
                self.journal.append(frame, verify, sync=pending is None)
                if pending is not None:
                    pending.wait()
                self.tick = tick
                self.book = replace(book, current=dict(parts))
                if self.guard is not None:
                    self.guard.committed(tick, st.lease_seconds)
                return
        if pending is not None:
            pending.wait()  # the checkpoint commits the tick; its intent must not fail later
        self.save(parts, head)

    def owe(self, state: ViewState, tick: int, batch_id: int | None) -> None:
        """Commit ``state`` as tick ``tick`` (applied again on reopen from an intent without
        its commit frame) in memory only, so a reopen writes nothing: its frame goes before
        the next intent (:meth:`intend`), or the next tick is a checkpoint."""
        parts = state.parts()
        frame = self._frame(parts, self.head(state, tick, batch_id))
        self.tick = tick
        if frame is None or self.journal is None:
            self.book = replace(self.book, debt=OweCheckpoint())  # with no intent
        else:
            self.book = replace(self.book, current=dict(parts), debt=OweFrame(frame))

    def head(self, state: ViewState, tick: int, batch_id: int | None) -> dict[str, Any]:
        """The manifest fields of ``state`` at tick ``tick`` (besides its parts): where it
        lives, the view (:class:`incremental.manifest.ViewId`), the tick and what the state
        describes (:meth:`incremental.protocol.ViewState.describe`)."""
        assert self.view is not None, "a store without its view commits no tick"
        return {
            "state": state.where,
            **self.view.fields(),
            "tick": tick,
            "batch_id": batch_id,
            **state.describe(),
        }

    def _frame(self, parts: Mapping[str, Part], head: dict[str, Any]) -> bytes | None:
        """Tick ``head["tick"]``'s commit frame (what changed since the last commit); None
        when it needs a checkpoint: new view fields, or a part cannot say."""
        book = self.book
        changes = book.changes(parts) if view_fields(head) == book.head else None
        return None if changes is None else encode(int(head["tick"]), head.get("batch_id"), changes)

    # -- writing ------------------------------------------------------------------------------
    def save(self, parts: Mapping[str, Part], head: dict[str, Any]) -> None:
        """Commit ``parts`` as a checkpoint with the manifest fields ``head`` (which holds
        ``tick``).

        A part's base is written when it is another than the last commit wrote
        (:class:`incremental.commit.Written`) or when its committed files are missing or
        of another size (then with a warning: it is written again from memory, nothing
        is lost); its overrides when they changed.  The files go to a new tick folder,
        then the manifest is replaced atomically (:meth:`commit`).  On any error the new
        folder is removed and nothing is committed (the bookkeeping unchanged).
        """
        folder = self.new_folder(int(head["tick"]))
        done: dict[str, Written] = {}
        try:
            for name, part in parts.items():
                w = self.book.written.get(name)
                if w is None or w.base_token is not part.base or self._lost(w.base_files, folder):
                    path = folder / f"{name}.base.parquet"
                    w = Written(part.base, self._rel(path), self.write_base(part.base, path))
                over = part.over
                if over.rows and (w.over_token is not over or self._lost(w.over_files, folder)):
                    rel, rec = self.write_table(over, folder / f"{name}.over.parquet")
                    w = replace(w, over_token=over, over=rel, over_files={rel: rec})
                elif not over.rows:
                    w = replace(w, over_token=None, over=None, over_files={})
                done[name] = replace(w, rows=part.rows)
            files: dict[str, Any] = {}
            for w in done.values():
                files |= w.files
            entries = {p: w.entry() for p, w in done.items()}
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
        self.book = Book(done, dict(parts), view_fields(head), Clear())

    def new_folder(self, tick: int) -> Path:
        """A fresh folder for the files of ``tick``."""
        folder = self.root / f"tick-{tick:08d}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        return folder

    def write_base(self, base: Any, path: Path) -> dict[str, dict[str, Any]]:
        """Write a part's base (:attr:`incremental.protocol.Part.base`) at ``path``: a
        driver table as one Parquet file, a Spark DataFrame (key columns, then the
        annotation) as a Parquet folder of columns ``c0``, ``c1``, ..., ``value``; the
        records of the files written."""
        if isinstance(base, Table):
            rel, rec = self.write_table(base, path)
            return {rel: rec}
        names = [*(f"c{i}" for i in range(len(base.columns) - 1)), VALUE]
        base.toDF(*names).write.mode("error").parquet(str(path))
        return self.record_tree(path)

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

    # -- reopening ----------------------------------------------------------------------------
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
        self.book = Book(head=view_fields(m))
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
        return frames, intent

    def replay(
        self, manifest: dict[str, Any], parts: Mapping[str, Part], frames: Sequence[Frame]
    ) -> dict[str, Any]:
        """``parts`` as read from the checkpoint ``manifest`` with the journal's ``frames``
        replayed on them (:func:`incremental.journal.replay`); the store records what the
        checkpoint wrote of them, so the next commit rewrites nothing that did not change
        and journals what changed since the replayed parts.  A state's ``restore``
        hands its parts to the store here."""
        path = self.journal.path if self.journal is not None else self.root
        current = replay_frames(dict(parts), frames, path)
        files = manifest["files"]

        def under(rel: str | None) -> dict[str, Any]:
            if rel is None:
                return {}
            return {f: r for f, r in files.items() if f == rel or f.startswith(rel + "/")}

        written = {}
        for name, e in manifest["parts"].items():
            part, over = parts[name], e.get("over")
            written[name] = Written(
                part.base,
                e["base"],
                under(e["base"]),
                part.over if over else None,
                over,
                under(over),
                int(e["rows"]),
            )
        self.book = Book(written, current, view_fields(manifest), Clear())
        return current

    def drop_intent(self, intent: Intent) -> None:
        """Forget a pending intent: the next append cuts it (and what follows it) off."""
        if self.journal is not None:
            self.journal.drop_after(intent.offset)

    def _lost(self, files: Mapping[str, Any], folder: Path) -> bool:
        """Whether a committed file that the new commit would keep is missing or of another
        size (a warning says it is written again into ``folder``)."""
        for rel, rec in sorted(files.items()):
            problem = file_problem(self.root, rel, rec)
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
