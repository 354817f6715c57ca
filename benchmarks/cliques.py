"""4-cliques in the driver: the engine against DuckDB's SQL self-join (issue 38, point 5).

Usage::

    python benchmarks/cliques.py --quick                  # generated graphs (seconds)
    python benchmarks/cliques.py /work/shared/data/graphs/CA-GrQc.txt \\
        /work/shared/data/graphs/CA-HepTh.txt             # SNAP edge lists
    python benchmarks/cliques.py --snap /work/shared/data/graphs --timeout 300

The query, over ``counting`` on the undirected simple graph oriented ``u < v`` (one row
per edge, so every match is one 4-clique ``a < b < c < d``)::

    Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)

No single library operation counts 4-cliques; the peer is the same six-way self-join in
SQL, run by DuckDB (:data:`benchmarks.triangles.SQL`).

Workloads: edge lists given as paths (``.txt`` or ``.txt.gz``, SNAP format: comments,
self-loops and edges in both directions are fine) or every ``*.txt`` and ``*.txt.gz`` of
``--snap DIR``, and Chung–Lu power-law graphs of ``--power-edges`` edges
(:func:`faq.testing.power_law_graph`; default none, ``--quick``: 3,000 and 20,000),
written to a temporary edge list so that every graph is read the same way.
They run from the smallest to the largest.

Contenders, in one process:

* ``engine``: the graph read once, before the clock, as a user reads it,
  ``E = faq.io.read(path, vars=("a", "b"), simple=True)`` (its seconds are the column
  ``read_s``); each run is ``query(rule, semiring="counting").run(E=E,
  backend="driver").result.scalar()``;
* ``engine-fresh``: the same with the factor made inside each run from the simple edges
  as a pandas frame (``Factor.from_pandas``), so nothing a factor remembers between runs
  is reused;
* ``duckdb``: ``count(*)`` of the self-join of the table ``e(src, dst)`` of the same edges,
  built before the clock; ``--duckdb-threads`` (2, the machine's cores) and
  ``--duckdb-memory``;
* ``numpy``: the reference counter (:func:`benchmarks.triangles.clique_count_numpy`), timed
  too; every other count is checked against it (a mismatch is flagged and makes the
  exit status 1).

Each cell is ``--warmups`` un-timed runs (1) and the median of ``--repeat`` timed runs (2),
wall-clock seconds, with the median CPU seconds of the process (all its threads: DuckDB
runs ``--duckdb-threads``, the engine's driver kernel one; column ``cpu_s``); no further
run starts once a cell's runs add up to half the timeout.  A run longer than
``--timeout`` seconds (300; quick: 60) is a ``timeout``: DuckDB's is interrupted; the
engine's driver kernel (and the numpy counter) cannot be cancelled, so the script waits
for the run to end (at most the timeout again, and at least a minute; past that the
remaining cells are skipped) before it measures anything else, and reports the cell as a
timeout.  A contender that timed out is skipped on the later, larger graphs.  The
engine's ``explain`` of its last run is printed with ``--explain``; ``--profile N`` runs
the engine once more per graph under cProfile and prints its N most expensive
functions.  The table gives per graph each contender's time and DuckDB ÷ engine (issue
38's target: at least 2); the load average is printed with every graph.  Written as CSV
and JSON (``benchmarks/results/cliques.csv`` and ``.json``, or under ``--out``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import os
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._common import (
    Result,
    Timeout,
    add_out_argument,
    fmt_ratio,
    fmt_s,
    missing_note,
    optional_import,
    profile_text,
    run_info,
    run_limited,
    write_results,
)
from benchmarks.triangles import QUERIES, SQL, clique_count_numpy
from faq import Factor, query
from faq.io import read
from faq.testing import power_law_graph

RULE = QUERIES["4clique"]
CONTENDERS = ("engine", "engine-fresh", "duckdb", "numpy")
LABELS = {
    "engine": "engine (driver)",
    "engine-fresh": "engine (Factor.from_pandas in the run)",
    "duckdb": "DuckDB",
    "numpy": "numpy reference",
}
TARGET = 2.0
"""Issue 38's target: the engine at least this many times faster than DuckDB."""


@dataclass
class Graph:
    """A graph to count on: its edge list, the engine's factor and the simple edges."""

    name: str
    path: Path
    factor: Factor
    edges: pd.DataFrame  # the simple graph, one row (a, b) with a < b per edge
    read_s: float
    truth: int | None = None
    results: dict[str, Result] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return len(self.edges)


