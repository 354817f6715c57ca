"""The local Generic Join kernel (faq.kernel) against the brute-force reference evaluator.

Oracle: ``faq.reference_solve`` on random rules and relations, for every built-in
semiring and a user-defined one.  The whole body is one bag (one Generic Join,
⊕-aggregated onto the head), under random binding orders, tiny chunks (so the
batching is exercised), split into slices (the task-parallel path: the union
of the slices must be the whole answer), seeded by one atom (the delta-query
path), and with the numpy search instead of the compiled one.  The structural
test counts the candidates the kernel proposes on the hub graph (never times).
"""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import kernel, reference_solve
from faq.kernel import JoinStats, Table, build_trie, generic_join, group_reduce
from faq.rule import Atom
from faq.testing import hub_graph, random_relations, random_rule, triangle_count_numpy
from semirings import Semiring
from semirings.local import local_ops
from tests.helpers import assert_same

BOTTLENECK = Semiring(name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min)
ALL = [*semirings.BUILTINS, BOTTLENECK]


def atom_table(atom: Atom, rel: dict, S: Semiring, with_values: bool = True) -> Table:
    """The rows of ``rel`` seen through ``atom`` (a repeated variable keeps agreeing rows)."""
    first: dict[str, int] = {}
    for i, v in enumerate(atom.vars):
        first.setdefault(v, i)
    rows = [
        (k, val)
        for k, val in rel.items()
        if all(k[i] == k[first[v]] for i, v in enumerate(atom.vars))
    ]
    vars_ = tuple(first)
    cols = tuple(np.array([k[first[v]] for k, _ in rows], dtype=np.int64) for v in vars_)
    o = local_ops(S)
    values = np.array([val for _, val in rows], dtype=o.dtype) if with_values else None
    return Table(vars_, cols, values)


def tables_of(rule, rels, S):
    cache: dict[tuple, Table] = {}
    out = []
    for a in rule.atoms:  # the same atom twice shares one table (and one trie)
        key = (a.relation, a.vars)
        if key not in cache:
            cache[key] = atom_table(a, rels[a.relation], S)
        out.append(cache[key])
    return out


def as_dict(t: Table) -> dict:
    vals = [x.item() if hasattr(x, "item") else x for x in t.values]
    keys = zip(*(c.tolist() for c in t.cols), strict=True) if t.vars else [()] * len(vals)
    return dict(zip(keys, vals, strict=True))


def check(rule, rels, S, order, **kw):
    want = reference_solve(rule, S, rels)
    got = generic_join(tables_of(rule, rels, S), order, rule.head, local_ops(S), **kw)
    assert_same(as_dict(got), want, S, f"{rule} order={order} {kw}")


@pytest.mark.parametrize("S", ALL, ids=lambda s: s.name)
@settings(max_examples=25)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.randoms(use_true_random=False))
def test_random_bags_match_reference(S, rule_seed, data_seed, rnd):
    rule = random_rule(rule_seed)
    rels = random_relations(rule, S, data_seed, domain=4, density=0.6)
    order = list(rule.variables)
    rnd.shuffle(order)
    check(rule, rels, S, order, chunk=rnd.choice([2, 7, kernel.CHUNK]))


@pytest.mark.parametrize("S", [semirings.COUNTING, semirings.LOG, BOTTLENECK], ids=str)
@settings(max_examples=20)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 5))
def test_slices_add_up_to_the_whole(S, rule_seed, data_seed, T):
    rule = random_rule(rule_seed)
    rels = random_relations(rule, S, data_seed, domain=4, density=0.6)
    o = local_ops(S)
    tables = tables_of(rule, rels, S)
    order = rule.variables
    parts = [generic_join(tables, order, rule.head, o, part=(t, T), chunk=3) for t in range(T)]
    whole = Table(
        rule.head,
        tuple(np.concatenate([p.cols[i] for p in parts]) for i in range(len(rule.head))),
        np.concatenate([np.asarray(p.values, dtype=o.dtype) for p in parts]),
        unique=False,
    )
    assert_same(as_dict(group_reduce(whole, rule.head, o)), reference_solve(rule, S, rels), S)


@pytest.mark.parametrize("S", [semirings.INTEGER, semirings.MAX_PLUS, BOTTLENECK], ids=str)
@settings(max_examples=20)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.randoms(use_true_random=False))
def test_seeded_join_matches_reference(S, rule_seed, data_seed, rnd):
    rule = random_rule(rule_seed)
    rels = random_relations(rule, S, data_seed, domain=4, density=0.6)
    tables = tables_of(rule, rels, S)
    i = rnd.randrange(len(tables))
    seed = tables[i]
    rest = [v for v in rule.variables if v not in seed.vars]
    rnd.shuffle(rest)
    others = [t for k, t in enumerate(tables) if k != i]
    got = generic_join(others, [*seed.vars, *rest], rule.head, local_ops(S), seed=seed, chunk=4)
    assert_same(as_dict(got), reference_solve(rule, S, rels), S, f"{rule} seed {i}")


