"""Pieces the benchmark scripts share: optional peers, runs with a time limit, Spark job
counts, and the result files (CSV and JSON) written next to the printed tables.

Every script writes one row per measured cell with the columns of :data:`COLUMNS`
(a script may add its own after them):

``workload``
    what was measured on (a graph, a chain);
``edges``
    its size in edges, where that applies;
``contender``
    who was measured (``engine (auto)``, ``DuckDB``, ``step Δ=100`` …);
``status``
    ``ok``, ``timeout``, ``skipped`` or ``error`` (:data:`STATUSES`);
``median_s``, ``runs``
    the median wall-clock seconds of the timed runs and how many there were;
``ratio``, ``baseline``
    ``median_s`` divided by the baseline's ``median_s`` on the same workload, and
    which contender the baseline is (the engine, in the triangle benchmark);
``count``
    the answer (triangles, 4-cliques), where the benchmark counts something;
``spark_jobs``
    the Spark jobs one run launched, where measured (Spark contenders);
``note``
    why a cell was skipped, the error, or a remark on the runs.
"""

from __future__ import annotations

import contextlib
import cProfile
import csv
import importlib
import io
import itertools
import json
import os
import platform
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import SparkContext

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where the scripts write their CSV and JSON files unless ``--out`` says otherwise."""

COLUMNS: tuple[str, ...] = (
    "workload",
    "edges",
    "contender",
    "status",
    "median_s",
    "runs",
    "ratio",
    "baseline",
    "count",
    "spark_jobs",
    "note",
)
"""The columns every result file starts with, in this order."""

STATUSES: tuple[str, ...] = ("ok", "timeout", "skipped", "error")

PEERS: dict[str, str] = {
    "duckdb": "duckdb",
    "graphblas": "python-graphblas",
    "networkx": "networkx",
    "scipy": "scipy",
    "matplotlib": "matplotlib",
    "pathway": "pathway",
}
"""Optional peers of the benchmarks: import name -> the name ``pip install`` wants."""

NOT_INSTALLED = "not installed"


# -- optional peers --------------------------------------------------------------------------
def optional_import(module: str) -> ModuleType | None:
    """The module, or None when it (or something it needs) cannot be imported.

    Parameters
    ----------
    module : str
        An import name such as ``"duckdb"`` or ``"scipy.sparse"``.

    Returns
    -------
    types.ModuleType or None
        The imported module, or None on :class:`ImportError`.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def missing_note(module: str, what: str) -> str:
    """One line saying that ``what`` is skipped because ``module`` is not installed.

    >>> missing_note("duckdb", "the DuckDB column")
    'duckdb is not installed (pip install duckdb): the DuckDB column is skipped'
    """
    pip = PEERS.get(module.split(".")[0], module)
    return f"{pip} is not installed (pip install {pip}): {what} is skipped"


# -- results ---------------------------------------------------------------------------------
@dataclass
class Result:
    """One cell of a benchmark table: a contender on a workload.

    Parameters
    ----------
    workload, contender : str
        What was measured on, and who was measured.
    edges : int or None
        The workload's size in edges, where that applies.
    status : str
        One of :data:`STATUSES`.
    times : list of float
        Seconds of each timed run (warm-up runs excluded).
    count : int or None
        The answer, where the benchmark counts something.
    spark_jobs : int or None
        Spark jobs of one run (the last timed one), where measured.
    ratio : float or None
        ``median_s`` / the baseline's ``median_s`` (set by :func:`set_ratios`).
    baseline : str
        The baseline contender's name.
    note : str
        A remark: why skipped, the error, fewer runs.
    extra : dict
        Script-specific columns, written after :data:`COLUMNS`.
    """

    workload: str
    contender: str
    edges: int | None = None
    status: str = "ok"
    times: list[float] = field(default_factory=list)
    count: int | None = None
    spark_jobs: int | None = None
    ratio: float | None = None
    baseline: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_s(self) -> float | None:
        """Median seconds of the timed runs, or None without any."""
        return statistics.median(self.times) if self.times else None

    @property
    def runs(self) -> int:
        """Number of timed runs."""
        return len(self.times)

    def as_row(self) -> dict[str, Any]:
        """The cell as a flat ``{column: value}`` mapping (:data:`COLUMNS`, then ``extra``)."""
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        row: dict[str, Any] = {
            "workload": self.workload,
            "edges": self.edges,
            "contender": self.contender,
            "status": self.status,
            "median_s": self.median_s if self.status == "ok" else None,
            "runs": self.runs,
            "ratio": self.ratio,
            "baseline": self.baseline,
            "count": self.count,
            "spark_jobs": self.spark_jobs,
            "note": self.note,
        }
        for k, v in self.extra.items():
            if k in row:
                raise ValueError(f"extra column {k!r} clashes with a standard column")
            row[k] = v
        return row


