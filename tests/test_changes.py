"""incremental.changes: change feeds (Delta Lake change data feed, ``op`` column) as deltas."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql.types import LongType

from incremental import changes
from tests.helpers import spark_jobs


def test_delta_change_feed(spark):
    """Inserts, deletes and update pre/post image pairs; metadata dropped, value kept in place."""
    feed = spark.createDataFrame(
        [
            (1, "insert", 2, 0.5, 3, "2024-01-01 00:00:00"),
            (1, "delete", 3, 1.5, 3, "2024-01-01 00:00:00"),
            (2, "update_preimage", 3, 1.0, 4, "2024-01-02 00:00:00"),
            (2, "update_postimage", 3, 7.0, 4, "2024-01-02 00:00:00"),
            (4, "update_preimage", 5, 2.0, 5, "2024-01-03 00:00:00"),
            (4, "update_postimage", 6, 2.0, 5, "2024-01-03 00:00:00"),
        ],
        "src bigint, _change_type string, dst int, value double, "
        "_commit_version bigint, _commit_timestamp string",
    )
    out = changes(feed, kind="delta")
    assert out.columns == ["src", "dst", "value", "_weight"]
    assert out.schema["_weight"].dataType == LongType()
    assert out.schema["dst"].dataType == feed.schema["dst"].dataType
    assert sorted(map(tuple, out.collect())) == [
        (1, 2, 0.5, 1),
        (1, 3, 1.5, -1),
        (2, 3, 1.0, -1),  # an update retracts the old row ...
        (2, 3, 7.0, 1),  # ... and inserts the new one
        (4, 5, 2.0, -1),  # a key that changes, too
        (4, 6, 2.0, 1),
    ]


def test_delta_change_feed_without_metadata_or_value(spark):
    feed = spark.createDataFrame(
        [("insert", 1, 2), ("delete", 2, 3)], "_change_type string, a long, b long"
    )
    out = changes(feed, "delta")
    assert out.columns == ["a", "b", "_weight"]
    assert sorted(map(tuple, out.collect())) == [(1, 2, 1), (2, 3, -1)]


def test_op_column_of_strings(spark):
    """Every accepted spelling, in any case; a dotted key name is a column, not a struct field."""
    spellings = ["+", "-", "insert", "delete", "i", "d", "INSERT", "Delete", "I", "D", "iNsErT"]
    df = spark.createDataFrame(
        [(k, op, float(k)) for k, op in enumerate(spellings)], "`a.b` int, op string, value double"
    )
    out = changes(df, kind="op")
    assert out.columns == ["a.b", "value", "_weight"]
    assert out.schema["_weight"].dataType == LongType()
    expected = [1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1]
    assert sorted(map(tuple, out.collect())) == [(k, float(k), w) for k, w in enumerate(expected)]


def test_op_column_of_integers(spark):
    """1 / -1 in an op column of each integer type (one job for all four)."""
    outs = []
    for i, t in enumerate(["tinyint", "smallint", "int", "bigint"]):
        df = spark.createDataFrame([(1, 10 * i), (-1, 10 * i + 1)], f"op {t}, k bigint")
        out = changes(df, kind="op")
        assert out.columns == ["k", "_weight"] and out.schema["_weight"].dataType == LongType()
        outs.append(out)
    union = outs[0].unionByName(outs[1]).unionByName(outs[2]).unionByName(outs[3])
    assert sorted(map(tuple, union.collect())) == [
        (k, w) for i in range(4) for k, w in [(10 * i, 1), (10 * i + 1, -1)]
    ]


def test_values_not_accepted_get_a_null_weight_or_fail_the_check(spark):
    """check=False: a null _weight (refused by the view); check=True: ValueError naming it."""
    ops = spark.createDataFrame(
        [(1, "+"), (2, "?"), (3, None), (4, " +"), (5, "-")], "k int, op string"
    )
    weights = dict(map(tuple, changes(ops, kind="op").collect()))
    assert weights == {1: 1, 2: None, 3: None, 4: None, 5: -1}
    with pytest.raises(ValueError, match=r"column 'op' .* not accepted: ' \+'; 3 row\(s\)") as e:
        changes(ops, kind="op", check=True)
    assert "(1 of them null)" in str(e.value) and "'insert'" in str(e.value)

    nulls = spark.createDataFrame([(1, None)], "k int, op string")
    with pytest.raises(ValueError, match=r"column 'op' .* not accepted: null; 1 row"):
        changes(nulls, kind="op", check=True)

    ints = spark.createDataFrame([(1, 1), (2, 0), (3, 2)], "k int, op int")
    with pytest.raises(ValueError, match=r"column 'op' .* not accepted: 0; 2 row.*: 1, -1"):
        changes(ints, kind="op", check=True)

    # Delta Lake writes lower case: anything else is not a change type
    feed = spark.createDataFrame(
        [(1, "insert"), (2, "UPDATE_POSTIMAGE"), (3, "merge")], "k int, _change_type string"
    )
    with pytest.raises(
        ValueError, match=r"column '_change_type' .* not accepted: 'UPDATE_POSTIMAGE'; 2 row"
    ):
        changes(feed, kind="delta", check=True)


def test_changes_runs_no_spark_job_and_the_check_one(spark):
    feed = spark.createDataFrame(
        [(1, 2, "insert", 3), (1, 2, "delete", 4)],
        "a long, b long, _change_type string, _commit_version long",
    )
    ops = spark.createDataFrame([(1, "+"), (2, "D")], "k long, op string")
    ints = spark.createDataFrame([(1, 1), (2, -1)], "k long, op int")

    outs, jobs = spark_jobs(
        spark,
        lambda: [changes(feed, "delta"), changes(ops, "op"), changes(ints, kind="op")],
        "changes-lazy",
    )
    assert jobs == 0 and [o.columns for o in outs] == [
        ["a", "b", "_weight"],
        ["k", "_weight"],
        ["k", "_weight"],
    ]

    checked, jobs = spark_jobs(spark, lambda: changes(ops, "op", check=True), "changes-check")
    assert jobs == 1, jobs
    assert sorted(map(tuple, checked.collect())) == [(1, 1), (2, -1)]


@pytest.mark.parametrize(
    "kind, schema, match",
    [
        ("cdc", "k long, op string", r"unknown kind 'cdc'; the kinds are 'delta', 'op'"),
        ("Delta", "k long, _change_type string", r"unknown kind 'Delta'"),
        (
            "delta",
            "k long, op string",
            r"no column '_change_type'; columns found: \['k', 'op'\]",
        ),
        (
            "op",
            "k long, _change_type string, value double",
            r"no column 'op'; columns found: \['k', '_change_type', 'value'\]",
        ),
        ("op", "k long, op string, _weight long", r"already has a '_weight' column"),
        ("delta", "k long, _change_type string, _WEIGHT int", r"already has a '_WEIGHT' column"),
        ("op", "k long, op double", r"column 'op' has type double; accepted: a string type"),
        ("op", "k long, op boolean", r"column 'op' has type boolean"),
        ("op", "k long, op decimal(10,0)", r"column 'op' has type decimal\(10,0\)"),
        ("delta", "k long, _change_type int", r"column '_change_type' has type int"),
        ("op", "op string, value double", r"no key column is left"),
        ("op", "op int", r"no key column is left"),
        (
            "delta",
            "_commit_version long, _change_type string, value long, _commit_timestamp timestamp",
            r"no key column is left.*columns found",
        ),
    ],
)
def test_bad_input_is_refused_from_the_schema(spark, kind, schema, match):
    df = spark.createDataFrame([], schema)
    with pytest.raises(ValueError, match=match):
        changes(df, kind=kind)


def test_repeated_columns_and_non_dataframes_are_refused(spark):
    df = spark.createDataFrame([(1, 2, "+")], "k long, x long, op string").toDF("k", "k", "op")
    with pytest.raises(ValueError, match=r"repeated column names \['k'\]"):
        changes(df, kind="op")
    with pytest.raises(TypeError, match="expects a Spark DataFrame, got pandas DataFrame"):
        changes(pd.DataFrame({"a": [1]}), kind="op")
    with pytest.raises(TypeError, match="expects a Spark DataFrame, got list"):
        changes([(1, "+")], kind="op")
