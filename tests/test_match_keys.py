"""``faq.kernel.match_keys``: which rows of a table hold one of some keys, and which.

Integer keys that fit one 64-bit code are searched among the keys' sorted codes (no
sort of the table, often far longer); others take the sort of both.  Both must give
the dictionary's answer.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq.kernel.merge as merge
from faq.kernel.merge import match_keys


@settings(max_examples=150, deadline=None)
@given(
    width=st.integers(1, 3),
    span=st.sampled_from([3, 1000, 2**40, 2**62]),
    n=st.integers(0, 40),
    m=st.integers(1, 20),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from(["int64", "int32", "uint8", "float64", "object"]),
)
def test_match_keys_is_the_dictionary_lookup(width, span, n, m, seed, dtype):
    rng = np.random.default_rng(seed)
    lo = 0 if dtype == "uint8" else -span
    hi = min(span, 255) if dtype in ("uint8",) else span
    hi = min(hi, 2**31 - 1) if dtype == "int32" else hi
    lo = max(lo, -(2**31)) if dtype == "int32" else lo
    pool = rng.integers(lo, hi, size=(n + m, width), dtype=np.int64)
    keys = np.unique(pool[n:], axis=0)
    keys = keys[rng.permutation(len(keys))]
    rows = np.concatenate([pool[:n], keys[: n // 2]])  # some rows hold a key

    def as_cols(a):
        if dtype == "object":
            return [np.asarray([f"v{x}" for x in a[:, j]], dtype=object) for j in range(width)]
        return [a[:, j].astype(dtype) for j in range(width)]

    cols, kcols = as_cols(rows), as_cols(keys)
    where = {tuple(c[i] for c in kcols): i for i in range(len(keys))}
    want = np.array([where.get(tuple(c[i] for c in cols), -1) for i in range(len(rows))])
    found, at = match_keys(cols, kcols)
    assert at.tolist() == want.tolist()
    assert found.tolist() == (want >= 0).tolist()
    coded = merge._coded_match(cols, kcols)
    if dtype in ("int64", "int32", "uint8") and span < 2**40:  # the coded search applies
        assert coded is not None


@settings(max_examples=200, deadline=None)
@given(
    old=st.sets(st.integers(0, 60), max_size=40),
    new=st.sets(st.integers(0, 60), max_size=25),
)
@pytest.mark.parametrize("compiled", [True, False])
def test_patched_rows_are_the_kept_rows_and_the_new_sorted_by_code(compiled, old, new):
    """``merge.patched``: rows sorted by code with new rows written over old ones of the same
    code and the others inserted, equal to concatenating the kept rows and the new ones
    and sorting by code (a keyed table's log after a change); compiled (int64 columns,
    :func:`faq.kernel.compiled_merge.patch_rows`) or by numpy, where more than 16 inserted
    rows take ``np.insert``, fewer the copied runs."""
    from unittest import mock

    if compiled and not merge.NUMBA:
        pytest.skip("numba is not installed")
    with mock.patch.object(merge, "NUMBA", compiled):
        _check_patched(merge.patched, old, new)


def _check_patched(patched, old, new):
    """``patched`` of two columns against a dict of code to row."""
    codes = np.array(sorted(old), dtype=np.int64)
    add = np.array(list(new), dtype=np.int64)  # any order
    hit = np.array([int(np.searchsorted(codes, c)) if c in old else -1 for c in new], np.int64)
    got_codes, got = patched(codes, [codes * 10, -codes], hit, add, [add * 10 + 1, add + 7])
    model = {int(c): (int(c) * 10, -int(c)) for c in codes}
    model |= {int(c): (int(c) * 10 + 1, int(c) + 7) for c in add}
    assert got_codes.tolist() == sorted(model)
    rows = zip(got[0].tolist(), got[1].tolist(), strict=True)
    assert list(rows) == [model[c] for c in sorted(model)]
