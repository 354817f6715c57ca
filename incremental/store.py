"""A view's folder on disk: Parquet files per tick and a verified, atomic manifest.

Layout of ``state_dir``::

    manifest.json                 the last commit (replaced atomically)
    tick-00000012-1a2b3c4d/       files written by tick 12
        rel-E.base.parquet        a relation's rows as of its last rewrite
        rel-E.over.parquet        the rows changed since (small)
        out.over.parquet          ...

The manifest names every file the state is made of, with its size and
SHA-256, plus a SHA-256 of the manifest itself.  Reopening checks all of them
before anything is read and refuses damaged state with :class:`StateError`
naming the file: a truncated, changed or missing file, an edited manifest, or
a folder that holds tick data but no manifest.  A commit writes its files,
then the manifest to a temporary file (flushed to disk) renamed over the old
one (``os.replace`` is atomic), then removes the tick folders no longer named.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from faq.kernel import KeyedTable, Table
from semirings import Semiring
from semirings.local import LocalOps

if TYPE_CHECKING:  # pragma: no cover
    from incremental.protocol import Part

__all__ = ["FINGERPRINT", "FORMAT", "MANIFEST", "StateError", "Store", "semiring_fingerprint"]

log = logging.getLogger("faq.incremental")

MANIFEST = "manifest.json"
"""Name of the manifest file in a view's ``state_dir``."""


FORMAT = 2
"""The manifest format, one for both states: ``parts`` names, per part, its base, its
overrides and its rows (see :meth:`Store.save`)."""


class StateError(ValueError):
    """A view's ``state_dir`` is damaged or is not a view's folder; the message names the file."""


