"""A Factor holds one frozen source record (faq.source.Source).

Oracles: the record's documented table of legal combinations (each illegal
one raises a ValueError or TypeError naming what is wrong); what each
constructor knows of its rows (checked, consolidated, statistics) read back
from the record; and the collect-or-keep threshold read from ``faq.settings``.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import Factor
from faq.kernel import KeyedTable, RelationStats, Table
from faq.source import Source
from semirings.local import local_ops

R = semirings.REAL
T = Table(("i",), (np.array([0, 1]),), np.array([2.0, 3.0]))


# -- illegal combinations are refused -------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": T, "raw": T, "semiring": R, "checked": R}, "exactly one form.*got table, raw"),
        ({}, "exactly one form.*got none"),
        ({"table": T}, "table source holds checked rows: give its semiring"),
        ({"table": T, "semiring": R}, "table source holds checked rows"),
        ({"table": T, "semiring": R, "checked": semirings.COUNTING}, "checked for 'counting'"),
        ({"table": T, "semiring": R, "checked": R}, "consolidated=True, got False"),
        ({"array": np.eye(2), "semiring": R, "consolidated": True}, "array source is unchecked"),
        ({"array": np.eye(2), "consolidated": True, "stats": RelationStats(2, (2, 2))}, "stat"),
        ({"raw": T, "consolidated": True}, "raw source has consolidated=False"),
        ({"array": np.ones(3), "consolidated": True}, "array of 1 dimensions"),
    ],
    ids=[
        "two-forms",
        "no-form",
        "table-without-semiring",
        "table-unchecked",
        "checked-for-another-semiring",
        "table-consolidated-flag-disagrees",
        "array-with-semiring",
        "array-with-stats",
        "raw-said-consolidated",
        "array-vars-disagree",
    ],
)
def test_illegal_local_records_are_refused(kwargs, message):
    vars_ = ("i",) if "table" in kwargs or "raw" in kwargs else ("i", "j")
    with pytest.raises(ValueError, match=message):
        Source(vars_, **kwargs)


def test_a_keyed_table_with_an_unchecked_semiring_is_refused():
    keyed = KeyedTable.of(T, local_ops(R))
    with pytest.raises(ValueError, match="keyed source holds checked rows: give its semiring"):
        Source(("i",), keyed=keyed, semiring=R, consolidated=True)
    assert Source.of_keyed(keyed, R).checked is R  # the legal record


def test_a_form_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="source's table must be a Table, got ndarray"):
        Source(("i",), table=np.arange(2), semiring=R, checked=R, consolidated=True)
    with pytest.raises(TypeError, match="semiring must be a Semiring or None, got 'real'"):
        Source(("i",), table=T, semiring="real", checked=None, consolidated=True)


def test_illegal_spark_records_are_refused(spark):
    df = spark.createDataFrame([(0, 1.0)], "i long, value double")
    with pytest.raises(ValueError, match="unchecked df source cannot be known to be consolidated"):
        Source.spark(df, ("i",), R, consolidated=True)
    with pytest.raises(ValueError, match="unchecked df source has no statistics"):
        Source.spark(df, ("i",), R, stats=RelationStats(1, (1,)))
    with pytest.raises(ValueError, match="original DataFrame exactly when its rows are a df"):
        Source(("i",), table=T, semiring=R, checked=R, consolidated=True, original=df)
    with pytest.raises(ValueError, match="checked df source has a value column"):
        Source.spark(df.select("i"), ("i",), R, checked=True, has_value=False)


def test_the_record_is_frozen():
    s = Source.local(T, R)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.checked = None  # type: ignore[misc]


# -- what each constructor knows, read from the record -----------------------------------------
def test_local_constructors_hold_checked_or_unchecked_local_rows():
    plain = Factor.from_numpy(np.eye(2), vars=("i", "j"))
    assert (plain.source.form, plain.source.checked, plain.source.plain) == ("array", None, R)
    typed = plain.for_semiring("min-plus")
    assert typed.source.form == "table" and typed.source.checked is semirings.MIN_PLUS
    assert plain.for_semiring("min-plus") is typed  # one conversion per semiring, kept
    raw = Factor.from_pandas(pd.DataFrame({"a": [1, 1], "value": [1, 2]}))
    assert (raw.source.form, raw.source.consolidated) == ("raw", False)
    assert raw.to_dict() == {(1,): 3}
    d = Factor.from_dict({(0,): 1.0}, vars=("i",))
    assert d.source.checked is R and d.source.consolidated and d.stats.rows == 1


@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    zeros=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 10**6),
    order=st.sampled_from("CF"),
)
@settings(max_examples=40, deadline=None)
def test_a_dense_array_reads_as_its_nonzero_cells(shape, zeros, seed, order):
    """``from_numpy`` over a semiring keeps the non-zero cells in row-major order with the
    statistics of their keys, whether the array has zeros (``np.nonzero``) or none (every
    cell, without the search), and owns its rows: writing to the array afterwards changes
    nothing."""
    from faq.build import array_source

    rng = np.random.default_rng(seed)
    arr = np.asarray(rng.integers(1, 5, shape) * (rng.random(shape) >= zeros), order=order)
    arr = arr.astype(np.float64)
    got = array_source(arr, tuple("ijk"[: arr.ndim]), R, "A")
    idx = np.nonzero(arr)
    t = got.table
    assert [c.tolist() for c in t.cols] == [i.tolist() for i in idx]
    assert t.values.tolist() == arr[idx].tolist()
    assert got.stats.rows == len(idx[0])
    assert list(got.stats.distinct) == [len(np.unique(i)) for i in idx]
    arr[...] = 7.0
    assert 7.0 not in t.values.tolist()


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    drop=st.booleans(),
    shuffle=st.booleans(),
    seed=st.integers(0, 10**6),
)
@settings(max_examples=40, deadline=None)
def test_a_table_reads_back_as_the_dense_array_of_its_cells(shape, drop, shuffle, seed):
    """``dense_array`` puts each row in its cell, zero elsewhere: a table holding every
    cell in row-major order is reshaped, any other is scattered; the array is the
    caller's (writing to it leaves the table as it was)."""
    from faq.kernel.values import dense_array

    rng = np.random.default_rng(seed)
    cells = np.indices(shape).reshape(len(shape), -1)
    keep = np.flatnonzero(rng.random(cells.shape[1]) >= (0.3 if drop else 0.0))
    if shuffle:
        keep = rng.permutation(keep)
    values = rng.integers(1, 9, len(keep)).astype(np.float64)
    t = Table(tuple("ijk"[: len(shape)]), tuple(c[keep] for c in cells), values)
    want = np.zeros(shape)
    want[tuple(c[keep] for c in cells)] = values
    got = dense_array(t, R, tuple(shape), "Q")
    np.testing.assert_array_equal(got, want)
    got[...] = -1.0
    assert -1.0 not in t.values.tolist()


