"""Recursive queries: single-source shortest paths and reachability, the engine against a
hand-written PySpark iteration (the Pregel way) and scipy.

Usage::

    python benchmarks/recursion.py --quick            # smoke run (about a minute)
    python benchmarks/recursion.py                    # 1,000,000 weighted directed edges
    python benchmarks/recursion.py --edges 300000 /work/shared/data/graphs/CA-GrQc.txt
    python benchmarks/recursion.py --workload sssp --ticks 5 --tick-edges 1000 --tick-deletions 300

Programs (the first is the one of ``tests/test_recursion.py``)::

    SSSP   (min-plus)  D(x) :- S(x)
                       D(y) :- D(x), E(x, y)
    reach  (boolean)   R(x) :- S(x)
                       R(y) :- R(x), E(x, y)

Graphs:

* a Chung–Lu power-law graph (:func:`faq.testing.power_law_graph`, seeded) with
  ``--edges / 2`` undirected edges on ``--edges / 10`` nodes, used in **both
  directions**: ``--edges`` directed edges (default 1,000,000), each direction
  with its own seeded integer weight in ``1 … 100`` (so every distance is an
  exact float and the contenders' answers can be compared exactly);
* SNAP edge lists given as paths, read as written (directed, one edge per
  line; self-loops and repeated pairs dropped), with seeded weights.

The source ``S`` is the node of highest out-degree (``--source`` overrides it),
so most of the graph is reachable.

Contenders, side by side in one ``local[2]`` session (:func:`faq.session.local_session`:
4 shuffle partitions, adaptive execution on, ``spark.driver.memory=4g``):

* ``engine``: ``query(SSSP, semiring="min-plus").run(S=..., E=df)`` (and the
  boolean program for reachability), ``E`` the edge DataFrame
  (``src, dst, value``) materialised once per graph with ``localCheckpoint``,
  ``S`` a one-row :meth:`faq.Factor.from_dict`.  A DataFrame is what a Spark
  user holds and what the PySpark iteration starts from, so both Spark
  contenders read the same input; the engine's time includes everything it
  does with it (collecting, filtered scans);
* ``pandas``: the same engine call with ``E`` a pandas DataFrame made a Factor
  with :meth:`faq.Factor.from_pandas` inside the timed call: how a user whose
  edge list fits in the driver calls it (the engine keeps the fixpoint's
  state in the driver either way).  ``Factor.from_numpy`` is not the
  alternative: it reads a dense matrix, n² entries for n nodes;
* ``pyspark``: the hand-written iteration a competent PySpark user writes
  (:func:`pregel_sssp`, :func:`pregel_reach`): the frontier of changed nodes
  joined with the edges, ``groupBy`` min (or the new nodes, for reachability),
  merged with the old distances, the changed rows counted each round until
  none change; each round's result persisted (the previous one unpersisted)
  and ``localCheckpoint``-ed every ``--checkpoint-every`` rounds to cut the
  lineage;
* ``scipy``: :func:`scipy.sparse.csgraph.dijkstra` and
  :func:`~scipy.sparse.csgraph.breadth_first_order` on a CSR matrix built from
  the numpy edge arrays (the single-machine limit; the time includes building
  the matrix).  Skipped with a note when scipy is not installed.

Every answer (the reachable nodes and, for SSSP, every distance) is compared;
a mismatch raises an AssertionError naming the contenders.  Before the graphs,
every contender runs once on a tiny graph (JVM, imports, numba).  Each cell is
``--warmups`` un-timed runs, then the median of ``--repeat`` timed runs (1 by
default; docs/recursion.md shows ``--repeat 3``).  Spark jobs are
counted per run with the status tracker (:func:`benchmarks._common.timed_jobs`).
The table shows the rounds (the engine's ``len(run.rounds)``, which counts
round 0, the base rule; the PySpark iteration's joins, the last of which finds
nothing), the ratios PySpark ÷ engine (the issue's target: ≥ 5), for either
engine input, and engine ÷ scipy.

The incremental shortest-paths view (issue 23 point 6; with the ``sssp``
workload, unless ``--no-view``): an ``IncrementalView`` of the SSSP program
over the graph takes ``--ticks`` ticks of ``--tick-edges`` edge changes
(``--tick-deletions`` of them deletions of edges it holds, the others
insertions of new edges); after each tick the program is solved again over the
current edges and both answers are compared (:mod:`benchmarks._recursive_view`).
Its table gives the median tick and recompute times and recompute ÷ tick (the
issue's target: ≥ 20).

The rows are also written as CSV and JSON (``benchmarks/results/recursion.csv``
and ``.json``, or under ``--out DIR``); ``ratio`` there is time ÷ engine time.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import ``benchmarks`` from the repository
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks._common import (
    NOT_INSTALLED,
    Result,
    add_out_argument,
    fmt_ratio,
    fmt_rows,
    fmt_s,
    missing_note,
    optional_import,
    run_info,
    set_ratios,
    stop_spark,
    timed_jobs,
    write_results,
)
from benchmarks._recursive_view import measure_view, print_view_table

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
REACH = "R(x) :- S(x)\nR(y) :- R(x), E(x, y)"
PROGRAMS: dict[str, tuple[str, str]] = {"sssp": (SSSP, "min-plus"), "reach": (REACH, "boolean")}
WORKLOADS = {"sssp": "single-source shortest paths", "reach": "reachability"}
CONTENDERS = ("engine", "pandas", "pyspark", "scipy")
LABELS = {
    "engine": "engine",
    "pandas": "engine (pandas input)",
    "pyspark": "PySpark iteration",
    "scipy": "scipy",
}
SPARK = frozenset({"engine", "pandas", "pyspark"})
BASELINE = LABELS["engine"]


@dataclass
class Graph:
    """A weighted directed graph and the source node of the searches."""

    name: str
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    source: int

    @property
    def m(self) -> int:
        """Number of directed edges."""
        return len(self.src)


@dataclass
class Answer:
    """What a contender found: the reachable nodes (sorted) and their distances."""

    nodes: np.ndarray
    dist: np.ndarray | None = None
    rounds: int | None = None


def weighted_graph(
    name: str, edges: np.ndarray, seed: int, both: bool, source: int | None = None
) -> Graph:
    """Directed edges with seeded integer weights in ``1 … 100`` (as floats).

    Parameters
    ----------
    name : str
        The graph's label.
    edges : numpy.ndarray
        ``(m, 2)`` integer ids.
    seed : int
        Seed of the weights.
    both : bool
        Use every edge in both directions (each with its own weight); else as given.
    source : int, optional
        The source node; default the node of highest out-degree (lowest id on a tie).

    Returns
    -------
    Graph
        Self-loops and repeated (directed) pairs dropped.
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if both:
        e = np.concatenate([e, e[:, ::-1]])
    e = np.unique(e[e[:, 0] != e[:, 1]], axis=0)
    if len(e) == 0:
        raise ValueError(f"graph {name!r} has no edges besides self-loops")
    w = np.random.default_rng(seed).integers(1, 101, len(e)).astype(np.float64)
    if source is None:
        source = int(np.argmax(np.bincount(e[:, 0])))
    return Graph(name, e[:, 0].copy(), e[:, 1].copy(), w, source)


