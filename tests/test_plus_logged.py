"""A change added into a keyed table of int64 counts by one compiled call
(:func:`faq.kernel.merge.plus_logged`) against the numpy path of
:meth:`faq.kernel.KeyedTable.plus`: the same contents, log, old rows, sums and row count
after every change, on keys of one to three columns, with keys removed, restored, new
outside the log's spans, and sums that leave 64 bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq.kernel.keyed as keyed
import faq.kernel.keyed_changes as changes
import semirings
from faq.kernel import KeyedTable, Table, group_reduce
from faq.kernel.merge import NUMBA
from semirings.local import local_ops

OPS = local_ops(semirings.INTEGER)
BIG = 2**62


def table(rs: list[tuple[int, ...]], width: int) -> Table:
    vars_ = tuple(f"x{i}" for i in range(width))
    cols = tuple(np.asarray([r[i] for r in rs], dtype=np.int64) for i in range(width))
    values = np.asarray([r[width] for r in rs], dtype=np.int64)
    return group_reduce(Table(vars_, cols, values, unique=False), vars_, OPS)


def as_dict(t: Table) -> dict[tuple[int, ...], int]:
    assert t.values is not None
    return {tuple(int(c[i]) for c in t.cols): int(t.values[i]) for i in range(t.rows)}


def rows_of(width: int, high: int) -> st.SearchStrategy[list[tuple[int, ...]]]:
    value = st.one_of(st.integers(-3, 3), st.sampled_from([BIG, -BIG, 2**63 - 1]))
    key = st.tuples(*[st.integers(0, high)] * width)
    return st.lists(st.tuples(key, value).map(lambda kv: (*kv[0], kv[1])), max_size=12)


def plus(kt: KeyedTable, d: Table) -> tuple[KeyedTable, Table, Table] | str:
    try:
        return kt.plus(d)
    except OverflowError:
        return "overflow"


@pytest.mark.skipif(not NUMBA, reason="the compiled path needs numba")
@settings(max_examples=80, deadline=None)
@given(data=st.data(), width=st.integers(1, 3))
def test_the_compiled_plus_is_the_numpy_plus(monkeypatch, data, width):
    first = data.draw(rows_of(width, 5).filter(bool), label="base")
    changes = data.draw(st.lists(rows_of(width, 8), min_size=1, max_size=5), label="changes")
    base = table([r for r in first if abs(r[-1]) < 4], width)
    fast = slow = KeyedTable.of(base, OPS)
    for c in changes:
        try:
            d = table(c, width)
        except OverflowError:  # the change's own duplicate keys leave 64 bits
            continue
        if not d.rows:
            continue
        got = plus(fast, d)
        with monkeypatch.context() as m:
            m.setattr(keyed.KeyedTable, "_plus_logged", lambda self, delta: None)
            want = plus(slow, d)
        if isinstance(want, str) or isinstance(got, str):
            assert got == want
            continue
        assert as_dict(got[0].table()) == as_dict(want[0].table())
        assert got[0].rows == want[0].rows
        assert as_dict(got[1]) == as_dict(want[1])  # the rows before, at the change's keys
        assert as_dict(got[2]) == as_dict(want[2])  # every changed key's annotation after
        for kt in (got[0], want[0]):  # the log in key order, its correction exact
            assert as_dict(kt.table()) == {
                k: v
                for k, v in {
                    **as_dict(kt.base),
                    **{k: v for k, v in as_dict(kt.over).items()},
                }.items()
                if v
            }
        assert as_dict(got[0].correction()) == as_dict(want[0].correction())
        assert got[0].in_key_order() == want[0].in_key_order()
        fast, slow = got[0], want[0]


@pytest.mark.skipif(not NUMBA, reason="the compiled path needs numba")
def test_a_one_edge_change_takes_the_compiled_call_and_an_overflow_does_not(monkeypatch):
    calls: list[bool] = []
    real = changes.plus_logged

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(changes, "plus_logged", spy)
    kt = KeyedTable.of(table([(1, 2, 1), (2, 3, 1), (5, 9, 1)], 2), OPS)
    kt = kt.plus(table([(1, 3, 1), (6, 9, 1)], 2))[0]  # into an empty log: numpy
    kt, old, summed = kt.plus(table([(2, 3, -1)], 2))  # removes a base key
    assert calls == [True]
    assert as_dict(old) == {(2, 3): 1} and as_dict(summed) == {(2, 3): 0}
    assert as_dict(kt.table()) == {(1, 2): 1, (1, 3): 1, (5, 9): 1, (6, 9): 1}
    kt = kt.plus(table([(5, 9, 2**63 - 2)], 2))[0]  # fits: 2**63 - 1
    assert calls == [True, True]
    with pytest.raises(OverflowError):
        kt.plus(table([(5, 9, 1)], 2))
    assert calls == [True, True, False]  # the compiled call declined; numpy raised
    kt = kt.plus(table([(100, 200, 1)], 2))[0]  # outside the log's spans: numpy re-codes
    assert calls[-1] is False
    assert as_dict(kt.table())[(100, 200)] == 1
