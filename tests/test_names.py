"""Variable names: any name a rule or einsum accepts works (issue 11, point 1).

Inside the engine every variable has a private name (``v0``, ``v1``...), so a user's
name can never collide with an internal column (``__w``, ``__w0``, ``__m``...); names
equal ignoring case are refused (Spark resolves column names case-insensitively).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from faq import Factor, einsum, query, reference_solve

BACKENDS = ["driver", "spark"]

E = {(0, 1): 1, (1, 1): 2, (1, 0): 3, (2, 0): 3}


def _close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k, v in want.items():
        assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-12), (k, got[k], v)


def _check(rule: str, semiring: str, backend: str, **options) -> None:
    f = Factor.from_dict(E, vars=("x", "y"), semiring=semiring)
    got = query(rule, semiring=semiring).solve(A=f, backend=backend, **options).to_dict()
    _close(got, reference_solve(rule, semiring, {"A": E}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_semiring_variable_named_like_its_helper_column(spark, backend):
    _check("Q(__m) :- A(__m, b)", "log", backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_join_variable_named_like_its_weight_column(spark, backend):
    _check("Q(__w0) :- A(__w0, __w1), A(__w1, c)", "real", backend, join="binary")


@pytest.mark.parametrize("backend", BACKENDS)
def test_wcoj_variables_named_like_its_columns(spark, backend):
    rule = "Q(__w) :- A(__w, __p), A(__p, __c0), A(__w, __c0)"
    _check(rule, "real", backend, join="wcoj")
    _check("Q(__rows, __s) :- A(__rows, __s), A(__s, __v0)", "counting", backend, join="wcoj")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sql_words_and_generated_names_as_variables(spark, backend):
    _check("Q(select, v1) :- A(select, v0), A(v0, v1)", "real", backend)
    _check("Q(order) :- A(order, from), A(from, k0)", "max-product", backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_witness_and_explain_keep_user_names(spark, backend):
    rule = "Q(__w) :- A(__w, b), A(b, c)"
    f = Factor.from_dict(E, vars=("x", "y"), semiring="max-product")
    q = query(rule, semiring="max-product")
    out = q.solve(A=f, backend=backend, witness=True)
    _close(out.to_dict(), reference_solve(rule, "max-product", {"A": E}))
    assert list(out.witness_frame.columns) == ["__w", "c", "b", "value"]
    text = q.explain(A=f, backend=backend)
    assert "binding" not in text or "v0" not in text
    assert "__w" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_spark_key_column_with_a_dot(spark, backend):
    df = spark.createDataFrame([(0, 1, 2.0), (1, 1, 3.0), (1, 0, 4.0)], ["x", "z", "value"])
    A = Factor(df, vars=("x.y", "z"), semiring="real")
    got = query("Q(x) :- A(x, z)").solve(A=A, backend=backend).to_dict()
    assert got == {(0,): 2.0, (1,): 7.0}
    B = Factor(df, vars=("`a`", "b.c"), semiring="real")
    got = einsum("ij,jk->ik", B, B, backend=backend).to_dict()
    M = {(0, 1): 2.0, (1, 1): 3.0, (1, 0): 4.0}
    _close(got, reference_solve("Q(i, k) :- B(i, j), B(j, k)", "real", {"B": M}))


@pytest.mark.parametrize(
    ("rule", "names"),
    [
        ("Q(a, A) :- E(a, A)", ("'A'", "'a'")),
        ("Q() :- E(xY, b), E(b, XY)", ("'XY'", "'xY'")),
        ("Q(Value) :- E(Value, b)", ("'Value'", "'value'")),
    ],
)
def test_names_equal_ignoring_case_are_refused(rule, names):
    with pytest.raises(ValueError, match="only in case") as err:
        query(rule)
    for n in names:
        assert n in str(err.value)


def test_einsum_letters_equal_ignoring_case_are_refused(spark):
    A = Factor.from_dict(E, vars=("x", "y"))
    with pytest.raises(ValueError, match="'I' differs from variable 'i' only in case"):
        einsum("iI,Ik->ik", A, A, backend="driver")


@pytest.mark.parametrize("bad", [None, 3, b"Q(i) :- A(i)", ["Q(i) :- A(i)"]])
def test_rule_that_is_not_a_string(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        query(bad)


def test_einsum_spec_that_is_not_a_string():
    A = Factor.from_dict(E, vars=("x", "y"))
    with pytest.raises(TypeError, match="NoneType"):
        einsum(None, A)


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_on_a_renamed_key_column_names_the_users_column(spark, backend):
    df = spark.createDataFrame([(0, None, 2.0), (1, 1, 3.0)], "x bigint, z bigint, value double")
    A = Factor(df, vars=("x.y", "__w"), semiring="real")
    with pytest.raises(ValueError, match=r"relation 'A'.*k1='__w'.*null") as err:
        query("Q(x) :- A(x, z)").solve(A=A, backend=backend)
    assert "'x.y'" in str(err.value)


def test_the_submodules_design_names_are_attributes_of_a_fresh_import():
    # Regression: DESIGN writes faq.io.read(path, ...), but `import faq` did not make
    # faq.io an attribute, so it was an AttributeError until faq.io was imported by name
    import subprocess
    import sys

    code = (
        "import sys, faq, incremental\n"
        "assert 'pyspark' not in sys.modules and 'faq.io' not in sys.modules\n"
        "assert callable(faq.io.read) and callable(faq.session.local_session)\n"
        "assert callable(incremental.testing.assert_incremental)\n"
        "try:\n    faq.nope\nexcept AttributeError as e:\n    assert 'nope' in str(e)\n"
        "else:\n    raise SystemExit('faq.nope did not raise')\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
