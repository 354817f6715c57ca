"""One Settings object decides every physical choice; a run is a record, never query state."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading

import numpy as np
import pytest

import faq
from faq import Factor, query, solve_delta
from faq.executor import Data, Executor, Options
from faq.kernel import KeyedTable, Table
from faq.plan.settings import DEFAULTS, Settings, current
from semirings.local import local_ops

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"


def clique(n: int) -> Factor:
    return Factor.from_numpy(np.triu(np.ones((n, n), dtype=np.int64), 1), vars=("a", "b"))


def test_settings_change_for_a_block_and_come_back():
    before = faq.settings()
    assert before.local_rows == DEFAULTS.local_rows == 20_000_000
    with faq.settings(local_rows=5, task_work=7) as s:
        assert isinstance(s, Settings) and (s.local_rows, s.task_work) == (5, 7)
        assert current().local_rows == 5
        with faq.settings(local_rows=0):
            assert current().local_rows == 0 and current().task_work == 7
        assert current().local_rows == 5
    assert current() == DEFAULTS
    assert faq.settings().changed() == {}


def test_settings_for_the_session_until_changed_back():
    faq.settings(broadcast_rows=10)  # no with: stays in force
    try:
        assert current().broadcast_rows == 10
        assert current().changed() == {"broadcast_rows": 10}
        assert current().describe(("local_rows",)) == "local_rows=20_000_000, broadcast_rows=10"
    finally:
        faq.settings(broadcast_rows=DEFAULTS.broadcast_rows)
    assert current() == DEFAULTS


def test_bad_settings_are_refused_and_nothing_changes():
    with pytest.raises(TypeError, match=r"unknown setting\(s\) 'local_row'.*valid settings:.*"):
        faq.settings(local_row=0)
    with pytest.raises(ValueError, match="setting 'task_work' must be a non-negative number"):
        faq.settings(task_work=-1)
    with pytest.raises(ValueError, match="setting 'local_rows' must be a non-negative"):
        faq.settings(local_rows="big")
    with pytest.raises(ValueError, match="'max_rounds' must be at least 1"):
        faq.settings(max_rounds=0)
    with pytest.raises(ValueError, match="setting 'spark_adaptive' must be True or False"):
        faq.settings(spark_adaptive=1)
    assert current() == DEFAULTS


def test_local_rows_zero_moves_every_step_to_spark_and_explain_says_why(spark):
    q = query(TRIANGLE, semiring="counting")
    E = clique(5)
    with faq.settings(local_rows=0, query_task_rows=0):  # steps, not one task (test_query_task)
        run = q.run(E=E)
    assert run.result.scalar() == 10
    assert [s.choice.backend for s in run.trace.steps] == ["spark"]
    assert "> local_rows=0" in run.trace.steps[0].choice.why
    text = q.explain(run)
    assert text.splitlines()[1].startswith("settings: local_rows=0, task_work=8_000_000")
    # the same query with the defaults runs in the driver, and says which threshold allowed it
    run = q.run(E=E)
    assert [s.choice.backend for s in run.trace.steps] == ["driver"]
    assert "≤ local_rows=20,000,000" in run.trace.steps[0].choice.why
    assert run.settings == DEFAULTS


def test_task_work_decides_between_the_driver_and_tasks():
    from faq.plan.physical import InputInfo, choose

    q = query(TRIANGLE, semiring="counting")
    (step,) = q.plan(E=clique(6)).steps
    infos = [InputInfo(f.vars, f.rows, True, f.distinct) for f in step.factors]
    small = choose(step, infos, parallelism=4, driver_cores=1)
    assert small.backend == "driver" and "< task_work=8,000,000" in small.why
    with faq.settings(task_work=0):  # the settings in force by default
        forced = choose(step, infos, parallelism=4, driver_cores=1)
    assert forced.backend == "tasks" and "≥ task_work=0" in forced.why
    assert forced.tasks == 4 * DEFAULTS.task_slices
    given = choose(step, infos, parallelism=4, driver_cores=4, settings=Settings(task_work=0))
    assert given.backend == "driver" and "no more cluster cores (4) than the driver" in given.why


def test_a_run_is_a_record_and_the_query_keeps_nothing(spark):
    q = query(TRIANGLE, semiring="counting")
    E4, E5 = clique(4), clique(5)
    r4, r5 = q.run(E=E4), q.run(E=E5)
    assert (r4.result.scalar(), r5.result.scalar()) == (4, 10)
    assert q.solve(E=E4).scalar() == 4
    # each report is its own run's, whatever ran since (no cache keyed by object ids)
    assert "actual   output 1 rows" in q.explain(r4) and q.explain(r4) == r4.explain()
    assert r4.plan.atoms[0].rows == 6 and r5.plan.atoms[0].rows == 10
    # explain without a run plans afresh: estimates only
    assert "actual   output" not in q.explain(E=E4)
    assert not [a for a in vars(q) if a.startswith("last") or a == "_renamed"]
    with pytest.raises(TypeError, match="the first argument is a Run"):
        q.explain(E4)


def test_runs_in_threads_do_not_share_state(spark):
    q = query(TRIANGLE, semiring="counting")
    sizes = [4, 5, 6, 7]
    out: dict[int, int] = {}

    def go(n: int) -> None:
        run = q.run(E=clique(n))
        out[n] = run.plan.atoms[0].rows

    threads = [threading.Thread(target=go, args=(n,)) for n in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {n: n * (n - 1) // 2 for n in sizes}


def test_settings_belong_to_the_thread_that_set_them():
    """Two threads in different ``with faq.settings(...)`` blocks at the same time each
    read their own, and so do the planner's choices made in them; a thread with no
    block reads the defaults, whatever the others (and the main thread) set."""
    from faq.plan.physical import InputInfo, choose

    (step,) = query(TRIANGLE, semiring="counting").plan(E=clique(6)).steps
    infos = [InputInfo(f.vars, f.rows, True, f.distinct) for f in step.factors]
    inside = threading.Barrier(3)  # all three threads are in their blocks...
    done = threading.Barrier(3)  # ...until all three have read
    seen: dict[str, tuple[int, int, str]] = {}

    def go(name: str, **changes: int) -> None:
        with faq.settings(**changes) if changes else contextlib.nullcontext():
            inside.wait(timeout=30)
            c = choose(step, infos, parallelism=4, driver_cores=1)
            seen[name] = (current().local_rows, current().task_work, c.backend)
            done.wait(timeout=30)

    with faq.settings(local_rows=3):  # the main thread's block: no other thread's
        threads = [
            threading.Thread(target=go, args=("a",), kwargs={"local_rows": 1000, "task_work": 0}),
            threading.Thread(target=go, args=("b",), kwargs={"local_rows": 2}),
            threading.Thread(target=go, args=("none",)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert current().local_rows == 3
    assert seen == {
        "a": (1000, 0, "tasks"),  # fits, and any work is enough for tasks
        "b": (2, DEFAULTS.task_work, "spark"),  # does not fit
        "none": (DEFAULTS.local_rows, DEFAULTS.task_work, "driver"),
    }
    assert current() == DEFAULTS


def test_a_new_thread_starts_from_the_defaults_or_from_a_copied_context():
    """Settings changed without ``with`` hold in the thread that changed them; a new
    thread starts from the defaults, one started in a copy of the context from its
    settings, and what a thread changes stays in it."""
    seen: list[int] = []

    def read_and_change() -> None:
        seen.append(current().broadcast_rows)
        faq.settings(broadcast_rows=99)  # no with: this thread's, until it ends

    faq.settings(broadcast_rows=10)
    try:
        t = threading.Thread(target=read_and_change)
        t.start()
        t.join()
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(read_and_change,))
        t.start()
        t.join()
        assert seen == [DEFAULTS.broadcast_rows, 10]
        assert current().broadcast_rows == 10  # neither thread's change is seen here
        assert ctx.run(current).broadcast_rows == 99  # the copy kept the thread's change
    finally:
        faq.settings(broadcast_rows=DEFAULTS.broadcast_rows)
    assert current() == DEFAULTS


def test_an_executor_is_built_with_its_options_and_keeps_its_settings():
    """An executor's options are one frozen record given when it is built, and every
    choice it makes reads the settings in force then (or those its options name), however
    long it lives."""
    q = query(TRIANGLE, semiring="counting")
    E = clique(6)
    plan = q.plan(E=E)
    t = E.local_table()
    atoms = [Data(f.vars, t.rows, table=Table(f.vars, t.cols, t.values)) for f in plan.atoms]
    wide = Options(parallelism=(os.cpu_count() or 1) + 1)  # more cores than the driver's
    with faq.settings(task_work=0):
        ex = Executor(q.semiring, None, wide)
    assert ex.settings.task_work == 0 and current() == DEFAULTS
    assert [c.backend for c in ex.choices(plan, atoms, None)] == ["tasks"]
    assert [c.backend for c in Executor(q.semiring, None, wide).choices(plan, atoms, None)] == [
        "driver"
    ]
    named = dataclasses.replace(wide, settings=Settings(local_rows=0))
    assert [c.backend for c in Executor(q.semiring, None, named).choices(plan, atoms, None)] == [
        "spark"
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ex.options.defer_last = True  # type: ignore[misc]


def test_delta_placement_reads_local_delta_rows(spark):
    q = query("Q(a) :- A(a, b), B(b)", semiring="integer")
    A = Factor.from_dict({(0, 1): 1, (1, 2): 1}, vars=("a", "b"), semiring="integer")
    B = Factor.from_dict({(1,): 1}, vars=("b",), semiring="integer")
    dB = Factor.from_dict({(2,): 1}, vars=("b",), semiring="integer")
    res = solve_delta(q, {"A": A, "B": B}, {"B": dB})
    assert res.where == "driver" and res.change.to_dict() == {(1,): 1}
    assert res.terms[0].where == "driver" and res.terms[0].methods
    assert res.why == "changes hold ≤ 1 rows ≤ local_delta_rows=100,000"
    with faq.settings(local_delta_rows=0):  # every factor in the driver: local_rows decides
        res = solve_delta(q, {"A": A, "B": B}, {"B": dB})
    assert res.where == "driver" and res.change.to_dict() == {(1,): 1}
    assert res.why == (
        "a change holds 1 rows > local_delta_rows=0, but every relation and change is in "
        "the driver (≤ local_rows=20,000,000)"
    )
    with faq.settings(local_delta_rows=0, local_rows=0):
        res = solve_delta(q, {"A": A, "B": B}, {"B": dB})
    assert res.where == "spark" and res.change.to_dict() == {(1,): 1}
    assert res.why == "a change holds 1 rows > local_delta_rows=0"
    assert [t.where for t in res.terms] == ["spark"]


def test_keyed_table_folds_its_log_by_the_log_settings():
    ops = local_ops(faq.Query("Q(a) :- A(a)", "integer").semiring)
    base = Table(("a",), (np.arange(100, dtype=np.int64),), np.ones(100, dtype=np.int64))
    kt = KeyedTable.of(base, ops)
    one = Table(("a",), (np.array([3], dtype=np.int64),), np.array([5], dtype=np.int64))
    two = Table(("a",), (np.array([7], dtype=np.int64),), np.array([2], dtype=np.int64))
    with faq.settings(log_rows=0, log_fraction=0.0):
        folding, _, _ = kt.plus(one)  # past the bound: a fold begins on the helper thread
        assert folding.fold is not None and folding.base is base
        folding.fold.job.result()
        folded, _, _ = folding.plus(two)  # done: swapped in at the next change
    assert folded.fold is None and folded.base is not base  # folded into the base
    assert folded.over.cols[0].tolist() == [7]  # the key changed since the fold began
    kept, _, _ = kt.plus(one)
    assert kept.fold is None and kept.base is base and kept.over.rows == 1
    got = dict(zip(folded.table().cols[0].tolist(), folded.table().values.tolist(), strict=True))
    assert len(got) == 100 and got[3] == 6 and got[7] == 3
    assert kept.table().rows == 100


def test_max_cell_waves_is_a_setting_of_at_least_one():
    assert DEFAULTS.max_cell_waves == 4
    with faq.settings(max_cell_waves=16):
        assert current().max_cell_waves == 16 and "max_cell_waves=16" in current().describe()
    with pytest.raises(ValueError, match="'max_cell_waves' must be at least 1, got 0"):
        faq.settings(max_cell_waves=0)
    assert current() == DEFAULTS
