"""Physical choices, all in one place: where each step runs, how it joins, in what order.

The planner (:mod:`faq.plan.logical`) fixes *what* each InsideOut step computes;
this module decides *how*, from statistics only (no Spark job):

* **backend**: a step whose inputs are local, or fit in the driver
  (the ``local_rows`` setting, :mod:`faq.plan.settings`), runs on the local kernel
  (:mod:`faq.kernel`): in the driver when its estimated work is small, else
  inside ``T`` Spark tasks that share the index and split the candidates
  (``task_work``).  Larger steps are partitioned over the cluster: one
  HyperCube shuffle, the same kernel in every cell (shares by
  :func:`faq.plan.shares.choose_shares` under the ``cell_rows`` budget, the cells
  capped by the rows and by ``max_cell_waves`` waves of the cluster's task slots);
* **join method**: the local kernel joins every bag by Generic Join (for
  two relations that is a merge join; eliminated variables bound last are
  ⊕-folded as they are found), in the driver, in tasks or in cells; a Spark
  step runs binary DataFrame joins instead when ``join="binary"``, or, under
  ``join="auto"``, when its bag is cyclic and its cheapest pairwise join is
  known to be small (no skew to beat: ``skew_factor``);
* **the delta rule's placement** (:func:`faq.solve_delta`): in the driver for
  changes of at most ``local_delta_rows`` rows (:func:`delta_in_driver`); past it, in
  one Spark task when the rows the changes reach fit one (``cell_rows``, at most
  ``max_literals`` values looked for: :func:`delta_in_one_task`), else as Spark
  queries;
* **a recursive group's fixpoint** (:func:`fixpoint_in_spark`): partitioned in Spark
  when the inputs its rounds join are kept there (past ``local_rows``) or
  ``backend="spark"``, else the state and every round's ⊕-merge in the driver;
* **binding order** of Generic Join (:func:`binding_order`) and **join
  order** of binary joins (:func:`join_order`).

A choice is a :class:`Choice`; :func:`choose` makes one for a step from what
is known of its inputs (:class:`InputInfo`), before the run (``explain``) or
as it goes (the executor, with actual sizes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from faq.plan import runners
from faq.plan.logical import Step
from faq.plan.reach import bounds
from faq.plan.settings import Settings, current
from faq.plan.shares import Shares, choose_shares
from faq.rule import Rule
from semirings.core import Semiring

__all__ = [
    "BACKENDS",
    "Backend",
    "backend_policy",
    "JOIN_METHODS",
    "Choice",
    "InputInfo",
    "binding_order",
    "check_options",
    "choose",
    "choose_runner",
    "delta_in_driver",
    "keyed_runners",
    "delta_in_one_task",
    "fixpoint_in_spark",
    "join_order",
    "in_one_task",
]


JOIN_METHODS = ("auto", "binary", "wcoj")
"""``solve(join=...)``: by the bag's shape and skew, or forced."""

BACKENDS = ("auto", "driver", "tasks", "spark")
"""``solve(backend=...)``: by size, or forced: the local kernel in the driver, the local
kernel inside Spark tasks, or Spark DataFrame operations (shuffles)."""


@dataclass(frozen=True)
class Backend:
    """What a ``backend=`` option asks of the engine besides each step's placement
    (:func:`choose`), looked up by name (:func:`backend_policy`) so that no caller compares it.

    Attributes
    ----------
    name : str
        One of :data:`BACKENDS`.
    collects : bool
        Relations given as Spark DataFrames may be read into the driver when they fit
        (all but ``"spark"``, which keeps them where they are and runs every step over
        Spark).
    by_size : bool
        The planner places each step by sizes (``"auto"``): a relation read by several
        atoms counts once per atom against ``local_rows``.
    needs_session : bool
        Steps run as Spark tasks or jobs whatever the sizes (``"tasks"``, ``"spark"``):
        a command line run starts Spark even for inputs that fit in the driver.
    """

    name: str
    collects: bool
    by_size: bool
    needs_session: bool


