"""Incremental triangle counting: step time against full recompute, and against Pathway.

For each graph (generated with :mod:`faq.testing`, or SNAP edge lists given as
paths), the script builds ``IncrementalView(tri, E=edges)``, then runs ticks
of 1 and 1000 edge changes (``--deltas``; a share ``--deletions`` of each tick,
30% by default, deletes present edges, the rest inserts new ones; a
single-edge tick is a deletion with that probability) and prints, as Markdown
tables:

* the median step time for each way the deltas are fed (``--input``: pandas
  DataFrames, and Spark DataFrames made from pandas as a streaming micro-batch
  would be), the time of a full recompute (``tri.solve``) on the final graph,
  measured in the same run, their ratio, and the driver's peak resident memory;
* with ``--durable``, the same ticks (pandas deltas) on a view with a ``state_dir``
  and on another plain view, stepped one right after the other so that both see
  the same machine: the durable step time (a journaled tick), its overhead over
  that plain view's step, the latency of an ``fdatasync`` measured meanwhile, and
  the amortised durable tick: with its share of a checkpoint tick (measured on the
  same view), at the cadence the ``journal_ticks`` and ``journal_bytes`` settings
  give for the measured frame size;
* the same ticks in Pathway (an incremental dataflow engine a Python user
  would pick), when it is importable by the interpreter given with
  ``--pathway-python`` (default: this one);
* the step time at a fixed delta size as the graph grows;
* what the physical plans of one step shuffle (``--plans FILE`` writes them).

Every view's count is checked against :func:`faq.testing.triangle_count_numpy`.
The Spark jobs of the build, of each step and of the recompute are counted
with the status tracker.  The rows are also written as CSV and JSON
(``benchmarks/results/incremental.csv`` and ``.json``, or under ``--out DIR``):
contenders ``initial build``, ``full recompute``, ``step Δ=d`` and, when
Pathway runs, ``Pathway initial`` and ``Pathway step Δ=d``, each with its
ratio to the full recompute on the same graph.

Usage::

    python benchmarks/incremental.py --quick
    python benchmarks/incremental.py --sizes 100000 300000 1000000 --pathway-python /path/python
    python benchmarks/incremental.py data/ca-GrQc.txt
    python benchmarks/incremental.py --sizes 300000 --deltas 100 --spark-delta
    python benchmarks/incremental.py --sizes 1000000 --deltas 1 1000 --input pandas spark \
        --ticks 9 --durable

The ticks' deltas are made before any is timed (the Python set of edges the
script keeps is then frozen out of the garbage collector's scans: a collection
of a million young tuples inside a tick would be the script's cost, not the
view's).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # run as a script, this file's folder comes first on sys.path and its name would
    # shadow the ``incremental`` package; import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import contextlib
import gc
import io
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks._common import (
    NOT_INSTALLED,
    Result,
    add_out_argument,
    run_info,
    set_ratios,
    stop_spark,
    timed_jobs,
    write_results,
)

PATHWAY_SCRIPT = r"""
import json, sys, time
import numpy as np
import pandas as pd
import pathway as pw

data = np.load(sys.argv[1])
init = data["init"]
ticks = [data[f"t{i}"] for i in range(int(data["n"]))]
frames = [pd.DataFrame({"u": init[:, 0], "v": init[:, 1], "__time__": 2, "__diff__": 1})]
for i, t in enumerate(ticks):
    frames.append(pd.DataFrame({"u": t[:, 0], "v": t[:, 1], "__time__": 4 + 2 * i,
                                "__diff__": t[:, 2]}))
E = pw.debug.table_from_pandas(pd.concat(frames, ignore_index=True))
E2, E3 = E.copy(), E.copy()
p = E.join(E2, E.v == E2.u).select(a=E.u, b=E.v, c=E2.v)
tri = p.join(E3, p.a == E3.u, p.c == E3.v).reduce(count=pw.reducers.count())
counts = {}
def on_change(key, row, time, is_addition):
    if is_addition:
        counts[time] = row["count"]
