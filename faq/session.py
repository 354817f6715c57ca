"""The SparkSession the engine uses, and a quiet local one for scripts and notebooks.

:func:`local_session` is the one documented way to get a session on this
machine: no progress bars, warnings and errors only in the log, a few shuffle
partitions (not Spark's 200) and Python workers that run the same interpreter
as the driver.  Code written against it runs unchanged on a cluster: every
function of the library takes the session of the DataFrames it is given, or
the active session (a ``spark-submit`` job, an existing session, or a Spark
Connect session from ``SparkSession.builder.remote(...)``).

>>> from faq.session import local_session
>>> spark = local_session("local[2]")             # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faq.jvm_output import filtered_stderr
from faq.kernel import compiled

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LOCAL_CONFIG",
    "checkpoint_ids",
    "current_session",
    "fixed_plans",
    "fixed_plans_for",
    "free_checkpoints",
    "get_spark",
    "is_spark_dataframe",
    "local_session",
    "quiet_spark_errors",
    "release_unreferenced",
    "show_progress",
]

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The JVM's logging configuration in local sessions: warnings and errors, one line each."""

LOCAL_CONFIG: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": str(max(2, 2 * (os.cpu_count() or 1))),
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
"""Settings of :func:`local_session`, each overridable by a keyword argument."""


def local_session(master: str = "local[*]", **config: str) -> SparkSession:
    """A quiet local SparkSession with sensible settings for one machine.

    Parameters
    ----------
    master : str, default ``"local[*]"``
        The Spark master: ``local[N]`` (N cores), ``local[*]`` (all cores) or
        a cluster URL such as ``spark://host:7077``.
    **config : str
        Spark settings that override :data:`LOCAL_CONFIG`, e.g.
        ``**{"spark.driver.memory": "8g"}``.

    Returns
    -------
    pyspark.sql.SparkSession
        The session.  An already active session is returned as it is: its
        settings are the caller's and are not overwritten.

    Notes
    -----
    Besides :data:`LOCAL_CONFIG` the session's Python workers run this
    interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` unless it is set),
    so a virtualenv works without being activated, and the JVM logs only
    warnings and errors (``faq/log4j2.properties``), and the two notices Spark 4 prints
    on Java 17 at every start (the incubating vector module; DataSketches' restricted
    mode) are left out of its standard error (:mod:`faq.jvm_output`).  Driver memory and JVM
    options only take effect when this call starts the JVM.  While the JVM
    starts, a thread compiles the kernel's numba code, or loads it from numba's
    disk cache (:func:`faq.kernel.compiled.warm_up_in_background`; it logs ``kernel
    ready in ...`` on the ``"faq"`` logger).
    """
    from pyspark.sql import SparkSession

    active = current_session()
    if active is not None:
        return active
    settings = {**LOCAL_CONFIG, **config}
    # PySpark starts its Python workers with $PYSPARK_PYTHON (default: "python3" on PATH,
    # which is not this virtualenv's interpreter unless it is activated)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_opts = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
    extra = settings.get("spark.driver.extraJavaOptions", "")
    settings["spark.driver.extraJavaOptions"] = f"{extra} {java_opts}".strip()
    # the kernel's numba code compiles (or loads from its disk cache) while the JVM starts
    compiled.warm_up_in_background()
    builder = SparkSession.builder.master(master).appName("sparkfaq")
    for k, v in settings.items():
        builder = builder.config(k, v)
    # the JVM inherits a filtered standard error: its start-up notices are left out
    with filtered_stderr():
        return builder.getOrCreate()


def show_progress(enabled: bool = True) -> None:
    """Print one line per step of every solve, tick and load to stderr, and lines while a
    step runs (or stop).

    The engine logs each InsideOut step (what it joins, where it runs, rows
    and seconds) and each incremental load and tick at INFO level on the
    ``"faq"`` logger; this attaches a plain stderr handler to it, as the
    ``sparkfaq --progress`` option does.  Equivalent to configuring
    ``logging.getLogger("faq")`` yourself.

    While progress is on, a step that runs longer than the ``progress_seconds`` setting
    (5 s; ``faq.settings(progress_seconds=...)``) logs a line that often: how long it has
    run, the tasks done out of the tasks of its Spark stages, the tasks running and the
    rows read, from Spark's status tracker (:mod:`faq.progress`).  Under Spark Connect,
    which has no status tracker on the client, the lines give the time only.  With
    progress off no thread runs and nothing is logged.
    """
    logger = logging.getLogger("faq")
    for h in [h for h in logger.handlers if getattr(h, "_faq_progress", False)]:
        logger.removeHandler(h)
    if not enabled:
        logger.setLevel(logging.NOTSET)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    handler._faq_progress = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def current_session() -> SparkSession | None:
    """The session in use (classic or Spark Connect), or None when there is none.

    The thread's active session, else the process's default one: PySpark keeps
    the active session per thread, so a solve in a worker thread of the user's
    still finds the session the user built (never starts a second Spark).
    """
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except PySparkException:
        return None


def get_spark() -> SparkSession:
    """The session in use (classic or Spark Connect), or a new :func:`local_session`."""
    active = current_session()
    return active if active is not None else local_session()


