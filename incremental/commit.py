"""A tick's commit as one transaction, and the store's bookkeeping between commits.

A durable view commits a tick in three moves, all through its store
(:class:`incremental.store.Store`)::

    commit = store.begin(tick, batch_id, deltas)   # the intent, synced while the tick runs
    new, change = state.apply(deltas, ...)         # nothing written
    commit.complete(new)                           # a commit frame, or a checkpoint
    # on any error instead: commit.abort()         # the intent taken back

:meth:`Commit.complete` decides *journal or checkpoint* (:meth:`Store.save_tick`) and
writes the manifest when it checkpoints; :meth:`Commit.abort` takes the intent back,
and the folder and the store's bookkeeping are then as they were before ``begin``.  A
view without a ``state_dir`` commits through :data:`VOLATILE`, which writes nothing.

The store's bookkeeping is one frozen record, :class:`Book`: what the last checkpoint
wrote per part (:class:`Written`), the parts as of the last commit (so that the next
commit frame holds what changed since, :meth:`Book.changes`), the view fields of the
last checkpoint, and what a reopen owes the folder (:data:`Debt`).  Only the store
replaces it, and only once a commit is done.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from faq.kernel import Table
    from incremental.journal import Pending
    from incremental.protocol import Part, ViewState

__all__ = [
    "VOLATILE",
    "Book",
    "Clear",
    "Commit",
    "Debt",
    "OweCheckpoint",
    "OweFrame",
    "Saver",
    "Volatile",
    "Written",
]

FileRecords = Mapping[str, Mapping[str, Any]]
"""Manifest records of written files: relative path → ``{"bytes", "sha256"}``."""


@dataclass(frozen=True)
class Written:
    """What the last checkpoint wrote for one part.

    Attributes
    ----------
    base_token : object
        The part's base when it was written (:attr:`incremental.protocol.Part.base`):
        a later commit writes the base again only when the part holds another one.
    base : str
        The base's path, relative to the folder.
    base_files : dict
        The records of the base's files (one Parquet file, or a folder's files).
    over_token : object or None
        The part's overrides when they were written (None: there were none).
    over : str or None
        The overrides' path (None: none written).
    over_files : dict
        The records of the overrides' file.
    rows : int
        The part's rows at the checkpoint.
    """

    base_token: object
    base: str
    base_files: FileRecords
    over_token: object | None = None
    over: str | None = None
    over_files: FileRecords = field(default_factory=dict)
    rows: int = 0

    @property
    def files(self) -> dict[str, Mapping[str, Any]]:
        """Every file record of the part."""
        return {**self.base_files, **self.over_files}

    def entry(self) -> dict[str, Any]:
        """The part's manifest entry."""
        return {"base": self.base, "over": self.over, "rows": self.rows}


@dataclass(frozen=True)
class Clear:
    """A reopen owes the folder nothing: the next tick commits as usual."""


@dataclass(frozen=True)
class OweFrame:
    """A reopen applied a tick again from its intent: its commit ``frame`` goes into the
    journal before the next tick's intent."""

    frame: bytes


@dataclass(frozen=True)
class OweCheckpoint:
    """A reopen applied a tick again that no frame can describe: the next tick is a
    checkpoint (with no intent)."""


Debt = Clear | OweFrame | OweCheckpoint
"""What a reopen owes the folder before the next tick (:meth:`Store.owe`)."""