pw.io.subscribe(tri, on_change=on_change)
t0 = time.perf_counter()
pw.run(monitoring_level=pw.MonitoringLevel.NONE)
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "final": counts[max(counts)] if counts else 0}))
"""


def make_delta(
    edges: set[tuple[int, int]],
    n_nodes: int,
    size: int,
    rng: np.random.Generator,
    deletions: float = 0.5,
) -> np.ndarray:
    """``size`` changes: a share ``deletions`` of deletions of present edges (for one
    change: a deletion with that probability), the rest insertions of absent ones."""
    present = list(edges)
    n_del = int(rng.random() < deletions) if size == 1 else int(round(size * deletions))
    dels = [present[i] for i in rng.choice(len(present), n_del, replace=False)]
    ins: set[tuple[int, int]] = set()
    while len(ins) < size - n_del:
        u, v = (int(x) for x in rng.integers(0, n_nodes, 2))
        e = (min(u, v), max(u, v))
        if u != v and e not in edges and e not in ins:
            ins.add(e)
    rows = [(u, v, -1) for u, v in dels] + [(u, v, 1) for u, v in sorted(ins)]
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def delta_frame(spark, d: np.ndarray, kind: str = "spark"):
    """A tick's changes as the delta a view takes: a Spark DataFrame made from pandas (as a
    streaming micro-batch would be), or (``kind="pandas"``) the pandas DataFrame itself."""
    import pandas as pd

    pdf = pd.DataFrame({"src": d[:, 0], "dst": d[:, 1], "_weight": d[:, 2]})
    if kind == "pandas":
        return pdf
    return spark.createDataFrame(pdf, "src bigint, dst bigint, _weight bigint")


def apply(edges: set[tuple[int, int]], d: np.ndarray) -> None:
    for u, v, w in d.tolist():
        if w > 0:
            edges.add((u, v))
        else:
            edges.discard((u, v))


class PlanRecorder:
    """Captures the physical plan of every DataFrame materialised while it is active."""

    def __init__(self) -> None:
        self.plans: list[str] = []

    @contextlib.contextmanager
    def active(self, spark):
        DataFrame = type(spark.range(1))  # the implementation class (classic or Connect)
        original = DataFrame.localCheckpoint
        recorder = self

        def patched(df, eager=True, storageLevel=None):  # noqa: N803 - PySpark's name
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                df.explain()
            recorder.plans.append(buf.getvalue())
            if storageLevel is None:
                return original(df, eager)
            return original(df, eager, storageLevel)

        DataFrame.localCheckpoint = patched
        try:
            yield self
        finally:
            DataFrame.localCheckpoint = original

    def summary(self) -> dict[str, int]:
        text = "\n".join(self.plans)
        return {
            "materialised DataFrames": len(self.plans),
            "hash exchanges (shuffles)": len(re.findall(r"Exchange hashpartitioning", text)),
            "broadcast exchanges": len(re.findall(r"BroadcastExchange", text)),
            "broadcast hash joins": len(re.findall(r"BroadcastHashJoin", text)),
            "sort-merge joins": len(re.findall(r"SortMergeJoin", text)),
            "shuffled hash joins": len(re.findall(r"ShuffledHashJoin", text)),
        }


def run_pathway(python: str, init: np.ndarray, ticks: list[np.ndarray]) -> dict[str, Any] | str:
    """Run the ticks in Pathway in a subprocess: its run time and final count, or why not."""
    with tempfile.TemporaryDirectory() as tmp:
        case = Path(tmp) / "case.npz"
        script = Path(tmp) / "pw_triangles.py"
        script.write_text(PATHWAY_SCRIPT)
        np.savez(case, init=init, n=len(ticks), **{f"t{i}": t for i, t in enumerate(ticks)})
        try:
            proc = subprocess.run(
                [python, str(script), str(case)], capture_output=True, text=True, timeout=3600
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"not run ({type(exc).__name__})"
        if proc.returncode < 0:  # killed: on Linux, SIGKILL is what the OOM killer sends
            why = "out of memory?" if proc.returncode == -9 else "crashed"
            return f"killed by signal {-proc.returncode} ({why})"
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return f"not run: {last[:120]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])


def pathway_ticks(
    python: str, edges_np: np.ndarray, sizes: list[int], ticks: int, seed: int
) -> dict[str, Any] | str:
    """Pathway's time per tick for each delta size: (run with ticks - run without) / ticks.

    Pathway is given the whole stream at once (initial edges at one time, each
    tick at the next), so a tick's cost is measured as the extra run time.
    """
    base = run_pathway(python, edges_np, [])
    if not isinstance(base, dict):
        return base
    out: dict[str, Any] = {"initial": base["seconds"], "steps": {}}
    n_nodes = int(edges_np.max()) + 1
    for size in sizes:
        rng = np.random.default_rng(seed + size)
        edges = {(int(u), int(v)) for u, v in edges_np}
        seq = []
        for _ in range(ticks):
            d = make_delta(edges, n_nodes, size, rng)
            apply(edges, d)
            seq.append(d)
        run = run_pathway(python, edges_np, seq)
        if not isinstance(run, dict):
            return run
        current = np.asarray(sorted(edges), dtype=np.int64).reshape(-1, 2)
        from faq.testing import triangle_count_numpy

        if run["final"] != int(triangle_count_numpy(current)):
            raise AssertionError(f"Pathway counts {run['final']} triangles")
        out["steps"][size] = max(run["seconds"] - base["seconds"], 0.0) / ticks
    return out


def pathway_available(python: str) -> bool:
    try:
        proc = subprocess.run([python, "-c", "import pathway"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def bench_graph(
    spark, label: str, edges_np: np.ndarray, sizes: list[int], ticks: int, args, recorder
) -> dict[str, Any]:
    import pandas as pd

    from benchmarks._cells import PeakRss
    from faq import query
    from faq.io import edges_dataframe
    from faq.testing import triangle_count_numpy
    from incremental import IncrementalView

    rng = np.random.default_rng(args.seed)
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    n_nodes = int(edges_np.max()) + 1
    edges = {(int(u), int(v)) for u, v in edges_np}
    n_edges = len(edges)
    # every tick's delta, made before any is timed: (size, input kind, changes)
    seq = []
    for size in sizes:
        for kind in args.input:
            for _ in range(ticks):
                d = make_delta(edges, n_nodes, size, rng, args.deletions)
                apply(edges, d)
                seq.append((size, kind, d))
    current = np.asarray(sorted(edges), dtype=np.int64).reshape(-1, 2)
    del edges
    gc.collect()
    gc.freeze()  # the script's own objects: not scanned by collections inside a tick
    sc = spark.sparkContext
    with PeakRss(interval=0.05) as mem:
        build, view, build_jobs = timed_jobs(
            sc,
            lambda: IncrementalView(tri, join=args.join, E=edges_dataframe(edges_np, spark)),
            f"incremental build {label}",
        )
        view.local = not args.spark_delta
        collects: dict[int, list[float]] = {}
        times, jobs = run_ticks(spark, view, seq, label, recorder, collects)
    row: dict[str, Any] = {
        "graph": label,
        "edges": n_edges,
        "build": build,
        "build_jobs": build_jobs,
        "peak_mb": None if mem.peak is None else mem.peak / 1e6,
        "by_input": {k: {d: times[(d, k)] for d in sizes} for k in args.input},
        "jobs_by_input": {k: {d: jobs[(d, k)] for d in sizes} for k in args.input},
        "collect_s": collects,
    }
    first = args.input[0]
    row["step_times"] = row["by_input"][first]
    row["steps"] = {d: statistics.median(t) for d, t in row["step_times"].items()}
    row["step_jobs"] = row["jobs_by_input"][first]
    expected = int(triangle_count_numpy(current))
    got = view.result().scalar()
    if got != expected:
        raise AssertionError(f"{label}: view counts {got} triangles, numpy {expected}")
    row["triangles"] = got
    row["where"] = where_of(view.last_step.terms)
    del view
    if args.durable:
        with tempfile.TemporaryDirectory(prefix="faq-bench-state-") as tmp:
            rows = pd.DataFrame(edges_np, columns=["src", "dst"])  # rows of keys, said so
            dview = IncrementalView(tri, state_dir=Path(tmp) / "view", E=rows)
            pview = IncrementalView(tri, E=rows)
            pandas_seq = [(d, "pandas", x) for d, _, x in seq]
            row["fsync"] = fsync_seconds(Path(tmp))
            dtimes, ptimes, row["synced"], row["commit"] = paired_ticks(dview, pview, pandas_seq)
            row["fsync"] += fsync_seconds(Path(tmp))
            row["frame_bytes"] = frame_bytes(Path(tmp) / "view", pandas_seq)
            row["checkpoint"] = checkpoint_ticks(dview, pandas_seq)
            if dview.result().scalar() != expected or pview.result().scalar() != expected:
                raise AssertionError(f"{label}: the durable view counts wrong")
            dview.close()
            del pview
        row["durable"] = dtimes
        row["paired_plain"] = ptimes
    if args.spark_state:
        row["spark_state"] = bench_spark_state(
            spark, label, edges_np, current, seq, tri, expected, args.spark_fetch_rows
        )
    row["recompute"], count, row["recompute_jobs"] = timed_jobs(
        sc,
        lambda: tri.solve(E=edges_dataframe(current, spark)).scalar(),
        f"incremental recompute {label}",
    )
    assert count == expected, (count, expected)
    gc.unfreeze()
    if args.pathway and n_edges > args.pathway_max_edges:
        row["pathway"] = f"not run (over --pathway-max-edges={args.pathway_max_edges:,})"
    elif args.pathway:
        row["pathway"] = pathway_ticks(
            args.pathway_python, edges_np, sizes, args.pathway_ticks, args.seed
        )
    return row


def bench_spark_state(
    spark,
    label: str,
    edges_np: np.ndarray,
    current: np.ndarray,
    seq,
    tri,
    expected: int,
    fetch_rows: int | None = None,
) -> dict[str, Any]:
    """The same ticks (pandas deltas) on a view with ``state="spark"``, and the recompute
    it is measured against: the query on Spark (``local_rows=0``), as a user with a state
    past the driver would run it.  With ``fetch_rows``, the ticks run under
    ``max_fetch_rows=fetch_rows`` (0: every tick's delta queries run as Spark jobs, as a
    tick reaching past the bound does)."""
    import faq
    from benchmarks._cells import PeakRss
    from faq.io import edges_dataframe
    from incremental import IncrementalView

    sc = spark.sparkContext
    with PeakRss(interval=0.05) as mem:
        build, view, build_jobs = timed_jobs(
            sc,
            lambda: IncrementalView(tri, state="spark", E=edges_dataframe(edges_np, spark)),
            f"spark state build {label}",
        )
        pandas_seq = [(d, "pandas", x) for d, _, x in seq]
        with fetch_bound(fetch_rows):
            times, jobs = run_ticks(spark, view, pandas_seq, label, None)
    got = view.result().scalar()
    if got != expected:
        raise AssertionError(f"{label}: the Spark-state view counts {got}, numpy {expected}")
    del view

    def recompute() -> int:
        with faq.settings(local_rows=0):
            return tri.solve(E=edges_dataframe(current, spark)).scalar()

    recompute()  # a warm-up: the recompute is timed warm, as the ticks are
    secs, count, rjobs = timed_jobs(sc, recompute, f"spark state recompute {label}")
    assert count == expected, (count, expected)
    sizes = sorted({d for d, _ in times})
    return {
        "build": build,
        "build_jobs": build_jobs,
        "recompute": secs,
        "recompute_jobs": rjobs,
        "ticks": {d: times[(d, "pandas")] for d in sizes},
        "jobs": {d: jobs[(d, "pandas")] for d in sizes},
        "peak_mb": None if mem.peak is None else mem.peak / 1e6,
        "fetch_rows": fetch_rows,
    }


def fetch_bound(rows: int | None) -> Any:
    """A block under ``max_fetch_rows=rows`` (None: the setting as it is); with 0, every
    tick of a Spark-state view reads past the bound (its delta queries run as Spark jobs)."""
    import faq

    return faq.settings(**({} if rows is None else {"max_fetch_rows": rows}))


def print_spark_state(rows: list[dict[str, Any]], deltas: list[int], ticks: int) -> None:
    """The table of the ``state="spark"`` rows (``--spark-state``)."""
    print(f'\n## The Spark-resident state (`state="spark"`, median of {ticks} ticks)\n')
    bounds = {r["spark_state"]["fetch_rows"] for r in rows if r.get("spark_state")}
    for bound in sorted(b for b in bounds if b is not None):
        print(f"Ticks under max_fetch_rows={bound:,}.\n")
    print(
        "| graph | edges | initial build | recompute on Spark (local_rows=0) | "
        + " | ".join(f"step Δ={d} | ratio" for d in deltas)
        + " | peak driver RSS |"
    )
    print("|---|---:|---:|---:|" + "---:|---:|" * len(deltas) + "---:|")
    for r in rows:
        st = r.get("spark_state")
        if st is None:
            continue
        cells = [
            r["graph"],
            f"{r['edges']:,}",
            f"{fmt(st['build'])}, {st['build_jobs']} jobs",
            f"{fmt(st['recompute'])}, {st['recompute_jobs']} jobs",
        ]
        for d in deltas:
            s = statistics.median(st["ticks"][d])
            cells += [f"{fmt(s)}, {st['jobs'][d]} jobs", f"{st['recompute'] / s:.0f}×"]
        peak = st["peak_mb"]
        cells.append("?" if peak is None else f"{peak:,.0f} MB")
        print("| " + " | ".join(cells) + " |")


def run_ticks(
    spark,
    view,
    seq: list[tuple[int, str, np.ndarray]],
    label: str,
    recorder,
    collects: dict[int, list[float]] | None = None,
) -> tuple[dict[tuple[int, str], list[float]], dict[tuple[int, str], int]]:
    """Step ``view`` through ``seq``: each tick's seconds and Spark jobs, by (size, input).
    With ``collects``, each Spark DataFrame tick also times ``collect()`` of a fresh
    DataFrame of the same rows, apart from the step, into ``collects[size]``."""
    sc = spark.sparkContext
    times: dict[tuple[int, str], list[float]] = {}
    jobs: dict[tuple[int, str], list[int]] = {}
    for n, (size, kind, d) in enumerate(seq):
        df = delta_frame(spark, d, kind)
        what = f"incremental step {label} delta={size} input={kind}"
        last = n + 1 == len(seq) or seq[n + 1][:2] != (size, kind)
        if recorder is not None and size == seq[0][0] and kind == seq[0][1] and last:
            with recorder.active(spark):
                secs, _, n_jobs = timed_jobs(sc, lambda df=df: view.step(E=df), what)
        else:
            secs, _, n_jobs = timed_jobs(sc, lambda df=df: view.step(E=df), what)
        times.setdefault((size, kind), []).append(secs)
        jobs.setdefault((size, kind), []).append(n_jobs)
        if kind == "spark" and collects is not None:  # the delta's own read, timed apart
            fresh = delta_frame(spark, d, kind)
            t0 = time.perf_counter()
            fresh.collect()
            collects.setdefault(size, []).append(time.perf_counter() - t0)
    return times, {k: int(statistics.median(v)) for k, v in jobs.items()}


def paired_ticks(
    durable, plain, seq: list[tuple[int, str, np.ndarray]]
) -> tuple[
    dict[int, list[float]], dict[int, list[float]], dict[int, list[float]], dict[int, list[float]]
]:
    """Each tick of ``seq`` on the durable view and on a plain view of the same graph, one
    right after the other (which goes first alternates), so both see the same machine:
    their seconds by delta size; the seconds each durable tick waited for the sync of
    its journal intent, which runs while the tick computes (timed by wrapping
    ``incremental.journal.Pending.wait``) and for any ``fdatasync`` of its own process
    (a checkpoint's; wrapping ``os.fdatasync``); and the seconds each durable tick spent
    on being durable, as the view timed them (``last_step.commit_s``: its intent, its
    commit frame and that wait)."""
    from incremental.journal import Pending

    dtimes: dict[int, list[float]] = {}
    ptimes: dict[int, list[float]] = {}
    waits: dict[int, list[float]] = {}
    commits: dict[int, list[float]] = {}
    synced: list[float] = []
    real, real_wait = os.fdatasync, Pending.wait

    def timed(fd: int) -> None:
        t0 = time.perf_counter()
        real(fd)
        synced.append(time.perf_counter() - t0)

    def timed_wait(self: Pending) -> None:
        t0 = time.perf_counter()
        real_wait(self)
        synced.append(time.perf_counter() - t0)

    os.fdatasync, Pending.wait = timed, timed_wait  # type: ignore[method-assign]
    try:
        for n, (size, _, d) in enumerate(seq):
            pair = [(durable, dtimes), (plain, ptimes)]
            for view, out in pair if n % 2 == 0 else reversed(pair):
                df = delta_frame(None, d, "pandas")
                before = len(synced)
                t0 = time.perf_counter()
                view.step(E=df)
                out.setdefault(size, []).append(time.perf_counter() - t0)
                if view is durable:
                    waits.setdefault(size, []).append(sum(synced[before:]))
                    commits.setdefault(size, []).append(view.last_step.commit_s)
    finally:
        os.fdatasync, Pending.wait = real, real_wait  # type: ignore[method-assign]
    return dtimes, ptimes, waits, commits


def commit_share(ticks: list[float], commits: list[float]) -> float:
    """The median over the ticks of what being durable added to each: its commit's
    seconds over the rest of that same tick (no second view, so no difference between
    two views' placement in memory, which moves a paired plain view's median by up to a
    millisecond at 1M edges)."""
    return statistics.median(c / max(t - c, 1e-9) for t, c in zip(ticks, commits, strict=True))


def fsync_seconds(folder: Path, n: int = 20) -> list[float]:
    """Seconds of ``n`` appends of 256 bytes to a file in ``folder``, each followed by an
    ``fdatasync``: what the disk charges a journaled tick right now."""
    path = folder / "fsync-probe"
    out = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 256)
            os.fdatasync(fd)
            out.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return out


def frame_bytes(folder: Path, seq: list[tuple[int, str, np.ndarray]]) -> dict[int, int]:
    """The median bytes a tick adds to the journal (its intent and its commit frame), by
    delta size (the ticks of ``seq`` since the view's last checkpoint)."""
    from incremental.journal import HEADER

    m = json.loads((folder / "manifest.json").read_text())
    data = (folder / m["journal"]).read_bytes()
    by_tick: dict[int, int] = {}
    pos = 0
    while pos + HEADER.size <= len(data):
        _, _, _, tick, length, _, _ = HEADER.unpack_from(data, pos)
        by_tick[tick] = by_tick.get(tick, 0) + HEADER.size + length
        pos += HEADER.size + length
    sizes: dict[int, list[int]] = {}
    for tick, n in by_tick.items():
        sizes.setdefault(seq[tick - 1][0], []).append(n)
    return {d: int(statistics.median(v)) for d, v in sizes.items()}


def checkpoint_ticks(view, seq: list[tuple[int, str, np.ndarray]]) -> dict[int, list[float]]:
    """Seconds of ticks that write a checkpoint (``journal_ticks=0``), two per delta size:
    the last delta of that size undone, then done again (the graph ends as it was)."""
    from faq import settings

    out: dict[int, list[float]] = {}
    for size in dict.fromkeys(d for d, _, _ in seq):
        d = next(x for s, _, x in reversed(seq) if s == size)
        undo = d.copy()
        undo[:, 2] = -undo[:, 2]
        with settings(journal_ticks=0):
            for x in (undo, d):
                df = delta_frame(None, x, "pandas")
                t0 = time.perf_counter()
                view.step(E=df)
                out.setdefault(size, []).append(time.perf_counter() - t0)
    return out


def nosync(r: dict[str, Any], d: int) -> float:
    """The median of the durable ticks of size ``d`` less their wait for the disk's sync."""
    return statistics.median(t - w for t, w in zip(r["durable"][d], r["synced"][d], strict=True))


def amortised(r: dict[str, Any], d: int) -> tuple[float, int]:
    """A durable tick's mean seconds with its share of a checkpoint, and how many ticks
    apart checkpoints come under the settings in force (``journal_ticks``, and
    ``journal_bytes`` at the measured frame size)."""
    from faq import settings

    st = settings()
    every = max(1, min(st.journal_ticks, st.journal_bytes // max(r["frame_bytes"].get(d, 1), 1)))
    tick = statistics.median(r["durable"][d])
    ckpt = statistics.median(r["checkpoint"][d])
    return (tick * (every - 1) + ckpt) / every, every


def where_of(terms: Any) -> list[str]:
    """Where the delta rule's terms of a step ran (``faq.TermReport.where``), sorted."""
    return sorted({t.where or "?" for t in terms})


def fmt(x: float) -> str:
    return f"{x:.2f} s" if x >= 0.1 else f"{x * 1000:.0f} ms"


def results_of(rows: list[dict[str, Any]], deltas: list[int], ticks: int) -> list[Result]:
    """The measured rows as result cells (ratio: time / full recompute on the same graph)."""
    out: list[Result] = []
    for r in rows:
        common = {"workload": r["graph"], "edges": r["edges"], "count": r["triangles"]}
        where = ", ".join(r["where"])
        out.append(
            Result(
                contender="initial build",
                times=[r["build"]],
                spark_jobs=r["build_jobs"],
                extra={"delta": None, "where": ""},
                **common,
            )
        )
        out.append(
            Result(
                contender="full recompute",
                times=[r["recompute"]],
                spark_jobs=r["recompute_jobs"],
                extra={"delta": None, "where": ""},
                **common,
            )
        )
        inputs = r.get("by_input") or {"": r["step_times"]}
        jobs = r.get("jobs_by_input") or {"": r["step_jobs"]}
        for n, (kind, by_size) in enumerate(inputs.items()):
            suffix = "" if n == 0 else f" ({kind} input)"
            for d in deltas:
                out.append(
                    Result(
                        contender=f"step Δ={d}{suffix}",
                        times=by_size[d],
                        spark_jobs=jobs[kind][d],
                        note=f"median of {ticks} ticks" + (f", {kind} input" if kind else ""),
                        extra={"delta": d, "where": where, "peak_mb": r.get("peak_mb")},
                        **common,
                    )
                )
        for d, times in r.get("durable", {}).items():
            out.append(
                Result(
                    contender=f"durable step Δ={d}",
                    times=times,
                    note=f"median of {ticks} ticks, state_dir, pandas input",
                    extra={
                        "delta": d,
                        "where": where,
                        "amortised_s": amortised(r, d)[0],
                        "checkpoint_every": amortised(r, d)[1],
                        "checkpoint_s": statistics.median(r["checkpoint"][d]),
                        "frame_bytes": r["frame_bytes"].get(d),
                        "commit_s": statistics.median(r["commit"][d]),
                        "commit_share": commit_share(times, r["commit"][d]),
                    },
                    **common,
                )
            )
        st = r.get("spark_state")
        if st is not None:
            out.append(
                Result(
                    contender="Spark-state recompute (local_rows=0)",
                    times=[st["recompute"]],
                    spark_jobs=st["recompute_jobs"],
                    extra={"delta": None, "where": "spark"},
                    **common,
                )
            )
            for d, times in st["ticks"].items():
                out.append(
                    Result(
                        contender=f"Spark-state step Δ={d}",
                        times=times,
                        spark_jobs=st["jobs"][d],
                        note='state="spark", pandas input; ratio against the full recompute',
                        extra={
                            "delta": d,
                            "where": "spark",
                            "peak_mb": st["peak_mb"],
                            "max_fetch_rows": st["fetch_rows"],
                        },
                        **common,
                    )
                )
        pw = r.get("pathway")
        labels = ["Pathway initial"] + [f"Pathway step Δ={d}" for d in deltas]
        if not isinstance(pw, dict):
            # not importable, over --pathway-max-edges: skipped; it failed: error
            status = "skipped" if pw is None or pw.startswith("not run (over") else "error"
            for label, d in zip(labels, [None, *deltas], strict=True):
                out.append(
                    Result(
                        contender=label,
                        status=status,
                        note=pw or NOT_INSTALLED,
                        extra={"delta": d, "where": ""},
                        **{**common, "count": None},
                    )
                )
            continue
        out.append(
            Result(
                contender="Pathway initial",
                times=[pw["initial"]],
                extra={"delta": None, "where": ""},
                **common,
            )
        )
        for d in deltas:
            out.append(
                Result(
                    contender=f"Pathway step Δ={d}",
                    times=[pw["steps"][d]],
                    note="(run with the ticks - run without) / ticks",
                    extra={"delta": d, "where": "Pathway"},
                    **common,
                )
            )
    set_ratios(out, "full recompute")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="SNAP edge lists to add to the graphs")
    parser.add_argument("--quick", action="store_true", help="one small graph, 2 ticks per size")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--deltas", type=int, nargs="*", default=[1, 1000])
    parser.add_argument(
        "--deletions",
        type=float,
        default=0.3,
        help="share of each tick's changes that delete present edges (the rest insert)",
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="also run the ticks on a view with a state_dir (pandas deltas): its overhead",
    )
    parser.add_argument(
        "--spark-state",
        action="store_true",
        help='also run the ticks (pandas deltas) on a view with state="spark", against the '
        "query recomputed on Spark (local_rows=0)",
    )
    parser.add_argument(
        "--spark-fetch-rows",
        type=int,
        default=None,
        help="with --spark-state: its ticks under max_fetch_rows=N (0: every tick's delta "
        "queries run as Spark jobs, as one reaching past the bound does)",
    )
    parser.add_argument("--ticks", type=int, default=3, help="ticks per delta size (median)")
    parser.add_argument("--graph", choices=["random", "power-law"], default="power-law")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pathway-python", default=sys.executable)
    parser.add_argument("--pathway-ticks", type=int, default=20)
    parser.add_argument(
        "--pathway-max-edges",
        type=int,
        default=300_000,
        help="run Pathway only on graphs up to this many edges (its initial load is slow)",
    )
    parser.add_argument("--join", default="auto", help="join method of the delta queries")
    parser.add_argument("--plans", help="write the physical plans of one step to this file")
    parser.add_argument(
        "--spark-delta",
        action="store_true",
        help="run every delta rule as Spark delta queries (view.local = False)",
    )
    parser.add_argument(
        "--input",
        nargs="+",
        choices=["spark", "pandas"],
        default=["pandas", "spark"],
        help="how each tick's delta is given, one run of ticks per kind: the pandas "
        "DataFrame itself, or a Spark DataFrame made from it (the first is the main column)",
    )
    add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.ticks, args.deltas, args.pathway_ticks = [20_000], 2, [1, 100], 5

    from faq import testing as graphs
    from faq.io import load_edge_array, undirected_simple
    from faq.session import local_session

    spark = local_session()
    spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="faq-bench-"))
    args.pathway = pathway_available(args.pathway_python)
    meta = run_info("incremental", argv)
    gen = graphs.power_law_graph if args.graph == "power-law" else graphs.random_graph
    cases = [(f"{args.graph} m={m:,}", gen(max(m // 5, 100), m, args.seed)) for m in args.sizes]
    for p in args.paths:
        cases.append((Path(p).name, undirected_simple(load_edge_array(p))))
    cores = os.cpu_count()
    print(
        f"# Incremental triangle counting ({spark.sparkContext.master}, {cores} cores, "
        f"Spark {spark.version})\n"
    )
    where = "Spark delta queries" if args.spark_delta else "the driver for small deltas"
    print(f"Delta queries use join={args.join!r}, in {where}; deltas given as {args.input}.\n")
    print(f"command: `{meta['command']}`\n")
    if not args.pathway:
        print(
            f"pathway is not importable by {args.pathway_python} (pip install pathway): "
            "the Pathway comparison is skipped\n"
        )
    recorder = PlanRecorder()
    rows = []
    for n, (label, e) in enumerate(cases):
        rows.append(
            bench_graph(
                spark, label, e, args.deltas, args.ticks, args, recorder if n == 0 else None
            )
        )
        print(f"<!-- done: {label}: {json.dumps(rows[-1], default=str)} -->", file=sys.stderr)

    print(
        f"## Step time against full recompute (median of {args.ticks} ticks; "
        f"{args.deletions:.0%} deletions, the rest insertions)\n"
    )
    cols = [(d, k) for d in args.deltas for k in args.input]
    durable = args.durable
    print(
        "| graph | edges | triangles | initial build | full recompute | "
        + " | ".join(f"step Δ={d} ({k}) | ratio" for d, k in cols)
        + "".join(
            f" | durable Δ={d} | overhead | amortised | overhead" for d in args.deltas if durable
        )
        + " | peak driver RSS |"
    )
    print(
        "|---|---:|---:|---:|---:|"
        + "---:|---:|" * len(cols)
        + ("---:|---:|---:|---:|" * len(args.deltas) if durable else "")
        + "---:|"
    )
    for r in rows:
        cells = [
            r["graph"],
            f"{r['edges']:,}",
            f"{r['triangles']:,}",
            fmt(r["build"]),
            fmt(r["recompute"]),
        ]
        for d, k in cols:
            s = statistics.median(r["by_input"][k][d])
            cells += [f"{fmt(s)}, {r['jobs_by_input'][k][d]} jobs", f"{r['recompute'] / s:.0f}×"]
        for d in args.deltas if durable else []:
            s = statistics.median(r["durable"][d])
            plain = statistics.median(r["paired_plain"][d])
            a, _ = amortised(r, d)
            cells += [fmt(s), f"{(s / plain - 1):+.0%}", fmt(a), f"{(a / plain - 1):+.0%}"]
        peak = r["peak_mb"]
        cells.append("?" if peak is None else f"{peak:,.0f} MB")
        print("| " + " | ".join(cells) + " |")
    print(
        "\n'N jobs': Spark jobs of one step (median over the ticks); the initial build took "
        + ", ".join(f"{r['build_jobs']}" for r in rows)
        + " and the full recompute "
        + ", ".join(f"{r['recompute_jobs']}" for r in rows)
        + " jobs (per graph, in table order).  Peak driver RSS: the Python driver "
        "process's resident memory at its peak during the build and the ticks (the JVM "
        "is another process)."
    )
    for r in rows:
        got = r.get("collect_s") or {}
        if got:
            parts = ", ".join(
                f"Δ={d}: {fmt(statistics.median(v))} "
                f"({r['recompute'] / statistics.median(v):.0f}× under the recompute)"
                for d, v in sorted(got.items())
            )
            print(
                f"\n{r['graph']}: `collect()` of a fresh Spark DataFrame of a tick's rows "
                f"alone, timed apart from the step: {parts}.  A Spark DataFrame tick cannot "
                "be faster than this read."
            )
    if durable:
        print(
            "\nDurable: a tick appends its intent (its deltas) to the view's journal, whose "
            "sync runs in the journal's helper process while the tick computes, then its "
            "commit frame, and waits for that sync; a checkpoint "
            "(Parquet files, a new manifest, an empty journal) comes every `journal_ticks` "
            "ticks or `journal_bytes` of journal.  The durable view and a second plain view "
            "of the same graph take each tick one right after the other; 'overhead' is the "
            "durable median over that plain view's median ("
            + ", ".join(
                f"Δ={d}: {fmt(statistics.median(r['paired_plain'][d]))}"
                for r in rows
                for d in args.deltas
            )
            + ").  'amortised' is the median journaled tick with its share of one checkpoint "
            "tick (measured: the last delta undone and redone with `journal_ticks=0`).  An "
            "fdatasync of a 256-byte append cost "
            + ", ".join(f"{statistics.median(r['fsync']) * 1e3:.2f} ms" for r in rows)
            + " (median of 40, before and after the ticks) during the run; less what it "
            "waited for the disk's sync, a durable tick's median and overhead were "
            + ", ".join(
                f"Δ={d}: {fmt(nosync(r, d))} "
                f"({nosync(r, d) / statistics.median(r['paired_plain'][d]) - 1:+.0%})"
                for r in rows
                for d in args.deltas
            )
            + ".  Timed by the view within the same ticks (`last_step.commit_s`: the "
            "intent, the commit frame and the wait for the sync), the durable work's median "
            "and its share over the rest of the tick (median over the ticks) were "
            + ", ".join(
                f"Δ={d}: {statistics.median(r['commit'][d]) * 1e3:.2f} ms "
                f"({commit_share(r['durable'][d], r['commit'][d]):+.0%})"
                for r in rows
                for d in args.deltas
            )
            + ".  "
            + "; ".join(
                f"{r['graph']} Δ={d}: a tick's intent and commit frame "
                f"{r['frame_bytes'].get(d, 0):,} bytes, a "
                f"checkpoint every {amortised(r, d)[1]:,} ticks, a checkpoint tick "
                f"{fmt(statistics.median(r['checkpoint'][d]))}"
                for r in rows
                for d in args.deltas
            )
            + "."
        )

    if args.spark_state:
        print_spark_state(rows, args.deltas, args.ticks)

    print("\n## Pathway on the same ticks\n")
    if not args.pathway:
        print(
            f"Pathway is not importable by `{args.pathway_python}` (`pip install pathway`, or "
            "pass `--pathway-python` an interpreter that has it); not compared."
        )
    else:
        print(
            "Pathway gets the whole stream at once (initial edges, then one time per tick); "
            f"its time per tick is (run time with {args.pathway_ticks} ticks - run time "
            f"without) / {args.pathway_ticks}.  Pathway runs one worker thread.\n"
        )
        print(
            "| graph | Pathway initial | "
            + " | ".join(
                f"Pathway Δ={d} | sparkfaq Δ={d} | Pathway ÷ sparkfaq" for d in args.deltas
            )
            + " |"
        )
        print("|---|---:|" + "---:|---:|---:|" * len(args.deltas))
        for r in rows:
            pw = r["pathway"]
            if not isinstance(pw, dict):
                print(f"| {r['graph']} | {pw} |" + " |" * (3 * len(args.deltas)))
                continue
            cells = [r["graph"], fmt(pw["initial"])]
            for d in args.deltas:
                p, s = pw["steps"][d], r["steps"][d]
                if p > 0:
                    cells += [fmt(p), fmt(s), f"{p / s:.1f}×"]
                else:  # the extra run time was within the runs' noise
                    cells += ["below the noise", fmt(s), "-"]
            print("| " + " | ".join(cells) + " |")

    fixed = args.deltas[len(args.deltas) // 2]
    print(f"\n## Step time at Δ={fixed} edges as the graph grows\n")
    print("| graph | edges | step | full recompute | delta rule ran in |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['graph']} | {r['edges']:,} | {fmt(r['steps'][fixed])} | "
            f"{fmt(r['recompute'])} | {', '.join(r['where'])} |"
        )

    print(f"\n## Physical plans of one step (Δ={args.deltas[0]}, {rows[0]['graph']})\n")
    for k, v in recorder.summary().items():
        print(f"- {k}: {v}")
    if args.plans:
        Path(args.plans).write_text("\n\n".join(recorder.plans))
        print(f"\n(plans written to {args.plans})")

    meta.update(
        spark=spark.version,
        master=spark.sparkContext.master,
        join=args.join,
        delta_rule_in="Spark" if args.spark_delta else "driver for small deltas",
        input=args.input,
        deletions=args.deletions,
        durable=args.durable,
        ticks=args.ticks,
        deltas=args.deltas,
        pathway=args.pathway,
    )
    csv_path, json_path = write_results(
        results_of(rows, args.deltas, args.ticks), args.out, "incremental", meta
    )
    print(f"\nwritten: {csv_path} and {json_path}")
    return 0


if __name__ == "__main__":
    status = main()
    stop_spark()
    raise SystemExit(status)
