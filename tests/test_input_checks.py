"""Issue 11, points 2-5: checked conversions, key types, user-function errors, quiet logs.

Each test names the input that once gave a wrong answer or a raw Spark error.
"""

from __future__ import annotations

import logging
import pickle
import re
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from pyspark import cloudpickle

import semirings
from faq import Factor, einsum, query
from faq.session import quiet_spark_errors
from semirings import SemiringFunctionError
from semirings.aggregates import COUNTING_MAX

# -- point 2: every conversion into a semiring's type is checked ---------------------------


@pytest.mark.parametrize(
    ("array", "semiring", "shown"),
    [
        (np.array([[2**64 - 1]], dtype=np.uint64), "integer", "18446744073709551615"),
        (np.array([[1e19]]), "integer", "1e+19"),
        (np.array([[-1e19]]), "integer", "-1e+19"),
        (np.array([[2.0**63]]), "counting", "9.223372036854776e+18"),
        (np.array([[2**63]], dtype=np.uint64), "counting", "9223372036854775808"),
    ],
)
def test_from_numpy_refuses_numbers_beyond_int64(array, semiring, shown):
    """Was {(0, 0): -1} for uint64 2**64-1 and int64 min for 1e19."""
    with pytest.raises(ValueError, match=rf"'A': {re.escape(shown)} is outside the 64-bit"):
        Factor.from_numpy(array, vars=("i", "j"), semiring=semiring, name="A")


def test_from_numpy_keeps_the_largest_int64():
    big = np.array([[2**63 - 1]], dtype=np.uint64)
    f = Factor.from_numpy(big, vars=("i", "j"), semiring="integer")
    assert f.to_dict() == {(0, 0): 2**63 - 1}
    below = np.array([[2.0**62]])
    assert Factor.from_numpy(below, vars=("i", "j"), semiring="integer").to_dict() == {
        (0, 0): 2**62
    }


def test_a_plain_array_beyond_int64_is_refused_when_a_query_uses_it():
    A = Factor.from_numpy(np.array([[1e19, 1.0]]), vars=("i", "j"), name="A")
    q = query("Q(i) :- A(i, j)", semiring="integer")
    with pytest.raises(ValueError, match="outside the 64-bit integers"):
        q.solve(A=A)


def test_from_pandas_refuses_a_uint64_value_beyond_int64():
    pdf = pd.DataFrame({"a": [1], "value": np.array([2**64 - 1], dtype=np.uint64)})
    with pytest.raises(ValueError, match="column 'value': 18446744073709551615 is outside"):
        Factor.from_pandas(pdf, semiring="integer", name="A")


@pytest.mark.parametrize(
    ("value", "semiring"),
    [(2**70, "integer"), (1e19, "counting"), (float("nan"), "integer"), ("x", "integer"),
     (1.5, "integer"), (True, "integer"), (float("nan"), "real"), ("x", "real"),
     (float("nan"), "min-plus"), (-1.0, "max-product"), (2, "boolean")],
)  # fmt: skip
def test_from_dict_refuses_values_outside_the_semiring(value, semiring):
    with pytest.raises(ValueError, match=r"'A', key \(1,\): .* is not a value of"):
        Factor.from_dict({(1,): value}, ("a",), semiring, name="A")


def test_a_spark_value_column_of_another_type_is_refused(spark):
    df = spark.createDataFrame([(0, 1, "3")], "a bigint, b bigint, value string")
    q = query("Q(a) :- A(a, b)", semiring="integer")
    with pytest.raises(ValueError, match="relation 'A'.*'value'"):
        q.solve(A=df, backend="spark")


# -- point 3: keys of different types are refused, never cast ------------------------------


def test_string_keys_joined_to_integer_keys_are_refused(spark):
    """Was a silent cast, then CAST_INVALID_INPUT deep inside Spark."""
    A = spark.createDataFrame([(0, "x")], "a bigint, b string")
    B = spark.createDataFrame([(1, 2)], "b bigint, c bigint")
    q = query("Q(a, c) :- A(a, b), B(b, c)", semiring="counting")
    with pytest.raises(ValueError) as err:
        q.solve(A=A, B=B)
    msg = str(err.value)
    assert "variable 'b'" in msg and "'A'" in msg and "'B'" in msg
    assert "string" in msg and "bigint" in msg