class Guard(Protocol):
    """What a :class:`Store` asks of the hold on its folder (``incremental.lock.FolderLock``)."""

    def check(self) -> None: ...
    def claim(self) -> None: ...
    def verify(self) -> None: ...
    def committed(self, tick: int | None) -> None: ...
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
        The hold on the folder: checked before every manifest rename (a view
        that lost it commits nothing) and told of every commit.
    """

    def __init__(
        self, root: Path, semiring: Semiring | None = None, guard: Guard | None = None
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.semiring = semiring
        self.guard = guard
        self.fingerprint = (
            None if semiring is None or builtin(semiring) else (semiring_fingerprint(semiring))
        )

    def check(self) -> None:
        """Raise :class:`StateError` (a LockError) when this view may not change the folder."""
        if self.guard is not None:
            self.guard.check()

    def close(self) -> None:
        """Give the folder up (the lock and the lease; idempotent)."""
        if self.guard is not None:
            self.guard.release()

    def exists(self) -> bool:
        """True when the folder holds a committed view (refuses tick data without a manifest)."""
        if (self.root / MANIFEST).is_file():
            return True
        ticks = sorted(p.name for p in self.root.glob("tick-*"))
        if ticks:
            raise StateError(
                f"state_dir {str(self.root)!r} holds tick data ({', '.join(ticks[:3])}"
                f"{', …' if len(ticks) > 3 else ''}) but no {MANIFEST}: the manifest was "
                "deleted or lost, so the state cannot be trusted; restore it or use an empty folder"
            )
        return False

    # -- reading ------------------------------------------------------------------------------
    def read(self) -> dict[str, Any]:
        """The manifest, after checking it and every file it names (no file is changed)."""
        path = self.root / MANIFEST
        try:
            text = path.read_text(encoding="utf-8")
            m = json.loads(text)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StateError(f"{path}: {MANIFEST} is not a readable view manifest ({exc})") from exc
        if not isinstance(m, dict) or "checksum" not in m or "files" not in m:
            raise StateError(
                f"{path}: {MANIFEST} is not a view manifest of this version (no checksum or "
                "file list)"
            )
        body = {k: v for k, v in m.items() if k != "checksum"}
        if _digest(body) != m["checksum"]:
            raise StateError(
                f"{path}: {MANIFEST} does not match its own checksum: it was edited or damaged"
            )
        for rel, want in sorted(m["files"].items()):
            f = self.root / rel
            if not f.is_file():
                raise StateError(f"{f}: file {f.name!r} of the committed state is missing")
            size = f.stat().st_size
            if size != want["bytes"]:
                raise StateError(
                    f"{f}: file {f.name!r} has {size} bytes, the commit wrote {want['bytes']} "
                    "(truncated or damaged)"
                )
            if _sha256(f) != want["sha256"]:
                raise StateError(
                    f"{f}: file {f.name!r} does not match its SHA-256 checksum (damaged)"
                )
        return m

    def check_semiring(self, m: dict[str, Any]) -> None:
        """Refuse a manifest written with another definition of this store's semiring.

        Built-in semirings are identified by name (compared by the view); a user
        semiring by its fingerprint.  A manifest written before fingerprints were
        recorded is accepted, with a warning, for a user semiring.

        Raises
        ------
        ValueError
            Naming which of zero, one, add, mul, neg differs, with both values.
        """
        S = self.semiring
        if S is None:
            return
        where = f"state_dir {str(self.root)!r}"
        if FINGERPRINT not in m:
            if self.fingerprint is not None:
                log.warning(
                    "%s was written before semiring fingerprints were recorded: its user "
                    "semiring %r is identified by its name only",
                    where,
                    S.name,
                )
            return
        stored = m[FINGERPRINT]
        if stored is None and self.fingerprint is None:
            return
        if stored is None:
            raise ValueError(
                f"{where} holds a view over the built-in semiring {S.name!r}, not over a "
                "user semiring of the same name"
            )
        differences = semiring_differences(stored, semiring_fingerprint(S))
        if differences:
            raise ValueError(
                f"{where} holds a view over a semiring {S.name!r} defined differently: "
                + "; ".join(differences)
                + ". Reopen it with the semiring it was written with, or use another folder"
            )

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
        return str(path.relative_to(self.root)), {
            "bytes": path.stat().st_size,
            "sha256": _sha256(path),
        }

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
        body = {k: v for k, v in manifest.items() if k != "checksum"}
        if self.semiring is not None:
            body[FINGERPRINT] = self.fingerprint
        full = {**body, "checksum": _digest(body)}
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex[:8]}.tmp"
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(full, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            if self.guard is not None:  # a view that lost its hold never commits
                self.guard.verify()
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.root / MANIFEST)
        with contextlib.suppress(OSError):  # make the rename itself durable where supported
            fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.collect_garbage({Path(rel).parts[0] for rel in body["files"]})
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
                done[name] = entry
            files: dict[str, Any] = {}
            for e in done.values():
                files |= e["base_files"] | e["over_files"]
            entries = {
                p: {"base": e["base"], "over": e["over"], "rows": e["rows"]}
                for p, e in done.items()
            }
            self.commit({"format": FORMAT, **head, "parts": entries, "files": files})
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if folder.exists() and not any(folder.iterdir()):  # the commit may have removed it
            folder.rmdir()
        return done

    def upgraded(self, m: dict[str, Any], additive: bool) -> dict[str, Any]:
        """A manifest of the Spark state's old format (``relations`` and ``output``, one
        Parquet folder each) in the one format (``parts``), when its semiring was kept
        ``additive`` (rings, counting: the stored annotations are what the old state
        stored); a manifest of the one format as it is.

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
                f"{self.root / MANIFEST}: a manifest of the Spark state's old format (format 2 "
                "with 'relations' and 'output'), over a semiring whose old Spark state kept "
                "only ⊕-ed annotations (no rows or counts, so retractions cannot be "
                "maintained); rebuild the view from its relations"
            )
        parts = {
            f"rel-{n}": {"base": f"{r['folder']}/rel-{n}.parquet", "over": None, "rows": r["rows"]}
            for n, r in m["relations"].items()
        }
        out = m["output"]
        parts["out"] = {
            "base": f"{out['folder']}/output.parquet",
            "over": None,
            "rows": out["rows"],
        }
        types = {f"rel-{n}": r["types"] for n, r in m["relations"].items()}
        rest = {k: v for k, v in m.items() if k not in ("relations", "output")}
        return {**rest, "parts": parts, "types": types}

    @staticmethod
    def written(manifest: dict[str, Any], parts: Mapping[str, Part]) -> dict[str, Any]:
        """What the commit of ``manifest`` wrote, as :meth:`save` returns it, for ``parts``
        read from it (so the next commit rewrites nothing that did not change)."""
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

    def collect_garbage(self, keep: set[str]) -> None:
        """Remove tick folders not in ``keep`` and stale temporary manifests."""
        for p in self.root.glob("tick-*"):
            if p.is_dir() and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        for p in self.root.glob(f".{MANIFEST}.*.tmp"):
            p.unlink(missing_ok=True)


