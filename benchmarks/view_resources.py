"""What a long-running Spark-resident view holds: cached blocks, storage memory, temp files.

A Spark-resident triangle-counting view (``IncrementalView(tri, state="spark")``)
runs ``--ticks`` ticks of small edge changes (two insertions and one deletion
of a present edge each), and every ``--every`` ticks the script prints, as a
Markdown table:

* the cached RDD blocks of the session (``getRDDStorageInfo``);
* the storage memory in use (cached blocks plus broadcast variables, from
  ``getExecutorMemoryStatus``);
* the files and bytes under the session's ``spark.local.dir`` (a fresh temp
  folder: shuffle files, blocks spilled to disk);
* the driver JVM's heap in use after a full collection, and the Python
  process's resident memory;
* the median step time since the previous row, and the mean time per tick the
  view spent finding and freeing the checkpoints it replaced.

Contenders, side by side in one run (one session, one after the other):

``view frees its checkpoints``
    the engine as it is: each commit frees the checkpoints it replaces
    (:func:`faq.session.free_checkpoints`), the rest waits on Spark's cleaner;
``cleaner only``
    the same view with that freeing switched off (the behaviour before it):
    every old checkpoint waits on Spark's cleaner, helped by both garbage
    collectors every ``gc_ticks`` ticks (a setting);
``Spark delta queries``
    ``view.local = False``: every tick's delta queries run as Spark jobs
    (shuffles, broadcasts), for ``--spark-ticks`` ticks.

Each view's count is checked against :func:`faq.testing.triangle_count_numpy`
at the end.  The rows go to ``benchmarks/results/view_resources.csv`` and
``.json`` (or under ``--out DIR``); ``median_s`` is the median step time of the
window that ends at that tick.

Usage::

    python benchmarks/view_resources.py                  # 1000 ticks (about 15 min)
    python benchmarks/view_resources.py --ticks 300 --every 30 --spark-ticks 0
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
import gc
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks._common import Result, add_out_argument, run_info, write_results

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"


def _cached_blocks(sc: Any) -> int:
    infos = sc._jsc.sc().getRDDStorageInfo()
    return sum(int(i.numCachedPartitions()) for i in infos)


def _memory_used(sc: Any) -> int:
    """Bytes of storage memory in use over all block managers (cached blocks, broadcasts)."""
    status = sc._jsc.sc().getExecutorMemoryStatus().iterator()
    used = 0
    while status.hasNext():
        pair = status.next()._2()
        used += int(pair._1()) - int(pair._2())
    return used


def _files(folder: str) -> tuple[int, int]:
    count = size = 0
    for root, _, files in os.walk(folder):
        for f in files:
            try:
                size += os.path.getsize(os.path.join(root, f))
                count += 1
            except OSError:  # removed by Spark while walking
                pass
    return count, size


def _heap_used(sc: Any) -> int:
    """Bytes of the driver JVM's heap that are reachable (measured after a full collection)."""
    sc._jvm.java.lang.System.gc()
    rt = sc._jvm.java.lang.Runtime.getRuntime()
    return int(rt.totalMemory()) - int(rt.freeMemory())


def _rss() -> int:
    """The resident memory of this (driver) process, in bytes."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settled(sc: Any) -> int:
    """Cached blocks once Spark's cleaner (a background thread) is idle."""
    last, now = -1, _cached_blocks(sc)
    for _ in range(20):
        if now == last:
            break
        time.sleep(0.1)
        last, now = now, _cached_blocks(sc)
    return now


def _graph(n_nodes: int, n_edges: int, seed: int) -> set[tuple[int, int]]:
    from faq.testing import random_graph

    return {(int(u), int(v)) for u, v in random_graph(n_nodes, n_edges, seed=seed).tolist()}


def _delta(edges: set[tuple[int, int]], n_nodes: int, rng: np.random.Generator) -> np.ndarray:
    """Two insertions of absent edges and one deletion of a present one."""
    present = sorted(edges)
    gone = present[int(rng.integers(0, len(present)))]
    new: set[tuple[int, int]] = set()
    while len(new) < 2:
        u, v = (int(x) for x in rng.integers(0, n_nodes, 2))
        e = (min(u, v), max(u, v))
        if u != v and e not in edges:
            new.add(e)
    rows = [(*gone, -1)] + [(u, v, 1) for u, v in sorted(new)]
    return np.asarray(rows, dtype=np.int64)


