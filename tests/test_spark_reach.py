"""A Spark-resident view's tick reads what it needs in one job (incremental/reach.py).

The rows a tick reads are fetched hop by hop from the changed atoms, a job per
hop; the delta rule then runs in the driver over them.  The Spark state must
still agree with the driver state tick by tick, whatever the rule, and rules
without that bound (an atom no change connects to) read as before.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
from faq import query
from faq.rule import parse_rule
from incremental import IncrementalView
from tests.helpers import spark_jobs

RULES = [
    ("T() :- E(a, b), E(b, c), E(a, c)", "counting"),  # one hop, a scalar
    ("T(a) :- E(a, b), E(a, c)", "counting"),  # a star, keyed output
    ("T(a, c) :- E(a, b), F(b, c)", "integer"),  # two relations, a ring
    ("T() :- E(a, b), E(b, c), E(a, c)", "boolean"),
    ("T(a) :- E(a, b), F(b, c), E(c, d)", "counting"),  # a path: two hops from its ends
    ("T(a, e) :- E(a, b), F(b, c), E(c, d), F(d, e)", "integer"),  # three hops
    ("T(d) :- E(a, b), F(b, c), E(c, d)", "counting"),  # a head variable of the last hop
    ("T() :- E(a, b), F(c, d)", "counting"),  # a product: not fetched, read as before
]


def _frame(edges, weights=None, cols=("a", "b")):
    df = pd.DataFrame([tuple(e) for e in edges], columns=list(cols))
    if weights is not None:
        df["_weight"] = weights
    return df


def test_a_path_of_three_atoms_is_fetched_in_two_rounds(spark):
    """From a change at an end of the path E(a, b), F(b, c), E(c, d), F is one hop away
    and the far E two: a tick takes one job per hop (before: five jobs, a read each),
    and agrees with the driver state.  A rule with an atom no change connects to (a
    product) is not fetched at once and reads as before."""
    rng = np.random.default_rng(3)
    e = sorted({tuple(x) for x in rng.integers(0, 40, size=(150, 2)).tolist()})
    f = sorted({tuple(x) for x in rng.integers(0, 40, size=(150, 2)).tolist()})
    q = query("T(a, d) :- E(a, b), F(b, c), E(c, d)", semiring="counting")
    remote = IncrementalView(
        q, state="spark", E=spark.createDataFrame(_frame(e)), F=spark.createDataFrame(_frame(f))
    )
    driver = IncrementalView(q, state="driver", E=_frame(e), F=_frame(f))
    ticks = [
        {"E": _frame([(1, 2), e[0]], [1, -1])},
        {"F": _frame([(2, 3), f[1]], [1, -1])},
        {"E": _frame([(3, 4)], [1]), "F": _frame([(4, 1), f[2]], [1, -1])},
    ]
    for k, de in enumerate(ticks):
        got, jobs = spark_jobs(spark, lambda de=de: remote.step(**de), f"path-{k}")
        assert got.to_dict() == driver.step(**de).to_dict(), k
        assert jobs <= 2, (k, jobs)  # one per hop; the output's rows come with them
    assert remote.result().to_dict() == driver.result().to_dict()
    product = query("T() :- E(a, b), F(c, d)", semiring="counting")
    remote = IncrementalView(
        product,
        state="spark",
        E=spark.createDataFrame(_frame(e)),
        F=spark.createDataFrame(_frame(f)),
    )
    delta = _frame([(1, 2)], [1])
    assert remote.step(E=delta).scalar() == len(f)


# the rows a tick reads fetched (no bound), or past the bounds: the delta queries run as
# Spark jobs over the rows each term can reach (IN lists, or a broadcast semi-join past
# max_literals)
BOUNDS = [{}, {"max_fetch_rows": 0}, {"max_fetch_rows": 0, "max_literals": 1}]


@settings(max_examples=8, deadline=None)
@given(
    rule=st.sampled_from(RULES),
    seed=st.integers(0, 10_000),
    bound=st.sampled_from(BOUNDS),
)
def test_the_spark_state_agrees_with_the_driver_state_tick_by_tick(spark, rule, seed, bound):
    text, semiring = rule
    rng = np.random.default_rng(seed)
    q = query(text, semiring=semiring)
    names = sorted({a.relation for a in parse_rule(text).atoms})
    current = {n: {tuple(e) for e in rng.integers(0, 8, size=(20, 2)).tolist()} for n in names}
    initial = {n: _frame(sorted(current[n])) for n in names}
    driver = IncrementalView(q, state="driver", **initial)
    remote = IncrementalView(q, state="spark", **initial)
    assert remote.where == "spark"
    for _ in range(3):
        deltas = {}
        for n in names:
            gone = sorted(current[n])[: int(rng.integers(0, 3))]
            new = {tuple(e) for e in rng.integers(0, 9, size=(4, 2)).tolist()} - current[n]
            current[n] = (current[n] - set(gone)) | new
            if gone or new:  # (an empty pandas frame has no integer columns to check)
                deltas[n] = _frame([*gone, *sorted(new)], [-1] * len(gone) + [1] * len(new))
        with faq.settings(**bound):
            got = remote.step(**deltas)
        assert driver.step(**deltas).to_dict() == got.to_dict()
        assert driver.result().to_dict() == remote.result().to_dict()
    for n in names:
        assert driver.relation(n).to_dict() == remote.relation(n).to_dict()


def test_a_tick_of_a_triangle_view_in_spark_runs_in_one_job(spark):
    rng = np.random.default_rng(4)
    edges = {tuple(e) for e in rng.integers(0, 30, size=(200, 2)).tolist() if e[0] != e[1]}
    q = query("T() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(sorted(edges))))
    driver = IncrementalView(q, state="driver", E=_frame(sorted(edges)))
    # an edge that closes no triangle: the output does not change, so it is not read
    _, jobs = spark_jobs(spark, lambda: remote.step(E=_frame([(100, 101)], [1])), "reach-lone")
    driver.step(E=_frame([(100, 101)], [1]))
    assert jobs == 1, jobs
    for k in range(3):
        gone = sorted(edges)[k * 5 : k * 5 + 5]
        new = [(30 + k, j) for j in range(4)]
        edges = (edges - set(gone)) | set(new)
        delta = _frame([*gone, *new], [-1] * 5 + [1] * 4)
        _, jobs = spark_jobs(spark, lambda delta=delta: remote.step(E=delta), f"reach-tick-{k}")
        driver.step(E=delta)
        # one job fetches the rows the tick reads; the scalar output's lookup needs one
        # more only while its value was never changed
        assert jobs <= (2 if k == 0 else 1), (k, jobs)
        assert remote.result().scalar() == driver.result().scalar()


def test_string_keys_with_quotes_and_backslashes_are_fetched(spark):
    names = ["o'hara", "back\\slash", 'say "hi"', "plain", "ünï"]
    edges = [(names[i], names[j]) for i in range(5) for j in range(5) if i < j]
    q = query("T(a) :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(edges[:-2])))
    driver = IncrementalView(q, state="driver", E=_frame(edges[:-2]))
    delta = _frame([edges[-2], edges[-1], edges[0]], [1, 1, -1])
    assert remote.step(E=delta).to_dict() == driver.step(E=delta).to_dict()
    assert remote.result().to_dict() == driver.result().to_dict()
    path = query("T(a, d) :- E(a, b), E(b, c), E(c, d)", semiring="counting")  # two hops
    remote = IncrementalView(path, state="spark", E=spark.createDataFrame(_frame(edges[:-2])))
    driver = IncrementalView(path, state="driver", E=_frame(edges[:-2]))
    assert remote.step(E=delta).to_dict() == driver.step(E=delta).to_dict()
    assert remote.result().to_dict() == driver.result().to_dict()


def test_string_keys_with_quotes_past_max_fetch_rows(spark):
    """Past the bound, the state's rows at the changed keys and each term's other atoms
    are cut by ``IN`` lists of the keys (one parsed list, not a literal per key): string
    keys with quotes and backslashes still match exactly."""
    names = ["o'hara", "back\\slash", 'say "hi"', "plain", "ünï", "it''s"]
    edges = [(names[i], names[j]) for i in range(6) for j in range(6) if i < j]
    q = query("T(a) :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(edges[:-3])))
    driver = IncrementalView(q, state="driver", E=_frame(edges[:-3]))
    ticks = [_frame([*edges[-3:], edges[0]], [1, 1, 1, -1]), _frame([edges[0], edges[4]], [1, -1])]
    with faq.settings(max_fetch_rows=0):
        for delta in ticks:
            assert remote.step(E=delta).to_dict() == driver.step(E=delta).to_dict()
            assert remote.result().to_dict() == driver.result().to_dict()


def test_relations_of_two_key_signatures_past_max_fetch_rows(spark):
    """Relations of different key types are fetched in a job each; past the bound the
    first job to meet it brings its relations' rows at their changed keys, and the
    other relation is looked up on its own: both agree with the driver state."""
    e = [(i, i + 1) for i in range(30)] + [(0, j) for j in range(2, 30)]
    f = [(i, f"n{i % 7}") for i in range(31)]
    q = query("T(a, c) :- E(a, b), F(b, c)", semiring="integer")
    fs = _frame(f, cols=("b", "c"))
    remote = IncrementalView(
        q, state="spark", E=spark.createDataFrame(_frame(e)), F=spark.createDataFrame(fs)
    )
    driver = IncrementalView(q, state="driver", E=_frame(e), F=fs)
    ticks = [
        {
            "E": _frame([(0, 1), (0, 31)], [-1, 1]),
            "F": _frame([(1, "n1"), (31, "x'y")], [-1, 1], ("b", "c")),
        },
        {"E": _frame([(0, 1), (5, 6)], [1, -1]), "F": _frame([(6, "n2")], [2], ("b", "c"))},
    ]
    with faq.settings(max_fetch_rows=0):
        for t in ticks:
            assert remote.step(**t).to_dict() == driver.step(**t).to_dict()
            assert remote.result().to_dict() == driver.result().to_dict()


def test_a_tick_reaching_past_max_fetch_rows_reads_the_state_in_spark(spark, caplog):
    """A change at a hub reaches every row around it.  Past ``max_fetch_rows`` the tick
    does not bring them into the driver (the fetch stops at one row more) and its delta
    queries read the relations in Spark; the answers stay those of the driver state."""
    hub = [(0, j) for j in range(1, 60)]
    ring = [(j, j + 1) for j in range(1, 59)]
    edges = sorted(set(hub + ring))
    q = query("T() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(edges)))
    driver = IncrementalView(q, state="driver", E=_frame(edges))
    # at the hub: triangles (0, j, j + 1) for j = 1..58; (0, 1, 2) and (0, 2, 3) go,
    # (1, 2, 3) comes
    delta = _frame([(0, 1), (0, 2), (1, 3), (0, 70)], [-1, -1, 1, 1])
    with faq.settings(max_fetch_rows=20), caplog.at_level(logging.INFO, "faq.incremental"):
        got, jobs = spark_jobs(spark, lambda: remote.step(E=delta), "past-the-bound")
    assert "reaches over max_fetch_rows=20 rows" in caplog.text
    # the fetch that stops at the bound, the rows at the changed keys (a job of their
    # own past the bound: marking them in every tick's fetch cost each tick a second IN
    # list to analyse), every term's cells with the scalar read in one job, and the
    # output's first lookup (9 jobs once: two per term, and the driver's own lookups
    # meeting the same bound first)
    assert jobs <= 4, jobs
    assert got.to_dict() == driver.step(E=delta).to_dict()
    assert remote.result().scalar() == driver.result().scalar() == 58 - 2 + 1
    caplog.clear()  # within the bound: fetched as before
    small = _frame([(30, 32)], [1])
    with caplog.at_level(logging.INFO, "faq.incremental"):
        assert remote.step(E=small).to_dict() == driver.step(E=small).to_dict()
    assert "max_fetch_rows" not in caplog.text


def _hub_views(spark, **kw):
    hub = [(0, j) for j in range(1, 60)]
    ring = [(j, j + 1) for j in range(1, 59)]
    edges = sorted(set(hub + ring))
    q = query("T() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(edges)), **kw)
    return q, remote, IncrementalView(q, state="driver", E=_frame(edges))


HUB_TICKS = [  # at the hub, past max_fetch_rows=20: keys changed again and again
    ([(0, 1), (0, 2), (1, 3), (0, 70)], [-1, -1, 1, 1]),
    ([(0, 1), (0, 3), (2, 70), (1, 3)], [1, -1, 1, 1]),  # back, gone, new, up to 2
    ([(0, 70), (1, 3), (0, 2), (5, 6)], [-1, -2, 1, -1]),
    ([(0, 1), (0, 3), (0, 4)], [-1, 1, -1]),
]


def test_ticks_past_max_fetch_rows_read_changed_keys_without_a_broadcast(spark):
    """Past the bound the delta queries read each relation in Spark.  The keys changed
    since its base was written were cut from it by an anti-join with them: a broadcast
    job per read, 4 of a triangle's 6 reads.  Counts are a ring, so the relation is read
    as its base plus a correction (the overrides, and the base rows they replace
    negated), which the query ⊕-combines: 3 jobs a tick (the anti-joins took up to 6
    more): the fetch that meets the bound, the rows at the changed keys (a job of their
    own past the bound, so that a tick within it analyses no second IN list), and the
    delta queries."""
    _, remote, driver = _hub_views(spark)
    for k, (edges, weights) in enumerate(HUB_TICKS):
        delta = _frame(edges, weights)
        with faq.settings(max_fetch_rows=20):
            got, jobs = spark_jobs(spark, lambda d=delta: remote.step(E=d), f"past-{k}")
        assert got.to_dict() == driver.step(E=delta).to_dict(), k
        assert remote.result().scalar() == driver.result().scalar(), k
        if k:  # the first tick also reads the output's value once
            assert jobs <= 3, (k, jobs)
    assert remote.relation("E").to_dict() == driver.relation("E").to_dict()


@pytest.mark.parametrize("journal_ticks", [1, 100])
def test_a_reopened_spark_state_past_max_fetch_rows_agrees(spark, tmp_path, journal_ticks):
    """Reopened from a checkpoint (``journal_ticks=1``), a Spark state holds overrides
    whose base rows it did not track: its ticks past the bound read the relation with
    the anti-join.  Reopened from the journal (100), the replayed ticks track them.
    Both agree with the driver state."""
    q, remote, driver = _hub_views(spark, state_dir=tmp_path / "v")
    with faq.settings(max_fetch_rows=20, journal_ticks=journal_ticks):
        for edges, weights in HUB_TICKS[:2]:
            delta = _frame(edges, weights)
            assert remote.step(E=delta).to_dict() == driver.step(E=delta).to_dict()
        remote.close()
        again = IncrementalView(q, state_dir=tmp_path / "v")
        assert again.where == "spark"
        for edges, weights in HUB_TICKS[2:]:
            delta = _frame(edges, weights)
            assert again.step(E=delta).to_dict() == driver.step(E=delta).to_dict()
    assert again.result().scalar() == driver.result().scalar()
    assert again.relation("E").to_dict() == driver.relation("E").to_dict()
    again.close()


def test_spark_delta_terms_run_in_one_action_raise_the_semiring_error(spark):
    """Spark delta queries are computed in one action after they are planned: a user
    function failing in their cells still comes out as its own one-line error, and an
    integer overflow as an OverflowError naming the semiring."""
    from faq import Factor, solve_delta
    from semirings import Semiring

    def bad_mul(x: float, y: float) -> float:
        raise ZeroDivisionError("this semiring cannot multiply")

    S = Semiring(name="fails-in-delta-cells", zero=0.0, one=1.0, add=max, mul=bad_mul)
    rows = [(1, 2, 0.5), (1, 4, 0.5), (2, 3, 0.5)]
    E = Factor.trusted(
        spark.createDataFrame(rows, "a long, b long, value double"), ("a", "b"), S, rows=3
    )
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring=S)
    change = Factor.from_dict({(2, 4): 0.5}, ("a", "b"), S)  # closes the triangle (1, 2, 4)
    with pytest.raises(Exception, match="cannot multiply") as info:
        solve_delta(q, {"E": E}, {"E": change}, local=False)
    assert "Py4J" not in type(info.value).__name__ and "Traceback" not in str(info.value)
    big = 2**62
    rows = [(1, 2, big), (1, 4, big), (2, 3, 1)]
    E = Factor.trusted(
        spark.createDataFrame(rows, "a long, b long, value long"), ("a", "b"), "counting", rows=3
    )
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    change = Factor.from_dict({(2, 4): 4}, ("a", "b"), "counting")
    with pytest.raises(OverflowError, match="counting"):
        solve_delta(q, {"E": E}, {"E": change}, local=False)


def test_a_one_hop_tick_runs_the_keyed_runners_over_the_fetched_rows(spark, monkeypatch):
    """Where every atom shares a variable with each changed one (a triangle), the rows a
    tick fetched hold every row the keyed runners look up, so the delta rule runs them
    (seeded joins on tries of the fetched rows, as the driver state does) instead of
    planning and joining each term; a path of three atoms, whose far atom a term reaches
    in two hops, keeps the general path.  Both agree with the driver state."""
    import incremental.terms as terms
    from incremental.reach import one_hop

    ran: list[str] = []
    real = terms.keyed_delta

    def spy(atoms, *args, **kwargs):
        ran.append(",".join(rel for rel, _ in atoms))
        return real(atoms, *args, **kwargs)

    monkeypatch.setattr(terms, "keyed_delta", spy)
    rng = np.random.default_rng(11)
    e = sorted({tuple(x) for x in rng.integers(0, 30, size=(120, 2)).tolist() if x[0] != x[1]})
    delta = _frame([e[0], e[3], (31, 32), (1, 31)], [-1, -1, 1, 1])
    for text, expect in [
        ("T(a) :- E(a, b), E(b, c), E(a, c)", True),
        ("T(a, d) :- E(a, b), E(b, c), E(c, d)", False),
    ]:
        q = query(text, semiring="counting")
        assert one_hop(q.rule, {"E": SimpleNamespace(rows=len(delta))}) is expect
        remote = IncrementalView(q, state="spark", E=spark.createDataFrame(_frame(e)))
        driver = IncrementalView(q, state="driver", E=_frame(e))
        ran.clear()
        got = remote.step(E=delta)
        assert bool(ran) is expect, (text, ran)
        ran.clear()
        assert got.to_dict() == driver.step(E=delta).to_dict()
        assert ran, "the driver state runs the keyed runners"
        assert remote.result().to_dict() == driver.result().to_dict()
