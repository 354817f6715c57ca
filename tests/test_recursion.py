"""Programs of several rules and recursive queries: semi-naive fixpoints (issue 23, items 1-3)."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

import faq
import semirings
from faq import Factor, query
from faq.plan import DivergenceError
from faq.recursion import Program
from faq.reference import reference_fixpoint
from faq.rule import split_rules
from tests.helpers import spark_jobs

SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"


def edges(entries: dict, S: str = "min-plus") -> Factor:
    return Factor.from_dict(entries, ["a", "b"], S, name="E")


def nodes(entries: dict, S: str = "min-plus") -> Factor:
    return Factor.from_dict(entries, ["a"], S, name="S")


def random_graph(n: int, m: int, seed: int) -> dict[tuple[int, int], float]:
    rng = np.random.default_rng(seed)
    out: dict[tuple[int, int], float] = {}
    for _ in range(m):
        a, b = (int(x) for x in rng.integers(0, n, 2))
        if a != b:
            out[(a, b)] = float(rng.integers(1, 20))
    return out


# -- syntax ------------------------------------------------------------------------------------
def test_split_rules_newlines_semicolons_and_continuations():
    text = "P(x) :- A(x); P(x) :- B(x)\nQ(x) :- P(x),\n   C(x, 'a;b')\n\n"
    assert split_rules(text) == ["P(x) :- A(x)", "P(x) :- B(x)", "Q(x) :- P(x), C(x, 'a;b')"]


def test_query_makes_a_program_only_for_several_or_recursive_rules(spark):
    assert isinstance(query(SSSP, semiring="min-plus"), Program)
    assert isinstance(query("P(x) :- A(x); P(x) :- B(x)"), Program)
    single = query("Q(x) :- A(x, y),\n B(y)")
    assert not isinstance(single, Program) and len(single.rule.atoms) == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("D(x) :- S(x)\nD(x, y) :- D(x), E(x, y)", ["D(x, y) :- D(x), E(x, y)", "arity"]),
        ("D(x) :- S(x)\nD(y) :- D(x, z), E(x, y)", ["D(y) :- D(x, z), E(x, y)", "arity"]),
        ("D(y) :- D(x), E(x, y)", ["D(y) :- D(x), E(x, y)", "no base case"]),
        ("P(x) :- S(x); D(y) :- O(x), E(x, y); O(y) :- D(x), E(x, y)", ["no base case", "'O'"]),
        ("D(x) :- S(x); D(y) :- D(x), order(x, y)", ["order", "reserved"]),
    ],
)
def test_bad_programs_name_the_rule(text, words):
    with pytest.raises(ValueError) as e:
        query(text, semiring="min-plus")
    for w in words:
        assert w in str(e.value)


def test_unknown_missing_and_defined_relations_are_refused(spark):
    sp = query(SSSP, semiring="min-plus")
    E, S = edges({(0, 1): 1.0}), nodes({(0,): 0.0})
    with pytest.raises(
        ValueError, match=r"unknown relation 'E' in rule D\(y\) :- D\(x\), E\(x, y\)"
    ):
        sp.solve(S=S)
    with pytest.raises(ValueError, match="unexpected relation 'F'"):
        sp.solve(S=S, E=E, F=E)
    with pytest.raises(ValueError, match="relation 'D' is defined by rule"):
        sp.solve(S=S, E=E, D=S)
    with pytest.raises(ValueError, match="relation 'E'.*2 key"):
        sp.solve(S=S, E=S)
    with pytest.raises(ValueError, match="aggregates"):
        query(SSSP, semiring="min-plus", aggregates={"x": "max"})


# -- semantics ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["driver", "tasks"])
def test_shortest_paths_match_dijkstra(spark, backend):
    n, E = 30, random_graph(30, 90, seed=3)
    sp = query(SSSP, semiring="min-plus")
    d = sp.solve(S=nodes({(0,): 0.0, (7,): 4.0}), E=edges(E), backend=backend).to_dict()
    rows, cols = zip(*E, strict=True)
    g = csr_matrix((list(E.values()), (rows, cols)), shape=(n, n))
    dist = np.minimum(dijkstra(g, indices=0), 4.0 + dijkstra(g, indices=7))
    want = {(i,): float(x) for i, x in enumerate(dist) if math.isfinite(x)}
    assert d == pytest.approx(want)


def test_shortest_path_witnesses_are_predecessors_on_best_paths(spark):
    E = random_graph(25, 80, seed=5)
    sp = query(SSSP, semiring="min-plus")
    out = sp.solve(S=nodes({(0,): 0.0}), E=edges(E), witness=True)
    d, pred = out.to_dict(), out.witnesses()
    assert set(pred) == set(d)
    assert pred[(0,)] == {"x_": None}
    for (v,), w in pred.items():
        if v != 0:
            u = w["x_"]
            assert d[(u,)] + E[(u, v)] == pytest.approx(d[(v,)])


def test_reachability_in_boolean(spark):
    E = {(0, 1): True, (1, 2): True, (2, 0): True, (3, 4): True, (4, 5): True}
    q = query("R(x, y) :- E(x, y)\nR(x, z) :- R(x, y), E(y, z)", semiring="boolean")
    got = set(q.solve(E=edges(E, "boolean")).to_dict())
    want = {(a, b) for a in range(3) for b in range(3)} | {(3, 4), (4, 5), (3, 5)}
    assert got == want


def test_path_counts_on_a_dag(spark):
    rng = np.random.default_rng(7)
    n = 14
    E = {(a, b): 1 for a in range(n) for b in range(a + 1, n) if rng.random() < 0.35}
    q = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="counting")
    got = q.solve(S=nodes({(0,): 1}, "counting"), E=edges(E, "counting")).to_dict()
    count = [0] * n  # paths from node 0, by dynamic programming in topological order
    count[0] = 1
    for b in range(n):
        for a in range(b):
            count[b] += count[a] * E.get((a, b), 0)
    assert got == {(v,): c for v, c in enumerate(count) if c}


def test_counting_around_a_cycle_is_refused_naming_the_relation(spark):
    q = query("P(x) :- S(x)\nP(y) :- P(x), E(x, y)", semiring="counting")
    E = edges({(0, 1): 1, (1, 2): 1, (2, 1): 1}, "counting")
    with pytest.raises(ValueError, match=r"relation\(s\) 'P' does not converge.*30 rounds"):
        q.solve(S=nodes({(0,): 1}, "counting"), E=E, max_rounds=30)


def test_negative_cycle_in_min_plus_is_refused(spark):
    sp = query(SSSP, semiring="min-plus")
    E = edges({(0, 1): 1.0, (1, 2): -3.0, (2, 1): 1.0})
    with pytest.raises(ValueError, match="'D' does not converge.*negative cycle"):
        sp.solve(S=nodes({(0,): 0.0}), E=E, max_rounds=40)
    with pytest.raises(ValueError, match="max_rounds"):
        sp.solve(S=nodes({(0,): 0.0}), E=E, max_rounds=0)


def test_mutual_recursion_even_and_odd_path_lengths(spark):
    n = 7
    E = {(i, (i + 1) % n): True for i in range(n)}  # an odd cycle: every node at both parities
    E.update({(7, 8): True})
    text = "Even(x) :- S(x)\nEven(y) :- Odd(x), E(x, y)\nOdd(y) :- Even(x), E(x, y)"
    q = query(text, semiring="boolean")
    got = set(q.solve(S=nodes({(7,): True}, "boolean"), E=edges(E, "boolean")).to_dict())
    assert got == {(7,)}
    got = set(q.solve(S=nodes({(0,): True}, "boolean"), E=edges(E, "boolean")).to_dict())
    assert got == {(i,) for i in range(n)}
    odd = query(text.replace("Even(x) :- S(x)", "Odd(x) :- Even(x), F(x)\nEven(x) :- S(x)"))
    assert odd.answer == "Odd"


def test_non_recursive_unions_and_chains(spark):
    q = query("P(x) :- A(x); P(x) :- B(x); Q(x) :- P(x), C(x)", semiring="real")
    A = Factor.from_dict({(0,): 1.0, (1,): 2.0}, ["x"], "real")
    B = Factor.from_dict({(1,): 3.0, (2,): 4.0}, ["x"], "real")
    C = Factor.from_dict({(1,): 10.0, (2,): 1.0}, ["x"], "real")
    assert q.solve(A=A, B=B, C=C).to_dict() == {(0,): 1.0, (1,): 5.0, (2,): 4.0}
    chain = query("Q(x) :- P(x), C(x)\nP(x) :- A(x)\nP(x) :- B(x)", semiring="real")
    assert chain.solve(A=A, B=B, C=C).to_dict() == {(1,): 50.0, (2,): 4.0}


def test_spark_dataframe_and_dense_array_inputs(spark):
    sp = query(SSSP, semiring="min-plus")
    E = spark.createDataFrame([(0, 1, 1.0), (1, 2, 3.0), (0, 2, 9.0)], ["a", "b", "value"])
    S = spark.createDataFrame([(0, 0.0)], ["a", "value"])
    assert sp.solve(S=S, E=E).to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 4.0}
    dense = np.array([[np.inf, 1.0, 9.0], [np.inf, np.inf, 3.0], [np.inf] * 3])
    S = Factor.from_numpy(np.array([0.0, np.inf, np.inf]), vars=("a",))
    run = sp.run(S=S, E=Factor.from_numpy(dense, vars=("a", "b")), backend="spark")
    assert run.result.to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 4.0}
    assert any(r.where == ("spark",) for r in run.rounds)


def test_string_node_ids_and_an_empty_base(spark):
    sp = query(SSSP, semiring="min-plus")
    E = edges({("a", "b"): 1.0, ("b", "c"): 3.0, ("a", "c"): 9.0, ("c", "a"): 1.0})
    for backend in ("driver", "spark"):
        out = sp.solve(S=nodes({("a",): 0.0}), E=E, backend=backend, witness=True)
        assert out.to_dict() == {("a",): 0.0, ("b",): 1.0, ("c",): 4.0}
        assert out.witnesses() == {("a",): {"x_": None}, ("b",): {"x_": "a"}, ("c",): {"x_": "b"}}
    assert sp.solve(S=nodes({}), E=E).to_dict() == {}


def test_explain_shows_rounds_and_delta_sizes(spark):
    sp = query(SSSP, semiring="min-plus")
    S, E = nodes({(0,): 0.0}), edges({(0, 1): 1.0, (1, 2): 1.0, (0, 2): 5.0})
    run = sp.run(S=S, E=E)
    text = sp.explain(run)
    assert text == run.explain()
    assert SECONDS.sub("_", text) == SECONDS.sub("_", sp.explain(S=S, E=E))
    assert "group D (recursive)" in text
    assert "round 0: ΔD 1 rows [driver]; base rules;" in text
    assert "round 1: ΔD 2 rows [driver]; read 1 rows of Δ, derived 2;" in text
    assert "round 2: ΔD 1 rows [driver]; read 2 rows of Δ, derived 1;" in text
    assert "round 3: ΔD 0 rows [driver]; read 1 rows of Δ, derived 0;" in text
    assert [dict(r.delta)["D"] for r in run.rounds] == [1, 2, 1, 0]
    assert "round 1: ΔD 2 rows [spark]" in sp.explain(S=S, E=E, backend="spark")


SECONDS = re.compile(r"\d+\.\d+ s\b")


def test_explain_of_a_program_on_spark_says_where_rounds_ran_and_what_they_cost(spark):
    """With ``local_rows=0`` the inputs stay in Spark and, when the fixpoint is kept in the
    driver (``backend="driver"``; by default it is partitioned in Spark:
    tests/test_recursion_spark.py), every round's driver-side delta rule fetches rows of E
    by filtered Spark scans: each round is labelled with them, and the rounds' wall times
    (Spark jobs included) add up to the run's (issue 37, point 7; every round read
    "[driver]" with no time at all)."""
    sp = query(SSSP, semiring="min-plus")
    E = spark.createDataFrame([(i, i + 1, 1.0) for i in range(4)], ["a", "b", "value"])
    S = spark.createDataFrame([(0, 0.0)], ["a", "value"])
    with faq.settings(local_rows=0):
        t0 = time.perf_counter()
        run = sp.run(S=S, E=E, backend="driver")
        wall = time.perf_counter() - t0
    assert run.result.to_dict() == {(i,): float(i) for i in range(5)}
    text = sp.explain(run)
    rounds = [r for r in run.rounds if r.round > 0]
    assert len(rounds) == 5 and all(r.spark_reads == ("E",) for r in rounds)
    assert all(r.where == ("driver",) for r in rounds)
    for r in rounds:
        line = f"round {r.round}: ΔD {dict(r.delta)['D']} rows [driver; lookups in Spark: E]"
        assert line in text, text
        assert r.rows_in == 1 and r.seconds > 0
    assert run.rounds[0].where == ("spark",)  # S read where it is kept
    assert "inputs read and checked:" in text and f"total {run.seconds:.2f} s" in text
    assert 0.8 * wall <= run.seconds <= wall, (run.seconds, wall)
    # in the driver: no lookups in Spark
    local = sp.run(S=nodes({(0,): 0.0}), E=edges({(0, 1): 1.0}))
    assert all(r.spark_reads == () for r in local.rounds)
    assert "lookups in Spark: E" not in sp.explain(local)


def test_nonlinear_transitive_closure_in_counting_on_a_dag(spark):
    E = {(0, 1): 1, (1, 2): 1, (0, 2): 1, (2, 3): 1, (1, 3): 1}
    text = "T(x, y) :- E(x, y)\nT(x, z) :- T(x, y), T(y, z)"
    q = query(text, semiring="counting")
    got = q.solve(E=edges(E, "counting")).to_dict()
    assert got == reference_fixpoint(text, "counting", {"E": E})["T"]


# -- property: random graphs and programs against the reference fixpoint -------------------------
PROGRAMS = [
    ("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", "D"),
    ("T(x, y) :- E(x, y)\nT(x, z) :- T(x, y), E(y, z)", "T"),
    ("T(x, y) :- E(x, y); T(x, z) :- T(x, y), T(y, z)", "T"),
    ("A(x) :- S(x)\nA(y) :- B(x), E(x, y)\nB(y) :- A(x), E(y, x)", "A"),
    ("P(x) :- S(x); P(y) :- P(x), E(x, y), E(y, x)", "P"),
]
SEMIRINGS = {
    "min-plus": st.floats(0, 9).map(lambda x: float(round(x))),
    "max-product": st.sampled_from([0.25, 0.5, 1.0]),
    "boolean": st.just(True),
    "counting": st.integers(1, 3),
    "real": st.sampled_from([0.5, 1.0, -2.0]),
}
RINGS = ("counting", "real")  # finite fixpoints on DAGs only, and not program 3 (it goes back)


@st.composite
def cases(draw):
    S = draw(st.sampled_from(sorted(SEMIRINGS)))
    ring = S in RINGS
    text, _ = draw(st.sampled_from([p for i, p in enumerate(PROGRAMS) if not (ring and i == 3)]))
    pairs = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12))
    if ring:
        pairs = [(a, b) for a, b in pairs if a < b]
    E = {p: draw(SEMIRINGS[S]) for p in pairs}
    src = {(x,): draw(SEMIRINGS[S]) for x in draw(st.sets(st.integers(0, 5), max_size=2))}
    return S, text, E, src


def check_against_reference(S, text, E, src, backend):
    q = query(text, semiring=S)
    rels = {"E": edges(E, S)}
    if "S" in q.inputs:
        rels["S"] = nodes(src, S)
    run = q.run(backend=backend, **rels)
    got = run.result.to_dict()
    if backend == "spark":  # every recursive round's joins ran as Spark queries
        assert all(r.where in ((), ("spark",)) for r in run.rounds if r.round)
    ref = {"E": E, "S": src}
    want = reference_fixpoint(text, S, {n: ref[n] for n in q.inputs})[q.answer]
    assert got == pytest.approx(want)


@given(cases())
def test_programs_match_the_reference_fixpoint(spark, case):
    check_against_reference(*case, backend="driver")


@settings(max_examples=3)
@given(cases())
def test_programs_match_the_reference_fixpoint_on_spark(spark, case):
    check_against_reference(*case, backend="spark")


def test_user_max_semiring_not_declared_idempotent_converges_around_cycles(spark):
    import semirings

    widest = semirings.Semiring(name="widest-path", zero=-math.inf, one=math.inf, add=max, mul=min)
    assert not widest.idempotent
    E = {(0, 1): 5.0, (1, 2): 3.0, (2, 0): 9.0, (2, 3): 4.0, (0, 3): 2.0, (3, 1): 7.0}
    text = "W(x) :- S(x)\nW(y) :- W(x), E(x, y)"
    q = query(text, semiring=widest)
    got = q.solve(S=nodes({(0,): math.inf}, widest), E=edges(E, widest), witness=True)
    want = reference_fixpoint(text, widest, {"S": {(0,): math.inf}, "E": E})["W"]
    assert got.to_dict() == want == {(0,): math.inf, (1,): 5.0, (2,): 3.0, (3,): 3.0}
    for (v,), w in got.witnesses().items():
        if v != 0:
            assert min(want[(w["x_"],)], E[(w["x_"], v)]) == want[(v,)]


def test_incremental_view_over_a_program_is_a_program_view():
    from incremental import IncrementalView

    with pytest.warns(DeprecationWarning, match="ProgramView is deprecated"):
        from incremental import ProgramView
    program = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    view = IncrementalView(program)
    assert isinstance(view, ProgramView) and isinstance(view, IncrementalView)
    assert view.result().to_dict() == {} and view.tick == 0


# -- early refusal of negative cycles (min-plus, max-plus) -------------------------------------
def test_negative_cycle_is_refused_after_as_many_rounds_as_keys_not_max_rounds(spark):
    sp = query(SSSP, semiring="min-plus")
    E = edges({(0, 1): 1.0, (1, 2): -3.0, (2, 1): 1.0})
    with pytest.raises(ValueError, match=r"'D' does not converge.*after 4 rounds.*negative cycle"):
        sp.solve(S=nodes({(0,): 0.0}), E=E)  # default max_rounds: 1000
    longest = query("L(x) :- S(x)\nL(y) :- L(x), E(x, y)", semiring="max-plus")
    E = edges({(0, 1): 1.0, (1, 2): 2.0, (2, 0): 1.0}, "max-plus")
    with pytest.raises(ValueError, match=r"'L' does not converge.*positive cycle"):
        longest.solve(S=nodes({(0,): 0.0}, "max-plus"), E=E)


def bellman_ford(n: int, E: dict, source: int) -> dict | None:
    """Distances from ``source``, or None when a negative cycle is reachable from it."""
    d = {source: 0.0}
    for _ in range(n):
        changed = False
        for (a, b), w in E.items():
            if a in d and d[a] + w < d.get(b, math.inf):
                d[b] = d[a] + w
                changed = True
        if not changed:
            return d
    return None


@given(
    st.dictionaries(
        st.tuples(st.integers(0, 5), st.integers(0, 5)).filter(lambda e: e[0] != e[1]),
        st.integers(-4, 6).map(float),
        max_size=12,
    )
)
def test_early_negative_cycle_refusal_is_sound(E):
    """Refused exactly when a negative cycle is reachable; otherwise Bellman-Ford's answer."""
    want = bellman_ford(6, E, 0)
    sp = query(SSSP, semiring="min-plus")
    if want is None:
        with pytest.raises(ValueError, match="negative cycle"):
            sp.solve(S=nodes({(0,): 0.0}), E=edges(E))
    else:
        assert sp.solve(S=nodes({(0,): 0.0}), E=edges(E)).to_dict() == {
            (k,): v for k, v in want.items()
        }


