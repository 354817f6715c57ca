"""Deltas as pandas, Arrow and numpy: the same view as the equivalent Spark DataFrame delta.

A delta (keys by position, optional ``value``, optional ``_weight``) may be a pandas
DataFrame, a pyarrow Table or RecordBatch or a numpy structured array, as well as a
Spark DataFrame; a plain numpy array is refused as ambiguous (the one rule of every entry
point, tests/test_input_meaning.py).  Oracles:

* the equivalent Spark DataFrame (``spark.createDataFrame`` of the same rows): the same
  ``result()`` and the same ``step()`` change at every tick, and for a bad delta the same
  exception with the same message, the view left as it was;
* the batch answer (:func:`faq.reference_solve` and a batch solve, on the testing kit's
  model of the relations) after every tick of random changes fed alternately as pandas,
  Arrow and numpy;
* the status tracker: a pandas, Arrow or numpy tick on the driver state runs no Spark job.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import query
from faq.rule import parse_rule
from incremental import IncrementalView
from incremental.testing import assert_incremental, ticks
from incremental.testing.model import Row
from semirings import Semiring
from tests.helpers import assert_same, spark_jobs

KINDS = ["pandas", "arrow", "record batch", "numpy"]
TRIANGLE = "Q(a) :- E(a, b), E(b, c), E(a, c)"
CHAIN = "Q(a, c) :- R(a, b), S(b, c)"


def frame(rows: list[Row], arity: int, S: Semiring, weight: bool = True) -> pd.DataFrame:
    """Rows ``(key, value, weight)`` as pandas: keys ``c0..`` (int64), ``value`` and, with
    ``weight``, ``_weight`` (int64)."""
    integral = S in (semirings.COUNTING, semirings.INTEGER)
    data: dict[str, Any] = {
        f"c{i}": np.asarray([k[i] for k, _, _ in rows], dtype=np.int64) for i in range(arity)
    }
    data["value"] = np.asarray([v for _, v, _ in rows], dtype=np.int64 if integral else float)
    if weight:
        data["_weight"] = np.asarray([w for _, _, w in rows], dtype=np.int64)
    return pd.DataFrame(data)


def as_kind(pdf: pd.DataFrame, kind: str) -> Any:
    """The pandas delta ``pdf`` as another kind of input (numpy: a structured array)."""
    if kind == "pandas":
        return pdf
    if kind == "arrow":
        return pa.Table.from_pandas(pdf, preserve_index=False)
    if kind == "record batch":
        return pa.RecordBatch.from_pandas(pdf, preserve_index=False)
    assert kind == "numpy", kind
    return pdf.to_records(index=False)


def spark_form(spark, pdf: pd.DataFrame, kind: str) -> Any:
    """The Spark DataFrame of the same rows, made from pandas (where NaN is null); a numpy
    delta's own columns (a structured array's fields)."""
    given = as_kind(pdf, kind)
    if isinstance(given, np.ndarray):
        pdf = pd.DataFrame(given)
    if pdf.empty:  # Spark infers no schema from no rows: the one the columns' dtypes give
        types = {"int64": "bigint", "float64": "double"}
        return spark.createDataFrame(
            pdf, ", ".join(f"{c} {types[str(t)]}" for c, t in pdf.dtypes.items())
        )
    return spark.createDataFrame(pdf)


# -- the same ticks as pandas, Arrow or numpy and as Spark DataFrames --------------------------
C, MP, R = semirings.COUNTING, semirings.MIN_PLUS, semirings.REAL
SCENARIOS: dict[str, tuple[Semiring, str, dict[str, list[Row]], list[dict[str, list[Row]]]]] = {
    # grouped triangles; ticks insert, retract (_weight=-1), raise a multiplicity, do nothing
    "counting": (
        C,
        TRIANGLE,
        {"E": [((0, 1), 1, 1), ((1, 2), 1, 1), ((0, 2), 1, 1), ((2, 3), 1, 1), ((1, 3), 1, 1)]},
        [
            {"E": [((0, 3), 1, 1), ((1, 2), 1, -1)]},
            {"E": [((1, 2), 2, 1), ((0, 3), 1, -1), ((2, 3), 1, 1)]},
            {"E": []},
            {"E": [((0, 1), 1, -1), ((0, 2), 3, 1)]},
        ],
    ),
    # multisets of annotated rows: an annotation change is a retraction plus an insertion
    "min-plus": (
        MP,
        CHAIN,
        {
            "R": [((0, 1), 2.0, 1), ((0, 2), 3.0, 1), ((1, 1), 1.0, 2)],
            "S": [((1, 5), 1.0, 1), ((2, 5), 0.5, 1)],
        },
        [
            {"R": [((0, 1), 2.0, -1), ((0, 1), 4.0, 1)], "S": [((1, 6), 0.25, 1)]},
            {"R": [((1, 1), 1.0, -1)], "S": [((2, 5), 0.5, -1)]},
            {"R": [((1, 1), 1.0, -1), ((0, 2), 3.0, -1)]},
        ],
    ),
    "real": (
        R,
        CHAIN,
        {"R": [((0, 1), 2.5, 1), ((0, 2), -1.0, 1)], "S": [((1, 5), 1.5, 1), ((2, 5), 4.0, 3)]},
        [
            {"R": [((0, 1), 2.5, -1), ((1, 2), 0.5, 2)], "S": [((2, 6), -2.0, 1)]},
            {"S": [((2, 5), 4.0, -3), ((1, 5), 1.0, 1)]},
        ],
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_kind_gives_what_the_spark_delta_gives(spark, name, kind):
    S, rule, initial, ticks = SCENARIOS[name]
    arity = parse_rule(rule).relations
    q = query(rule, semiring=S)
    frames = {n: frame(rows, arity[n], S) for n, rows in initial.items()}
    local = IncrementalView(q, state="driver", **{n: as_kind(f, kind) for n, f in frames.items()})
    remote = IncrementalView(q, **{n: spark_form(spark, f, kind) for n, f in frames.items()})
    assert_same(local.result().to_dict(), remote.result().to_dict(), S, "initial result")
    for t, tick in enumerate(ticks, 1):
        frames = {n: frame(rows, arity[n], S) for n, rows in tick.items()}
        got = local.step(**{n: as_kind(f, kind) for n, f in frames.items()})
        want = remote.step(**{n: spark_form(spark, f, kind) for n, f in frames.items()})
        assert got.vars == want.vars
        assert_same(got.to_dict(), want.to_dict(), S, f"change at tick {t}")
        assert_same(local.result().to_dict(), remote.result().to_dict(), S, f"tick {t}")
        for n in arity:
            assert_same(local.relation(n).to_dict(), remote.relation(n).to_dict(), S, n)
    assert local.tick == remote.tick == len(ticks)


def keys(pairs: list[tuple[int, int]], dtype: Any = np.int64) -> np.ndarray:
    """Rows of two keys as a numpy structured array (fields ``a``, ``b``)."""
    return np.array(pairs, dtype=[("a", dtype), ("b", dtype)])


def test_a_structured_array_of_keys_is_rows_annotated_one(spark):
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    edges = keys([(1, 2), (2, 3), (1, 3), (3, 4)], np.int32)
    local = IncrementalView(tri, state="driver", E=edges)
    remote = IncrementalView(tri, E=spark.createDataFrame(pd.DataFrame(edges)))
    for delta in (keys([(2, 4), (1, 4)]), keys([])):
        want = remote.step(E=spark.createDataFrame(pd.DataFrame(delta), "a bigint, b bigint"))
        assert local.step(E=delta).scalar() == want.scalar()
    assert local.result().scalar() == remote.result().scalar() == 4  # K4 on 1..4
    assert local.relation("E").to_dict() == remote.relation("E").to_dict()


def test_unsigned_keys_are_read_as_int64(spark):
    q = query("Q(a) :- E(a, b)", semiring="counting")
    view = IncrementalView(q, state="driver", E=keys([(1, 2), (1, 3)], np.uint32))
    view.step(E=pd.DataFrame({"a": np.array([2], dtype=np.uint64), "b": [5]}))
    assert view.result().to_dict() == {(1,): 2, (2,): 1}


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_in_spark_takes_them_converted_once(spark, kind):
    S, rule, initial, ticks = SCENARIOS["counting"]
    q = query(rule, semiring=S)
    first = frame(initial["E"], 2, S)
    local = IncrementalView(q, state="spark", E=as_kind(first, kind))
    remote = IncrementalView(q, state="spark", E=spark_form(spark, first, kind))
    assert local.where == "spark"
    for tick in ticks[:2]:
        pdf = frame(tick["E"], 2, S)
        got = local.step(E=as_kind(pdf, kind)).to_dict()
        assert got == remote.step(E=spark_form(spark, pdf, kind)).to_dict()
    assert local.result().to_dict() == remote.result().to_dict()
    bad = pd.DataFrame({"a": [1], "b": [2], "c": [3]})
    with pytest.raises(ValueError) as got:
        local.step(E=as_kind(bad, kind))
    with pytest.raises(ValueError) as want:
        remote.step(E=spark_form(spark, bad, kind))
    assert str(got.value) == str(want.value)
    assert local.tick == 2


@pytest.mark.parametrize("kind", KINDS)
def test_no_spark_job_per_tick(spark, kind):
    S = semirings.COUNTING
    first = frame([((1, 2), 1, 1), ((2, 3), 1, 1), ((1, 3), 1, 1)], 2, S)
    tri = query(TRIANGLE, semiring=S)
    view, jobs = spark_jobs(
        spark, lambda: IncrementalView(tri, state="driver", E=as_kind(first, kind)), f"start-{kind}"
    )
    assert jobs == 0, jobs
    for t, rows in enumerate([[((3, 4), 1, 1), ((1, 4), 1, 1)], [((1, 2), 1, -1)]]):
        delta = as_kind(frame(rows, 2, S), kind)
        _, jobs = spark_jobs(spark, lambda d=delta: view.step(E=d), f"tick-{kind}-{t}")
        assert jobs == 0, jobs
    keys_only = keys([(2, 4)])
    _, jobs = spark_jobs(spark, lambda: view.step(E=keys_only), f"keys-{kind}")
    assert jobs == 0, jobs
    assert view.result().to_dict() == {(1,): 1, (2,): 1}  # 1-3-4 and 2-3-4


# -- bad deltas: the same refusal as the Spark form ------------------------------------------
BAD = {
    "null key (NaN)": (C, {"c0": [1.0, np.nan], "c1": [2, 3]}),
    "three key columns": (C, {"c0": [1], "c1": [2], "c2": [3]}),
    "one key column": (C, {"c0": [1], "value": [1]}),
    "floating-point keys": (C, {"c0": [1.5], "c1": [2.0]}),
    "string keys": (C, {"c0": ["a"], "c1": ["b"]}),
    "non-integer _weight": (C, {"c0": [1], "c1": [2], "_weight": [1.5]}),
    "null _weight": (C, {"c0": [1, 2], "c1": [2, 3], "_weight": pd.array([1, None], "Int64")}),
    "boolean _weight": (C, {"c0": [1], "c1": [2], "_weight": [True]}),
    "fractional count": (C, {"c0": [1], "c1": [2], "value": [0.5]}),
    "string annotation": (MP, {"c0": [1], "c1": [2], "value": ["x"]}),
    "null annotation (NaN)": (MP, {"c0": [1], "c1": [2], "value": [np.nan]}),
    "null count (NaN)": (C, {"c0": [1], "c1": [2], "value": [1.0, np.nan][1:]}),
    "-inf in min-plus": (MP, {"c0": [1], "c1": [2], "value": [-np.inf]}),
    "negative multiplicity": (C, {"c0": [7], "c1": [8], "_weight": [-1]}),
    "retracting a row not held": (MP, {"c0": [1], "c1": [2], "value": [9.0], "_weight": [-1]}),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_delta_is_refused_as_the_spark_form_is(spark, case, kind):
    S, columns = BAD[case]
    pdf = pd.DataFrame(columns)
    q = query("Q(a) :- E(a, b)", semiring=S)
    first = frame([((1, 2), 1 if S is C else 2.0, 1)], 2, S)
    local = IncrementalView(q, state="driver", E=as_kind(first, kind))
    remote = IncrementalView(q, state="driver", E=spark.createDataFrame(first))
    with pytest.raises((ValueError, TypeError)) as want:
        remote.step(E=spark_form(spark, pdf, kind))
    with pytest.raises(want.type) as got:
        local.step(E=as_kind(pdf, kind))
    assert str(got.value) == str(want.value)
    assert "relation 'E'" in str(got.value)
    assert local.tick == 0 and local.result().to_dict() == remote.result().to_dict()


@pytest.mark.parametrize("kind", KINDS)
def test_a_nan_count_is_named_a_null_annotation(spark, kind):
    # Regression: pandas' NaN reads as an Arrow null, and the delta of a count was
    # refused as "not values of the 'integer' semiring ..., e.g. None"
    q = query("Q(a) :- E(a, b)", semiring=C)
    view = IncrementalView(q, state="driver", E=as_kind(frame([((1, 2), 1, 1)], 2, C), kind))
    bad = pd.DataFrame({"c0": [1, 3], "c1": [2, 4], "value": [1.0, np.nan]})
    with pytest.raises(ValueError, match=r"column 'value' has 1 null annotation\(s\)"):
        view.step(E=as_kind(bad, kind))
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


@pytest.mark.parametrize(
    "given, message",
    [
        (np.array([1, 2]), r"plain numpy array \(shape \(2,\)\) is ambiguous.*from_numpy"),
        (np.array([[1, 2]]), r"ambiguous.*pandas.DataFrame\(arr, columns=\['a', 'b'\]\)"),
        (np.zeros((1, 2, 2), dtype=np.int64), r"shape \(1, 2, 2\).*Factor.from_numpy"),
        ((np.array([[1, 2]]), np.array([1.0])), r"got tuple; .*structured array"),
        ({"a": [1], "b": [2]}, r"expected a Factor, a Spark DataFrame.*got dict"),
        (np.zeros((1, 2), dtype=[("a", "i8"), ("b", "i8")]), r"structured array.*must be 1-D"),
        (
            pd.DataFrame([[1, 2, 1, 1]], columns=["a", "b", "value", "value"]),
            r"column 'value' appears 2 times",
        ),
        (keys([(2**63, 1)], np.uint64), r"9223372036854775808, beyond the 64-bit"),
        (pd.DataFrame({"a": [1, "x"], "b": [2, 3]}), r"column 'a' cannot be read"),
    ],
)
def test_inputs_no_spark_form_has_are_refused_clearly(spark, given, message):
    q = query("Q(a) :- E(a, b)", semiring="counting")
    view = IncrementalView(q, state="driver", E=pd.DataFrame({"a": [1], "b": [2]}))
    with pytest.raises((ValueError, TypeError), match=message) as got:
        view.step(E=given)
    assert "delta of relation 'E'" in str(got.value)
    assert view.tick == 0 and view.result().to_dict() == {(1,): 1}


def test_initial_contents_are_checked_alike(spark):
    q = query("Q(a) :- E(a, b)", semiring="counting")
    pdf = pd.DataFrame({"a": [1.0, np.nan], "b": [2, 3]})
    with pytest.raises(ValueError) as want:
        IncrementalView(q, state="driver", E=spark.createDataFrame(pdf))
    for kind in KINDS:
        with pytest.raises(ValueError) as got:
            IncrementalView(q, state="driver", E=as_kind(pdf, kind))
        assert str(got.value) == str(want.value)
        assert "initial contents of relation 'E'" in str(got.value)


# -- random ticks, alternately pandas, Arrow and numpy, against batch ------------------------
FED = ["pandas", "arrow", "numpy"]
RANDOM = {"counting": C, "min-plus": MP, "real": R}


class FedAlternately(IncrementalView):
    """A view given its initial contents and every delta as pandas, Arrow and numpy in
    turn, from the kind ``first``: the testing kit's frames converted before each step."""

    def __init__(self, q: Any, first: int = 0, **kwargs: Any) -> None:
        self.first = first
        opts = {k: v for k, v in kwargs.items() if k not in q.rule.relations}
        given = {n: as_kind(f, FED[first]) for n, f in kwargs.items() if n not in opts}
        super().__init__(q, **opts, **given)

    def step(self, batch_id: int | None = None, **deltas: Any) -> Any:
        kind = FED[(self.first + self.tick + 1) % len(FED)]
        return super().step(batch_id, **{n: as_kind(f, kind) for n, f in deltas.items()})


