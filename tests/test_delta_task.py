"""The delta rule in one Spark task (``faq.delta``'s one-task path).

Past the driver's bounds, a delta rule whose every term reads only atoms its change
reaches (one hop) reads each relation once, by a filtered scan, and runs the
driver's delta rule over those rows in one Spark task.  It must give the change the
driver path gives, in every semiring (a user one's Python functions run in the
task), with string keys, repeated variables and several changed relations; and it
must cost one Spark job whose last stage is one task.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import faq
import semirings
from faq import Factor, query, solve_delta
from semirings import Semiring
from tests.helpers import assert_same, spark_jobs

BOTTLENECK = Semiring(
    name="bottleneck-in-a-task", zero=float("-inf"), one=float("inf"), add=max, mul=min
)

# (rule, arities): every atom of a term shares a variable with the term's change
RULES = [
    ("Q() :- E(a, b), E(b, c), E(a, c)", {"E": 2}),  # a triangle: a self-join, a scalar
    ("Q(a) :- E(a, b), E(a, c)", {"E": 2}),  # a star, a keyed change
    ("Q(a, c) :- R(a, b), S(b, c)", {"R": 2, "S": 2}),  # two relations, both may change
    ("Q(a) :- R(a, a), S(a, b)", {"R": 2, "S": 2}),  # a repeated variable
    ("Q(b) :- R(a, b), S(b), T(a, b)", {"R": 2, "S": 1, "T": 2}),  # T: two columns at once
]

SEMIRINGS = ["counting", "integer", "real", "boolean", "max-product", "min-plus", BOTTLENECK]


def _value(S: Semiring) -> st.SearchStrategy:
    if S is BOTTLENECK or S.name in ("real", "min-plus"):
        return st.sampled_from([0.5, 1.0, 2.0, 3.5])
    if S.name == "max-product":
        return st.sampled_from([0.25, 0.5, 1.0])
    if S.name == "boolean":
        return st.just(True)
    if S.name == "integer":
        return st.integers(-3, 3).filter(bool)
    return st.integers(1, 3)


def _relation(arity: int, S: Semiring, size: int) -> st.SearchStrategy:
    keys = st.tuples(*[st.integers(0, 5)] * arity)
    return st.dictionaries(keys, _value(S), min_size=0, max_size=size)


def _key(k: int, strings: bool) -> object:
    return f"v'{k}\\" if strings else k


def _factors(spark, rels, arities, S, strings):
    """Each relation as a driver factor and as a trusted Spark one (columns c0, c1…)."""
    vt = semirings.spark.ops(S).type
    local, remote = {}, {}
    for n, rel in rels.items():
        vars_ = tuple(f"c{i}" for i in range(arities[n]))
        rows = {tuple(_key(k, strings) for k in key): v for key, v in rel.items()}
        local[n] = Factor.from_dict(rows, vars_, S, name=n)
        kt = "string" if strings else "bigint"
        schema = ", ".join([f"{v} {kt}" for v in vars_] + [f"value {vt}"])
        data = [(*key, v) for key, v in rows.items()]
        df = spark.createDataFrame(pd.DataFrame(data, columns=[*vars_, "value"]), schema)
        dist = tuple(max(1, len({k[i] for k in rows})) for i in range(len(vars_)))
        remote[n] = Factor.trusted(df, vars_, S, rows=len(rows), distinct=dist, name=n)
    return local, remote


@given(data=st.data())
def test_one_task_gives_the_driver_paths_change(spark, data):
    rule, arities = data.draw(st.sampled_from(RULES))
    S = data.draw(st.sampled_from(SEMIRINGS))
    S = S if isinstance(S, Semiring) else semirings.get(S)
    strings = data.draw(st.booleans())
    rels = {n: data.draw(_relation(a, S, 12)) for n, a in arities.items()}
    changed = data.draw(st.lists(st.sampled_from(sorted(arities)), min_size=1, unique=True))
    deltas = {n: data.draw(_relation(arities[n], S, 4).filter(bool)) for n in changed}
    local, remote = _factors(spark, rels, arities, S, strings)
    changes = _factors(spark, deltas, arities, S, strings)[0]
    q = query(rule, semiring=S)
    want = solve_delta(q, local, changes)
    got = solve_delta(q, remote, changes, local=False)
    assert want.where == "driver" and got.where == "spark"
    assert "one Spark task" in got.why, got.why
    assert_same(got.change.to_dict(), want.change.to_dict(), S, f"{rule} over {S.name}")


def _graph(spark, n=400, m=3000, seed=7):
    import numpy as np

    rng = np.random.default_rng(seed)
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, size=(m, 2)) if a < b})
    df = spark.createDataFrame(pd.DataFrame(edges, columns=["a", "b"]).assign(value=1))
    held = df.repartition(4).localCheckpoint()  # as a view keeps its relations
    E = Factor.trusted(held, ("a", "b"), "integer", rows=len(edges))
    return E, edges


def test_one_task_runs_one_job_whose_last_stage_is_one_task(spark):
    """The relation's filtered scan runs in its own 4 partitions (plus the task's marker
    row), and the delta rule in one task: one job, where the terms as Spark queries
    each planned and shuffled their own filtered atoms."""
    from tests.test_fused import _stage_tasks_of_last_job

    E, edges = _graph(spark)
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="integer")
    closing = dict.fromkeys(_closing(edges, 5), 1)
    change = Factor.from_dict({**closing, edges[0]: -1}, ("a", "b"), "integer")
    want = solve_delta(q, {"E": E}, {"E": change}).change.scalar()
    res, tasks = _stage_tasks_of_last_job(
        spark, lambda: solve_delta(q, {"E": E}, {"E": change}, local=False)
    )
    assert want != 0 and res.change.scalar() == want and "one Spark task" in res.why
    assert tasks == [5, 1], tasks
    _, jobs = spark_jobs(spark, lambda: solve_delta(q, {"E": E}, {"E": change}, local=False))
    assert jobs == 1


def _closing(edges, k):
    """``k`` absent edges that each close at least one triangle of ``edges``."""
    adj: dict[int, set[int]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    have, out = set(edges), []
    for b in sorted(adj):
        for a in sorted(adj[b]):
            for c in sorted(adj[b]):
                if a < c and (a, c) not in have and len(out) < k:
                    out.append((a, c))
                    have.add((a, c))
    return out


def test_a_change_reaching_past_cell_rows_runs_its_terms_as_spark_queries(spark):
    """When the rows a change reaches are estimated past one task's budget
    (``cell_rows``), or past ``max_literals`` values, each term is a Spark query of its
    own, as before; the change is the same."""
    E, edges = _graph(spark)
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="integer")
    change = Factor.from_dict(dict.fromkeys(_closing(edges, 3), 1), ("a", "b"), "integer")
    want = solve_delta(q, {"E": E}, {"E": change}).change.scalar()
    assert want >= 3
    for kw in ({"cell_rows": 1}, {"max_literals": 2}):
        with faq.settings(**kw):
            res = solve_delta(q, {"E": E}, {"E": change}, local=False)
        assert res.change.scalar() == want and "one Spark task" not in res.why, kw
    res = solve_delta(q, {"E": E}, {"E": change}, local=False)
    assert res.change.scalar() == want and "one Spark task" in res.why


@pytest.mark.parametrize("head", [True, False])
def test_a_user_semiring_failing_in_the_task_is_one_clear_error(spark, head):
    def bad_mul(x: float, y: float) -> float:
        raise ZeroDivisionError("this semiring cannot multiply")

    S = Semiring(name="fails-in-the-delta-task", zero=0.0, one=1.0, add=max, mul=bad_mul)
    rows = [(1, 2, 0.5), (1, 4, 0.5), (2, 3, 0.5)]
    df = spark.createDataFrame(rows, "a long, b long, value double")
    E = Factor.trusted(df, ("a", "b"), S, rows=3)
    rule = "Q(a) :- E(a, b), E(b, c), E(a, c)" if head else "Q() :- E(a, b), E(b, c), E(a, c)"
    change = Factor.from_dict({(2, 4): 0.5}, ("a", "b"), S)
    with pytest.raises(Exception, match="cannot multiply") as info:
        solve_delta(query(rule, semiring=S), {"E": E}, {"E": change}, local=False)
    assert "Py4J" not in type(info.value).__name__ and "Traceback" not in str(info.value)


def test_a_rule_of_one_atom_has_no_hop_and_is_solved_in_spark(spark):
    """A rule of one atom reads no other relation: its delta is its change (projected),
    with no scan to plan (the one-task path read the first hop of a reach that has none)."""
    E, edges = _graph(spark)
    q = query("Q(a) :- E(a, b)", semiring="integer")
    change = Factor.from_dict({edges[0]: -1, (1000, 1001): 1}, ("a", "b"), "integer")
    res = solve_delta(q, {"E": E}, {"E": change}, local=False)
    assert res.change.to_dict() == {(edges[0][0],): -1, (1000,): 1}
