"""Progress while a step runs (issue 37, point 7): lines every few seconds, then nothing.

``show_progress()`` and ``sparkfaq --progress`` used to print a step only when it ended:
a partitioned triangle count at 1M edges was silent for 13-70 s.  Now, while progress is
on, a daemon thread logs a line every ``progress_seconds`` with the Spark tasks done out
of the tasks of the step's stages (:mod:`faq.progress`).
"""

from __future__ import annotations

import logging
import re
import threading
import time

import numpy as np
import pandas as pd
import pytest

import faq
from faq import Factor, query
from faq.progress import THREAD_NAME, StepProgress
from faq.testing import power_law_graph, triangle_count_numpy

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
LIVE = re.compile(
    r"^step 1/1: eliminate .* on cells/\S+ \((\d+) cells\): running \d+ s; "
    r"(\d+)/(\d+) tasks done, (\d+) running, (\d+) stages?(; ([\d,]+) rows read)?$"
)


def reporters() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def test_a_long_spark_step_logs_its_tasks_while_it_runs(spark, caplog):
    """A partitioned step whose scan takes a few seconds (4 partitions of 0.6 s on 2
    cores), with a line every 0.25 s: several lines while it runs, each with its tasks
    done out of the tasks of its Spark stages; the count is right, and the thread is
    gone when the step ends."""

    def slow_batches(batches):  # nested: pickled by value for the Python workers
        for b in batches:
            time.sleep(0.6)  # each partition's rows after a pause: a slow scan
            yield b

    e = power_law_graph(100, 600, seed=3)
    edges = pd.DataFrame({"src": e[:, 0], "dst": e[:, 1]})
    df = spark.createDataFrame(edges).repartition(4).mapInArrow(slow_batches, "src long, dst long")
    q = query(TRIANGLE, semiring="counting")
    caplog.set_level(logging.INFO, logger="faq")
    with faq.settings(local_rows=0, cell_min_rows=0, progress_seconds=0.25):
        out = q.solve(E=df)
    assert out.scalar() == triangle_count_numpy(e)
    assert not reporters()
    lines = [r.getMessage() for r in caplog.records if r.name == "faq"]
    live = [m for m in map(LIVE.match, lines) if m]
    assert len(live) >= 2, lines
    for m in live:
        cells, done, tasks, running = (int(m.group(i)) for i in (1, 2, 3, 4))
        assert 0 <= done <= tasks and running <= tasks and cells > 1, m.group(0)
    assert any(int(m.group(2)) < int(m.group(3)) for m in live)  # seen while under way
    assert max(int(m.group(3)) for m in live) >= 4  # the scan's 4 tasks at least
    # the line of the step's end comes after its live lines
    end = next(i for i, m in enumerate(lines) if re.match(r"step 1/1: .* rows in ", m))
    assert all(lines.index(m.group(0)) < end for m in live)


def test_progress_off_starts_no_thread_and_logs_nothing(spark, caplog):
    """With the ``"faq"`` logger not enabled for INFO (progress off), no reporter thread
    starts and no line is logged, whatever ``progress_seconds`` says."""
    started = []
    real = threading.Thread.start

    def start(self):
        started.append(self.name)
        real(self)

    caplog.set_level(logging.WARNING, logger="faq")
    E = Factor.from_numpy(np.triu(np.ones((6, 6), dtype=np.int64), 1), vars=("a", "b"))
    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        with faq.settings(progress_seconds=0.01):
            assert query(TRIANGLE, semiring="counting").solve(E=E).scalar() == 20
        with StepProgress("step 1/1: x on driver", None, 0.01) as p:
            time.sleep(0.1)
    finally:
        threading.Thread.start = real  # type: ignore[method-assign]
    assert THREAD_NAME not in started and p.lines == 0
    assert not [r for r in caplog.records if r.name == "faq"]


def test_the_reporter_logs_time_without_spark_and_stops_on_an_error(caplog):
    """No session (a step in the driver): the lines give the time the step has run; an
    error inside the step stops the thread too.  ``progress_seconds=0`` logs nothing."""
    caplog.set_level(logging.INFO, logger="faq")
    with StepProgress("step 2/3: eliminate b on driver", None, 0.05) as p:
        time.sleep(0.4)
        assert reporters()
    assert not reporters() and p.lines >= 2
    lines = [r.getMessage() for r in caplog.records if r.name == "faq"]
    assert lines and all(m == "step 2/3: eliminate b on driver: running 0 s" for m in lines)
    with pytest.raises(RuntimeError, match="boom"), StepProgress("x", None, 0.05):
        raise RuntimeError("boom")
    assert not reporters()
    with StepProgress("x", None, 0) as p:
        time.sleep(0.1)
        assert not reporters()
    assert p.lines == 0


class ConnectLike:
    """A session as Spark Connect's looks to the reporter: no SparkContext."""

    @property
    def sparkContext(self):
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported")


ConnectLike.__module__ = "pyspark.sql.connect.session"


def test_under_spark_connect_the_lines_say_there_are_no_task_counts(caplog):
    caplog.set_level(logging.INFO, logger="faq")
    with StepProgress("step 1/1: x on spark (4 cells)", ConnectLike(), 0.05) as p:
        time.sleep(0.25)
    assert p.lines >= 1 and not reporters()
    text = caplog.records[0].getMessage()
    assert text == "step 1/1: x on spark (4 cells): running 0 s (Spark Connect: no task counts)"
