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
from semirings.aggregates import COUNTING_MAX
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


# -- declared numpy operations ----------------------------------------------------------------
# Every engine semiring declares its numpy side (semirings.core.NumpyOps) beside its Spark
# side; local_ops reads the declaration.  Samples per semiring: values of the domain,
# its zero and one first, and (second list) values outside it for the validity test.
ENGINE = {S.name: S for S in (*semirings.BUILTINS, COUNTING_MAX, semirings.PROVENANCE)}
SAMPLES = {
    "counting": ([0, 1, 2, 7, 2**30], [-1, -(2**40)]),
    "integer": ([0, 1, -3, 7, -(2**30)], []),
    "real": ([0.0, 1.0, -2.5, 0.25, 1e6], [math.inf, -math.inf, math.nan]),
    "boolean": ([False, True], []),
    "max-product": ([0.0, 1.0, 0.5, 3.0], [-1.0, math.inf, math.nan]),
    "min-plus": ([math.inf, 0.0, -2.0, 3.5], [-math.inf, math.nan]),
    "max-plus": ([-math.inf, 0.0, -2.0, 3.5], [math.inf, math.nan]),
    "log": ([-math.inf, 0.0, -2.0, 3.5], [math.inf, math.nan]),
    "max-times": ([0, 1, 3, 2**20], [-1]),
    "provenance": (["0", "1", "a", "2*a*b + c**2"], ["b*a", "a +", "0*a"]),
}


def test_every_engine_semiring_has_samples_and_declares_numpy_ops():
    assert set(SAMPLES) == set(ENGINE)
    for S in ENGINE.values():
        assert isinstance(S.numpy, semirings.NumpyOps), S.name
        assert local_ops(S).dtype is S.numpy.dtype


@pytest.mark.parametrize("name", list(SAMPLES))
def test_declared_numpy_ops_agree_with_the_python_functions(name):
    S, (inside, outside) = ENGINE[name], SAMPLES[name]
    n = S.numpy
    assert inside[:2] == [S.zero, S.one]
    pairs = [(a, b) for a in inside for b in inside]
    a = np.asarray([p[0] for p in pairs], dtype=n.dtype)
    b = np.asarray([p[1] for p in pairs], dtype=n.dtype)
    got = n.mul(a, b)
    assert all(close(g, S.mul(x, y)) for g, (x, y) in zip(got, pairs, strict=True))
    # each pair as one segment of two values, then every sample alone, then all together
    flat = np.asarray([x for p in pairs for x in p], dtype=n.dtype)
    sums = n.reduceat(flat, np.arange(0, len(flat), 2))
    assert all(close(g, S.add(x, y)) for g, (x, y) in zip(sums, pairs, strict=True))
    alone = n.reduceat(np.asarray(inside, dtype=n.dtype), np.arange(len(inside)))
    assert all(close(g, x) for g, x in zip(alone, inside, strict=True))
    everything = n.reduceat(np.asarray(inside, dtype=n.dtype), np.zeros(1, dtype=np.int64))
    assert close(everything[0], functools.reduce(S.add, inside))
    counts = np.asarray([1, 2, 3, 8], dtype=np.int64)
    for g, k in zip(n.ones(counts), counts.tolist(), strict=True):
        assert close(g, functools.reduce(S.add, [S.one] * k))
    values = np.asarray(inside, dtype=n.dtype)
    assert n.nonzero(values).tolist() == [not S.is_zero(x) for x in inside]
    samples = inside + outside
    typed = np.asarray(samples, dtype=n.dtype)
    assert n.valid(typed).tolist() == [bool(S.contains(x)) for x in samples]
    assert not n.valid(np.asarray(outside, dtype=n.dtype)).any()


@pytest.mark.parametrize("name", list(SAMPLES))
def test_declared_flags_agree_with_the_python_functions(name):
    S, (inside, _) = ENGINE[name], SAMPLES[name]
    # idempotent ⊕ exactly when x ⊕ x == x on every sample
    assert S.idempotent == all(S.add(x, x) == x for x in inside)
    # presence: every value is zero or one and one ⊕ one is one
    assert S.presence == (set(inside) <= {S.zero, S.one} and S.add(S.one, S.one) == S.one)
    if S.completion is not None:  # the ring extends this semiring's values and operations
        R = S.completion
        assert R.is_ring and not S.is_ring
        assert (R.zero, R.one) == (S.zero, S.one)
        for x in inside:
            assert R.contains(x)
            for y in inside:
                assert R.add(x, y) == S.add(x, y) and R.mul(x, y) == S.mul(x, y)
    if S.spark is not None and S.spark.ordered and S.idempotent:  # ⊕ selects by the order
        pick = max if S.add(S.zero, S.one) == max(S.zero, S.one) else min
        assert all(S.add(x, y) == pick(x, y) for x in inside for y in inside)