_BACKENDS = {
    b.name: b
    for b in (
        Backend("auto", collects=True, by_size=True, needs_session=False),
        Backend("driver", collects=True, by_size=False, needs_session=False),
        Backend("tasks", collects=True, by_size=False, needs_session=True),
        Backend("spark", collects=False, by_size=False, needs_session=True),
    )
}


def backend_policy(name: str) -> Backend:
    """The :class:`Backend` named ``name``; ValueError listing the valid ones otherwise."""
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    return _BACKENDS[name]


@dataclass(frozen=True)
class InputInfo:
    """What the physical layer knows of one input of a step."""

    vars: tuple[str, ...]
    rows: float
    local: bool
    distinct: dict[str, float]
    top: Mapping[str, tuple[tuple[Any, int], ...]] = field(default_factory=dict)
    """Per variable, when known, its most frequent values and their (approximate) rows."""


@dataclass(frozen=True)
class Choice:
    """How one step runs.

    ``backend`` is ``"driver"``, ``"tasks"`` or ``"spark"``; ``method``
    ``"wcoj"`` or ``"binary"``; ``order`` the binding order (``"wcoj"``) over
    the bag's variables; ``tasks`` the number of slices (``"tasks"``) or of
    driver threads (``"driver"``);
    ``pair_rows`` the cheapest pairwise join of the bag's atoms (exact, from
    the statistics) when known; ``why`` says what decided; ``shares`` the cells of
    a step partitioned over the cluster (``"spark"`` and ``"wcoj"``: one HyperCube
    shuffle, the kernel in every cell, :mod:`faq.spark.partitioned`).  ``runner`` is the
    kernel runner of a ``"wcoj"`` step (:mod:`faq.plan.runners`: ``generic-join``,
    ``graphblas-mxm``, ``graphblas-masked``, ``blas``), looked up by name wherever the
    step runs (:func:`faq.kernel.runners.run`); ``shape`` how a library runner reads the
    bag; ``runner_why`` why that runner (the estimates compared).
    """

    backend: str
    method: str
    order: tuple[str, ...]
    tasks: int = 1
    work: float = 0.0
    pair_rows: float | None = None
    why: str = ""
    shares: Shares | None = None
    runner: str = runners.GENERIC_JOIN
    shape: Any = None
    runner_why: str = ""

    @property
    def placement(self) -> str:
        """Where the step's runner runs: ``driver``, ``tasks``, ``cells`` (partitioned over
        the cluster) or ``spark`` (Spark DataFrame joins)."""
        if self.backend == "spark":
            return "cells" if self.shares is not None else "spark"
        return self.backend

    @property
    def in_spark(self) -> bool:
        """Whether the step runs over Spark (cells or DataFrame joins), its output a
        DataFrame; otherwise it runs in the driver or in tasks, its output a local table."""
        return self.backend == "spark"

    @property
    def threads(self) -> int:
        """The driver's threads the step runs on (1 unless it runs in the driver)."""
        return self.tasks if self.placement == "driver" else 1

    @property
    def runs(self) -> str:
        """The runner and its placement, as ``explain()`` names them: ``driver/blas``,
        ``driver/graphblas-mxm``, ``cells/generic-join``, ``driver/binary-join``,
        ``spark/binary-join``..."""
        name = "binary-join" if self.method == "binary" else self.runner
        return f"{self.placement}/{name}"

    @property
    def one_cell(self) -> bool:
        """Partitioned into one cell: a small step, read where its inputs are and run
        with the one-cell steps next to it in one task (:mod:`faq.spark.fused`)."""
        return self.shares is not None and self.shares.total == 1


def check_options(join: str, backend: str) -> None:
    """ValueError for an unknown join method or backend, listing the valid ones."""
    if join not in JOIN_METHODS:
        raise ValueError(f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}")
    backend_policy(backend)


