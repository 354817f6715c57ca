"""A pytest plugin for testing views: a quiet Spark session and hypothesis profiles.

Turn it on with one line in your ``conftest.py``::

    pytest_plugins = ["incremental.testing.plugin"]

(or ``pytest -p incremental.testing.plugin``).  It registers the hypothesis profiles
``quick`` and ``long`` (:mod:`incremental.testing.profiles`) before pytest reads
``--hypothesis-profile``, and gives the fixture ``faq_session``: one quiet local
session for the whole run (:func:`faq.session.local_session`, two cores, two shuffle
partitions), started on first use, stopped at the end if it started it.  Views of
pandas frames in the driver need no session: only a test of ``state="spark"`` takes it.

It is opt-in rather than registered for every pytest run through an entry point:
importing it imports the library (numba, pandas), which would slow down every other
project's test runs in the same environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from incremental.testing.profiles import register_profiles

__all__ = ["faq_session"]

register_profiles()


@pytest.fixture(scope="session")
def faq_session() -> Iterator[Any]:
    """A quiet local SparkSession (``local[2]``) for the test run; an active one is reused."""
    from pyspark.sql import SparkSession

    from faq.session import local_session

    active = SparkSession.getActiveSession()
    session = local_session(
        "local[2]",
        **{"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    if active is None:
        session.stop()
