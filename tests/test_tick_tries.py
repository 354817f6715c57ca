"""A tick of a driver-state view over integer counts: the delta rule as seeded joins on tries.

:func:`faq.kernel.seeded.seeded_delta` reads each relation as its base (through a trie
built once per base) plus a correction (the overrides minus the base at their keys), and
:class:`faq.kernel.KeyedTable` answers ``at`` and ``replace`` by binary searches in tries
of the base and of the overrides.  Oracles:

* the general path of :func:`faq.solve_delta` (the same relations as plain local tables:
  rounds of lookups, then each term on the local kernel) gives the same ΔQ;
* a dict model of the relation: ``at``, ``table()`` and ``base ⊕ correction()`` after
  random changes, including removals and folds into a new base;
* :func:`faq.reference_solve` over a model of the relations after every tick of a view
  whose overrides are folded often (small ``log_rows``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq.kernel.seeded as seeded
import semirings
from faq import Factor, query, reference_solve, solve_delta
from faq.kernel import KeyedTable, Table, build_trie, group_reduce
from faq.kernel.seeded import seeded_delta
from incremental import IncrementalView
from semirings.local import local_ops

Z = semirings.INTEGER
OPS = local_ops(Z)
QUERIES = [
    "Q() :- E(a, b), E(b, c), E(a, c)",
    "Q(a) :- E(a, b), E(b, c), E(a, c)",
    "Q(a, c) :- R(a, b), S(b, c)",
    "Q() :- R(a, b), S(b, c), R(c, d), S(d, a)",
    "Q(b) :- R(a, b), S(b, c), T(b)",
]

edges = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(-2, 3)), max_size=25)


def keyed_of(rows: list[tuple[int, int, int]]) -> KeyedTable:
    t = table_of(rows, 2)
    return KeyedTable.of(group_reduce(t, t.vars, OPS), OPS)


def table_of(rows: list[tuple[int, ...]], arity: int) -> Table:
    cols = tuple(np.asarray([r[i] for r in rows], dtype=np.int64) for i in range(arity))
    vals = np.asarray([r[arity] for r in rows], dtype=np.int64)
    return Table(tuple(f"x{i}" for i in range(arity)), cols, vals, unique=False)


def as_dict(t: Table) -> dict[tuple[int, ...], int]:
    assert t.values is not None
    out = Counter()
    for i in range(t.rows):
        out[tuple(int(c[i]) for c in t.cols)] += int(t.values[i])
    return {k: v for k, v in out.items() if v}


@settings(max_examples=40)
@given(first=edges, changes=st.lists(edges, max_size=5), probe=edges, fold=st.booleans())
def test_keyed_table_reads_agree_with_a_model(use_settings, first, changes, probe, fold):
    """``at``, ``table()`` and ``base ⊕ correction()`` after random ⊕-changes."""
    use_settings(log_rows=3 if fold else 10_000, log_fraction=0.0)
    kt = keyed_of(first)
    model = Counter()
    for u, v, w in first:
        model[(u, v)] += w
    for ch in changes:
        before = kt
        kt, old, after = kt.plus(table_of(ch, 2))
        named = as_dict(table_of(ch, 2))  # the change's keys (⊕ of its rows not zero)
        assert as_dict(old) == {k: v for k, v in as_dict(before.table()).items() if k in named}
        for u, v, w in ch:
            model[(u, v)] += w
        assert {k: int(model[k]) for k in as_dict(after)} == as_dict(after)
    want = {k: v for k, v in model.items() if v}
    assert as_dict(kt.table()) == want
    assert kt.rows == len(want)
    keys = sorted({(u, v) for u, v, _ in probe})
    cols = [np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2)]
    if keys:
        assert as_dict(kt.at(cols)) == {k: want[k] for k in keys if k in want}
    whole = Table(kt.vars, *_cat(kt.base, kt.correction()), unique=False)
    assert as_dict(whole) == want


weighted = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.integers(0, 5),
        st.sampled_from([0.5, 1.0, 2.0, 7.5, float("inf")]),  # inf: min-plus's zero (gone)
    ),
    max_size=25,
)


@settings(max_examples=40)
@given(first=weighted, changes=st.lists(weighted, max_size=5), probe=weighted, fold=st.booleans())
def test_at_over_float_annotations_agrees_with_a_model_and_the_prefix_path(
    use_settings, first, changes, probe, fold
):
    """``at`` of a keyed table with float annotations over integer keys (a shortest-paths
    view's distances and edges) searches the base's trie and the overrides: after random
    replacements, removals (min-plus's zero, inf) and folds, it gives the model's rows,
    and the rows :meth:`KeyedTable.at_prefix`'s path (``_leading``) gives."""
    use_settings(log_rows=3 if fold else 10_000, log_fraction=0.0)
    ops = local_ops(semirings.MIN_PLUS)

    def table(rows: list[tuple[int, int, float]]) -> Table:
        last = {(u, v): w for u, v, w in rows}  # distinct keys: the last row of each wins
        cols = tuple(np.asarray([k[i] for k in last], dtype=np.int64) for i in range(2))
        return Table(("x0", "x1"), cols, np.asarray(list(last.values()), dtype=np.float64))

    def rows_of(t: Table) -> dict[tuple[int, int], float]:
        assert t.values is not None
        return {(int(a), int(b)): float(w) for a, b, w in zip(*t.cols, t.values, strict=True)}

    start = {k: w for k, w in rows_of(table(first)).items() if w != float("inf")}
    kt = KeyedTable.of(
        Table(
            ("x0", "x1"),
            tuple(np.asarray([k[i] for k in start], dtype=np.int64) for i in range(2)),
            np.asarray(list(start.values()), dtype=np.float64),
        ),
        ops,
    )
    model = dict(start)
    for ch in changes:
        t = table(ch)
        kt = kt.replace(t)
        for k, w in rows_of(t).items():
            if w == float("inf"):
                model.pop(k, None)
            else:
                model[k] = w
    keys = sorted({(u, v) for u, v, _ in probe})
    if not keys:
        return
    cols = [np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2)]
    want = {k: model[k] for k in keys if k in model}
    assert rows_of(kt.at(cols)) == want
    assert rows_of(kt._leading(cols)) == want


wide = st.lists(
    st.tuples(
        st.sampled_from([-3, 0, 2, 7, 2**40, -(2**41)]),
        st.sampled_from([-1, 0, 5, 2**35]),
        st.integers(-2, 3),
    ),
    max_size=12,
)


@settings(max_examples=40)
@given(first=wide, changes=st.lists(wide, min_size=1, max_size=5), probe=wide)
def test_overrides_stay_in_key_order_and_are_found_by_code_or_trie(
    use_settings, first, changes, probe
):
    """The overrides of integer annotations stay sorted by key after every change, so a
    key is found by one binary search in their codes (narrow spans) or in their trie
    (spans too wide for one int64 code; negative keys; probes outside the overrides'
    range): ``at`` agrees with a model either way."""
    use_settings(log_rows=10_000, log_fraction=0.0)
    kt = keyed_of(first)
    model = Counter()
    for u, v, w in first:
        model[(u, v)] += w
    for ch in changes:
        kt, _, _ = kt.plus(table_of(ch, 2))
        for u, v, w in ch:
            model[(u, v)] += w
        over = list(zip(*(c.tolist() for c in kt.over.cols), strict=True))
        assert over == sorted(set(over))
    want = {k: v for k, v in model.items() if v}
    keys = sorted({(u, v) for u, v, _ in probe} | set(model))
    cols = [np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2)]
    assert as_dict(kt.at(cols)) == {k: want[k] for k in keys if k in want}