def test_key_types_local_factors_and_einsum():
    A = Factor.from_dict({(0, "x"): 1}, ("i", "j"), "counting", name="A")
    B = Factor.from_dict({(1, 2): 1}, ("j", "k"), "counting", name="B")
    with pytest.raises(ValueError, match="variable 'j'.*string.*bigint"):
        einsum("ij,jk->ik", A, B, semiring="counting")
    D = Factor.from_dict({(0, 1.5): 1}, ("i", "j"), "counting", name="D")
    with pytest.raises(ValueError, match="variable 'j'.*double.*bigint"):
        einsum("ij,jk->ik", D, B, semiring="counting")


def test_integer_keys_of_any_width_join(spark):
    A = spark.createDataFrame([(0, 1)], "a int, b int")
    B = spark.createDataFrame([(1, 2)], "b bigint, c smallint")
    q = query("Q(a, c) :- A(a, b), B(b, c)", semiring="counting")
    assert q.solve(A=A, B=B).to_dict() == {(0, 2): 1}


def test_string_keys_on_both_sides_join(spark):
    A = spark.createDataFrame([("u", "v")], "a string, b string")
    q = query("Q(a, c) :- A(a, b), A(b, c)", semiring="counting")
    B = spark.createDataFrame([("u", "v"), ("v", "w")], "a string, b string")
    assert q.solve(A=A).to_dict() == {}
    assert q.solve(A=B).to_dict() == {("u", "w"): 1}


# -- point 4: a user semiring's failing function is named, in one line ----------------------


def _fragile() -> semirings.Semiring:
    def mul(a, b):
        if a > 1 and b > 1:
            raise ZeroDivisionError("boom")
        return a * b

    return semirings.Semiring(name="fragile", zero=0, one=1, add=lambda a, b: a + b, mul=mul)


@pytest.mark.parametrize("backend", ["driver", "spark"])
def test_a_failing_user_function_is_named(spark, backend):
    """Was a long Py4J PythonException from the worker on the Spark path."""
    B = spark.createDataFrame([(0, 1, 2), (1, 2, 3)], "a bigint, b bigint, value bigint")
    q = query("Q(a, c) :- A(a, b), A(b, c)", semiring=_fragile())
    with pytest.raises(SemiringFunctionError) as err:
        q.solve(A=B, backend=backend)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("semiring 'fragile': ⊗ (mul) raised ZeroDivisionError: boom")
    assert err.value.__cause__ is not None  # the original error, chained


def test_a_failing_add_is_named():
    def add(a, b):
        raise KeyError("nope")

    S = semirings.Semiring(name="bad-add", zero=0, one=1, add=add, mul=lambda a, b: a * b)
    A = Factor.from_dict({(0, 1): 2, (0, 2): 3}, ("a", "b"), S, name="A")
    with pytest.raises(SemiringFunctionError, match=r"'bad-add': ⊕ \(add\) raised KeyError"):
        query("Q(a) :- A(a, b)", semiring=S).solve(A=A, backend="driver")


# -- point 5: no Spark error output for errors the engine turns into its own ---------------


def test_overflow_is_one_clean_error_without_json_log_records(spark, caplog):
    A = spark.createDataFrame([(0, 1, 2**62), (1, 2, 2**62)], "a bigint, b bigint, value bigint")
    q = query("Q(a, c) :- A(a, b), A(b, c)", semiring="integer")
    with caplog.at_level(logging.DEBUG), pytest.raises(OverflowError, match="overflowed"):
        q.solve(A=A, backend="spark")
    assert not [r for r in caplog.records if r.name.endswith("QueryContextLogger")]


def test_quiet_spark_errors_restores_the_levels():
    lg = logging.getLogger("DataFrameQueryContextLogger")
    before = lg.level
    with quiet_spark_errors():
        assert lg.level > logging.CRITICAL
    assert lg.level == before