def choose(
    step: Step,
    inputs: Sequence[InputInfo],
    *,
    join: str = "auto",
    backend: str = "auto",
    pair_rows: float | None = None,
    parallelism: int = 1,
    driver_cores: int = 1,
    settings: Settings | None = None,
    semiring: Semiring | None = None,
) -> Choice:
    """The physical choice for ``step`` given its ``inputs`` (in ``step.factors`` order).

    ``parallelism`` is the cluster's (Spark's default parallelism) and
    ``driver_cores`` the driver's own; in local mode they are the same cores,
    and the driver's threads do the parallel work without a Spark job.  The thresholds
    are ``settings`` (by default those in force, :func:`faq.settings`); ``why`` names
    the ones that decided, with their values.  With the step's ``semiring``, a step the
    kernel joins in the driver or in cells gets the runner :func:`choose_runner` ranks
    first; without it, the Generic Join kernel.
    """
    st = settings or current()
    LOCAL_ROWS, TASK_WORK = st.local_rows, st.task_work
    rows = sum(i.rows for i in inputs)
    cyclic = step.cyclic and len(inputs) > 1
    fits = all(i.local or i.rows <= LOCAL_ROWS for i in inputs) and rows <= LOCAL_ROWS
    work = _work(step, pair_rows)
    if backend == "spark" or (backend == "auto" and not fits):
        where = "spark"
        why = (
            "forced"
            if backend == "spark"
            else f"inputs hold {rows:,.0f} rows > local_rows={LOCAL_ROWS:,}"
        )
    elif backend in ("driver", "tasks"):
        where, why = backend, "forced"
    elif work >= TASK_WORK and parallelism > driver_cores:
        where = "tasks"
        why = (
            f"estimated work {work:,.0f} rows ≥ task_work={TASK_WORK:,}; "
            f"{parallelism} cluster cores"
        )
    else:
        where = "driver"
        why = f"inputs fit ({rows:,.0f} rows ≤ local_rows={LOCAL_ROWS:,}), estimated work "
        if work < TASK_WORK:
            why += f"{work:,.0f} < task_work={TASK_WORK:,}"
        else:
            why += (
                f"{work:,.0f} ≥ task_work={TASK_WORK:,}, but no more cluster cores "
                f"({parallelism}) than the driver"
            )
    method = _method(cyclic, join, where, pair_rows, rows, st.skew_factor)
    if method == "binary" and where == "spark" and join == "auto" and cyclic:
        why += (
            f"; cheapest pairwise join {pair_rows:,.0f} rows ≤ skew_factor={st.skew_factor:g}"
            " × inputs: no skew"
        )
    order = binding_order(inputs, _distinct(inputs), keep=step.output.vars, join=step.est_join)
    if where == "tasks":
        tasks = max(1, parallelism * st.task_slices)
    elif where == "driver" and method == "wcoj" and work >= st.thread_work:
        tasks = max(1, driver_cores)
    else:
        tasks = 1
    shares = None
    if where == "spark" and method == "wcoj" and len(inputs) > 1:
        shares = choose_shares(
            [(i.vars, i.rows) for i in inputs],
            step.output.vars,
            parallelism * st.task_slices,
            st.cell_rows,
            top=[i.top for i in inputs],
            min_rows=st.cell_min_rows,
            cores=parallelism,
            waves=st.max_cell_waves,
        )
        tasks = shares.total
    choice = Choice(where, method, tuple(order), tasks, work, pair_rows, why, shares)
    # the driver's kernel, or every cell's (a one-cell step runs fused with its
    # neighbours, by the Generic Join kernel: faq.spark.fused)
    kernel_joins = where == "driver" or (shares is not None and shares.total > 1)
    if semiring is not None and method == "wcoj" and len(inputs) > 1 and kernel_joins:
        choice = choose_runner(choice, step, inputs, semiring, st)
    return choice