def load(name: str, path: Path) -> Graph:
    """The graph at ``path`` read as the engine's user reads it (timed), and its edges."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # malformed lines: counted by the reader, not fatal
        E = read(path, vars=("a", "b"), simple=True, strict=False)
    seconds = time.perf_counter() - t0
    return Graph(name, path, E, E.to_pandas()[["a", "b"]], seconds)


def snap_paths(folder: str) -> list[str]:
    """Every ``*.txt`` and ``*.txt.gz`` edge list of ``folder``, sorted by name."""
    p = Path(folder)
    if not p.is_dir():
        raise FileNotFoundError(f"--snap: {folder!r} is not a folder")
    return [str(x) for x in sorted([*p.glob("*.txt"), *p.glob("*.txt.gz")])]


def write_edge_list(edges: np.ndarray, path: Path) -> Path:
    """``edges`` as a whitespace-separated edge list."""
    np.savetxt(path, edges, fmt="%d", delimiter=" ")
    return path


class Bench:
    """The contenders' runs, the timeouts and the skip rule."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.duckdb = optional_import("duckdb")
        self.duck: Any = None
        self.timed_out: set[str] = set()
        self.stuck: str | None = None  # an engine run that would not end
        self.mismatches: list[str] = []
        self.last_run: Any = None

    def prepare(self, g: Graph) -> None:
        """DuckDB's table of the graph's edges (not timed)."""
        if "duckdb" not in self.args.contenders or self.duckdb is None:
            return
        if self.duck is not None:
            self.duck.close()
        self.duck = self.duckdb.connect()  # fresh: nothing left from an interrupted run
        self.duck.execute(f"SET threads = {self.args.duckdb_threads}").fetchall()
        self.duck.execute(f"SET memory_limit = '{self.args.duckdb_memory}'").fetchall()
        frame = g.edges.rename(columns={"a": "src", "b": "dst"})
        self.duck.register("e_in", frame)
        self.duck.execute("CREATE OR REPLACE TABLE e AS SELECT * FROM e_in").fetchall()
        self.duck.unregister("e_in")

    def fn(self, name: str, g: Graph) -> Callable[[], int]:
        """One run of contender ``name`` on ``g``: its count."""

        def engine(E: Factor) -> int:
            run = query(RULE, semiring="counting").run(E=E, backend="driver")
            self.last_run = run
            return int(run.result.scalar())

        if name == "engine":
            return lambda: engine(g.factor)
        if name == "engine-fresh":
            return lambda: engine(Factor.from_pandas(g.edges, vars=("a", "b")))
        if name == "duckdb":
            return lambda: int(self.duck.execute(SQL["4clique"]).fetchall()[0][0])
        edges = g.edges.to_numpy()
        return lambda: clique_count_numpy(edges, 4)

    def once(self, name: str, g: Graph) -> tuple[int, float, float]:
        """One timed run, under the timeout: ``(count, seconds, CPU seconds)``."""
        fn = self.fn(name, g)

        def timed() -> tuple[int, float, float]:
            c0, t0 = time.process_time(), time.perf_counter()
            got = fn()
            return got, time.perf_counter() - t0, time.process_time() - c0

        if name == "duckdb":
            return run_limited(timed, self.args.timeout, self.duck.interrupt)
        # the kernel cannot be cancelled: wait for it to end before measuring more
        wait = max(self.args.timeout, 60.0)
        try:
            return run_limited(timed, self.args.timeout, lambda: None, wait=wait)
        except Timeout as exc:
            if exc.still_running:
                self.stuck = f"{LABELS[name]} on {g.name} still running"
            raise

    def measure(self, name: str, g: Graph) -> Result:
        """Warm-up and timed runs of ``name`` on ``g``: one cell."""
        a = self.args
        res = Result(g.name, LABELS[name], edges=g.m, extra={"read_s": round(g.read_s, 4)})
        why = None
        if name == "duckdb" and self.duckdb is None:
            why = missing_note("duckdb", "the DuckDB column")
        elif name in self.timed_out:
            why = "timed out on a smaller graph"
        elif self.stuck is not None:
            why = f"not run: {self.stuck}"
        if why is not None:
            res.status, res.note = "skipped", why
            return res
        spent = 0.0
        cpu: list[float] = []
        for i in range(a.warmups + a.repeat):
            try:
                got, dt, dc = self.once(name, g)
            except Timeout:
                self.timed_out.add(name)
                if res.times:
                    res.note = f"[{res.runs} run(s); one more cancelled at {a.timeout:g} s]"
                else:
                    res.status, res.note = "timeout", f"over {a.timeout:g} s"
                break
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                res.status, res.note = "error", f"{type(exc).__name__}: {exc}".splitlines()[0]
                break
            spent += dt
            res.count = got
            if g.truth is not None and got != g.truth:
                msg = f"{g.name}: {LABELS[name]} counted {got:,}, reference {g.truth:,}"
                if msg not in self.mismatches:
                    self.mismatches.append(msg)
                    print(f"\n  !!! COUNT MISMATCH: {msg}", file=sys.stderr)
            if i < a.warmups:
                res.extra["warmup_s"] = round(dt, 4)
                if dt > a.timeout / 2:  # the warm-up alone is the measurement
                    res.times, cpu = [dt], [dc]
                    res.note = "cold run only (the warm-up took over half the timeout)"
                    break
                continue
            res.times.append(dt)
            cpu.append(dc)
            if spent > a.timeout / 2 and i < a.warmups + a.repeat - 1:
                res.note = f"[{res.runs} of {a.repeat} runs: past half the timeout]"
                break
        res.extra["times_s"] = [round(t, 4) for t in res.times]
        if cpu:
            res.extra["cpu_s"] = round(statistics.median(cpu), 4)
        return res