# -- contenders ------------------------------------------------------------------------------
def edges_frame(spark: Any, g: Graph) -> Any:
    """The edges as a DataFrame ``(src, dst, value)``, materialised with ``localCheckpoint``."""
    import pandas as pd

    pdf = pd.DataFrame({"src": g.src, "dst": g.dst, "value": g.weight})
    df = spark.createDataFrame(pdf, "src bigint, dst bigint, value double")
    return df.localCheckpoint(eager=True)


def engine(workload: str, E: Any, source: int) -> Answer:
    """The engine's answer to ``workload`` (``"sssp"`` or ``"reach"``) from ``source``.

    ``E`` is the edge DataFrame ``(src, dst, value)``: a Spark one, passed as it
    is, or a pandas one, made a Factor with :meth:`faq.Factor.from_pandas`
    inside the call (the weights dropped for reachability).
    """
    return engine_run(workload, E, source)[0]


def engine_run(workload: str, E: Any, source: int, backend: str = "auto") -> tuple[Answer, Any]:
    """:func:`engine`'s answer and the engine's ``ProgramRun`` (its rounds), run with
    ``backend`` under the settings in force."""
    import pandas as pd

    from faq import Factor, query

    text, semiring = PROGRAMS[workload]
    one = 0.0 if workload == "sssp" else True
    S = Factor.from_dict({(source,): one}, vars=["x"], semiring=semiring)
    keys = ["src", "dst"] if workload == "reach" else ["src", "dst", "value"]
    if isinstance(E, pd.DataFrame):
        edges = Factor.from_pandas(E[keys], semiring=semiring, name="E")
    else:
        edges = E.select(*keys)
    run = query(text, semiring=semiring).run(S=S, E=edges, backend=backend)
    pdf = run.result.to_pandas()  # sorted by key
    nodes = pdf.iloc[:, 0].to_numpy(dtype=np.int64)
    dist = pdf["value"].to_numpy(dtype=np.float64) if workload == "sssp" else None
    return Answer(nodes, dist, len(run.rounds)), run