def test_explain_never_reports_an_earlier_solve_of_other_objects(spark, monkeypatch):
    # The cache of the last solve held only id()s, and a new object may reuse the id of a
    # collected one; every id is made equal here, as such a reuse would, so the report of
    # the earlier solve must not come back for other objects.
    import faq.recursion

    monkeypatch.setattr(faq.recursion, "id", lambda x: 0, raising=False)
    sp = query(SSSP, semiring="min-plus")
    sp.solve(S=nodes({(0,): 0.0}), E=edges({(0, 1): 1.0, (1, 2): 1.0, (0, 2): 5.0}))
    text = sp.explain(S=nodes({(0,): 0.0}), E=edges({(0, 1): 1.0}))
    assert "round 2: ΔD 0 rows" in text and "round 3" not in text, text


def test_a_dataframe_input_is_read_once_not_in_every_round(spark):
    """The rounds' delta rules join the inputs in the driver: a DataFrame input costs one
    read, whatever the number of rounds (it was scanned again by every round's lookups)."""
    sp = query(SSSP, semiring="min-plus")
    chain = [(i, i + 1, 1.0) for i in range(12)]  # 12 rounds
    E = spark.createDataFrame(chain, ["a", "b", "value"])
    S = spark.createDataFrame([(0, 0.0)], ["a", "value"])
    run, jobs = spark_jobs(spark, lambda: sp.run(S=S, E=E), "sssp-once")
    assert run.result.to_dict() == {(i,): float(i) for i in range(13)}
    assert len(run.rounds) == 14 and all(r.where in ((), ("driver",)) for r in run.rounds)
    assert jobs <= 4, jobs  # one read per input (and Spark's size estimates), not per round


