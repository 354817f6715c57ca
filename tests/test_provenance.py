"""The provenance semiring ℕ[X], Factor.tagged and semirings.specialise.

Specialising one provenance result must equal solving directly in each target
semiring (ℕ[X] is the free commutative semiring), and the provenance itself
must equal the brute-force reference evaluator's.
"""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import Factor, query
from faq.reference import reference_solve
from semirings.provenance import PROVENANCE, evaluate, parse, polynomial, to_sympy

ROOT = Path(__file__).resolve().parent.parent

RULES = [
    "Q(i, k) :- A(i, j), B(j, k)",
    "Q() :- A(a, b), A(b, c), A(a, c)",
    "Q(a) :- A(a, b), B(b, c), A(c, a)",
    "Q(x) :- A(x, y), B(x, z), A(y, z)",
    "Q(a, d) :- A(a, b), B(b, c), A(c, d)",
    "Q() :- A(a, b), B(b, c), A(c, d), B(d, a)",
]

BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)


def _targets(draw_value):
    return {
        "counting": draw_value(st.integers(1, 3)),
        "boolean": draw_value(st.booleans()),
        "max-product": draw_value(st.sampled_from([0.25, 0.5, 1.0])),
        "min-plus": draw_value(st.sampled_from([0.0, 1.0, 2.5])),
        BOTTLENECK: draw_value(st.sampled_from([1.0, 2.0, 3.0])),
    }


@st.composite
def cases(draw):
    rule = draw(st.sampled_from(RULES))
    keys = st.tuples(st.integers(0, 3), st.integers(0, 3))
    rels = {}
    for name in ("A", "B"):
        if name in rule:
            rels[name] = sorted(draw(st.sets(keys, min_size=1, max_size=7)))
    values = {}
    for name, tuples in rels.items():
        for k in tuples:
            values[f"{name.lower()}{k[0]}_{k[1]}"] = _targets(draw)
    return rule, rels, values


def _tagged(rels):
    return {
        name: Factor.tagged(
            pd.DataFrame(
                {
                    "x": [k[0] for k in ks],
                    "y": [k[1] for k in ks],
                    "tag": [f"{name.lower()}{k[0]}_{k[1]}" for k in ks],
                }  # fmt: skip
            ),
            name=name,
        )
        for name, ks in rels.items()
    }


def _close(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) or isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True


@settings(max_examples=25, deadline=None)
@given(cases())
def test_specialising_the_provenance_equals_solving_directly(spark, case):
    rule, rels, values = case
    prov = query(rule, "provenance").solve(backend="driver", **_tagged(rels))
    ref = reference_solve(
        rule,
        PROVENANCE,
        {n: {k: f"{n.lower()}{k[0]}_{k[1]}" for k in ks} for n, ks in rels.items()},
    )
    assert prov.to_dict() == ref
    for target in ["counting", "boolean", "max-product", "min-plus", BOTTLENECK]:
        S = semirings.get(target)
        vals = {sym: v[target] for sym, v in values.items()}
        direct_inputs = {
            n: Factor.from_dict({k: vals[f"{n.lower()}{k[0]}_{k[1]}"] for k in ks}, ("x", "y"), S)
            for n, ks in rels.items()
        }
        direct = query(rule, S).solve(backend="driver", **direct_inputs).to_dict()
        special = semirings.specialise(prov, S, vals).to_dict()
        assert _close(special, direct), (target, special, direct)


def test_spark_path_equals_driver_path(spark):
    rows = [(0, 1, "e0_1"), (1, 2, "e1_2"), (0, 2, "e0_2"), (2, 3, "e2_3"), (1, 3, "e1_3")]
    df = spark.createDataFrame(rows, "a bigint, b bigint, tag string")
    E = Factor.tagged(df, name="E")
    q = query("Q(a) :- E(a, b), E(b, c), E(a, c)", "provenance")
    on_spark = q.solve(E=E, backend="spark").to_dict()
    assert on_spark == q.solve(E=E, backend="driver").to_dict()
    assert on_spark == {(0,): "e0_1*e0_2*e1_2", (1,): "e1_2*e1_3*e2_3"}
    assert to_sympy(on_spark)[(0,)] == sympy.Symbol("e0_1") * sympy.Symbol("e0_2") * sympy.Symbol(
        "e1_2"
    )


