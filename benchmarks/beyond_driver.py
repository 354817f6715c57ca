"""Beyond the driver: the engine with every step on Spark (``local_rows=0``) against Spark SQL,
GraphFrames and MLlib, on data read from Parquet (issue 21, point 6).

Usage::

    python benchmarks/beyond_driver.py --quick --chain            # smoke run (a minute)
    python benchmarks/beyond_driver.py --snap /work/shared/data/graphs --chain \\
        --bif alarm.bif.gz                                        # the full run
    python benchmarks/beyond_driver.py --query triangle --power-edges 1000000 \\
        --timeout 600 /work/shared/data/graphs/Email-Enron.txt    # one graph, one query

Workloads:

* graphs (``--query triangle|4clique|both``): counting on the oriented edge list (one row
  ``(u, v)``, ``u < v`` per undirected edge) of SNAP edge lists given as paths or every
  ``*.txt`` of ``--snap DIR``, and of Chung–Lu power-law graphs of ``--power-edges`` edges
  (default 1M, 3M, 10M; on ``edges / 5`` nodes unless ``--power-nodes`` says otherwise;
  degree exponent 2.1, one graph per exponent of ``--exponents``, e.g. ``2.1 2.5``;
  :func:`faq.testing.power_law_graph`)::

      triangle  Q() :- E(a, b), E(b, c), E(a, c)
      4clique   Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)

* ``--chain``: a 6-matrix sparse chain ``faq.einsum("ij,jk,kl,lm,mn,no->io", ...)`` in the
  semirings ``real`` and ``min-plus`` (``--semirings``).  Shapes ``n // d`` for the
  divisors ``--chain-shape`` (default 1 10 1 100 1 10 1: n, n/10, n, n/100, n, n/10, n,
  with ``n = --chain-n``, default 200,000); each matrix has about ``--chain-nnz`` (5)
  non-zeros per row of its narrow side (per row of an n/10 × n matrix, per column of an
  n × n/10 one), at random positions, seeded; see :mod:`benchmarks._chains`.  With the
  defaults the inputs hold about 2.1 n non-zeros, no left-to-right product has more than
  about 2.5 n entries and the answer about 1.7 n (n = 20,000: 42,000 and 34,154); a
  heavier chain: raise ``--chain-nnz`` (the answer grows about as its sixth power).
* ``--bif PATH``: the marginal of one variable (``--bn-query``, default the last one
  declared) of a Bayesian network in BIF format, e.g. alarm (37 variables), over ``real``:
  one atom per probability table.  The network file is not part of the project.

Contenders (``--contenders``):

* ``engine``: ``with faq.settings(local_rows=0): faq.query(rule).solve(E=df)`` (or
  ``faq.einsum``): every relation kept in Spark, the path issue 21 is about; inputs of at
  most ``query_task_rows`` rows (16M by default) are gathered into one Spark task by one
  job and solved there on the driver's kernel (:mod:`faq.query_task`);
* ``partitioned``: ``engine`` with ``query_task_rows=0``: every step partitioned over the
  cluster after a statistics job (:mod:`faq.spark.partitioned`);
* ``adaptive``: ``partitioned`` with Spark's adaptive query execution left on
  (``faq.settings(spark_adaptive=True)``), which runs every shuffle as a job of its own;
  not run unless asked for;
* ``cells``: ``partitioned`` with ``faq.settings(cell_min_rows=0)``: every step starts
  its cells from the cluster's task slots, however small (before small steps got one
  cell and consecutive one-cell steps one task); not run unless asked for;
* ``driver``: the same call with the default settings (relations that fit are read into
  the driver and joined there); not run unless asked for;
* ``sql``: Spark SQL, ``count(*)`` of the self-join (graphs); for the chain, left to
  right: join the product so far with the next matrix, ``groupBy`` the outer indices,
  ``sum(x * y)`` (real) or ``min(x + y)`` (min-plus);
* ``graphframes``: GraphFrames' TriangleCount algorithm in plain PySpark
  (:func:`benchmarks.triangles.graphframes_triangle_count`; triangles only);
* ``mllib``: ``CoordinateMatrix → toBlockMatrix → multiply``, left to right (chain,
  real only).  ``multiply`` makes dense result blocks: a chain whose dense product would
  take more than ``--mllib-max-mb`` is skipped with a note;
* ``floor`` (graphs and chains): one job that reads the edges, or all the chain's
  matrices, into one Python task and counts their rows (:func:`floor_job`), joining
  nothing: the least a solve whose kernel runs in a Python task pays when Spark reads
  its rows (the engine's one task reads a plain scan of local Parquet files itself, with
  pyarrow, so it can take less).  Not a peer; the summary sets the best peer's time
  against it.

Methodology: one ``local[2]`` session (``--master``, ``spark.driver.memory=4g``).  Each
workload's relations are written once to Parquet in a temporary folder (pyarrow, a few
files so Spark reads them in several partitions) and every contender starts from
``spark.read.parquet``: the engine is given a DataFrame that is not in the driver, and the
answer (a count, or a checksum of the product matrix: entries, sum and minimum of the
values) is part of what is timed.  Each cell is ``--warmups`` un-timed runs (1) and the
median of ``--repeat`` timed runs (3); no further run starts once a cell's runs add up to
half the timeout.  Every run is in its own Spark job group: the table shows the Spark jobs
of one run, and a run longer than ``--timeout`` seconds is cancelled (``timeout``).  Peak
driver memory is the largest increase of the Python driver process's resident memory
(``VmRSS``, sampled every 20 ms) over its value before the run, among the timed runs, in
MB (:class:`benchmarks._cells.PeakRss`; the JVM is another process).  Every answer is
checked against numpy / scipy (graph counts: :func:`benchmarks.triangles.reference_count`;
chains: scipy.sparse for real, a numpy min-plus product; networks: ``numpy.einsum``); a
mismatch is flagged and the exit status is 1.  Ratios are time / the engine's time; each
workload gets a line "engine vs best Spark peer: N.Nx" (the best peer's time / the
engine's; over 1 the engine is faster).  Results go to ``benchmarks/results/
beyond_driver.csv`` and ``.json`` (or under ``--out DIR``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import contextlib
import functools
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import faq
from benchmarks import _bn, _chains
from benchmarks._cells import Run, measure, spark_run
from benchmarks._common import (
    Result,
    add_out_argument,
    fmt_ratio,
    fmt_s,
    run_info,
    set_ratios,
    stop_spark,
    write_results,
)
from benchmarks.triangles import (
    QUERIES,
    QUERY_LABELS,
    SQL,
    Workload,
    graphframes_triangle_count,
    reference_count,
    snap_paths,
)
from faq.spark import union_all
from faq.testing import power_law_graph

ENGINES = ("engine", "partitioned", "adaptive", "cells", "driver")
CONTENDERS = (*ENGINES, "sql", "graphframes", "mllib", "floor")
DEFAULT_CONTENDERS = ("engine", "partitioned", "sql", "graphframes", "mllib")
LABELS = {
    "engine": "engine (local_rows=0)",
    "partitioned": "engine (local_rows=0, query_task_rows=0)",
    "adaptive": "engine (local_rows=0, query_task_rows=0, Spark AQE on)",
    "cells": "engine (local_rows=0, query_task_rows=0, cell_min_rows=0)",
    "driver": "engine (driver)",
    "sql": "Spark SQL",
    "graphframes": "GraphFrames algorithm",
    "mllib": "MLlib BlockMatrix",
    "floor": "floor (one job: the input into one Python task, no join)",
}
PEERS = frozenset({"sql", "graphframes", "mllib"})
KINDS = {  # which contenders a kind of workload has
    "graph": (*ENGINES, "sql", "graphframes", "floor"),
    "chain": (*ENGINES, "sql", "mllib", "floor"),
    "bn": ENGINES,
}
BASELINE = LABELS["engine"]


def _entries(c: _chains.Checksum) -> int:
    return c.entries


def read_all(got: int, rows: int) -> str | None:
    """What is wrong with the floor's count ``got`` of an input of ``rows`` rows, or None."""
    return None if got == rows else f"read {got:,} rows of {rows:,}"