# -- divergence is refused, never answered (issue 37, point 3) ---------------------------------
def test_max_product_diverging_to_infinity_is_refused():
    # the reproduction: it answered {(0,): inf, (1,): inf} after 312 rounds
    E = Factor.from_dict({(0, 0): 10.0, (0, 1): 0.5}, vars=["a", "b"], semiring="max-product")
    S = Factor.from_dict({(0,): 1.0}, vars=["a"], semiring="max-product")
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="max-product")
    with pytest.raises(DivergenceError, match=r"'D' does not converge.*after 3 rounds.*above 1"):
        sp.solve(S=S, E=E)
    for w in (2.0, 1e100):  # weight 2.0 was refused after max_rounds, 1e100 answered inf
        E = Factor.from_dict({(0, 0): w, (0, 1): 0.5}, vars=["a", "b"], semiring="max-product")
        with pytest.raises(ValueError, match="does not converge"):
            sp.solve(S=S, E=E)
    # a weight-1 cycle improves nothing: the fixpoint exists
    E = Factor.from_dict({(0, 0): 1.0, (0, 1): 0.5}, vars=["a", "b"], semiring="max-product")
    assert sp.solve(S=S, E=E).to_dict() == {(0,): 1.0, (1,): 0.5}


@pytest.mark.parametrize(
    ("S", "E", "words"),
    [
        # no cycle: the values leave the domain all the same (a product past the floats)
        ("max-product", {(0, 1): 1e200, (1, 2): 1e200}, r"round 2 derives D\(2,\) = inf"),
        ("min-plus", {(0, 1): -1e308, (1, 2): -1e308}, r"round 2 derives D\(2,\) = -inf"),
        ("real", {(0, 1): 1e200, (1, 2): 1e200}, r"round 2 derives D\(2,\) = inf"),
        ("real", {(0, 1): 1e300, (0, 2): 1e300, (1, 3): 1e300, (2, 3): 1e300}, r"= inf"),
        # 2**70 paths, or a cycle doubling: past 64 bits (it raised a bare OverflowError)
        ("counting", {(i, i + 1): 2 for i in range(70)}, "round 63 overflows"),
        ("counting", {(0, 0): 2, (0, 1): 1}, "overflows"),
        ("integer", {(0, 0): -3}, "overflows"),
    ],
)
def test_values_outside_the_semiring_are_refused_by_its_own_check(S, E, words):
    sp = query(SSSP, semiring=S)
    one = semirings.get(S).one
    with pytest.raises(DivergenceError, match=f"does not converge in '{S}'.*{words}"):
        sp.solve(S=nodes({(0,): one}, S), E=edges(E, S))


