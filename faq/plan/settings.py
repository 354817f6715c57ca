"""Every threshold and physical choice of the engine, in one frozen :class:`Settings`.

The engine decides a few things by size: whether a relation is read into the
driver or kept in Spark, whether a step runs in the driver, on its threads,
inside Spark tasks or as Spark joins, where a delta query runs, where a view
keeps its state, and when a keyed table folds its log of changes.  Each of
those decisions reads one field here, and nothing else.

The values in force (:func:`current`) live in a :class:`contextvars.ContextVar`, so
they belong to the thread (or asyncio task) that set them; :func:`settings` changes
them for a ``with`` block, or, called alone, for the rest of the thread::

    >>> from faq.plan.settings import current, settings
    >>> current().local_rows
    20000000
    >>> with settings(local_rows=0):      # everything is "too large": kept in Spark
    ...     current().local_rows
    0
    >>> current().local_rows
    20000000

Another thread never sees them: a block entered in one thread does not change what a
query running in another thread reads.  A new thread starts from :data:`DEFAULTS`:
Python starts a thread in an empty context (unless ``sys.flags.thread_inherit_context``
is set, Python 3.14's ``-X thread_inherit_context``, on by default in free-threaded
builds: then from a copy of the settings in force where ``start()`` was called).  An
asyncio task starts from a copy of its creator's.  To run a thread with the settings of
this one, enter ``faq.settings(...)`` in it, or start it in
``contextvars.copy_context().run``.  A Spark task runs in a Python worker process of
its own, so whatever it runs with settings other than the defaults must be given them
(:mod:`faq.delta` ships its run's to its one task).

``Query.explain()`` shows the fields that decided each step (and every field
that differs from its default).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["DEFAULTS", "Settings", "SettingsScope", "current", "settings"]


@dataclass(frozen=True)
class Settings:
    """The engine's thresholds (see each field); immutable: change them with :func:`settings`.

    Attributes
    ----------
    local_rows : int
        Collect-or-keep: a relation with at most this many rows is read into the
        driver and joined by the local kernel (under ``backend="auto"``, its rows
        times the atoms that read it); a step whose inputs and output fit
        runs locally; a view keeps its state in the driver below it
        (``state="auto"``).  20M two-column rows take about 320 MB as numpy arrays.
    local_bytes : int
        Without a row estimate, a relation whose estimated size (Spark's
        ``sizeInBytes``; for files the file size) is at most this is read into
        the driver, at most ``local_rows + 1`` rows of it (more: it stays in
        Spark); a larger one stays in Spark unread.
    footer_files : int
        A Parquet scan of local files (under filters and projections only) gets a row
        bound from its files' footers, read in the driver, when it has at most this
        many files; with more, it has no row estimate (see ``local_bytes``).
    task_work : int
        Driver or tasks: a local step with at least this much estimated work
        (candidate rows) runs inside Spark tasks when the cluster has more cores
        than the driver, else on the driver's threads.
    thread_work : int
        A driver step with at least this much estimated work uses all the
        driver's cores (the compiled kernel releases the GIL).
    task_slices : int
        Slices per core when a step runs in tasks.
    skew_factor : float
        Join method on Spark under ``join="auto"``: a cyclic bag whose cheapest
        pairwise join is known (its atoms are local) uses binary DataFrame joins
        when that join has at most this many times the rows of its inputs.
    cell_rows : int
        The memory budget of one cell of a step partitioned over the cluster: the
        share search doubles the cells until the rows one cell receives are at
        most this (16M rows of three 64-bit columns take about 400 MB, and the
        kernel's tries about as much again).
    program_task_rows : int
        A recursive program whose inputs kept in Spark hold at most this many rows in
        all runs whole inside one Spark task (:mod:`faq.program_task`): one Spark
        job gathers the inputs there, every round runs on the driver's kernel in that
        task, and the answer's rows go back to Spark, never to the driver.  Past it (or
        at 0) each recursive group's fixpoint is partitioned in Spark, a few Spark jobs
        a round.  A task's Python worker then holds the inputs and the state: 16M rows
        of edges take about 400 MB, the state and the rounds' tables about as much again.
    query_task_rows : int
        A query (past ``local_rows``, under ``backend="auto"``) whose inputs kept in
        Spark hold at most this many rows in all is solved whole inside one Spark task
        (:mod:`faq.query_task`): one job gathers the inputs there, the task plans from
        exact counts and runs every step on the driver's kernel (its libraries, its
        threads), and the answer goes back to Spark.  Past it (or at 0) the steps are
        partitioned over the cluster, each after a statistics job and a shuffle.  One
        task has one executor's cores: on a large cluster, a join whose work is far
        larger than its inputs (4-cliques of a skewed graph) may want 0.
    cell_min_rows : int
        The fewest input rows worth a cell of their own: a partitioned step starts its
        share search from ``ceil(rows / cell_min_rows)`` cells (at least one, at most
        the cluster's task slots), so a small step runs in one cell instead of paying
        a task's fixed cost (its Python worker, its Arrow batches) several times over.
        Consecutive one-cell steps run in the same task (:mod:`faq.spark.fused`).
        0 starts every step from the cluster's task slots.
    max_cell_waves : int
        The cap on a partitioned step's cells, whatever ``cell_rows`` says: at most this
        many waves of the cluster's task slots (:func:`faq.spark.parallelism`, Spark's
        default parallelism), heavy values' grids included, and never more cells than
        the step's inputs have rows.  Past it the share search allows a cell more rows
        than ``cell_rows`` (the smallest budget whose cells fit), and ``explain()`` says
        so (the limit, the cells wanted, the cells given).  Thousands of cells cost more
        in scheduling and in every task's plan than they save; raise it on a large
        cluster whose cells would not fit a task's memory otherwise.  At least 1.
    broadcast_rows : int
        Spark joins broadcast a side with at most this many rows.
    connect_payload : int
        Over Spark Connect the tries travel in the plan: a step whose index is
        larger than this many bytes runs in the driver instead of in tasks.
    local_delta_rows : int
        Delta placement: a delta query whose changed relation has at most this
        many rows runs in the driver, reading only the rows of the other
        relations that match it.  Where every relation and change is in the
        driver already (a view's driver state, a program's rounds), a larger
        change runs there too, up to ``local_rows``.
    delta_thread_rows : int
        A term of a delta rule over a view's keyed state in the driver whose change
        holds at least this many rows splits its compiled sums over the driver's cores
        (its rows taken in turn by each thread); a smaller one runs on one thread
        (handing it to threads would cost more than it saves).  From 768 rows a
        1,000-change triangle tick's median is 8-17 % lower on 2 cores than on one
        thread, its p99 2-3 ms higher (docs/incremental.md).
    gil_rows : int
        A compiled kernel call on at most this many rows keeps the GIL while it runs
        (its ``*_held`` variant, :func:`faq.kernel.compiled.sized`); a larger one lets
        go of it.  A kernel that lets go takes the GIL back when it returns, and if
        another thread of the process is running Python meanwhile, the caller waits
        until that thread lets go: up to Python's switch interval (5 ms).  A one-edge
        tick makes some fifteen such calls of a few microseconds each (beside a busy
        Python thread it took about 11 ms instead of 0.4 ms, docs/incremental.md).
        0: every call lets go.
    max_fetch_rows : int
        ... as long as those matching rows are at most this many.  Also the rows a
        Spark-resident view's tick brings into the driver (:mod:`incremental.reach`);
        past it, the tick's delta queries read the state in Spark.  Read, with
        ``max_literals``, through :func:`faq.plan.reach.bounds` only.
    max_literals : int
        Keys of a delta sent to Spark as a literal filter, at most; also the values a
        Spark-resident view's tick looks for in one fetch (:mod:`incremental.reach`),
        and the values a delta rule in one Spark task looks for.
    log_rows : int
        Log folding: a keyed table (or a Spark view's relation) keeps its changes
        in a log until the log holds more than ``max(log_rows, log_fraction ×
        rows)`` rows, then folds it into the base.
    log_fraction : float
        See ``log_rows``.
    log_ticks : int
        A keyed table's fold also begins early, beside the ticks (on the helper thread,
        where the log's annotations are integers), once its log holds more than
        ``log_ticks`` times the rows of the change being written and more than an
        eighth of the ``log_rows``/``log_fraction`` bound: after a burst of large changes,
        small ones then stop paying for a log sized by the burst (each tick copies and
        reads the log).  0: folds begin only past the bound.
    rows_per_partition : int
        Rows per Spark partition of a view's state.
    filter_values : int
        A Spark-resident view reads the rows of at most this many distinct keys per
        column by a filter of literal values; more by a semi-join with the keys.
    gc_ticks : int
        Every this many ticks a Spark-resident view runs both garbage collectors, so
        that Spark's cleaner frees checkpoints and shuffle files no longer referenced.
    max_rounds : int
        Most rounds a recursive program's fixpoint may take before it is refused,
        where ⊕ is not idempotent (an idempotent ⊕ is bound by its keys instead:
        :func:`faq.plan.convergence.improving_cycle`); ``Program.solve(max_rounds=...)``
        overrides it per call.
    journal_bytes : int
        A durable view appends each tick to a journal (:mod:`incremental.journal`)
        and writes a checkpoint (its relations as Parquet files, a new manifest and
        an empty journal) instead once the journal would grow past this many bytes.
        Reopening replays the journal, so this bounds the replay's reading.
    journal_ticks : int
        A durable view writes a checkpoint once its journal holds this many ticks
        (bounds the replay's work when ticks are small); 0 checkpoints every tick.
    lease_seconds : float
        A durable view records a journaled tick in its lease file (who holds the
        folder, its last commit) at most once per this many seconds; every
        checkpoint is recorded.  0 records every tick.
    progress_seconds : float
        While progress is shown (the ``"faq"`` logger enabled for INFO:
        :func:`faq.session.show_progress`, ``sparkfaq --progress``), a running step logs a
        line this often: how long it has run, and the tasks done out of the tasks of its
        Spark stages, the tasks running and the rows read (:mod:`faq.progress`).  0: only
        the line at the end of each step.
    library_runners : bool
        Whether a step may be run by a library runner (:mod:`faq.plan.runners`: a
        GraphBLAS product or masked product, BLAS on dense factors) when the planner
        estimates it cheaper than the Generic Join kernel.  False: the Generic Join
        kernel runs every step (the same answers).
    path_walks : bool
        Whether a maintained path program (``D(y) :- D(x), E(x, y)`` over min-plus,
        max-plus or max-product, edge values that make no path better) takes its ticks
        as two compiled graph walks (:mod:`incremental.linear_dred`).  False: its delta
        queries run round by round, as for any other program (the same answers).
    dense_fraction : float
        A factor is dense, for the ``blas`` runner, when it holds at least this fraction
        of the cells of its variables' key domains (more than 0, at most 1).
    dense_cells : int
        The most cells of one dense array (a factor's or a step's output) the ``blas``
        runner builds (8 bytes each).
    spark_adaptive : bool
        Whether a query over relations kept in Spark runs with Spark's adaptive query
        execution.  Off by default: the engine chooses its partitions itself (one per
        cell of a partitioned step), and adaptive execution would run every shuffle as
        a Spark job of its own (a one-bag query: 4 jobs instead of 2).  The session's
        own setting is restored when the query ends.
    """

    local_rows: int = 20_000_000
    local_bytes: int = 512 * 2**20
    footer_files: int = 256
    task_work: int = 8_000_000
    thread_work: int = 1_000_000
    task_slices: int = 2
    skew_factor: float = 8
    cell_rows: int = 16_000_000
    program_task_rows: int = 16_000_000
    query_task_rows: int = 16_000_000
    cell_min_rows: int = 500_000
    max_cell_waves: int = 4
    broadcast_rows: int = 2_000_000
    connect_payload: int = 96 * 2**20
    local_delta_rows: int = 100_000
    delta_thread_rows: int = 768
    gil_rows: int = 64
    max_fetch_rows: int = 2_000_000
    max_literals: int = 200_000
    log_rows: int = 50_000
    log_fraction: float = 0.05
    log_ticks: int = 64
    rows_per_partition: int = 1_000_000
    filter_values: int = 1_000
    gc_ticks: int = 10
    max_rounds: int = 1000
    journal_bytes: int = 64 * 2**20
    journal_ticks: int = 2000
    lease_seconds: float = 1.0
    progress_seconds: float = 5.0
    library_runners: bool = True
    path_walks: bool = True
    dense_fraction: float = 0.5
    dense_cells: int = 1 << 26
    spark_adaptive: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" or f.type is bool:
                if not isinstance(v, bool):
                    raise ValueError(f"setting {f.name!r} must be True or False, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
                raise ValueError(f"setting {f.name!r} must be a non-negative number, got {v!r}")
        if self.gc_ticks < 1:
            raise ValueError(f"setting 'gc_ticks' must be at least 1, got {self.gc_ticks}")
        if self.max_cell_waves < 1:
            raise ValueError(
                f"setting 'max_cell_waves' must be at least 1, got {self.max_cell_waves}"
            )
        if not 0 < self.dense_fraction <= 1:
            raise ValueError(
                f"setting 'dense_fraction' must be more than 0 and at most 1, "
                f"got {self.dense_fraction}"
            )
        if self.max_rounds < 1:
            raise ValueError(f"setting 'max_rounds' must be at least 1, got {self.max_rounds}")

    def changed(self) -> dict[str, Any]:
        """The fields whose value differs from the default: ``{name: value}``."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(DEFAULTS, f.name)
        }

    def describe(self, names: tuple[str, ...] = ()) -> str:
        """``name=value`` for the given fields and every changed one, comma-separated."""
        shown = dict.fromkeys(names)
        shown.update(dict.fromkeys(self.changed()))
        return ", ".join(f"{n}={_shown(getattr(self, n))}" for n in shown)


DEFAULTS = Settings()
"""The defaults (what a fresh session, and every new thread, uses)."""

_current: ContextVar[Settings] = ContextVar("faq_settings", default=DEFAULTS)
"""The settings in force in this thread or task (:data:`DEFAULTS` where none were set)."""


def current() -> Settings:
    """The settings in force in the calling thread (or asyncio task)."""
    return _current.get()


class SettingsScope:
    """The settings in force after a call to :func:`settings`; a ``with`` block restores them.

    Reads through to the :class:`Settings` (``faq.settings().local_rows``).
    """

    def __init__(self, previous: Settings, now: Settings) -> None:
        self._previous = previous
        self.settings = now

    def __getattr__(self, name: str) -> Any:
        return getattr(self.settings, name)

    def __enter__(self) -> Settings:
        return self.settings

    def __exit__(self, *exc: object) -> None:
        _current.set(self._previous)

    def __repr__(self) -> str:
        return repr(self.settings)


def settings(**changes: Any) -> SettingsScope:
    """Change the engine's thresholds in the calling thread, for a ``with`` block or after.

    Called alone, the change holds in the calling thread (or asyncio task) until changed
    again; in a ``with`` block, until the block ends.  Other threads never see it, and a
    new thread starts from :data:`DEFAULTS` (see the module docstring).

    Parameters
    ----------
    **changes
        Fields of :class:`Settings` and their new values; with none, the
        settings in force are returned unchanged.

    Returns
    -------
    SettingsScope
        Reads as the new settings; used as a context manager, the previous
        settings (of this thread) come back at the end of the block.

    Raises
    ------
    TypeError
        A name that is not a setting (the message lists the valid ones).
    ValueError
        A value that is not a non-negative number (``spark_adaptive``: not a bool).

    Examples
    --------
    >>> import faq
    >>> with faq.settings(local_rows=0, task_work=10**9):
    ...     faq.settings().local_rows
    0
    """
    previous = _current.get()
    if not changes:  # a read (every tick makes one): nothing to check or replace
        return SettingsScope(previous, previous)
    valid = {f.name for f in fields(Settings)}
    unknown = sorted(set(changes) - valid)
    if unknown:
        raise TypeError(
            f"unknown setting(s) {', '.join(map(repr, unknown))}; valid settings: "
            f"{', '.join(sorted(valid))}"
        )
    now = replace(previous, **changes)
    _current.set(now)
    return SettingsScope(previous, now)


def _shown(v: Any) -> str:
    if isinstance(v, int) and v >= 10_000:
        return f"{v:_}"
    return repr(v)