def count_batches(batches: Any) -> Any:
    """A ``mapInArrow`` function (schema ``n long``) that only counts its rows."""
    import pyarrow as pa

    n = 0
    for b in batches:
        n += b.num_rows
    yield pa.RecordBatch.from_pydict({"n": [n]})


def floor_job(df: Any) -> int:
    """The rows of ``df`` counted in one Python task (``coalesce(1)``, ``mapInArrow``): one
    Spark job that reads the input into Arrow batches in a Python worker and joins
    nothing, the least an engine whose kernel runs in Python tasks pays per solve when
    Spark reads its rows."""
    return int(df.coalesce(1).mapInArrow(count_batches, "n long").collect()[0][0])


# -- Parquet ---------------------------------------------------------------------------------
def write_parquet(columns: dict[str, np.ndarray], path: Path, files: int = 4) -> Path:
    """Write the columns as ``files`` Parquet files (row slices) in the folder ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(columns.values())))
    bounds = np.linspace(0, n, max(min(files, n), 1) + 1).astype(int)
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        table = pa.table({c: v[a:b] for c, v in columns.items()})
        pq.write_table(table, path / f"part-{k:03d}.parquet")
    return path


def engine_scope(name: str) -> contextlib.AbstractContextManager[Any]:
    """The settings a run of ``name`` solves under: ``local_rows=0`` for ``engine``, and
    ``query_task_rows=0`` as well for ``partitioned``, with Spark's adaptive execution on
    for ``adaptive`` or ``cell_min_rows=0`` for ``cells``.

    Called inside the run (``faq.settings`` changes the settings when it is called).
    """
    steps = {"local_rows": 0, "query_task_rows": 0}
    if name == "partitioned":
        return faq.settings(**steps)
    if name == "adaptive":
        return faq.settings(**steps, spark_adaptive=True)
    if name == "cells":
        return faq.settings(**steps, cell_min_rows=0)
    return faq.settings(local_rows=0) if name == "engine" else contextlib.nullcontext()


# -- workloads -------------------------------------------------------------------------------
def graph_workloads(args: argparse.Namespace) -> list[Workload]:
    """Power-law graphs (smallest first), then the edge lists by size, with reference counts."""
    from faq.io import load_edge_array, undirected_simple

    nodes = args.power_nodes or [max(m // 5, 100) for m in args.power_edges]
    if len(nodes) != len(args.power_edges):
        raise ValueError("--power-nodes needs one node count per --power-edges value")
    out = []
    for n, m in sorted(zip(nodes, args.power_edges, strict=True), key=lambda x: x[1]):
        for x in args.exponents:
            name = f"power-law m={m:,}" + ("" if x == 2.1 else f" exp {x}")
            g = power_law_graph(n, m, seed=args.seed, exponent=x)
            out.append(Workload(name, g, "power-law"))
    files = []
    for p in args.paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lines that are not edges: skipped
            files.append(Workload(Path(p).stem, undirected_simple(load_edge_array(p)), "snap"))
    out += sorted(files, key=lambda w: w.m)
    for w in out:
        w.truth = {q: reference_count(w.edges, q) for q in args.queries}
    return out


class Bench:
    """The session, the temporary folder and the cells measured so far."""

    def __init__(self, args: argparse.Namespace, spark: Any, tmp: Path) -> None:
        self.args, self.spark, self.tmp = args, spark, tmp
        self.sc = spark.sparkContext
        self.results: list[Result] = []
        self.mismatches: list[str] = []
        self.t0 = time.perf_counter()

    def names(self, kind: str) -> list[str]:
        return [n for n in KINDS[kind] if n in self.args.contenders]

    def cell(
        self,
        workload: str,
        query: str,
        name: str,
        fn: Callable[[], Any],
        check: Callable[[Any], str | None],
        edges: int | None = None,
        skip: str | None = None,
        count: Callable[[Any], int | None] | None = None,
        **extra: Any,
    ) -> Result:
        """Measure ``fn`` as the cell (workload, query, contender) unless ``skip`` says why not."""
        a = self.args
        res = Result(workload, LABELS[name], edges=edges, extra={"query": query, **extra})
        print(f"  {time.perf_counter() - self.t0:6.0f}s  {query:10s} {LABELS[name]:22s} ", end="")
        if skip is not None:
            res.status, res.note = "skipped", skip
            res.extra.update(correct=None, peak_driver_mb=None)
        else:

            def run() -> Run:
                return spark_run(self.sc, fn, f"{workload} {query}: {LABELS[name]}", a.timeout)

            wrong = measure(
                res, run, check, warmups=a.warmups, repeat=a.repeat, timeout=a.timeout, count=count
            )
            if wrong is not None:
                msg = f"{workload} {query}: {LABELS[name]}: {wrong}"
                self.mismatches.append(msg)
                print(f"\n  !!! MISMATCH: {msg}", file=sys.stderr)
        res.extra["timeout_s"] = a.timeout
        self.results.append(res)
        print(cell_text(res), flush=True)
        return res

    # graphs
    def graph(self, w: Workload) -> None:
        df = self.spark.read.parquet(
            str(write_parquet({"src": w.edges[:, 0], "dst": w.edges[:, 1]}, self.tmp / f"g{id(w)}"))
        )
        df.createOrReplaceTempView("e")
        counts = ", ".join(f"{w.truth[q]:,} {QUERY_LABELS[q]}" for q in self.args.queries)
        print(f"\n{w.name}: {w.m:,} edges, {counts}", flush=True)
        for query in self.args.queries:

            def engine(name: str = "engine", query: str = query) -> int:
                with engine_scope(name):
                    return int(faq.query(QUERIES[query], semiring="counting").solve(E=df).scalar())

            fns: dict[str, Callable[[], int]] = {
                **{n: lambda n=n, engine=engine: engine(n) for n in ENGINES},
                "sql": lambda query=query: int(self.spark.sql(SQL[query]).collect()[0][0]),
                "graphframes": lambda: graphframes_triangle_count(df),
                "floor": lambda: floor_job(df),
            }
            want = w.truth[query]

            def check(got: int, want: int = want) -> str | None:
                return None if got == want else f"counted {got:,}, reference {want:,}"

            for name in self.names("graph"):
                skip = "triangles only" if name == "graphframes" and query != "triangle" else None
                test = functools.partial(read_all, rows=w.m) if name == "floor" else check
                self.cell(
                    w.name, query, name, fns[name], test, w.m, skip, family=w.family, expected=want
                )

    # chains
    def chain(self, semiring: str) -> None:
        a = self.args
        dims = _chains.chain_dims(a.chain_n, a.chain_shape)
        mats = _chains.random_chain(dims, a.chain_nnz, semiring, seed=a.seed)
        t = time.perf_counter()
        ref = _chains.reference(mats, semiring)
        name = f"chain n={a.chain_n:,}"
        nnz = sum(m.nnz for m in mats)
        print(
            f"\n{name} ({semiring}): dims {' × '.join(f'{d:,}' for d in dims)}, {nnz:,} non-zeros; "
            f"product: {ref.entries:,} entries (reference in {time.perf_counter() - t:.1f} s)",
            flush=True,
        )
        frames = []
        for k, m in enumerate(mats):
            cols = dict(zip(_chains.COLUMNS, (m.r, m.c, m.v), strict=True))
            frames.append(
                self.spark.read.parquet(str(write_parquet(cols, self.tmp / f"{semiring}{k}")))
            )
        spec = _chains.einsum_spec(len(mats))

        def engine(name: str = "engine") -> _chains.Checksum:
            with engine_scope(name):
                return _chains.factor_checksum(faq.einsum(spec, *frames, semiring=semiring))

        fns: dict[str, Callable[[], _chains.Checksum]] = {
            **{n: lambda n=n: engine(n) for n in ENGINES},
            "sql": lambda: _chains.sql_chain(frames, semiring),
            "mllib": lambda: _chains.mllib_chain(frames, dims, a.mllib_block),
            "floor": lambda: floor_job(union_all(frames)),
        }
        dense_mb = _chains.dense_bytes(dims) / 1e6

        for n in self.names("chain"):
            skip = None
            if n == "mllib" and semiring != "real":
                skip = "real only"
            elif n == "mllib" and dense_mb > a.mllib_max_mb:
                skip = (
                    f"dense result blocks of {dense_mb:,.0f} MB > --mllib-max-mb {a.mllib_max_mb:,}"
                )
            floor = n == "floor"
            test = functools.partial(read_all, rows=nnz) if floor else ref.differs
            count = None if floor else _entries
            self.cell(
                name, semiring, n, fns[n], test, nnz, skip, count,
                family="chain", dims=list(dims), expected=ref.entries,
            )  # fmt: skip

    # Bayesian network
    def network(self, net: _bn.Network, target: str) -> None:
        rule, names = _bn.rule(net, target)
        frames = {
            r: self.spark.read.parquet(str(write_parquet(cols, self.tmp / f"bn-{r}", files=1)))
            for r, cols in zip(names, _bn.tables(net), strict=True)
        }
        ref = _bn.marginal_numpy(net, target)
        card = len(net.states[target])
        print(f"\n{net.name}: {len(net.states)} variables, P({target}) = {np.round(ref, 6)}")

        def engine(name: str = "engine") -> np.ndarray:
            with engine_scope(name):
                out = faq.query(rule, semiring="real").solve(**frames)
                return out.to_numpy(shape=(card,))

        def check(got: np.ndarray) -> str | None:
            if np.allclose(got, ref, rtol=1e-9, atol=1e-12):
                return None
            return f"P({target}) = {got.tolist()}, reference {ref.tolist()}"

        fns = {n: lambda n=n: engine(n) for n in ENGINES}
        for n in self.names("bn"):
            self.cell(net.name, f"P({target})", n, fns[n], check, family="bn")


# -- the tables ------------------------------------------------------------------------------
def cell_text(r: Result) -> str:
    """Time, Spark jobs, peak driver memory and the ratio to the engine."""
    if r.status == "timeout":
        return f"timeout ({r.note})"
    if r.status in ("skipped", "error"):
        return f"{r.status}: {r.note}"
    assert r.median_s is not None
    text = fmt_s(r.median_s)
    if r.spark_jobs is not None:
        text += f", {r.spark_jobs} jobs"
    if r.extra.get("peak_driver_mb") is not None:
        text += f", {r.extra['peak_driver_mb']:.0f} MB"
    if r.note:
        text += f" {r.note}"
    if r.ratio is not None and r.contender != BASELINE:
        text += f" ({fmt_ratio(r.ratio)})"
    if r.extra.get("correct") is False:
        text = "**WRONG** " + text
    return text


def kind_of(r: Result) -> str:
    """``graph``, ``chain`` or ``bn``: the kind of workload of a cell."""
    family = r.extra.get("family")
    return family if family in ("chain", "bn") else "graph"


def peer_summary(cells: list[Result]) -> str:
    """ "engine vs best Spark peer: N.Nx" for one workload's cells."""
    eng = next((r for r in cells if r.contender == BASELINE), None)
    peers = [r for r in cells if r.contender in {LABELS[p] for p in PEERS}]
    done = [r for r in peers if r.status == "ok" and r.median_s]
    if eng is None or eng.status != "ok" or not eng.median_s:
        return f"engine {eng.status if eng else 'not run'}"
    if done:
        best = min(done, key=lambda r: r.median_s or 0.0)
        text = f"engine vs best Spark peer: {best.median_s / eng.median_s:.1f}x ({best.contender})"
        floor = next((r for r in cells if r.contender == LABELS["floor"]), None)
        if floor is not None and floor.status == "ok" and floor.median_s:
            text += f"; best peer ÷ floor: {best.median_s / floor.median_s:.1f}x"
        return text
    timed_out = [r for r in peers if r.status == "timeout"]
    if timed_out:
        bound = timed_out[0].extra["timeout_s"] / eng.median_s
        return f"engine vs best Spark peer: > {bound:.1f}x (every peer timed out)"
    return "no Spark peer on this workload"