def _cat(a: Table, b: Table) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    cols = tuple(np.concatenate([x, y]) for x, y in zip(a.cols, b.cols, strict=True))
    return cols, np.concatenate([a.values, b.values])


@pytest.mark.parametrize("text", QUERIES)
@settings(max_examples=25)
@given(data=st.data())
def test_seeded_terms_agree_with_the_general_path(spark, use_settings, text, data):
    """ΔQ on keyed relations (with overrides) equals ΔQ on the same relations as tables,
    with the compiled sums on one thread or split over three (a seed row of two or more)."""
    use_settings(
        log_rows=10_000, log_fraction=0.0, delta_thread_rows=data.draw(st.sampled_from([2, 512]))
    )
    q = query(text, semiring="integer")
    keyed, plain, deltas = {}, {}, {}
    for name, arity in q.rule.relations.items():
        kt = KeyedTable.of(_table(data.draw(edges), arity), OPS)
        for _ in range(data.draw(st.integers(0, 2))):  # overrides: changes kept in the log
            kt = kt.plus(_table(data.draw(edges), arity))[0]
        vars_ = tuple(f"x{i}" for i in range(arity))
        keyed[name] = Factor.keyed(kt, Z, name)
        plain[name] = Factor.from_table(Table(vars_, *_whole(kt)), Z, name)
        if data.draw(st.booleans()):
            d = _table(data.draw(edges), arity)
            if d.rows:
                deltas[name] = Factor.from_table(d, Z, f"d{name}")
    if not deltas:
        return
    atoms = [(a.relation, a.vars) for a in q.rule.atoms]
    kts = {n: f.source.keyed for n, f in keyed.items()}
    tables = {n: f.to_table() for n, f in deltas.items()}
    assert seeded_delta(atoms, q.rule.head, OPS, kts, tables) is not None  # the path runs
    cores = seeded._CORES
    seeded._CORES = 3  # whatever the machine has: three threads, seed rows taken in turn
    try:
        fast = solve_delta(q, keyed, deltas)
    finally:
        seeded._CORES = cores
    slow = solve_delta(q, plain, deltas)
    assert fast.change.to_dict() == slow.change.to_dict()
    assert fast.where == slow.where == "driver"


