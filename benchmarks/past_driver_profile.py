"""Where a triangle count past the driver spends its time (issue 38, point 4).

Usage::

    python benchmarks/past_driver_profile.py --quick                 # a small graph (a minute)
    python benchmarks/past_driver_profile.py /work/shared/data/graphs/web-NotreDame.txt.gz
    python benchmarks/past_driver_profile.py --power-edges 1000000

The query, over ``counting`` on the oriented edge list (``u < v``), every relation and
step kept in Spark (``faq.settings(local_rows=0, query_task_rows=0)``: partitioned, not
the whole solve gathered into one task as ``local_rows=0`` alone would, see
:mod:`faq.query_task`)::

    Q() :- E(a, b), E(b, c), E(a, c)

The engine runs it as one partitioned step: a HyperCube shuffle that sends every edge to
the cells that need it (``faq.spark.routing.route``: the tasks that read the edges compute
each edge's cells and pack each cell's rows as Arrow IPC, the relation the three atoms read
going once to each cell with the atoms it serves there; the packs are shuffled by cell),
then the step's runner in each cell (``CellKernel``, in a Python worker, over its unpacked
rows), then the cells' partial counts ⊕-combined.
Each row below measures one part of that on its own, from the same Parquet-backed,
checkpointed DataFrame, in one ``local[2]`` session:

* ``engine``: the whole solve; ``engine: checks + plan`` is its time outside its step
  (the statistics job that gives the planner its row and distinct counts, and planning),
  ``engine: step`` the step as the run's trace times it;
* ``pack + shuffle``: the edges read into the packing tasks (Python workers), packed, and
  the packs shuffled and counted per cell in Spark, no Python worker after the shuffle;
* ``pack + shuffle + unpack``: the same packs handed to a Python worker per cell and
  unpacked, their rows only counted (no kernel): the rows each cell receives are the
  ``routed`` column;
* ``cells' kernel (one thread)``: the packs collected once, then every cell's work run in
  this process, one thread (tables from the packs, the runner, the output batch): the CPU
  the cells spend (two task slots share it); ``cells' kernel, graphblas-masked``: the same
  with GraphBLAS's masked product in every cell, when the planner gave them another runner;
* ``floor``: one job that reads the edges into one Python task and joins nothing;
* ``spark sql``: ``count(*)`` of the three-way self-join of the edges.

Each is one warm-up and the median of ``--repeat`` runs (2), wall-clock seconds.  Every
count is checked against the engine's.  The table gives each part's seconds and its share
of the engine's; written as CSV and JSON (``benchmarks/results/past_driver_profile.*`` or
under ``--out``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import faq
import semirings
from benchmarks._common import Result, add_out_argument, fmt_s, run_info, write_results
from benchmarks.beyond_driver import floor_job
from benchmarks.triangles import SQL
from faq.plan import runners
from faq.rule import VALUE
from faq.spark.partitioned import CellKernel, Source, route
from faq.spark.routing import CELL, unpacked
from faq.testing import NAMED_RULES, power_law_graph

KERNEL_ROWS = 30_000_000
"""Routed rows above which the cells' kernel is not run in this process (memory)."""


def count_unpacked(batches: Any) -> Any:
    """A ``mapInArrow`` function (schema ``n long``) that unpacks a cell's packs and only
    counts their rows."""
    import pyarrow as pa

    n = sum(t.num_rows for by in unpacked(batches).values() for ts in by.values() for t in ts)
    yield pa.RecordBatch.from_pydict({"n": [n]})


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """One warm-up run, then the median seconds of ``repeat`` runs and the last answer."""
    got = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), got


