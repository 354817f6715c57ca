"""One Settings object decides every physical choice; a run is a record, never query state."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import faq
from faq import Factor, query, solve_delta
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
    with faq.settings(local_rows=0):
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


def test_delta_placement_reads_local_delta_rows(spark):
    q = query("Q(a) :- A(a, b), B(b)", semiring="integer")
    A = Factor.from_dict({(0, 1): 1, (1, 2): 1}, vars=("a", "b"), semiring="integer")
    B = Factor.from_dict({(1,): 1}, vars=("b",), semiring="integer")
    dB = Factor.from_dict({(2,): 1}, vars=("b",), semiring="integer")
    res = solve_delta(q, {"A": A, "B": B}, {"B": dB})
    assert res.where == "driver" and res.change.to_dict() == {(1,): 1}
    assert res.terms[0].where == "driver" and res.terms[0].methods
    assert res.why == "changes hold ≤ 1 rows ≤ local_delta_rows=100,000"
    with faq.settings(local_delta_rows=0):
        res = solve_delta(q, {"A": A, "B": B}, {"B": dB})
    assert res.where == "spark" and res.change.to_dict() == {(1,): 1}
    assert res.why == "a change holds 1 rows > local_delta_rows=0"
    assert [t.where for t in res.terms] == ["spark"]


def test_keyed_table_folds_its_log_by_the_log_settings():
    ops = local_ops(faq.Query("Q(a) :- A(a)", "integer").semiring)
    base = Table(("a",), (np.arange(100, dtype=np.int64),), np.ones(100, dtype=np.int64))
    kt = KeyedTable.of(base, ops)
    one = Table(("a",), (np.array([3], dtype=np.int64),), np.array([5], dtype=np.int64))
    with faq.settings(log_rows=0, log_fraction=0.0):
        folded, _, _ = kt.plus(one)
    kept, _, _ = kt.plus(one)
    assert folded.over.rows == 0 and folded.base.rows == 100  # folded into the base
    assert kept.over.rows == 1 and kept.base is base or kept.over.rows == 1
    assert folded.table().rows == kept.table().rows == 100


def test_max_cell_waves_is_a_setting_of_at_least_one():
    assert DEFAULTS.max_cell_waves == 4
    with faq.settings(max_cell_waves=16):
        assert current().max_cell_waves == 16 and "max_cell_waves=16" in current().describe()
    with pytest.raises(ValueError, match="'max_cell_waves' must be at least 1, got 0"):
        faq.settings(max_cell_waves=0)
    assert current() == DEFAULTS
