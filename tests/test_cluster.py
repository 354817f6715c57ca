"""The public API, unchanged, against a Spark standalone cluster.

The library is the built wheel, installed into a folder of its own that is first on
the ``PYTHONPATH`` of the driver, the workers and their executors (the job checks where
each imports it from), so the test runs what ``pip install`` gives a cluster.  A master
and two workers (1 core each, each its own JVM) are started with the
pyspark distribution's ``spark-class`` on 127.0.0.1, and a driver program of
its own (tests/cluster_job.py, since this process already runs a local JVM)
connects to ``spark://...``, waits for one executor on each worker, and runs:
the triangle count of karate on every backend with both join methods (the
local kernel in executor tasks, DataFrame joins), a user-defined semiring
whose Python functions run in the executors, a durable incremental view that
is reopened from its folder, and the partitioned path (``local_rows=0``: one
HyperCube shuffle and the kernel in every cell) on a triangle count, a
4-clique count and a matrix chain.  The processes are stopped by pid, with
their process groups, when the test ends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster_job import TRIANGLE_RUNS
from tests.spark_processes import StandaloneCluster, spark_env

JOB = Path(__file__).with_name("cluster_job.py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, wheel_site):
    c = StandaloneCluster(
        tmp_path_factory.mktemp("cluster"),
        cores=1,
        memory="1g",
        workers=2,
        env={"PYTHONPATH": str(wheel_site)},
    )
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.cluster
def test_public_api_on_a_standalone_cluster(cluster, tmp_path, wheel_site):
    env = spark_env(PYTHONPATH=str(wheel_site))
    try:
        run = subprocess.run(
            [sys.executable, str(JOB), cluster.url, str(tmp_path / "view"), str(wheel_site)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=900,
        )
    except subprocess.TimeoutExpired as exc:  # say which check it was stuck in
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(
            f"the driver ran past 900 s after:\n{out}\n{err[-4000:]}\n{cluster.log_tails()}"
        )
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("ok ")]
    assert run.returncode == 0, (
        f"the driver exited with {run.returncode}\n{run.stdout}\n{run.stderr[-6000:]}\n"
        f"{cluster.log_tails()}"
    )
    names = " | ".join(lines)
    for backend, join in TRIANGLE_RUNS:
        assert f"triangles backend={backend} join={join}: 45" in names
    assert "user semiring chain backend=tasks" in names
    assert "user semiring chain backend=spark" in names
    assert "incremental view reopened at tick 3" in names
    assert "2 executors registered" in names
    assert "driver and executors import the installed wheel" in names
    assert "partitioned triangles: 45" in names
    assert "partitioned 4-cliques: " in names
    assert "partitioned chain" in names
    assert "shortest paths fixpoint partitioned in Spark: 34 nodes" in names
    assert "shortest paths in one Spark task: 34 nodes" in names
    assert "partitioned min-plus 2-hop on GraphBLAS in" in names