def print_tables(results: list[Result], contenders: list[str]) -> None:
    """One Markdown table per kind of workload, then the summary lines."""
    labels = [LABELS[n] for n in contenders]
    for family, title in (("graph", "Graphs"), ("chain", "Chains"), ("bn", "Bayesian networks")):
        rows = [r for r in results if kind_of(r) == family]
        if not rows:
            continue
        cols = [c for c in labels if any(r.contender == c for r in rows)]
        print(f"\n## {title}\n")
        print("| workload | size | query | answer | " + " | ".join(cols) + " |")
        print("|---|---:|---|---:|" + "---:|" * len(cols))
        keys = list(dict.fromkeys((r.workload, r.extra["query"]) for r in rows))
        for w, q in keys:
            cells = {r.contender: r for r in rows if (r.workload, r.extra["query"]) == (w, q)}
            any_r = next(iter(cells.values()))
            size = f"{any_r.edges:,}" if any_r.edges is not None else ""
            answer = any_r.extra.get("expected")
            shown = f"{answer:,}" if isinstance(answer, int) else ""
            texts = [cell_text(cells[c]) if c in cells else "" for c in cols]
            print(f"| {w} | {size} | {q} | {shown} | " + " | ".join(texts) + " |")
        print()
        for w, q in keys:
            cells = [r for r in rows if (r.workload, r.extra["query"]) == (w, q)]
            print(f"- {w}, {q}: {peer_summary(cells)}")
    print(
        "\nMedian wall-clock seconds of the timed runs, Spark jobs of one run, peak driver "
        "(Python) memory increase in MB; (×r) = time / engine (local_rows=0) time; N.Nx = the "
        "best peer's time / the engine's (over 1: the engine is faster).  answer = reference "
        "count (graphs) or entries of the product (chains)."
    )