# -- the table -------------------------------------------------------------------------------
def cell_text(r: Result | None) -> str:
    if r is None:
        return ""
    if r.status != "ok" or r.median_s is None:
        return f"{r.status}" + (f" ({r.note})" if r.note else "")
    text = fmt_s(r.median_s)
    if "cpu_s" in r.extra:
        text += f" (CPU {fmt_s(r.extra['cpu_s'])})"
    if r.note:
        text += f" {r.note}"
    return text


def duck_over_engine(g: Graph) -> float | None:
    """DuckDB's median ÷ the engine's, when both finished."""
    e, d = g.results.get("engine"), g.results.get("duckdb")
    if e is None or d is None or e.status != "ok" or d.status != "ok":
        return None
    return (d.median_s or 0.0) / (e.median_s or 1e-12)


def table(graphs: list[Graph], names: list[str], timeout: float) -> str:
    """The Markdown table: per graph each contender, and DuckDB ÷ engine."""
    head = ["graph", "edges", "4-cliques", "read_s", *(LABELS[n] for n in names)]
    head.append(f"DuckDB ÷ engine (target ≥ {TARGET:g})")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for g in graphs:
        truth = f"{g.truth:,}" if g.truth is not None else "?"
        cells = [cell_text(g.results.get(n)) for n in names]
        x = duck_over_engine(g)
        if x is not None:
            ratio = f"{x:.2f}" + (" (met)" if x >= TARGET else " **(missed)**")
        elif (d := g.results.get("duckdb")) is not None and d.status == "timeout":
            e = g.results.get("engine")
            ratio = f"> {timeout / e.median_s:.1f}" if e and e.median_s else ""
        else:
            ratio = ""
        lines.append(
            f"| {g.name} | {g.m:,} | {truth} | {fmt_s(g.read_s)} | " + " | ".join(cells)
            + f" | {ratio} |"
        )  # fmt: skip
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="*", help="edge lists (SNAP format, .txt or .txt.gz)")
    p.add_argument("--snap", metavar="DIR", help="add every *.txt edge list of this folder")
    p.add_argument(
        "--power-edges", type=int, nargs="*", default=None,
        help="edge counts of generated power-law graphs (none; quick: 3000 20000)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=2, help="timed runs per cell (2)")
    p.add_argument("--warmups", type=int, default=1, help="un-timed runs before them (1)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (300; quick: 60)")
    p.add_argument("--duckdb-threads", type=int, default=2)
    p.add_argument("--duckdb-memory", default="8GB", help="DuckDB memory_limit (8GB)")
    p.add_argument(
        "--contenders", default=",".join(CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)}",
    )  # fmt: skip
    p.add_argument("--explain", action="store_true", help="print the engine's last run per graph")
    p.add_argument(
        "--profile", type=int, default=0, metavar="N",
        help="cProfile one more engine run per graph, print its N costliest functions",
    )  # fmt: skip
    p.add_argument("--quick", action="store_true", help="small generated graphs, one run")
    add_out_argument(p)
    args = p.parse_args(argv)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in args.contenders if c not in CONTENDERS]
    if bad:
        p.error(f"unknown contender(s) {bad}; choose from {', '.join(CONTENDERS)}")
    if args.repeat < 1 or args.warmups < 0:
        p.error("--repeat must be ≥ 1 and --warmups ≥ 0")
    if args.snap:
        args.paths = [*args.paths, *snap_paths(args.snap)]
    if args.power_edges is None:
        args.power_edges = [3_000, 20_000] if args.quick else []
    if args.quick:
        args.repeat, args.warmups = 1, 0
        args.timeout = 60.0 if args.timeout is None else args.timeout
    args.timeout = 300.0 if args.timeout is None else args.timeout
    if not args.paths and not args.power_edges:
        p.error("no graph: give edge lists, --snap DIR or --power-edges")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every count agrees with the reference, else 1."""
    args = parse_args(argv)
    meta = run_info("cliques", argv)
    meta.update(
        repeat=args.repeat, warmups=args.warmups, timeout_s=args.timeout,
        duckdb_threads=args.duckdb_threads, contenders=[LABELS[n] for n in args.contenders],
    )  # fmt: skip
    print(f"# 4-cliques in the driver  ({meta['date']})\ncommand: {meta['command']}")
    print(
        f"{meta['cores']} cores, load {os.getloadavg()[0]:.1f}; {args.warmups} warm-up + "
        f"{args.repeat} timed runs per cell, timeout {args.timeout:g} s"
    )
    tmp = Path(tempfile.mkdtemp(prefix="cliques-"))
    bench = Bench(args)
    names = [n for n in CONTENDERS if n in args.contenders]
    graphs: list[Graph] = []
    t_start = time.perf_counter()
    try:
        for m in args.power_edges:
            e = power_law_graph(max(m // 5, 100), m, seed=args.seed)
            graphs.append(load(f"power-law m={m:,}", write_edge_list(e, tmp / f"power-{m}.txt")))
        for path in args.paths:
            p = Path(path)
            graphs.append(load(p.name.removesuffix(".gz").removesuffix(".txt"), p))
        graphs.sort(key=lambda g: g.m)
        for g in graphs:
            g.truth = clique_count_numpy(g.edges.to_numpy(), 4)
            bench.prepare(g)
            print(
                f"\n{g.name}: {g.m:,} edges, {g.truth:,} 4-cliques, read in {fmt_s(g.read_s)}  "
                f"(load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            for n in names:
                print(f"  {time.perf_counter() - t_start:6.0f}s  {LABELS[n]:40s} ", end="")
                r = bench.measure(n, g)
                r.extra["load"] = round(os.getloadavg()[0], 2)
                g.results[n] = r
                print(cell_text(r), flush=True)
            e = g.results.get("engine")
            if args.profile and e is not None and e.status == "ok":
                text = profile_text(bench.fn("engine", g), args.profile)
                print(f"-- cProfile of one engine run, {g.name}:\n{text}")
            if args.explain and bench.last_run is not None:
                print("    " + bench.last_run.explain().replace("\n", "\n    "))
            bench.last_run = None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if bench.duck is not None:
            bench.duck.close()
    results = [r for g in graphs for r in g.results.values()]
    for g in graphs:
        e = g.results.get("engine")
        for r in g.results.values():
            r.extra["expected"] = g.truth
            if e is not None and e.status == "ok" and r.status == "ok" and e.median_s:
                r.ratio, r.baseline = (r.median_s or 0.0) / e.median_s, LABELS["engine"]
    print(f"\n## 4-cliques: {RULE}\n")
    print(table(graphs, names, args.timeout))
    ratios = [x for g in graphs if (x := duck_over_engine(g)) is not None]
    if ratios:
        print(
            f"\nDuckDB ÷ engine: {' '.join(fmt_ratio(x) for x in ratios)}; geometric mean "
            f"{statistics.geometric_mean(ratios):.2f} (load {os.getloadavg()[0]:.1f} at the end)"
        )
    meta["seconds"] = round(time.perf_counter() - t_start, 1)
    csv_path, json_path = write_results(results, args.out, "cliques", meta)
    print(f"written: {csv_path} and {json_path}  (total {meta['seconds']:.0f} s)")
    if bench.mismatches:
        print("\n**COUNT MISMATCHES: " + "; ".join(bench.mismatches) + "**")
        return 1
    print("All counts agree with the numpy reference.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