def _table(rows: list[tuple[int, int, int]], arity: int) -> Table:
    """Rows ``(u, v, w)`` as a consolidated table of arity 1 (``u``) or 2 (``u, v``)."""
    t = table_of([(*r[:arity], r[2]) for r in rows], arity)
    return group_reduce(t, t.vars, OPS)


def _whole(kt: KeyedTable) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    t = kt.table()
    return t.cols, t.values


def test_seeded_delta_declines_what_it_does_not_cover():
    kt = KeyedTable.of(_table([(1, 2, 1)], 2), OPS)
    d = {"E": _table([(2, 3, 1)], 2)}
    tri = [("E", ("a", "b")), ("E", ("b", "c")), ("E", ("a", "c"))]
    assert seeded_delta(tri, (), OPS, {"E": kt}, d) is not None
    # a repeated variable, a relation not keyed, real annotations, a disconnected atom
    assert seeded_delta([("E", ("a", "a"))], (), OPS, {"E": kt}, d) is None
    assert seeded_delta(tri, (), OPS, {}, d) is None
    real = local_ops(semirings.REAL)
    kr = KeyedTable.of(Table(("a", "b"), kt.base.cols, kt.base.values.astype(float)), real)
    assert seeded_delta(tri, (), real, {"E": kr}, d) is None
    apart = [("E", ("a", "b")), ("E", ("c", "d"))]
    assert seeded_delta(apart, (), OPS, {"E": kt}, d) is None