# -- built-ins keep their identity in Spark tasks (their fast paths) ------------------------


@pytest.mark.parametrize("S", [*semirings.BUILTINS, COUNTING_MAX], ids=lambda s: s.name)
def test_a_pickled_builtin_is_the_same_object(S):
    """A copy fell back to the element-by-element path inside Spark tasks."""
    assert pickle.loads(cloudpickle.dumps(S)) is S


def test_a_user_semiring_named_like_a_builtin_is_not_swapped():
    mine = semirings.Semiring(name="real", zero=0.0, one=1.0, add=max, mul=min)
    back = pickle.loads(cloudpickle.dumps(mine))
    assert back is not semirings.REAL and back.add is max


def test_from_dict_refuses_a_key_column_of_mixed_types():
    with pytest.raises(ValueError, match="'A': key column 'a' holds values of several types"):
        Factor.from_dict({(1,): 1, ("x",): 1}, ("a",), "counting", name="A")


def test_a_dataframe_with_columns_equal_ignoring_case_is_refused(spark):
    df = spark.createDataFrame([(0, 1)], "a bigint, A bigint")
    with pytest.raises(ValueError, match=r"columns \['A', 'a'\] differ only in case"):
        Factor(df, vars=("x", "y"), name="E")


STREAMING_NOISE = {
    # "spark.sql.adaptive.enabled is not supported in streaming", "Temporary checkpoint"
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream": "ERROR",
    # "Current batch is falling behind"
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor": "ERROR",
    # "Failed to cancel job group"
    "org.apache.spark.scheduler.DAGScheduler": "ERROR",
    # "Query ... terminated with error" and its Java stack trace, after a kill
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution": "FATAL",
}


@pytest.mark.parametrize("name, level", STREAMING_NOISE.items())
def test_local_session_silences_streaming_notices(spark, name, level):
    # the test session comes from local_session(): its JVM read faq/log4j2.properties
    jvm = spark.sparkContext._jvm
    jvm.java.lang.Class.forName(name)  # the class (so the logger name) exists in this Spark
    logger = jvm.org.apache.logging.log4j.LogManager.getLogger(name)
    assert logger.getLevel().toString() == level


@pytest.mark.parametrize(
    "schema, value, message",
    [
        ("double", None, r"column 'value' has 1 null annotation\(s\)"),
        ("decimal(10,2)", Decimal("1.50"), r"column 'value' has type decimal128\(10, 2\)"),
    ],
)
def test_a_spark_value_column_is_refused_naming_its_nulls_or_its_type(
    spark, schema, value, message
):
    # Regression: a null annotation read as "not values of the 'real' semiring, e.g.
    # None", and a decimal column as "type object"
    df = spark.createDataFrame([(0, 1, value)], f"a long, b long, value {schema}")
    with pytest.raises(ValueError, match=message):
        query("Q(a) :- E(a, b)", semiring="real").solve(E=df)


# -- key columns of single values -----------------------------------------------------------
NOT_SINGLE = {
    "dicts": pd.DataFrame({"a": [{"x": 1}], "b": [1]}),
    "lists": pd.DataFrame({"a": [[1, 2]], "b": [1]}),
    "tuples": pd.DataFrame({"a": [(1, 2)], "b": [1]}),
    "integers and strings": pd.DataFrame({"a": [1, "x"], "b": [1, 2]}),
    "complex numbers": pd.DataFrame({"a": [1 + 2j], "b": [1]}),
}


