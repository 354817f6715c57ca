"""Triangles and 4-cliques: this engine against binary joins, Spark SQL, GraphFrames, DuckDB …

Usage::

    python benchmarks/triangles.py --quick             # smoke run, small sizes (a minute)
    python benchmarks/triangles.py --snap /work/shared/data/graphs     # the full run
    python benchmarks/triangles.py --query triangle --hub-n 1000 10000 \\
        --power-edges 1000000 --timeout 300 /work/shared/data/graphs/CA-GrQc.txt

Queries (``--query triangle|4clique|both``), over ``counting`` on an oriented
edge list (one row ``(u, v)``, ``u < v`` per undirected edge, so every match
is one triangle ``a < b < c`` or one 4-clique ``a < b < c < d``)::

    triangle  Q() :- E(a, b), E(b, c), E(a, c)
    4clique   Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)

Workloads:

* the hub graph family (:func:`faq.testing.hub_graph`, ``--hub-n``): every
  binary join order builds ≥ n² rows while there are 2n + 1 triangles and no
  4-clique;
* an Erdős–Rényi graph (``--random-edges``) and Chung–Lu power-law graphs
  (``--power-edges``, on ``edges / 5`` nodes unless ``--power-nodes`` says
  otherwise);
* real edge lists given as paths, or every ``*.txt`` of a folder (``--snap``);
  comment lines, CRLF line ends, self-loops and edges stored in both directions
  are fine (:func:`faq.io.load_edge_array`, :func:`faq.io.undirected_simple`).

Contenders (``--contenders``; a missing optional package skips its column with
a one-line note, it never stops the run):

* ``engine``: ``faq.query(...).solve(E=df, join="auto")``;
* ``binary``: the same query with ``join="binary"``;
* ``sql``: Spark SQL, ``count(*)`` of the three-way (triangle) or six-way
  (4-clique) self-join of ``e``;
* ``graphframes``: GraphFrames' TriangleCount algorithm in plain PySpark
  (:func:`graphframes_triangle_count`; triangles only);
* ``duckdb``: the same SQL in DuckDB (``--duckdb-threads``, ``--duckdb-memory``);
* ``graphblas``: python-graphblas, masked ``plus_times`` ``C<A> = A·A`` summed
  (triangles only);
* ``scipy``: ``scipy.sparse`` on the degree-ordered adjacency ``U``,
  ``sum((U·U) ∘ U)`` in row blocks (triangles only);
* ``numpy``: the reference counters, :func:`faq.testing.triangle_count_numpy`
  and :func:`clique_count_numpy`;
* ``networkx``: ``nx.triangles`` / ``nx.enumerate_all_cliques``, small graphs only.

Methodology: one ``local[2]`` session with ``spark.driver.memory=4g``; every
Spark contender starts from the same DataFrame, materialised once per
workload with ``localCheckpoint`` (and registered as the view ``e``); DuckDB
from a table; the in-memory contenders from the numpy edge array (their
times include building their matrix or graph).  First every contender runs
once on a tiny hub graph (JVM and import warm-up).  Then each cell is one
un-timed warm-up run (``--warmups``) and the median of ``--repeat`` timed
runs; fewer runs (noted ``[k runs]``) once the cell's runs add up to half the
timeout, and only the warm-up run (noted ``cold run``) when it alone took more
than a quarter of the timeout, so that a slow cell costs about one timeout.
Spark and DuckDB runs longer than ``--timeout`` seconds are cancelled
(``cancelJobGroup`` / ``interrupt``; Spark's cache is cleared after it) and
reported as ``timeout``.  The workloads run from the smallest to the largest
(the tables keep the order hubs, random, power-law, edge lists), and a
contender that timed out on a workload is not run on a later one that is at
least as large in edges, in the smallest pairwise join and in the answer
(``skipped``; ``--no-skip`` runs everything).  Every Spark run is tagged with
its own job group and the table shows the Spark jobs it launched (from the
status tracker).  Each cell shows its ratio to the engine (``×2.0`` = twice
the engine's time).  Every count is checked against the numpy reference (and
the hub family against its count by construction); a mismatch is flagged in
the table and on stderr and the exit status is 1.  With ``--published TSV``
(columns ``graph``, ``Nedges_undirected_noloops``, ``Ntri``, as in the
GraphChallenge results), an edge list whose name is in the file is also checked
against its published edge and triangle counts.

The table is printed at the end and written as CSV and JSON
(``benchmarks/results/triangles.csv`` and ``.json``, or under ``--out DIR``).
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
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks._common import (
    NOT_INSTALLED,
    Result,
    Timeout,
    add_out_argument,
    fmt_ratio,
    fmt_rows,
    fmt_s,
    job_group,
    jobs_in_group,
    missing_note,
    new_job_group,
    optional_import,
    run_info,
    run_limited,
    set_ratios,
    stop_spark,
    write_results,
)
from faq.testing import (
    hub_graph,
    pairwise_join_sizes,
    power_law_graph,
    random_graph,
    ranges,
    triangle_count_numpy,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

QUERIES: dict[str, str] = {
    "triangle": "Q() :- E(a, b), E(b, c), E(a, c)",
    "4clique": "Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)",
}
QUERY_LABELS = {"triangle": "triangles", "4clique": "4-cliques"}
SQL: dict[str, str] = {
    # e1(a, b), e2(b, c), e3(a, c)
    "triangle": (
        "SELECT count(*) FROM e e1 JOIN e e2 ON e1.dst = e2.src "
        "JOIN e e3 ON e1.src = e3.src AND e2.dst = e3.dst"
    ),
    # e1(a, b), e2(a, c), e3(a, d), e4(b, c), e5(b, d), e6(c, d), joined triangle first
    "4clique": (
        "SELECT count(*) FROM e e1 "
        "JOIN e e4 ON e4.src = e1.dst "
        "JOIN e e2 ON e2.src = e1.src AND e2.dst = e4.dst "
        "JOIN e e3 ON e3.src = e1.src "
        "JOIN e e5 ON e5.src = e1.dst AND e5.dst = e3.dst "
        "JOIN e e6 ON e6.src = e4.dst AND e6.dst = e3.dst"
    ),
}
CONTENDERS = (
    "engine",
    "binary",
    "sql",
    "graphframes",
    "duckdb",
    "graphblas",
    "scipy",
    "numpy",
    "networkx",
)
LABELS = {
    "engine": "engine (auto)",
    "binary": "engine (binary)",
    "sql": "Spark SQL",
    "graphframes": "GraphFrames algorithm",
    "duckdb": "DuckDB",
    "graphblas": "GraphBLAS",
    "scipy": "scipy",
    "numpy": "numpy reference",
    "networkx": "networkx",
}
SPARK = frozenset({"engine", "binary", "sql", "graphframes"})
TRIANGLE_ONLY = frozenset({"graphframes", "graphblas", "scipy"})
PACKAGES = {
    "duckdb": "duckdb",
    "graphblas": "graphblas",
    "scipy": "scipy.sparse",
    "networkx": "networkx",
}
BASELINE = LABELS["engine"]


@dataclass
class Workload:
    """A graph to count on: its oriented edges and what is known about it."""

    name: str
    edges: np.ndarray
    family: str = ""
    expected: dict[str, int] = field(default_factory=dict)  # counts known by construction
    truth: dict[str, int] = field(default_factory=dict)  # reference counts
    pairwise: int = 0  # rows of the cheapest first binary join
    published: tuple[int, int] | None = None  # (edges, triangles) published for this graph

    @property
    def m(self) -> int:
        return len(self.edges)


# -- reference counts ------------------------------------------------------------------------
def _blocks(counts: np.ndarray, block: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` slices of ``counts`` each summing to about ``block`` (≥ 1 item)."""
    cum = np.cumsum(counts)
    start = 0
    while start < len(counts):
        base = cum[start - 1] if start else 0
        stop = max(int(np.searchsorted(cum, base + block, side="right")), start + 1)
        yield start, stop
        start = stop