@settings(max_examples=15)
@given(first=edges, ticks=st.lists(edges, min_size=1, max_size=8))
def test_a_view_whose_log_folds_often_matches_batch(spark, use_settings, first, ticks):
    """Counting triangles per node over ticks that insert and retract, folding every few."""
    use_settings(log_rows=4, log_fraction=0.0)
    q = query("Q(a) :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    model: Counter = Counter()

    def delta(rows):
        out = {}
        for u, v, w in rows:
            w = max(w, -model[(u, v)] - out.get((u, v), 0))  # never below zero
            if w:
                out[(u, v)] = out.get((u, v), 0) + w
        return {k: w for k, w in out.items() if w}

    init = delta([(u, v, abs(w)) for u, v, w in first])
    given_ = {"E": Factor.from_dict(init, ("a", "b"), "counting")} if init else {}
    view = IncrementalView(q, state="driver", **given_)
    model.update(init)
    for rows in ticks:
        d = delta(rows)
        view.step(E=Factor.from_dict(d, ("a", "b"), "integer") if d else None)
        model.update(d)
        current = {k: v for k, v in model.items() if v}
        want = reference_solve(q.rule, "counting", {"E": current})
        assert view.result().to_dict() == {k: v for k, v in want.items() if v}


@settings(max_examples=20)
@given(first=edges, changes=st.lists(edges, min_size=1, max_size=8))
def test_a_fold_merges_into_the_tries_it_had(use_settings, first, changes):
    """After a fold, the tries built before it are merged, not rebuilt by a sort: they
    equal tries built afresh from the folded relation, and reads agree with a model."""
    use_settings(log_rows=3, log_fraction=0.0)
    kt = keyed_of([(u, v - 2, w) for u, v, w in first])  # negative keys too
    model = Counter({(u, v - 2): 0 for u, v, _ in first})
    for u, v, w in first:
        model[(u, v - 2)] += w
    for ch in changes:
        kt.trie((1, 0))  # a trie in another column order, to be merged at the fold
        kt = kt.plus(table_of([(u, v - 2, w) for u, v, w in ch], 2))[0]
        for u, v, w in ch:
            model[(u, v - 2)] += w
        want = {k: v for k, v in model.items() if v}
        assert as_dict(kt.table()) == want and kt.rows == len(want)
        if kt.over.rows == 0 and kt.base.rows:  # just folded: the tries agree
            t = kt.table()
            for perm in ((0, 1), (1, 0)):
                names = tuple(f"c{k}" for k in perm)
                fresh = build_trie(Table(names, tuple(t.cols[k] for k in perm), t.values), names)
                got = kt.trie(perm)
                mine, theirs = (*got.vals, *got.starts), (*fresh.vals, *fresh.starts)
                assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
                assert np.array_equal(got.values, fresh.values)


@pytest.mark.parametrize("log_rows", [2, 10_000])
def test_string_keys_take_the_same_path(spark, use_settings, log_rows):
    """Keys that are not integers: searched by numpy (not the compiled searches), folded
    by a sort (no 64-bit sort key); the counts still match batch at every tick."""
    use_settings(log_rows=log_rows, log_fraction=0.0)
    import pandas as pd

    q = query("Q(a) :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    rng = np.random.default_rng(5)
    model: Counter = Counter()
    names = [f"n{i}" for i in range(7)]
    first = {(names[u], names[v]) for u, v in rng.integers(0, 7, (15, 2)) if u != v}
    model.update(dict.fromkeys(first, 1))
    view = IncrementalView(q, state="driver", E=pd.DataFrame(sorted(first), columns=["a", "b"]))
    for _ in range(6):
        present = sorted(k for k, v in model.items() if v)
        gone = [present[i] for i in rng.choice(len(present), 2, replace=False)]
        new = {(names[u], names[v]) for u, v in rng.integers(0, 7, (3, 2)) if u != v}
        rows = [(*k, -1) for k in gone] + [(*k, 1) for k in sorted(new - set(present))]
        view.step(E=pd.DataFrame(rows, columns=["a", "b", "_weight"]))
        for u, v, w in rows:
            model[(u, v)] += w
        want = reference_solve(q.rule, "counting", {"E": {k: v for k, v in model.items() if v}})
        assert view.result().to_dict() == {k: v for k, v in want.items() if v}


@settings(max_examples=30)
@given(first=edges, changes=st.lists(edges, min_size=2, max_size=8), wait=st.booleans())
def test_a_fold_on_the_helper_thread_keeps_every_change(use_settings, first, changes, wait):
    """Overrides past the log bound are merged into the base on the helper thread while
    changes go on; when the merge is done the next change swaps it in, keeping as
    overrides only the keys changed since it began.  Every read agrees with a model
    before, during and after (``wait``: the merge finishes before the next change)."""
    use_settings(log_rows=2, log_fraction=0.0)
    kt = keyed_of(first)
    kt.trie((0, 1))  # the trie the fold merges into
    model = Counter()
    for u, v, w in first:
        model[(u, v)] += w
    began = swapped = 0
    for ch in changes:
        before = kt
        kt = kt.plus(table_of(ch, 2))[0]
        for u, v, w in ch:
            model[(u, v)] += w
        began += before.fold is None and kt.fold is not None
        if before.fold is not None and kt.base is not before.base:
            swapped += 1
            since = {
                k for t in before.fold.touched for k in zip(*(c.tolist() for c in t), strict=True)
            }
            since |= {(u, v) for u, v, _ in ch}
            assert set(zip(*(c.tolist() for c in kt.over.cols), strict=True)) <= since
        want = {k: v for k, v in model.items() if v}
        assert as_dict(kt.table()) == want and kt.rows == len(want)
        keys = sorted(model)
        cols = [np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2)]
        if keys:
            assert as_dict(kt.at(cols)) == {k: want[k] for k in keys if k in want}
        assert as_dict(Table(kt.vars, *_cat(kt.base, kt.correction()), unique=False)) == want
        if wait and kt.fold is not None:
            kt.fold.job.result()
    if wait and began > 1:
        assert swapped, "a finished fold is swapped in at the next change"


@pytest.mark.parametrize("weights", ["float", "wide"])
def test_a_log_whose_keys_cannot_be_merged_is_folded_at_once(use_settings, weights):
    """Keys that do not fit the merge's one 64-bit sort key (a min-plus program's rows:
    keys and a float weight; integers of too wide a range) cannot be folded on the
    helper thread.  The log is then folded at once, at most one change later: it used
    to stay unfolded for good (each change re-sorted the whole log, so a min-plus
    view's tick grew with it)."""
    use_settings(log_rows=4, log_fraction=0.0)
    ops = local_ops(semirings.INTEGER)
    kind = np.float64 if weights == "float" else np.int64
    empty = Table(("a", "w"), (np.empty(0, np.int64), np.empty(0, kind)), np.empty(0, np.int64))
    kt = KeyedTable.of(empty, ops)
    kt.trie((0, 1))
    model = Counter()
    for i in range(12):
        keys = np.arange(3 * i, 3 * i + 3, dtype=np.int64)
        w = keys.astype(np.float64) / 2 if weights == "float" else keys * 2**58 - 2**62
        kt = kt.plus(Table(("a", "w"), (keys, w), np.ones(3, np.int64)))[0]
        if kt.fold is not None:
            kt.fold.job.result()
        model.update(zip(keys.tolist(), w.tolist(), strict=True))
        assert kt.over.rows <= 2 * 4 + 3, f"change {i}: {kt.over.rows} rows still in the log"
        t = kt.table()
        got = zip(t.cols[0].tolist(), t.cols[1].tolist(), t.values.tolist(), strict=True)
        assert {(a, w): n for a, w, n in got} == dict(model)
    assert kt.base.rows >= 24


weighted = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.sampled_from([-1.5, 0.0, 1.0, 2.5, 1e300, float("inf")]),
        st.integers(-2, 3),
    ),
    max_size=20,
)