def test_numpy_search_matches_compiled(monkeypatch):
    rule = random_rule(11)
    rels = random_relations(rule, semirings.COUNTING, 5, domain=5, density=0.7)
    monkeypatch.setattr(kernel, "NUMBA", False)
    for seed in range(5):
        order = list(rule.variables)
        random.Random(seed).shuffle(order)
        check(rule, rels, semirings.COUNTING, order, chunk=5)


def test_trie_levels():
    t = Table(("a", "b"), (np.array([2, 1, 2, 1]), np.array([5, 7, 3, 4])), np.arange(4.0))
    tr = build_trie(t, ("a", "b"))
    assert tr.vals[0].tolist() == [1, 2] and tr.starts[0].tolist() == [0, 2]
    assert tr.vals[1].tolist() == [4, 7, 3, 5] and tr.starts[1].tolist() == [0, 2, 4]
    assert tr.values.tolist() == [3.0, 1.0, 2.0, 0.0]
    assert tr.lookup(1, np.array([0, 1, 1]), np.array([7, 7, 5])).tolist() == [1, -1, 3]
    with pytest.raises(ValueError, match="repeated keys"):
        build_trie(Table(("a",), (np.array([1, 1]),)), ("a",))


def test_a_nullary_table_with_repeated_rows_counts_as_their_sum():
    """A nullary table's rows are all one key: unconsolidated, the kernel ⊕-combines them
    (a scalar made in several Spark cells reaches the next step's cells this way)."""
    o = local_ops(semirings.COUNTING)
    partial = Table((), (), np.array([2, 3, 5], dtype=np.int64), unique=False)
    edges = Table(("a",), (np.array([1, 2]),), np.array([1, 1], dtype=np.int64))
    got = generic_join([edges, partial], ("a",), (), o)
    assert int(got.values.sum()) == 20  # (2 + 3 + 5) per edge, two edges
    assert build_trie(partial, (), o).values.tolist() == [10]


def test_triangles_of_a_real_shape_and_the_hub_graph_stay_linear():
    """On the hub graph every binary plan builds ~n² rows; Generic Join proposes O(n)."""
    rule = "Q() :- E(a, b), E(b, c), E(a, c)"
    o = local_ops(semirings.COUNTING)
    proposed = {}
    for n in (1_000, 4_000):
        e = hub_graph(n)
        E = Table(("s", "d"), (e[:, 0], e[:, 1]))
        ab, bc, ac = (Table(v, E.cols) for v in [("a", "b"), ("b", "c"), ("a", "c")])
        stats = JoinStats()
        out = generic_join([ab, bc, ac], ("a", "b", "c"), (), o, stats=stats)
        assert out.values.tolist() == [triangle_count_numpy(e)] == [2 * n + 1]
        proposed[n] = sum(stats.proposed)
        assert proposed[n] <= 12 * len(e), (rule, n, stats)
    assert proposed[4_000] <= 4.5 * proposed[1_000]


def test_annotations_and_output_dtype():
    o = local_ops(semirings.MIN_PLUS)
    A = Table(("i", "j"), (np.array([0, 0, 1]), np.array([0, 1, 1])), np.array([1.0, 5.0, 2.0]))
    B = Table(("j", "k"), (np.array([0, 1]), np.array([0, 0])), np.array([10.0, 1.0]))
    out = generic_join([A, B], ("j", "i", "k"), ("i", "k"), o)
    assert as_dict(out) == {(0, 0): 6.0, (1, 0): 3.0}
    ones = Table(("i",), (np.array([0, 1, 2]),))
    cnt = generic_join([ones, ones], ("i",), (), local_ops(semirings.COUNTING))
    assert as_dict(cnt) == {(): 3}
    total = functools.reduce(semirings.LOG.add, [0.0, 0.0, 0.0])
    logt = generic_join([ones], ("i",), (), local_ops(semirings.LOG))
    assert math.isclose(as_dict(logt)[()], total)


def test_slices_count_the_shared_levels_once():
    """Regression: every slice recomputes the levels above the split, and each counted
    them, so a run split over T threads reported up to T times the candidates."""
    e = hub_graph(500)
    E = Table(("s", "d"), (e[:, 0], e[:, 1]))
    ab, bc, ac = (Table(v, E.cols) for v in [("a", "b"), ("b", "c"), ("a", "c")])
    o = local_ops(semirings.COUNTING)
    whole = JoinStats()
    generic_join([ab, bc, ac], ("a", "b", "c"), (), o, stats=whole)
    split = JoinStats()
    out = kernel.generic_join_threads([ab, bc, ac], ("a", "b", "c"), (), o, 2, stats=split)
    assert out.values.tolist() == [2 * 500 + 1]
    assert split.proposed == whole.proposed and split.kept == whole.kept