def set_ratios(
    results: Iterable[Result],
    baseline: str,
    key: Callable[[Result], Any] = lambda r: r.workload,
) -> None:
    """Set ``ratio`` (time / baseline time) on every ``ok`` result with an ``ok`` baseline.

    Parameters
    ----------
    results : iterable of Result
        The cells; those whose ``contender`` is ``baseline`` are the baselines.
    baseline : str
        The baseline contender's name.
    key : callable
        Groups cells that are compared (default: the workload).
    """
    results = list(results)
    base = {
        key(r): r.median_s
        for r in results
        if r.contender == baseline and r.status == "ok" and r.median_s
    }
    for r in results:
        r.baseline = baseline
        b = base.get(key(r))
        if r.status == "ok" and r.median_s is not None and b:
            r.ratio = r.median_s / b


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list | tuple):
        return ";".join(str(_csv_value(x)) for x in v)
    return v


def write_results(
    results: Sequence[Result], out_dir: str | Path, name: str, meta: dict[str, Any]
) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.csv`` and ``<out_dir>/<name>.json``; create the folder.

    The CSV has one row per result (:data:`COLUMNS`, then the extra columns in
    the order they first appear); the JSON holds ``meta`` (command, date,
    machine, settings) and the same rows.

    Parameters
    ----------
    results : sequence of Result
        The cells.
    out_dir : str or pathlib.Path
        Folder to write to.
    name : str
        File stem, normally the script's name.
    meta : dict
        Run information stored in the JSON file.

    Returns
    -------
    tuple of pathlib.Path
        The CSV and JSON paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [r.as_row() for r in results]
    columns = list(COLUMNS)
    for row in rows:
        columns += [k for k in row if k not in columns]
    csv_path = out / f"{name}.csv"
    json_path = out / f"{name}.json"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({c: _csv_value(row.get(c)) for c in columns})
    payload = {"meta": meta, "columns": columns, "rows": rows}
    json_path.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    return csv_path, json_path