@settings(max_examples=40)
@given(first=weighted, changes=st.lists(weighted, max_size=6), probe=weighted, fold=st.booleans())
def test_counts_of_weighted_rows_are_found_by_complex_codes(
    use_settings, first, changes, probe, fold
):
    """A program view's multiset of weighted rows: integer counts keyed by an integer
    and a float weight.  Its log is kept in key order and coded as complex numbers
    (``semirings.local.row_keys``); ``at``, ``at_prefix``, ``lookup`` and ``table``
    agree with a model after random ⊕-changes."""
    use_settings(log_rows=3 if fold else 10_000, log_fraction=0.0)

    def tab(rows):
        cols = (np.asarray([r[0] for r in rows], np.int64), np.asarray([r[1] for r in rows]))
        cols = (cols[0], cols[1].astype(np.float64))
        return Table(("k", "w"), cols, np.asarray([r[2] for r in rows], np.int64), unique=False)

    def read(t):
        out = Counter()
        for i in range(t.rows):
            out[(int(t.cols[0][i]), float(t.cols[1][i]))] += int(t.values[i])
        return {k: v for k, v in out.items() if v}

    kt = KeyedTable.of(group_reduce(tab(first), ("k", "w"), OPS), OPS)
    model = Counter()
    for k, w, n in (*first, *(r for ch in changes for r in ch)):
        model[(k, w)] += n
    for ch in changes:
        kt = kt.plus(tab(ch))[0]
    want = {k: v for k, v in model.items() if v}
    assert read(kt.table()) == want and kt.rows == len(want)
    keys = sorted({(k, w) for k, w, _ in probe})
    if keys:
        cols = [np.asarray([k[0] for k in keys], np.int64), np.asarray([k[1] for k in keys])]
        assert read(kt.at(cols)) == {k: want[k] for k in keys if k in want}
        firsts = np.unique(cols[0])
        near = {k: v for k, v in want.items() if k[0] in set(firsts.tolist())}
        assert read(kt.at_prefix([firsts])) == near
        assert read(kt.lookup([{0: firsts}])) == near