def test_repeated_keys_add_and_coefficients_count_derivations():
    pdf = pd.DataFrame({"a": [0, 0, 1], "b": [1, 1, 2], "tag": ["p", "q", "r"]})
    E = Factor.tagged(pdf, name="E")
    assert E.to_dict() == {(0, 1): "p + q", (1, 2): "r"}
    out = query("Q() :- E(a, b), E(c, d)", "provenance").solve(E=E).scalar()
    assert out == "2*p*q + 2*p*r + p**2 + 2*q*r + q**2 + r**2"  # monomials in sorted order
    assert sympy.expand(sympy.sympify("(p + q + r)**2") - sympy.sympify(out)) == 0


def test_polynomial_arithmetic_is_canonical():
    assert PROVENANCE.mul("a + b", "a + b") == "2*a*b + a**2 + b**2"
    assert PROVENANCE.add("b*a", "a*b") == "2*a*b"
    assert PROVENANCE.mul("0", "a") == "0" and PROVENANCE.mul("1", "a") == "a"
    assert polynomial({(("x", 2),): 3}) == "3*x**2"
    assert parse("2*x**3*y") == {(("x", 3), ("y", 1)): 2}


def test_specialise_into_a_ring_and_with_zero_values():
    prov = {(): "2*a*b + c**2"}
    assert semirings.specialise(prov, "integer", {"a": 2, "b": -1, "c": 3}) == {(): 5}
    assert semirings.specialise(prov, "boolean", {"a": True, "b": False, "c": False}) == {}


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["0bad", "", "a-b", None])
def test_a_bad_tag_is_refused(bad):
    pdf = pd.DataFrame({"a": [0, 1], "b": [1, 2], "tag": ["ok", bad]})
    with pytest.raises(ValueError, match="'E': tag column 'tag' has 1 value"):
        Factor.tagged(pdf, name="E")


def test_a_bad_tag_in_spark_is_refused(spark):
    df = spark.createDataFrame([(0, 1, "ok"), (1, 2, "not ok")], "a bigint, b bigint, tag string")
    with pytest.raises(ValueError, match="e.g. 'not ok'"):
        Factor.tagged(df, name="E")
    with pytest.raises(ValueError, match="no tag column 'label'"):
        Factor.tagged(df, tag="label", name="E")


def test_specialise_refusals():
    with pytest.raises(ValueError, match="no value for symbol.*'b'"):
        semirings.specialise({(): "a*b"}, "counting", {"a": 1})
    with pytest.raises(ValueError, match="symbol 'a'"):
        semirings.specialise({(): "a"}, "counting", {"a": -1})
    plain = Factor.from_dict({(0,): 1}, ("a",), "counting")
    with pytest.raises(ValueError, match="'provenance' semiring, not of 'counting'"):
        semirings.specialise(plain, "counting", {})


def test_negative_coefficients_are_not_provenance():
    with pytest.raises(ValueError, match="not a value of the 'provenance' semiring"):
        Factor.from_dict({(0,): "-1*a"}, ("a",), "provenance", name="P")


