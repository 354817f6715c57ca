"""Semiring laws for every built-in (hypothesis), the registry, user-defined semirings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import semirings
from semirings import LawError, Semiring, check_laws

quarter = st.integers(-64, 64).map(lambda k: k / 4)  # exact under + and ×
VALUES = {
    "counting": st.integers(0, 1000),
    "integer": st.integers(-1000, 1000),
    "real": quarter,
    "boolean": st.booleans(),
    "max-product": st.integers(0, 32).map(lambda k: k / 4),
    "min-plus": st.one_of(quarter, st.just(math.inf)),
    "max-plus": st.one_of(quarter, st.just(-math.inf)),
    "log": st.one_of(st.floats(-20, 20), st.just(-math.inf)),
}


def test_every_builtin_has_a_value_strategy():
    assert set(VALUES) == {s.name for s in semirings.BUILTINS}


@pytest.mark.parametrize("name", list(VALUES))
def test_laws_hold(name):
    S = semirings.get(name)

    @given(st.lists(VALUES[name], min_size=1, max_size=4))
    def check(values):
        check_laws(S, values)

    check()


@pytest.mark.parametrize("name", list(VALUES))
def test_builtin_has_native_spark_path(name):
    S = semirings.get(name)
    assert S.has_native_spark
    assert S.contains(S.zero) and S.contains(S.one)


def test_get_unknown_lists_names():
    with pytest.raises(ValueError, match="unknown semiring 'tropical'.*'max-product'"):
        semirings.get("tropical")


def test_get_accepts_spelling_variants_and_instances():
    assert semirings.get("MAX_PRODUCT") is semirings.MAX_PRODUCT
    assert semirings.get(semirings.LOG) is semirings.LOG


def test_rings():
    assert semirings.get("integer").is_ring and semirings.get("real").is_ring
    assert not semirings.get("counting").is_ring
    assert semirings.INTEGER.neg(5) == -5


def test_log_add_is_stable():
    S = semirings.LOG
    assert S.add(1000.0, 1000.0) == pytest.approx(1000.0 + math.log(2))
    assert S.add(-math.inf, -math.inf) == -math.inf
    assert S.sum([math.log(0.2), math.log(0.3)]) == pytest.approx(math.log(0.5))


def test_membership():
    assert not semirings.COUNTING.contains(-1)
    assert not semirings.COUNTING.contains(2**63)
    assert not semirings.REAL.contains(math.nan)
    assert not semirings.REAL.contains(math.inf)
    assert not semirings.MIN_PLUS.contains(-math.inf)
    assert semirings.MIN_PLUS.contains(math.inf)
    assert not semirings.MAX_PRODUCT.contains(-0.5)
    with pytest.raises(ValueError, match="not a value of the 'counting' semiring"):
        semirings.COUNTING.check_value(-3, "relation 'E'")


def test_user_defined_semiring_laws_and_defaults():
    bottleneck = Semiring(name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min)
    check_laws(bottleneck, [1.0, 2.5, -3.0])
    assert bottleneck.spark_type == "double" and not bottleneck.has_native_spark
    assert bottleneck.contains(1.0) and not bottleneck.contains("x")


def test_laws_raise_with_counterexample():
    minus = Semiring(name="minus", zero=0, one=1, add=lambda a, b: a - b, mul=lambda a, b: a * b)
    with pytest.raises(LawError, match="not commutative: a=0, b=1"):
        check_laws(minus, [0, 1, 2])
    not_distributive = Semiring(name="nd", zero=0, one=1, add=max, mul=lambda a, b: a + b - 1)
    with pytest.raises(LawError):
        check_laws(not_distributive, [0, 1, 2])


def test_register():
    S = Semiring(name="test-register-or", zero=False, one=True, add=bool.__or__, mul=bool.__and__)
    semirings.register(S)
    assert semirings.get("test-register-or") is S
    with pytest.raises(ValueError, match="already registered"):
        semirings.register(S)


def test_bad_semiring_definitions():
    with pytest.raises(TypeError, match="add must be callable"):
        Semiring(name="bad", zero=0, one=1, add=3, mul=max)
    with pytest.raises(ValueError, match="non-empty name"):
        Semiring(name="", zero=0, one=1, add=max, mul=min)


# -- the package's shape: declarations, not names --------------------------------------------
def _imports(path) -> set[str]:
    """Every module ``path`` imports, at the top or inside functions."""
    import ast

    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_core_imports_no_sibling_and_semirings_imports_nothing_from_faq():
    from pathlib import Path

    root = Path(semirings.__file__).parent
    assert not {m for m in _imports(root / "core.py") if m.split(".")[0] == "semirings"}
    for path in root.glob("*.py"):
        assert not {m for m in _imports(path) if m.split(".")[0] == "faq"}, path.name


def test_an_engine_semiring_unpickles_as_itself_in_a_fresh_process():
    import pickle
    import subprocess
    import sys

    from semirings.aggregates import COUNTING_MAX

    data = pickle.dumps([*semirings.BUILTINS, COUNTING_MAX, semirings.PROVENANCE])
    code = (
        "import pickle, sys\n"
        "got = pickle.loads(sys.stdin.buffer.read())\n"
        "from semirings.core import canonical\n"
        "assert all(s is canonical(s.name) and s.numpy is not None for s in got)\n"
        "print(len(got))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=data, capture_output=True, check=True
    ).stdout
    assert out.decode().strip() == "10"


def test_aggregates_follow_what_a_semiring_declares():
    from semirings.aggregates import allowed, needs_nonnegative, own_add, with_add

    plain = Semiring(name="plain-real", zero=0.0, one=1.0, add=lambda a, b: a + b, mul=max)
    assert own_add(plain) == "add" and allowed(plain) == ["add"]
    declared = Semiring(
        name="declared-real",
        zero=0.0,
        one=1.0,
        add=lambda a, b: a + b,
        mul=lambda a, b: a * b,
        aggregates=semirings.AggregateOps(
            "sum", "×", others={"max": "max-product"}, nonnegative=frozenset({"max"})
        ),
    )
    assert own_add(declared) == "sum" and allowed(declared) == ["sum", "max"]
    assert with_add(declared, "max") is semirings.MAX_PRODUCT
    assert with_add(declared, "add") is declared
    assert needs_nonnegative(declared, "max") and not needs_nonnegative(declared, "sum")
    with pytest.raises(ValueError, match="'min' is not allowed"):
        with_add(declared, "min")
    wrong = Semiring(
        name="wrong-decl",
        zero=0.0,
        one=1.0,
        add=max,
        mul=min,
        aggregates=semirings.AggregateOps("max", "min", others={"sum": "no-such"}),
    )
    with pytest.raises(ValueError, match="'no-such', which is not one of the engine"):
        with_add(wrong, "sum")
    assert with_add(semirings.BOOLEAN, "max") is semirings.BOOLEAN  # an alias of or
