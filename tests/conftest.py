"""One SparkSession for the whole test run, plus hypothesis profiles.

Hypothesis profiles: "ci" (default, modest example counts) and "long"
(``pytest --hypothesis-profile=long`` for a deeper search).
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=int(os.environ.get("FAQ_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
settings.register_profile(
    "long",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def spark():
    """A local[2] session: UI and progress bars off, two shuffle partitions.

    Adaptive query execution is off: on the tiny inputs of unit tests its
    extra planning stages cost more than they save.
    """
    from faq.session import local_session

    checkpoints = tempfile.mkdtemp(prefix="faq-ckpt-")
    session = local_session(
        "local[2]",
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.driver.memory": "2g",
        },
    )
    session.sparkContext.setCheckpointDir(checkpoints)
    yield session
    session.stop()


@pytest.fixture
def use_settings():
    """``use_settings(**changes)``: engine settings (:func:`faq.settings`) for this test only."""
    import contextlib

    import faq

    with contextlib.ExitStack() as stack:
        yield lambda **changes: stack.enter_context(faq.settings(**changes))


@pytest.fixture(autouse=True)
def no_job_group_left_behind():
    """Each test starts with no Spark job group: a test that counts its jobs under a group
    must not leave the group set for the next one (job groups are thread-local properties
    of the shared session)."""
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None or not hasattr(active, "sparkContext"):
        return
    try:
        sc = active.sparkContext
    except Exception:  # a Spark Connect session has no SparkContext
        return
    for prop in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
        sc.setLocalProperty(prop, None)


@pytest.fixture(scope="session")
def wheel_site(tmp_path_factory):
    """A folder holding the library as its built wheel installs it (no dependencies: they
    come from this environment), for tests that must run what ``pip install`` gives a
    user rather than the source tree: put it first on ``PYTHONPATH`` of a child process.

    The wheel is ``$SPARKFAQ_WHEEL`` when set (``.ci/run`` builds it once), else built
    here from the checkout with ``pip wheel --no-build-isolation`` (no network needed).
    """
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    wheel = os.environ.get("SPARKFAQ_WHEEL")
    if not wheel:
        out = tmp_path_factory.mktemp("wheel")
        build = ["wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(root)]
        subprocess.run(
            [*pip_command(), *build],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (built,) = out.glob("sparkfaq-*.whl")
        wheel = str(built)
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [*pip_command(), "install", "--no-deps", "--no-index", "--target", str(site), wheel],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return site


def pip_command() -> list[str]:
    """This interpreter's pip, quiet."""
    import sys

    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
