"""A term of two atoms joined in one step (``faq.kernel.join.pair_join``), and the
keyed reads a view's tick makes of a relation whose annotations are not integers.

``pair_join`` must give exactly the Generic Join kernel's answer, zeros dropped and
duplicate keys ⊕-combined; the keyed reads (``at``, ``at_prefix``, ``lookup``,
``table``) must agree with a model whatever the log holds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import query
from faq.kernel import KeyedTable, Table, group_reduce
from faq.kernel.join import generic_join, pair_join
from incremental import IncrementalView
from semirings.local import local_ops

SEMIRINGS = {
    "min-plus": st.sampled_from([0.0, 1.0, 2.5, 7.0, math.inf]),
    "max-product": st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    "boolean": st.booleans(),
    "counting": st.integers(0, 4),
}


def table(vars_: tuple[str, ...], rows: list[tuple], S: semirings.Semiring) -> Table:
    o = local_ops(S)
    cols = tuple(np.asarray([r[i] for r in rows], dtype=np.int64) for i in range(len(vars_)))
    vals = np.asarray([r[-1] for r in rows], dtype=o.dtype)
    return group_reduce(Table(vars_, cols, vals, unique=False), vars_, o)


def as_dict(t: Table) -> dict:
    assert t.values is not None
    return {tuple(int(c[i]) for c in t.cols): t.values[i].item() for i in range(t.rows)}


SHAPES = [
    (("x",), ("x", "y"), ("y",)),  # a delta of D(x) through E(x, y)
    (("x", "y"), ("y", "z"), ("x", "z")),  # a 2-hop
    (("x", "y"), ("x", "y", "z"), ("z",)),  # two shared variables (one int64 code)
    (("x", "y"), ("y",), ("x", "y")),
    (("x", "y"), ("y", "z"), ()),  # everything ⊕-aggregated
]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(SEMIRINGS)), shape=st.sampled_from(SHAPES))
def test_a_pair_join_is_the_generic_join(data, name, shape):
    S = semirings.get(name)
    o = local_ops(S)
    left_vars, right_vars, out = shape
    key = st.integers(-3, 3)

    def rows(vars_):
        return data.draw(st.lists(st.tuples(*[key] * len(vars_), SEMIRINGS[name]), max_size=12))

    left, right = table(left_vars, rows(left_vars), S), table(right_vars, rows(right_vars), S)
    got = pair_join(left, right, out, o)
    assert got is not None
    order = tuple(dict.fromkeys((*left_vars, *right_vars)))
    want = generic_join([left, right], order, out, o)
    assert as_dict(got) == as_dict(want)
    assert o.nonzero(got.values).all()


def test_a_pair_join_declines_what_it_does_not_cover():
    o = local_ops(semirings.get("min-plus"))
    a = Table(("x",), (np.array([1]),), np.array([1.0]))
    b = Table(("y",), (np.array([1]),), np.array([1.0]))
    assert pair_join(a, b, ("x", "y"), o) is None  # no shared variable: a product
    s = Table(("x",), (np.array(["a"], dtype=object),), np.array([1.0]))
    assert pair_join(a, s, ("x",), o) is None  # join columns of different kinds
    wide = Table(("x", "y"), (np.array([0, 2**40]), np.array([0, 2**40])), np.array([1.0, 2.0]))
    assert pair_join(wide, wide, ("x",), o) is None  # two columns past one int64 code


floats = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1.0, 2.0, 3.5, math.inf])),
    max_size=20,
)


@settings(max_examples=40, deadline=None)
@given(first=floats, changes=st.lists(floats, max_size=6), probe=floats, fold=st.booleans())
def test_keyed_reads_of_float_annotations_agree_with_a_model(
    use_settings, first, changes, probe, fold
):
    """A min-plus relation (float annotations) changed by ``replace`` (inf: removed):
    its log is kept in key order and read by binary searches; every read agrees with
    a dict."""
    use_settings(log_rows=3 if fold else 10_000, log_fraction=0.0)
    S = semirings.get("min-plus")
    o = local_ops(S)
    model = {}
    for u, v, w in first:
        model[(u, v)] = min(model.get((u, v), math.inf), w)
    kt = KeyedTable.of(table(("a", "b"), first, S), o)
    for ch in changes:
        latest = {(u, v): w for u, v, w in ch}
        new = Table(
            ("a", "b"),
            tuple(np.asarray([k[i] for k in latest], dtype=np.int64) for i in range(2)),
            np.asarray(list(latest.values()), dtype=np.float64),
        )
        kt = kt.replace(new)
        model.update(latest)
    want = {k: w for k, w in model.items() if w != math.inf}
    assert as_dict(kt.table()) == want and kt.rows == len(want)
    keys = sorted({(u, v) for u, v, _ in probe})
    if keys:
        cols = [np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2)]
        assert as_dict(kt.at(cols)) == {k: want[k] for k in keys if k in want}
        firsts = np.unique(cols[0])
        assert as_dict(kt.at_prefix([firsts])) == {
            k: w for k, w in want.items() if k[0] in set(firsts.tolist())
        }
        for cond in ({0: firsts}, {1: np.unique(cols[1])}, {0: firsts, 1: np.unique(cols[1])}):
            got = as_dict(kt.lookup([cond]))
            assert got == {
                k: w
                for k, w in want.items()
                if all(k[c] in set(v.tolist()) for c, v in cond.items())
            }


@pytest.mark.parametrize("name", ["min-plus", "boolean"])
def test_a_path_view_takes_pair_terms_and_matches_batch(name):
    """A two-atom recursive rule's delta terms run as pair joins (``explain`` says
    ``pair``) and the view equals a batch solve after every tick.  (A min-plus path
    program's ticks are compiled walks by default: ``path_walks=False`` keeps its delta
    queries, whose terms this is about; tests/test_path_walks.py tests the walks.)"""
    with faq.settings(path_walks=False):
        _path_view_terms(name)


def _path_view_terms(name: str) -> None:
    text = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
    S = semirings.get(name)
    one = S.one
    rng = np.random.default_rng(3)
    e = {
        (int(a), int(b)): float(rng.integers(1, 9)) if name == "min-plus" else True
        for a, b in rng.integers(0, 30, (80, 2))
        if a != b
    }
    q = query(text, semiring=name)
    frame = pd.DataFrame([(a, b, w) for (a, b), w in e.items()], columns=["src", "dst", "value"])
    view = IncrementalView(q, S=pd.DataFrame({"x": [0], "value": [one]}), E=frame)
    methods = set()
    for _ in range(4):
        gone = list(e)[:5]
        add = {
            (int(a), int(b)): (float(rng.integers(1, 9)) if name == "min-plus" else True)
            for a, b in rng.integers(0, 30, (6, 2))
            if a != b and (int(a), int(b)) not in e
        }
        rows = [(a, b, e[(a, b)], -1) for a, b in gone] + [
            (a, b, w, 1) for (a, b), w in add.items()
        ]
        view.step(E=pd.DataFrame(rows, columns=["src", "dst", "value", "_weight"]))
        for k in gone:
            del e[k]
        e.update(add)
        methods |= {m for t in view.last_step.terms for m in t.methods}
        batch = q.solve(
            S=pd.DataFrame({"x": [0], "value": [one]}),
            E=pd.DataFrame([(a, b, w) for (a, b), w in e.items()], columns=["src", "dst", "value"]),
        )
        assert view.result().to_dict() == batch.to_dict()
    assert "pair" in methods