def _iterate(step: Callable[[Any], Any], state: Any, checkpoint_every: int) -> tuple[Any, int]:
    """Apply ``step`` to a state DataFrame ``(node, ..., changed)`` until no row changed.

    Each round's state is persisted and its changed rows counted (which
    materialises it), then the previous round's state is unpersisted; every
    ``checkpoint_every`` rounds the state is ``localCheckpoint``-ed instead, to
    cut the lineage.  Returns the final state and the number of rounds.
    """
    from pyspark import StorageLevel

    rounds = 0
    while True:
        rounds += 1
        before = state
        state = step(state)
        if rounds % checkpoint_every == 0:
            state = state.localCheckpoint(eager=True)
        else:
            state = state.persist(StorageLevel.MEMORY_AND_DISK)
        changed = state.where("changed").count()
        before.unpersist()
        if changed == 0:
            return state, rounds


def _answer(state: Any, column: str | None, rounds: int) -> Answer:
    pdf = state.select("node", *([column] if column else [])).toPandas().sort_values("node")
    dist = pdf[column].to_numpy(np.float64) if column else None
    return Answer(pdf["node"].to_numpy(np.int64), dist, rounds)


def pregel_sssp(E: Any, source: int, checkpoint_every: int = 5) -> Answer:
    """Shortest distances from ``source`` by the PySpark iteration (Bellman–Ford, Pregel-style).

    Each round, the nodes whose distance changed last round send ``dist + w``
    along their out-edges; the messages are reduced with ``groupBy(dst)`` min
    and merged with the old distances (a full outer join, the smaller of
    both); the nodes whose distance improved send in the next round.  It stops
    when no distance changed.

    Parameters
    ----------
    E : pyspark.sql.DataFrame
        Columns ``src``, ``dst``, ``value`` (the weight).
    source : int
        The source node.
    checkpoint_every : int
        Rounds between ``localCheckpoint`` calls on the distances.

    Returns
    -------
    Answer
        The reachable nodes, their distances and the number of rounds.
    """
    from pyspark.sql import functions as F

    spark = E.sparkSession
    edges = E.select("src", "dst", F.col("value").alias("w"))
    start = spark.createDataFrame(
        [(source, 0.0, True)], "node bigint, dist double, changed boolean"
    )

    def step(state: Any) -> Any:
        frontier = state.where("changed")
        msgs = (
            frontier.join(edges, frontier["node"] == edges["src"])
            .groupBy(F.col("dst").alias("node"))
            .agg(F.min(F.col("dist") + F.col("w")).alias("msg"))
        )
        merged = state.select("node", "dist").join(msgs, "node", "full_outer")
        dist, msg = F.col("dist"), F.col("msg")
        better = msg.isNotNull() & (dist.isNull() | (msg < dist))
        return merged.select(
            "node", F.when(better, msg).otherwise(dist).alias("dist"), better.alias("changed")
        )

    state, rounds = _iterate(step, start, checkpoint_every)
    return _answer(state, "dist", rounds)


