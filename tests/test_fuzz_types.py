"""Fuzz key and value types (issue 11, points 2, 3 and 6).

Random small relations whose key columns are integers, strings or floats and
whose annotations are drawn from inside and outside each semiring (huge
integers, NaN, infinities, strings, booleans).  Each query either returns what
:func:`faq.reference_solve` computes, or raises ValueError/TypeError naming
the relation, the variable or the column.  Never another exception, never a
wrong answer.
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import event, given
from hypothesis import strategies as st

from faq import Factor, query, reference_solve

RULES = [
    "Q(a, c) :- A(a, b), B(b, c)",
    "Q() :- A(a, b), B(b, c), A(a, c)",
    "Q(b) :- A(a, b), B(b, a)",
]
SEMIRINGS = st.sampled_from(["counting", "integer", "real", "max-product", "min-plus", "boolean"])
KEY_KINDS = st.sampled_from(["int", "int", "str", "float"])
VALID = {
    "counting": st.integers(0, 3),
    "integer": st.integers(-3, 3),
    "real": st.floats(-2.0, 2.0),
    "max-product": st.floats(0.0, 2.0),
    "min-plus": st.floats(0.0, 4.0),
    "boolean": st.booleans(),
}
HOSTILE = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**63, 2**64 - 1, -(2**63) - 1, 10**30]),
    st.floats(0.0, 4.0),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e19]),
    st.booleans(),
    st.sampled_from(["1", "x"]),
)


def _key(kind: str, i: int):
    return {"int": i, "str": f"s{i}", "float": i + 0.5}[kind]


@st.composite
def cases(draw, semiring: str):
    """A rule and relations of random key types; at most one value is hostile."""
    rule = draw(st.sampled_from(RULES))
    kinds = {r: (draw(KEY_KINDS), draw(KEY_KINDS)) for r in ("A", "B")}
    data = {}
    for r in ("A", "B"):
        ks = draw(st.sets(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=5))
        data[r] = {
            (_key(kinds[r][0], i), _key(kinds[r][1], j)): draw(VALID[semiring])
            for i, j in sorted(ks)
        }
    if draw(st.booleans()):
        r = draw(st.sampled_from(["A", "B"]))
        data[r][draw(st.sampled_from(sorted(data[r], key=repr)))] = draw(HOSTILE)
    return rule, data


def _build(data: dict, semiring: str, how: str):
    out = {}
    for r, d in data.items():
        if how == "dict":
            out[r] = Factor.from_dict(d, ("x", "y"), semiring, name=r)
        else:
            pdf = pd.DataFrame(
                {"x": [k[0] for k in d], "y": [k[1] for k in d], "value": list(d.values())}
            )
            out[r] = Factor.from_pandas(pdf, semiring=semiring, name=r)
    return out


def _same(got: dict, want: dict) -> bool:
    if set(got) != set(want):
        return False
    for k, v in want.items():
        g = got[k]
        if isinstance(v, float) or isinstance(g, float):
            if not math.isclose(float(g), float(v), rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif g != v:
            return False
    return True


@given(data=st.data(), semiring=SEMIRINGS, how=st.sampled_from(["dict", "pandas"]))
def test_random_key_and_value_types(spark, data, semiring, how):
    rule, data = data.draw(cases(semiring))
    try:
        rels = _build(data, semiring, how)
        got = query(rule, semiring=semiring).solve(backend="driver", **rels).to_dict()
    except (ValueError, TypeError, OverflowError) as exc:
        text = str(exc)
        assert isinstance(exc, ValueError | TypeError) or "overflow" in text, text
        assert any(w in text for w in ("'A'", "'B'", "variable", "column")), text
        event(f"refused: {type(exc).__name__}")
        return
    # accepted: every value was in the semiring, and the answer is the reference's
    want = reference_solve(rule, semiring, data)
    assert _same(got, want), (rule, semiring, got, want)
    event("answered")