def choose_runner(
    choice: Choice,
    step: Step,
    inputs: Sequence[InputInfo],
    semiring: Semiring,
    settings: Settings,
) -> Choice:
    """``choice`` with the runner of its step: the cheapest of :func:`faq.plan.runners.ranked`
    by estimated CPU seconds, the Generic Join kernel when none is cheaper (or the
    ``library_runners`` setting is off).  A partitioned step's cells take the GraphBLAS
    runners but not ``blas`` (a cell holds a slice of each key domain, not dense blocks).
    """
    if not settings.library_runners:
        return replace(choice, runner_why="library_runners=False")
    keep = step.output.vars
    ranking = runners.ranked(
        inputs,
        keep,
        semiring,
        work=choice.work,
        pair_rows=choice.pair_rows,
        density=settings.dense_fraction,
        cells=settings.dense_cells,
    )
    if choice.shares is not None:
        ranking = [r for r in ranking if r[0] != runners.BLAS]
    best, seconds, _ = ranking[0]
    if best == runners.GENERIC_JOIN or seconds == float("inf"):
        return choice
    gj = next(s for n, s, _ in ranking if n == runners.GENERIC_JOIN)
    bag = [tuple(i.vars) for i in inputs]
    shape = runners.shape_of(best, bag, keep)
    why = f"estimated {seconds:.2g} s < generic-join {gj:.2g} s"
    return replace(choice, runner=best, shape=shape, runner_why=why)


def _work(step: Step, pair_rows: float | None) -> float:
    """Estimated candidate rows of a step: its cheapest pairwise join when known."""
    if pair_rows is not None:
        return float(pair_rows)
    return float(step.est_join)


def _method(
    cyclic: bool, join: str, where: str, pair_rows: float | None, rows: float, skew: float
) -> str:
    if join == "binary":
        return "binary"
    if where != "spark" or join == "wcoj":
        return "wcoj"  # the local kernel joins any bag in one pass, folding as it goes
    if cyclic and pair_rows is not None and pair_rows <= skew * max(rows, 1.0):
        return "binary"  # known small pairwise joins (local atoms): no skew to beat
    return "wcoj"  # partitioned: one HyperCube shuffle, the kernel in every cell


def _distinct(inputs: Sequence[InputInfo]) -> dict[str, float]:
    dist: dict[str, float] = {}
    for f in inputs:
        for v in f.vars:
            d = f.distinct.get(v, f.rows)
            dist[v] = min(dist.get(v, d), d)
    return dist


def binding_order(
    inputs: Sequence[InputInfo],
    distinct: dict[str, float] | None = None,
    bound: Sequence[str] = (),
    keep: Sequence[str] | None = None,
    join: float | None = None,
) -> list[str]:
    """Binding order for Generic Join, from distinct counts.

    Start with the variable of fewest distinct values; then repeatedly bind the
    variable that the most relations already constrain (they intersect), ties
    broken by fewer distinct values.  Connected variables come before
    unconnected ones, so prefixes never grow by a Cartesian product when a
    join exists.  Variables in ``bound`` come first, in their given order.

    When the step keeps the variables ``keep``, binding them first lets the
    eliminated ones, bound last, be ⊕-folded into each prefix as they are
    found, with no sort of the join; that order is taken when its estimated
    candidates (the kept variables' combinations times the fewest candidates
    a relation offers each) are at most twice the step's estimated ``join``
    (a dense product: yes; a sparse one whose kept variables rarely meet: no).
    """
    vars_: list[str] = []
    for f in inputs:
        vars_ += [v for v in f.vars if v not in vars_]
    dist = dict(distinct or {})
    for v in vars_:
        dist.setdefault(v, min((f.rows for f in inputs if v in f.vars), default=0.0))
    order = [v for v in bound if v in vars_]

    def score(v: str, done: set[str]) -> tuple[int, float, int]:
        constrained = sum(1 for f in inputs if v in f.vars and done & set(f.vars))
        return (-constrained, dist[v], vars_.index(v))

    def extend(among: list[str]) -> None:
        while any(v not in order for v in among):
            done = set(order)
            order.append(min((v for v in among if v not in done), key=lambda v: score(v, done)))

    kept = [v for v in vars_ if keep is not None and v in keep]
    partial = kept and len(kept) < len(vars_) and join is not None
    if partial and _fold_work(inputs, dist, kept) <= 2 * max(join or 0.0, 1.0):
        extend(kept)
    extend(vars_)
    return order


