"""Rules of two atoms over keyed tables by lookups and one pair join (faq.kernel.paired):
the same answers as the general driver path, for every selective built-in semiring."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import Factor, query, solve_delta
from faq.kernel import KeyedTable, Table
from faq.kernel.paired import paired_at, paired_delta
from incremental.driver_state import LocalKeyed
from incremental.protocol import How
from incremental.terms import recompute_groups
from semirings.local import local_ops

SEMIRINGS = [semirings.MIN_PLUS, semirings.MAX_PLUS, semirings.MAX_PRODUCT, semirings.BOOLEAN]

RULES = [
    "Q(y) :- D(x), E(x, y)",  # a shortest-paths round
    "Q(y, x) :- E(x, y), D(y)",
    "Q(x, z) :- E(x, y), F(y, z)",
    "Q(z) :- E(x, y), F(y, z)",  # the head in one atom only
    "Q(x) :- E(x, y), F(x, y)",  # two shared variables
    "Q(x, z) :- E(y, x), F(z, y)",  # shared variable in the second column
    "Q(x) :- S(x)",  # one atom (the base rule of a shortest-paths program)
    "Q(y) :- E(x, y)",  # one atom, projected
]


def _values(S: semirings.Semiring, draw, n: int) -> np.ndarray:
    if S is semirings.BOOLEAN:
        return np.ones(n, dtype=bool)
    if S is semirings.MAX_PRODUCT:
        return np.array([draw(st.sampled_from([0.25, 0.5, 1.0])) for _ in range(n)])
    return np.array([float(draw(st.integers(-3, 3))) for _ in range(n)])


def _rows(draw, S, arity: int, most: int) -> Table:
    keys = draw(st.lists(st.tuples(*[st.integers(0, 4)] * arity), unique=True, max_size=most))
    cols = tuple(np.array([k[i] for k in keys], dtype=np.int64) for i in range(arity))
    names = tuple(f"c{i}" for i in range(arity))
    return Table(names, cols, _values(S, draw, len(keys)))


def _keyed(draw, S, arity: int) -> KeyedTable:
    """A keyed table with a base and overrides (some keys changed, some removed)."""
    o = local_ops(S)
    kt = KeyedTable.of(_rows(draw, S, arity, 12), o)
    later = _rows(draw, S, arity, 6)
    if later.rows:
        gone = np.array([draw(st.booleans()) for _ in range(later.rows)], dtype=bool)
        vals = later.values.copy()
        vals[gone] = S.zero
        kt = kt.replace(Table(later.vars, later.cols, vals))
    return kt


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_paired_delta_gives_what_the_general_path_gives(data):
    """``solve_delta`` over keyed relations of a two-atom rule takes the paired path and
    agrees exactly with the general path (a variable order given), every term read."""
    S = data.draw(st.sampled_from(SEMIRINGS))
    q = query(data.draw(st.sampled_from(RULES[:-2])), semiring=S)
    atoms = q.rule.atoms
    kts = {a.relation: _keyed(data.draw, S, len(a.vars)) for a in atoms}
    changed = data.draw(st.sampled_from([a for a in atoms]))
    change = _rows(data.draw, S, len(changed.vars), 8)
    rels = {n: Factor.keyed(kt, S, n) for n, kt in kts.items()}
    deltas = {changed.relation: Factor.from_table(change, S, "d")}
    fast = solve_delta(q, rels, deltas)
    order = [v for v in dict.fromkeys(v for a in atoms for v in a.vars) if v not in q.rule.head]
    slow = solve_delta(q, rels, deltas, order=order)
    assert fast.change.to_dict() == slow.change.to_dict()
    if change.rows:
        assert [t.methods or t.skipped for t in fast.terms] in ([("pair",)], [True])
    assert dict(fast.touched.items()).keys() == dict(slow.touched.items()).keys()
    for n in fast.touched:
        assert fast.touched[n].to_dict() == slow.touched[n].to_dict()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_paired_at_gives_what_the_general_recompute_gives(data):
    """The output of a two-atom rule at some head keys, paired, equals the general
    restricted recompute (a variable order given) and the whole output at those keys."""
    S = data.draw(st.sampled_from(SEMIRINGS))
    q = query(data.draw(st.sampled_from(RULES)), semiring=S)
    rule = q.rule
    rels = {a.relation: LocalKeyed(_keyed(data.draw, S, len(a.vars))) for a in rule.atoms}
    keys = data.draw(
        st.lists(st.tuples(*[st.integers(0, 5)] * len(rule.head)), unique=True, max_size=6)
    )
    cols = tuple(np.array([k[i] for k in keys], dtype=np.int64) for i in range(len(rule.head)))
    groups = Table(rule.head, cols, None)
    fast = recompute_groups(rule, S, rels, groups, How("auto", "auto", True))
    order = [v for v in dict.fromkeys(v for a in rule.atoms for v in a.vars) if v not in rule.head]
    slow = recompute_groups(rule, S, rels, groups, How(order, "auto", True))
    want = Factor.from_table(slow.table, S, "Q").to_dict()
    assert Factor.from_table(fast.table, S, "Q").to_dict() == want
    whole = q.solve(**{n: r.factor(S, n) for n, r in rels.items()}).to_dict()
    assert want == {k: v for k, v in whole.items() if k in set(keys)}
    if any(set(rule.head) <= set(a.vars) for a in rule.atoms):
        kind = ("pair",) if len(rule.atoms) == 2 else ("lookup",)
        assert [t.methods for t in fast.terms] == [kind]


def test_paired_functions_decline_what_they_do_not_cover():
    """Not two atoms, a relation read twice, a repeated variable, a ⊕ that is not
    idempotent, two changed relations, a head in no one atom: None (the general path)."""
    mp = local_ops(semirings.MIN_PLUS)
    kt = KeyedTable.of(Table(("a", "b"), (np.array([1]), np.array([2])), np.array([1.0])), mp)
    d = Table(("a", "b"), (np.array([2]), np.array([3])), np.array([1.0]))
    e = {"E": kt, "F": kt}
    assert paired_delta([("E", ("x", "y"))], ("x",), mp, e, {"E": d}) is None
    assert paired_delta([("E", ("x", "y")), ("E", ("y", "z"))], ("x",), mp, e, {"E": d}) is None
    assert paired_delta([("E", ("x", "x")), ("F", ("x", "z"))], ("z",), mp, e, {"E": d}) is None
    both = {"E": d, "F": d}
    assert paired_delta([("E", ("x", "y")), ("F", ("y", "z"))], ("x",), mp, e, both) is None
    z = local_ops(semirings.INTEGER)
    kz = KeyedTable.of(Table(("a", "b"), (np.array([1]), np.array([2])), np.array([1])), z)
    dz = Table(("a", "b"), (np.array([2]), np.array([3])), np.array([1]))
    atoms = [("E", ("x", "y")), ("F", ("y", "z"))]
    assert paired_delta(atoms, ("x",), z, {"E": kz, "F": kz}, {"E": dz}) is None
    assert paired_at(atoms, ("x", "z"), mp, e, [np.array([1]), np.array([3])]) is None
    got = paired_delta(atoms, ("x", "z"), mp, e, {"E": d})
    assert got is not None and got[1:] == (0, ("y", "x", "z"))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_replace_told_the_rows_held_keeps_the_same_contents_and_count(data):
    """``LocalKeyed.replace(new, old)`` (the rows held at those keys read already, and
    maybe more) gives the relation and row count of ``replace(new)``, which searches."""
    S = data.draw(st.sampled_from(SEMIRINGS))
    rel = LocalKeyed(_keyed(data.draw, S, 2))
    new = _rows(data.draw, S, 2, 8)
    if new.rows:
        gone = np.array([data.draw(st.booleans()) for _ in range(new.rows)], dtype=bool)
        vals = new.values.copy()
        vals[gone] = S.zero
        new = Table(new.vars, new.cols, vals)
    extra = _rows(data.draw, S, 2, 4)
    both = [np.concatenate([a, b]) for a, b in zip(new.cols, extra.cols, strict=True)]
    held = rel.at(both) if len(both[0]) else rel.at(new.cols)
    told, searched = rel.replace(new, held), rel.replace(new)
    assert told.rows == searched.rows == told.table().rows
    assert (
        Factor.from_table(told.table(), S, "R").to_dict()
        == Factor.from_table(searched.table(), S, "R").to_dict()
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_values_at_gives_each_keys_annotation_or_zero(data):
    """``KeyedTable.values_at``: the current annotation at each key asked (repeats and
    absent keys included, zero there), by the searches or, for keys that are not integers,
    through the prefix path."""
    S = data.draw(st.sampled_from(SEMIRINGS))
    kt = _keyed(data.draw, S, 2)
    held = Factor.from_table(kt.table(), S, "R").to_dict()
    keys = data.draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1))
    cols = [np.array([k[i] for k in keys], dtype=np.int64) for i in range(2)]
    got = kt.values_at(cols).tolist()
    assert got == [held.get(k, S.zero) for k in keys]
    words = [np.array([f"n{a}" for a in c]) for c in kt.table().cols]
    named = KeyedTable.of(Table(("a", "b"), tuple(words), kt.table().values), kt.ops)
    asked = [np.array([f"n{a}" for a in c]) for c in cols]
    assert named.values_at(asked).tolist() == got


def test_a_shortest_paths_view_runs_its_dred_steps_paired():
    """A tick of a maintained shortest-paths program runs its over-delete, rederive and
    improving steps as lookups and pair joins in the driver (no plan), and its answer is
    the batch solve's."""
    import pandas as pd

    from incremental import IncrementalView

    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    edges = pd.DataFrame({"src": [0, 1, 0, 2], "dst": [1, 2, 2, 3], "value": [1.0, 1.0, 5.0, 1.0]})
    view = IncrementalView(sp, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=edges)
    gone = pd.DataFrame({"src": [1, 0], "dst": [2, 3], "value": [1.0, 9.0], "_weight": [-1, 1]})
    view.step(E=gone)
    step = view.last_step
    assert step is not None and step.terms
    assert {t.methods for t in step.terms} <= {("pair",), ("lookup",)}
    assert {t.where for t in step.terms} == {"driver"}
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 5.0, (3,): 6.0}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_at_prefix_one_column_short_reads_the_tries_children(data):
    """``KeyedTable.at_prefix`` with integer keys one column short of the key (read as the
    children of their nodes in the base's trie, and as runs of the overrides' codes) gives
    every current row under those prefixes (overrides and removals included, repeated
    prefixes read once), as a model and the whole-key path over string keys do; also
    with a last column of floats (complex codes)."""
    S = data.draw(st.sampled_from(SEMIRINGS))
    kt = _keyed(data.draw, S, 3)
    held = Factor.from_table(kt.table(), S, "R").to_dict()
    asked = data.draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1))
    cols = [np.array([k[i] for k in asked], dtype=np.int64) for i in range(2)]
    got = kt.at_prefix(cols)
    want = {k: v for k, v in held.items() if k[:2] in set(asked)}
    assert got.rows == len(want)
    assert Factor.from_table(got, S, "R").to_dict() == want
    words = [np.array([f"n{a}" for a in c]) for c in kt.table().cols]
    named = KeyedTable.of(Table(("a", "b", "c"), tuple(words), kt.table().values), kt.ops)
    other = named.at_prefix([np.array([f"n{a}" for a in c]) for c in cols])
    assert other.rows == len(want)
    # a last column of floats (weights kept as a key), half the rows in the overrides
    a, b, c = kt.table().cols
    rows = Table(("a", "b", "c"), (a, b, c / 2.0), kt.table().values)
    half = rows.rows // 2
    weighted = KeyedTable.of(rows.take(np.arange(half)), kt.ops)
    if rows.rows > half:
        weighted = weighted.replace(rows.take(np.arange(half, rows.rows)))
    halved = Factor.from_table(weighted.at_prefix(cols), S, "R").to_dict()
    assert halved == {(x, y, z / 2.0): v for (x, y, z), v in want.items()}