def test_min_plus_infinity_is_its_zero_not_a_divergence(spark):
    # +inf is min-plus's zero (in its domain): an unreachable node is simply absent
    sp = query(SSSP, semiring="min-plus")
    out = sp.solve(S=nodes({(0,): 0.0}), E=edges({(0, 1): 1e308, (1, 2): 1e308}))
    assert out.to_dict() == {(0,): 0.0, (1,): 1e308}  # 1e308 + 1e308 = inf: no path


def test_a_long_chain_of_a_selective_semiring_converges_past_max_rounds(spark):
    # bound by the keys, not max_rounds: 1,500 rounds (it was refused after 1000)
    n = 1500
    sp = query(SSSP, semiring="min-plus")
    E = edges({(i, i + 1): 1.0 for i in range(n)})
    got = sp.solve(S=nodes({(0,): 0.0}), E=E).to_dict()
    assert got == {(i,): float(i) for i in range(n + 1)}
    reach = query(SSSP, semiring="boolean")
    B = edges({(i, i + 1): True for i in range(60)}, "boolean")
    got = reach.solve(S=nodes({(0,): True}, "boolean"), E=B, max_rounds=5).to_dict()
    assert len(got) == 61
    # a ring still obeys max_rounds: 60 rounds of path counts refused after 5
    paths = query(SSSP, semiring="counting")
    C = edges({(i, i + 1): 1 for i in range(60)}, "counting")
    with pytest.raises(DivergenceError, match="after 5 rounds"):
        paths.solve(S=nodes({(0,): 1}, "counting"), E=C, max_rounds=5)


