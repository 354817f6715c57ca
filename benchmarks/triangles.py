"""Triangle counting: this engine against binary joins, Spark SQL, DuckDB, GraphBLAS, scipy.

Usage::

    python benchmarks/triangles.py                     # full run (takes a while)
    python benchmarks/triangles.py --quick             # smoke run, small sizes
    python benchmarks/triangles.py --hub-n 1000 10000 --repeat 3 --timeout 300 \\
        /work/shared/data/graphs/CA-GrQc.txt           # extra real edge lists

Workloads, each an oriented edge list (one row ``(u, v)``, ``u < v`` per
undirected edge) so that ``Q() :- E(a, b), E(b, c), E(a, c)`` counts every
triangle once:

* the hub graph family (:func:`faq.graphs.hub_graph`): every binary join order
  builds ≥ n² rows while there are only 2n + 1 triangles;
* an Erdős–Rényi graph and a power-law (Chung–Lu) graph;
* real SNAP edge lists given as paths.

Contenders, all in this one run:

* ``engine``: ``faq.query(...).solve(E=df, join="auto")`` (Generic Join on the cyclic bag);
* ``engine binary``: the same query with ``join="binary"``;
* ``Spark SQL``: the obvious three-way self-join, ``count(*)``;
* ``DuckDB``: the same SQL on a DuckDB table (threads = Spark's cores);
* ``GraphBLAS``: python-graphblas masked ``plus_times`` ``C<A> = A·A`` on the
  oriented adjacency, summed (skipped when python-graphblas is not installed);
* ``scipy``: :func:`faq.graphs.triangle_count_numpy` (degree-ordered ``A²∘A``),
  also the reference count;
* ``networkx``: ``sum(nx.triangles(G).values()) / 3``, small graphs only.

Spark contenders share one ``local_session("local[2]")`` and start from the
same materialised DataFrame; DuckDB from a table; the in-memory contenders
from the numpy edge array (their times include building their matrix or
graph).  Each cell is the median of ``--repeat`` runs (fewer, noted as
``[k runs]``, once the runs so far add up to half the timeout) and its ratio
to the engine (``×2.0`` = twice the engine's time).  Spark and DuckDB runs longer
than ``--timeout`` seconds are cancelled (``cancelAllJobs`` / ``interrupt``)
and reported as ``timeout``; a contender that timed out on a hub graph is not
run on larger ones.  Counts must agree with the reference; a mismatch is
flagged in the table and on stderr, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faq.graphs import (
    hub_graph,
    pairwise_join_sizes,
    power_law_graph,
    random_graph,
    triangle_count_numpy,
)

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
SQL = (
    "SELECT count(*) FROM e e1 JOIN e e2 ON e1.dst = e2.src "
    "JOIN e e3 ON e1.src = e3.src AND e2.dst = e3.dst"
)
CONTENDERS = ("engine", "binary", "sql", "duckdb", "graphblas", "scipy", "networkx")
LABELS = {
    "engine": "engine (auto)",
    "binary": "engine (binary)",
    "sql": "Spark SQL",
    "duckdb": "DuckDB",
    "graphblas": "GraphBLAS",
    "scipy": "scipy",
    "networkx": "networkx",
}


class Timeout(Exception):
    """A run exceeded the time limit and was cancelled."""


@dataclass
class Workload:
    name: str
    edges: np.ndarray
    family: str = ""  # runs of one family get larger: skip after a timeout
    expected: int | None = None  # count known by construction


@dataclass
class Cell:
    times: list[float] = field(default_factory=list)
    count: int | None = None
    status: str = "ok"  # ok | timeout | skipped | error | n/a
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)


# -- running with a time limit -------------------------------------------------------------
def run_limited(fn: Callable[[], Any], timeout: float, cancel: Callable[[], None]) -> Any:
    """Run ``fn`` in a thread; past ``timeout`` seconds call ``cancel`` until it stops."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        deadline = time.monotonic() + 120
        while t.is_alive() and time.monotonic() < deadline:
            cancel()
            t.join(0.5)
        raise Timeout
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- contenders -----------------------------------------------------------------------------
class Contenders:
    """Per-workload setup and one run function per contender."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.spark = None
        self.duck = None
        self.edges: np.ndarray = np.empty((0, 2), dtype=np.int64)
        self.df = None
        self.last_explain = ""
        try:
            import graphblas  # noqa: F401

            self.have_graphblas = True
        except ImportError:
            self.have_graphblas = False

    def needs_spark(self) -> bool:
        return bool({"engine", "binary", "sql"} & set(self.args.contenders))

    def start(self) -> None:
        if self.needs_spark():
            from faq.session import local_session

            self.spark = local_session("local[2]")

    def load(self, edges: np.ndarray) -> None:
        """Make the workload's edges available to every contender (not timed)."""
        self.edges = edges
        if self.spark is not None:
            from faq.io import edges_dataframe

            df = edges_dataframe(edges, self.spark, ("src", "dst"))
            self.df = df.localCheckpoint(eager=True)
            self.df.createOrReplaceTempView("e")
        if "duckdb" in self.args.contenders:
            import duckdb
            import pandas as pd

            if self.duck is not None:
                self.duck.close()
            self.duck = duckdb.connect()  # a fresh one: no state left by an interrupted run
            self.duck.execute(f"SET threads = {self.args.duckdb_threads}").fetchall()
            pdf = pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]})
            self.duck.register("e_in", pdf)
            self.duck.execute("CREATE OR REPLACE TABLE e AS SELECT * FROM e_in").fetchall()
            self.duck.unregister("e_in")

    def available(self, name: str, m: int) -> str | None:
        """None when ``name`` can run on ``m`` edges, else the reason it cannot."""
        if name == "graphblas" and not self.have_graphblas:
            return "not installed"
        if name == "networkx" and m > self.args.nx_max_edges:
            return f"> {self.args.nx_max_edges:,} edges"
        return None

    def run(self, name: str, timeout: float) -> int:
        if name in ("engine", "binary", "sql"):
            fn = getattr(self, f"_{name}")
            return run_limited(fn, timeout, self.spark.sparkContext.cancelAllJobs)
        if name == "duckdb":
            return run_limited(self._duckdb, timeout, self.duck.interrupt)
        return getattr(self, f"_{name}")()

    # Spark
    def _engine(self, join: str = "auto") -> int:
        from faq import query

        q = query(TRIANGLE, semiring="counting")
        n = q.solve(E=self.df, join=join, trace=self.args.trace).scalar()
        self.last_explain = q.explain(E=self.df, join=join)
        return int(n)

    def _binary(self) -> int:
        return self._engine("binary")

    def _sql(self) -> int:
        return int(self.spark.sql(SQL).collect()[0][0])

    # others
    def _duckdb(self) -> int:
        return int(self.duck.execute(SQL).fetchall()[0][0])

    def _graphblas(self) -> int:
        from graphblas import Matrix, semiring

        e = self.edges
        k = int(e.max()) + 1 if len(e) else 1
        A = Matrix.from_coo(e[:, 0], e[:, 1], np.ones(len(e), dtype=np.int64), nrows=k, ncols=k)
        C = A.mxm(A, semiring.plus_times).new(mask=A.S)
        v = C.reduce_scalar().value
        return int(v) if v is not None else 0

    def _scipy(self) -> int:
        return triangle_count_numpy(self.edges)

    def _networkx(self) -> int:
        import networkx as nx

        G = nx.Graph()
        G.add_edges_from(self.edges.tolist())
        return sum(nx.triangles(G).values()) // 3