@pytest.mark.parametrize("log_ticks", [8, 0])
def test_a_large_log_folds_early_once_the_changes_are_small(use_settings, log_ticks):
    """After a burst of large changes the log is far larger than a small change: the
    small change begins a fold beside the ticks (``log_ticks``), long before the log
    reaches ``log_rows``, and the next change swaps the folded base in, keeping in the
    log only what changed since.  With ``log_ticks=0`` the log keeps growing.  The
    contents match a dict model throughout."""
    use_settings(log_rows=1000, log_fraction=0.0, log_ticks=log_ticks)
    n = 400
    model = Counter({(i, i + 1): 1 for i in range(n)})
    kt = keyed_of([(u, v, w) for (u, v), w in model.items()])
    kt.trie((0, 1))  # the trie a delta rule builds; a fold merges into it

    def change(rows: list[tuple[int, int, int]]) -> KeyedTable:
        for u, v, w in rows:
            model[(u, v)] += w
        out = kt.plus(table_of(rows, 2))[0]
        want = {k: v for k, v in model.items() if v}
        assert as_dict(out.table()) == want and out.rows == len(want)
        return out

    kt = change([(i, i + 2, 1) for i in range(300)])  # the burst: 300 rows in the log
    assert kt.fold is None and kt.over.rows == 300  # a log of one change is not folded
    kt = change([(0, 1, -1)])  # a small change: 301 rows > 8 × 1 and > 1000 / 8
    if not log_ticks:
        assert kt.fold is None and kt.over.rows == 301
        return
    assert kt.fold is not None
    kt.fold.job.result()  # the helper thread's merge, done
    kt = change([(5, 9, 2)])  # swaps the folded base in
    assert kt.fold is None and kt.over.rows == 1  # only the key changed since
    assert kt.base.rows == n - 1 + 300
    assert kt.trie((0, 1))._first  # its dense first-level index: the fold's, not a tick's