def pregel_reach(E: Any, source: int, checkpoint_every: int = 5) -> Answer:
    """The nodes reachable from ``source`` by the PySpark iteration (breadth-first frontiers).

    Each round, the frontier (the nodes found last round) is joined with the
    edges, the targets are deduplicated, those already visited removed (a
    left anti join), and the rest added to the visited nodes as the next
    frontier.  It stops when a round finds no new node.

    Parameters
    ----------
    E : pyspark.sql.DataFrame
        Columns ``src``, ``dst`` (other columns are ignored).
    source : int
        The source node.
    checkpoint_every : int
        Rounds between ``localCheckpoint`` calls on the visited nodes.

    Returns
    -------
    Answer
        The reachable nodes (no distances) and the number of rounds.
    """
    from pyspark.sql import functions as F

    spark = E.sparkSession
    edges = E.select("src", "dst")
    start = spark.createDataFrame([(source, True)], "node bigint, changed boolean")

    def step(state: Any) -> Any:
        frontier = state.where("changed")
        targets = (
            frontier.join(edges, frontier["node"] == edges["src"])
            .select(F.col("dst").alias("node"))
            .distinct()
        )
        new = targets.join(state, "node", "left_anti")
        old = state.select("node", F.lit(False).alias("changed"))
        return old.unionByName(new.select("node", F.lit(True).alias("changed")))

    state, rounds = _iterate(step, start, checkpoint_every)
    return _answer(state, None, rounds)


def scipy_answer(workload: str, g: Graph, csgraph: Any, sparse: Any) -> Answer:
    """scipy's answer: ``dijkstra`` (SSSP) or ``breadth_first_order`` (reachability).

    The CSR matrix is built from the edge arrays inside the call (and timed).
    """
    n = int(max(g.src.max(), g.dst.max(), g.source)) + 1
    A = sparse.csr_matrix((g.weight, (g.src, g.dst)), shape=(n, n))
    if workload == "reach":
        order = csgraph.breadth_first_order(A, g.source, directed=True, return_predecessors=False)
        return Answer(np.sort(order.astype(np.int64)))
    d = csgraph.dijkstra(A, directed=True, indices=g.source)
    nodes = np.flatnonzero(np.isfinite(d)).astype(np.int64)
    return Answer(nodes, d[nodes])


def compare(workload: str, graph: str, answers: dict[str, Answer]) -> None:
    """Raise an AssertionError unless every contender found the same nodes and distances."""
    names = list(answers)
    if not names:
        return
    first = answers[names[0]]
    for name in names[1:]:
        a = answers[name]
        what = f"{graph}, {WORKLOADS[workload]}: {name} and {names[0]}"
        if not np.array_equal(a.nodes, first.nodes):
            only = np.setxor1d(a.nodes, first.nodes)[:5].tolist()
            raise AssertionError(
                f"{what} reach different nodes ({len(a.nodes):,} and {len(first.nodes):,}; "
                f"e.g. {only} in one only)"
            )
        if workload == "sssp":
            assert a.dist is not None and first.dist is not None
            bad = np.flatnonzero(a.dist != first.dist)
            if bad.size:
                i = int(bad[0])
                raise AssertionError(
                    f"{what} disagree on {bad.size:,} distances, e.g. node "
                    f"{int(a.nodes[i])}: {a.dist[i]} and {first.dist[i]}"
                )


