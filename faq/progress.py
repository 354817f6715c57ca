"""Progress while a step runs: a line every few seconds on the ``"faq"`` logger.

The executor logs each step when it ends (:func:`faq.session.show_progress`); a step
can take minutes, and a silent run cannot be told from a hung one.  While a step runs,
:class:`StepProgress` runs a daemon thread that logs, every ``progress_seconds``
(:class:`faq.plan.settings.Settings`), how long the step has run and, from Spark's
status tracker (``SparkContext.statusTracker()``), the tasks done out of the tasks of
the Spark stages the step has started so far, the tasks running, and the rows those
stages have read (input and shuffle records, from the session's status store where it
answers)::

    06:24:31 step 1/1: eliminate a, b, c on spark (8 cells): running 12 s; 5/8 tasks done,
    3 running, 2 stages; 2,500 rows read

(one line).

Under Spark Connect there is no SparkContext and no status tracker on the client: the
lines say only how long the step has run.  A step in the driver has no Spark tasks
either (unless it collects an input): the same.  Nothing runs, and nothing is logged,
while the ``"faq"`` logger is not enabled for INFO (progress off) or
``progress_seconds`` is 0; the thread stops when the step ends, also on an error.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["THREAD_NAME", "StepProgress"]

log = logging.getLogger("faq")

THREAD_NAME = "faq-progress"
"""The name of the reporter's thread (one per running step, while progress is on)."""


@dataclass
class _Stage:
    """What is known of one Spark stage: its tasks, done, running, and rows read."""

    tasks: int
    done: int
    running: int
    rows: int | None = None
    ended: bool = False


class StepProgress:
    """While the ``with`` block runs, log a line about it every ``every`` seconds.

    Parameters
    ----------
    what : str
        The step, as the lines name it (``"step 1/2: eliminate a on spark (8 cells)"``).
    spark : SparkSession or None
        The session whose status tracker gives the task counts; None, or a Spark
        Connect session: elapsed time only.
    every : float
        Seconds between lines; 0 logs nothing.

    Notes
    -----
    The stages counted are those active at some poll after the block began (a stage
    already running when it began is left out; so, under the weak consistency of
    Spark's status API, may be a stage that starts and ends between two polls, a
    fraction of a second apart at most).  A stage no longer active has all its tasks
    done.  Jobs other threads run on the same session meanwhile are counted too.
    """

    def __init__(self, what: str, spark: SparkSession | None, every: float) -> None:
        self.what = what
        self.spark = spark
        self.every = float(every)
        self.lines = 0  # logged so far
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tracker: Any = None
        self._store: Any = None
        self._before: set[int] = set()
        self._stages: dict[int, _Stage] = {}
        self._t0 = 0.0

    def __enter__(self) -> StepProgress:
        if self.every <= 0 or not log.isEnabledFor(logging.INFO):
            return self
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        # the status tracker is found here, not in the step's thread: a step pays for a
        # thread's start only (the delta rule runs many small ones)
        if self._stop.is_set():
            return
        self._tracker, self._store = _status(self.spark)
        if self._tracker is not None:
            try:
                self._before = set(self._tracker.getActiveStageIds())
            except Exception:  # noqa: BLE001 - a stopped context: elapsed time only
                self._tracker = None
        # a tick at a fixed pace (not after each line) so a slow poll does not drift
        poll = min(self.every, 1.0)
        due = self.every
        while not self._stop.wait(poll):
            try:
                self._poll()
                if time.perf_counter() - self._t0 >= due:
                    due += self.every
                    log.info(self.line())
                    self.lines += 1
            except Exception:  # noqa: BLE001 - progress never breaks a step
                log.debug("progress: status tracker failed", exc_info=True)
                self._tracker = None

    def _poll(self) -> None:
        """Read the status tracker: every stage active now, and the end of those gone."""
        tracker = self._tracker
        if tracker is None:
            return
        active = set(tracker.getActiveStageIds()) - self._before
        for sid in active:
            info = tracker.getStageInfo(sid)
            if info is not None:
                self._stages[sid] = _Stage(
                    info.numTasks, info.numCompletedTasks, info.numActiveTasks
                )
        for sid, st in self._stages.items():
            if st.ended:
                continue
            if sid not in active:  # ended since: every task done (or the step failed)
                st.done, st.running, st.ended = st.tasks, 0, True
            if self._store is not None:
                st.rows = _rows_read(self._store, sid)

    def line(self) -> str:
        """The step, how long it has run and, when Spark's status is known, its tasks."""
        text = f"{self.what}: running {time.perf_counter() - self._t0:.0f} s"
        if self._tracker is None:
            where = "Spark Connect: no task counts" if _is_connect(self.spark) else ""
            return text + (f" ({where})" if where else "")
        stages = list(self._stages.values())
        if not stages:
            return text + "; no Spark stage started yet"
        tasks = sum(s.tasks for s in stages)
        done = sum(s.done for s in stages)
        running = sum(s.running for s in stages)
        n = len(stages)
        text += f"; {done}/{tasks} tasks done, {running} running, {n} stage{'s' * (n != 1)}"
        rows = [s.rows for s in stages if s.rows is not None]
        if rows:
            text += f"; {sum(rows):,} rows read"
        return text


def _status(spark: SparkSession | None) -> tuple[Any, Any]:
    """The session's status tracker and status store (each None when not reachable: no
    session, Spark Connect, a stopped context)."""
    if spark is None:
        return None, None
    try:
        sc = spark.sparkContext  # classic sessions only; Spark Connect raises
        tracker = sc.statusTracker()
    except Exception:  # noqa: BLE001
        return None, None
    try:  # rows read: the JVM's status store (what Spark's UI reads), where it answers
        store = sc._jsc.sc().statusStore()
    except Exception:  # noqa: BLE001
        store = None
    return tracker, store


def _rows_read(store: Any, stage: int) -> int | None:
    """Input and shuffle records a stage has read (its last attempt), or None."""
    try:
        data = store.lastStageAttempt(stage)
        return int(data.inputRecords()) + int(data.shuffleReadRecords())
    except Exception:  # noqa: BLE001 - not known (yet, or in this Spark)
        return None


def _is_connect(spark: SparkSession | None) -> bool:
    return spark is not None and type(spark).__module__.startswith("pyspark.sql.connect")
