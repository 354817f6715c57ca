"""Scans of local Parquet files read straight from their files with pyarrow
(:func:`faq.spark.checks.parquet_scan`), not through Spark's rows: by the one task a
solve past ``local_rows`` runs in (:mod:`faq.one_task`) and by the driver when the rows
fit (:mod:`faq.read`).  What pyarrow would not read as Spark does is left to Spark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import faq
from faq import query
from tests.helpers import spark_jobs
from tests.test_query_task import TRIANGLE, TWO_HOP, _edges

DIRECT = "read by the task straight from"


def _parquet(tmp_path, name: str, columns: dict, files: int = 2) -> str:
    """``columns`` written as ``files`` Parquet files (row slices) in the folder ``name``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / name
    folder.mkdir()
    table = pa.table(columns)
    bounds = np.linspace(0, table.num_rows, files + 1).astype(int)
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        pq.write_table(table.slice(a, b - a), folder / f"part-{k}.parquet")
    return str(folder)


@pytest.mark.parametrize(
    ("frame", "direct"),
    [
        (lambda df: df, True),
        (lambda df: df.toDF("a", "b", "value"), True),  # renamed: a projection of names
        (lambda df: df.select("y", "x", "value"), True),  # reordered
        (lambda df: df.filter("x >= 0"), False),  # a filter: Spark reads the rows
        (lambda df: df.selectExpr("x * 2 AS x", "y", "value"), False),  # computed
    ],
)
def test_a_parquet_scan_is_read_by_the_task_from_its_files(spark, tmp_path, frame, direct):
    """A frame that is a plain scan of local Parquet files (under a projection that only
    picks and renames columns) is read by the one task with pyarrow: narrower integer
    keys and integer annotations cast as Spark casts them, the same answer, one job."""
    e = _edges(seed=11)
    w = (np.arange(len(e)) % 5 + 1).astype(np.int32)
    cols = {"x": e[:, 0].astype(np.int32), "y": e[:, 1].astype(np.int32), "value": w}
    df = frame(spark.read.parquet(_parquet(tmp_path, "e", cols)))
    q = query(TWO_HOP, semiring="min-plus")
    want = q.solve(E=df.toPandas()).to_dict()
    with faq.settings(local_rows=0):
        run, jobs = spark_jobs(spark, lambda: q.run(E=df), "query-one-task-files")
    assert run.result.to_dict() == want
    assert (DIRECT in run.explain()) is direct, run.explain()
    assert jobs <= 2, jobs  # the one task's job, and the answer's checkpoint


def test_string_keys_read_from_parquet_files(spark, tmp_path):
    e = _edges(seed=13)
    names = np.array([f"v{i}" for i in range(300)], dtype=object)[e]
    df = spark.read.parquet(_parquet(tmp_path, "s", {"u": names[:, 0], "v": names[:, 1]}))
    q = query(TRIANGLE, semiring="counting")
    want = q.solve(E=pd.DataFrame({"u": names[:, 0], "v": names[:, 1]})).to_dict()
    with faq.settings(local_rows=0):
        run = q.run(E=df)
    assert run.result.to_dict() == want
    assert DIRECT in run.explain()


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        ({"x": [0, None], "y": [1, 2], "value": [1.0, 1.0]}, "'x'"),
        ({"x": [0, 1], "y": [1, 2], "value": [1.0, float("nan")]}, "'value'"),
    ],
)
def test_bad_rows_read_from_parquet_files_raise_the_drivers_error(spark, tmp_path, columns, words):
    import pyarrow as pa

    cols = {
        k: pa.array(v, pa.float64() if k == "value" else pa.int64()) for k, v in columns.items()
    }
    E = spark.read.parquet(_parquet(tmp_path, "bad", cols, files=1))
    q = query(TWO_HOP, semiring="min-plus")
    with pytest.raises(ValueError) as in_driver:
        q.run(E=E)
    with faq.settings(local_rows=0), pytest.raises(ValueError) as in_task:
        q.run(E=E.filter("x IS NULL OR x >= 0"))  # through Spark's rows
    with faq.settings(local_rows=0), pytest.raises(ValueError) as from_files:
        q.run(E=E)
    assert words in str(from_files.value), str(from_files.value)
    assert str(from_files.value) == str(in_driver.value) == str(in_task.value)


