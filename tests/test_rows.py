"""The kernel's linear row passes (faq.kernel.rows) and what rests on them: ⊕-grouping
that skips the sort of rows already in key order, degree counts without a sort, and a
read-back to pandas that owns its columns.

Oracles: Python's own comparison of tuples, ``np.repeat``, ``np.unique`` and
``group_reduce`` of the same rows shuffled (the sorting path).  No Spark.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq.kernel.rows import DISORDERED, NONDECREASING, STRICT, csr_rows, key_order, spread
from faq.kernel.stats import degrees
from faq.kernel.table import Table, group_reduce
from faq.kernel.values import table_frame
from semirings.local import local_ops

ints = st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=30)


def _order_of(rows: list[tuple]) -> int:
    pairs = list(zip(rows, rows[1:], strict=False))
    if any(a > b for a, b in pairs):
        return DISORDERED
    return NONDECREASING if any(a == b for a, b in pairs) else STRICT


@settings(max_examples=80, deadline=None)
@given(ints, st.sampled_from(["int64", "int32", "float64", "uint8-ish", "str"]), st.booleans())
def test_key_order_is_the_order_of_the_rows_as_tuples(rows, kind, presort):
    if presort:
        rows = sorted(rows)

    def col(i: int) -> np.ndarray:
        xs = [r[i] for r in rows]
        if kind == "uint8-ish":
            return np.array([x + 3 for x in xs], dtype=np.uint8)
        if kind == "str":
            return np.array([chr(ord("a") + x + 3) for x in xs], dtype="U1")
        return np.array(xs, dtype=kind)

    one, two = col(0), col(1)
    assert key_order([one]) == _order_of([(r[0],) for r in rows])
    assert key_order([one, two]) == _order_of(rows)
    assert key_order([one, two, one]) == _order_of([(a, b, a) for a, b in rows])


def test_key_order_leaves_nan_and_object_keys_to_the_sort():
    assert key_order([np.array([0.0, np.nan, 1.0])]) == DISORDERED
    assert key_order([np.array([1, 2], dtype=object)]) == DISORDERED
    assert key_order([np.array([5], dtype=object)]) == STRICT  # one row: nothing to sort
    assert key_order([]) == STRICT


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=12), st.integers(-5, 5))
def test_csr_rows_spells_out_the_row_pointers(counts, lo):
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    want = np.repeat(np.arange(len(counts), dtype=np.int64) + lo, counts)
    assert np.array_equal(csr_rows(ptr, lo), want)
    assert np.array_equal(csr_rows(ptr.view(np.uint64), lo), want)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=12), st.sampled_from([np.int64, np.float64]))
def test_spread_is_numpy_repeat(counts, dtype):
    """A value per CSR row, once per entry (compiled for int64, numpy otherwise)."""
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    vals = (np.arange(len(counts)) * 7 - 3).astype(dtype)
    got = spread(vals, ptr)
    assert got.dtype == dtype and np.array_equal(got, np.repeat(vals, counts))


@pytest.mark.parametrize("S", [semirings.COUNTING, semirings.REAL, semirings.MIN_PLUS])
@settings(max_examples=40, deadline=None)
@given(ints, st.randoms(use_true_random=False), st.booleans())
def test_grouping_rows_in_key_order_is_grouping_them_shuffled(S, rows, rnd, values):
    """Sorted input takes the path without a sort (strictly increasing keys keep their
    columns, repeats are ⊕-combined in place); the answer is the sorting path's."""
    ops = local_ops(S)
    rows = sorted(rows)
    vals = [1, 2, 0, 3, 5, 7, 2] * 5
    shuffled = list(range(len(rows)))
    rnd.shuffle(shuffled)

    def table(order: list[int]) -> Table:
        cols = tuple(np.array([rows[i][k] for i in order], dtype=np.int64) for k in (0, 1))
        v = np.array([vals[i] for i in order], dtype=ops.dtype) if values else None
        return Table(("a", "b"), cols, v, unique=False)

    for keep in (("a", "b"), ("a",)):
        fast = group_reduce(table(list(range(len(rows)))), keep, ops)
        slow = group_reduce(table(shuffled), keep, ops)
        assert fast.vars == slow.vars
        for x, y in zip(fast.cols, slow.cols, strict=True):
            assert np.array_equal(x, y)
        assert np.array_equal(fast.values, slow.values)


def test_grouping_sorted_counts_still_raises_past_64_bits():
    big = np.array([2**62, 2**62], dtype=np.int64)
    t = Table(("a",), (np.array([1, 1], dtype=np.int64),), big, unique=False)
    with pytest.raises(OverflowError):
        group_reduce(t, ("a",), local_ops(semirings.COUNTING))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40) | st.integers(-3, 3), max_size=20))
def test_degrees_count_every_value_as_unique_does(xs):
    c = np.array(xs, dtype=np.int64)
    (values,), counts = degrees(Table(("a",), (c,)), ("a",))
    want_values, want_counts = np.unique(c, return_counts=True)
    assert values.dtype == want_values.dtype
    assert np.array_equal(values, want_values) and np.array_equal(counts, want_counts)


@pytest.mark.parametrize("annotated", [True, False])
@pytest.mark.parametrize("presorted", [True, False])
def test_a_read_back_frame_owns_its_columns(annotated, presorted):
    """The frame is built without a consolidating copy, but shares no memory with the
    table: writing to it leaves the table (the factor's rows) as they were."""
    a = np.array([0, 0, 1, 2] if presorted else [2, 0, 1, 0], dtype=np.int64)
    b = np.array([1, 3, 0, 2] if presorted else [2, 3, 0, 1], dtype=np.int64)
    v = np.array([1.5, 2.5, 3.5, 4.5]) if annotated else None
    t = Table(("a", "b"), (a, b), v)
    before = [a.copy(), b.copy(), None if v is None else v.copy()]
    frame = table_frame(t, semirings.REAL)
    for c in frame.columns:
        arr = frame[c].to_numpy()
        assert not any(np.shares_memory(arr, x) for x in (a, b, v) if x is not None)
    frame.loc[0, "value"] = -1.0
    frame.iloc[1, 0] = 99
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])
    if v is not None:
        assert np.array_equal(v, before[2])
    order = np.lexsort((before[1], before[0]))
    want = pd.DataFrame(
        {
            "a": before[0][order],
            "b": before[1][order],
            "value": [1.0] * 4 if v is None else v[order],
        }
    )
    want.loc[0, "value"] = -1.0
    want.iloc[1, 0] = 99
    pd.testing.assert_frame_equal(frame, want)
