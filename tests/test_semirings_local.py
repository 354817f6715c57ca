"""Driver-side semiring operations (semirings.local) agree with the semirings' Python ops."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import semirings
from semirings.local import local_ops

VALUES = {
    "counting": st.integers(0, 10**6),
    "integer": st.integers(-(10**6), 10**6),
    "real": st.floats(-1e6, 1e6, allow_nan=False),
    "boolean": st.booleans(),
    "max-product": st.floats(0, 1e6, allow_nan=False),
    "min-plus": st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(math.inf)),
    "max-plus": st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(-math.inf)),
    "log": st.one_of(st.floats(-50, 50, allow_nan=False), st.just(-math.inf)),
}
BOTTLENECK = semirings.Semiring(
    name="bottleneck-local-test", zero=0.0, one=math.inf, add=max, mul=min
)


def close(a, b) -> bool:
    if isinstance(a, bool | np.bool_) or a == b:
        return bool(a == b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("name", [*VALUES, "user"])
@given(data=st.data())
def test_mul_and_grouped_add_match_python(name, data):
    S = BOTTLENECK if name == "user" else semirings.get(name)
    values = st.floats(0, 1e6, allow_nan=False) if name == "user" else VALUES[name]
    o = local_ops(S)
    rows = data.draw(st.lists(st.tuples(st.integers(0, 3), values, values), min_size=1))
    keys, a, b = (list(c) for c in zip(*rows, strict=True))
    got = o.mul(np.asarray(a, dtype=o.dtype), np.asarray(b, dtype=o.dtype))
    assert all(close(g, S.mul(x, y)) for g, x, y in zip(got, a, b, strict=True))
    df = pd.DataFrame({"k": keys, "value": pd.Series(a, dtype=o.dtype)})
    out = o.reduce(df, ["k"], "value")
    want = {
        k: functools.reduce(S.add, [v for kk, v in zip(keys, a, strict=True) if kk == k])
        for k in set(keys)
    }
    assert dict(zip(out["k"], out["value"], strict=True)).keys() == want.keys()
    assert all(close(v, want[k]) for k, v in zip(out["k"], out["value"], strict=True))
    total = o.reduce(df, [], "value")["value"].iloc[0]
    assert close(total, functools.reduce(S.add, a))
    nz = o.nonzero(np.asarray(a, dtype=o.dtype))
    assert list(nz) == [not S.is_zero(x) for x in a]


def test_integer_overflow_raises_like_spark_ansi():
    o = local_ops(semirings.COUNTING)
    with pytest.raises(OverflowError, match="'counting' product overflowed"):
        o.mul(np.array([2**40]), np.array([2**40]))
    df = pd.DataFrame({"k": [1, 1], "value": np.array([2**62, 2**62], dtype=np.int64)})
    with pytest.raises(OverflowError, match="'counting' sum overflowed"):
        o.reduce(df, ["k"], "value")
    with pytest.raises(OverflowError, match="sum overflowed"):
        o.reduce(df, [], "value")


def test_empty_input_gives_no_rows():
    o = local_ops(semirings.LOG)
    empty = pd.DataFrame({"k": pd.Series(dtype="int64"), "value": pd.Series(dtype=float)})
    assert o.reduce(empty, ["k"], "value").empty and o.reduce(empty, [], "value").empty


@pytest.mark.parametrize("name", [*VALUES, "user"])
@given(data=st.data())
def test_segment_sums_and_repeated_ones_match_python(name, data):
    S = BOTTLENECK if name == "user" else semirings.get(name)
    values = st.floats(0, 1e6, allow_nan=False) if name == "user" else VALUES[name]
    o = local_ops(S)
    segments = data.draw(st.lists(st.lists(values, min_size=1, max_size=5), min_size=1))
    flat = np.asarray([x for seg in segments for x in seg], dtype=o.dtype)
    starts = np.cumsum([0] + [len(seg) for seg in segments[:-1]])
    got = o.reduceat(flat, starts)
    for g, seg in zip(got, segments, strict=True):
        assert close(g, functools.reduce(S.add, seg))
    counts = np.asarray(data.draw(st.lists(st.integers(1, 40), min_size=1)), dtype=np.int64)
    for g, n in zip(o.ones(counts), counts.tolist(), strict=True):
        assert close(g, functools.reduce(S.add, [S.one] * n))


def test_integer_overflow_is_exact_at_the_limit():
    o = local_ops(semirings.INTEGER)
    top = 2**63 - 1
    assert o.reduceat(np.array([2**62, 2**62 - 1]), np.array([0])).tolist() == [top]
    with pytest.raises(OverflowError, match="sum overflowed"):
        o.reduceat(np.array([2**62, 2**62]), np.array([0]))
    assert o.mul(np.array([-(2**31)]), np.array([2**32])).tolist() == [-(2**63)]
    with pytest.raises(OverflowError, match="product overflowed"):
        o.mul(np.array([2**31]), np.array([2**32]))
    assert o.total(np.array([top, -1, 1])) == top


@pytest.mark.parametrize("name", [*VALUES, "user"])
def test_valid_agrees_with_contains(name):
    S = BOTTLENECK if name == "user" else semirings.get(name)
    o = local_ops(S)
    if o.dtype is np.bool_:
        samples = [True, False]
    elif o.dtype is np.int64:
        samples = [0, 1, -1, 5, 2**62]
    else:
        samples = [0.0, 1.5, -2.0, math.inf, -math.inf, math.nan]
    got = o.valid(np.asarray(samples, dtype=o.dtype)).tolist()
    assert got == [bool(S.contains(x)) for x in samples]
