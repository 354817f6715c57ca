"""Ticks of a maintained triangle count, as a user would run them, against recompute.

The view is ``IncrementalView(q, E=<pandas DataFrame of the graph>)`` (the driver
state) for ``q = Q() :- E(a, b), E(b, c), E(a, c)`` over the counting semiring; its
deltas are pandas DataFrames (columns ``src``, ``dst``, ``_weight``).  For each graph
and each delta size (``--deltas``: one edge, 1,000 and 10,000 changes by default) the
script steps the view ``--ticks`` times and reports the median (p50), p99 and largest
tick (``time.perf_counter`` around ``view.step``), the ticks over 4× the median (fold
spikes), and the driver's peak resident memory during the ticks.

Graphs
    * Chung–Lu power-law graphs, written here: vertex ``i`` has weight
      ``(i + 1)^(-1/(γ - 1))`` for each degree exponent γ of ``--exponents`` (2.1, 2.3,
      2.5), both endpoints of an edge are drawn independently in proportion to the
      weights until there are ``--edges`` distinct simple edges on ``--nodes`` vertices
      (``--edges / 5`` by default), oriented ``u < v``.  With ``--order low`` the hubs
      keep the low ids (so the orientation points out of the hubs); with ``shuffled``
      the ids are permuted at random; ``both`` runs each.
    * SNAP edge lists given as paths (``.gz`` read too), made simple and oriented
      ``u < v`` with :func:`faq.io.undirected_simple`.

Deltas
    A tick of ``d`` changes deletes ``round(0.3 d)`` edges chosen uniformly among the
    edges present (for one edge: a deletion with probability 0.3), so a hub's edges are
    deleted as often as they exist, and inserts the rest, absent edges whose endpoints
    are drawn in proportion to the current degrees (``--inserts degree``: the endpoints
    of uniformly chosen edges, the graph keeps its shape) or uniformly over the
    vertices (``--inserts uniform``).  The delta sizes run one after another on the same
    view (all one-edge ticks, then the 1,000-change ticks, …), then (``--after``) the
    one-edge ticks again, once the larger ticks' changes fill the relation's log (the
    row ``1 after the larger``: what a one-edge tick costs in a mixed stream).  Every
    tick's delta is
    made before any is timed, and the script's objects are then frozen out of the
    garbage collector (``gc.freeze``).  Before the first graph one small view takes a
    few ticks, untimed, so that compiled kernels are not charged to the first graph.

Recompute
    ``q.solve(E=Factor.from_pandas(final graph))`` (the local factor, from the pandas
    frame) and, with ``--spark``, ``q.solve(E=<Spark DataFrame of the final graph>)``
    in ``faq.session.local_session("local[2]")``; each the median of two runs.  The
    ratio recompute ÷ p50 tick is set against the targets of issue 42 (1,000× for one
    edge, 100× for 1,000 changes) and marked met or missed.

Beside the ticks
    With ``--beside python`` a thread of the same process runs plain Python (a loop of
    additions) for as long as the ticks run, as a user's own thread or a callback
    server's would: a compiled call that lets go of the GIL then waits to get it back
    (see the ``gil_rows`` setting).  The header line says so.

Settings
    ``--set NAME=VALUE`` (repeatable) runs the ticks under ``faq.settings(NAME=VALUE)``
    (the build and the recompute under the defaults), so that a threshold can be set
    against its default by the same command.

The view's final count is checked against :func:`faq.testing.triangle_count_numpy`
and against the recompute; a mismatch stops the script with an error.  The machine's
load average (``os.getloadavg``) is printed with every graph's figures.  The rows are
written to ``benchmarks/results/ticks.csv`` and ``.json`` (or under ``--out DIR``).

Usage::

    python benchmarks/ticks.py --quick
    python benchmarks/ticks.py --edges 1000000 --order both --deltas 1 1000 10000
    python benchmarks/ticks.py /work/shared/data/graphs/web-NotreDame.txt.gz --deltas 1 1000
    python benchmarks/ticks.py --exponents 2.3 --order low --ticks 1000 --deltas 1 --spark
    python benchmarks/ticks.py --exponents 2.3 --deltas 1 1000 --beside python --set gil_rows=0
    python benchmarks/ticks.py --exponents 2.3 --deltas 1000 --set delta_thread_rows=4096
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
import os
import resource
import statistics
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks._common import Result, add_out_argument, fmt_s, run_info, write_results

QUERY = "Q() :- E(a, b), E(b, c), E(a, c)"
DELETIONS = 0.3
TARGETS: dict[int, float] = {1: 1000.0, 1000: 100.0}
"""Issue 42's targets: recompute ÷ p50 tick, by delta size."""
DEFAULT_TICKS: dict[int, int] = {1: 200, 1000: 50, 10000: 10}
QUICK_TICKS: dict[int, int] = {1: 20, 1000: 5, 10000: 2}
SPIKE = 4.0
"""A tick over this many times the median is counted as a spike."""