# -- running the cells -----------------------------------------------------------------------
class Bench:
    """The session, the current graph's inputs and one run function per contender."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.spark: Any = None
        self.sparse = optional_import("scipy.sparse")
        self.csgraph = optional_import("scipy.sparse.csgraph")
        self.graph: Graph | None = None
        self.E: Any = None
        self.pdf: Any = None

    def start(self) -> None:
        from faq.session import local_session

        self.spark = local_session(self.args.master, **{"spark.driver.memory": "4g"})

    def load(self, g: Graph) -> None:
        """Make ``g`` available to every contender (not timed): the checkpointed DataFrame."""
        import pandas as pd

        self.graph = g
        self.E = edges_frame(self.spark, g)
        self.pdf = pd.DataFrame({"src": g.src, "dst": g.dst, "value": g.weight})

    def unavailable(self, name: str) -> str | None:
        """None when contender ``name`` can run, else why not."""
        if name == "scipy" and self.csgraph is None:
            return NOT_INSTALLED
        return None

    def run(self, name: str, workload: str) -> tuple[Answer, int | None, float]:
        """One run: ``(answer, Spark jobs or None, seconds)``."""
        g = self.graph
        assert g is not None
        k = self.args.checkpoint_every
        fns: dict[str, Callable[[], Answer]] = {
            "engine": lambda: engine(workload, self.E, g.source),
            "pandas": lambda: engine(workload, self.pdf, g.source),
            "pyspark": lambda: (pregel_sssp if workload == "sssp" else pregel_reach)(
                self.E, g.source, k
            ),
            "scipy": lambda: scipy_answer(workload, g, self.csgraph, self.sparse),
        }
        if name in SPARK:
            what = f"recursion {LABELS[name]}: {workload} on {g.name}"
            seconds, answer, jobs = timed_jobs(self.spark.sparkContext, fns[name], what)
            return answer, jobs, seconds
        t0 = time.perf_counter()
        answer = fns[name]()
        return answer, None, time.perf_counter() - t0

    def measure(self, workload: str, name: str) -> tuple[Result, Answer | None]:
        """Warm-up and timed runs of ``name`` on ``workload`` over the loaded graph."""
        g = self.graph
        assert g is not None
        res = Result(g.name, LABELS[name], edges=g.m, extra={"query": workload})
        why = self.unavailable(name)
        if why is not None:
            res.status, res.note = "skipped", why
            return res, None
        answer = None
        for i in range(self.args.warmups + self.args.repeat):
            answer, jobs, seconds = self.run(name, workload)
            if i >= self.args.warmups:
                res.times.append(seconds)
                res.spark_jobs = jobs
        assert answer is not None
        res.count = len(answer.nodes)
        res.extra["rounds"] = answer.rounds
        res.extra["times_s"] = [round(t, 4) for t in res.times]
        return res, answer


def graphs(args: argparse.Namespace) -> list[Graph]:
    """The generated power-law graph (unless ``--edges 0``) and the edge lists given."""
    from faq.io import load_edge_array
    from faq.testing import power_law_graph

    out = []
    if args.edges:
        und = power_law_graph(
            max(args.edges // 10, 100), args.edges // 2, seed=args.seed, exponent=args.exponent
        )
        name = f"power-law m={args.edges:,}"
        if args.exponent != 2.1:
            name = f"power-law γ={args.exponent:g} m={args.edges:,}"
        out.append(weighted_graph(name, und, args.seed + 1, both=True, source=args.source))
    for p in args.paths:
        out.append(
            weighted_graph(Path(p).name, load_edge_array(p), args.seed + 1, False, args.source)
        )
    return out


def cell(r: Result | None) -> str:
    """A time cell: ``1.23 s, 45 jobs``, or why there is none."""
    if r is None or r.status != "ok" or r.median_s is None:
        return f"skipped: {r.note}" if r is not None else "-"
    jobs = f", {r.spark_jobs} jobs" if r.spark_jobs is not None else ""
    return fmt_s(r.median_s) + jobs


def ratio(num: Result | None, den: Result | None) -> str:
    """``num``'s median time ÷ ``den``'s, or ``-`` when either has none."""
    if num is None or den is None or not (num.median_s and den.median_s):
        return "-"
    return fmt_ratio(num.median_s / den.median_s)


def print_table(workload: str, loads: list[Graph], results: list[Result]) -> None:
    """The Markdown table of one workload: sizes, rounds, times and the ratios."""
    text, semiring = PROGRAMS[workload]
    print(f"\n## {WORKLOADS[workload]} ({semiring}): `{'; '.join(text.splitlines())}`\n")
    print(
        "| graph | edges | reachable | rounds engine / PySpark | engine | engine (pandas "
        "input) | PySpark iteration | scipy | PySpark ÷ engine | PySpark ÷ engine (pandas) "
        "| engine ÷ scipy |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r.workload, r.extra["query"], r.contender): r for r in results}
    for g in loads:
        eng, pd_, ps, sc = (by.get((g.name, workload, LABELS[n])) for n in CONTENDERS)
        found = [r.count for r in (eng, pd_, ps, sc) if r is not None and r.count is not None]
        rounds = " / ".join(
            str(r.extra.get("rounds")) if r is not None and r.status == "ok" else "-"
            for r in (eng, ps)
        )
        print(
            f"| {g.name} | {g.m:,} | {fmt_rows(found[0]) if found else '-'} | {rounds} "
            f"| {cell(eng)} | {cell(pd_)} | {cell(ps)} | {cell(sc)} | {ratio(ps, eng)} "
            f"| {ratio(ps, pd_)} | {ratio(eng, sc)} |"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="*", help="SNAP edge lists to add (directed, as written)")
    p.add_argument(
        "--edges",
        type=int,
        default=1_000_000,
        help="directed edges of the power-law graph (0: none); default 1,000,000",
    )
    p.add_argument(
        "--exponent", type=float, default=2.1, help="degree exponent of the power-law graph (2.1)"
    )
    p.add_argument("--source", type=int, help="source node (default: highest out-degree)")
    p.add_argument("--seed", type=int, default=0, help="seed of the graph (weights: seed + 1)")
    p.add_argument(
        "--workload", choices=["sssp", "reach", "both"], default="both", help="default both"
    )
    p.add_argument("--repeat", type=int, default=1, help="timed runs per cell (median)")
    p.add_argument("--warmups", type=int, default=0, help="un-timed runs per cell before them")
    p.add_argument("--checkpoint-every", type=int, default=5, help="PySpark iteration (5)")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--no-warmup", action="store_true", help="skip the tiny-graph warm-up pass")
    p.add_argument("--ticks", type=int, default=5, help="incremental view: ticks (5)")
    p.add_argument("--tick-edges", type=int, default=1000, help="edge changes per tick (1000)")
    p.add_argument("--tick-deletions", type=int, default=300, help="deletions per tick (300)")
    p.add_argument("--no-view", action="store_true", help="skip the incremental view")
    p.add_argument(
        "--view-only",
        action="store_true",
        help="only the incremental view (with the sssp workload): no Spark session, no batch cells",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 20,000 edges, 2 ticks")
    add_out_argument(p)
    args = p.parse_args(argv)
    if args.repeat < 1 or args.warmups < 0 or args.checkpoint_every < 1 or args.edges < 0:
        p.error("--repeat and --checkpoint-every must be ≥ 1, --warmups and --edges ≥ 0")
    if args.ticks < 1 or not 0 <= args.tick_deletions <= args.tick_edges:
        p.error("--ticks must be ≥ 1 and 0 ≤ --tick-deletions ≤ --tick-edges")
    if args.quick:
        args.edges = min(args.edges, 20_000) if args.edges else 0
        args.repeat, args.warmups = 1, 0
        args.ticks = min(args.ticks, 2)
    if args.view_only and (args.no_view or args.workload == "reach"):
        p.error("--view-only needs the incremental view: not with --no-view or --workload reach")
    args.workloads = ["sssp", "reach"] if args.workload == "both" else [args.workload]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; raises AssertionError when two contenders disagree."""
    args = parse_args(argv)
    meta = run_info("recursion", argv)
    print(f"# Recursive queries: shortest paths and reachability  ({meta['date']})")
    print(f"command: `{meta['command']}`\n")
    t_gen = time.perf_counter()
    loads = graphs(args)
    t_gen = time.perf_counter() - t_gen
    if args.view_only:
        return view_only(args, meta, loads, t_gen)
    b = Bench(args)
    b.start()
    names = [n for n in CONTENDERS if b.unavailable(n) is None]
    if b.csgraph is None:
        print(missing_note("scipy", "the scipy column") + "\n")
    print(
        f"cores: {meta['cores']}, load average at start: "
        f"{' '.join(f'{x:.1f}' for x in meta['load_average_at_start'])}, Spark "
        f"{b.spark.version} {args.master}; {args.warmups} warm-up + {args.repeat} timed run(s) "
        f"per cell; PySpark iteration checkpoints every {args.checkpoint_every} rounds; "
        f"graphs built in {t_gen:.1f} s"
    )
    if not args.no_warmup:
        t0 = time.perf_counter()
        from faq.testing import power_law_graph

        b.load(weighted_graph("warm-up", power_law_graph(100, 300, seed=1), 0, True))
        for workload in args.workloads:
            for n in names:
                b.run(n, workload)
        print(f"warm-up (every contender on a 600-edge graph): {time.perf_counter() - t0:.1f} s")
    results: list[Result] = []
    for g in loads:
        b.load(g)
        print(f"\n{g.name}: {g.m:,} directed edges, source {g.source}", flush=True)
        for workload in args.workloads:
            answers: dict[str, Answer] = {}
            for n in CONTENDERS:
                r, answer = b.measure(workload, n)
                results.append(r)
                if answer is not None:
                    answers[LABELS[n]] = answer
                runs = ", ".join(f"{t:.2f}" for t in r.times)
                rounds = f", {r.extra.get('rounds')} rounds" if r.extra.get("rounds") else ""
                print(
                    f"  {workload:5s} {LABELS[n]:18s} {cell(r)}{rounds}   runs: {runs}", flush=True
                )
            compare(workload, g.name, answers)
        if "sssp" in args.workloads and not args.no_view:
            view = measure_view(g, args)
            results += view
            tick, again = (r.median_s or 0.0 for r in view)
            print(
                f"  sssp  incremental view   tick {tick:.4f} s, recompute {again:.2f} s "
                f"(median of {args.ticks})",
                flush=True,
            )
        b.E.unpersist()
    set_ratios(results, BASELINE, key=lambda r: (r.workload, r.extra["query"]))
    for workload in args.workloads:
        print_table(workload, loads, results)
    if "sssp" in args.workloads and not args.no_view:
        print_view_table(results, args)
    print(
        "\nMedian wall-clock seconds of the timed runs; 'N jobs' = Spark jobs of one run; "
        "rounds: the engine's len(run.rounds) (round 0 is the base rule) and the PySpark "
        "iteration's joins (the last finds nothing).  Every contender found the same nodes "
        "and distances (the incremental view: the same answer as a recompute after every tick)."
    )
    meta.update(
        spark=b.spark.version,
        master=args.master,
        driver_memory="4g",
        repeat=args.repeat,
        warmups=args.warmups,
        checkpoint_every=args.checkpoint_every,
        workloads=args.workloads,
        sources={g.name: g.source for g in loads},
        contenders=[LABELS[n] for n in names],
        view_ticks=None if args.no_view else args.ticks,
    )
    csv_path, json_path = write_results(results, args.out, "recursion", meta)
    print(f"\nwritten: {csv_path} and {json_path}")
    return 0