def _fold_work(inputs: Sequence[InputInfo], dist: dict[str, float], kept: list[str]) -> float:
    """Estimated candidates when ``kept`` is bound first: their combinations times, for
    each other variable, the fewest candidates one of its relations offers a prefix."""
    work = 1.0
    for v in kept:
        work *= max(dist[v], 1.0)
    for v in {u for f in inputs for u in f.vars} - set(kept):
        offers = []
        for f in inputs:
            if v in f.vars:
                known = 1.0
                for u in f.vars:
                    if u in kept:
                        known *= max(f.distinct.get(u, dist[u]), 1.0)
                offers.append(max(f.rows, 1.0) / known)
        work *= min(offers)
    return work


def join_order(inputs: Sequence[InputInfo], start: int | None = None) -> list[int]:
    """Indices of ``inputs`` in the order binary joins take them: ``start`` or the
    smallest first, then repeatedly the smallest that shares a variable with those
    joined so far (a Cartesian product only when none does)."""
    pending = sorted(range(len(inputs)), key=lambda i: (inputs[i].rows, i))
    first = pending.index(start) if start is not None else 0
    order = [pending.pop(first)]
    vars_ = set(inputs[order[0]].vars)
    while pending:
        sharing = [i for i in pending if set(inputs[i].vars) & vars_]
        nxt = sharing[0] if sharing else pending[0]
        pending.remove(nxt)
        order.append(nxt)
        vars_ |= set(inputs[nxt].vars)
    return order


# -- the delta rule --------------------------------------------------------------------------
def delta_in_driver(
    rows: int, local: bool, st: Settings | None = None, *, held: bool = False
) -> tuple[bool, str]:
    """Whether the delta rule tries the driver first, for changes of at most ``rows``
    rows (``local=False`` refuses it), and why: the ``local_delta_rows`` setting, or,
    where every relation and change is ``held`` in the driver already (a view's state in
    the driver, a fixpoint's rounds), ``local_rows``: Spark would first have to be sent
    them all."""
    st = st or current()
    most = st.local_delta_rows
    if not local:
        return False, "local=False"
    if rows > most and held and rows <= st.local_rows:
        return True, (
            f"a change holds {rows:,} rows > local_delta_rows={most:,}, but every relation "
            f"and change is in the driver (≤ local_rows={st.local_rows:,})"
        )
    if rows > most:
        return False, f"a change holds {rows:,} rows > local_delta_rows={most:,}"
    return True, f"changes hold ≤ {rows:,} rows ≤ local_delta_rows={most:,}"


def keyed_runners(order: Any, join: str, atoms: Sequence[Any]) -> bool:
    """Whether a delta step over relations held as keyed tables in the driver may run on the
    runners made for them (:func:`faq.kernel.paired.keyed_delta`,
    :func:`faq.kernel.paired.paired_at`): the planner left to choose (``order`` "auto",
    ``join`` not "binary") and no constant in an atom (those runners read columns by
    position).  Where the step runs is :func:`delta_in_driver`'s to say."""
    return order == "auto" and join != "binary" and not any(a.consts for a in atoms)


def delta_in_one_task(literals: int, rows: float, st: Settings | None = None) -> str:
    """Why a delta rule past the driver runs in one Spark task, or "" when it does not:
    its scans look for at most ``max_literals`` values (``literals``) and read about
    ``rows`` rows, at most ``cell_rows``."""
    st = st or current()
    if bounds(st).literals_over(literals, "values") or rows > st.cell_rows:
        return ""
    return f"one Spark task: the changes reach ~{int(rows):,} rows ≤ cell_rows={st.cell_rows:,}"


