"""The public API against a standalone Spark cluster: a driver program of its own.

Run by tests/test_cluster.py as ``python tests/cluster_job.py spark://HOST:PORT STATE_DIR``
(a driver process of its own: the test run's JVM is a local one).  Every
check prints one line ``ok <name>``; the first failure ends the program with
its traceback and a non-zero status.  Answers are checked against numpy and
:func:`faq.reference_solve`; where each step ran is read from the solve's trace.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

import semirings
from faq import Factor, query, reference_solve
from faq.io import load_edge_array, read_edge_list
from faq.session import local_session
from incremental import IncrementalView

KARATE = Path(__file__).parent / "data" / "karate.txt"
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"
BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)


def where(run) -> set[str]:
    return {s.choice.backend for s in run.trace.steps}


def ok(name: str) -> None:
    print(f"ok {name}", flush=True)


def triangles(spark) -> None:
    e = load_edge_array(KARATE)
    n = int(e.max()) + 1
    adj = np.zeros((n, n), dtype=np.int64)
    adj[e[:, 0], e[:, 1]] = adj[e[:, 1], e[:, 0]] = 1
    want = int(np.trace(adj @ adj @ adj)) // 6
    edges = read_edge_list(KARATE, spark)
    tri = query(TRIANGLE, semiring="counting")
    for backend in ("auto", "tasks", "spark"):
        for join in ("binary", "wcoj"):
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


def main(master: str, state_dir: str) -> None:
    spark = local_session(
        master,
        **{
            "spark.driver.memory": "1g",
            "spark.executor.memory": "1g",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    try:
        assert spark.sparkContext.master == master, spark.sparkContext.master
        triangles(spark)
        user_semiring(spark)
        incremental(spark, Path(state_dir))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