# -- paths along witnesses (issue 37, point 9) --------------------------------------------------
def check_paths(out: Factor, E: dict, sources: dict, dist: dict) -> None:
    """Every key's path starts at a source, follows edges of E and costs its distance."""
    for (v,), d in dist.items():
        p = out.path((v,))
        assert p[-1] == (v,) and p[0] in sources, p
        cost = sources[p[0]] + sum(E[(a, b)] for (a,), (b,) in zip(p, p[1:], strict=False))
        assert cost == pytest.approx(d), (v, p, cost, d)
        assert len(set(p)) == len(p), p


@settings(max_examples=15)
@given(
    st.integers(2, 9),
    st.dictionaries(
        st.tuples(st.integers(0, 8), st.integers(0, 8)).filter(lambda e: e[0] != e[1]),
        st.sampled_from([0.0, 1.0, 2.0, 3.5]),
        max_size=25,
    ),
    st.sets(st.integers(0, 8), min_size=1, max_size=2),
)
def test_paths_follow_witnesses_and_cost_the_scipy_distance(n, E, srcs):
    E = {(a % n, b % n): w for (a, b), w in E.items() if a % n != b % n}
    sources = {(s % n,): 0.0 for s in srcs}
    sp = query(SSSP, semiring="min-plus")
    out = sp.solve(S=nodes(sources), E=edges(E), witness=True)
    # scipy: 0-weight edges need an explicit graph (a dense 0 means no edge)
    g = csr_matrix((list(E.values()), ([a for a, _ in E], [b for _, b in E])), shape=(n, n))
    g.data[g.data == 0] = 1e-300  # zero-weight edges kept (csgraph drops explicit zeros)
    want = dijkstra(g, indices=[s for (s,) in sources], min_only=True)
    dist = {(v,): float(round(d, 6)) for v, d in enumerate(want) if np.isfinite(d)}
    assert out.to_dict() == pytest.approx(dist)
    check_paths(out, E, {k: 0.0 for k in sources}, dist)


