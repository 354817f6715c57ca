"""``semirings.local.member``: whether each of a column is among sorted distinct values.

A column of many integer rows is answered by a table over the values' span (one load a
row) instead of a binary search per row; both must give ``numpy.isin``'s answer for
every integer type, including keys far outside the span, where ``col - lo`` wraps.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from semirings.local import member

INT64 = np.iinfo(np.int64)


@given(
    dtype=st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32]),
    data=st.data(),
)
def test_member_is_isin_for_every_integer_type(dtype, data):
    info = np.iinfo(dtype)
    narrow = st.integers(max(int(info.min), -40), min(int(info.max), 40))
    wide = st.integers(int(info.min), int(info.max))
    col = data.draw(hnp.arrays(dtype, st.integers(0, 200), elements=st.one_of(narrow, wide)))
    extra = data.draw(st.lists(st.one_of(narrow, st.integers(INT64.min, INT64.max)), max_size=12))
    values = np.unique(np.array([*extra, *col[:3].tolist()], dtype=np.int64))
    got = member(col, values)
    assert got.dtype == bool
    assert np.array_equal(got, np.isin(col.astype(np.int64), values))


def test_member_far_outside_the_span_of_the_values():
    col = np.array([INT64.min, INT64.max, -1, 0, 5, 6, 7] * 20, dtype=np.int64)
    for values in (
        np.array([0, 3, 5], np.int64),
        np.array([INT64.max - 2, INT64.max], np.int64),
        np.array([INT64.min, INT64.min + 1], np.int64),
        np.array([-1, 7], np.int64),
    ):
        assert np.array_equal(member(col, values), np.isin(col, values)), values
