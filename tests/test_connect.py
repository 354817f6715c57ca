"""The public API, unchanged, on a Spark Connect session.

A Spark Connect server runs in a JVM of its own (started with the pyspark
distribution's ``spark-submit``, ``local[2]``, its working directory a temp
folder), and the tests talk to it through ``SparkSession.builder.remote(...)``:
relations are Connect DataFrames, local factors become Connect DataFrames, and
the work forced onto the cluster (``backend="tasks"``: the local kernel in
``mapInArrow`` tasks; ``backend="spark"``: partitioned, the kernel in every cell; ``view.local =
False``: delta queries as Spark queries) runs in the server.  Answers are
checked against numpy or :func:`faq.reference_solve`.

The run's classic session (``spark``, tests/conftest.py) lives on in the same
process.  A Connect session switches PySpark into Connect mode through
environment variables (``SPARK_CONNECT_MODE_ENABLED``: ``getActiveSession``
and ``pyspark.sql.functions`` then answer for Connect), so the fixture saves
the environment, and restores it and stops the server (by pid) when the
module is done; every other module sees the classic session only.

Skipped when the ``connect`` extra (grpcio, grpcio-status, protobuf) is not installed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("grpc", "grpc_status", "google.protobuf"):
    pytest.importorskip(
        _module,
        reason=f"Spark Connect needs the connect extra ({_module} is missing): "
        "pip install -e '.[connect]'",
    )

import semirings  # noqa: E402
from faq import Factor, query, reference_solve  # noqa: E402
from faq.io import load_edge_array, read_edge_list  # noqa: E402
from incremental import IncrementalView  # noqa: E402
from tests.spark_processes import SESSION_ENV, ConnectServer  # noqa: E402

KARATE = Path(__file__).parent / "data" / "karate.txt"
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"

BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)


def _environment() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in SESSION_ENV}


def _restore(saved: dict[str, str | None]) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class Connect:
    """The Connect session of this module, its server, and the environment before it."""

    def __init__(self, session: Any, server: ConnectServer, before: dict[str, str | None]):
        self.session = session
        self.server = server
        self.before = before

    @contextmanager
    def classic(self) -> Iterator[None]:
        """PySpark back in classic mode (the environment before the Connect session)."""
        connect_env = _environment()
        _restore(self.before)
        try:
            yield
        finally:
            _restore(connect_env)


@pytest.fixture(scope="module")
def connect(spark, tmp_path_factory) -> Iterator[Connect]:
    """A Connect session to a server of its own, next to the run's classic session."""
    from pyspark.sql import SparkSession

    before = _environment()
    server = ConnectServer(tmp_path_factory.mktemp("connect-server"))
    session = None
    try:
        session = SparkSession.builder.remote(server.url).create()
        yield Connect(session, server, before)
    finally:
        try:
            if session is not None:
                session.stop()
        finally:
            _restore(before)
            server.stop()


def is_connect(df: Any) -> bool:
    return type(df).__module__.startswith("pyspark.sql.connect")


def where(run: Any) -> set[str]:
    """The backends a run (``q.run(...)``) ran its steps on."""
    return {s.choice.backend for s in run.trace.steps}


def matrix_df(session: Any, m: np.ndarray, names: tuple[str, str]) -> Any:
    """A Connect DataFrame (row, column, value) of a dense matrix's entries."""
    import pandas as pd

    i, j = np.nonzero(m)
    pdf = pd.DataFrame({names[0]: i, names[1]: j, "value": m[i, j]})
    return session.createDataFrame(pdf, f"{names[0]} bigint, {names[1]} bigint, value double")


def zset_df(session: Any, entries: dict[tuple[int, int], int]) -> Any:
    rows = [(a, b, w) for (a, b), w in entries.items()]
    return session.createDataFrame(rows, "src bigint, dst bigint, value bigint")