def test_path_of_the_design_example_and_ties_on_zero_weight_cycles(spark):
    sp = query(SSSP, semiring="min-plus")
    E = {(0, 1): 4.0, (0, 2): 1.0, (2, 1): 2.0, (1, 3): 1.0, (3, 7): 2.0}
    E |= {(7, 8): 0.0, (8, 7): 0.0, (9, 7): 0.0, (8, 9): 0.0}  # 7, 8, 9 tie at 7.0
    out = sp.solve(S=nodes({(0,): 0.0}), E=edges(E), witness=True)
    assert out.path((7,)) == [(0,), (2,), (1,), (3,), (7,)]
    assert out.path(7) == out.path((7,))  # a bare value for an answer of one variable
    assert out.path((9,)) == [(0,), (2,), (1,), (3,), (7,), (8,), (9,)]
    assert out.path((0,)) == [(0,)]
    check_paths(out, E, {(0,): 0.0}, out.to_dict())
    # max-product, weight-1 edges tie too; a path is the product of its edges
    mp = query(SSSP, semiring="max-product")
    P = {(0, 1): 0.5, (1, 2): 1.0, (2, 1): 1.0, (0, 2): 0.25}
    best = mp.solve(S=nodes({(0,): 1.0}, "max-product"), E=edges(P, "max-product"), witness=True)
    assert best.path((2,)) == [(0,), (1,), (2,)]