def test_the_example_runs(spark, capsys):
    path = ROOT / "examples" / "provenance_triangles.py"
    spec = importlib.util.spec_from_file_location("provenance_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([]) == 0
    out = capsys.readouterr().out
    assert "78 edges, 45 triangles" in out and "count from the provenance: 45" in out
    # the count without the edge the example removes, solved again from scratch
    line = next(ln for ln in out.splitlines() if ln.startswith("without edge"))
    u, v = (int(x) for x in line.split("(")[1].split(")")[0].split(", "))
    left = int(line.split(": ")[1].split()[0])
    edges = mod.tagged_edges(mod.DEFAULT)
    kept = edges[~((edges.a == u) & (edges.b == v))][["a", "b"]]
    E = Factor.from_pandas(kept, semiring="counting")
    assert query("Q() :- E(a, b), E(b, c), E(a, c)", "counting").solve(E=E).scalar() == left


# -- symbols: built explicitly, never read as sympy code ------------------------------------

SYMPY_NAMES = ["I", "E", "pi", "N", "S", "lambda", "True", "None", "Q", "O", "beta", "gamma"]
SYMPY_NAMES += ["oo", "zoo", "nan", "Integer", "Symbol", "exp", "_", "x1_y"]


@pytest.mark.parametrize("name", SYMPY_NAMES)
def test_a_tag_named_like_a_sympy_constant_stays_a_plain_symbol(name):
    pdf = pd.DataFrame({"a": [0, 1], "b": [1, 2], "tag": [name, "z"]})
    E = Factor.tagged(pdf, name="E")
    out = query("Q() :- E(a, b), E(c, d)", "provenance").solve(E=E).scalar()
    expr = to_sympy({(): out})[()]
    x, z = sympy.Symbol(name), sympy.Symbol("z")
    assert expr == x**2 + 2 * x * z + z**2  # I**2 is not -1, E and pi are not numbers
    assert expr.free_symbols == {x, z}
    assert polynomial(str(expr)) == out  # round trip through sympy's printing
    assert semirings.specialise({(): out}, "counting", {name: 3, "z": 1}) == {(): 16}


_names = st.sampled_from(["I", "E", "pi", "lambda", "True", "a", "b"])
_polys = st.dictionaries(
    st.lists(st.tuples(_names, st.integers(0, 3)), max_size=3).map(tuple),
    st.integers(0, 4),
    max_size=4,
)


@settings(max_examples=40, deadline=None)
@given(_polys, st.lists(st.integers(0, 3), min_size=7, max_size=7))
def test_sympy_round_trip_and_value(terms, ints):
    text = polynomial(terms)
    expr = to_sympy({(): text})[()]
    assert polynomial(str(expr)) == text
    values = dict(zip(["I", "E", "pi", "lambda", "True", "a", "b"], ints, strict=True))
    direct = expr.subs({sympy.Symbol(k): v for k, v in values.items()}, simultaneous=True)
    assert semirings.specialise({(): text}, "counting", values).get((), 0) == int(direct)


def test_to_sympy_refusals():
    with pytest.raises(ValueError, match=r"to_sympy\(\), key \(0,\): not a provenance .*'a\*\*'"):
        to_sympy({(0,): "a**"})
    plain = Factor.from_dict({(0,): 1}, ("a",), "counting")
    with pytest.raises(ValueError, match="'provenance' semiring, not of 'counting'"):
        to_sympy(plain)


# -- exponents and coefficients: exact canonical text ----------------------------------------


def test_zero_and_one_exponents_are_canonical():
    assert polynomial("a**0") == "1"
    assert PROVENANCE.add("a**0", "1") == "2"
    assert polynomial("a**1") == "a" and polynomial("a**1*b**00") == "a"
    assert PROVENANCE.mul("a**0*b", "b**0 + c") == "b + b*c"
    assert parse("a**0*b**2") == {(("b", 2),): 1}
    assert polynomial({(("a", 0),): 1}) == "1"
    assert polynomial({(("x", 2), ("x", 1), ("y", 0)): 3, (): 0}) == "3*x**3"
    assert polynomial("0*a + 0") == "0"


def test_from_dict_takes_only_canonical_polynomials():
    for text in ["a**0", "a**1", "b*a", "a + a", "0*a", "a+b"]:
        with pytest.raises(ValueError, match=r"key \(\): .*polynomial\(text\) gives"):
            Factor.from_dict({(): text}, (), "provenance", name="P")
        canon = polynomial(text)
        kept = Factor.from_dict({(): canon}, (), "provenance", name="P").to_dict()
        assert kept == ({} if canon == "0" else {(): canon})
    assert not PROVENANCE.contains("a**0") and PROVENANCE.contains("1 + a*b**2")


@pytest.mark.parametrize(
    "bad",
    [
        "a**",
        "a^2",
        "a**-1",
        "2**3",
        "a + ",
        "+",
        "",
        "a b",
        "a**1**2",
        "\u0663*a",  # an Arabic-Indic digit: isdigit() but not a coefficient
        "a**\u00b2",  # superscript two
        "a**9223372036854775808",
        "9223372036854775808*a",
        "4611686018427387904*a + 4611686018427387904*a",
        "a**" + "9" * 5000,
        "1" * 5000,
    ],
)
def test_a_malformed_polynomial_is_a_value_error_naming_it(bad):
    shown = repr(bad) if len(repr(bad)) <= 80 else repr(bad)[:77]
    with pytest.raises(ValueError, match=f"not a provenance polynomial: {re.escape(shown)}"):
        parse(bad)
    assert not PROVENANCE.contains(bad)
    with pytest.raises(ValueError, match=re.escape(shown)):
        semirings.specialise({(0,): bad}, "counting", {"a": 1})


def test_polynomial_from_a_dict_is_checked():
    for terms, what in [
        ({(("a", -1),): 1}, "exponent -1"),
        ({(("a b", 1),): 1}, "'a b' is not a provenance symbol"),
        ({(("a", 1),): -2}, "coefficient -2"),
        ({(("a", 1),): True}, "coefficient True"),
        ({(("a", 1.0),): 1}, "exponent 1.0"),
        ({("a",): 1}, "not a .symbol, exponent. pair"),
    ]:
        with pytest.raises(ValueError, match=what):
            polynomial(terms)


def test_arithmetic_past_the_limits_overflows():
    with pytest.raises(OverflowError, match="coefficient overflowed"):
        PROVENANCE.mul("4294967296*a", "4294967296*b")
    with pytest.raises(OverflowError, match="coefficient overflowed"):
        PROVENANCE.add("4611686018427387904*a", "4611686018427387904*a")
    with pytest.raises(OverflowError, match="exponent of 'a' overflowed"):
        PROVENANCE.mul("a**9223372036854775807", "a")
    assert PROVENANCE.mul("3037000499*a", "3037000499") == "9223372030926249001*a"


# -- specialise: exact ranges, exponentiation by squaring -----------------------------------


def test_specialise_with_a_zero_exponent():
    assert semirings.specialise({(): "a**0"}, "counting", {"a": 5}) == {(): 1}
    assert semirings.specialise({(): "a**0*b"}, "counting", {"b": 4}) == {(): 4}


@pytest.mark.parametrize(
    ("poly", "target", "values", "term"),
    [
        ("a**64", "counting", {"a": 2}, "a**64"),
        ("a**63", "counting", {"a": 2}, "a**63"),
        ("2*a**62", "counting", {"a": 2}, "2*a**62"),
        ("a*b", "integer", {"a": 2**32, "b": -(2**32)}, "a*b"),
        ("a**100000000", "counting", {"a": 2}, "a**100000000"),
        ("a**9223372036854775807", "integer", {"a": -3}, "a**9223372036854775807"),
    ],
)
def test_specialise_refuses_a_term_outside_the_target(poly, target, values, term):
    with pytest.raises(
        ValueError, match=rf"key \(7,\): term {re.escape(repr(term))} .* {target!r}"
    ):
        semirings.specialise({(7,): poly}, target, values)
    with pytest.raises(ValueError):  # the Factor form refuses it too
        Factor.from_dict({(7,): 2**63}, ("k",), target)


def test_specialise_ranges_are_exact():
    assert semirings.specialise({(): "a**62"}, "counting", {"a": 2}) == {(): 2**62}
    assert semirings.specialise({(): "a**63"}, "integer", {"a": -2}) == {(): -(2**63)}
    big = 2**63 - 1
    assert semirings.specialise({(): "a"}, "counting", {"a": big}) == {(): big}
    with pytest.raises(ValueError, match="the sum of the terms .* 'counting'"):
        semirings.specialise({(): "a + b"}, "counting", {"a": big, "b": 1})
    # in a ring a partial sum may pass 2**63 when the total does not, as in a solve
    ring = {"a": 2**62, "b": 2**62, "c": -(2**62)}
    assert semirings.specialise({(): "a + b + c"}, "integer", ring) == {(): 2**62}
    # zero annihilates the other factors whatever their powers
    assert semirings.specialise({(): "a**64*b"}, "counting", {"a": 2, "b": 0}) == {}
    # absurd exponents finish in O(log e) steps where the values stay bounded
    huge = "a**9223372036854775807*b**100000000"
    assert semirings.specialise({(): huge}, "counting", {"a": 1, "b": 1}) == {(): 1}
    assert semirings.specialise({(): huge}, "max-product", {"a": 0.5, "b": 1.0}) == {}
    assert semirings.specialise({(): huge}, "boolean", {"a": True, "b": True}) == {(): True}


def test_specialise_a_user_semiring_bounded_by_its_contains():
    calls = []

    def mul(x, y):
        calls.append(1)
        return x * y

    bounded = semirings.Semiring(
        name="bounded-count",
        zero=0,
        one=1,
        add=lambda x, y: x + y,
        mul=mul,
        contains=lambda x: isinstance(x, int) and 0 <= x < 10**30,
    )
    with pytest.raises(ValueError, match="term 'a\\*\\*100000000' .* 'bounded-count'"):
        semirings.specialise({(): "a**100000000"}, bounded, {"a": 2})
    assert len(calls) < 10  # stopped at the first square past 10**30
    calls.clear()
    assert semirings.specialise({(): "a**100000000"}, bounded, {"a": 1}) == {(): 1}
    assert len(calls) <= 2 * 27  # by squaring: O(log e) multiplications


def test_missing_symbols_are_named():
    with pytest.raises(ValueError, match="no value for symbol.*'b', 'c'"):
        semirings.specialise({(0,): "a*b", (1,): "c"}, "counting", {"a": 1})
    with pytest.raises(ValueError, match="evaluate\\(\\): no value for symbol.*'b'"):
        evaluate("a*b", semirings.COUNTING, {"a": 1})
    with pytest.raises(TypeError, match="values must be a dict"):
        semirings.specialise({(0,): "a"}, "counting", [("a", 1)])
    assert evaluate("2*a*b + a**0", "counting", {"a": 2, "b": 3}) == 13


# -- the same tag check on pandas and on Spark ------------------------------------------------

BAD_TAGS = ["e1\n", "e1\r\n", "e1\r", "e1\u2028", "e1\u0085", "\ne1", "e 1", "", "0e"]
BAD_TAGS += ["e1\t", "\u00e9", "\uff45\uff11", "e-1", None]


@pytest.mark.parametrize("bad", BAD_TAGS)
def test_pandas_and_spark_refuse_the_same_tags(spark, bad):
    rows = [(0, 1, "ok"), (1, 2, bad)]
    pdf = pd.DataFrame(rows, columns=["a", "b", "tag"])
    df = spark.createDataFrame(rows, "a bigint, b bigint, tag string")
    with pytest.raises(ValueError) as on_pandas:
        Factor.tagged(pdf, name="E")
    with pytest.raises(ValueError) as on_spark:
        Factor.tagged(df, name="E")
    assert str(on_spark.value) == str(on_pandas.value)
    assert "has 1 value(s) that are not provenance symbols" in str(on_spark.value)
    assert str(on_spark.value).endswith(f"e.g. {bad!r}")


def test_pandas_and_spark_accept_the_same_tags(spark):
    rows = [(i, i + 1, t) for i, t in enumerate(SYMPY_NAMES)]
    pdf = pd.DataFrame(rows, columns=["a", "b", "tag"])
    df = spark.createDataFrame(rows, "a bigint, b bigint, tag string")
    expected = {(i, i + 1): t for i, t in enumerate(SYMPY_NAMES)}
    assert Factor.tagged(pdf, name="E").to_dict() == expected
    assert Factor.tagged(df, name="E").to_dict() == expected