@settings(max_examples=60)
@given(
    rows=st.dictionaries(st.tuples(st.integers(-3, 6), st.integers(-3, 6)), st.integers(1, 9)),
    changes=st.dictionaries(st.tuples(st.integers(-3, 6), st.integers(-3, 6)), st.integers(0, 9)),
)
def test_the_compiled_merge_of_a_fold_builds_the_trie_of_the_rows_after(rows, changes):
    """:func:`faq.kernel.merge.merge_into` of a two-level int64 trie (compiled, without
    the GIL, where numba is installed) gives the trie :func:`build_trie` makes of the rows
    after: the changed keys dropped, the nonzero ones added back (empty tries too)."""
    from faq.kernel.merge import merge_into, search_trie

    names = ("c0", "c1")

    def trie_of(d: dict[tuple[int, int], int]) -> object:
        keys = sorted(d)
        cols = tuple(np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2))
        return build_trie(Table(names, cols, np.asarray([d[k] for k in keys], np.int64)), names)

    tr = trie_of(rows)
    keys = [np.asarray([k[i] for k in changes], dtype=np.int64) for i in range(2)]
    vals = np.asarray(list(changes.values()), dtype=np.int64)
    found, at = search_trie(tr, keys)
    alive = np.flatnonzero(vals != 0)
    got = merge_into(tr, at[found], [c[alive] for c in keys], vals[alive])
    after = {**rows, **changes}
    want = trie_of({k: v for k, v in after.items() if v})
    assert got is not None and got.rows == want.rows
    mine = (*got.vals, *got.starts, got.values)
    for a, b in zip(mine, (*want.vals, *want.starts, want.values), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_a_view_starts_the_kernel_warm_up_before_its_first_tick(monkeypatch, tmp_path):
    # a fold's compiled merge runs on a helper thread; compiled there, in the middle of
    # the ticks, it held the GIL for 20-70 ms a kernel (measured on web-NotreDame with an
    # empty numba cache: ticks of 23-67 ms against an 8 ms median), so the view starts
    # the warm-up, which compiles or loads it, when it is built
    import incremental.view

    started: list[int] = []
    monkeypatch.setattr(incremental.view, "warm_up_in_background", lambda: started.append(1))
    view = IncrementalView(
        query("Q(a) :- E(a, b)", semiring="counting"),
        E=Factor.from_dict({(1, 2): 1}, vars=("src", "dst"), semiring="counting"),
    )
    assert started == [1]
    assert view.result().to_dict() == {(1,): 1}
    # a durable view reopened from its folder ticks (and folds) too
    q = query("Q(a) :- E(a, b)", semiring="counting")
    edges = Factor.from_dict({(1, 2): 1}, vars=("src", "dst"), semiring="counting")
    with IncrementalView(q, state_dir=tmp_path, E=edges):
        pass
    with IncrementalView(q, state_dir=tmp_path) as again:
        assert started == [1, 1, 1]
        assert again.result().to_dict() == {(1,): 1}


def test_a_change_codes_its_keys_once(use_settings, monkeypatch):
    # plus() searched the overrides by the change's key codes, then computed the same
    # codes again to patch the change into them: one key_codes call per change now,
    # and the contents still agree with a model
    import faq.kernel.keyed as keyed

    use_settings(log_rows=10_000, log_fraction=0.0)
    kt = keyed_of([(1, 2, 1), (2, 3, 1), (5, 9, 2)])
    kt, _, _ = kt.plus(table_of([(4, 4, 1)], 2))  # the overrides now hold a row
    calls: list[int] = []
    real = keyed.key_codes
    monkeypatch.setattr(keyed, "key_codes", lambda *a: calls.append(1) or real(*a))
    # the numpy path (the compiled one codes the keys inside its one call:
    # tests/test_plus_logged.py)
    monkeypatch.setattr(keyed.KeyedTable, "_plus_logged", lambda self, delta: None)
    model = {(1, 2): 1, (2, 3): 1, (5, 9): 2, (4, 4): 1}
    for change in ([(1, 2, -1)], [(3, 3, 5), (4, 4, 1)], [(2, 3, 2), (7, 1, 1)]):
        calls.clear()
        kt, _, _ = kt.plus(table_of(change, 2))
        assert calls == [1]
        for u, v, w in change:
            model[(u, v)] = model.get((u, v), 0) + w
    cols = [np.asarray([k[i] for k in sorted(model)], dtype=np.int64) for i in range(2)]
    assert as_dict(kt.at(cols)) == {k: v for k, v in model.items() if v}


@settings(max_examples=60)
@given(
    first=st.integers(-3, 3),
    changes=st.lists(st.lists(st.integers(-3, 3), max_size=4), max_size=6),
)
def test_a_scalar_keyed_table_adds_its_changes_as_a_model_does(first, changes):
    # a relation without key columns (a count's output) sums its changes directly:
    # the rows before and after each change as the grouped path gave them
    empty = Table((), (), np.empty(0, dtype=np.int64))
    start = Table((), (), np.array([first], dtype=np.int64)) if first else empty
    kt, total = KeyedTable.of(start, OPS), first
    for ch in changes:
        delta = Table((), (), np.asarray(ch, dtype=np.int64), unique=False)
        kt2, old, new = kt.plus(delta)
        if sum(ch) == 0:  # nothing moves
            assert kt2 is kt and old.rows == 0 and new.rows == 0
        else:
            assert old.values.tolist() == ([total] if total else [])
            total += sum(ch)
            assert new.values.tolist() == [total]
        kt = kt2
        assert kt.rows == (1 if total else 0)
        assert kt.table().values.tolist() == ([total] if total else [])


def test_a_scalar_keyed_table_refuses_an_overflowing_sum():
    big = Table((), (), np.array([2**62], dtype=np.int64))
    kt = KeyedTable.of(big, OPS)
    with pytest.raises(OverflowError):
        kt.plus(big)
    assert kt.table().values.tolist() == [2**62]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-5, 40), st.integers(-5, 40)), min_size=5, max_size=12),
    st.integers(-2, 10),
    st.integers(-2, 10),
    st.integers(1, 30),
    st.integers(1, 30),
)
def test_a_few_rows_are_coded_as_many_rows_are(rows, lo0, lo1, span0, span1):
    # key_codes of at most four integer rows runs on Python integers (a one-edge tick's
    # key): each row alone must get the code and flag it gets among more rows (arrays)
    from semirings.local import key_codes

    a = np.array([r[0] for r in rows], dtype=np.int64)
    b = np.array([r[1] for r in rows], dtype=np.int64)
    lows, spans = [lo0, lo1], [span0, span1]
    code, ok = key_codes([a, b], lows, spans)
    for i in range(len(rows)):
        one, one_ok = key_codes([a[i : i + 1], b[i : i + 1]], lows, spans)
        assert one.dtype == code.dtype and one_ok.dtype == ok.dtype
        assert bool(one_ok[0]) == bool(ok[i])
        if ok[i]:
            assert int(one[0]) == int(code[i])
    few, few_ok = key_codes([a[:4], b[:4]], lows, spans)
    assert few_ok.tolist() == ok[:4].tolist()
    assert few[few_ok].tolist() == code[:4][ok[:4]].tolist()


def test_a_views_build_prepares_the_tries_a_first_tick_reads(monkeypatch):
    # a first one-edge tick built the dense index of three tries' first levels (about
    # 1 ms at 1M edges, a tick 4x the median); the build does it now, and a fold on
    # its helper thread for the tries it merges
    import pandas as pd

    from faq.kernel.trie import Trie

    made: list[int] = []
    real = Trie.first_index

    def spy(self):
        if not self._first:
            made.append(len(self.vals[0]))
        return real(self)

    monkeypatch.setattr(Trie, "first_index", spy)
    e, view = _triangle_view(5)
    assert made  # built with the view
    made.clear()
    view.step(E=pd.DataFrame({"src": [301], "dst": [302]}))
    view.step(E=pd.DataFrame({"src": [int(e[0, 0])], "dst": [int(e[0, 1])], "_weight": [-1]}))
    assert made == []


