"""Exactly once across crashes: a Structured Streaming job killed mid-batch and restarted.

The driver program tests/stream_job.py streams Parquet files of edge changes
(``src, dst, _weight``; later files retract edges of earlier ones) one file
per micro-batch into a durable counting view of the triangle query through
``view.foreach_batch("E")``, with a Spark checkpoint.  The job is started in a
process group of its own and killed with SIGKILL (JVM, Python workers and
all) twice, each time at a point it announces and then waits at
(``$STREAM_JOB_HOLD``), so every kill lands exactly where it is meant to:

1. ``commit``: inside the view's commit, half of the tick's journal frame
   written (Spark has logged the batch's offsets, not its commit): the
   restart drops the torn frame, replays the batch and the view must apply it;
2. ``after``: the view has committed the batch, Spark has not recorded it as
   done: the restart replays it and the view must skip it.

The input is written by this process with pyarrow, atomically (a hidden
temporary name renamed into the watched folder), half of it while the first
run is going.  After the third, uninterrupted run the test checks that every
micro-batch was applied exactly once (each applied batch printed the count of
exactly the files up to it), that each restart reopened the view where the
killed run left it, that the final count and relation equal a plain Python
count over exactly the files on disk, and that the view's batch id is the
last micro-batch id of the checkpoint.  The figures of the run (where each
kill landed, restart and total times) are printed (``-s``) and attached to the
test report (``record_property("streaming", ...)``).  It takes about a minute
on two cores: deselect it with ``--deselect tests/test_streaming.py``.
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.spark_processes import log_tail, spark_env

ROOT = Path(__file__).parent.parent
JOB = Path(__file__).with_name("stream_job.py")

NODES = 7
FILES = 12
FIRST = 6
"""Files written before the first run; the others are written while it runs."""
SEED = 2
KILLS = (("commit", 3), ("after", 7))
"""Where each run but the last is killed: (hold point, micro-batch id)."""
WAIT = 180.0
"""Seconds any one wait may take (JVM start-up included) before the test fails."""


def java_missing() -> bool:
    """True when no Java runtime is found (``$JAVA_HOME/bin/java`` or ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return False
    return shutil.which("java") is None


pytestmark = pytest.mark.skipif(
    java_missing(), reason="no Java runtime (JAVA_HOME or java on PATH): Spark cannot start"
)


# -- the input ------------------------------------------------------------------------------
def edge_changes(seed: int) -> list[list[tuple[int, int, int]]]:
    """``FILES`` files of 3 to 6 rows ``(src, dst, weight)``, edges ``src < dst`` among
    ``NODES`` nodes: insertions (+1, possibly of an edge already present, so
    multiplicities above one occur) and retractions (-1) of edges present after
    the earlier files; no edge twice in one file."""
    rng = random.Random(seed)
    present: Counter[tuple[int, int]] = Counter()
    pairs = list(combinations(range(NODES), 2))
    files = []
    for i in range(FILES):
        size = rng.randint(3, 6)
        rows: list[tuple[int, int, int]] = []
        used: set[tuple[int, int]] = set()
        while len(rows) < size:
            held = sorted(e for e, m in present.items() if m > 0 and e not in used)
            if i > 0 and held and rng.random() < 0.35:
                edge, weight = rng.choice(held), -1
            else:
                edge, weight = rng.choice(pairs), 1
                if edge in used:
                    continue
            used.add(edge)
            rows.append((*edge, weight))
        for a, b, w in rows:
            present[(a, b)] += w
        files.append(rows)
    return files


def net_edges(files: list[list[tuple[int, int, int]]]) -> Counter[tuple[int, int]]:
    """The edge multiset after all ``files`` (multiplicity per edge; zeros dropped)."""
    net: Counter[tuple[int, int]] = Counter()
    for rows in files:
        for a, b, w in rows:
            net[(a, b)] += w
    return Counter({e: m for e, m in net.items() if m})


def triangles(edges: Counter[tuple[int, int]]) -> int:
    """Σ over a, b, c of m(a, b)·m(b, c)·m(a, c): the counting query, by plain Python."""
    return sum(
        edges[(a, b)] * edges[(b, c)] * edges[(a, c)]
        for (a, b) in list(edges)
        for c in range(NODES)
        if (b, c) in edges and (a, c) in edges
    )


def write_files(folder: Path, files: list[list[tuple[int, int, int]]], first: int) -> None:
    """Write ``files`` as ``part-{first + i}.parquet``: each to a hidden name (which the
    file source ignores), its modification time set one second after the one
    before (the file source takes files in that order), then renamed in place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.time_ns() - 3600 * 10**9
    for i, rows in enumerate(files, start=first):
        src, dst, weight = zip(*rows, strict=True)
        table = pa.table(
            {
                "src": pa.array(src, pa.int64()),
                "dst": pa.array(dst, pa.int64()),
                "_weight": pa.array(weight, pa.int64()),
            }
        )
        tmp = folder / f".part-{i:03d}.parquet.tmp"
        pq.write_table(table, tmp)
        stamp = t0 + i * 10**9
        os.utime(tmp, ns=(stamp, stamp))
        os.rename(tmp, folder / f"part-{i:03d}.parquet")


def files_on_disk(folder: Path) -> list[list[tuple[int, int, int]]]:
    """The rows of every visible Parquet file in ``folder``, read back, in name order."""
    import pyarrow.parquet as pq

    out = []
    for path in sorted(folder.glob("part-*.parquet")):
        t = pq.read_table(path).to_pydict()
        out.append(list(zip(t["src"], t["dst"], t["_weight"], strict=True)))
    return out


def batch_ids(folder: Path) -> list[int]:
    """The micro-batch ids logged in a checkpoint's ``offsets`` or ``commits`` folder."""
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


# -- the job --------------------------------------------------------------------------------
def parse(line: str) -> dict[str, Any]:
    """``"applied 3 tick=4 batch_id=3 count=11"`` -> ``{"event": "applied", "batch": 3,
    "tick": 4, "batch_id": 3, "count": 11}``."""
    words = line.split()
    out: dict[str, Any] = {"event": words[0]}
    for w in words[1:]:
        key, eq, value = w.partition("=")
        if not eq:
            out["batch"] = int(w) if w.isdigit() else w
        else:
            out[key] = None if value == "None" else int(value)
    return out


class Job:
    """One run of tests/stream_job.py in a process group of its own; its stdout lines
    are read by a thread as they come, its stderr goes to a file."""

    EVENTS = ("ready", "begin", "applied", "skipped", "hold")

    def __init__(self, args: list[str], stderr: Path, hold: str | None) -> None:
        env = spark_env(PYTHONPATH=str(ROOT), STREAM_JOB_HOLD=hold or "")
        self.stderr = stderr
        self.lines: list[str] = []
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.started = time.monotonic()
        with stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", str(JOB), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=ROOT,
                text=True,
                start_new_session=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _failure(self, what: str) -> str:
        return (
            f"{what}\n--- stdout ---\n" + "\n".join(self.lines[-40:]) + "\n--- stderr (end) ---\n"
            f"{log_tail(self.stderr)}"
        )

    def next_line(self, deadline: float, what: str) -> str | None:
        """The next stdout line (None at its end); fails the test at ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(self._failure(f"the job did not {what} within {WAIT:.0f} s"))
        try:
            line = self._queue.get(timeout=left)
        except queue.Empty:
            pytest.fail(self._failure(f"the job did not {what} within {WAIT:.0f} s"))
        if line is not None:
            self.lines.append(line)
            if line.split(" ", 1)[0] in self.EVENTS:
                event = parse(line)
                event["at"] = time.monotonic() - self.started
                self.events.append(event)
        return line

    def wait_for(self, prefix: str) -> dict[str, Any]:
        """Read lines until one starts with ``prefix``; its parsed event."""
        deadline = time.monotonic() + WAIT
        while True:
            line = self.next_line(deadline, f"print {prefix!r}")
            if line is None:
                self.proc.wait(WAIT)
                pytest.fail(
                    self._failure(
                        f"the job exited with status {self.proc.returncode} before "
                        f"printing {prefix!r}"
                    )
                )
            if line.startswith(prefix):
                return self.events[-1]

    def finish(self) -> dict[str, Any]:
        """Read to the end, check the exit status; the final JSON line."""
        deadline = time.monotonic() + WAIT
        while self.next_line(deadline, "finish") is not None:
            pass
        try:
            self.proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(self._failure(f"the job did not exit within {WAIT:.0f} s"))
        assert self.proc.returncode == 0, self._failure(
            f"the job exited with status {self.proc.returncode}"
        )
        results = [ln for ln in self.lines if ln.startswith("{")]
        assert results, self._failure("the job printed no final result")
        return json.loads(results[-1])

    def kill(self) -> None:
        """SIGKILL the whole process group (driver, JVM, Python workers) and wait until
        no process of it runs any more."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        deadline = time.monotonic() + 30
        while group_running(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._reader.join(5)


def group_running(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (zombies waiting to be reaped by
    whoever inherited them do not count, where ``/proc`` tells them apart)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for stat in proc.glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


# -- the test -------------------------------------------------------------------------------
def test_killed_stream_restarts_and_applies_every_batch_once(tmp_path, record_property):
    files = edge_changes(SEED)
    prefix = [triangles(net_edges(files[: k + 1])) for k in range(FILES)]
    # the data can show a lost or doubled batch: every file changes the count
    assert all(prefix[k] != prefix[k - 1] for k in range(1, FILES)), prefix
    assert sum(w < 0 for rows in files for *_, w in rows) >= 3
    inp, state, ckpt = tmp_path / "input", tmp_path / "view", tmp_path / "checkpoint"
    inp.mkdir()
    args = [str(inp), str(state), str(ckpt)]
    write_files(inp, files[:FIRST], 0)

    t_test = time.monotonic()
    jobs: list[Job] = []
    figures: list[dict[str, Any]] = []
    try:
        for run, (where, batch) in enumerate(KILLS):
            job = Job(args, tmp_path / f"run-{run}.stderr", f"{where}:{batch}")
            jobs.append(job)
            ready = job.wait_for("ready ")
            if run == 0:  # the rest of the input arrives while a run is going
                write_files(inp, files[FIRST:], FIRST)
            held = job.wait_for(f"hold {where} {batch}")
            job.kill()
            offsets, commits = batch_ids(ckpt / "offsets"), batch_ids(ckpt / "commits")
            # the kill landed with the batch in flight: planned by Spark, not done
            assert offsets[-1] == batch and commits[-1] == batch - 1, (offsets, commits)
            first = next(
                (e for e in job.events if e["event"] in ("applied", "skipped")), {"batch": None}
            )
            figures.append(
                {
                    "run": run,
                    "killed": f"{where} batch {batch}",
                    "view_tick_at_start": ready["tick"],
                    "view_batches_committed_at_kill": (batch + 1 if where == "after" else batch),
                    "first_batch_applied_in_run": first["batch"],
                    "seconds_to_ready": round(ready["at"], 1),
                    "seconds_to_first_batch": round(first.get("at", float("nan")), 1),
                    "seconds_to_kill": round(held["at"], 1),
                }
            )
        job = Job(args, tmp_path / f"run-{len(KILLS)}.stderr", None)
        jobs.append(job)
        final = job.finish()
        ready = next(e for e in job.events if e["event"] == "ready")
        first = next(e for e in job.events if e["event"] in ("applied", "skipped"))
        figures.append(
            {
                "run": len(KILLS),
                "killed": None,
                "view_tick_at_start": ready["tick"],
                "first_batch_applied_in_run": first["batch"],
                "seconds_to_ready": round(ready["at"], 1),
                "seconds_to_first_batch": round(first["at"], 1),
                "seconds_to_finish": round(time.monotonic() - job.started, 1),
            }
        )
    finally:
        for j in jobs:
            j.kill()
    total = time.monotonic() - t_test
    summary = {"runs": figures, "total_seconds": round(total, 1)}
    record_property("streaming", json.dumps(summary))
    print("\nstreaming kill/restart figures:")
    for f in figures:
        print("  " + ", ".join(f"{k}={v}" for k, v in f.items()))
    print(f"  total {total:.1f} s for {len(jobs)} runs")

    # every micro-batch was applied by the view exactly once, in order, each leaving the
    # count of exactly the files up to it; the one the view had committed before its
    # run was killed was replayed by Spark and skipped
    events = [e for j in jobs for e in j.events]
    applied = [e for e in events if e["event"] == "applied"]
    skipped = [e for e in events if e["event"] == "skipped"]
    assert [e["batch"] for e in applied] == list(range(FILES)), [
        (e["event"], e["batch"]) for e in events
    ]
    assert [e["batch"] for e in skipped] == [b for w, b in KILLS if w == "after"]
    for e in applied:
        n = e["batch"]
        assert (e["count"], e["tick"], e["batch_id"]) == (prefix[n], n + 1, n), e
    for e in skipped:
        n = e["batch"]
        assert (e["count"], e["tick"], e["batch_id"]) == (prefix[n], n + 1, n), e
    # each restart reopened the view where the killed run had left it
    readies = [next(e for e in j.events if e["event"] == "ready") for j in jobs]
    want_ready = [(0, None)] + [
        (b + 1, b) if w == "after" else (b, b - 1 if b else None) for w, b in KILLS
    ]
    assert [(e["tick"], e["batch_id"]) for e in readies] == want_ready

    # the end state: exactly the files on disk, each once
    on_disk = files_on_disk(inp)
    assert len(on_disk) == FILES
    want = net_edges(on_disk)
    assert final["count"] == triangles(want) == prefix[-1]
    assert {(a, b): m for a, b, m in final["edges"]} == dict(want)
    last = batch_ids(ckpt / "commits")[-1]
    assert last == FILES - 1
    assert final["batch_id"] == last and final["tick"] == FILES