def run(
    spark: Any,
    contender: str,
    ticks: int,
    every: int,
    local_dir: str,
    n_nodes: int,
    n_edges: int,
) -> list[Result]:
    """One contender's rows: a measurement every ``every`` ticks."""
    import incremental.spark_keyed as spark_keyed
    from faq import Factor, query
    from faq.session import release_unreferenced
    from faq.testing import triangle_count_numpy
    from incremental import IncrementalView

    sc = spark.sparkContext
    rng = np.random.default_rng(7)
    edges = _graph(n_nodes, n_edges, seed=1)
    tri = query(TRIANGLE, semiring="counting")
    free, settle = spark_keyed.free_checkpoints, spark_keyed.SparkContext.settle
    if contender == "cleaner only":
        spark_keyed.free_checkpoints = lambda *_: None
    freeing = [0.0]

    def timed_settle(self: Any, live: set[int]) -> None:
        t0 = time.perf_counter()
        settle(self, live)
        freeing[0] += time.perf_counter() - t0

    spark_keyed.SparkContext.settle = timed_settle
    rows: list[Result] = []
    view = None
    try:
        E = Factor.from_dict(dict.fromkeys(sorted(edges), 1), ("a", "b"), "counting")
        view = IncrementalView(tri, state="spark", E=E)
        view.local = contender != "Spark delta queries"
        times: list[float] = []
        workload = f"random graph {n_nodes} nodes, {n_edges} edges"
        for t in range(1, ticks + 1):
            d = _delta(edges, n_nodes, rng)
            delta = Factor.from_dict({(u, v): w for u, v, w in d.tolist()}, ("a", "b"), "integer")
            t0 = time.perf_counter()
            view.step(E=delta)
            times.append(time.perf_counter() - t0)
            for u, v, w in d.tolist():
                (edges.add if w > 0 else edges.discard)((u, v))
            if t % every == 0 or (t == ticks and contender != "warm-up"):
                files, size = _files(local_dir)
                row = Result(
                    workload,
                    contender,
                    edges=len(edges),
                    times=[statistics.median(times)],
                    extra={
                        "tick": t,
                        "freeing_ms": round(freeing[0] / len(times) * 1000, 2),
                        "cached_blocks": _settled(sc),
                        "storage_mb": round(_memory_used(sc) / 2**20, 2),
                        "temp_files": files,
                        "temp_mb": round(size / 2**20, 2),
                        "jvm_heap_mb": round(_heap_used(sc) / 2**20, 1),
                        "python_rss_mb": round(_rss() / 2**20, 1),
                    },
                )
                rows.append(row)
                print(_line(row), flush=True)
                times, freeing[0] = [], 0.0
        want = triangle_count_numpy(np.asarray(sorted(edges), dtype=np.int64))
        got = view.result().scalar()
        if got != want:
            raise AssertionError(f"{contender}: the view counts {got} triangles, want {want}")
        if rows:
            rows[-1].count = int(got)
    finally:
        spark_keyed.free_checkpoints, spark_keyed.SparkContext.settle = free, settle
        view = None  # drop the view before collecting, so its checkpoints can go
        gc.collect()
        release_unreferenced(spark)
    return rows


HEADER = (
    "| contender | tick | step (median) | freeing | cached blocks | storage MB | temp files "
    "| temp MB | JVM heap MB | Python RSS MB |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _line(r: Result) -> str:
    x = r.extra
    return (
        f"| {r.contender} | {x['tick']} | {r.median_s * 1000:.0f} ms | {x['freeing_ms']} ms "
        f"| {x['cached_blocks']} "
        f"| {x['storage_mb']} | {x['temp_files']} | {x['temp_mb']} | {x['jvm_heap_mb']} "
        f"| {x['python_rss_mb']} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ticks", type=int, default=1000, help="ticks per contender (default 1000)")
    p.add_argument("--every", type=int, default=100, help="ticks between rows (default 100)")
    p.add_argument(
        "--spark-ticks",
        type=int,
        default=200,
        help="ticks of the Spark-delta-query contender (default 200; 0 skips it)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=100,
        help="ticks of an unrecorded view run first, so that no contender pays for the "
        "JVM's warm-up (default 100)",
    )
    p.add_argument("--nodes", type=int, default=2000, help="nodes of the random graph")
    p.add_argument("--edges", type=int, default=10000, help="edges of the random graph")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the session (repeatable), e.g. spark.ui.retainedJobs=50",
    )
    add_out_argument(p)
    args = p.parse_args(argv)
    if args.ticks < 1 or args.every < 1 or args.spark_ticks < 0:
        p.error("--ticks and --every must be positive, --spark-ticks at least 0")
    bad = [c for c in args.conf if "=" not in c]
    if bad:
        p.error(f"--conf takes KEY=VALUE, got {bad}")
    conf = dict(c.split("=", 1) for c in args.conf)

    from faq.session import local_session

    info = run_info("view_resources", argv)
    print(
        f"# {info['command']}  ({info['date']}, {info['cores']} cores, "
        f"load {info['load_average_at_start']})"
    )
    local_dir = tempfile.mkdtemp(prefix="view-resources-")
    spark = local_session("local[2]", **{"spark.local.dir": local_dir, **conf})
    files, size = _files(local_dir)
    print(
        f"\nsession at start: {_settled(spark.sparkContext)} cached blocks, "
        f"{files} temp files ({size / 2**20:.2f} MB) under {local_dir}\n"
    )
    if args.warmup:
        run(spark, "warm-up", args.warmup, args.warmup + 1, local_dir, args.nodes, args.edges)
    print(HEADER, flush=True)
    results: list[Result] = []
    plan = [("view frees its checkpoints", args.ticks), ("cleaner only", args.ticks)]
    if args.spark_ticks:
        plan.append(("Spark delta queries", args.spark_ticks))
    for contender, ticks in plan:
        results += run(spark, contender, ticks, args.every, local_dir, args.nodes, args.edges)
    csv_path, json_path = write_results(results, args.out, "view_resources", info)
    print(f"\nwrote {csv_path} and {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