def test_a_restricted_recompute_past_local_delta_rows_is_not_paired():
    """The rederive step takes the paired path only where the driver may run it: past the
    ``local_delta_rows`` setting and, its relations being in the driver, ``local_rows``
    (as for every other delta step) it is left to the general path, whatever the keyed
    runners could do; within them, it is paired."""
    import faq
    from faq.plan import keyed_runners

    S = semirings.MIN_PLUS
    o = local_ops(S)
    q = query("Q(y) :- D(x), E(x, y)", semiring=S)
    d = Table(("a",), (np.array([1, 2]),), np.array([0.0, 1.0]))
    e = Table(("a", "b"), (np.array([1, 2, 2]), np.array([2, 3, 4])), np.array([1.0, 1.0, 5.0]))
    rels = {"D": LocalKeyed(KeyedTable.of(d, o)), "E": LocalKeyed(KeyedTable.of(e, o))}
    groups = Table(("y",), (np.array([3, 4]),), None)
    auto = How("auto", "auto", True)
    within = recompute_groups(q.rule, S, rels, groups, auto)
    assert [t.methods for t in within.terms] == [("pair",)]
    with faq.settings(local_delta_rows=1):  # in the driver all the same (local_rows)
        held = recompute_groups(q.rule, S, rels, groups, auto)
    assert [t.methods for t in held.terms] == [("pair",)]
    with faq.settings(local_delta_rows=1, local_rows=1):
        past = recompute_groups(q.rule, S, rels, groups, auto)
    assert [t.methods for t in past.terms] != [("pair",)]
    want = {(3,): 2.0, (4,): 6.0}
    for got in (within, past):
        assert Factor.from_table(got.table, S, "Q").to_dict() == want
    assert keyed_runners("auto", "auto", q.rule.atoms)
    assert not keyed_runners(["x"], "auto", q.rule.atoms)
    assert not keyed_runners("auto", "binary", q.rule.atoms)
    assert not keyed_runners("auto", "auto", query("Q(y) :- E(1, y)", semiring=S).rule.atoms)