WARM_UP = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s", stream=sys.stdout)
from faq.kernel import compiled
compiled.warm_up_in_background().join()
w = compiled.warm_up()
print("figures", w.from_cache, w.compiled, w.cache_dir is not None)
"""


@pytest.mark.skipif(not kernel.NUMBA, reason="numba is not installed")
def test_kernel_compiles_once_then_loads_from_the_disk_cache(tmp_path):
    # two fresh processes share an empty numba cache: the first compiles the searches
    # and logs it, the second loads every one of them from the disk cache
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(root)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", WARM_UP], env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    figures = [
        tuple(int(x) if x.isdigit() else x for x in ln.split()[1:])
        for run in runs
        for ln in run.splitlines()
        if ln.startswith("figures")
    ]
    (cold_hits, cold_compiled, cached), (warm_hits, warm_compiled, _) = figures
    assert cold_hits == 0 and cold_compiled >= 4 and cached == "True"
    assert warm_compiled == 0 and warm_hits >= 4
    assert "faq kernel ready in" in runs[0] and "0 compiled now" in runs[1]
    assert any(tmp_path.rglob("*.nbi"))  # the index files numba keeps on disk


NO_CACHE_DIR = """
import numba.core.caching as caching
caching.CacheImpl._locator_classes = []  # as if no directory were writable
from faq import Factor, query
from faq.kernel import compiled
E = Factor.from_dict({(0, 1): 1, (1, 2): 1, (0, 2): 1}, ("a", "b"), "counting")
print("triangles", query("Q() :- E(a, b), E(b, c), E(a, c)", "counting").solve(E=E).scalar())
print("cache", compiled.warm_up().cache_dir)
"""


@pytest.mark.skipif(not kernel.NUMBA, reason="numba is not installed")
def test_kernel_compiles_without_a_writable_cache_directory():
    # numba refuses cache=True when it finds no cache directory: the kernel then compiles
    # without one (importing faq once failed with numba's RuntimeError)
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", NO_CACHE_DIR],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "triangles 1" in out and "cache None" in out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-2, 2), st.sampled_from([0.5, -0.0, 0.0, 1.5]), st.text("ab", max_size=2)
        ),
        min_size=0,
        max_size=12,
    ),
    st.booleans(),
)
def test_a_table_read_back_is_sorted_by_key_whether_or_not_it_was(rows, presort):
    """``table_frame`` skips sorting rows already in key order (``keys_sorted``) and sorts
    the others: the frame is always the stable sort of the table by its keys."""
    import pandas as pd

    from faq.kernel.table import Table
    from faq.kernel.values import table_frame

    if presort:
        rows = sorted(rows, key=lambda r: (r[0], r[1], r[2]))
    cols = (
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.float64),
        np.array([r[2] for r in rows], dtype=str if rows else "U1"),
    )
    t = Table(("i", "f", "s"), cols, np.arange(len(rows), dtype=np.int64))
    got = table_frame(t, semirings.COUNTING)
    want = pd.DataFrame({"i": cols[0], "f": cols[1], "s": cols[2], "value": t.values})
    want = want.sort_values(["i", "f", "s"], kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(got, want)


def test_a_tries_seek_is_its_levels_for_int64_and_none_otherwise():
    """``Trie.seek``: the levels above the last with the first one's dense index, then the
    last level, for int64 keys and annotations; None for other key types or no
    annotations (the compiled delta kernels then decline), gathered once per trie."""
    from faq.kernel.table import Table
    from faq.kernel.trie import build_trie

    cols = (np.array([1, 1, 4], np.int64), np.array([2, 3, 2], np.int64))
    t = build_trie(Table(("a", "b"), cols, np.array([5, 6, 7], np.int64)), ("a", "b"))
    sk = t.seek()
    assert sk is not None and t.seek() is sk
    assert [v.tolist() for v in sk.vals] == [t.vals[0].tolist()]
    assert (sk.low, sk.at.tolist()) == (t.first_index()[0], t.first_index()[1].tolist())
    assert (sk.last.tolist(), sk.last_starts.tolist()) == (t.vals[1].tolist(), t.starts[1].tolist())
    assert sk.values.tolist() == [5, 6, 7]
    narrow = tuple(c.astype(np.int32) for c in cols)
    assert build_trie(Table(("a", "b"), narrow, np.array([5, 6, 7])), ("a", "b")).seek() is None
    assert build_trie(Table(("a", "b"), cols), ("a", "b")).seek() is None
    # a relation without keys: no level to seek (a view's build asks every trie)
    assert build_trie(Table((), (), np.array([1], np.int64)), ()).seek() is None