# -- graphs ----------------------------------------------------------------------------------
def chung_lu(
    n_nodes: int, n_edges: int, exponent: float, seed: int = 0, shuffle: bool = False
) -> np.ndarray:
    """A simple Chung–Lu power-law graph, rows ``(u, v)`` with ``u < v``, sorted.

    Vertex ``i`` has weight ``(i + 1)^(-1/(exponent - 1))``, which gives expected
    degrees with a power-law tail ``P(deg = k) ~ k^-exponent``.  Edge endpoints are drawn
    independently in proportion to the weights, in vectorised rounds; self-loops and
    repeated pairs are dropped until ``n_edges`` distinct edges are drawn (the usual
    fast form of the Chung–Lu model).

    Parameters
    ----------
    n_nodes : int
        Vertex ids are ``0 … n_nodes - 1``; vertex 0 has the largest weight.
    n_edges : int
        Exact number of edges.
    exponent : float
        Degree exponent γ > 2 (smaller is more skewed).
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    shuffle : bool
        Permute the ids at random (hubs spread over the id range); otherwise the hubs
        keep the low ids, and the orientation ``u < v`` points out of them.

    Returns
    -------
    numpy.ndarray
        ``(n_edges, 2)`` int64.

    Raises
    ------
    ValueError
        A bad size or exponent, or a distribution too concentrated to give that many
        distinct edges.
    """
    if exponent <= 1:
        raise ValueError(f"chung_lu: exponent must be > 1, got {exponent}")
    if n_nodes < 2 or not 0 < n_edges <= n_nodes * (n_nodes - 1) // 2:
        raise ValueError(f"chung_lu: {n_edges} edges do not fit a simple graph on {n_nodes}")
    rng = np.random.default_rng(seed)
    w = np.arange(1, n_nodes + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0))
    cdf = np.cumsum(w / w.sum())
    keys = np.empty(0, dtype=np.int64)
    for _ in range(100):
        need = n_edges - len(keys)
        if need <= 0:
            break
        batch = int(need * 1.3) + 64
        u = np.minimum(np.searchsorted(cdf, rng.random(batch)), n_nodes - 1)
        v = np.minimum(np.searchsorted(cdf, rng.random(batch)), n_nodes - 1)
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        new = (lo * n_nodes + hi)[lo != hi].astype(np.int64)
        allk = np.concatenate([keys, new])
        _, first = np.unique(allk, return_index=True)
        keys = allk[np.sort(first)]  # distinct, in the order first drawn
    else:
        raise ValueError(
            f"chung_lu: could not draw {n_edges} distinct edges on {n_nodes} nodes with "
            f"exponent {exponent}; use more nodes"
        )
    keys = keys[:n_edges]
    u, v = keys // n_nodes, keys % n_nodes
    if shuffle:
        perm = rng.permutation(n_nodes).astype(np.int64)
        u, v = perm[u], perm[v]
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    return np.unique(np.stack([lo, hi], axis=1), axis=0)


def read_graph(path: str) -> np.ndarray:
    """A SNAP edge list as simple edges ``u < v`` (lines that are not edges skipped)."""
    from faq.io import load_edge_array, undirected_simple

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return undirected_simple(load_edge_array(path))


@dataclass
class Graph:
    """A workload: its label, edges and the vertex range insertions draw from."""

    label: str
    edges: np.ndarray
    n_nodes: int