def test_spark_constructors_record_what_is_known(spark):
    df = spark.createDataFrame([(0, 1.0), (0, 2.0), (1, 3.0)], "x long, value double")
    given = Factor(df, vars=("i",), semiring="real", name="E")
    src = given.source
    assert (src.form, src.checked, src.consolidated, src.stats) == ("df", None, False, None)
    assert src.original is df and src.df.columns == ["i", "value"]
    vouched = Factor.trusted(df, ("i",), "real", rows=3, consolidated=False)
    assert vouched.source.checked is R and not vouched.source.consolidated
    kept = given.validated("real", local=False)
    assert kept.source.checked is R and kept.source.consolidated and kept.source.stats.rows == 3
    assert kept.to_dict() == {(0,): 3.0, (1,): 3.0}
    assert given.renamed(["k"]).source.checked is None  # nothing learnt by renaming
    assert kept.renamed(["k"]).source.checked is R


def test_the_collect_threshold_is_read_from_the_settings(spark):
    df = spark.createDataFrame([(0, 1.0), (1, 2.0)], "i long, value double")
    assert Factor(df, semiring="real").validated("real").is_local
    with faq.settings(local_rows=1):  # two rows are "too many": kept in Spark
        kept = Factor(df, semiring="real").validated("real")
    assert not kept.is_local
    assert kept.to_dict() == {(0,): 1.0, (1,): 2.0}


# -- no module reaches into a Factor ----------------------------------------------------------
FACTOR_PRIVATE = {"_src", "_memo", "_hold", "_like", "_local", "_local_table", "_trusted"}


def test_no_module_reads_a_factors_private_attributes():
    root = Path(__file__).parent.parent
    found = []
    for pkg in ("faq", "incremental", "semirings"):
        for path in sorted((root / pkg).rglob("*.py")):
            if path.name == "factor.py" and path.parent.name == "faq":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in FACTOR_PRIVATE
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                ):
                    found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    assert not found, found


@pytest.mark.parametrize("semiring", [None, "real"])
def test_writing_to_the_callers_array_or_frame_later_leaves_the_factor_as_it_was(semiring):
    # Regression: without a semiring, from_numpy kept the caller's array and from_pandas
    # a view of the frame's value column (and of a string key column), so a later write
    # to them changed the factor, past the checks it was made with.
    arr = np.ones((2, 2))
    frame = pd.DataFrame({"s": ["a", "b"], "value": [1.0, 2.0]})
    A = Factor.from_numpy(arr, vars=("i", "j"), semiring=semiring)
    B = Factor.from_pandas(frame, vars=("s",), semiring=semiring)
    arr[0, 0] = np.nan
    frame.loc[0, "value"] = 9.0
    frame.loc[1, "s"] = "z"
    assert A.to_dict() == {(0, 0): 1.0, (0, 1): 1.0, (1, 0): 1.0, (1, 1): 1.0}
    assert B.to_dict() == {("a",): 1.0, ("b",): 2.0}
    assert faq.einsum("ij,jk->ik", A, A).to_numpy().tolist() == [[2.0, 2.0], [2.0, 2.0]]


@pytest.mark.parametrize(
    "shape, message",
    [
        ((-1, 4), r"shape \(-1, 4\) must hold non-negative integers, found -1"),
        ((2.5, 3), r"found 2.5"),
        ("ab", r"found 'a'"),
        (object(), r"shape must be a sequence of integers"),
        ((True, 2), r"found True"),
    ],
)
def test_to_numpy_names_a_bad_shape(shape, message):
    # Regression: a negative axis read as "key 1 lies outside shape (-1, 4)", 2.5 was cut
    # to 2, and a string or an object gave Python's own int() or iteration error
    F = Factor.from_dict({(0, 1): 2.0}, vars=("i", "j"), semiring="real")
    with pytest.raises(ValueError, match=message):
        F.to_numpy(shape=shape)
    assert F.to_numpy(shape=[1, 3]).tolist() == [[0.0, 2.0, 0.0]]
    assert Factor.from_dict({(1,): 2.0}, vars=("i",), semiring="real").to_numpy(3).tolist() == [
        0.0,
        2.0,
        0.0,
    ]