@pytest.mark.parametrize("frame", NOT_SINGLE.values(), ids=NOT_SINGLE.keys())
def test_a_key_column_of_no_single_values_is_refused_by_solve_and_views(frame):
    """solve() raised Python's 'unhashable type: dict' or "'<' not supported between
    instances of 'int' and 'str'"; a view refused them, a solve took tuples and complex
    keys: each is now refused everywhere, naming the column."""
    from incremental import IncrementalView

    q = query("Q(a) :- E(a, b)", semiring="counting")
    with pytest.raises(ValueError, match="key column 'a' .*(single values|cannot be read)"):
        q.solve(E=frame)
    with pytest.raises(ValueError, match="key column 'a' .*single values"):
        Factor.from_pandas(frame, semiring="counting")
    with pytest.raises(ValueError, match="relation 'E'.*column 'a'"):
        IncrementalView(q, E=frame)
    view = IncrementalView(q, E=pd.DataFrame({"a": [1], "b": [1]}))
    with pytest.raises(ValueError, match="delta of relation 'E'"):
        view.step(E=frame)
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


def test_datetime_keys_read_back_as_timestamps_in_solve_and_views():
    """A datetime64 key column read back as nanoseconds (1577836800000000000)."""
    from incremental import IncrementalView

    q = query("Q(a) :- E(a, b)", semiring="counting")
    E = pd.DataFrame({"a": pd.to_datetime(["2020-01-01", "2020-01-02"]), "b": [1, 2]})
    want = {(pd.Timestamp("2020-01-01"),): 1, (pd.Timestamp("2020-01-02"),): 1}
    assert q.solve(E=E).to_dict() == want
    assert IncrementalView(q, E=E).result().to_dict() == want
    assert list(q.solve(E=E).to_pandas()["a"]) == [k for (k,) in want]


def test_spark_key_columns_of_no_single_values_are_refused(spark):
    """A struct or array key column raised 'unhashable type'; a Spark-state view given a
    string key for integer keys raised int()'s "invalid literal ... 'x'"."""
    from incremental import IncrementalView

    q = query("Q(a) :- E(a, b)", semiring="counting")
    for sql, shown in [
        ("select named_struct('x', 1) as a, 1 as b", "struct<x:int>"),
        ("select array(1, 2) as a, 1 as b", "array<int>"),
    ]:
        with pytest.raises(
            ValueError, match=re.escape(f"key column 'a' (position 0) has type {shown}")
        ):
            q.solve(E=spark.sql(sql))
    view = IncrementalView(q, state="spark", E=spark.sql("select 1 as a, 1 as b"))
    with pytest.raises(ValueError, match="key column at position 0 holds string values"):
        view.step(E=pd.DataFrame({"a": ["x"], "b": [1]}))
    with pytest.raises(ValueError, match=re.escape("has type struct<x:int>")):
        view.step(E=spark.sql("select named_struct('x', 1) as a, 1 as b"))
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


def test_spark_dates_and_timestamps_join_pandas_ones_and_read_back_as_dates(spark):
    """A pandas datetime64 column joined to a Spark timestamp column was refused as
    'string' against 'timestamp'; a Spark date key must read back as a date."""
    import datetime

    q = query("Q(a) :- E(a, b), F(b)", semiring="real")
    E = spark.createDataFrame(
        [(datetime.date(2020, 1, 1), datetime.datetime(2020, 1, 1, 5), 2.0)],
        "a date, b timestamp, value double",
    )
    F = pd.DataFrame({"b": pd.to_datetime(["2020-01-01 05:00"]), "value": [10.0]})
    assert q.solve(E=E, F=F).to_dict() == {(datetime.date(2020, 1, 1),): 20.0}


def test_day_timedelta_keys_stay_timedeltas():
    """faq.kernel.values.key_column read a timedelta64[D] column as dates (1970-01-02),
    taking it for a datetime64[D] one.  pandas keeps no day resolution (it reads such a
    column as seconds), so the kernel function is called on the numpy column itself."""
    from faq.kernel.values import key_column

    days = key_column(np.array([1, 2], dtype="timedelta64[D]"), "relation 'E'", "a", 0)
    assert list(days) == [pd.Timedelta(days=1), pd.Timedelta(days=2)]
    q = query("Q(a) :- E(a, b)", semiring="counting")
    E = pd.DataFrame({"a": np.array([1, 2], dtype="timedelta64[D]"), "b": [1, 2]})
    assert q.solve(E=E).to_dict() == {(pd.Timedelta(days=1),): 1, (pd.Timedelta(days=2),): 1}
