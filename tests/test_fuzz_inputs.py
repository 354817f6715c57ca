"""Fuzz the public API with random names and small relations (issue 11, point 6).

Rules and einsum specs are built from names chosen to break things: internal column
names of the engine (``__w``, ``__w0``, ``__m``, ``__rows``...), the names the engine
generates for itself (``v0``, ``k0``), SQL words, case variants, unicode letters, dots.
Each query either returns exactly what :func:`faq.reference_solve` computes, or raises
ValueError/TypeError whose message names the offending atom, relation or column.
"""

from __future__ import annotations

import math
import string

from hypothesis import event, given
from hypothesis import strategies as st

from faq import Factor, einsum, query, reference_solve
from faq.rule import parse_einsum

INTERNAL = ["__w", "__w0", "__w1", "__m", "__s", "__p", "__c0", "__v0", "__v1", "__rows"]
INTERNAL += ["__null0", "__d0", "__bad", "__k0", "__l", "__r"]
GENERATED = ["v0", "v1", "v2", "k0", "k1"]
SQL = ["select", "from", "order", "where", "group", "value", "Value", "VALUE", "table"]
CASE = ["x", "X", "ab", "aB", "Ab"]
ODD = ["é", "名前", "x.y", "a b", "_", "__", "1a", "a-b", "`q`"]
NAMES = st.sampled_from(INTERNAL + GENERATED + SQL + CASE + ODD) | st.text(
    alphabet=string.ascii_letters + "_" + "éßλΩ", min_size=1, max_size=4
)
RELATIONS = st.sampled_from(["A", "B", "select", "order", "join", "value", "__w", "é", "T0"])
SEMIRINGS = st.sampled_from(["counting", "real", "max-product", "log"])
BACKENDS = st.sampled_from(["driver", "driver", "driver", "spark"])


def _relation(draw, arity: int) -> dict:
    keys = st.tuples(*[st.integers(0, 2)] * arity)
    return draw(st.dictionaries(keys, st.integers(1, 3), max_size=5))


@st.composite
def rules(draw):
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    rels = draw(st.lists(RELATIONS, min_size=1, max_size=2, unique=True))
    arity = {r: draw(st.integers(1, 2)) for r in rels}
    atoms = [
        (r, [draw(st.sampled_from(names)) for _ in range(arity[r])])
        for r in draw(st.lists(st.sampled_from(rels), min_size=1, max_size=3))
    ]
    used = list(dict.fromkeys(v for _, vs in atoms for v in vs))
    head = draw(st.lists(st.sampled_from(used), unique=True, max_size=2))
    body = ", ".join(f"{r}({', '.join(vs)})" for r, vs in atoms)
    text = f"Q({', '.join(head)}) :- {body}"
    data = {r: _relation(draw, arity[r]) for r, _ in atoms}
    cols = {r: draw(st.lists(NAMES, min_size=arity[r], max_size=arity[r])) for r in data}
    return text, data, cols, [*names, *rels]


def _close(got: dict, want: dict, where: str) -> None:
    assert set(got) == set(want), where
    for k, v in want.items():
        assert math.isclose(float(got[k]), float(v), rel_tol=1e-9, abs_tol=1e-9), (where, k)


def _names_something(exc: Exception, words: list[str]) -> None:
    text = str(exc)
    assert isinstance(exc, ValueError | TypeError), f"{type(exc).__name__}: {text}"
    assert any(w in text for w in words), f"message names nothing of {words}: {text}"


def _factor(spark, data: dict, cols: list[str], semiring: str, backend: str) -> Factor:
    if backend == "spark":
        rows = [(*k, float(v)) for k, v in data.items()]
        schema = ", ".join(f"`c{i}` bigint" for i in range(len(cols))) + ", value double"
        df = spark.createDataFrame(rows, schema).toDF(*cols, "value")
        return Factor(df, semiring=semiring)
    return Factor.from_dict(data, vars=cols, semiring=semiring)


@given(case=rules(), semiring=SEMIRINGS, backend=BACKENDS)
def test_random_rules(spark, case, semiring, backend):
    text, data, cols, words = case
    words = [*words, *[c for cs in cols.values() for c in cs]]
    try:
        q = query(text, semiring=semiring)
        rels = {r: _factor(spark, d, cols[r], semiring, backend) for r, d in data.items()}
        got = q.solve(backend=backend, **rels).to_dict()
    except Exception as exc:  # noqa: BLE001 - the point: only these two, with a clear message
        _names_something(exc, words)
        event(f"refused: {type(exc).__name__}")
        return
    _close(got, reference_solve(text, semiring, data), text)
    event(f"answered on {backend}")


LETTERS = st.sampled_from(list("ijkIJKéßλΩ"))


@st.composite
def specs(draw):
    terms = draw(st.lists(st.lists(LETTERS, min_size=1, max_size=2), min_size=1, max_size=3))
    letters = list(dict.fromkeys(c for t in terms for c in t))
    arrow = draw(st.booleans())
    out = draw(st.lists(st.sampled_from(letters), unique=True, max_size=2)) if arrow else []
    spec = ",".join("".join(t) for t in terms) + (f"->{''.join(out)}" if arrow else "")
    data = [_relation(draw, len(t)) for t in terms]
    return spec, data, [len(t) for t in terms]


@given(case=specs(), semiring=SEMIRINGS, backend=BACKENDS)
def test_random_einsum(spark, case, semiring, backend):
    spec, data, arity = case
    names = [f"T{i}" for i in range(len(data))]
    try:
        ops = [
            Factor.from_dict(d, vars=[f"c{j}" for j in range(n)], semiring=semiring)
            for d, n in zip(data, arity, strict=True)
        ]
        got = einsum(spec, *ops, semiring=semiring, backend=backend).to_dict()
    except Exception as exc:  # noqa: BLE001
        _names_something(exc, [spec, *spec.replace("->", ",").split(","), *names])
        event(f"refused: {type(exc).__name__}")
        return
    event(f"answered on {backend}")
    rule = parse_einsum(spec, names)
    _close(got, reference_solve(rule, semiring, dict(zip(names, data, strict=True))), spec)