# -- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="*", help="SNAP edge lists")
    p.add_argument("--snap", metavar="DIR", help="add every *.txt edge list of this folder")
    p.add_argument("--query", choices=["triangle", "4clique", "both"], default="both")
    p.add_argument(
        "--power-edges", type=int, nargs="*",
        help="edge counts of the power-law graphs (1000000 3000000 10000000; quick: 3000; "
        "given with no value: none)",
    )  # fmt: skip
    p.add_argument("--power-nodes", type=int, nargs="*", help="one per --power-edges (edges/5)")
    p.add_argument(
        "--exponents", type=float, nargs="+", default=[2.1],
        help="degree exponents of the power-law graphs, one graph each (2.1; 2.1 2.5: both)",
    )  # fmt: skip
    p.add_argument("--chain", action="store_true", help="run the 6-matrix chain")
    p.add_argument("--chain-n", type=int, default=200_000, help="the chain's n (200000)")
    p.add_argument(
        "--chain-shape", type=int, nargs="+", default=list(_chains.SHAPE),
        help="divisors of n, one per dimension (1 10 1 100 1 10 1)",
    )  # fmt: skip
    p.add_argument("--chain-nnz", type=float, default=5.0, help="non-zeros per row, narrow side")
    p.add_argument(
        "--semirings", nargs="+", choices=_chains.SEMIRINGS, default=list(_chains.SEMIRINGS)
    )
    p.add_argument("--mllib-block", type=int, default=1024, help="BlockMatrix block size (1024)")
    p.add_argument("--mllib-max-mb", type=float, default=2000.0, help="MLlib dense-size limit")
    p.add_argument("--bif", metavar="PATH", help="a Bayesian network (.bif or .bif.gz)")
    p.add_argument("--bn-query", metavar="VAR", help="its variable to marginalise onto (last)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="timed runs per cell; the median is shown")
    p.add_argument("--warmups", type=int, default=1, help="un-timed runs before them (1)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (600; quick: 120)")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--driver-memory", default="4g", help="spark.driver.memory (4g)")
    p.add_argument("--tmp", metavar="DIR", help="folder for the Parquet files (system temp)")
    p.add_argument(
        "--contenders", default=",".join(DEFAULT_CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)} ({','.join(DEFAULT_CONTENDERS)})",
    )  # fmt: skip
    p.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, one run")
    add_out_argument(p)
    args = p.parse_args(argv)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in args.contenders if c not in CONTENDERS]
    if bad:
        p.error(f"unknown contender(s) {bad}; choose from {', '.join(CONTENDERS)}")
    if "engine" not in args.contenders:
        p.error("--contenders must include engine (the baseline of the ratios)")
    if args.repeat < 1 or args.warmups < 0:
        p.error("--repeat must be ≥ 1 and --warmups ≥ 0")
    if args.snap:
        args.paths = [*args.paths, *snap_paths(args.snap)]
    if args.power_edges is None:
        args.power_edges = [3_000] if args.quick else [1_000_000, 3_000_000, 10_000_000]
    if args.quick:
        args.chain_n = min(args.chain_n, 2_000)
        args.repeat, args.warmups = 1, 0
        args.timeout = 120.0 if args.timeout is None else args.timeout
    args.timeout = 600.0 if args.timeout is None else args.timeout
    args.queries = ["triangle", "4clique"] if args.query == "both" else [args.query]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every answer agrees with the reference, else 1."""
    args = parse_args(argv)
    net = _bn.read_bif(args.bif) if args.bif else None
    target = (args.bn_query or net.variables[-1]) if net else None
    meta = run_info("beyond_driver", argv)
    print(f"# Beyond the driver  ({meta['date']})\ncommand: {meta['command']}")
    t = time.perf_counter()
    graphs = graph_workloads(args)
    print(f"{len(graphs)} graph(s) and their reference counts in {time.perf_counter() - t:.1f} s")

    from faq.session import local_session

    spark = local_session(args.master, **{"spark.driver.memory": args.driver_memory})
    meta.update(
        spark=spark.version, master=args.master, driver_memory=args.driver_memory,
        repeat=args.repeat, warmups=args.warmups, timeout_s=args.timeout,
        contenders=[LABELS[n] for n in args.contenders], chain_n=args.chain_n,
        chain_shape=args.chain_shape, chain_nnz=args.chain_nnz, bif=args.bif,
    )  # fmt: skip
    print(
        f"cores: {meta['cores']}, load average at start: "
        f"{' '.join(f'{x:.1f}' for x in meta['load_average_at_start'])}, Spark {spark.version} "
        f"{args.master}, {args.warmups} warm-up + {args.repeat} timed runs per cell, "
        f"timeout {args.timeout:g} s"
    )
    tmp = Path(tempfile.mkdtemp(prefix="beyond-driver-", dir=args.tmp))
    bench = Bench(args, spark, tmp)
    try:
        for w in graphs:
            bench.graph(w)
        if args.chain:
            for semiring in args.semirings:
                bench.chain(semiring)
        if net is not None and target is not None:
            bench.network(net, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = bench.results
    set_ratios(results, BASELINE, key=lambda r: (r.workload, r.extra["query"]))
    print_tables(results, [n for n in CONTENDERS if n in args.contenders])
    meta["seconds"] = round(time.perf_counter() - bench.t0, 1)
    csv_path, json_path = write_results(results, args.out, "beyond_driver", meta)
    print(f"\nwritten: {csv_path} and {json_path}  (total {meta['seconds']:.0f} s)")
    errors = [
        f"{r.workload} {r.extra['query']}: {r.contender}: {r.note}"
        for r in results
        if r.status == "error"
    ]
    if errors:
        print(f"{len(errors)} cell(s) failed with an error:\n  " + "\n  ".join(errors))
    if bench.mismatches:
        print("\n**MISMATCHES: " + "; ".join(bench.mismatches) + "**")
        return 1
    print("All answers agree with the reference.")
    return 0


if __name__ == "__main__":
    status = main()
    stop_spark()
    sys.exit(status)