def in_one_task(
    limit: str,
    rules: Sequence[Rule],
    spark_rows: Mapping[str, int | None],
    key_types: Sequence[str],
    backend: str,
    witness: bool,
    st: Settings | None = None,
) -> tuple[bool, str]:
    """Whether a whole solve runs inside one Spark task, and why: a recursive program
    (``limit="program_task_rows"``, :mod:`faq.program_task`) or a query (``rules`` its one
    rule, ``limit="query_task_rows"``, :mod:`faq.query_task`).

    ``spark_rows`` are the rows of each input kept in Spark (None: not known without a
    job), ``key_types`` the Spark types of every input's key columns.  Past
    ``local_rows`` the inputs stay out of the driver; when they hold at most the setting
    ``limit``'s rows in all, one Spark job gathers them into one task, which runs the
    solve on the driver's kernel and returns the answer's rows to Spark, where a
    partitioned round costs a few Spark jobs and a partitioned step a statistics job and
    a shuffle (but has the cluster's cores, where the task has one executor's).  It
    needs ``backend="auto"``, no witnesses, no constant in an atom and one key type.
    """
    st = st or current()
    most = getattr(st, limit)
    where = "not in one Spark task"
    if backend != "auto":
        return False, f"{where}: backend={backend!r}"
    if not spark_rows:
        return False, f"{where}: every input fits in the driver (local_rows)"
    if witness:
        return False, f"{where}: witnesses are found from a state in the driver"
    if any(a.consts for r in rules for a in r.atoms):
        return False, f"{where}: an atom has constants"
    if len(set(key_types)) > 1:
        return False, f"{where}: key columns of several types ({', '.join(sorted(set(key_types)))})"
    if any(n is None for n in spark_rows.values()):
        return False, f"{where}: the rows of an input kept in Spark are not known"
    rows = sum(n or 0 for n in spark_rows.values())
    if most == 0:
        return False, f"{where}: {limit}=0"
    if rows > most:
        return False, f"{where}: inputs kept in Spark hold {rows:,} rows > {limit}={most:,}"
    held = f"the inputs kept in Spark hold {rows:,} rows"
    return True, f"in one Spark task: {held} ≤ {limit}={most:,}"


def fixpoint_in_spark(
    S: Semiring,
    rules: Sequence[Rule],
    group: Sequence[str],
    spark_inputs: Sequence[str],
    backend: str,
    witness: bool,
) -> tuple[bool, str]:
    """Whether a recursive group's fixpoint runs partitioned in Spark, and why.

    ``rules`` are the group's recursive rules, ``group`` its
    relations and ``spark_inputs`` the input relations those rules read that are kept
    in Spark (past ``local_rows``).  In Spark (:mod:`faq.spark.fixpoint`) the state and
    every round's change stay there: each input is partitioned once by the variables
    it shares with the recursive atom, and each round joins only Δ with it.  That
    needs ``backend="spark"`` or an input kept in Spark (``backend="auto"``), a
    semiring with native Spark operations, linear rules (one atom of the group per
    body) without constants, and no witnesses (found from a state in the driver).
    """
    names = set(group)
    where = "in the driver"
    if backend not in ("auto", "spark"):
        return False, f"{where}: backend={backend!r}"
    if backend == "auto" and not spark_inputs:
        return False, f"{where}: every input its rounds join fits in the driver (local_rows)"
    if witness:
        return False, f"{where}: witnesses are found from a state in the driver"
    if S.spark is None:
        return False, f"{where}: {S.name!r} has no native Spark operations (Python UDFs)"
    if S.spark.agg is None:
        return False, f"{where}: {S.name!r} ⊕ is no single Spark aggregate"
    for r in rules:
        inner = [a for a in r.atoms if a.relation in names]
        if len(inner) != 1:
            return False, f"{where}: rule {r} reads {len(inner)} atoms of its group (not linear)"
        if any(a.consts for a in r.atoms):
            return False, f"{where}: rule {r} has constants in its atoms"
        if len(set(r.head)) != len(r.head):
            return False, f"{where}: rule {r} repeats a head variable"
    why = (
        "backend='spark'"
        if backend == "spark"
        else f"inputs kept in Spark: {', '.join(spark_inputs)}"
    )
    return True, f"partitioned in Spark ({why})"