@pytest.mark.parametrize("semiring", list(RANDOM))
@settings(max_examples=max(3, settings.default.max_examples // 2))
@given(data=st.data())
def test_random_ticks_fed_alternately_match_batch(semiring, data):
    # the testing kit draws the ticks and checks every one against batch and the oracle
    rule = data.draw(st.sampled_from([TRIANGLE, CHAIN]), label="query")
    q = query(rule, semiring=RANDOM[semiring])
    first = data.draw(st.integers(0, len(FED) - 1), label="first kind")
    t = data.draw(ticks(q, keys=range(3), min_ticks=2, max_ticks=4), label="ticks")
    make = functools.partial(FedAlternately, first=first)
    assert_incremental(q, t, state="driver", make_view=make)


def test_spark_state_refuses_a_fractional_weight(spark):
    # Regression: the Spark state cast a double _weight to the semiring's type (1.5 -> 1.5 in
    # real, truncated in integer) where the driver state refuses it.
    from faq import query

    q = query("Q(a) :- E(a, b)", semiring="integer")
    view = IncrementalView(q, state="spark")
    delta = spark.createDataFrame(
        [(1, 2, 1, 1.5)], "a bigint, b bigint, value bigint, _weight double"
    )
    with pytest.raises(ValueError, match="'_weight' holds multiplicities and must be an integer"):
        view.step(E=delta)
    assert view.tick == 0 and view.result().to_dict() == {}


@settings(max_examples=40, deadline=None)
@given(
    semiring=st.sampled_from(["counting", "integer", "real", "min-plus"]),
    rows=st.lists(
        st.tuples(
            st.integers(-3, 3),
            st.integers(0, 2**40),
            st.sampled_from([0.0, 1.0, 2.5, -1.0, float("inf"), float("nan")]),
            st.integers(-2, 2),
        ),
        min_size=1,
        max_size=8,
    ),
    value=st.booleans(),
    weight=st.booleans(),
)
def test_a_numpy_pandas_delta_reads_as_its_arrow_form(semiring, rows, value, weight):
    """A pandas delta of numpy columns is read without Arrow; it gives the rows, or the
    error, that the same delta as an Arrow table gives."""
    from incremental.deltas import read_delta

    S = semirings.get(semiring)
    a, b, v, w = (list(c) for c in zip(*rows, strict=True))
    data: dict[str, Any] = {"a": np.array(a), "b": np.array(b)}
    if value:
        data["value"] = np.array(v) if semiring != "counting" else np.abs(np.array(a))
    if weight:
        data["_weight"] = np.array(w)
    frame = pd.DataFrame(data)

    def read(given: Any) -> Any:
        try:
            r = read_delta(given, 2, S, "delta of relation 'E'", "E(a, b)")
        except ValueError as exc:
            return str(exc)
        values = None if r.values is None else [float(x) for x in r.values]
        return [c.tolist() for c in r.cols], values, r.weights.tolist()

    assert read(frame) == read(pa.Table.from_pandas(frame, preserve_index=False))


def test_a_numpy_pandas_delta_takes_no_arrow_round_trip(monkeypatch):
    """A pandas delta of signed-integer keys and weights (and float values) is read from its
    numpy columns: the Arrow conversion is never called for it, but still is for one with
    an unsigned column."""
    import incremental.deltas as deltas

    def no_arrow(given: Any, label: str) -> Any:
        raise AssertionError("read through Arrow")

    monkeypatch.setattr(deltas, "_local_arrow", no_arrow)
    S = semirings.get("real")
    frame = pd.DataFrame({"a": [1, 2], "b": [3, 4], "value": [0.5, 2.0], "_weight": [1, -1]})
    rows = deltas.read_delta(frame, 2, S, "delta of relation 'E'", "E(a, b)")
    assert [c.tolist() for c in rows.cols] == [[1, 2], [3, 4]] and rows.weights.tolist() == [1, -1]
    with pytest.raises(AssertionError, match="through Arrow"):
        deltas.read_delta(frame.astype({"a": "uint64"}), 2, S, "delta", "E(a, b)")


def test_a_pandas_delta_with_zero_weights_or_no_rows_changes_only_what_it_holds():
    # the pandas read keeps every row at once when every weight is nonzero; a zero
    # weight still drops its row, and a delta without rows is no change
    q = query(TRIANGLE, semiring="counting")
    edges = pd.DataFrame({"src": [1, 1, 2], "dst": [2, 3, 3]})
    view = IncrementalView(q, E=edges)
    view.step(E=pd.DataFrame({"src": [1, 3], "dst": [4, 4], "_weight": [0, 1]}))
    view.step(E=pd.DataFrame({"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64)}))
    view.step(E=pd.DataFrame({"src": [2], "dst": [4], "_weight": [1]}))
    assert view.result().to_dict() == {(1,): 1, (2,): 1}  # 1-3-4 needs (1, 4): dropped
    again = IncrementalView(q, E=edges)
    again.step(E=pd.DataFrame({"src": [1, 3], "dst": [4, 4], "_weight": [2, -0]}))
    assert again.result().to_dict() == {(1,): 1}