def run_info(script: str, argv: Sequence[str] | None) -> dict[str, Any]:
    """Command, date and machine of a run, for the JSON file and the printed header."""
    given = list(sys.argv[1:] if argv is None else argv)
    return {
        "script": script,
        "command": " ".join(["python", f"benchmarks/{script}.py", *given]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hugepages": hugepages(),
    }


def hugepages() -> str:
    """The machine's transparent huge pages (``enabled``/``defrag``, the chosen modes) and
    whether numpy asks for them on its large arrays: where both are ``madvise``, the first
    touch of a fresh large array can be several times slower (the kernel compacts memory
    to find huge pages), which weighs on any contender that copies big results.
    ``NUMPY_MADVISE_HUGEPAGE=0`` turns numpy's request off (docs/wcoj.md)."""
    modes = []
    for name in ("enabled", "defrag"):
        try:
            with open(f"/sys/kernel/mm/transparent_hugepage/{name}") as f:
                text = f.read()
        except OSError:
            return "unknown (no /sys/kernel/mm/transparent_hugepage)"
        chosen = text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()
        modes.append(f"{name}={chosen}")
    try:
        from numpy._core.multiarray import _set_madvise_hugepage

        asked = _set_madvise_hugepage(True)  # returns the setting before; put it back
        _set_madvise_hugepage(asked)
    except (ImportError, AttributeError):
        return f"THP {' '.join(modes)}"
    return f"THP {' '.join(modes)}, numpy madvise {'on' if asked else 'off'}"


def add_out_argument(parser: Any) -> None:
    """Add ``--out DIR`` (default ``benchmarks/results``) to an argparse parser."""
    parser.add_argument(
        "--out",
        default=str(RESULTS_DIR),
        help="folder for the CSV and JSON result files (default: benchmarks/results)",
    )


# -- runs with a time limit ------------------------------------------------------------------
class Timeout(Exception):
    """A run exceeded its time limit and was cancelled; ``still_running`` when it had
    not stopped by the end of the wait (a run that cannot be cancelled)."""

    still_running = False


def run_limited(
    fn: Callable[[], Any], timeout: float, cancel: Callable[[], None], wait: float = 120.0
) -> Any:
    """Run ``fn`` in a thread; past ``timeout`` seconds call ``cancel`` until it stops.

    Parameters
    ----------
    fn : callable
        The run; its return value is returned, its exception re-raised.
    timeout : float
        Seconds.
    cancel : callable
        Stops the run (``SparkContext.cancelJobGroup``, ``duckdb`` ``interrupt``, or
        nothing for a run that cannot be cancelled); called every half second, for at
        most ``wait`` seconds, until the thread ends.
    wait : float
        Seconds to wait for a run past its time limit to end (120).

    Raises
    ------
    Timeout
        The run took longer than ``timeout``.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        deadline = time.monotonic() + wait
        while t.is_alive() and time.monotonic() < deadline:
            cancel()
            t.join(0.5)
        exc = Timeout()
        exc.still_running = t.is_alive()
        raise exc
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- profiles --------------------------------------------------------------------------------
def profile_text(fn: Callable[[], Any], top: int) -> str:
    """Run ``fn`` once under cProfile: its ``top`` most expensive functions by cumulative
    time, then by their own time, as :mod:`pstats` prints them."""
    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


# -- Spark job counts ------------------------------------------------------------------------
_GROUPS = itertools.count()
_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def new_job_group(prefix: str = "bench") -> str:
    """A job-group id not used before in this process."""
    return f"{prefix}-{os.getpid()}-{next(_GROUPS)}"


@contextlib.contextmanager
def job_group(sc: SparkContext, group: str, description: str) -> Iterator[str]:
    """Run the body with Spark jobs tagged as ``group`` (of this thread); clear it after.

    Job groups are thread-local: enter this in the thread that runs the jobs.
    """
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield group
    finally:
        for prop in _JOB_PROPERTIES:
            sc.setLocalProperty(prop, None)  # type: ignore[arg-type]


def jobs_in_group(sc: SparkContext, group: str, settle: float = 1.0) -> int:
    """How many Spark jobs ``group`` launched, from the status tracker.

    The tracker learns of jobs through Spark's asynchronous listener bus, so
    the count is read until it stops changing (at most ``settle`` seconds).
    """
    tracker = sc.statusTracker()
    n = len(tracker.getJobIdsForGroup(group))
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        time.sleep(0.05)
        m = len(tracker.getJobIdsForGroup(group))
        if m == n:
            break
        n = m
    return n


def timed_jobs(sc: SparkContext, fn: Callable[[], Any], description: str) -> tuple[float, Any, int]:
    """Run ``fn`` in this thread under a fresh job group: ``(seconds, value, Spark jobs)``.

    Only ``fn`` is timed (not the reading of the job count).
    """
    group = new_job_group()
    with job_group(sc, group, description):
        t0 = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - t0
    return seconds, value, jobs_in_group(sc, group)


def stop_spark() -> None:
    """Stop the active SparkSession, if any (scripts call it on exit; ``main`` does not)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


# -- formatting ------------------------------------------------------------------------------
def fmt_s(x: float) -> str:
    """Seconds for a table: ``12.3 ms``, ``4.56 s``, ``256 s``."""
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.2f} s" if x < 100 else f"{x:.0f} s"


def fmt_ratio(r: float) -> str:
    """A time ratio: ``×2.3``, ``×30``, ``×1/14``."""
    if r >= 0.1:
        return f"×{r:.2g}" if r < 10 else f"×{r:.0f}"
    return f"×1/{1 / r:.2g}" if r > 0.01 else f"×1/{1 / r:.0f}"


def fmt_rows(x: int) -> str:
    """A row count in short form: ``9.01M``, ``77.3k``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return str(x)
