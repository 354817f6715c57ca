"""Constants in rules: ``Q(b) :- M(0, b), N(b, 'x')`` selects rows of M and N.

Parser (good and bad literals, messages naming the atom), the selection on every backend
(pushed into the scan: the statistics see the selected rows), typed checks, explain,
witnesses, per-variable aggregates, incremental views, and a property test of random rules
with constants against ``reference_solve``.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semirings
from faq import Factor, einsum, query, reference_solve
from faq.rule import Atom, Rule, literal, parse_rule, without_constants
from faq.testing import random_relations, random_rule
from incremental import IncrementalView
from tests.helpers import assert_same, factors_from

M = {(0, 1): 2.0, (0, 2): 3.0, (1, 1): 5.0, (1, 3): 7.0, (-3, 2): 11.0}
N = {(1, "x"): 1.0, (2, "x"): 10.0, (3, "y"): 4.0, (1, "y"): 100.0}


def m_n():
    return (
        Factor.from_dict(M, vars=("a", "b"), semiring="real"),
        Factor.from_dict(N, vars=("b", "c"), semiring="real"),
    )


# -- parsing -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "consts", "vars_", "shown"),
    [
        ("M(0, b)", ((0, 0),), ("b",), "M(0, b)"),
        ("M(-3, b)", ((0, -3),), ("b",), "M(-3, b)"),
        ("M( +7 ,b)", ((0, 7),), ("b",), "M(7, b)"),
        ("M(b, 'x')", ((1, "x"),), ("b",), "M(b, 'x')"),
        ('M(b, "x")', ((1, "x"),), ("b",), "M(b, 'x')"),
        ("M(b, 'a, (b)')", ((1, "a, (b)"),), ("b",), "M(b, 'a, (b)')"),
        ("M(b, 'it\\'s')", ((1, "it's"),), ("b",), "M(b, 'it\\'s')"),
        ('M(b, "say \\"hi\\"")', ((1, 'say "hi"'),), ("b",), "M(b, 'say \"hi\"')"),
        ("M(b, 'a\\\\b\\n\\t\\r')", ((1, "a\\b\n\t\r"),), ("b",), "M(b, 'a\\\\b\\n\\t\\r')"),
        ("M(b, ':-')", ((1, ":-"),), ("b",), "M(b, ':-')"),
        ("M(b, '')", ((1, ""),), ("b",), "M(b, '')"),
        ("M(b, b, 1)", ((2, 1),), ("b", "b"), "M(b, b, 1)"),
        ("M(9223372036854775807, b)", ((0, 2**63 - 1),), ("b",), "M(9223372036854775807, b)"),
    ],
)
def test_parse_constants(text, consts, vars_, shown):
    r = parse_rule(f"Q(b) :- {text}")
    (a,) = r.atoms
    assert (a.consts, a.vars, str(a)) == (consts, vars_, shown)
    assert a.arity == len(consts) + len(vars_)
    assert r.relations == {"M": a.arity} and r.variables == ("b",)
    assert parse_rule(str(r)) == r  # str round-trips


def test_constants_are_not_variables():
    r = parse_rule("Q() :- O(1, 'a'), P(x, 2)")
    assert r.atoms[0].vars == () and r.atoms[0].positions == ()
    assert r.atoms[1].positions == (0,) and r.variables == ("x",) and r.bound == ("x",)
    assert r.relations == {"O": 2, "P": 2}
    assert parse_rule("Q(b) :- M(0, b)") != parse_rule("Q(b) :- M('0', b)")


@pytest.mark.parametrize("c", [0, -5, 2**63 - 1, -(2**63), "", "x", "it's", 'a"b\\c\n\t\r', "ü"])
def test_literal_round_trips(c):
    r = parse_rule(f"Q() :- M({literal(c)})")
    assert r.atoms[0].consts == ((0, c),)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("Q(b) :- M(1.5, b)", "atom 'M\\(1.5, b\\)'.*'1.5' is not a variable name, an integer"),
        ("Q(b) :- M(x y, b)", "atom 'M\\(x y, b\\)'.*'x y' is not a variable name"),
        ("Q(b) :- M(, b)", "atom 'M\\(, b\\)'.*'\\(empty\\)' is not a variable name"),
        ("Q(b) :- M('x, b)", 'unterminated string "\'x, b\\)"'),
        ('Q(b) :- M("x, b)', "unterminated string"),
        ("Q(b) :- M('\\q', b)", r"""atom "M\('.*q', b\)".*unknown escape '\\q'"""),
        ("Q(b) :- M(9223372036854775808, b)", "M\\(9223372036854775808, b\\).*64 bits"),
        ("Q(0, b) :- M(0, b)", "head 'Q\\(0, b\\)'.*constant 0 cannot be in the head"),
        ("Q('x') :- M('x')", "head.*constant 'x' cannot be in the head"),
        ("Q(b) :- M(0, b), M(b)", "atom M\\(b\\).*arity 2 in M\\(0, b\\) but 1 here"),
        ("Q(b) :- M(0, 'b')", "variable 'b' does not appear in the body"),
        ("Q(b) :- M(0, b) 'x'", "malformed atom"),
    ],
)
def test_bad_constants(rule, message):
    with pytest.raises(ValueError, match=message):
        parse_rule(rule)


def test_atom_checks_its_constants():
    with pytest.raises(ValueError, match="positions"):
        Atom("M", ("b",), ((3, 0),))
    with pytest.raises(TypeError, match="int or a str, not float"):
        Atom("M", ("b",), ((0, 1.5),))
    with pytest.raises(TypeError, match="not bool"):
        Atom("M", ("b",), ((0, True),))


def test_without_constants():
    r = parse_rule("Q(b) :- M(0, b), M(1, c), M(0, c), M(b, c), M__c1(b)")
    plain, fresh = without_constants(r)
    assert str(plain) == "Q(b) :- M__c2(b), M__c3(c), M__c2(c), M(b, c), M__c1(b)"
    assert {n: str(a) for n, a in fresh.items()} == {"M__c2": "M(0, b)", "M__c3": "M(1, c)"}
    same = parse_rule("Q(b) :- M(b, c)")
    assert without_constants(same) == (same, {})


def test_einsum_and_rule_objects_unaffected():
    A = Factor.from_dict({(0, 1): 2.0, (1, 1): 3.0}, vars=("i", "j"), semiring="real")
    assert einsum("ij->j", A).to_dict() == {(1,): 5.0}
    rule = Rule("Q", ("b",), (Atom("M", ("b",), ((0, 0),)),))
    Mf, _ = m_n()
    assert query(rule).solve(M=Mf).to_dict() == {(1,): 2.0, (2,): 3.0}


# -- solving -------------------------------------------------------------------------------------
RULES = [
    "Q(b) :- M(0, b), N(b, 'x')",
    "Q(b) :- M(-3, b), N(b, c)",
    "Q(a) :- M(a, 1), N(1, 'y')",
    "Q() :- M(0, 1)",
    'Q(a, b) :- M(a, b), M(0, b), N(b, "x")',
    "Q(c) :- M(7, b), N(b, c)",  # selects nothing
]


@pytest.mark.parametrize("backend", ["driver", "tasks", "spark"])
@pytest.mark.parametrize("rule", RULES)
def test_every_backend_matches_reference(spark, rule, backend):
    want = reference_solve(rule, "real", {"M": M, "N": N})
    Mf, Nf = m_n()
    q = query(rule)
    needed = q.rule.relations
    local = {k: v for k, v in {"M": Mf, "N": Nf}.items() if k in needed}
    assert q.solve(backend=backend, **local).to_dict() == want
    if backend == "spark":
        in_spark = {k: Factor(v.df, name=k) for k, v in local.items()}  # selected by a filter
        assert q.solve(backend=backend, **in_spark).to_dict() == want


def test_repeated_variable_and_constant(spark):
    E = {(0, 0, 1): 1.0, (1, 1, 1): 2.0, (0, 1, 1): 4.0, (2, 2, 0): 8.0}
    want = reference_solve("Q(a) :- E(a, a, 1)", "real", {"E": E})
    assert want == {(0,): 1.0, (1,): 2.0}
    Ef = Factor.from_dict(E, vars=("x", "y", "z"), semiring="real")
    for f in (Ef, Factor(Ef.df)):
        assert query("Q(a) :- E(a, a, 1)").solve(E=f).to_dict() == want


def test_selection_is_pushed_into_the_scan(spark):
    Mf, Nf = m_n()
    q = query("Q(b) :- M(0, b), N(b, 'x')")
    for m, n in [(Mf, Nf), (Factor(Mf.df, name="M"), Factor(Nf.df, name="N"))]:
        text = q.explain(M=m, N=n, backend="spark")
        assert "  M(0, b): 2 rows; distinct b=2" in text  # M has 5 rows
        assert "  N(b, 'x'): 2 rows; distinct b=2" in text
        assert "join     M(0, b) ⋈ N(b, 'x')" in text
        plan = q.plan(M=m, N=n)
        assert [a.rows for a in plan.atoms] == [2.0, 2.0]


@pytest.mark.parametrize("spark_side", [False, True])
def test_constant_of_another_type_is_refused(spark, spark_side):
    Mf, Nf = m_n()
    if spark_side:
        Mf, Nf = Factor(Mf.df, name="M"), Factor(Nf.df, name="N")
    with pytest.raises(
        ValueError,
        match="atom M\\('0', b\\) of .*: the constant '0' is a string, but column 0 \\('a'\\) "
        "of relation 'M' holds bigint keys; keys are never cast \\(the integer constant is "
        "written 0\\)",
    ):
        query("Q(b) :- M('0', b)").solve(M=Mf)
    with pytest.raises(
        ValueError,
        match="atom N\\(b, 1\\) of .*: the constant 1 is an integer, but column 1 \\('c'\\) of "
        "relation 'N' holds string keys.*written '1'",
    ):
        query("Q(b) :- N(b, 1)").solve(N=Nf)
    D = Factor.from_dict({(0.5, 1): 1.0}, vars=("x", "y"), semiring="real")
    with pytest.raises(ValueError, match="column 0 \\('x'\\) of relation 'D' holds double"):
        query("Q(y) :- D(0, y)").solve(D=D)


def test_empty_relation_takes_any_constant(spark):
    import numpy as np

    from faq.kernel import Table

    empty = Factor.from_table(Table(("a", "b"), (np.empty(0, np.int64),) * 2, None), "real")
    assert query("Q(b) :- M('x', b)").solve(M=empty).to_dict() == {}


def test_witnesses_and_aggregates(spark):
    Mf, Nf = m_n()
    rule = "Q(b) :- M(a, b), N(b, 'x')"
    w = query(rule, semiring="max-product").solve(M=Mf, N=Nf, witness=True)
    assert w.to_dict() == {(1,): 5.0, (2,): 110.0}
    assert w.witnesses() == {(1,): {"a": 1}, (2,): {"a": -3}}
    rule = "Q(a) :- M(a, b), N(b, c), N(b, 'x')"
    rels = {"M": M, "N": N}
    for backend in ("driver", "spark"):
        got = query(rule, aggregates={"b": "max"}).solve(M=Mf, N=Nf, backend=backend)
        assert got.to_dict() == reference_solve(rule, "real", rels, {"b": "max"})


def test_bayesian_network_evidence(spark):
    """P(b | o = 1) in a chain a -> b -> o, against the enumeration by hand."""
    prior = {0: 0.3, 1: 0.7}
    cond = {(0, 0): 0.9, (0, 1): 0.1, (1, 0): 0.2, (1, 1): 0.8}
    obs = {(0, 0): 0.6, (0, 1): 0.4, (1, 0): 0.25, (1, 1): 0.75}
    P = Factor.from_dict({(a,): p for a, p in prior.items()}, vars=("a",), semiring="real")
    C = Factor.from_dict(cond, vars=("a", "b"), semiring="real")
    Obs = Factor.from_dict(obs, vars=("b", "o"), semiring="real")
    joint = query("Q(b) :- P(a), C(a, b), Obs(b, 1)").solve(P=P, C=C, Obs=Obs).to_dict()
    by_hand = {b: sum(prior[a] * cond[a, b] * obs[b, 1] for a in prior) for b in (0, 1)}
    assert joint == pytest.approx({(b,): p for b, p in by_hand.items()})


# -- incremental views -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sr", "state"),
    [
        ("integer", "driver"),
        ("integer", "spark"),
        ("counting", "spark"),
        ("min-plus", "driver"),
        ("boolean", "driver"),
    ],
)
def test_view_selects_changes(spark, sr, state):
    q = query("Q(b) :- M(0, b), N(b, 'x'), M(b, c)", semiring=sr)
    one = semirings.get(sr).one
    m = {(0, 1): one, (0, 2): one, (1, 1): one, (1, 3): one, (2, 0): one}
    n = {(1, "x"): one, (2, "x"): one, (3, "y"): one}
    view = IncrementalView(
        q,
        state=state,
        M=spark.createDataFrame(list(m), ["a", "b"]),
        N=spark.createDataFrame(list(n), ["b", "c"]),
    )
    assert view.result().to_dict() == reference_solve(q.rule, sr, {"M": m, "N": n})
    retract = sr in ("integer", "counting") or state == "driver"
    dm = [(0, 3, 1), (3, 5, 1), (4, 4, 1)] + ([(0, 1, -1)] if retract else [])
    view.step(M=spark.createDataFrame(dm, ["a", "b", "_weight"]))
    for a, b, w in dm:
        if w > 0:
            m[a, b] = one
        else:
            del m[a, b]
    dn = [(3, "x", 1)] + ([(2, "x", -1)] if retract else [])
    view.step(N=spark.createDataFrame(dn, ["b", "c", "_weight"]))
    for b, c, w in dn:
        if w > 0:
            n[b, c] = one
        else:
            del n[b, c]
    assert view.result().to_dict() == reference_solve(q.rule, sr, {"M": m, "N": n})
    assert view.relation("M").to_dict() == m  # the view keeps whole relations


@pytest.mark.parametrize("state", ["driver", "spark"])
def test_view_refuses_a_change_of_another_type(spark, state):
    q = query("Q(b) :- N(b, 'x')", semiring="counting")
    view = IncrementalView(q, state=state)
    with pytest.raises(ValueError, match="constant 'x' is a string.*holds bigint keys"):
        view.step(N=spark.createDataFrame([(2, 5)], ["b", "c"]))
    assert view.tick == 0 and view.result().to_dict() == {}
    view.step(N=spark.createDataFrame([(2, "x"), (3, "y")], ["b", "c"]))
    assert view.result().to_dict() == {(2,): 1}
    with pytest.raises(ValueError, match="delta of relation 'N'.*position 1"):
        view.step(N=spark.createDataFrame([(4, 5)], ["b", "c"]))  # the view's own check
    assert view.tick == 1 and view.result().to_dict() == {(2,): 1}


def test_view_of_an_empty_relation_takes_string_constants(spark):
    q = query("Q(b) :- N(b, 'x')", semiring="counting")
    view = IncrementalView(q, state="driver")
    view.step(N=spark.createDataFrame([(2, "x"), (3, "y")], ["b", "c"]))
    assert view.result().to_dict() == {(2,): 1}


# -- random rules with constants against the oracle ------------------------------------------------
def with_constants(rule: Rule, rng: random.Random, p: float) -> Rule:
    """``rule`` with some argument positions of its atoms replaced by constants (never a
    head variable's last occurrence, so the head stays in the body)."""
    head = set(rule.head)
    atoms = []
    left = {v: sum(a.vars.count(v) for a in rule.atoms) for v in rule.variables}
    for a in rule.atoms:
        vars_, consts = [], []
        for pos, v in enumerate(a.vars):
            if rng.random() < p and not (v in head and left[v] == 1):
                consts.append((pos, rng.randrange(5)))  # 4 is outside the domain 0..3
                left[v] -= 1
            else:
                vars_.append(v)
        atoms.append(Atom(a.relation, tuple(vars_), tuple(consts)))
    return Rule(rule.name, rule.head, tuple(atoms))


EXAMPLES = {"driver": 8, "spark": 3}


@pytest.mark.parametrize("backend", list(EXAMPLES))
@pytest.mark.parametrize("S", [semirings.REAL, semirings.COUNTING, semirings.MIN_PLUS])
def test_random_rules_with_constants(spark, S, backend):
    scale = settings().max_examples / 10

    @settings(max_examples=max(1, round(EXAMPLES[backend] * scale)))
    @given(st.integers(0, 10**6), st.integers(0, 10**6), st.floats(0.2, 0.6))
    def check(rule_seed, data_seed, p):
        rule = with_constants(random_rule(rule_seed), random.Random(rule_seed), p)
        rule = parse_rule(str(rule))  # through the parser: str round-trips
        rels = random_relations(rule, S, data_seed, domain=4, density=0.6)
        want = reference_solve(rule, S, rels)
        got = query(str(rule), semiring=S).solve(backend=backend, **factors_from(rels, S))
        assert_same(got.to_dict(), want, S, f"{rule} backend={backend}")

    check()


# -- the command line ------------------------------------------------------------------------------
def test_cli_maps_constants_like_string_ids(spark, capsys):
    """Files with string ids are read as integer codes: a constant is mapped the same way
    (before, E(0, b) silently selected the node whose code is 0, alice)."""
    from faq.cli import main

    named = "tests/data/named.txt"
    for rule, rows in [
        ("Q(b) :- E('alice', b)", ["bob\t1"]),
        ('Q(b) :- E("dave", b)', ["bob\t1"]),
        ("Q(b) :- E(0, b)", []),  # no id "0": no rows (the note says so on stderr)
    ]:
        assert main(["query", rule, "--directed", "--relation", f"E={named}"]) == 0
        out, err = capsys.readouterr()
        assert out.splitlines() == ["b\tvalue", *rows]
        assert ("# no rows" in err) == (not rows)
    karate = ["--relation", "E=tests/data/karate.txt", "--limit", "2"]
    assert main(["query", "Q(b) :- E(1, b)", "--undirected", *karate]) == 0  # rows as written: 2 1
    assert capsys.readouterr().out.splitlines()[:3] == ["b\tvalue", "2\t1", "3\t1"]
