"""Base rows a Spark-resident view keeps in the driver between ticks (incremental/hot.py).

On a skewed graph a tick's fetch is mostly a few hubs' rows, reached tick after tick.
The relation keeps them (``RemoteKeyed.hot``), asks Spark only for the other values,
and writes each fold's changes into them.  The kept rows must be exactly the base's
rows at the covered values after every operation, and a view that keeps rows must
agree with the driver state tick by tick, across folds and past ``max_fetch_rows``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import incremental.hot as hot
import semirings
from faq import query
from faq.kernel import Table
from faq.rule import parse_rule
from faq.spark import reach as spark_reach
from incremental import IncrementalView
from incremental.hot import HotRows, union_rows, with_kept
from incremental.reach import one_hop
from semirings.local import local_ops

OPS = local_ops(semirings.INTEGER)
pairs = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=40, unique=True)


def _table(d: dict[tuple[int, int], int]) -> Table:
    keys = sorted(d)
    cols = tuple(np.asarray([k[i] for k in keys], dtype=np.int64) for i in range(2))
    return Table(("a", "b"), cols, np.asarray([d[k] for k in keys], dtype=np.int64))


def _rows(t: Table) -> dict[tuple[int, int], int]:
    return {(int(a), int(b)): int(v) for a, b, v in zip(*t.cols, t.values, strict=True)}


def _once(t: Table) -> bool:
    keys = list(zip(*(c.tolist() for c in t.cols), strict=True))
    return len(keys) == len(set(keys))


def _at(base: dict, cover: tuple) -> dict:
    return {k: v for k, v in base.items() if any(k[c] in set(cover[c].tolist()) for c in (0, 1))}


@settings(max_examples=80, deadline=None)
@given(
    base=pairs,
    asks=st.lists(st.tuples(st.sets(st.integers(0, 9)), st.sets(st.integers(0, 9))), max_size=4),
    over=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 3)), max_size=8),
    budget=st.integers(0, 60),
)
def test_kept_rows_are_the_base_rows_at_the_covered_values(monkeypatch, base, asks, over, budget):
    """After each fetch (``split``, then ``learned`` from what Spark would return) and a
    fold (``folded``), the kept rows are exactly the base's rows whose column ``c`` holds
    a covered value, within the budget; ``split`` plus the fetch gives every asked row."""
    monkeypatch.setattr(hot, "LEAST", 2)
    rows = {k: 1 + (k[0] + k[1]) % 3 for k in base}
    t = _table(rows)
    h = HotRows.empty(t)
    for a0, a1 in asks:
        asked = {c: np.asarray(sorted(v), dtype=np.int64) for c, v in ((0, a0), (1, a1)) if v}
        ask, kept = h.split(asked)
        want = {k: v for k, v in rows.items() if any(k[c] in vs for c, vs in enumerate((a0, a1)))}
        fetched = {
            k: v for k, v in rows.items() if any(k[c] in set(ask.get(c, [])) for c in (0, 1))
        }
        assert _rows(union_rows(_table(fetched), kept)) == want
        both = with_kept(_table(fetched), kept, ask)  # the same, by the covered values
        assert _rows(both) == want and _once(both)
        assert set(_rows(kept)) <= set(want)
        h = h.learned(_table(fetched), ask, budget)
        assert _rows(h.rows) == _at(rows, h.cover) and _once(h.rows)
        assert h.rows.rows <= max(budget, 0) or not h.rows.rows
    changed = {}
    for a, b, v in over:
        changed[(a, b)] = v  # the annotation after the fold; 0: gone
    h = h.folded(_table(changed), OPS) if changed else h
    for k, v in changed.items():
        if v:
            rows[k] = v
        else:
            rows.pop(k, None)
    assert _rows(h.rows) == _at(rows, h.cover)
    keys = list(zip(*(c.tolist() for c in h.rows.cols), strict=True))
    assert len(keys) == len(set(keys))  # each key once


def _frame(edges, weights=None):
    df = pd.DataFrame([tuple(e) for e in edges], columns=["a", "b"])
    if weights is not None:
        df["_weight"] = weights
    return df


RULES = [
    ("T() :- E(a, b), E(b, c), E(a, c)", "counting"),
    ("T() :- E(a, b), E(b, c), E(a, c)", "boolean"),
    ("T(a) :- E(a, b), E(a, c)", "counting"),
    ("T(a, c) :- E(a, b), F(b, c)", "integer"),
    ("T(a) :- E(a, b), F(b, c), E(c, d)", "counting"),
]


@pytest.mark.parametrize("rule", RULES, ids=[f"{r} [{s}]" for r, s in RULES])
def test_a_view_keeping_hub_rows_agrees_with_the_driver_state(spark, monkeypatch, rule):
    """Hubs (vertices 0 and 1, in most edges) are reached every tick: after the first,
    their rows come from the driver and Spark is asked only for the other values.
    Deletions and insertions at the hubs, folds (``log_rows`` small) and a tick past
    ``max_fetch_rows`` all leave the view equal to the driver state."""
    monkeypatch.setattr(hot, "LEAST", 4)
    text, semiring = rule
    q = query(text, semiring=semiring)
    names = sorted({a.relation for a in parse_rule(text).atoms})
    rng = np.random.default_rng(5)
    current = {}
    for n in names:
        hubs = {(h, int(v)) for h in (0, 1) for v in rng.integers(2, 40, 15)}
        hubs |= {(int(v), h) for h in (0, 1) for v in rng.integers(2, 40, 15)}
        current[n] = hubs | {tuple(e) for e in rng.integers(2, 40, size=(25, 2)).tolist()}
    initial = {n: _frame(sorted(current[n])) for n in names}
    driver = IncrementalView(q, state="driver", **initial)
    remote = IncrementalView(q, state="spark", **initial)
    asked: list[set[int]] = []
    real = spark_reach.fetch_tagged

    def spy(scans, most):
        asked.append({int(v) for s in scans for vs in s.cols.values() for v in vs})
        return real(scans, most)

    monkeypatch.setattr("incremental.reach.fetch_tagged", spy)
    # a one-hop rule's ticks read the kept rows as a keyed table made once, with the
    # fetched rows and changed keys as its overrides (RemoteKeyed._near_keyed)
    made: list[int] = []
    keyed = hot.HotRows.keyed

    def counted(self, ops):
        made.append(self.rows.rows)
        return keyed(self, ops)

    monkeypatch.setattr(hot.HotRows, "keyed", counted)
    for k in range(6):
        deltas = {}
        for n in names:
            at_hub = sorted(e for e in current[n] if 0 in e or 1 in e)
            gone = [at_hub[int(i)] for i in rng.choice(len(at_hub), 2, replace=False)]
            new = {(0, int(v)) for v in rng.integers(40, 60, 2)}
            new |= {(int(a), int(b)) for a, b in rng.integers(2, 60, size=(2, 2))}
            new -= current[n]
            current[n] = (current[n] - set(gone)) | new
            deltas[n] = _frame([*gone, *sorted(new)], [-1] * len(gone) + [1] * len(new))
        bound = {"log_rows": 3, "log_fraction": 0.0}
        if k == 4:
            bound["max_fetch_rows"] = 8  # past the bound: the rows at the keys, kept ones too
        with faq.settings(**bound):
            got = remote.step(**deltas)
        assert driver.step(**deltas).to_dict() == got.to_dict(), k
        assert driver.result().to_dict() == remote.result().to_dict(), k
    for n in names:
        assert driver.relation(n).to_dict() == remote.relation(n).to_dict()
    kept = {n: remote._state.m.rels[n].hot for n in names}
    assert all(h is not None and h.rows.rows for h in kept.values()), "no hub rows kept"
    assert any(0 not in a for a in asked[1:]), "the hub was fetched every tick"
    assert bool(made) is one_hop(q.rule, {n: SimpleNamespace(rows=1) for n in names}), made
