"""Measured Spark cells: wall-clock time, Spark jobs and the driver's peak memory of a run,
under a time limit, with the answer checked.

:func:`spark_run` runs one call in its own Spark job group (in a thread, cancelled past the
timeout, as :func:`benchmarks._common.run_limited` does) while :class:`PeakRss` samples
the Python driver's resident memory; :func:`measure` makes the warm-up and timed runs of
one table cell and fills a :class:`benchmarks._common.Result`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import (
    Result,
    Timeout,
    job_group,
    jobs_in_group,
    new_job_group,
    run_limited,
)

STATUS = Path("/proc/self/status")


def rss_bytes() -> int | None:
    """The resident memory of this process (``VmRSS`` of ``/proc/self/status``), or None
    where there is no ``/proc`` (not Linux)."""
    try:
        text = STATUS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


class PeakRss:
    """The peak increase of this process's resident memory while a ``with`` block runs.

    A thread reads :func:`rss_bytes` every ``interval`` seconds; :attr:`peak_mb` is the
    largest reading (and the one at the end) minus the reading at the start, in MB
    (10⁶ bytes), or None without ``/proc``.  It is the Python driver process only: in
    ``local[N]`` the JVM (driver and executors) is another process.  A spike shorter than
    ``interval`` can be missed, and memory the allocator keeps from an earlier run is
    not counted again.

    Examples
    --------
    >>> with PeakRss() as mem:
    ...     block = bytearray(50_000_000)
    ...     block[::4096] = b"x" * len(block[::4096])  # touch every page
    >>> mem.peak_mb is None or mem.peak_mb > 40
    True
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.start: int | None = None
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._read()

    def _read(self) -> None:
        now = rss_bytes()
        if now is not None and (self.peak is None or now > self.peak):
            self.peak = now

    def __enter__(self) -> PeakRss:
        self.start = self.peak = rss_bytes()
        if self.start is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._read()

    @property
    def peak_mb(self) -> float | None:
        """Peak resident memory above the start, in MB; None without ``/proc``."""
        if self.start is None or self.peak is None:
            return None
        return (self.peak - self.start) / 1e6


@dataclass
class Run:
    """One run of a contender: its answer, seconds, Spark jobs and peak driver memory."""

    value: Any
    seconds: float
    jobs: int
    peak_mb: float | None


def spark_run(sc: Any, fn: Callable[[], Any], what: str, timeout: float) -> Run:
    """Run ``fn`` once in a fresh Spark job group, timed, with the driver's memory sampled.

    Only ``fn`` is timed (not the thread, nor the reading of the job count).

    Parameters
    ----------
    sc : pyspark.SparkContext
        The session's context (job groups, cancelling, the status tracker).
    fn : callable
        The run: returns the answer.
    what : str
        The job group's description (shown in the Spark UI).
    timeout : float
        Seconds; past it the group's jobs are cancelled until ``fn`` returns.

    Returns
    -------
    Run

    Raises
    ------
    benchmarks._common.Timeout
        ``Timeout(jobs launched before the cancellation)``.
    """
    group = new_job_group("beyond")

    def target() -> tuple[Any, float, float | None]:
        with job_group(sc, group, what), PeakRss() as mem:
            t0 = time.perf_counter()
            value = fn()
            seconds = time.perf_counter() - t0
        return value, seconds, mem.peak_mb

    try:
        value, seconds, peak = run_limited(target, timeout, lambda: sc.cancelJobGroup(group))
    except Timeout:
        raise Timeout(jobs_in_group(sc, group)) from None
    return Run(value, seconds, jobs_in_group(sc, group), peak)


def measure(
    res: Result,
    run: Callable[[], Run],
    check: Callable[[Any], str | None],
    *,
    warmups: int,
    repeat: int,
    timeout: float,
    count: Callable[[Any], int | None] | None = None,
) -> str | None:
    """The runs of one cell: ``warmups`` un-timed runs, then ``repeat`` timed ones.

    Fills ``res``: ``times``, ``spark_jobs`` (of the last timed run), ``count`` (the
    answer when it is an int, else ``count(answer)``), and the extra columns
    ``peak_driver_mb`` (largest over the timed runs), ``warmup_s``, ``times_s`` and
    ``correct``; a timeout or an error sets
    ``status`` and ``note``.  Once the cell's runs add up to half the timeout, no more
    runs start (noted).

    Parameters
    ----------
    res : Result
        The cell to fill.
    run : callable
        One run (:func:`spark_run` around the contender).
    check : callable
        ``check(answer)``: None when the answer is right, else a description of the
        difference.
    warmups, repeat : int
        Un-timed and timed runs.
    timeout : float
        Seconds per run (for the notes; ``run`` enforces it).
    count : callable, optional
        The ``count`` column of an answer that is not an int.

    Returns
    -------
    str or None
        The first wrong answer's description, or None when every answer was right.
    """
    wrong: str | None = None
    peaks: list[float] = []
    spent = 0.0
    res.extra.update(correct=None, peak_driver_mb=None)
    for i in range(warmups + repeat):
        try:
            r = run()
        except Timeout as exc:
            jobs = exc.args[0] if exc.args else None
            if res.times:
                res.note = f"[{res.runs} run(s); one more cancelled at {timeout:g} s]"
            else:
                res.status = "timeout"
                res.note = f"cancelled at {timeout:g} s after {jobs} Spark jobs"
            break
        except Exception as exc:  # noqa: BLE001 - reported in the table, the run goes on
            res.status, res.note = "error", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            print(f"\n  ERROR {exc!r}"[:2000], file=sys.stderr)
            break
        problem = check(r.value)
        res.count = r.value if isinstance(r.value, int) else count(r.value) if count else None
        res.extra["correct"] = problem is None and res.extra["correct"] is not False
        if problem is not None and wrong is None:
            wrong = problem
        spent += r.seconds
        if i < warmups:
            res.extra["warmup_s"] = round(r.seconds, 4)
            continue
        res.times.append(r.seconds)
        res.spark_jobs = r.jobs
        if r.peak_mb is not None:
            peaks.append(r.peak_mb)
        if spent > timeout / 2 and i < warmups + repeat - 1:
            res.note = f"[{res.runs} of {repeat} runs: the cell's runs passed half the timeout]"
            break
    if peaks:
        res.extra["peak_driver_mb"] = round(max(peaks), 1)
    res.extra["times_s"] = [round(t, 4) for t in res.times]
    return wrong