def test_what_a_task_cannot_read_as_spark_does_is_read_by_spark(spark, tmp_path):
    """Unsigned keys (Spark reads a uint32 column as bigint, a uint64 one as a decimal) and
    partition columns (not in the files) are left to Spark."""
    import pyarrow as pa

    from faq.spark.checks import explain_cost, parquet_scan

    e = _edges(seed=17)
    unsigned = {"x": pa.array(e[:, 0], pa.uint32()), "y": pa.array(e[:, 1], pa.uint32())}
    df = spark.read.parquet(_parquet(tmp_path, "u", unsigned))
    assert parquet_scan(df, explain_cost(df), df.columns) is None
    q = query(TRIANGLE, semiring="counting")
    want = q.solve(E=pd.DataFrame({"u": e[:, 0], "v": e[:, 1]})).to_dict()
    with faq.settings(local_rows=0):
        assert q.solve(E=df).to_dict() == want
    parted = tmp_path / "parted"
    pd.DataFrame({"x": e[:, 0], "y": e[:, 1], "p": e[:, 0] % 2}).to_parquet(
        parted, partition_cols=["p"]
    )
    df = spark.read.parquet(str(parted))
    assert parquet_scan(df, explain_cost(df), ["x", "p"]) is None
    scan = parquet_scan(df, explain_cost(df), ["x", "y"])
    assert scan is not None and scan.columns == (("x", "x"), ("y", "y"))
    assert list(scan.paths) == sorted(scan.paths)


def test_rows_that_fit_are_read_into_the_driver_from_the_files_without_a_job(spark, tmp_path):
    e = _edges(seed=19)
    w = (np.arange(len(e)) % 3 + 1).astype(np.int32)
    cols = {"x": e[:, 0].astype(np.int32), "y": e[:, 1], "value": w}
    df = spark.read.parquet(_parquet(tmp_path, "d", cols)).toDF("a", "b", "value")
    q = query(TWO_HOP, semiring="min-plus")
    want = q.solve(E=df.filter("a >= 0")).to_dict()  # read by Spark
    for _ in range(2):  # the second solve reads the files as the first did, no plan asked
        got, jobs = spark_jobs(spark, lambda: q.solve(E=df), "driver-files")
        assert got.to_dict() == want and got.is_local
        assert jobs == 0, jobs


def test_bad_rows_read_into_the_driver_from_the_files_raise_sparks_error(spark, tmp_path):
    import pyarrow as pa

    cols = {"x": pa.array([0, None], pa.int64()), "y": pa.array([1, 2], pa.int64())}
    df = spark.read.parquet(_parquet(tmp_path, "n", cols, files=1))
    q = query(TWO_HOP, semiring="counting")
    with pytest.raises(ValueError) as from_files:
        q.solve(E=df)
    with pytest.raises(ValueError) as by_spark:
        q.solve(E=df.filter("x IS NULL OR x >= 0"))
    assert "'x'" in str(from_files.value)
    assert str(from_files.value) == str(by_spark.value)


def test_a_column_read_twice_or_a_name_given_twice(spark, tmp_path):
    """A projection may read one file column twice (read from the files); a frame whose
    columns share a name is left to Spark."""
    from faq.spark.checks import explain_cost, parquet_scan

    e = _edges(seed=23)
    df = spark.read.parquet(_parquet(tmp_path, "t", {"x": e[:, 0], "y": e[:, 1]}))
    twice = df.selectExpr("x AS a", "x AS b", "y")
    scan = parquet_scan(twice, explain_cost(twice), twice.columns)
    assert scan is not None and scan.columns == (("a", "x"), ("b", "x"), ("y", "y"))
    same = df.toDF("a", "a")
    assert parquet_scan(same, explain_cost(same), ["a"]) is None