# -- workloads ------------------------------------------------------------------------------
def workloads(args: argparse.Namespace) -> list[Workload]:
    out: list[Workload] = []
    for n in args.hub_n:
        out.append(Workload(f"hub n={n:,}", hub_graph(n), "hub", 2 * n + 1))
    if args.random_edges:
        e = random_graph(args.random_nodes, args.random_edges, seed=args.seed)
        out.append(Workload(f"random {args.random_nodes:,} nodes", e))
    if args.power_edges:
        e = power_law_graph(args.power_nodes, args.power_edges, seed=args.seed)
        out.append(Workload(f"power-law {args.power_nodes:,} nodes", e))
    from faq.io import load_edge_array, undirected_simple

    for p in args.paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SNAP comment lines
            e = undirected_simple(load_edge_array(p))
        out.append(Workload(Path(p).stem, e))
    return out


def fmt_s(x: float) -> str:
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.2f} s" if x < 100 else f"{x:.0f} s"


def fmt_rows(x: int) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return str(x)


def fmt_ratio(r: float) -> str:
    if r >= 0.1:
        return f"×{r:.2g}" if r < 10 else f"×{r:.0f}"
    return f"×1/{1 / r:.2g}" if r > 0.01 else f"×1/{1 / r:.0f}"


def cell_text(c: Cell, base: Cell | None, timeout: float, truth: int) -> str:
    if c.status == "timeout":
        return f"timeout (> {timeout:g} s)"
    if c.status in ("skipped", "n/a", "error"):
        return f"{c.status}" + (f" ({c.note})" if c.note else "")
    text = fmt_s(c.median)
    if c.note:
        text += f" {c.note}"
    if base is not None and base.status == "ok" and base.times and c is not base:
        text += f" ({fmt_ratio(c.median / base.median)})"
    if c.count != truth:
        text = f"**WRONG: {c.count}** " + text
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="*", help="SNAP edge lists to add (optional)")
    p.add_argument("--hub-n", type=int, nargs="*", default=[1000, 3000, 10000, 30000])
    p.add_argument("--random-nodes", type=int, default=50_000)
    p.add_argument("--random-edges", type=int, default=300_000, help="0 to skip")
    p.add_argument("--power-nodes", type=int, default=100_000)
    p.add_argument("--power-edges", type=int, default=300_000, help="0 to skip")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="runs per cell; the median is shown")
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds per Spark/DuckDB run (300; quick: 60)"
    )
    p.add_argument("--nx-max-edges", type=int, default=200_000)
    p.add_argument("--duckdb-threads", type=int, default=2)
    p.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)}",
    )
    p.add_argument("--trace", action="store_true", help="engine: count every intermediate")
    p.add_argument("--explain", action="store_true", help="print the engine's plan per graph")
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, one repeat")
    args = p.parse_args(argv)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in args.contenders if c not in CONTENDERS]
    if bad:
        p.error(f"unknown contender(s) {bad}; choose from {', '.join(CONTENDERS)}")
    if args.quick:
        args.hub_n = [n for n in args.hub_n if n <= 300] or [100, 300]
        args.random_nodes, args.random_edges = 2_000, min(args.random_edges, 10_000)
        args.power_nodes, args.power_edges = 2_000, min(args.power_edges, 10_000)
        args.repeat = 1
        args.timeout = 60.0 if args.timeout is None else args.timeout
    args.timeout = 300.0 if args.timeout is None else args.timeout

    t_gen = time.perf_counter()
    loads = workloads(args)
    t_gen = time.perf_counter() - t_gen
    c = Contenders(args)
    c.start()
    names = [n for n in CONTENDERS if n in args.contenders]

    print(f"# Triangle counting benchmark  ({time.strftime('%Y-%m-%d %H:%M')})")
    given = sys.argv[1:] if argv is None else argv
    print(f"command: python benchmarks/triangles.py {' '.join(given)}")
    spark_v = c.spark.version if c.spark is not None else "-"
    print(
        f"cores: {os.cpu_count()}, load average at start: "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, Spark {spark_v} local[2], "
        f"repeat {args.repeat}, timeout {args.timeout:g} s; graphs generated in {t_gen:.1f} s"
    )
    if not c.have_graphblas and "graphblas" in names:
        print("python-graphblas is not installed: GraphBLAS column skipped")

    # warm up the JVM and Python paths so the first workload is not penalised
    t_warm = time.perf_counter()
    c.load(hub_graph(20))
    for n in names:
        if c.available(n, 80) is None:
            try:
                c.run(n, args.timeout)
            except Timeout:
                print(f"warm-up: {LABELS[n]} timed out on hub n=20 (> {args.timeout:g} s)")
            except Exception as exc:  # noqa: BLE001 - the measured runs report it again
                print(f"warm-up: {LABELS[n]} failed: {exc!r}"[:500])
    print(f"warm-up (every contender on hub n=20): {time.perf_counter() - t_warm:.1f} s")

    results: dict[str, dict[str, Cell]] = {}
    truths: dict[str, int] = {}
    timed_out_in: dict[tuple[str, str], str] = {}
    mismatches: list[str] = []
    for w in loads:
        m = len(w.edges)
        truth = triangle_count_numpy(w.edges)
        if w.expected is not None and truth != w.expected:
            mismatches.append(f"{w.name}: reference {truth} != construction {w.expected}")
        truths[w.name] = truth
        c.load(w.edges)
        row: dict[str, Cell] = {}
        print(f"\n{w.name}: {m:,} edges, {truth:,} triangles", flush=True)
        for n in names:
            cell = Cell()
            row[n] = cell
            why = c.available(n, m)
            if why is not None:
                cell.status, cell.note = "n/a", why
                continue
            if (w.family, n) in timed_out_in:
                cell.status, cell.note = "skipped", f"timeout at {timed_out_in[(w.family, n)]}"
                continue
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                try:
                    got = c.run(n, args.timeout)
                except Timeout:
                    if cell.times:  # an earlier run finished: report it, note the timeout
                        cell.note = f"[{len(cell.times)} run(s); one more > {args.timeout:g} s]"
                        break
                    cell.status = "timeout"
                    if w.family:
                        timed_out_in[(w.family, n)] = w.name
                    break
                except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                    cell.status, cell.note = "error", type(exc).__name__
                    print(f"  {LABELS[n]}: ERROR {exc!r}"[:2000], file=sys.stderr)
                    break
                cell.times.append(time.perf_counter() - t0)
                cell.count = got
                if got != truth:
                    msg = f"{w.name}: {LABELS[n]} counted {got}, reference (scipy) {truth}"
                    mismatches.append(msg)
                    print(f"  !!! COUNT MISMATCH: {msg}", file=sys.stderr)
                if sum(cell.times) > args.timeout / 2:
                    break  # enough: the median of what ran
            if len(cell.times) < args.repeat and cell.status == "ok" and not cell.note:
                cell.note = f"[{len(cell.times)} run{'s' * (len(cell.times) > 1)}]"
            shown = cell_text(cell, None, args.timeout, truth)
            runs = ", ".join(f"{t:.2f}" for t in cell.times)
            print(f"  {LABELS[n]:16s} {shown}" + (f"   runs: {runs}" if runs else ""), flush=True)
            if n == "engine" and args.explain and cell.status == "ok":
                print("    " + c.last_explain.replace("\n", "\n    "))
        results[w.name] = row
        pj = pairwise_join_sizes(w.edges)
        results[w.name]["__pairwise"] = Cell(count=min(pj.values()))

    print("\n## Results\n")
    header = ["graph", "edges", "triangles", "smallest pairwise join"] + [LABELS[n] for n in names]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for w in loads:
        row = results[w.name]
        base = row.get("engine")
        cells = [cell_text(row[n], base, args.timeout, truths[w.name]) for n in names]
        pairwise = fmt_rows(row["__pairwise"].count or 0)
        print(
            f"| {w.name} | {len(w.edges):,} | {truths[w.name]:,} | {pairwise} | "
            + " | ".join(cells)
            + " |"
        )
    print(
        "\nMedian wall-clock seconds; (×r) = time / engine (auto) time. "
        "'smallest pairwise join' = rows of the cheapest first join of any binary plan."
    )
    if mismatches:
        print("\n!!! COUNT MISMATCHES:\n  " + "\n  ".join(mismatches), file=sys.stderr)
        print("\n**COUNT MISMATCHES: " + "; ".join(mismatches) + "**")
        return 1
    print("All counts agree with the scipy reference.")
    return 0


if __name__ == "__main__":
    status = main()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    sys.exit(status)