# -- the session ---------------------------------------------------------------------------------
def test_connect_session_is_the_one_in_use(connect):
    from pyspark.sql import SparkSession

    from faq.session import get_spark, local_session

    assert is_connect(connect.session)
    assert SparkSession.getActiveSession() is connect.session
    assert get_spark() is connect.session
    assert local_session() is connect.session  # never a classic session behind its back
    f = Factor.from_numpy(np.eye(3), vars=("i", "j"))
    assert is_connect(f.df)
    assert connect.session.conf.get("spark.master") == "local[2]"  # the server's, not ours


def test_session_in_another_thread(connect):
    """PySpark keeps the active session per thread; another thread gets the process's
    Connect session, not an error or a local session (a second Spark)."""
    from concurrent.futures import ThreadPoolExecutor

    from faq.session import get_spark

    edges = connect.session.createDataFrame([(0, 1), (1, 2), (0, 2)], "src bigint, dst bigint")
    tri = query(TRIANGLE, semiring="counting")
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(get_spark).result() is connect.session
        df = pool.submit(lambda: Factor.from_numpy(np.eye(2), vars=("i", "j")).df).result()
        assert is_connect(df)
        local = Factor.from_pandas(edges.toPandas(), vars=("a", "b"))
        run = pool.submit(lambda: tri.run(E=local, backend="tasks")).result()
        assert run.result.scalar() == 1
    # the tasks were sized by the server's cores (local[2]), not run without a session
    assert [s.choice.tasks for s in run.trace.steps] == [2 * run.settings.task_slices]


def test_classic_session_unaffected(connect, spark):
    """Back in classic mode the run's session is the one in use, and works."""
    from pyspark.sql import SparkSession

    from faq.session import get_spark

    tri = query(TRIANGLE, semiring="counting")
    with connect.classic():
        assert SparkSession.getActiveSession() is spark
        assert get_spark() is spark
        edges = spark.createDataFrame([(0, 1), (1, 2), (0, 2)], "src bigint, dst bigint")
        out = tri.solve(E=edges, backend="spark")
        assert not is_connect(out.df)
        assert out.scalar() == 1
    assert get_spark() is connect.session


# -- queries -------------------------------------------------------------------------------------
def test_matrix_chain(connect):
    rng = np.random.default_rng(7)
    A, B, C = rng.random((6, 4)), rng.random((4, 5)), rng.random((5, 3))
    rels = {
        "A": matrix_df(connect.session, A, ("i", "j")),
        "B": matrix_df(connect.session, B, ("j", "k")),
        "C": matrix_df(connect.session, C, ("k", "l")),
    }
    q = query(CHAIN, semiring="real")
    for backend in ("auto", "tasks", "spark"):
        run = q.run(backend=backend, **rels)
        out = run.result
        np.testing.assert_allclose(out.to_numpy(shape=(6, 3)), A @ B @ C, rtol=1e-12)
        assert where(run) == ({"driver"} if backend == "auto" else {backend}), backend
        if backend == "spark":  # partitioned: one HyperCube shuffle, the kernel per cell
            assert is_connect(out.df) and not out.is_local
            assert all(s.choice.shares is not None for s in run.trace.steps)
            # the answer's counts, observed with its checkpoint (or counted after it)
            assert run.trace.steps[-1].rows == np.count_nonzero(A @ B @ C) == 18


def test_triangle_count_both_join_methods(connect):
    e = load_edge_array(KARATE)
    n = int(e.max()) + 1
    adj = np.zeros((n, n), dtype=np.int64)
    adj[e[:, 0], e[:, 1]] = adj[e[:, 1], e[:, 0]] = 1
    want = int(np.trace(adj @ adj @ adj)) // 6  # 45
    edges = read_edge_list(KARATE, connect.session)
    assert is_connect(edges)
    tri = query(TRIANGLE, semiring="counting")
    for backend in ("auto", "tasks", "spark"):
        for join in ("binary", "wcoj"):
            run = tri.run(E=edges, backend=backend, join=join)
            assert run.result.scalar() == want, (backend, join)
            methods = {s.choice.method for s in run.trace.steps}
            assert methods == {join}, (backend, join, methods)
            if backend != "auto":
                assert where(run) == {backend}
            if backend == "spark" and join == "wcoj":  # partitioned over the server's tasks
                assert all(s.choice.shares is not None for s in run.trace.steps)