def test_the_declared_properties_of_the_builtins():
    assert semirings.COUNTING.completion is semirings.INTEGER
    assert [S.name for S in ENGINE.values() if S.completion is not None] == ["counting"]
    assert [S.name for S in ENGINE.values() if S.presence] == ["boolean"]
    assert all(S.spark is not None and S.spark.ordered for S in (*semirings.BUILTINS, COUNTING_MAX))
    assert not semirings.PROVENANCE.spark.ordered  # strings: Spark's order is not ⊕'s


def test_a_user_semiring_declares_nothing_and_runs_its_python_functions():
    S = BOTTLENECK
    assert (S.numpy, S.aggregates, S.completion, S.presence, S.spark) == (
        None,
        None,
        None,
        False,
        None,
    )
    o = local_ops(S)
    assert o.dtype is object
    a = np.asarray([1.0, 5.0, 0.0], dtype=object)
    b = np.asarray([3.0, 2.0, 7.0], dtype=object)
    assert o.mul(a, b).tolist() == [1.0, 2.0, 0.0]
    assert o.reduceat(a, np.array([0, 2])).tolist() == [5.0, 0.0]
    assert o.ones(np.array([1, 4])).tolist() == [math.inf, math.inf]
    assert o.nonzero(a).tolist() == [True, True, False]
    assert o.valid(np.asarray([1.0, "x", None], dtype=object)).tolist() == [True, False, False]
    df = pd.DataFrame({"k": [1, 1, 2], "value": a})
    out = o.reduce(df, ["k"], "value")
    assert dict(zip(out["k"], out["value"], strict=True)) == {1: 5.0, 2: 0.0}


def test_a_user_semiring_that_declares_numpy_ops_gets_them():
    calls = []

    def mul(a, b):
        calls.append("mul")
        return np.minimum(a, b)

    n = semirings.NumpyOps(
        np.float64,
        mul,
        lambda v, s: np.maximum.reduceat(np.asarray(v, dtype=np.float64), s),
        lambda c: np.full(len(c), math.inf),
        lambda v: np.asarray(v) != 0.0,
        lambda v: ~np.isnan(v) & (v >= 0),
    )
    S = semirings.Semiring(
        name="bottleneck-declared", zero=0.0, one=math.inf, add=max, mul=min, numpy=n
    )
    o = local_ops(S)
    assert o.dtype is np.float64
    assert o.mul(np.array([1.0, 5.0]), np.array([3.0, 2.0])).tolist() == [1.0, 2.0]
    assert calls == ["mul"]
    assert o.valid(np.array([1.0, -1.0, math.nan])).tolist() == [True, False, False]


def test_a_declaration_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="numpy must be a NumpyOps"):
        semirings.Semiring(name="bad", zero=0, one=1, add=max, mul=min, numpy=np.add)
    with pytest.raises(TypeError, match="spark must be a SparkOps"):
        semirings.Semiring(name="bad", zero=0, one=1, add=max, mul=min, spark="fast")
    with pytest.raises(ValueError, match="completion 'counting' is not a ring"):
        semirings.Semiring(
            name="bad", zero=0, one=1, add=max, mul=min, completion=semirings.COUNTING
        )


@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=50)
    | st.lists(st.integers(-5, 5000), max_size=50)
    | st.lists(st.text(max_size=2), max_size=20),
)
def test_count_distinct_counts_what_distinct_finds(keys):
    """Presence counting (integers in a narrow range) and sorting (wide ranges, strings)
    count the same distinct keys as numpy."""
    from semirings.local import count_distinct

    a = np.array(keys, dtype=object if keys and isinstance(keys[0], str) else np.int64)
    if a.dtype == object:
        a = np.array(keys)
    assert count_distinct(a) == len(np.unique(a))
    if a.dtype.kind == "i" and len(a) and a.min() >= 0:
        assert count_distinct(a.astype(np.uint64)) == len(np.unique(a))