def _digest(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


# -- the semiring a folder was written with ---------------------------------------------------
FINGERPRINT = "semiring_fingerprint"
"""Manifest key of a user semiring's fingerprint (None for a built-in semiring)."""

_FLOAT_PROBES = (0.5, 2.0, -1.5, 3.25)
_INT_PROBES = (2, 3, -1, 7)


def builtin(S: Semiring) -> bool:
    """True for the engine's own semirings, which a manifest identifies by name."""
    from semirings.core import canonical

    try:
        return canonical(S.name) is S
    except KeyError:
        return False


def semiring_fingerprint(S: Semiring) -> dict[str, Any]:
    """What a user semiring computes, JSON-safe: ``zero``, ``one``, and ``add``, ``mul``
    (and ``neg`` for a ring) on probe values of its own domain.

    The probes are zero, one, values built from them (one ⊕ one, (one ⊕ one) ⊗ (one ⊕
    one), (one ⊕ one) ⊕ one, zero ⊕ one) and, when zero or one is a number, a few
    numbers of that type the semiring's ``contains`` accepts.  Each result is kept as its
    ``repr`` (``"raises TypeError"`` when the function raised), keyed by the probes'
    ``repr``, so two definitions are compared on the probes both have.
    """
    base: list[Any] = [S.zero, S.one]
    numbers = [S.zero, S.one]
    if any(isinstance(x, float) for x in numbers):
        base += _FLOAT_PROBES
    elif all(isinstance(x, int) and not isinstance(x, bool) for x in numbers):
        base += _INT_PROBES
    two = _quiet(S.add, S.one, S.one)
    derived = [
        two,
        _quiet(S.mul, two, two),
        _quiet(S.add, two, S.one),
        _quiet(S.add, S.zero, S.one),
    ]
    probes: dict[str, Any] = {}
    for x in (*base, *derived):
        if x is not _FAILED and _member(S, x):
            probes.setdefault(_repr(x), x)
    items = sorted(probes.items())
    pairs = [(a, b) for i, a in enumerate(items) for b in items[i:]]
    return {
        "zero": _repr(S.zero),
        "one": _repr(S.one),
        "add": {f"{ra}, {rb}": _outcome(S.add, a, b) for (ra, a), (rb, b) in pairs},
        "mul": {f"{ra}, {rb}": _outcome(S.mul, a, b) for (ra, a), (rb, b) in pairs},
        "neg": None if S.neg is None else {r: _outcome(S.neg, x) for r, x in items},
    }


def semiring_differences(stored: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """How two fingerprints differ: one line for each of zero, one, add, mul, neg that
    does (the first probe that shows it, with both results)."""
    out = []
    for part in ("zero", "one"):
        if stored.get(part) != now.get(part):
            out.append(f"{part} is {stored.get(part)} in the folder, {now.get(part)} now")
    for op in ("add", "mul", "neg"):
        a, b = stored.get(op), now.get(op)
        if (a is None) != (b is None):
            was, new = ("defined", "not") if b is None else ("not defined", "defined")
            out.append(f"neg is {was} in the folder, {new} now")
            continue
        if not isinstance(a, dict) or not isinstance(b, dict):
            continue
        for k in sorted(a.keys() & b.keys()):
            if a[k] != b[k]:
                out.append(f"{op}({k}) is {a[k]} in the folder, {b[k]} now")
                break
    return out


_FAILED = object()


def _quiet(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return _FAILED


def _member(S: Semiring, x: Any) -> bool:
    try:
        return bool(S.contains(x))  # type: ignore[misc]
    except Exception:
        return False


def _outcome(fn: Any, *args: Any) -> str:
    try:
        return _repr(fn(*args))
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def _repr(x: Any) -> str:
    import re

    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(x))