def graphs(args: argparse.Namespace) -> list[Graph]:
    """The generated graphs (by exponent, then order), then the edge lists given."""
    out = []
    orders = ["low", "shuffled"] if args.order == "both" else [args.order]
    nodes = args.nodes or max(args.edges // 5, 100)
    for x in args.exponents:
        for order in orders:
            e = chung_lu(nodes, args.edges, x, seed=args.seed, shuffle=order == "shuffled")
            out.append(Graph(f"Chung–Lu γ={x} {order} m={args.edges:,}", e, nodes))
    for p in args.paths:
        e = read_graph(p)
        name = Path(p).name.removesuffix(".gz").removesuffix(".txt")
        out.append(Graph(name, e, int(e.max()) + 1))
    return out


# -- deltas ----------------------------------------------------------------------------------
class EdgePool:
    """The present edges, for uniform deletions and degree-proportional endpoints.

    Edges are int64 keys ``u * n + v`` (``u < v``) in an array with swap-removal and a
    dict from key to position.
    """

    def __init__(self, edges: np.ndarray, n_nodes: int) -> None:
        self.n = n_nodes
        self.keys = (edges[:, 0] * n_nodes + edges[:, 1]).astype(np.int64)
        self.size = len(self.keys)
        self.keys = np.concatenate([self.keys, np.empty(self.size, dtype=np.int64)])
        self.pos = {int(k): i for i, k in enumerate(self.keys[: self.size].tolist())}

    def remove(self, key: int) -> None:
        i = self.pos.pop(key)
        self.size -= 1
        last = int(self.keys[self.size])
        if i != self.size:
            self.keys[i] = last
            self.pos[last] = i

    def add(self, key: int) -> None:
        if self.size == len(self.keys):
            self.keys = np.concatenate([self.keys, np.empty(self.size, dtype=np.int64)])
        self.keys[self.size] = key
        self.pos[key] = self.size
        self.size += 1

    def current(self) -> np.ndarray:
        """The present edges, ``(m, 2)`` int64 sorted."""
        k = np.sort(self.keys[: self.size])
        return np.stack([k // self.n, k % self.n], axis=1)


def make_delta(pool: EdgePool, size: int, rng: np.random.Generator, inserts: str) -> np.ndarray:
    """One tick of ``size`` changes, applied to ``pool``: rows ``(u, v, ±1)``.

    A share 0.3 deletes edges drawn uniformly among those present (one change: a
    deletion with probability 0.3); the rest inserts absent edges, with endpoints drawn
    from the current degrees (``"degree"``: an endpoint of a uniformly drawn edge) or
    uniformly over the vertices (``"uniform"``).  No edge is both deleted and inserted.
    """
    n_del = int(rng.random() < DELETIONS) if size == 1 else int(round(size * DELETIONS))
    n_ins = size - n_del
    idx = rng.choice(pool.size, n_del, replace=False) if n_del else np.empty(0, np.int64)
    dels = [int(k) for k in pool.keys[idx]]
    gone = set(dels)
    ins: list[int] = []
    seen: set[int] = set()
    n = pool.n
    while len(ins) < n_ins:
        want = 2 * (n_ins - len(ins)) + 8
        if inserts == "degree":
            k = pool.keys[rng.integers(0, pool.size, 2 * want)]
            ends = np.where(rng.random(2 * want) < 0.5, k // n, k % n)
            u, v = ends[:want], ends[want:]
        else:
            u, v = rng.integers(0, n, want), rng.integers(0, n, want)
        for a, b in zip(u.tolist(), v.tolist(), strict=True):
            if a == b:
                continue
            key = min(a, b) * n + max(a, b)
            if key in pool.pos or key in gone or key in seen:
                continue
            seen.add(key)
            ins.append(key)
            if len(ins) == n_ins:
                break
    for key in dels:
        pool.remove(key)
    for key in ins:
        pool.add(key)
    keys = np.asarray(dels + ins, dtype=np.int64)
    w = np.concatenate([-np.ones(n_del, np.int64), np.ones(n_ins, np.int64)])
    return np.stack([keys // n, keys % n, w], axis=1)


def delta_frame(d: np.ndarray) -> Any:
    """A tick's changes as the pandas delta a view takes."""
    import pandas as pd

    return pd.DataFrame({"src": d[:, 0], "dst": d[:, 1], "_weight": d[:, 2]})


# -- measuring -------------------------------------------------------------------------------
def peak_rss_reset() -> bool:
    """Reset the kernel's peak-RSS mark of this process (``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb(reset: bool) -> float:
    """Peak resident memory in MB: the mark since the reset (``VmHWM``) when it worked,
    else the process's lifetime peak from :func:`resource.getrusage`."""
    if reset:
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def load() -> float:
    """The one-minute load average."""
    return round(os.getloadavg()[0], 2)


@dataclass
class Cell:
    """One delta size on one graph: tick seconds and the recompute ratios."""

    size: int
    ticks: list[float] = field(default_factory=list)
    after: bool = False  # one-edge ticks run after the larger ones (their log in place)

    @property
    def label(self) -> str:
        return f"{self.size:,} after the larger" if self.after else f"{self.size:,}"

    @property
    def p50(self) -> float:
        return float(np.percentile(self.ticks, 50))

    @property
    def p99(self) -> float:
        return float(np.percentile(self.ticks, 99))

    @property
    def spikes(self) -> int:
        return sum(t > SPIKE * self.p50 for t in self.ticks)


def recompute_local(q: Any, final: Any, runs: int = 2) -> tuple[list[float], int]:
    """Seconds of ``q.solve(E=Factor.from_pandas(final))`` (``runs`` times) and its count."""
    from faq import Factor

    times, count = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        count = q.solve(E=Factor.from_pandas(final)).scalar()
        times.append(time.perf_counter() - t0)
    return times, int(count)


def recompute_spark(q: Any, final: Any, runs: int = 2) -> tuple[list[float], int]:
    """Seconds of ``q.solve(E=<Spark DataFrame of final>)`` (``runs`` times) and its count."""
    from faq.session import local_session

    spark = local_session("local[2]")
    sdf = spark.createDataFrame(final, "src bigint, dst bigint")
    times, count = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        count = q.solve(E=sdf).scalar()
        times.append(time.perf_counter() - t0)
    return times, int(count)


def warm_up(q: Any) -> None:
    """A few untimed ticks on a small view: compiled kernels are built before timing (the
    kernel's warm-up, which the view starts, waited for: a fold's merge among them)."""
    from faq.kernel import compiled
    from incremental import IncrementalView

    e = chung_lu(500, 2000, 2.3, seed=99)
    pool = EdgePool(e, 500)
    rng = np.random.default_rng(99)
    view = IncrementalView(q, E=delta_frame(np.column_stack([e, np.ones(len(e), np.int64)])))
    for size in (1, 1, 50, 50):
        view.step(E=delta_frame(make_delta(pool, size, rng, "degree")))
    view.result().scalar()
    compiled.warm_up()


@contextlib.contextmanager
def beside(kind: str) -> Any:
    """A thread running plain Python for the block (``"python"``), or none (``"none"``)."""
    if kind == "none":
        yield
        return
    stop = threading.Event()

    def busy() -> None:
        x = 0
        while not stop.is_set():
            for i in range(10_000):
                x += i

    t = threading.Thread(target=busy, name="ticks-beside", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def bench_graph(q: Any, g: Graph, args: argparse.Namespace) -> dict[str, Any]:
    """Build the view on ``g``, run every delta size's ticks, recompute, check."""
    import pandas as pd

    import faq
    from faq.testing import triangle_count_numpy
    from incremental import IncrementalView

    rng = np.random.default_rng(args.seed)
    pool = EdgePool(g.edges, g.n_nodes)
    cells = {size: Cell(size) for size in args.deltas}
    if args.after:  # one edge again, once the larger ticks' changes fill the log
        cells[-1] = Cell(1, after=True)
    seq: list[tuple[int, Any]] = []
    for key, cell in cells.items():
        for _ in range(args.after if cell.after else ticks_for(args, cell.size)):
            seq.append((key, delta_frame(make_delta(pool, cell.size, rng, args.inserts))))
    final_edges = pool.current()
    del pool
    graph = pd.DataFrame({"src": g.edges[:, 0], "dst": g.edges[:, 1]})
    gc.collect()
    gc.freeze()
    load_start = load()
    t0 = time.perf_counter()
    view = IncrementalView(q, E=graph)
    build = time.perf_counter() - t0
    reset = peak_rss_reset()
    with beside(args.beside), faq.settings(**dict(args.set)):
        for key, frame in seq:
            t0 = time.perf_counter()
            view.step(E=frame)
            cells[key].ticks.append(time.perf_counter() - t0)
    peak = peak_rss_mb(reset)
    load_ticks = load()
    got = int(view.result().scalar())
    del view, seq
    gc.unfreeze()
    gc.collect()
    expected = int(triangle_count_numpy(final_edges))
    if got != expected:
        raise AssertionError(f"{g.label}: the view counts {got} triangles, numpy {expected}")
    final = pd.DataFrame({"src": final_edges[:, 0], "dst": final_edges[:, 1]})
    local, count = recompute_local(q, final)
    if count != expected:
        raise AssertionError(f"{g.label}: the recompute counts {count}, numpy {expected}")
    spark: list[float] | None = None
    if args.spark:
        spark, count = recompute_spark(q, final)
        if count != expected:
            raise AssertionError(f"{g.label}: Spark's recompute counts {count}, numpy {expected}")
    return {
        "graph": g,
        "edges": len(g.edges),
        "final_edges": len(final_edges),
        "triangles": got,
        "build": build,
        "cells": cells,
        "peak_mb": peak,
        "peak_since_reset": reset,
        "local": local,
        "spark": spark,
        "load": (load_start, load_ticks, load()),
    }


def ticks_for(args: argparse.Namespace, size: int) -> int:
    """Ticks for a delta size: ``--ticks`` (one per size, or one for all), else defaults."""
    if args.ticks:
        if len(args.ticks) == 1:
            return args.ticks[0]
        return args.ticks[args.deltas.index(size)]
    table = QUICK_TICKS if args.quick else DEFAULT_TICKS
    return table.get(size, 10)


# -- output ----------------------------------------------------------------------------------
def verdict(size: int, ratio: float) -> str:
    """``met (≥1000×)``, ``missed (<100×)``, or ``—`` without a target."""
    target = TARGETS.get(size)
    if target is None:
        return "—"
    return f"{'met' if ratio >= target else 'missed'} (target {target:,.0f}×)"


def fmt_ms(x: float) -> str:
    return f"{x * 1000:.2f} ms" if x < 0.01 else f"{x * 1000:.1f} ms"


def print_graph(row: dict[str, Any], args: argparse.Namespace) -> None:
    """One graph's Markdown table."""
    g, (l0, l1, l2) = row["graph"], row["load"]
    local = statistics.median(row["local"])
    spark = statistics.median(row["spark"]) if row["spark"] else None
    print(
        f"\n### {g.label}: {row['edges']:,} edges ({row['final_edges']:,} after the ticks), "
        f"{row['triangles']:,} triangles at the end (checked)\n"
    )
    print(
        f"Build {fmt_s(row['build'])}; recompute {fmt_s(local)} from a local factor"
        + (f", {fmt_s(spark)} from a Spark DataFrame" if spark else "")
        + f"; driver peak RSS during the ticks {row['peak_mb']:,.0f} MB"
        + ("" if row["peak_since_reset"] else " (process peak: the mark could not be reset)")
        + f"; load average {l0} at the build, {l1} after the ticks, {l2} after recompute.\n"
    )
    head = "| delta | ticks | p50 | p99 | max | > 4× p50 | recompute ÷ p50 (local) | target |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---|"
    if spark:
        head += " recompute ÷ p50 (Spark) |"
        rule += "---:|"
    print(head)
    print(rule)
    for c in row["cells"].values():
        ratio = local / c.p50
        line = (
            f"| {c.label} | {len(c.ticks)} | {fmt_ms(c.p50)} | {fmt_ms(c.p99)} | "
            f"{fmt_ms(max(c.ticks))} | {c.spikes} | {ratio:,.0f}× | {verdict(c.size, ratio)} |"
        )
        if spark:
            line += f" {spark / c.p50:,.0f}× |"
        print(line)


def results_of(rows: list[dict[str, Any]]) -> list[Result]:
    """The rows as result cells: build, recomputes and one per delta size."""
    out = []
    for row in rows:
        g = row["graph"]
        common = {"load_average": list(row["load"]), "peak_rss_mb": round(row["peak_mb"], 1)}
        local = statistics.median(row["local"])
        out.append(Result(g.label, "build", row["edges"], times=[row["build"]], extra=common))
        out.append(
            Result(
                g.label,
                "recompute (local factor)",
                row["edges"],
                times=row["local"],
                count=row["triangles"],
                extra=common,
            )
        )
        if row["spark"]:
            out.append(
                Result(
                    g.label,
                    "recompute (Spark DataFrame)",
                    row["edges"],
                    times=row["spark"],
                    count=row["triangles"],
                    extra=common,
                )
            )
        for c in row["cells"].values():
            ratio = local / c.p50
            size = c.size
            extra = {
                "delta": size,
                "after_larger": c.after,
                "p50_s": c.p50,
                "p99_s": c.p99,
                "max_s": max(c.ticks),
                "spikes_over_4x": c.spikes,
                "speedup_local": ratio,
                "speedup_spark": statistics.median(row["spark"]) / c.p50 if row["spark"] else None,
                "target": TARGETS.get(size),
                "verdict": verdict(size, ratio),
                **common,
            }
            r = Result(
                g.label,
                f"tick Δ={size}" + (" after the larger" if c.after else ""),
                row["edges"],
                times=c.ticks,
                count=row["triangles"],
                ratio=c.p50 / local,
                baseline="recompute (local factor)",
                extra=extra,
            )
            out.append(r)
    return out


# -- main ------------------------------------------------------------------------------------
def setting(text: str) -> tuple[str, int | float]:
    """``--set NAME=VALUE``: a field of :class:`faq.plan.settings.Settings` and a number."""
    from dataclasses import replace

    from faq.plan.settings import DEFAULTS

    name, eq, value = text.partition("=")
    if not eq or not hasattr(DEFAULTS, name):
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=VALUE with NAME a faq setting")
    try:
        number = int(value) if value.lstrip("-").isdigit() else float(value)
        replace(DEFAULTS, **{name: number})  # the settings' own checks
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return name, number


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", help="SNAP edge lists (.txt or .txt.gz)")
    p.add_argument("--edges", type=int, default=None, help="generated graph size (1,000,000)")
    p.add_argument("--nodes", type=int, default=None, help="vertices (default: edges / 5)")
    p.add_argument("--exponents", type=float, nargs="*", default=[2.1, 2.3, 2.5])
    p.add_argument("--order", choices=("low", "shuffled", "both"), default="low")
    p.add_argument("--deltas", type=int, nargs="+", default=None, help="changes a tick")
    p.add_argument("--ticks", type=int, nargs="*", default=None, help="one, or one per delta")
    p.add_argument("--inserts", choices=("degree", "uniform"), default="degree")
    p.add_argument("--spark", action="store_true", help="also recompute from a Spark DataFrame")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="20,000 edges, few ticks")
    p.add_argument(
        "--after", type=int, default=None,
        help="one-edge ticks run again after the larger ones, their changes in the log "
        "(default: as many as the first one-edge ticks; 0: none)",
    )  # fmt: skip
    p.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", type=setting,
        help="an engine setting for the ticks (repeatable), e.g. delta_thread_rows=4096",
    )  # fmt: skip
    p.add_argument(
        "--beside", choices=("none", "python"), default="none",
        help="a thread running plain Python beside the ticks (default none)",
    )  # fmt: skip
    add_out_argument(p)
    args = p.parse_args(argv)
    if args.edges is None:
        args.edges = 20_000 if args.quick else 1_000_000
    if args.deltas is None:
        args.deltas = [1, 1000] if args.quick else [1, 1000, 10000]
    if len(set(args.deltas)) != len(args.deltas) or min(args.deltas) < 1:
        p.error("--deltas: distinct positive sizes")
    if args.ticks and len(args.ticks) not in (1, len(args.deltas)):
        p.error("--ticks: one count, or one per --deltas size")
    if args.after is None:
        larger = 1 in args.deltas and max(args.deltas) > 1
        args.after = ticks_for(args, 1) if larger else 0
    if args.paths:  # edge lists given: generated graphs only when asked for
        args.exponents = args.exponents if "--exponents" in (argv or sys.argv) else []
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = run_info("ticks", argv)
    from faq import query

    q = query(QUERY, semiring="counting")
    print(f"# Ticks of `{QUERY}` (counting), driver state, pandas deltas\n")
    print(
        f"`{info['command']}` on {info['date']}, {info['cores']} cores, load average "
        f"{info['load_average_at_start']}; {DELETIONS:.0%} deletions (uniform over the "
        f"present edges), insertions with {args.inserts} endpoints"
        + ("; a thread running plain Python beside the ticks" if args.beside != "none" else "")
        + "".join(f"; {n}={v} for the ticks" for n, v in args.set)
        + "."
    )
    warm_up(q)
    rows = []
    for g in graphs(args):
        row = bench_graph(q, g, args)
        print_graph(row, args)
        sys.stdout.flush()
        rows.append(row)
    if args.spark:
        from benchmarks._common import stop_spark

        stop_spark()
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    csv_path, json_path = write_results(results_of(rows), args.out, "ticks", info)
    print(f"\nLoad average at the end {info['load_average_at_end']}. Wrote {csv_path}, {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