def view_only(
    args: argparse.Namespace, meta: dict[str, Any], loads: list[Graph], t_gen: float
) -> int:
    """``--view-only``: the incremental view's ticks and recomputes, in the driver (no Spark)."""
    print(
        f"cores: {meta['cores']}, load average at start: "
        f"{' '.join(f'{x:.1f}' for x in meta['load_average_at_start'])}; incremental view "
        f"only, {args.ticks} ticks; graphs built in {t_gen:.1f} s"
    )
    results: list[Result] = []
    for g in loads:
        print(f"\n{g.name}: {g.m:,} directed edges, source {g.source}", flush=True)
        view = measure_view(g, args)
        results += view
        tick, again = (r.median_s or 0.0 for r in view)
        print(
            f"  sssp  incremental view   tick {tick:.4f} s ({tick / args.tick_edges * 1e6:.1f} µs "
            f"per change), recompute {again:.2f} s (median of {args.ticks})",
            flush=True,
        )
    print_view_table(results, args)
    meta.update(
        view_ticks=args.ticks, tick_edges=args.tick_edges, tick_deletions=args.tick_deletions
    )
    csv_path, json_path = write_results(results, args.out, "recursion", meta)
    print(f"\nwritten: {csv_path} and {json_path}")
    return 0


if __name__ == "__main__":
    status = main()
    stop_spark()
    raise SystemExit(status)