@dataclass(frozen=True)
class Book:
    """A store's bookkeeping between commits (replaced whole, never changed).

    Attributes
    ----------
    written : dict of str to Written
        What the last checkpoint wrote, per part.
    current : dict of str to Part
        The parts as of the last commit; empty when not known (the next tick is a
        checkpoint).
    head : dict or None
        The view fields of the last checkpoint (:func:`incremental.manifest.view_fields`):
        a tick whose fields differ (a Spark state's key types chosen) is a checkpoint.
    debt : Debt
        What a reopen owes the folder.
    """

    written: Mapping[str, Written] = field(default_factory=dict)
    current: Mapping[str, Part] = field(default_factory=dict)
    head: Mapping[str, Any] | None = None
    debt: Debt = Clear()

    @functools.cached_property
    def sizes(self) -> tuple[tuple[str, int], ...]:
        """Relative path and size of every file of the last checkpoint."""
        return tuple(
            (rel, int(rec["bytes"])) for w in self.written.values() for rel, rec in w.files.items()
        )

    def intact(self, root: str) -> bool:
        """Whether every file of the last checkpoint (under the folder ``root``) looks
        intact by a cheap ``stat``: there, of the size written."""
        try:
            return all(os.stat(os.path.join(root, p)).st_size == n for p, n in self.sizes)
        except OSError:
            return False

    def changes(self, parts: Mapping[str, Part]) -> dict[str, tuple[tuple[Table, ...], int]] | None:
        """Per part changed since the last commit, the tables replaced in it and its rows;
        None when a part cannot say (it was rebuilt, or is of a kind that keeps no
        changes) or the parts are others: then the tick needs a checkpoint."""
        if not self.current or set(self.current) != set(parts):
            return None
        out = {}
        for name, part in parts.items():
            before = self.current[name]
            if part.token == before.token:
                continue
            if part.origin is None or part.origin != before.token:
                return None
            out[name] = (part.changes, part.rows)
        return out


class Saver(Protocol):
    """What a :class:`Commit` asks of its store (:class:`incremental.store.Store`)."""

    def save_tick(
        self, state: ViewState, tick: int, batch_id: int | None, pending: Pending | None
    ) -> None: ...
    def take_back(self, pending: Pending | None, book: Book) -> None: ...


class Commit:
    """One tick's commit, begun by :meth:`incremental.store.Store.begin`: completed by
    :meth:`complete` once the tick's next state is computed, or taken back by
    :meth:`abort`.

    Attributes
    ----------
    tick : int
        The tick being committed.
    batch_id : int or None
        Its batch id (the last one committed when the step had none).
    seconds : float
        Time spent making the tick durable so far (its intent; then its frame or
        checkpoint, and the wait for the intent's sync).
    book : Book
        The store's bookkeeping before ``begin``, which :meth:`abort` gives it back.
    """

    def __init__(
        self,
        store: Saver,
        tick: int,
        batch_id: int | None,
        pending: Pending | None,
        seconds: float,
        book: Book,
    ) -> None:
        self.store = store
        self.tick = tick
        self.batch_id = batch_id
        self.pending = pending
        self.seconds = seconds
        self.book = book
        self.done = False

    def complete(self, state: ViewState) -> None:
        """Commit ``state`` as the tick: its commit frame in the journal after the intent,
        or a checkpoint (:meth:`incremental.store.Store.save_tick` decides); durable when
        this returns.  On an error nothing is committed (call :meth:`abort`)."""
        t0 = time.perf_counter()
        try:
            self.store.save_tick(state, self.tick, self.batch_id, self.pending)
        finally:
            self.seconds += time.perf_counter() - t0
        self.done = True

    def abort(self) -> None:
        """Take the tick back: its intent, and what ``begin`` wrote before it (a frame a
        reopen owed) and whatever followed it, are cut off the journal, and the store
        has its bookkeeping of before ``begin`` again
        (:meth:`incremental.store.Store.take_back`).  Nothing to do after
        :meth:`complete` returned."""
        if not self.done:
            self.store.take_back(self.pending, self.book)


class Volatile:
    """The commit of a view without a ``state_dir``: nothing is written."""

    seconds = 0.0

    def complete(self, state: ViewState) -> None:
        """Nothing to write."""

    def abort(self) -> None:
        """Nothing to take back."""


VOLATILE = Volatile()
"""The commit of every tick of a view without a ``state_dir``."""