def test_a_driver_views_delta_terms_skip_solve_delta_where_the_keyed_runners_apply(monkeypatch):
    """A tick of a view kept in the driver runs its delta terms on the keyed runners
    directly (``incremental.terms.keyed_terms``: no query, factors or plan built), with the
    same terms, answer and reports as :func:`faq.solve_delta` gives; with ``join="binary"``
    the planner chooses, and ``solve_delta`` runs."""
    import pandas as pd

    import incremental.terms as terms
    from incremental import IncrementalView

    calls = []
    real = terms.solve_delta

    def counted(*args, **kwargs):
        calls.append(args[0].rule.name)
        return real(*args, **kwargs)

    monkeypatch.setattr(terms, "solve_delta", counted)
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    edges = pd.DataFrame({"src": [0, 0, 1, 1, 2], "dst": [1, 2, 2, 3, 3]})
    change = pd.DataFrame({"src": [0, 1], "dst": [3, 2], "_weight": [1, -1]})
    want = {(): 2}  # (0, 1, 3) and (0, 2, 3) after the change: (0, 1, 2) and (1, 2, 3) lost 1-2
    for join, runs in (("auto", False), ("binary", True)):
        view = IncrementalView(tri, E=edges, join=join)
        view.step(E=change)
        assert view.result().to_dict() == want
        assert bool(calls) == runs, join
        step = view.last_step
        assert step is not None and {t.where for t in step.terms} == {"driver"}
        calls.clear()
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    roads = pd.DataFrame({"src": [0, 1, 0, 2], "dst": [1, 2, 2, 3], "value": [1.0, 1.0, 5.0, 1.0]})
    view = IncrementalView(sp, S=pd.DataFrame({"x": [0], "value": [0.0]}), E=roads)
    view.step(E=pd.DataFrame({"src": [2], "dst": [4], "value": [2.0]}))
    assert calls == []
    assert view.result().to_dict() == {(0,): 0.0, (1,): 1.0, (2,): 2.0, (3,): 3.0, (4,): 4.0}