def test_a_program_in_one_task_reads_its_parquet_edges_from_the_files(spark, tmp_path):
    """Programs share the one task's placement: shortest paths over Parquet edges past
    ``local_rows`` read them from the files and give the driver's distances."""
    e = _edges(seed=29)
    w = (np.arange(len(e)) % 9 + 1).astype(float)
    df = spark.read.parquet(_parquet(tmp_path, "p", {"x": e[:, 0], "y": e[:, 1], "value": w}))
    q = query("D(x) :- S(x)\nD(y) :- D(x), E(x, y)", semiring="min-plus")
    S = faq.Factor.from_dict({(int(e[0, 0]),): 0.0}, ["x"], "min-plus")
    want = q.solve(S=S, E=pd.DataFrame({"x": e[:, 0], "y": e[:, 1], "value": w})).to_dict()
    with faq.settings(local_rows=0):
        run = q.run(S=S, E=df)
    assert run.result.to_dict() == want
    assert DIRECT in run.explain(), run.explain()


def test_the_plan_is_read_from_the_frame_without_a_sql_statement(spark, tmp_path, capsys):
    """``explain_cost`` reads the plans Spark keeps with the frame (``df.explain``, its
    print caught for this thread only): the same text as ``EXPLAIN COST``, no SQL
    statement planned again (fails before: it was one), and another thread's print
    during the capture still reaches stdout."""
    import threading

    from faq.spark.checks import _printed, explain_cost

    e = _edges(seed=23)
    df = spark.read.parquet(_parquet(tmp_path, "plan", {"x": e[:, 0], "y": e[:, 1]}))
    want = str(spark.sql("EXPLAIN COST SELECT * FROM {t}", t=df).collect()[0][0])
    session = type(spark)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session, "sql", lambda *a, **k: pytest.fail("a SQL statement was run"))
        assert explain_cost(df) == want
    capsys.readouterr()
    gone = threading.Event()

    def beside() -> None:
        print("from another thread")
        gone.set()

    def both() -> None:
        print("kept")
        t = threading.Thread(target=beside)
        t.start()
        t.join()

    assert _printed(both) == "kept\n" and gone.is_set()
    assert "from another thread" in capsys.readouterr().out


def test_arrow_rows_without_annotations_stay_without_them():
    """Rows read from Arrow (Parquet files in a task, a frame collected by Spark) with
    no ``value`` column and distinct keys are each annotated one without an array of
    ones (fails before: counts of 1 were made), which made the Generic Join kernel sum
    products (about 4 times slower on web-NotreDame's triangles) and a library runner
    build value-carrying matrices; repeated keys are still counted."""
    import pyarrow as pa

    import semirings
    from faq.spark.convert import arrow_to_table

    S = semirings.COUNTING
    once = pa.table({"x": [3, 1, 2], "y": [4, 5, 6]})
    t = arrow_to_table(once, ("a", "b"), S, "E", check=True, unique=False)
    assert t.values is None and t.rows == 3
    twice = pa.table({"x": [1, 1, 2], "y": [4, 4, 5]})
    t = arrow_to_table(twice, ("a", "b"), S, "E", check=True, unique=False)
    assert t.values is not None and t.values.tolist() == [2, 1]


def test_a_plan_is_read_where_there_is_no_stdout():
    """With ``sys.stdout`` None (as under pythonw), the capture still works, another
    thread's print writes nothing as it would, and stdout is left as it was."""
    import sys
    import threading

    from faq.spark.checks import _printed

    raised: list[BaseException] = []

    def beside() -> None:
        try:
            print("nowhere")
        except BaseException as exc:  # noqa: BLE001 - what the print raised, asserted below
            raised.append(exc)

    def both() -> None:
        print("kept")
        t = threading.Thread(target=beside)
        t.start()
        t.join()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", None)
        assert _printed(both) == "kept\n"
        assert sys.stdout is None
    assert raised == []
