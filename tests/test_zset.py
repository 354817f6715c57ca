"""Z-set operators on DataFrames, checked on the worked examples of DBSP's definitions.

Oracle: Z-sets as Python dicts ``{key: weight}``, where ``+`` adds weights per
key and drops zeros and a join multiplies the weights of matching keys
(Budiu et al., "DBSP", VLDB 2023, section 2 and the bilinear-operator rule).
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

import semirings
from incremental import zset

Z = "k bigint, x string, value bigint"


def zdf(spark, rows, schema=Z):
    return spark.createDataFrame(rows, schema)


def explain(df) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain()
    return buf.getvalue()


def test_plus_drops_keys_whose_weights_cancel(spark):
    # DBSP §2: {a ↦ 1, b ↦ 2} + {a ↦ -1, c ↦ 1} = {b ↦ 2, c ↦ 1}
    a = zdf(spark, [(1, "a", 1), (2, "b", 2)])
    b = zdf(spark, [(1, "a", -1), (3, "c", 1)])
    assert zset.to_dict(zset.plus(a, b)) == {(2, "b"): 2, (3, "c"): 1}


def test_consolidate_merges_duplicates_and_drops_zeros(spark):
    z = zdf(spark, [(1, "a", 2), (1, "a", 3), (2, "b", 1), (2, "b", -1), (3, "c", 0)])
    rows = zset.consolidate(z).collect()
    assert sorted(tuple(r) for r in rows) == [(1, "a", 5)]


def test_consolidate_of_an_empty_scalar_is_empty(spark):
    empty = spark.createDataFrame([], "value bigint")
    assert zset.consolidate(empty).collect() == []


def test_negate_and_minus(spark):
    a = zdf(spark, [(1, "a", 2), (2, "b", -1)])
    assert zset.to_dict(zset.negate(a)) == {(1, "a"): -2, (2, "b"): 1}
    assert zset.to_dict(zset.minus(a, a)) == {}


def test_negate_needs_a_ring(spark):
    a = spark.createDataFrame([(1, 0.5)], "k bigint, value double")
    with pytest.raises(ValueError, match="no additive inverse"):
        zset.negate(a, semirings.MAX_PRODUCT)


def test_join_multiplies_weights(spark):
    # DBSP §2 (join of Z-sets): a row of A ⋈ B has weight w_A(a) · w_B(b)
    a = zdf(spark, [(1, "x", 2), (2, "y", -1), (3, "z", 4)])
    b = spark.createDataFrame(
        [(1, "p", 3), (2, "q", 5), (2, "r", 1)], "k bigint, y string, value bigint"
    )
    out = zset.to_dict(zset.join(a, b))
    assert out == {(1, "x", "p"): 6, (2, "y", "q"): -5, (2, "y", "r"): -1}


def test_join_is_bilinear(spark):
    a1 = zdf(spark, [(1, "x", 2)])
    a2 = zdf(spark, [(1, "x", -2), (2, "y", 1)])
    b = spark.createDataFrame([(1, "p", 3), (2, "q", 1)], "k bigint, y string, value bigint")
    left = zset.join(zset.plus(a1, a2), b)
    right = zset.plus(zset.join(a1, b), zset.join(a2, b))
    assert zset.to_dict(left) == zset.to_dict(right) == {(2, "y", "q"): 1}


def test_incremental_join_identity(spark):
    # Δ(A ⋈ B) = ΔA ⋈ ΔB + A ⋈ ΔB + ΔA ⋈ B, with A and B the old values
    sb = "k bigint, y string, value bigint"
    a = zdf(spark, [(1, "x", 1), (2, "y", 2)])
    da = zdf(spark, [(1, "x", -1), (3, "z", 1)])
    b = spark.createDataFrame([(1, "p", 1), (3, "q", 2)], sb)
    db = spark.createDataFrame([(2, "r", 3), (3, "q", -2)], sb)
    before = zset.to_dict(zset.join(a, b))
    after = zset.to_dict(zset.join(zset.plus(a, da), zset.plus(b, db)))
    expected = {k: after.get(k, 0) - before.get(k, 0) for k in {*before, *after}}
    expected = {k: w for k, w in expected.items() if w}
    assert zset.to_dict(zset.join_delta(a, da, b, db)) == expected
    assert expected == {(1, "x", "p"): -1, (2, "y", "r"): 6}


def test_project_sums_weights(spark):
    z = zdf(spark, [(1, "a", 2), (1, "b", 3), (2, "c", 1), (2, "d", -1)])
    assert zset.to_dict(zset.project(z, ["k"])) == {(1,): 5}


def test_operators_take_any_semiring(spark):
    mp = semirings.MAX_PRODUCT
    a = spark.createDataFrame([(1, 0.5), (1, 0.25), (2, 1.0)], "k bigint, value double")
    b = spark.createDataFrame([(1, 0.5), (2, 0.0)], "k bigint, value double")
    assert zset.to_dict(a, mp) == {(1,): 0.5, (2,): 1.0}
    assert zset.to_dict(zset.join(a, b, mp), mp) == {(1,): 0.25}  # max(0.5·0.5, 0.25·0.5)
    assert zset.to_dict(zset.plus(a, b, mp), mp) == {(1,): 0.5, (2,): 1.0}


def test_weighted_adds_unit_weights(spark):
    df = spark.createDataFrame([(1, "a"), (1, "a")], "k bigint, x string")
    assert zset.to_dict(zset.weighted(df)) == {(1, "a"): 2}


def test_add_delta_shuffles_only_the_delta(spark):
    base = zdf(spark, [(i, str(i % 3), 1) for i in range(20)])
    base = zset.consolidate(zset.partition(base, 2)).localCheckpoint(eager=True)
    delta = zdf(spark, [(1, "1", -1), (50, "2", 4), (50, "2", 1)])
    merged = zset.add_delta(base, delta, partitions=2)
    plan = explain(merged)
    # one exchange, above the delta's scan only: the partitioned base is not shuffled
    assert len(re.findall(r"Exchange", plan)) == 1, plan
    got = zset.to_dict(merged)
    want = {(i, str(i % 3)): 1 for i in range(20) if i != 1}
    want[(50, "2")] = 5
    assert got == want


def test_key_mismatch_is_refused(spark):
    a = zdf(spark, [(1, "a", 1)])
    b = spark.createDataFrame([(1, 1)], "k bigint, value bigint")
    with pytest.raises(ValueError, match="key columns differ"):
        zset.plus(a, b)
    with pytest.raises(ValueError, match="needs a 'value' column"):
        zset.consolidate(spark.createDataFrame([(1,)], "k bigint"))