def clique_count_numpy(edges: np.ndarray, k: int = 4, block: int = 10_000_000) -> int:
    """Number of ``k``-cliques of an undirected graph, with numpy alone (the reference).

    The edges are oriented from lower to higher (degree, id) rank, which is
    acyclic, so every clique is found exactly once, as the increasing sequence
    of its vertices: starting from the edges, a partial clique ``v1 → … → vj``
    is extended by every out-neighbour ``w`` of ``vj`` that is also an
    out-neighbour of ``v1 … vj-1`` (binary searches among the sorted edge
    keys).  For ``k = 4`` that is: for every edge, the common out-neighbours of
    its two ends, then the edges among those.  In this orientation out-degrees
    are at most ``√(2m)``; candidates are processed in blocks of about
    ``block`` to bound memory.

    Parameters
    ----------
    edges : numpy.ndarray
        ``(m, 2)`` integer array of undirected edges, in any orientation;
        self-loops and duplicate edges (either direction) are ignored.
    k : int, default 4
        Clique size (≥ 1).
    block : int, default 10_000_000
        Approximate number of candidates examined at once.

    Returns
    -------
    int
        The number of ``k``-cliques.

    Examples
    --------
    >>> clique_count_numpy(np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]), 4)
    1
    >>> clique_count_numpy(hub_graph(100), 3)
    201
    """
    if k < 1:
        raise ValueError(f"clique_count_numpy: k must be ≥ 1, got {k}")
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    if len(e) == 0:
        return len(np.unique(e)) if k == 1 else 0
    ids, inv = np.unique(e, return_inverse=True)
    inv = inv.reshape(-1, 2)
    n = len(ids)
    if k == 1:
        return n
    und = np.unique(np.minimum(inv[:, 0], inv[:, 1]) * n + np.maximum(inv[:, 0], inv[:, 1]))
    deg = np.bincount(np.concatenate([und // n, und % n]), minlength=n)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((np.arange(n), deg))] = np.arange(n)
    ru, rv = rank[und // n], rank[und % n]
    keys = np.sort(np.minimum(ru, rv) * n + np.maximum(ru, rv))  # a CSR by (rank lo, rank hi)
    if k == 2:
        return len(keys)
    src, dst = keys // n, keys % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    outdeg = np.diff(indptr)

    def has_edge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        probe = a * n + b
        pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        return keys[pos] == probe

    def extend(prefix: list[np.ndarray]) -> int:
        """k-cliques containing each partial clique of ``prefix`` (one array per position)."""
        last = prefix[-1]
        cand = outdeg[last]
        total = 0
        for s, t in _blocks(cand, block):
            c = cand[s:t]
            w = dst[ranges(indptr[last[s:t]], c)]
            rows = [np.repeat(p[s:t], c) for p in prefix]
            keep = np.ones(len(w), dtype=bool)
            for p in rows[:-1]:
                keep &= has_edge(p, w)
            if len(prefix) + 1 == k:
                total += int(np.count_nonzero(keep))
            elif keep.any():
                total += extend([r[keep] for r in rows] + [w[keep]])
        return total

    return extend([src, dst])


def reference_count(edges: np.ndarray, query: str) -> int:
    """The numpy reference count of ``query`` (``"triangle"`` or ``"4clique"``)."""
    if query == "triangle":
        return int(triangle_count_numpy(edges))
    return clique_count_numpy(edges, 4)


# -- GraphFrames' algorithm ------------------------------------------------------------------
def graphframes_triangle_count(edges: DataFrame, src: str = "src", dst: str = "dst") -> int:
    """Triangles of an undirected graph by GraphFrames' TriangleCount algorithm, in PySpark.

    GraphFrames (``TriangleCount``, exact algorithm) makes the graph simple and
    undirected (self-loops dropped, each edge once as ``(min, max)``), collects
    every vertex's neighbour set with ``collect_set`` (kept persisted, as
    GraphFrames does), joins each edge ``(u, v)`` with both sets and takes
    ``size(array_intersect(N(u), N(v)))``: the third vertices of the
    triangles through that edge.  GraphFrames then sums these per vertex; the
    total alone is the sum over edges, which counts each triangle once per
    edge, so it is divided by 3.

    Parameters
    ----------
    edges : pyspark.sql.DataFrame
        Edges in any orientation, duplicates and self-loops allowed.
    src, dst : str
        The endpoint columns.

    Returns
    -------
    int
        The triangle count.
    """
    from pyspark.sql import functions as F

    s, d = F.col(src), F.col(dst)
    e = (
        edges.where(s != d)
        .select(F.least(s, d).alias("src"), F.greatest(s, d).alias("dst"))
        .distinct()
    )
    both = e.unionByName(e.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
    nbrs = both.groupBy("src").agg(F.collect_set("dst").alias("nbrs")).persist()
    try:
        nu = nbrs.select(F.col("src").alias("u"), F.col("nbrs").alias("nu"))
        nv = nbrs.select(F.col("src").alias("v"), F.col("nbrs").alias("nv"))
        per_edge = (
            e.join(nu, F.col("src") == F.col("u"))
            .join(nv, F.col("dst") == F.col("v"))
            .select(F.size(F.array_intersect("nu", "nv")).cast("long").alias("t"))
        )
        total = per_edge.agg(F.sum("t")).first()[0] or 0
    finally:
        nbrs.unpersist()
    if total % 3:
        raise AssertionError(f"per-edge common neighbours sum to {total}, not a multiple of 3")
    return int(total) // 3


# -- contenders ------------------------------------------------------------------------------
class Contenders:
    """Per-workload setup and one run function per contender."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.spark: Any = None
        self.duck: Any = None
        self.edges: np.ndarray = np.empty((0, 2), dtype=np.int64)
        self.df: Any = None
        self.last_query: Any = None
        self.modules = {n: optional_import(mod) for n, mod in PACKAGES.items()}

    def missing(self) -> list[str]:
        """Chosen contenders whose package is not installed."""
        return [n for n in self.args.contenders if n in PACKAGES and self.modules[n] is None]

    def unavailable(self, name: str, query: str, m: int) -> str | None:
        """None when ``name`` can run ``query`` on ``m`` edges, else why it cannot."""
        if name in PACKAGES and self.modules[name] is None:
            return NOT_INSTALLED
        if name in TRIANGLE_ONLY and query != "triangle":
            return "triangles only"
        if name == "networkx":
            most = self.args.nx_max_edges if query == "triangle" else self.args.nx_max_edges_4clique
            if m > most:
                return f"> {most:,} edges"
        return None

    def start(self) -> None:
        if SPARK & set(self.args.contenders):
            from faq.session import local_session

            self.spark = local_session(self.args.master, **{"spark.driver.memory": "4g"})

    def load(self, edges: np.ndarray) -> None:
        """Make the workload's edges available to every contender (not timed)."""
        self.edges = edges
        if self.spark is not None:
            from faq.io import edges_dataframe

            df = edges_dataframe(edges, self.spark, ("src", "dst"))
            self.df = df.localCheckpoint(eager=True)
            self.df.createOrReplaceTempView("e")
        if "duckdb" in self.args.contenders and self.modules["duckdb"] is not None:
            import pandas as pd

            if self.duck is not None:
                self.duck.close()
            self.duck = self.modules["duckdb"].connect()  # fresh: no state from a cancelled run
            self.duck.execute(f"SET threads = {self.args.duckdb_threads}").fetchall()
            self.duck.execute(f"SET memory_limit = '{self.args.duckdb_memory}'").fetchall()
            pdf = pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]})
            self.duck.register("e_in", pdf)
            self.duck.execute("CREATE OR REPLACE TABLE e AS SELECT * FROM e_in").fetchall()
            self.duck.unregister("e_in")

    def run(self, name: str, query: str, timeout: float) -> tuple[int, int | None, float]:
        """One run: ``(count, Spark jobs or None, seconds)``; raises :class:`Timeout` past
        ``timeout``.

        The seconds are those of the contender's own call alone: not the thread
        that enforces the timeout, the job group or the reading of the job count
        (which waits for Spark's listener bus), so a 50 ms query is not billed
        for 50 ms of bookkeeping.  A Spark run that timed out raises
        ``Timeout(jobs launched before it was cancelled)``.
        """
        if name in SPARK:
            fns: dict[str, Callable[[], int]] = {
                "engine": lambda: self._engine(query, "auto"),
                "binary": lambda: self._engine(query, "binary"),
                "sql": lambda: int(self.spark.sql(SQL[query]).collect()[0][0]),
                "graphframes": lambda: graphframes_triangle_count(self.df),
            }
            return self._spark_run(fns[name], f"{LABELS[name]}: {query}", timeout)
        if name == "duckdb":
            got, seconds = run_limited(
                lambda: _timed(lambda: int(self.duck.execute(SQL[query]).fetchall()[0][0])),
                timeout,
                self.duck.interrupt,
            )
            return got, None, seconds
        got, seconds = _timed(lambda: getattr(self, f"_{name}")(query))
        return got, None, seconds

    def _spark_run(
        self, fn: Callable[[], int], what: str, timeout: float
    ) -> tuple[int, int, float]:
        sc = self.spark.sparkContext
        group = new_job_group("triangles")

        def target() -> tuple[int, float]:
            with job_group(sc, group, what):
                return _timed(fn)

        try:
            got, seconds = run_limited(target, timeout, lambda: sc.cancelJobGroup(group))
        except Timeout:
            jobs = jobs_in_group(sc, group)
            self.spark.catalog.clearCache()  # what the cancelled run cached (not our input)
            raise Timeout(jobs) from None
        return got, jobs_in_group(sc, group), seconds

    def _engine(self, query: str, join: str) -> int:
        from faq import query as make_query

        q = make_query(QUERIES[query], semiring="counting")
        n = q.solve(E=self.df, join=join, trace=self.args.trace).scalar()
        self.last_query = q
        return int(n)

    def explain(self) -> str:
        """The engine's report of its last (auto) run."""
        return self.last_query.explain(E=self.df, join="auto")

    # in-memory contenders: ``query`` is "triangle" unless said otherwise
    def _graphblas(self, query: str) -> int:
        gb = self.modules["graphblas"]
        e = self.edges
        k = int(e.max()) + 1 if len(e) else 1
        A = gb.Matrix.from_coo(e[:, 0], e[:, 1], np.ones(len(e), dtype=np.int64), nrows=k, ncols=k)
        C = A.mxm(A, gb.semiring.plus_times).new(mask=A.S)
        v = C.reduce_scalar().value
        return int(v) if v is not None else 0

    def _scipy(self, query: str, block: int = 20_000_000) -> int:
        sparse = self.modules["scipy"]
        e = self.edges
        if len(e) == 0:
            return 0
        k = int(e.max()) + 1
        deg = np.bincount(e.ravel(), minlength=k)
        rank = np.empty(k, dtype=np.int64)
        rank[np.lexsort((np.arange(k), deg))] = np.arange(k)
        r = rank[e]
        lo, hi = r.min(axis=1), r.max(axis=1)
        U = sparse.csr_matrix((np.ones(len(e), dtype=np.int64), (lo, hi)), shape=(k, k))
        paths = U @ np.diff(U.indptr)  # 2-paths u → v → w starting at each u
        total = 0
        for s, t in _blocks(paths, block):
            rows = U[s:t]
            total += int((rows @ U).multiply(rows).sum())
        return total

    def _numpy(self, query: str) -> int:
        return reference_count(self.edges, query)

    def _networkx(self, query: str) -> int:
        nx = self.modules["networkx"]
        G = nx.Graph()
        G.add_edges_from(self.edges.tolist())
        if query == "triangle":
            return sum(nx.triangles(G).values()) // 3
        n = 0
        for c in nx.enumerate_all_cliques(G):  # by increasing size
            if len(c) > 4:
                break
            n += len(c) == 4
        return n


# -- workloads -------------------------------------------------------------------------------
def snap_paths(folder: str) -> list[str]:
    """Every ``*.txt`` file of ``folder``, sorted by name."""
    p = Path(folder)
    if not p.is_dir():
        raise FileNotFoundError(f"--snap: {folder!r} is not a folder")
    return [str(x) for x in sorted(p.glob("*.txt"))]


def read_published(path: str) -> dict[str, tuple[int, int]]:
    """Published ``(edges, triangles)`` by lower-case graph name, from a TSV file.

    The file has a header with the columns ``graph``, ``Nedges_undirected_noloops``
    and ``Ntri`` (the GraphChallenge triangle results); other columns are ignored.
    """
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    need = {"graph", "Nedges_undirected_noloops", "Ntri"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(f"--published: {path} needs the columns {sorted(need)}")
    return {
        r["graph"].strip().lower(): (int(r["Nedges_undirected_noloops"]), int(r["Ntri"]))
        for r in rows
    }


def workloads(args: argparse.Namespace) -> list[Workload]:
    """The graphs of this run, in order: hubs, random, power-law, then edge lists by size."""
    from faq.io import load_edge_array, undirected_simple

    out: list[Workload] = []
    for n in sorted(args.hub_n):
        exp = {"triangle": 2 * n + 1, "4clique": 0}
        out.append(Workload(f"hub n={n:,}", hub_graph(n), "hub", exp))
    if args.random_edges:
        e = random_graph(args.random_nodes, args.random_edges, seed=args.seed)
        out.append(Workload(f"random m={args.random_edges:,}", e, "random"))
    nodes = args.power_nodes or [max(m // 5, 100) for m in args.power_edges]
    if len(nodes) != len(args.power_edges):
        raise ValueError("--power-nodes needs one node count per --power-edges value")
    for n, m in sorted(zip(nodes, args.power_edges, strict=True), key=lambda x: x[1]):
        t0 = time.perf_counter()
        e = power_law_graph(n, m, seed=args.seed)
        print(f"generated power-law m={m:,} on {n:,} nodes in {time.perf_counter() - t0:.1f} s")
        out.append(Workload(f"power-law m={m:,}", e, "power-law"))
    files = []
    for p in args.paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lines that are not edges: counted, not fatal
            files.append(Workload(Path(p).stem, undirected_simple(load_edge_array(p)), "snap"))
    out += sorted(files, key=lambda w: w.m)
    if args.published:
        known = read_published(args.published)
        for w in files:
            w.published = known.get(w.name.lower())
    return out


# -- measuring one cell ----------------------------------------------------------------------
def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    """``(fn(), seconds it took)``."""
    t0 = time.perf_counter()
    got = fn()
    return got, time.perf_counter() - t0


class Runner:
    """Measures cells, checks counts and remembers timeouts for the skip rule."""

    def __init__(self, c: Contenders, args: argparse.Namespace) -> None:
        self.c = c
        self.args = args
        self.timed_out: dict[tuple[str, str], list[Workload]] = {}
        self.mismatches: list[str] = []
        self.errors: list[str] = []

    def dominated_by(self, w: Workload, query: str, name: str) -> Workload | None:
        """A workload no larger than ``w`` on which ``name`` timed out, if any."""
        if self.args.no_skip:
            return None
        for v in self.timed_out.get((query, name), []):
            if w.m >= v.m and w.pairwise >= v.pairwise and w.truth[query] >= v.truth[query]:
                return v
        return None

    def measure(self, w: Workload, query: str, name: str) -> Result:
        """Warm-up and timed runs of contender ``name`` on ``query`` over ``w``: one cell.

        Parameters
        ----------
        w : Workload
            The graph, already loaded (:meth:`Contenders.load`).
        query : {"triangle", "4clique"}
            The query.
        name : str
            The contender, one of :data:`CONTENDERS`.

        Returns
        -------
        Result
            Status ``ok`` (with times, count and Spark jobs), ``timeout``,
            ``skipped`` (with the reason) or ``error`` (with the exception).
        """
        args = self.args
        res = Result(
            w.name,
            LABELS[name],
            edges=w.m,
            extra={"query": query, "family": w.family, "expected": w.truth[query]},
        )
        res.extra["correct"] = None
        why = self.c.unavailable(name, query, w.m)
        if why is None and (v := self.dominated_by(w, query, name)) is not None:
            why = f"timed out on {v.name} (no larger)"
        if why is not None:
            res.status, res.note = "skipped", why
            return res
        spent = 0.0
        runs = args.warmups + args.repeat
        for i in range(runs):
            warm = i < args.warmups
            try:
                got, jobs, dt = self.c.run(name, query, args.timeout)
            except Timeout as exc:
                jobs_before = exc.args[0] if exc.args else None
                after = f" after {jobs_before} Spark jobs" if jobs_before is not None else ""
                if res.times:  # report what finished, note the timeout
                    res.note = f"[{res.runs} run(s); one more cancelled at {args.timeout:g} s]"
                else:
                    res.status = "timeout"
                    res.note = f"cancelled at {args.timeout:g} s{after}"
                    self.timed_out.setdefault((query, name), []).append(w)
                break
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                res.status, res.note = "error", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                self.errors.append(f"{w.name} {query}: {LABELS[name]}: {res.note}")
                print(f"\n  {LABELS[name]}: ERROR {exc!r}"[:2000], file=sys.stderr)
                break
            spent += dt
            self.check(w, query, name, got, res)
            if warm:
                res.extra["warmup_s"] = round(dt, 4)
                if dt > args.timeout / 4:  # minutes per run: the warm-up is the measurement
                    res.times, res.spark_jobs = [dt], jobs
                    res.note = "cold run only (the warm-up took over a quarter of the timeout)"
                    break
                continue
            res.times.append(dt)
            res.spark_jobs = jobs
            if spent > args.timeout / 2 and i < runs - 1:
                res.note = (
                    f"[{res.runs} of {args.repeat} runs: the cell's runs passed half the timeout]"
                )
                break
        res.extra["times_s"] = [round(t, 4) for t in res.times]
        return res

    def check(self, w: Workload, query: str, name: str, got: int, res: Result) -> None:
        """Record ``got`` in the cell; a count that differs from the reference is flagged once."""
        res.count = got
        ok = got == w.truth[query]
        first_wrong = not ok and res.extra["correct"] is not False
        res.extra["correct"] = ok if res.extra["correct"] is None else res.extra["correct"] and ok
        if first_wrong:
            msg = (
                f"{w.name}: {LABELS[name]} counted {got:,} {QUERY_LABELS[query]}, "
                f"reference {w.truth[query]:,}"
            )
            self.mismatches.append(msg)
            print(f"\n  !!! COUNT MISMATCH: {msg}", file=sys.stderr)


# -- the table -------------------------------------------------------------------------------
def cell_text(r: Result, timeout: float, repeat: int) -> str:
    """One table cell: time, Spark jobs, fewer runs than ``repeat``, ratio to the engine."""
    if r.status == "timeout":
        return f"timeout (> {timeout:g} s)"
    if r.status == "skipped":
        return f"skipped: {r.note}"
    if r.status == "error":
        return f"error: {r.note.split(':')[0]}"
    assert r.median_s is not None
    text = fmt_s(r.median_s)
    if r.spark_jobs is not None:
        text += f", {r.spark_jobs} jobs"
    if r.note.startswith("cold"):
        text += " [cold run]"
    elif r.runs < repeat:
        text += f" [{r.runs} run{'s' * (r.runs > 1)}]"
    if r.ratio is not None and r.contender != BASELINE:
        text += f" ({fmt_ratio(r.ratio)})"
    if r.extra.get("correct") is False:
        text = f"**WRONG: {r.count:,}** " + text
    return text


def print_tables(
    loads: list[Workload], results: list[Result], args: argparse.Namespace, names: list[str]
) -> None:
    """The Markdown tables, one per query."""
    by = {(r.workload, r.extra["query"], r.contender): r for r in results}
    for query in args.queries:
        print(f"\n## {QUERY_LABELS[query]}: {QUERIES[query]}\n")
        header = ["graph", "edges", QUERY_LABELS[query], "smallest pairwise join"]
        header += [LABELS[n] for n in names]
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for w in loads:
            cells = [
                cell_text(by[(w.name, query, LABELS[n])], args.timeout, args.repeat) for n in names
            ]
            print(
                f"| {w.name} | {w.m:,} | {w.truth[query]:,} | {fmt_rows(w.pairwise)} | "
                + " | ".join(cells)
                + " |"
            )
    print(
        "\nMedian wall-clock seconds of the timed runs; 'N jobs' = Spark jobs of one run; "
        "(×r) = time / engine (auto) time; [k runs] = fewer timed runs than --repeat. "
        "'smallest pairwise join' = rows of the cheapest first join of any binary plan."
    )


# -- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="*", help="edge lists to add (SNAP format)")
    p.add_argument("--snap", metavar="DIR", help="add every *.txt edge list of this folder")
    p.add_argument(
        "--published", metavar="TSV", help="check edge lists against published triangle counts"
    )
    p.add_argument("--query", choices=["triangle", "4clique", "both"], default="both")
    p.add_argument("--hub-n", type=int, nargs="*", default=[1000, 3000, 10000, 30000])
    p.add_argument("--random-nodes", type=int, default=50_000)
    p.add_argument("--random-edges", type=int, default=300_000, help="0 to skip")
    p.add_argument(
        "--power-edges",
        type=int,
        nargs="*",
        default=[300_000, 1_000_000, 3_000_000],
        help="edge counts of the power-law graphs (none: skip them)",
    )
    p.add_argument(
        "--power-nodes", type=int, nargs="*", help="node counts, one per --power-edges (edges/5)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="timed runs per cell; the median is shown")
    p.add_argument("--warmups", type=int, default=1, help="un-timed runs before them (1)")
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds per Spark/DuckDB run (300; quick: 60)"
    )
    p.add_argument("--no-skip", action="store_true", help="run after timeouts on larger graphs")
    p.add_argument("--no-warmup", action="store_true", help="skip the start-up warm-up pass")
    p.add_argument("--nx-max-edges", type=int, default=200_000, help="networkx, triangles")
    p.add_argument("--nx-max-edges-4clique", type=int, default=20_000, help="networkx, 4-cliques")
    p.add_argument("--duckdb-threads", type=int, default=2)
    p.add_argument("--duckdb-memory", default="4GB", help="DuckDB memory_limit")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)}",
    )
    p.add_argument("--trace", action="store_true", help="engine: count every intermediate")
    p.add_argument("--explain", action="store_true", help="print the engine's plan per graph")
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, one run")
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
    if args.quick:
        args.hub_n = [n for n in args.hub_n if n <= 300] or [100, 300]
        args.random_nodes, args.random_edges = 2_000, min(args.random_edges, 10_000)
        args.power_edges = [m for m in args.power_edges if m <= 10_000] or [10_000]
        args.power_nodes = None
        args.repeat, args.warmups = 1, 0
        args.timeout = 60.0 if args.timeout is None else args.timeout
    args.timeout = 300.0 if args.timeout is None else args.timeout
    args.queries = ["triangle", "4clique"] if args.query == "both" else [args.query]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every count agrees with the reference, else 1."""
    args = parse_args(argv)
    meta = run_info("triangles", argv)
    t_start = time.perf_counter()
    print(f"# Triangle and 4-clique benchmark  ({meta['date']})")
    print(f"command: {meta['command']}")

    t_gen = time.perf_counter()
    loads = workloads(args)
    for w in loads:  # references first: the skip rule and the table need them
        w.pairwise = min(pairwise_join_sizes(w.edges).values()) if w.m else 0
        for query in args.queries:
            w.truth[query] = reference_count(w.edges, query)
            if query in w.expected and w.expected[query] != w.truth[query]:
                raise AssertionError(
                    f"{w.name}: reference {w.truth[query]} {query} != {w.expected[query]} "
                    "by construction"
                )
    t_gen = time.perf_counter() - t_gen
    checked = []
    for w in loads:
        if w.published is not None:
            got = (w.m, reference_count(w.edges, "triangle"))
            if got != w.published:
                raise AssertionError(
                    f"{w.name}: {got[0]:,} edges and {got[1]:,} triangles, published "
                    f"{w.published[0]:,} and {w.published[1]:,}"
                )
            checked.append(w.name)

    c = Contenders(args)
    c.start()
    names = [n for n in CONTENDERS if n in args.contenders]
    spark_v = c.spark.version if c.spark is not None else "-"
    meta.update(
        spark=spark_v,
        master=args.master,
        driver_memory="4g",
        repeat=args.repeat,
        warmups=args.warmups,
        timeout_s=args.timeout,
        queries=args.queries,
        contenders=[LABELS[n] for n in names],
        skip_after_timeout=not args.no_skip,
        duckdb_threads=args.duckdb_threads,
    )
    print(
        f"cores: {meta['cores']}, load average at start: "
        f"{' '.join(f'{x:.1f}' for x in meta['load_average_at_start'])}, Spark {spark_v} "
        f"{args.master}, {args.warmups} warm-up + {args.repeat} timed runs per cell, timeout "
        f"{args.timeout:g} s; graphs and reference counts in {t_gen:.1f} s"
    )
    if args.published:
        print(
            f"edges and triangles agree with {args.published} for {len(checked)} graph(s)"
            + (f": {', '.join(checked)}" if checked else "")
        )
    for n in c.missing():
        print(missing_note(PACKAGES[n], f"the {LABELS[n]} column"))

    if not args.no_warmup:  # JVM, imports and code paths, so the first workload is not penalised
        t_warm = time.perf_counter()
        c.load(hub_graph(20))
        for query in args.queries:
            for n in names:
                if c.unavailable(n, query, 83) is None:
                    try:
                        c.run(n, query, args.timeout)
                    except Timeout:
                        print(f"warm-up: {LABELS[n]} timed out on hub n=20 ({query})")
                    except Exception as exc:  # noqa: BLE001 - the measured runs report it again
                        print(f"warm-up: {LABELS[n]} failed ({query}): {exc!r}"[:500])
        print(f"warm-up (every contender on hub n=20): {time.perf_counter() - t_warm:.1f} s")

    runner = Runner(c, args)
    results: list[Result] = []
    for i, w in enumerate(sorted(loads, key=lambda w: (w.m, w.pairwise)), 1):
        c.load(w.edges)
        counts = ", ".join(f"{w.truth[q]:,} {QUERY_LABELS[q]}" for q in args.queries)
        print(f"\n[{i}/{len(loads)}] {w.name}: {w.m:,} edges, {counts}", flush=True)
        for query in args.queries:
            for n in names:
                elapsed = time.perf_counter() - t_start
                print(f"  {elapsed:6.0f}s  {query:8s} {LABELS[n]:22s} ", end="", flush=True)
                r = runner.measure(w, query, n)
                results.append(r)
                shown = cell_text(r, args.timeout, args.repeat)
                runs = ", ".join(f"{t:.2f}" for t in r.times)
                print(shown + (f"   runs: {runs}" if len(r.times) > 1 else ""), flush=True)
                if n == "engine" and args.explain and r.status == "ok":
                    print("    " + c.explain().replace("\n", "\n    "))
    set_ratios(results, BASELINE, key=lambda r: (r.workload, r.extra["query"]))
    for r in results:
        w = next(x for x in loads if x.name == r.workload)
        r.extra["smallest_pairwise_join"] = w.pairwise
        r.extra["published_triangles"] = w.published[1] if w.published else None
        r.extra["timeout_s"] = args.timeout

    print_tables(loads, results, args, names)
    meta["seconds"] = round(time.perf_counter() - t_start, 1)
    csv_path, json_path = write_results(results, args.out, "triangles", meta)
    print(f"\nwritten: {csv_path} and {json_path}  (total {meta['seconds']:.0f} s)")
    if runner.errors:
        print(
            f"{len(runner.errors)} cell(s) failed with an error:\n  " + "\n  ".join(runner.errors)
        )
    if runner.mismatches:
        print("\n!!! COUNT MISMATCHES:\n  " + "\n  ".join(runner.mismatches), file=sys.stderr)
        print("\n**COUNT MISMATCHES: " + "; ".join(runner.mismatches) + "**")
        return 1
    print("All counts agree with the numpy reference.")
    return 0


if __name__ == "__main__":
    status = main()
    stop_spark()
    sys.exit(status)