def release_unreferenced(spark: SparkSession) -> None:
    """Free the cached blocks of DataFrames nothing refers to any more, now.

    A ``localCheckpoint`` keeps its blocks until Spark's cleaner sees the
    checkpoint unreachable, and that needs two collectors: Python's (proxies
    held in reference cycles release their JVM objects only when the cycle is
    collected) and the JVM's (the cleaner tracks checkpoints by weak
    reference, and an idle driver JVM may not collect for a long time; Spark's
    own periodic collection is every 30 minutes).  This runs Python's cycle
    collector, then asks the driver JVM of a classic session to collect.  With
    Spark Connect, dropping the Python DataFrame already tells the server to
    release it, so only Python's collector runs.
    """
    gc.collect()
    try:
        jvm = spark.sparkContext._jvm  # classic sessions only; Connect raises
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return
    if jvm is not None:
        jvm.java.lang.System.gc()


ADAPTIVE = "spark.sql.adaptive.enabled"
_plans_lock = threading.Lock()
_plans_held: dict[Any, list] = {}  # per session (held while a block is open): [blocks open,
# the setting before the first]


@contextlib.contextmanager
def fixed_plans(spark: SparkSession | None) -> Iterator[None]:
    """Run the block's Spark actions with adaptive query execution off, then restore it.

    Adaptive execution submits every shuffle stage as a Spark job of its own and may
    merge the partitions a step chose (one per cell); the engine's plans fix both.
    Blocks may nest and run in several threads on one session: the first to open
    switches adaptive execution off and the last to close restores the session's
    value (or unsets it, when the session had none), also after an error.  Queries
    that other threads run on the session meanwhile run with it off too.

    Parameters
    ----------
    spark : SparkSession or None
        The session (classic or Spark Connect); None: nothing is changed.
    """
    if spark is None:
        yield
        return
    key = spark  # the session itself (hashed by identity), held while a block is open
    with _plans_lock:
        held = _plans_held.get(key)
        if held is None:
            before = spark.conf.get(ADAPTIVE, None)
            spark.conf.set(ADAPTIVE, "false")
            held = _plans_held[key] = [0, before]
        held[0] += 1
    try:
        yield
    finally:
        with _plans_lock:
            held[0] -= 1
            if held[0] == 0:
                del _plans_held[key]
                if held[1] is None:
                    spark.conf.unset(ADAPTIVE)
                else:
                    spark.conf.set(ADAPTIVE, held[1])


def fixed_plans_for(held: Iterable[object]) -> contextlib.AbstractContextManager[None]:
    """:func:`fixed_plans` on the active session when one of ``held`` (a query's
    relations) is a Spark DataFrame, unless the ``spark_adaptive`` setting is on;
    otherwise a block that changes nothing."""
    from faq.plan.settings import current

    if not current().spark_adaptive and any(is_spark_dataframe(x) for x in held):
        return fixed_plans(current_session())
    return contextlib.nullcontext()


def is_spark_dataframe(df: object) -> bool:
    """True for a Spark DataFrame, classic or Spark Connect."""
    from pyspark.sql import DataFrame as SparkDataFrame

    connect = type(df).__module__.startswith("pyspark.sql.connect") and hasattr(df, "columns")
    return isinstance(df, SparkDataFrame) or connect


def checkpoint_ids(df: DataFrame) -> frozenset[int]:
    """The ids of the checkpointed RDDs whose blocks ``df`` reads.

    These are the RDDs behind every ``localCheckpoint`` (or ``checkpoint``)
    among the leaves of ``df``'s plan; a DataFrame that reads none, and any
    DataFrame of a Spark Connect session (whose plans live on the server),
    gives the empty set.  See :func:`free_checkpoints`.
    """
    jdf = getattr(df, "_jdf", None)  # classic sessions only
    if jdf is None:
        return frozenset()
    leaves = jdf.queryExecution().analyzed().collectLeaves()
    ids = set()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRDD":
            ids.add(int(leaf.rdd().id()))
    return frozenset(ids)


def free_checkpoints(spark: SparkSession, ids: Iterable[int]) -> None:
    """Drop the cached blocks of these checkpointed RDDs now, without waiting on Spark's cleaner.

    Only for checkpoints the caller owns: a DataFrame that still reads one
    fails when it next runs ("checkpoint block not found").  The blocks are
    removed asynchronously (no Spark job).  A no-op with Spark Connect, where
    :func:`checkpoint_ids` finds nothing and the server frees a checkpoint once
    the client drops its DataFrame.
    """
    ids = list(ids)
    if not ids:
        return
    try:
        sc = spark.sparkContext._jsc.sc()  # classic sessions only; Connect raises
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return
    for i in ids:
        sc.unpersistRDD(i, False)


_ERROR_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
"""PySpark's Python loggers that print every failed query as a multi-kilobyte JSON record."""


@contextlib.contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """Silence PySpark's JSON error records while the engine runs Spark work.

    The engine turns the Spark errors it knows (integer overflow under ANSI
    mode, a user semiring's failing function) into one-line errors of its
    own, and lets any other error through unchanged; the JSON record PySpark
    logs for each failed DataFrame query would only repeat it at length.  The
    JVM's own lines ("Exception in task", "Lost task") are silenced by the
    logging configuration of :func:`local_session` (``faq/log4j2.properties``);
    a session built by the user keeps its own JVM logging.
    """
    loggers = [logging.getLogger(n) for n in _ERROR_LOGGERS]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, before, strict=True):
            lg.setLevel(level)