def test_user_defined_semiring(connect):
    """Bottleneck paths (max-min) from plain Python functions: Python UDFs on the server."""
    rng = np.random.default_rng(3)
    A, B, C = (rng.random(s) + 0.01 for s in ((5, 4), (4, 6), (6, 3)))
    q = query(CHAIN, semiring=BOTTLENECK)
    rels = {
        "A": Factor.from_numpy(A, vars=("i", "j")),
        "B": Factor.from_numpy(B, vars=("j", "k")),
        "C": Factor.from_numpy(C, vars=("k", "l")),
    }
    entries = {
        n: {(int(a), int(b)): float(m[a, b]) for a, b in np.ndindex(m.shape)}
        for n, m in (("A", A), ("B", B), ("C", C))
    }
    want = reference_solve(CHAIN, BOTTLENECK, entries)
    for backend in ("auto", "tasks", "spark"):
        run = q.run(backend=backend, **rels)
        got = run.result.to_dict()
        assert got.keys() == want.keys(), backend
        assert all(math.isclose(got[k], want[k]) for k in want), backend
        assert where(run) == ({"driver"} if backend == "auto" else {backend}), backend


# -- incremental views ----------------------------------------------------------------------------
def test_incremental_view(connect, tmp_path):
    """A durable view over Connect: driver-path ticks, reopened, then Spark delta queries."""
    tri = query(TRIANGLE, semiring="counting")
    S = semirings.COUNTING
    state = {(0, 1): 1, (1, 2): 1, (0, 2): 1, (2, 3): 1, (1, 3): 1}
    ticks = [{(0, 3): 1}, {(0, 1): -1, (3, 4): 1, (2, 4): 1}, {(1, 4): 1, (0, 1): 1}]

    def count(s: dict) -> int:
        return reference_solve(TRIANGLE, S, {"E": s}).get((), 0)

    def apply(s: dict, delta: dict) -> dict:
        out = dict(s)
        for k, w in delta.items():
            out[k] = out.get(k, 0) + w
        return {k: w for k, w in out.items() if w}

    folder = tmp_path / "state"
    view = IncrementalView(tri, state_dir=folder, E=zset_df(connect.session, state))
    assert view.result().scalar() == count(state)
    for delta in ticks[:2]:
        before = count(state)
        change = view.step(E=zset_df(connect.session, delta)).scalar()
        state = apply(state, delta)
        assert view.result().scalar() == count(state) == before + change
        assert {t.where for t in view.last_step.terms} == {"driver"}
    assert view.tick == 2

    reopened = IncrementalView(tri, state_dir=folder)
    assert reopened.tick == 2 and reopened.result().scalar() == count(state)
    reopened.local = False  # delta queries as Spark queries, in the server
    before = count(state)
    change = reopened.step(E=zset_df(connect.session, ticks[2])).scalar()
    state = apply(state, ticks[2])
    assert reopened.result().scalar() == count(state) == before + change
    assert {t.where for t in reopened.last_step.terms} == {"spark"}
    assert reopened.relation("E").to_dict() == state


def test_spark_resident_view(connect):
    """State kept in the server (``state="spark"``): checkpoints are Connect DataFrames, which
    the view cannot free itself (the server frees them once the client drops them)."""
    from faq.session import checkpoint_ids

    q = query("Q(a) :- E(a, b)", semiring="integer")
    view = IncrementalView(q, state="spark", E=zset_df(connect.session, {(0, 1): 1, (0, 2): 1}))
    kept = view.result()
    for t in range(1, 4):
        view.step(E=zset_df(connect.session, {(t, 1): 2, (0, t): -1}))
    assert checkpoint_ids(view.result().df) == frozenset()
    assert view.result().to_dict() == {(0,): -1, (1,): 2, (2,): 2, (3,): 2}
    assert kept.to_dict() == {(0,): 2}