def test_a_path_is_read_off_the_witness_pointers(monkeypatch):
    """A path followed each key's predecessor only after a tree of every key's attaining
    derivations was built (one more solve: about a second at a million edges, on every
    view tick that asked for a path); it now reads the witness frame's own pointers."""
    import pandas as pd

    from faq.paths import WitnessPaths
    from incremental import IncrementalView

    def no_tree(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the tree of derivations was built")

    monkeypatch.setattr(WitnessPaths, "_tree", no_tree)
    sp = query(SSSP, semiring="min-plus")
    E = {(0, 1): 4.0, (0, 2): 1.0, (2, 1): 2.0, (1, 3): 1.0}
    out = sp.solve(S=nodes({(0,): 0.0}), E=edges(E), witness=True)
    assert out.path((3,)) == [(0,), (2,), (1,), (3,)]
    rows = pd.DataFrame({"a": [a for a, _ in E], "b": [b for _, b in E], "value": [*E.values()]})
    view = IncrementalView(sp, witness=True, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=rows)
    view.step(E=pd.DataFrame({"a": [2], "b": [1], "value": [2.0], "_weight": [-1]}))
    assert view.result().path((3,)) == [(0,), (1,), (3,)]


def test_path_errors_are_clear(spark):
    sp = query(SSSP, semiring="min-plus")
    S, E = nodes({(0,): 0.0}), edges({(0, 1): 1.0, (1, 2): 1.0})
    out = sp.solve(S=S, E=E, witness=True)
    with pytest.raises(ValueError, match=r"key \(5,\) is not in the answer 'D' \(3 keys\)"):
        out.path((5,))
    with pytest.raises(ValueError, match=r"not in the answer 'D'.*keys have 1 value"):
        out.path((1, 2))
    with pytest.raises(ValueError, match="no witness paths: solve a program with witness=True"):
        sp.solve(S=S, E=E).path((1,))
    with pytest.raises(ValueError, match="no witness paths"):
        query("Q(b) :- E(a, b)", semiring="min-plus").solve(E=E, witness=True).path((1,))
    closure = query("T(x, y) :- E(x, y)\nT(x, z) :- T(x, y), T(y, z)", semiring="min-plus")
    t = closure.solve(E=E, witness=True)
    with pytest.raises(ValueError, match=r"reads 2 atoms of the recursive.*trees, not paths"):
        t.path((0, 2))


def test_paths_through_mutual_recursion_alternate_relations(spark):
    text = "Ev(x) :- S(x)\nEv(y) :- Od(x), E(x, y)\nOd(y) :- Ev(x), E(x, y)"
    E = {(0, 1): 1.0, (1, 2): 1.0, (2, 3): 1.0, (0, 3): 5.0, (3, 4): 1.0}
    out = query(text, semiring="min-plus").solve(S=nodes({(0,): 0.0}), E=edges(E), witness=True)
    assert out.to_dict() == {(0,): 0.0, (2,): 2.0, (4,): 4.0}
    assert out.path((4,)) == [(0,), (1,), (2,), (3,), (4,)]  # an even number of edges


@settings(max_examples=15)
@given(
    st.dictionaries(
        st.tuples(st.integers(0, 6), st.integers(0, 6)).filter(lambda e: e[0] != e[1]),
        st.sampled_from([1.0, 2.0, 3.0, 5.0]),
        max_size=20,
    ),
    st.integers(0, 6),
    st.sampled_from([2.0, 4.0, math.inf]),
)
def test_paths_of_a_user_bottleneck_semiring_attain_its_values(E, src, cap):
    # ⊗ = min is not strictly monotone: many predecessors tie, and a path still exists
    widest = semirings.Semiring(name="widest", zero=-math.inf, one=math.inf, add=max, mul=min)
    sp = query(SSSP, semiring=widest)
    out = sp.solve(S=nodes({(src,): cap}, widest), E=edges(E, widest), witness=True)
    for (v,), value in out.to_dict().items():
        p = out.path((v,))
        assert p[0] == (src,) and p[-1] == (v,) and len(set(p)) == len(p)
        width = cap
        for (a,), (b,) in zip(p, p[1:], strict=False):
            width = min(width, E[(a, b)])
        assert width == value, (v, p, width, value)


def test_a_long_fixpoint_logs_its_rounds_while_it_runs(caplog, use_settings):
    """A fixpoint is never silent: with progress on, its rounds and Δ sizes are logged as
    it goes (at most every progress_seconds; here every round), then its convergence."""
    import logging

    n = 40
    E = Factor.from_dict({(i, i + 1): 1.0 for i in range(n)}, vars=["a", "b"], semiring="min-plus")
    S = Factor.from_dict({(0,): 0.0}, vars=["a"], semiring="min-plus")
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    use_settings(progress_seconds=1e-9)
    with caplog.at_level(logging.INFO, logger="faq"):
        assert len(sp.solve(S=S, E=E).to_dict()) == n + 1
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fixpoint")]
    assert lines[0].startswith("fixpoint of D: round 1: ΔD 1 rows;"), lines[:3]
    assert any(ln.startswith(f"fixpoint of D: round {n}: ΔD 1 rows;") for ln in lines), lines
    assert lines[-1].startswith(f"fixpoint of D: converged after {n + 1} rounds in "), lines[-1]
    caplog.clear()
    use_settings(progress_seconds=3600.0)  # the first round and the end only
    with caplog.at_level(logging.INFO, logger="faq"):
        sp.solve(S=S, E=E)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fixpoint")]
    assert len(lines) == 2, lines
    assert lines[0].startswith("fixpoint of D: round 1: ΔD 1 rows;"), lines
    assert lines[1].startswith(f"fixpoint of D: converged after {n + 1} rounds in "), lines