def test_a_fold_prepares_the_tries_it_merges_off_the_ticking_thread(monkeypatch, use_settings):
    # the tries a fold merges get their first-level index and the kernels' view on the
    # fold's helper thread (Trie.build_index in faq.kernel.fold), not in the tick after
    import threading
    import time

    import pandas as pd

    from faq.kernel.trie import Trie

    built: list[str] = []
    first, seek = Trie.first_index, Trie.seek

    def spy_first(self):
        if not self._first:
            built.append(threading.current_thread().name)
        return first(self)

    def spy_seek(self):
        if not self._seek:
            built.append(threading.current_thread().name)
        return seek(self)

    monkeypatch.setattr(Trie, "first_index", spy_first)
    monkeypatch.setattr(Trie, "seek", spy_seek)
    _, view = _triangle_view(6)
    use_settings(log_rows=4, log_fraction=0.0)  # a fold begins once the log passes 4 rows
    built.clear()
    ticker = threading.current_thread().name
    deadline = time.monotonic() + 30
    t = 0
    while not built and time.monotonic() < deadline:  # until a fold has merged tries
        view.step(E=pd.DataFrame({"src": [400 + t], "dst": [500 + t]}))
        t += 1
    for u in range(t, t + 5):  # ticks that take the folded base up and read its tries
        view.step(E=pd.DataFrame({"src": [400 + u], "dst": [500 + u]}))
    assert built and ticker not in built  # prepared on the helper thread only


def _triangle_view(seed: int) -> tuple[np.ndarray, IncrementalView]:
    """A triangle-count view over a random graph of about 1,500 edges (``u < v``), built
    from pandas, and its edges."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    e = np.unique(rng.integers(0, 300, (3000, 2)), axis=0)
    e = e[e[:, 0] < e[:, 1]]
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    return e, IncrementalView(q, E=pd.DataFrame({"src": e[:, 0], "dst": e[:, 1]}))


def test_a_program_views_build_prepares_what_its_first_tick_reads(monkeypatch):
    """A shortest-path view's first tick built the tries of its edges in column order
    (annotations and rows) and the sorted keys of their weight level, which the compiled
    lookup does not take: 2.5 s at 10M edges, where a tick takes about 10 ms.  The build
    makes them now: a first tick builds no trie and sorts no level of the edges."""
    import pandas as pd

    import faq.kernel.keyed as keyed
    import faq.kernel.trie as trie

    rng = np.random.default_rng(11)
    e = np.unique(rng.integers(0, 200, (2000, 2)), axis=0)
    e = e[e[:, 0] != e[:, 1]]
    w = rng.integers(1, 9, len(e)).astype(float)
    sp = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    src = pd.DataFrame({"x": [int(e[0, 0])], "value": [0.0]})
    view = IncrementalView(sp, S=src, E=pd.DataFrame({"src": e[:, 0], "dst": e[:, 1], "value": w}))
    built, sorted_ = [], []
    real_build, real_distinct = keyed.build_trie, trie.distinct
    monkeypatch.setattr(keyed, "build_trie", lambda *a: built.append(a) or real_build(*a))

    def spy(a, *rest):
        if len(a) >= len(e) // 2:  # a level of the edges, not of the change
            sorted_.append(len(a))
        return real_distinct(a, *rest)

    monkeypatch.setattr(trie, "distinct", spy)
    gone = {"src": [int(e[1, 0])], "dst": [int(e[1, 1])], "value": [w[1]], "_weight": [-1]}
    view.step(E=pd.DataFrame(gone))
    view.step(E=pd.DataFrame({"src": [int(e[0, 0])], "dst": [500], "value": [1.0]}))
    assert built == [] and sorted_ == [], (len(built), sorted_)
    keep = np.ones(len(e), bool)
    keep[1] = False
    now = pd.DataFrame(
        {
            "src": np.r_[e[keep, 0], e[0, 0]],
            "dst": np.r_[e[keep, 1], 500],
            "value": np.r_[w[keep], 1.0],
        }
    )
    want = sp.solve(S=src, E=now).to_dict()
    assert view.result().to_dict() == pytest.approx(want)