def graphs(args: argparse.Namespace) -> list[tuple[str, np.ndarray]]:
    """The oriented simple edge lists to profile, named."""
    from faq.io import load_edge_array, undirected_simple

    out = [
        (f"power-law m={m:,}", undirected_simple(power_law_graph(max(m // 5, 100), m, seed=1)))
        for m in args.power_edges
    ]
    for p in args.paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lines that are not edges: skipped
            out.append((Path(p).name.split(".")[0], undirected_simple(load_edge_array(p))))
    return out


def profile(spark: Any, name: str, edges: np.ndarray, args: argparse.Namespace) -> list[Result]:
    """The parts of one graph's triangle count past the driver, each measured alone."""
    import pandas as pd

    folder = Path(tempfile.mkdtemp(prefix="faq-profile-"))
    pdf = pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]}).astype("int64")
    pdf[VALUE] = np.ones(len(pdf), dtype=np.int64)
    spark.createDataFrame(pdf).write.parquet(str(folder / "e"))
    df = spark.read.parquet(str(folder / "e")).localCheckpoint()
    m = df.count()
    df.createOrReplaceTempView("e")
    q = faq.query(NAMED_RULES["triangle"], semiring="counting")
    rows: list[tuple[str, float, Any, str]] = []
    with faq.settings(local_rows=0, query_task_rows=0):
        total, run = timed(lambda: q.run(E=df), args.repeat)
    count = run.result.scalar()
    step = sum(s.seconds for s in run.trace.steps)
    (choice,) = [s.choice for s in run.trace.steps if s.choice.shares is not None]
    shares = choice.shares
    rows += [
        ("engine", total, count, f"{choice.runs}, {shares.total} cells"),
        ("engine: checks + plan", max(total - step, 0.0), None, "statistics job, planning"),
        ("engine: step", step, None, "route, shuffle, cells, combine"),
    ]
    frames = [
        (("a", "b"), df.toDF("a", "b", VALUE)),
        (("b", "c"), df.toDF("b", "c", VALUE)),
        (("a", "c"), df.toDF("a", "c", VALUE)),
    ]
    # as the engine routes them: the relation once per cell, with the atoms it serves there
    source = Source(df, ("src", "dst"), ("src", "dst"))
    how = route(frames, shares, "bigint", [source] * 3)
    routed = how.rows
    t, _ = timed(lambda: routed.groupBy(CELL).count().collect(), args.repeat)
    rows.append(("pack + shuffle", t, None, "edges packed in Python, packs shuffled"))
    t, per_cell = timed(lambda: routed.mapInArrow(count_unpacked, "n long").collect(), args.repeat)
    n_routed = sum(r["n"] for r in per_cell)
    note = f"{n_routed:,} routed rows ({n_routed / m:.1f}×), unpacked in the cells"
    rows.append(("pack + shuffle + unpack", t, None, note))
    if n_routed <= KERNEL_ROWS:
        at = routed.toArrow()
        batches = at.to_batches()
        bag = [v for v, _ in frames]
        runs = [(choice.runner, choice.shape)]
        masked = runners.GRAPHBLAS_MASKED
        if choice.runner != masked:  # the library runner the cells were not given
            runs.append((masked, runners.shape_of(masked, bag, ())))
        for k, (runner, shape) in enumerate(runs):
            cell = CellKernel(
                tuple(bag), how.groups, choice.order, (), semirings.COUNTING, "bigint",
                runner=runner, shape=shape,
            )  # fmt: skip
            t, out = timed(lambda cell=cell: list(cell(iter(batches))), args.repeat)
            got = sum(int(b.column(VALUE)[0].as_py()) for b in out)
            part = "cells' kernel (one thread)" if k == 0 else f"cells' kernel, {runner}"
            rows.append((part, t, got, f"{runner} in each cell"))
    t, _ = timed(lambda: floor_job(df), 1)
    rows.append(("floor", t, None, "edges read into one Python task"))
    if args.sql:
        t, got = timed(lambda: int(spark.sql(SQL["triangle"]).collect()[0][0]), args.repeat)
        rows.append(("spark sql", t, got, "three-way self-join"))
    out = []
    for contender, seconds, got, note in rows:
        mismatch = got is not None and got != count
        out.append(
            Result(
                name,
                contender,
                edges=m,
                status="error" if mismatch else "ok",
                times=[seconds],
                count=got,
                ratio=seconds / total if total else None,
                baseline="engine",
                note=("COUNT MISMATCH; " if mismatch else "") + note,
            )
        )
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", help="SNAP edge lists (.txt or .txt.gz)")
    p.add_argument("--power-edges", type=int, nargs="*", default=[], help="power-law graphs")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per part (2)")
    p.add_argument("--quick", action="store_true", help="one 20,000-edge power-law graph")
    p.add_argument(
        "--no-sql", dest="sql", action="store_false",
        help="leave Spark SQL's self-join out (minutes on a skewed graph of millions of edges)",
    )  # fmt: skip
    add_out_argument(p)
    args = p.parse_args(argv)
    if args.quick and not args.power_edges and not args.paths:
        args.power_edges, args.repeat = [20_000], 1
    if not args.power_edges and not args.paths:
        p.error("give edge lists, --power-edges or --quick")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from faq.session import local_session

    spark = local_session("local[2]", **{"spark.driver.memory": "6g"})
    info = run_info("past_driver_profile", argv)
    print(info["command"], "| load", info["load_average_at_start"])
    results: list[Result] = []
    for name, edges in graphs(args):
        part = profile(spark, name, edges, args)
        results += part
        print(f"\n{name}: {len(edges):,} edges")
        print("| part | seconds | share of the engine's | answer | note |")
        print("|---|---:|---:|---:|---|")
        for r in part:
            share = f"{r.ratio:.0%}" if r.ratio is not None else ""
            got = f"{r.count:,}" if r.count is not None else ""
            print(f"| {r.contender} | {fmt_s(r.median_s or 0.0)} | {share} | {got} | {r.note} |")
    csv_path, _ = write_results(results, args.out, "past_driver_profile", info)
    print(f"\nwritten: {csv_path}")
    return 1 if any(r.status == "error" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
