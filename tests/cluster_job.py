"""The public API against a standalone Spark cluster: a driver program of its own.

Run by tests/test_cluster.py as ``python tests/cluster_job.py spark://HOST:PORT STATE_DIR SITE``
(a driver process of its own: the test run's JVM is a local one), with the built wheel
installed into ``SITE`` and ``SITE`` first on every process's ``PYTHONPATH``: the job checks
that it and every executor import the library from there, not from the checkout.  Every
check prints one line ``ok <name>``; the first failure ends the program with
its traceback and a non-zero status.  Answers are checked against numpy and
:func:`faq.reference_solve`; where each step ran is read from the solve's trace.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np

import faq
import semirings
from faq import Factor, query, reference_solve
from faq.io import load_edge_array, read_edge_list
from faq.session import local_session
from faq.testing import NAMED_RULES
from incremental import IncrementalView

KARATE = Path(__file__).parent / "data" / "karate.txt"
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"
HOP = "Q(a, c) :- E(a, b), E(b, c)"
TRIANGLE_RUNS = (("auto", "wcoj"), ("tasks", "binary"), ("spark", "binary"), ("spark", "wcoj"))
"""The triangle runs (backend, join): each backend once, both joins on Spark."""
BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)


def where(run) -> set[str]:
    return {s.choice.backend for s in run.trace.steps}


def ok(name: str) -> None:
    print(f"ok {name}", flush=True)


def karate_adjacency() -> np.ndarray:
    """The symmetric 0/1 adjacency matrix of karate (no self-loops)."""
    e = load_edge_array(KARATE)
    n = int(e.max()) + 1
    adj = np.zeros((n, n), dtype=np.int64)
    adj[e[:, 0], e[:, 1]] = adj[e[:, 1], e[:, 0]] = 1
    np.fill_diagonal(adj, 0)
    return adj


def executors(spark, want: int, timeout: float = 120.0) -> None:
    """Wait until ``want`` executors (the driver's own entry not counted) are registered,
    one per worker, so that the checks after this run across all of them."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while (n := len(tracker.getExecutorInfos()) - 1) < want:
        assert time.monotonic() < deadline, f"{n} of {want} executors within {timeout:.0f} s"
        time.sleep(0.25)
    assert n == want, (n, want)
    ok(f"{n} executors registered")


def spark_steps(run) -> None:
    """Every step that joins two or more factors ran partitioned over the cluster: on
    Spark, with HyperCube shares (and there is at least one such step)."""
    steps = zip(run.plan.steps, run.trace.steps, strict=True)
    joining = [t for s, t in steps if len(s.factors) > 1]
    assert joining, run.explain()
    for t in joining:
        assert t.choice.backend == "spark" and t.choice.shares is not None, run.explain()


def triangles(spark) -> None:
    adj = karate_adjacency()
    want = int(np.trace(adj @ adj @ adj)) // 6
    edges = read_edge_list(KARATE, spark)
    tri = query(TRIANGLE, semiring="counting")
    for backend, join in TRIANGLE_RUNS:
        run = tri.run(E=edges, backend=backend, join=join)
        got = run.result.scalar()
        assert got == want, (backend, join, got, want)
        if backend != "auto":
            assert where(run) == {backend}, (backend, where(run))
        ok(f"triangles backend={backend} join={join}: {got}")


def user_semiring(spark) -> None:
    """Bottleneck paths from plain Python functions: Python UDFs in the executors."""
    rng = np.random.default_rng(3)
    A, B, C = (rng.random(s) + 0.01 for s in ((5, 4), (4, 6), (6, 3)))
    entries = {
        n: {(int(a), int(b)): float(m[a, b]) for a, b in np.ndindex(m.shape)}
        for n, m in (("A", A), ("B", B), ("C", C))
    }
    want = reference_solve(CHAIN, BOTTLENECK, entries)
    rels = {
        n: Factor.from_numpy(m, vars=v)
        for n, m, v in (("A", A, ("i", "j")), ("B", B, ("j", "k")), ("C", C, ("k", "l")))
    }
    q = query(CHAIN, semiring=BOTTLENECK)
    for backend in ("tasks", "spark"):
        run = q.run(backend=backend, **rels)
        got = run.result.to_dict()
        assert got.keys() == want.keys(), backend
        assert all(math.isclose(got[k], want[k]) for k in want), backend
        assert where(run) == {backend}, (backend, where(run))
        ok(f"user semiring chain backend={backend}")


def incremental(spark, folder: Path) -> None:
    """A durable view: ticks, a reopen from its folder, then delta queries as Spark queries."""
    tri = query(TRIANGLE, semiring="counting")

    def zset(entries: dict) -> object:
        rows = [(a, b, w) for (a, b), w in entries.items()]
        return spark.createDataFrame(rows, "src bigint, dst bigint, value bigint")

    def count(s: dict) -> int:
        return reference_solve(TRIANGLE, semirings.COUNTING, {"E": s}).get((), 0)

    def apply(s: dict, delta: dict) -> dict:
        out = dict(s)
        for k, w in delta.items():
            out[k] = out.get(k, 0) + w
        return {k: w for k, w in out.items() if w}

    state = {(0, 1): 1, (1, 2): 1, (0, 2): 1, (2, 3): 1, (1, 3): 1}
    ticks = [{(0, 3): 1}, {(0, 1): -1, (3, 4): 1, (2, 4): 1}, {(1, 4): 1, (0, 1): 1}]
    view = IncrementalView(tri, state_dir=folder, E=zset(state))
    assert view.result().scalar() == count(state)
    for delta in ticks[:2]:
        view.step(E=zset(delta))
        state = apply(state, delta)
        assert view.result().scalar() == count(state)
    reopened = IncrementalView(tri, state_dir=folder)
    assert reopened.tick == 2 and reopened.result().scalar() == count(state)
    reopened.local = False
    reopened.step(E=zset(ticks[2]))
    state = apply(state, ticks[2])
    assert reopened.result().scalar() == count(state)
    assert {t.where for t in reopened.last_step.terms} == {"spark"}
    ok(f"incremental view reopened at tick {reopened.tick}: {count(state)}")


def partitioned(spark) -> None:
    """The path past the driver (``local_rows=0``, ``query_task_rows=0``): every joining
    step is one HyperCube shuffle and the compiled kernel in every cell, the cells spread
    over the executors (``cell_min_rows=0``: data this small would get one cell per step);
    then the chain again with the default, its one-cell steps run one after the other in
    one task; then the triangles solved whole in one task (``query_task_rows``)."""
    adj = karate_adjacency()
    edges = read_edge_list(KARATE, spark)
    want_tri = int(np.trace(adj @ adj @ adj)) // 6
    quads = np.array(list(itertools.combinations(range(len(adj)), 4)))
    want_four = int(
        np.all(
            [adj[quads[:, i], quads[:, j]] for i, j in itertools.combinations(range(4), 2)], 0
        ).sum()
    )
    rng = np.random.default_rng(5)
    mats = [np.where(m > 0.3, m, 0.0) for m in (rng.random(s) for s in ((7, 5), (5, 6), (6, 4)))]
    frames = {
        n: Factor.from_numpy(m, vars=v, semiring="real").df
        for n, m, v in zip("ABC", mats, (("i", "j"), ("j", "k"), ("k", "l")), strict=True)
    }
    with faq.settings(local_rows=0, cell_min_rows=0, query_task_rows=0):
        tri = query(TRIANGLE, semiring="counting").run(E=edges)
        four = query(NAMED_RULES["4-clique"], semiring="counting").run(E=edges)
        chain = query(CHAIN, semiring="real").run(**frames)
    with faq.settings(local_rows=0, query_task_rows=0):
        fused = query(CHAIN, semiring="real").run(**frames)
    with faq.settings(local_rows=0):  # rows Spark knows, within query_task_rows: one task
        whole = query(TRIANGLE, semiring="counting").run(E=edges.localCheckpoint())
    for name, run, want in (("triangles", tri, want_tri), ("4-cliques", four, want_four)):
        spark_steps(run)
        got = run.result.scalar()
        assert got == want, (name, got, want)
        ok(f"partitioned {name}: {got}")
    spark_steps(chain)
    want = mats[0] @ mats[1] @ mats[2]
    got = chain.result.to_numpy(shape=want.shape)
    assert np.allclose(got, want), (got, want)
    assert all(t.choice.shares.total > 1 for t in chain.trace.steps), chain.explain()
    ok("partitioned chain")
    spark_steps(fused)
    assert all(t.choice.shares.total == 1 for t in fused.trace.steps), fused.explain()
    assert np.allclose(fused.result.to_numpy(shape=want.shape), want)
    ok("partitioned chain, its one-cell steps in one task")
    assert "whole solve in one Spark task" in whole.explain(), whole.explain()
    assert whole.result.scalar() == want_tri, (whole.result.scalar(), want_tri)
    ok(f"triangles solved whole in one Spark task: {want_tri}")


def recursion(spark) -> None:
    """Shortest paths past the driver (``local_rows=0``): the fixpoint partitioned in
    Spark on the executors (its state, changes and joins never collected), and the whole
    program in one task on an executor (``program_task_rows``, the default for inputs this
    small), each equal the driver's, on the karate graph in both directions with weights
    1..3."""
    adj = karate_adjacency()
    src, dst = np.nonzero(adj)
    rows = [(int(a), int(b), float(1 + (a * 7 + b) % 3)) for a, b in zip(src, dst, strict=True)]
    E = spark.createDataFrame(rows, "a bigint, b bigint, value double")
    S = spark.createDataFrame([(1, 0.0)], "a bigint, value double")  # karate: nodes 1..34
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    local = {(a, b): w for a, b, w in rows}
    want = sp.solve(
        S=Factor.from_dict({(1,): 0.0}, ["a"], "min-plus"),
        E=Factor.from_dict(local, ["a", "b"], "min-plus"),
    ).to_dict()
    for task_rows, words in [(0, "fixpoint partitioned in Spark"), (None, "in one Spark task")]:
        scope = {} if task_rows is None else {"program_task_rows": task_rows}
        with faq.settings(local_rows=0, **scope):
            run = sp.run(S=S, E=E)
        assert words in run.explain(), run.explain()
        assert not run.result.is_local
        got = run.result.to_dict()
        assert got == want, (got, want)
        ok(f"shortest paths {words}: {len(got)} nodes in {len(run.rounds) - 1} rounds")


def library_runner(spark) -> None:
    """A min-plus 2-hop past the driver: the planner names GraphBLAS for its cells, every
    task on the executors runs that runner itself (no decline) with the python-graphblas
    the wheel depends on (installed beside it), and the answer is the 2-hop computed by
    hand (the brute-force oracle takes minutes at this size)."""
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 300, 20000), rng.integers(0, 300, 20000)
    keep = a < b
    rows = sorted({(int(x), int(y)) for x, y in zip(a[keep], b[keep], strict=True)})
    w = rng.choice([0.5, 1.0, 2.0], len(rows))
    df = spark.createDataFrame(
        [(x, y, float(v)) for (x, y), v in zip(rows, w, strict=True)],
        "src bigint, dst bigint, value double",
    )
    hop = query(HOP, semiring="min-plus")
    with faq.settings(local_rows=0, cell_min_rows=0, cell_rows=4000, query_task_rows=0):
        run = hop.run(E=df)
    (c,) = [t.choice for t in run.trace.steps if t.choice.shares is not None]
    assert c.shares.total > 1 and c.runs == "cells/graphblas-mxm", run.explain()
    out_of: dict[int, list[tuple[int, float]]] = {}  # the 2-hop by hand: x -> j -> y
    for (x, j), v in zip(rows, w, strict=True):
        out_of.setdefault(x, []).append((j, float(v)))
    want: dict[tuple[int, int], float] = {}
    for x, firsts in out_of.items():
        for j, v in firsts:
            for y, u in out_of.get(j, ()):
                want[(x, y)] = min(want.get((x, y), math.inf), v + u)
    got = run.result.to_dict()
    assert got.keys() == want.keys() and all(math.isclose(got[k], want[k]) for k in want)

    def runner_here(_):
        from faq.kernel.runners import Params, run
        from faq.kernel.table import Table
        from faq.plan.runners import Product
        from semirings.local import local_ops

        ops = local_ops(semirings.MIN_PLUS)
        L = Table(("x", "j"), (np.array([0, 1]), np.array([0, 0])), np.array([1.0, 2.0]))
        R = Table(("j", "y"), (np.array([0]), np.array([5])), np.array([3.0]))
        shape = Product(0, 1, "x", "j", "y")
        ran = run("graphblas-mxm", [L, R], ("j", "x", "y"), ("x", "y"), ops, Params(shape))
        yield (ran.runner, ran.why, ran.table.rows)

    found = spark.sparkContext.parallelize(range(2), 2).mapPartitions(runner_here).collect()
    assert found == [("graphblas-mxm", "", 2)] * 2, found
    ok(f"partitioned min-plus 2-hop on GraphBLAS in {c.shares.total} cells")


def installed(spark, site: str) -> None:
    """The library this driver and every executor's Python workers import is the one
    installed in ``site`` (the built wheel), not the source checkout."""
    home = Path(site).resolve()
    here = Path(faq.__file__).resolve()
    assert here.is_relative_to(home), f"the driver imports faq from {here}, not {home}"

    def where(_):
        import faq as f
        import faq.kernel as k

        yield str(Path(f.__file__).resolve())
        yield str(Path(k.__file__).resolve())

    found = set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect())
    outside = sorted(p for p in found if not Path(p).is_relative_to(home))
    assert not outside, f"executors import the library from {outside}, not {home}"
    ok(f"driver and executors import the installed wheel ({len(found)} module files)")


def main(master: str, state_dir: str, site: str) -> None:
    spark = local_session(
        master,
        **{
            "spark.driver.memory": "1g",
            "spark.executor.memory": "768m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    try:
        assert spark.sparkContext.master == master, spark.sparkContext.master
        executors(spark, 2)
        installed(spark, site)
        triangles(spark)
        user_semiring(spark)
        incremental(spark, Path(state_dir))
        partitioned(spark)
        recursion(spark)
        library_runner(spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
