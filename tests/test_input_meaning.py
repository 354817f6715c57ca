"""One meaning for every input, everywhere (issue 37, points 2, 5 and 9).

The same objects go to every entry point that takes a relation by name — ``solve``,
``run``, ``explain``, a program's ``solve``, ``IncrementalView``'s initial contents,
``view.step`` and ``solve_delta`` — and to ``einsum``:

* a pandas DataFrame, a pyarrow Table or RecordBatch, a numpy structured array and a
  Spark DataFrame of the same rows give the answer of the explicit ``Factor.from_dict`` of
  those rows, itself checked against the brute-force oracle (:func:`faq.reference_solve`,
  :func:`faq.reference.reference_fixpoint`); local rows need no Spark session;
* a plain numpy array is refused everywhere but in ``einsum`` (where it is the dense tensor
  ``numpy.einsum`` reads), with a TypeError naming the relation and both explicit
  constructors; lists and dicts are refused listing what is accepted, and no message names
  a bare ``DataFrame``;
* a user semiring over local inputs runs in a process that has no SparkSession and starts
  none (a subprocess: the test run's own session lives in this one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from faq import Factor, einsum, query, reference_solve, solve_delta
from faq.reference import reference_fixpoint
from incremental import IncrementalView

ROOT = Path(__file__).resolve().parent.parent
TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
REPRO = np.array([[1, 2], [2, 3], [1, 3], [3, 4], [2, 4]])  # 5 edges, 2 triangles

# weighted edges of a small DAG in the integer ring (annotations matter, signs too)
EDGES = {(0, 1): 2, (1, 2): 3, (0, 2): -1, (2, 3): 4, (1, 3): 1, (3, 4): 2}
DELTA = {(0, 3): 5, (1, 2): -3}  # a new edge, and (1, 2) retracted by its own weight
SOURCES = {(0,): 1, (2,): 2}
PATHS = "Q(a, c) :- E(a, b), E(b, c)"
TRIANGLES = "Q(a) :- E(a, b), E(b, c), E(a, c)"
REACH = "P(x) :- S(x)\nP(y) :- P(x), E(x, y)"
KINDS = ["pandas", "arrow", "record batch", "structured", "spark", "factor"]


def frame(rows: dict[tuple[Any, ...], Any], cols: list[str]) -> pd.DataFrame:
    data = {c: [k[i] for k in rows] for i, c in enumerate(cols)}
    return pd.DataFrame({**data, "value": list(rows.values())}).astype("int64")


def as_kind(pdf: pd.DataFrame, kind: str, request: pytest.FixtureRequest) -> Any:
    """``pdf`` as the input kind ``kind`` (only the Spark kind takes the session)."""
    if kind == "pandas":
        return pdf
    if kind == "arrow":
        return pa.Table.from_pandas(pdf, preserve_index=False)
    if kind == "record batch":
        return pa.RecordBatch.from_pandas(pdf, preserve_index=False)
    if kind == "structured":
        return pdf.to_records(index=False)
    if kind == "spark":
        return request.getfixturevalue("spark").createDataFrame(pdf)
    assert kind == "factor", kind
    return Factor.from_pandas(pdf)


def explicit(rows: dict[tuple[Any, ...], Any], vars_: tuple[str, ...]) -> Factor:
    return Factor.from_dict(rows, vars=vars_, semiring="integer")


def after(rows: dict, delta: dict) -> dict:
    out = dict(rows)
    for k, v in delta.items():
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v}


# -- the repro of the issue: one array, two meanings -------------------------------------------
def test_the_repro_array_is_refused_by_solve_and_view_alike():
    tri = query(TRIANGLE, semiring="counting")
    messages = []
    for call in (lambda: tri.solve(E=REPRO), lambda: IncrementalView(tri, E=REPRO)):
        with pytest.raises(TypeError) as e:
            call()
        messages.append(str(e.value))
    for m in messages:
        assert "relation 'E'" in m and "ambiguous" in m
        assert "Factor.from_numpy(arr, vars=('i', 'j'))" in m
        assert "pandas.DataFrame(arr, columns=['a', 'b'])" in m
    # said explicitly, each meaning is what it says: rows of keys, or a dense 5 x 2 matrix
    rows = pd.DataFrame(REPRO, columns=["a", "b"])
    assert tri.solve(E=rows).scalar() == IncrementalView(tri, E=rows).result().scalar() == 2
    dense = Factor.from_numpy(REPRO, vars=("a", "b"))
    cells = {(i, j): int(x) for (i, j), x in np.ndenumerate(REPRO) if x}
    want = reference_solve(TRIANGLE, "counting", {"E": cells})[()]
    assert tri.solve(E=dense).scalar() == IncrementalView(tri, E=dense).result().scalar() == want


# -- the same rows, every entry point ------------------------------------------------------------
@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    """The answers of the explicit factors, each checked against the oracle."""
    E, D, S = explicit(EDGES, ("a", "b")), explicit(DELTA, ("a", "b")), explicit(SOURCES, ("a",))
    out: dict[str, Any] = {}
    for rule in (PATHS, TRIANGLES):
        q = query(rule, semiring="integer")
        got = q.solve(E=E).to_dict()
        assert got == reference_solve(rule, "integer", {"E": EDGES})
        new = reference_solve(rule, "integer", {"E": after(EDGES, DELTA)})
        change = {k: new.get(k, 0) - got.get(k, 0) for k in set(new) | set(got)}
        assert solve_delta(q, {"E": E}, {"E": D}).change.to_dict() == {
            k: v for k, v in change.items() if v
        }
        out[rule] = (got, new, {k: v for k, v in change.items() if v})
    fix = query(REACH, semiring="integer").solve(S=S, E=E).to_dict()
    assert fix == reference_fixpoint(REACH, "integer", {"S": SOURCES, "E": EDGES})["P"]
    new = reference_fixpoint(REACH, "integer", {"S": SOURCES, "E": after(EDGES, DELTA)})["P"]
    out[REACH] = (fix, new)
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rule", [PATHS, TRIANGLES])
def test_every_entry_point_reads_the_same_rows_the_same_way(request, truth, kind, rule):
    q = query(rule, semiring="integer")
    before, now, change = truth[rule]
    E = as_kind(frame(EDGES, ["src", "dst"]), kind, request)
    D = as_kind(frame(DELTA, ["x", "y"]), kind, request)  # names never matter: positions do
    assert q.solve(E=E).to_dict() == before
    assert q.run(E=E).result.to_dict() == before
    assert "E(a, b): 6 rows" in q.explain(E=E)
    assert solve_delta(q, {"E": E}, {"E": D}).change.to_dict() == change
    view = IncrementalView(q, E=E)
    assert view.result().to_dict() == before
    assert view.step(E=D).to_dict() == change
    assert view.result().to_dict() == now
    spec = "ab,bc->ac" if rule == PATHS else "ab,bc,ac->a"  # rows are einsum operands too
    got = einsum(spec, *[E] * (2 if rule == PATHS else 3), semiring="integer")
    assert got.to_dict() == before


@pytest.mark.parametrize("kind", KINDS)
def test_programs_and_program_views_read_them_alike(request, truth, kind):
    p = query(REACH, semiring="integer")
    before, now = truth[REACH]
    S = as_kind(frame(SOURCES, ["node"]), kind, request)
    E = as_kind(frame(EDGES, ["u", "v"]), kind, request)
    assert p.solve(S=S, E=E).to_dict() == before
    assert p.run(S=S, E=E).result.to_dict() == before
    view = IncrementalView(p, S=S, E=E)
    assert view.result().to_dict() == before
    view.step(E=as_kind(frame(DELTA, ["u", "v"]), kind, request))
    assert view.result().to_dict() == now


def test_weights_are_read_in_a_views_changes_only():
    q = query(PATHS, semiring="integer")
    E = frame(EDGES, ["a", "b"])
    view = IncrementalView(q, E=E)
    retract = pd.DataFrame({"a": [1], "b": [2], "value": [3], "_weight": [-1]})
    view.step(E=retract)
    assert view.result().to_dict() == reference_solve(
        PATHS, "integer", {"E": after(EDGES, {(1, 2): -3})}
    )
    for call in (lambda: q.solve(E=retract), lambda: solve_delta(q, {"E": E}, {"E": retract})):
        with pytest.raises(ValueError, match="'_weight' holds multiplicities.*IncrementalView"):
            call()


def test_a_number_is_a_relation_without_keys_everywhere(spark):
    # (the view's change of S() meets A in a Cartesian product: the delta rule runs it in Spark)
    q = query("Q(a) :- A(a), S()", semiring="integer")
    A = pd.DataFrame({"a": [1, 2], "value": [2, 5]})
    for s in (3, np.int64(3), np.array(3), 3.0):
        assert q.solve(A=A, S=s).to_dict() == {(1,): 6, (2,): 15}
    view = IncrementalView(q, A=A, S=np.array(3))
    assert view.step(S=-1).to_dict() == {(1,): -2, (2,): -5}
    assert view.result().to_dict() == {(1,): 4, (2,): 10}
    with pytest.raises(ValueError, match="relation 'A'.*without keys.*A\\(a\\) takes 1 key"):
        q.solve(A=2, S=3)


# -- einsum: numpy's convention for plain arrays and scalars -----------------------------------
def test_einsum_reads_plain_arrays_as_numpy_does_and_rows_as_rows():
    rng = np.random.default_rng(0)
    A, B = rng.integers(0, 3, (3, 4)).astype(float), rng.integers(0, 3, (4, 2)).astype(float)
    got = einsum("ij,jk->ik", A, B).to_numpy(shape=(3, 2))
    np.testing.assert_allclose(got, np.einsum("ij,jk->ik", A, B))
    assert einsum("i,->i", np.array([1.0, 2.0]), 3.0).to_dict() == {(0,): 3.0, (1,): 6.0}
    # the same array given as rows says so explicitly, and is rows there too
    rows = pd.DataFrame(REPRO, columns=["a", "b"])
    assert einsum("ab,bc,ac->", rows, rows, rows, semiring="counting").scalar() == 2
    with pytest.raises(TypeError, match=r"einsum operand 1: expected a numpy array.*got list"):
        einsum("ij,jk->ik", A, [[1.0], [2.0]])


# -- refusals: the same message at every entry point -------------------------------------------
PLAIN = [np.array([1, 2]), np.array([[0, 1], [1, 2]]), np.zeros((2, 2, 2))]
OTHER = [[(0, 1)], {(0, 1): 1}, "E.csv"]


def entry_points(given: Any) -> dict[str, Any]:
    """Each entry point of a relation given by name, called with ``given`` for ``E``."""
    q = query(PATHS, semiring="integer")
    p = query(REACH, semiring="integer")
    E = frame(EDGES, ["a", "b"])
    S = frame(SOURCES, ["a"])
    view = IncrementalView(q, E=E)
    pview = IncrementalView(p, S=S, E=E)
    return {
        "solve": lambda: q.solve(E=given),
        "run": lambda: q.run(E=given),
        "explain": lambda: q.explain(E=given),
        "program": lambda: p.solve(S=S, E=given),
        "view": lambda: IncrementalView(q, E=given),
        "step": lambda: view.step(E=given),
        "program step": lambda: pview.step(E=given),
        "solve_delta": lambda: solve_delta(q, {"E": E}, {"E": given}),
        "solve_delta relations": lambda: solve_delta(q, {"E": given}, {"E": E}),
        "views": (view, pview),
    }


@pytest.mark.parametrize("given", PLAIN, ids=lambda a: f"shape{a.shape}")
def test_a_plain_array_is_refused_everywhere_naming_both_constructors(given):
    calls = entry_points(given)
    view, pview = calls.pop("views")
    for where, call in calls.items():
        with pytest.raises(TypeError) as e:
            call()
        m = str(e.value)
        assert "relation 'E'" in m and f"plain numpy array (shape {given.shape})" in m, where
        assert "Factor.from_numpy(arr, vars=(" in m, where
        if given.ndim <= 2:
            assert "ambiguous" in m and "pandas.DataFrame(arr, columns=[" in m, where
    assert view.tick == pview.tick == 0
    assert view.result().to_dict() == reference_solve(PATHS, "integer", {"E": EDGES})


@pytest.mark.parametrize("given", OTHER, ids=lambda x: type(x).__name__)
def test_anything_else_is_refused_listing_what_is_accepted(given):
    calls = entry_points(given)
    calls.pop("views")
    for where, call in calls.items():
        with pytest.raises(TypeError) as e:
            call()
        m = str(e.value)
        assert "relation 'E'" in m, where
        assert "expected a Factor, a Spark DataFrame, a pandas DataFrame, a pyarrow Table" in m
        assert f"got {type(given).__name__}" in m, where


def test_messages_name_types_fully():
    pdf = pd.DataFrame({"a": [1], "b": [2]})
    with pytest.raises(TypeError, match=r"got pandas DataFrame; .*Factor.from_pandas\(df\)"):
        Factor(pdf)
    with pytest.raises(TypeError, match=r"got numpy array of shape \(2,\); .*from_numpy"):
        Factor(np.array([1, 2]))
    with pytest.raises(TypeError, match="got pyarrow Table"):
        Factor(pa.Table.from_pandas(pdf))


def test_rows_are_checked_with_clear_messages():
    q = query(PATHS, semiring="integer")
    with pytest.raises(ValueError, match=r"relation 'E': atom E\(a, b\) takes 2 key column.*3"):
        q.solve(E=pd.DataFrame({"a": [1], "b": [2], "c": [3]}))
    with pytest.raises(ValueError, match=r"relation 'E': columns \['a'\] repeat a name"):
        q.solve(E=pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(ValueError, match=r"key column 'b' \(position 1\) has 1 null"):
        q.solve(E=pa.table({"a": [1, 2], "b": [3, None]}))
    with pytest.raises(ValueError, match=r"column 'value' has 1 null annotation"):
        q.solve(E=pa.table({"a": [1, 2], "b": [3, 4], "value": [1, None]}))
    with pytest.raises(ValueError, match=r"structured array is rows.*1-D"):
        q.solve(E=np.zeros((2, 2), dtype=[("a", "i8"), ("b", "i8")]))
    with pytest.raises(ValueError, match=r"18446744073709551615, beyond the 64-bit"):
        q.solve(E=pd.DataFrame({"a": np.array([2**64 - 1], np.uint64), "b": [1]}))


# -- point 5: nothing needs Spark unless the data is in Spark ---------------------------------
NO_SESSION = textwrap.dedent(
    """
    import numpy as np, pandas as pd, pyarrow as pa
    import semirings
    from faq import Factor, query
    from incremental import IncrementalView

    # the issue's reproduction, as it is
    B = semirings.Semiring(name="bneck", zero=float("-inf"), one=float("inf"), add=max, mul=min)
    v = IncrementalView(
        query("Q(a) :- E(a, b)", semiring=B), E=pd.DataFrame({"a": [1], "b": [2], "value": [3.0]})
    )
    assert v.result().to_dict() == {(1,): 3.0}

    q = query("Q(a, c) :- E(a, b), E(b, c)", semiring=B)
    pdf = pd.DataFrame({"a": [0, 1, 0], "b": [1, 2, 2], "value": [5.0, 2.0, 1.0]})
    dense = np.full((3, 3), -np.inf)
    dense[0, 1], dense[1, 2], dense[0, 2] = 5.0, 2.0, 1.0
    kinds = {
        "pandas": pdf,
        "arrow": pa.Table.from_pandas(pdf),
        "structured": pdf.to_records(index=False),
        "from_pandas": Factor.from_pandas(pdf, semiring=B),
        "from_dict": Factor.from_dict(
            {(0, 1): 5.0, (1, 2): 2.0, (0, 2): 1.0}, vars=("a", "b"), semiring=B
        ),
        "from_numpy": Factor.from_numpy(dense, vars=("a", "b"), semiring=B),
    }
    delta = pd.DataFrame({"a": [2], "b": [3], "value": [4.0]})
    for kind, E in kinds.items():
        assert q.solve(E=E).to_dict() == {(0, 2): 2.0}, kind
        view = IncrementalView(q, E=E)
        assert view.step(E=delta).to_dict() == {(0, 3): 1.0, (1, 3): 2.0}, kind
        assert view.result().to_dict() == {(0, 2): 2.0, (0, 3): 1.0, (1, 3): 2.0}, kind
    p = query("W(x) :- S(x)\\nW(y) :- W(x), E(x, y)", semiring=B)
    S = pd.DataFrame({"a": [0], "value": [float("inf")]})
    widest = {(0,): float("inf"), (1,): 5.0, (2,): 2.0}
    assert p.solve(S=S, E=pa.Table.from_pandas(pdf)).to_dict() == widest
    pv = IncrementalView(p, S=S.to_records(index=False), E=pdf)
    assert pv.result().to_dict() == widest
    assert pv.step(E=delta).to_dict() == {(3,): 2.0}

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is None, "a session was started"
    assert SparkContext._active_spark_context is None, "a SparkContext was started"
    assert SparkContext._gateway is None, "a JVM was started"
    print("no session")
    """
)


def test_a_user_semiring_over_local_inputs_needs_no_session():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", NO_SESSION],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "no session"