def test_a_driver_views_tick_makes_no_factor_and_asks_the_keyed_runners_once(monkeypatch):
    """The delta rule over relations held in the driver reads their keyed tables directly
    (``Keyed.keyed_table``): no factor is made where the keyed runners apply, and where they
    decline (``join="binary"``) ``solve_delta`` runs over the factors without the runners
    being asked a second time."""
    import pandas as pd

    import incremental.terms as terms
    from incremental import IncrementalView
    from incremental.driver_state import LocalKeyed

    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    edges = pd.DataFrame({"src": [0, 0, 1, 1, 2], "dst": [1, 2, 2, 3, 3]})
    change = pd.DataFrame({"src": [0, 1], "dst": [3, 2], "_weight": [1, -1]})
    made: list[str] = []
    asked: list[bool] = []
    factor, runners = LocalKeyed.factor, terms.keyed_terms
    monkeypatch.setattr(
        LocalKeyed, "factor", lambda self, S, n: made.append(n) or factor(self, S, n)
    )
    monkeypatch.setattr(
        terms,
        "keyed_terms",
        lambda *a: asked.append(True) or runners(*a),  # type: ignore[func-returns-value]
    )
    for join, factors in (("auto", []), ("binary", ["E"])):
        view = IncrementalView(tri, E=edges, join=join)
        made.clear()
        asked.clear()
        view.step(E=change)
        assert made == factors and asked == [True], join
        assert view.result().to_dict() == {(): 2}
