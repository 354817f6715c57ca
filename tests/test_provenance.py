"""The provenance semiring ℕ[X], Factor.tagged and semirings.specialise.

Specialising one provenance result must equal solving directly in each target
semiring (ℕ[X] is the free commutative semiring), and the provenance itself
must equal the brute-force reference evaluator's.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import Factor, query
from faq.reference import reference_solve
from semirings.provenance import PROVENANCE, parse, polynomial, to_sympy

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
