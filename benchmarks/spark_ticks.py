"""Ticks of a Spark-resident triangle view, and ticks given Spark DataFrame deltas.

Issue 42, point 3: a view whose state is in Spark (``state="spark"``) must tick much
faster than recomputing, and a tick whose delta is a Spark DataFrame must cost little
more than Spark's own collect of that delta, in both states.  On the graphs of
``benchmarks/ticks.py`` (Chung–Lu power-law graphs the project did not generate, and
SNAP edge lists given as paths), this script runs, side by side in one session:

* ``IncrementalView(q, state="spark", E=<Spark DataFrame>)`` stepped with pandas
  deltas, then with Spark DataFrame deltas (made from the same pandas frames before
  the timing, by ``spark.createDataFrame``);
* ``IncrementalView(q, E=<pandas frame>)`` (the driver state) stepped with Spark
  DataFrame deltas;
* Spark's own ``toArrow()`` of each Spark delta (the floor a Spark delta costs);
* the recompute of the final graph from a local factor (``Factor.from_pandas``) and from
  a Spark DataFrame (``q.solve(E=sdf)``, the default settings), each the median of two
  warm runs; with ``--past-driver``, also ``faq.settings(local_rows=0)``.

Deltas are those of ``benchmarks/ticks.py`` (30 % uniform deletions).  For each delta
size the script prints p50, p99 and the largest tick, the Spark jobs per tick (median),
the ratios of each recompute to the p50 tick, and tick ÷ collect for Spark deltas.
The count after the ticks is checked against numpy.  Rows go to
``benchmarks/results/spark_ticks.csv`` and ``.json`` (or ``--out DIR``).

Usage::

    python benchmarks/spark_ticks.py --quick
    python benchmarks/spark_ticks.py --edges 1000000 --exponents 2.1 2.3 2.5 --deltas 1 1000
    python benchmarks/spark_ticks.py /work/shared/data/graphs/web-NotreDame.txt.gz --edges 0
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import logging
import os
import statistics
import time
from typing import Any

import numpy as np

from benchmarks._common import (
    Result,
    add_out_argument,
    run_info,
    timed_jobs,
    write_results,
)
from benchmarks.ticks import QUERY, EdgePool, delta_frame, graphs, load, make_delta


class _Fetches(logging.Handler):
    """The base rows each Spark-state tick fetched from Spark and took from the rows kept
    in the driver (the debug records of :func:`incremental.reach.fetch`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.fetched = self.kept = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.fetched += getattr(record, "fetched_rows", 0)
        self.kept += getattr(record, "kept_rows", 0)


def _ticks(
    spark: Any, view: Any, frames: list[Any]
) -> tuple[list[float], list[int], list[tuple[int, int]]]:
    """Seconds, Spark jobs and ``(rows fetched, rows kept)`` of ``view.step(E=f)`` for
    each frame."""
    sc = spark.sparkContext
    times, jobs, rows = [], [], []
    logger = logging.getLogger("faq.incremental")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        for f in frames:
            seen = _Fetches()
            logger.addHandler(seen)
            try:
                secs, _, n = timed_jobs(sc, lambda f=f: view.step(E=f), "tick")
            finally:
                logger.removeHandler(seen)
            times.append(secs)
            jobs.append(n)
            rows.append((seen.fetched, seen.kept))
    finally:
        logger.setLevel(level)
    return times, jobs, rows


def _collects(frames: list[Any]) -> list[float]:
    """Seconds of Spark's own ``toArrow()`` of each frame."""
    out = []
    for f in frames:
        t0 = time.perf_counter()
        f.toArrow()
        out.append(time.perf_counter() - t0)
    return out


def _warm_runs(fn: Any, runs: int = 2) -> tuple[list[float], int]:
    """Seconds of ``runs`` runs of ``fn`` after an untimed one, and its last value."""
    fn()  # warm
    times, got = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        got = int(fn())
        times.append(time.perf_counter() - t0)
    return times, got


def bench_graph(spark: Any, q: Any, g: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Every contender on graph ``g``; the counts checked against numpy."""
    import pandas as pd

    import faq
    from faq import Factor
    from faq.testing import triangle_count_numpy
    from incremental import IncrementalView

    rng = np.random.default_rng(args.seed)
    pool = EdgePool(g.edges, g.n_nodes)
    n = args.ticks
    seq = {d: [make_delta(pool, d, rng, "degree") for _ in range(3 * n)] for d in args.deltas}
    final = pool.current()
    expected = int(triangle_count_numpy(final))
    graph = pd.DataFrame({"src": g.edges[:, 0], "dst": g.edges[:, 1]})
    sdf = spark.createDataFrame(graph, "src bigint, dst bigint")
    t0 = time.perf_counter()
    remote = IncrementalView(q, state="spark", E=sdf)
    build_spark = time.perf_counter() - t0
    t0 = time.perf_counter()
    local = IncrementalView(q, E=graph)
    build_local = time.perf_counter() - t0
    out: dict[str, Any] = {"graph": g, "edges": len(g.edges), "builds": (build_spark, build_local)}
    cells = []
    for d in args.deltas:
        pandas_d = [delta_frame(x) for x in seq[d][:n]]
        spark_d = [spark.createDataFrame(delta_frame(x)) for x in seq[d][n : 2 * n]]
        spark_l = [spark.createDataFrame(delta_frame(x)) for x in seq[d][2 * n :]]
        for x in seq[d][: 2 * n]:  # the driver view catches up with the Spark view
            local.step(E=delta_frame(x))
        t_sp, j_sp, r_sp = _ticks(spark, remote, pandas_d)
        t_ss, j_ss, _ = _ticks(spark, remote, spark_d)
        collect_s = _collects([spark.createDataFrame(delta_frame(x)) for x in seq[d][n : 2 * n]])
        t_ls, j_ls, _ = _ticks(spark, local, spark_l)
        remote.step(E=delta_frame(np.concatenate(seq[d][2 * n :])))
        collect_l = _collects([spark.createDataFrame(delta_frame(x)) for x in seq[d][2 * n :]])
        cells += [
            {
                "delta": d,
                "state": "spark",
                "input": "pandas",
                "t": t_sp,
                "jobs": j_sp,
                "rows": r_sp,
            },
            {
                "delta": d,
                "state": "spark",
                "input": "Spark",
                "t": t_ss,
                "jobs": j_ss,
                "collect": collect_s,
            },  # fmt: skip
            {
                "delta": d,
                "state": "driver",
                "input": "Spark",
                "t": t_ls,
                "jobs": j_ls,
                "collect": collect_l,
            },  # fmt: skip
        ]
        print(f"  {g.label}: Δ={d} done (load {load():.1f})", flush=True)
    got = (int(remote.result().scalar()), int(local.result().scalar()))
    if got != (expected, expected):
        raise AssertionError(f"{g.label}: the views count {got}, numpy {expected}")
    del remote, local
    fin = pd.DataFrame({"src": final[:, 0], "dst": final[:, 1]})
    fsdf = spark.createDataFrame(fin, "src bigint, dst bigint").cache()
    fsdf.count()
    rec = {
        "local factor": _warm_runs(lambda: q.solve(E=Factor.from_pandas(fin)).scalar()),
        "Spark DataFrame": _warm_runs(lambda: q.solve(E=fsdf).scalar()),
    }
    if args.past_driver:

        def past() -> int:
            with faq.settings(local_rows=0):
                return q.solve(E=fsdf).scalar()

        rec["Spark DataFrame, local_rows=0"] = _warm_runs(past, runs=1)
    for name, (_, count) in rec.items():
        if count != expected:
            raise AssertionError(f"{g.label}: recompute ({name}) counts {count}, not {expected}")
    fsdf.unpersist()
    out.update(cells=cells, recompute=rec, triangles=expected)
    return out


def _p(ts: list[float], q: float) -> float:
    return float(np.percentile(ts, q))


def print_graph(row: dict[str, Any]) -> None:
    g = row["graph"]
    rec = {k: statistics.median(v[0]) for k, v in row["recompute"].items()}
    names = list(rec)
    print(f"\n## {g.label}: {row['edges']:,} edges, {row['triangles']:,} triangles\n")
    print(
        "Recompute: "
        + ", ".join(f"{rec[k]:.2f} s ({k})" for k in names)
        + f"; builds {row['builds'][0]:.1f} s (Spark state), {row['builds'][1]:.1f} s (driver)\n"
    )
    head = " | ".join(f"÷ {k}" for k in names)
    print(f"| Δ | state | delta given as | p50 | p99 | max | jobs | {head} | tick ÷ collect |")
    print("|---:|---|---|---:|---:|---:|---:|" + "---:|" * len(names) + "---:|")
    for c in row["cells"]:
        t = c["t"]
        p50 = statistics.median(t)
        ratios = " | ".join(f"{rec[k] / p50:,.1f}×" for k in names)
        col = f"{p50 / statistics.median(c['collect']):.2f}" if "collect" in c else "—"
        print(
            f"| {c['delta']:,} | {c['state']} | {c['input']} | {p50 * 1e3:,.1f} ms | "
            f"{_p(t, 99) * 1e3:,.1f} ms | {max(t) * 1e3:,.1f} ms | "
            f"{statistics.median(c['jobs']):.0f} | {ratios} | {col} |"
        )
    for c in row["cells"]:
        if "rows" in c:
            fetched = [f for f, _ in c["rows"]]
            print(
                f"\nΔ={c['delta']:,}, Spark state: base rows fetched from Spark per tick "
                f"{fetched[0]:,} at the first, median {statistics.median(fetched):,.0f}, "
                f"last {fetched[-1]:,}; taken from the rows kept in the driver: median "
                f"{statistics.median(k for _, k in c['rows']):,.0f}"
            )


def results_of(rows: list[dict[str, Any]]) -> list[Result]:
    out = []
    for row in rows:
        g = row["graph"]
        for name, (times, count) in row["recompute"].items():
            out.append(Result(g.label, f"recompute ({name})", row["edges"], times=times,
                              count=count))  # fmt: skip
        base = statistics.median(row["recompute"]["Spark DataFrame"][0])
        for c in row["cells"]:
            p50 = statistics.median(c["t"])
            extra = {
                "delta": c["delta"],
                "state": c["state"],
                "input": c["input"],
                "p50_s": p50,
                "p99_s": _p(c["t"], 99),
                "max_s": max(c["t"]),
                "collect_p50_s": statistics.median(c["collect"]) if "collect" in c else None,
                "rows_fetched": [f for f, _ in c["rows"]] if "rows" in c else None,
                "rows_kept": [k for _, k in c["rows"]] if "rows" in c else None,
            }
            out.append(
                Result(
                    g.label,
                    f"tick Δ={c['delta']} {c['state']} state, {c['input']} delta",
                    row["edges"],
                    times=c["t"],
                    spark_jobs=int(statistics.median(c["jobs"])),
                    ratio=p50 / base,
                    baseline="recompute (Spark DataFrame)",
                    extra=extra,
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", help="SNAP edge lists (.txt or .txt.gz)")
    p.add_argument("--edges", type=int, default=1_000_000, help="generated size (0: none)")
    p.add_argument("--nodes", type=int, default=None, help="vertices (default: edges / 5)")
    p.add_argument("--exponents", type=float, nargs="*", default=[2.3])
    p.add_argument("--order", choices=("low", "shuffled", "both"), default="low")
    p.add_argument("--deltas", type=int, nargs="+", default=[1, 1000])
    p.add_argument("--ticks", type=int, default=10, help="ticks per delta size and contender")
    p.add_argument("--past-driver", action="store_true", help="also recompute at local_rows=0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="20,000 edges, 4 ticks")
    add_out_argument(p)
    args = p.parse_args(argv)
    if args.quick:
        args.edges = 20_000
        args.ticks = min(args.ticks, 4)
        args.deltas = [d for d in args.deltas if d <= 100] or [1, 100]
    exponents = args.exponents if args.edges else []
    ns = argparse.Namespace(**{**vars(args), "exponents": exponents, "edges": args.edges or 1})
    info = run_info("spark_ticks", argv)
    from faq import query
    from faq.session import local_session

    q = query(QUERY, semiring="counting")
    print(f"# Ticks of `{QUERY}` (counting): the Spark state, and Spark DataFrame deltas\n")
    print(f"`{info['command']}` on {info['date']}, {info['cores']} cores, load {load():.1f}")
    spark = local_session("local[2]")
    rows = []
    for g in graphs(ns):
        rows.append(bench_graph(spark, q, g, args))
        print_graph(rows[-1])
        sys.stdout.flush()
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    csv_path, json_path = write_results(results_of(rows), args.out, "spark_ticks", info)
    print(f"\nWrote {csv_path}, {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
