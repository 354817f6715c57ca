"""solve(witness=True): an assignment of the bound variables attaining each answer."""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import semirings
from faq import Factor, query
from faq.reference import reference_solve
from faq.witness import Witnesses

BACKENDS = ["driver", "spark"]


def _example():
    """examples/viterbi.py as a module (its numpy Viterbi is the oracle here too)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "viterbi.py"
    spec = importlib.util.spec_from_file_location("viterbi_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _numpy_viterbi(pi, trans, emit, obs):
    """Most likely state path of an HMM (plain numpy Viterbi, max-product)."""
    return _example().numpy_viterbi(pi, trans, emit, obs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_viterbi_matches_numpy(spark, backend):
    rng = np.random.default_rng(7)
    n_states, n_obs = 4, 3
    T = 6 if backend == "driver" else 3  # Spark: a few jobs per step, keep the chain short
    pi = rng.dirichlet(np.ones(n_states))
    trans = rng.dirichlet(np.ones(n_states), size=n_states)
    emit = rng.dirichlet(np.ones(n_obs), size=n_states)
    obs = rng.integers(0, n_obs, size=T)
    rels = {"I": Factor.from_numpy(pi * emit[:, obs[0]], vars=("x0",), semiring="max-product")}
    atoms = ["I(x0)"]
    for t in range(1, T):
        m = trans * emit[:, obs[t]][None, :]
        rels[f"M{t}"] = Factor.from_numpy(m, vars=(f"x{t - 1}", f"x{t}"), semiring="max-product")
        atoms.append(f"M{t}(x{t - 1}, x{t})")
    q = query(f"Q() :- {', '.join(atoms)}", semiring="max-product")
    out = q.solve(witness=True, backend=backend, **rels)
    path, best = _numpy_viterbi(pi, trans, emit, obs)
    assert out.scalar() == pytest.approx(best)
    w = out.witnesses()[()]
    assert [w[f"x{t}"] for t in range(T)] == path
    assert out.to_dict() == q.solve(backend=backend, **rels).to_dict()


@pytest.mark.parametrize("backend", BACKENDS)
def test_shortest_path_intermediates(spark, backend):
    from scipy.sparse.csgraph import shortest_path

    rng = np.random.default_rng(3)
    n = 5
    W = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            if i != j and rng.random() < 0.5:
                W[i, j] = float(rng.integers(1, 10))
    entries = {(i, j): float(W[i, j]) for i in range(n) for j in range(n) if np.isfinite(W[i, j])}
    entries.update({(i, i): 0.0 for i in range(n)})  # stay put: paths of at most 4 hops
    E = Factor.from_dict(entries, vars=("u", "v"), semiring="min-plus")
    q = query("Q(s, t) :- E(s, a), E(a, b), E(b, c), E(c, t)", semiring="min-plus")
    out = q.solve(E=E, witness=True, backend=backend)
    dist = shortest_path(np.where(np.isfinite(W), W, 0), directed=True)
    wit = out.witnesses()
    got = out.to_dict()
    reachable = {(s, t) for s in range(n) for t in range(n) if np.isfinite(dist[s, t])}
    assert set(got) == reachable
    for (s, t), length in got.items():
        assert length == pytest.approx(dist[s, t])
        w = wit[(s, t)]
        path = [s, w["a"], w["b"], w["c"], t]
        assert sum(
            entries[(x, y)] for x, y in zip(path[:-1], path[1:], strict=True)
        ) == pytest.approx(length)


ATOMS = st.lists(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=2, unique=True),
    min_size=1,
    max_size=4,
)


@given(
    atoms=ATOMS,
    head_bits=st.integers(0, 15),
    seed=st.integers(0, 2**16),
)
def test_most_likely_assignment_matches_brute_force(spark, atoms, head_bits, seed):
    import itertools

    rng = np.random.default_rng(seed)
    dom = 3
    allv = sorted({v for a in atoms for v in a})
    head = tuple(v for i, v in enumerate(allv) if head_bits >> i & 1)
    bound = [v for v in allv if v not in head]
    rels, tables = {}, []
    for k, vs in enumerate(atoms):
        entries = {
            key: float(rng.integers(1, 6)) / 4
            for key in itertools.product(range(dom), repeat=len(vs))
            if rng.random() < 0.7
        }
        rels[f"R{k}"] = Factor.from_dict(entries, vars=tuple(vs), semiring="max-product")
        tables.append((vs, entries))
    body = ", ".join(f"R{k}({', '.join(vs)})" for k, vs in enumerate(atoms))
    q = query(f"Q({', '.join(head)}) :- {body}", semiring="max-product")
    out = q.solve(witness=True, backend="driver", **rels)

    def weight(assign):
        p = 1.0
        for vs, entries in tables:
            key = tuple(assign[v] for v in vs)
            if key not in entries:
                return 0.0
            p *= entries[key]
        return p

    brute: dict[tuple, float] = {}
    for vals in itertools.product(range(dom), repeat=len(allv)):
        a = dict(zip(allv, vals, strict=True))
        wv = weight(a)
        if wv > 0:
            key = tuple(a[v] for v in head)
            brute[key] = max(brute.get(key, 0.0), wv)
    got = out.to_dict()
    assert set(got) == set(brute)
    wit = out.witnesses()
    for key, value in got.items():
        assert value == pytest.approx(brute[key])
        assign = {**dict(zip(head, key, strict=True)), **wit[key]}
        assert set(wit[key]) == set(bound)
        assert weight(assign) == pytest.approx(value)  # every tuple exists, product attains


def test_user_semiring_with_max_and_min_plus_boolean(spark):
    bottleneck = semirings.Semiring(
        name="bottleneck-w", zero=-math.inf, one=math.inf, add=max, mul=min
    )
    A = Factor.from_dict({(0, 0): 3.0, (0, 1): 5.0}, vars=("i", "j"), semiring=bottleneck)
    B = Factor.from_dict({(0, 0): 4.0, (1, 0): 2.0}, vars=("j", "k"), semiring=bottleneck)
    out = query("Q(i, k) :- A(i, j), B(j, k)", semiring=bottleneck).solve(
        A=A, B=B, witness=True, backend="driver"
    )
    assert out.to_dict() == {(0, 0): 3.0}
    assert out.witnesses() == {(0, 0): {"j": 0}}
    E = Factor.from_dict(
        {(0, 1): True, (1, 2): True, (0, 3): True}, vars=("u", "v"), semiring="boolean"
    )
    b = query("Q(x, z) :- E(x, y), E(y, z)", semiring="boolean").solve(E=E, witness=True)
    assert b.witnesses() == {(0, 2): {"y": 1}}


@pytest.mark.parametrize("name", ["real", "counting", "log"])
def test_refuses_non_selective_semiring(spark, name):
    value = 1 if name == "counting" else 1.0
    A = Factor.from_dict({(0, 0): value}, vars=("i", "j"), semiring=name)
    q = query("Q(i) :- A(i, j)", semiring=name)
    with pytest.raises(ValueError, match="selective"):
        q.solve(A=A, witness=True)
    with pytest.raises(ValueError, match="witness=True"):
        q.solve(A=A).witnesses()


def test_viterbi_example_runs(spark, capsys):
    _example().main(["--states", "5", "--steps", "12", "--seed", "1"])
    assert "matches numpy Viterbi: True" in capsys.readouterr().out


def test_witness_with_per_variable_aggregates_is_refused():
    q = query("Q(x) :- A(x, y), B(y, z)", semiring="max-product", aggregates={"y": "sum"})
    A = Factor.from_dict({(0, 1): 0.5}, ("x", "y"), "max-product")
    B = Factor.from_dict({(1, 2): 0.5}, ("y", "z"), "max-product")
    with pytest.raises(ValueError, match="per-variable aggregates"):
        q.solve(witness=True, A=A, B=B)


# -- values compared as the semiring's own values (issue 19, item 4) ---------------------
ALL_BACKENDS = ["driver", "tasks", "spark"]


def _big_max_plus(add=max, name="big-max-plus", **kw) -> semirings.Semiring:
    """⊕ = max (or min), ⊗ = + over Python ints."""
    return semirings.Semiring(name=name, zero=-(2**62), one=0, add=add, mul=operator.add, **kw)


def _check_witnesses(out, rule_head, tables, S, reference):
    """The answer is the reference's and each witness's ⊗-product equals its key's answer."""
    got = out.to_dict()
    assert got == reference
    wit = out.witnesses()
    assert set(wit) == set(got)
    for key, value in got.items():
        assign = {**dict(zip(rule_head, key, strict=True)), **wit[key]}
        product = S.prod(entries[tuple(assign[v] for v in vs)] for vs, entries in tables)
        assert product == value


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_big_int_witness_picks_the_exact_best_path(spark, backend):
    # Paths via j=0 worth 2**60 and via j=1 worth 2**60 + 1: equal as floats.
    S = _big_max_plus()
    a = {(0, 0): 0, (0, 1): 0}
    b = {(0, 0): 2**60, (1, 0): 2**60 + 1}
    rule = "Q(i, k) :- A(i, j), B(j, k)"
    out = query(rule, semiring=S).solve(
        A=Factor.from_dict(a, ("i", "j"), S),
        B=Factor.from_dict(b, ("j", "k"), S),
        witness=True,
        backend=backend,
    )
    assert out.to_dict() == {(0, 0): 2**60 + 1} == reference_solve(rule, S, {"A": a, "B": b})
    assert out.witnesses() == {(0, 0): {"j": 1}}
    row = out.witness_frame.iloc[0]
    assert a[(0, row["j"])] + b[(row["j"], 0)] == out.to_dict()[(0, 0)]


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_string_semiring_witness(spark, backend):
    # Lexicographic max with concatenation: values no float can stand for.
    S = semirings.Semiring(name="lex-max-concat", zero="", one="", add=max, mul=operator.add)
    a = {(0, 0): "ab", (0, 1): "a", (0, 2): "aa"}
    b = {(0, 0): "c", (1, 0): "bc", (2, 0): "z", (0, 1): "x", (1, 1): "zz", (2, 1): "y"}
    rule = "Q(i, k) :- A(i, j), B(j, k)"
    out = query(rule, semiring=S).solve(
        A=Factor.from_dict(a, ("i", "j"), S),
        B=Factor.from_dict(b, ("j", "k"), S),
        witness=True,
        backend=backend,
    )
    reference = reference_solve(rule, S, {"A": a, "B": b})
    assert reference == {(0, 0): "abc", (0, 1): "azz"}
    _check_witnesses(out, ("i", "k"), [(("i", "j"), a), (("j", "k"), b)], S, reference)
    assert out.witnesses() == {(0, 0): {"j": 0}, (0, 1): {"j": 1}}  # "abc" twice: smaller j


def test_witnesses_are_built_into_the_result_and_never_assigned():
    """A result of ``witness=True`` is built with its witnesses (``faq.witness.Witnesses``,
    from the back-pointers its run recorded): nothing sets them on a factor afterwards,
    and a factor's witnesses cannot be replaced."""
    A = Factor.from_dict({(0, 0): 1.0, (0, 1): 3.0, (1, 0): 2.0}, ("i", "j"), "max-plus")
    q = query("Q(i) :- A(i, j)", semiring="max-plus")
    out = q.solve(A=A, witness=True, backend="driver")
    assert out.witnesses() == {(0,): {"j": 1}, (1,): {"j": 0}}
    plain = q.solve(A=A, backend="driver")
    assert plain.witness_frame is None
    with pytest.raises(AttributeError):
        plain.witness_frame = out.witness_frame
    with pytest.raises(ValueError, match="no witnesses"):
        plain.witnesses()
    rebuilt = Factor.from_source(plain.source, plain.name, witnesses=Witnesses(out.witness_frame))
    assert rebuilt.witnesses() == out.witnesses() and rebuilt.to_dict() == out.to_dict()
    with pytest.raises(ValueError, match="no witness paths"):
        rebuilt.path((0,))


def test_tuple_semiring_witness_beyond_64_bits():
    # Pairs (weight, label), compared lexicographically; weights past 2**64.  Driver only:
    # without a spark_type, the "tasks" and "spark" backends refuse such a semiring.
    zero = (-(2**100), "")

    def mul(x, y):
        return zero if zero in (x, y) else (x[0] + y[0], x[1] + y[1])

    S = semirings.Semiring(
        name="lex-pair", zero=zero, one=(0, ""), add=max, mul=mul,
        contains=lambda x: isinstance(x, tuple),
    )  # fmt: skip
    a = {(0, 0): (2**70, "a"), (0, 1): (2**70, "b")}
    b = {(0, 0): (2**70 + 1, "z"), (1, 0): (2**70 + 1, "a"), (0, 1): (5, "")}
    rule = "Q(i, k) :- A(i, j), B(j, k)"
    out = query(rule, semiring=S).solve(
        A=Factor.from_dict(a, ("i", "j"), S),
        B=Factor.from_dict(b, ("j", "k"), S),
        witness=True,
        backend="driver",
    )
    reference = reference_solve(rule, S, {"A": a, "B": b})
    _check_witnesses(out, ("i", "k"), [(("i", "j"), a), (("j", "k"), b)], S, reference)
    assert out.witnesses()[(0, 0)] == {"j": 1}  # (2**71 + 1, "ba") beats (2**71 + 1, "az")


@given(
    atoms=ATOMS,
    head_bits=st.integers(0, 15),
    use_max=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_big_int_witnesses_attain_the_answer(spark, atoms, head_bits, use_max, seed):
    # Weights 2**80 + 0..3: every product is the same float, only exact ints tell them apart.
    rng = np.random.default_rng(seed)
    S = _big_max_plus(
        max if use_max else min,
        name="big-max-plus" if use_max else "big-min-plus",
        contains=lambda x: isinstance(x, int) and not isinstance(x, bool),
    )
    allv = sorted({v for a in atoms for v in a})
    head = tuple(v for i, v in enumerate(allv) if head_bits >> i & 1)
    rels, tables, dicts = {}, [], {}
    for k, vs in enumerate(atoms):
        entries = {
            key: 2**80 + int(rng.integers(0, 4))
            for key in itertools.product(range(3), repeat=len(vs))
            if rng.random() < 0.7
        }
        rels[f"R{k}"] = Factor.from_dict(entries, vars=tuple(vs), semiring=S)
        tables.append((tuple(vs), entries))
        dicts[f"R{k}"] = entries
    rule = f"Q({', '.join(head)}) :- " + ", ".join(
        f"R{k}({', '.join(vs)})" for k, vs in enumerate(atoms)
    )
    out = query(rule, semiring=S).solve(witness=True, backend="driver", **rels)
    reference = reference_solve(rule, S, dicts)
    _check_witnesses(out, head, tables, S, reference)
    bound = set(allv) - set(head)
    assert all(set(w) == bound for w in out.witnesses().values())


class _Opaque:
    """A value whose ``==`` never holds (not even with itself)."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __lt__(self, other: _Opaque) -> bool:
        return self.x < other.x

    def __gt__(self, other: _Opaque) -> bool:
        return self.x > other.x

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


def test_witness_refuses_values_that_never_equal_the_sum():
    S = semirings.Semiring(
        name="opaque", zero=_Opaque(-(2**62)), one=_Opaque(0), add=max,
        mul=lambda x, y: _Opaque(x.x + y.x),
    )  # fmt: skip
    A = Factor.from_dict({(0, 0): _Opaque(1), (0, 1): _Opaque(2)}, ("i", "j"), S)
    with pytest.raises(ValueError, match=r"equals \(==\) the ⊕"):
        query("Q(i) :- A(i, j)", semiring=S).solve(A=A, witness=True, backend="driver")


@pytest.mark.parametrize("backend", ["driver", "tasks", "spark"])
def test_struct_valued_user_semiring_on_every_backend(spark, backend):
    # Regression: with spark_type="struct<...>" the Spark paths built a literal of the
    # semiring's one/zero (a tuple), which Spark refused with a raw LITERAL_TYPE error,
    # and Spark results came back as dicts where the driver gives tuples.
    zero = (-math.inf, "")

    def mul(x, y):  # commutative: the labels' letters, sorted
        return zero if zero in (x, y) else (x[0] + y[0], "".join(sorted(x[1] + y[1])))

    S = semirings.Semiring(
        name="pair", zero=zero, one=(0.0, ""), add=max, mul=mul,
        contains=lambda x: isinstance(x, tuple), spark_type="struct<w:double,s:string>",
    )  # fmt: skip
    a = {(0, 0): (1.0, "a"), (0, 1): (2.0, "b"), (1, 1): (0.5, "c")}
    b = {(0,): (5.0, "d"), (1,): (1.0, "e")}
    rule = "Q(i) :- A(i, j), B(j)"
    reference = reference_solve(rule, S, {"A": a, "B": b})
    out = query(rule, semiring=S).solve(
        A=Factor.from_dict(a, ("i", "j"), S),
        B=Factor.from_dict(b, ("j",), S),
        witness=True,
        backend=backend,
    )
    assert out.to_dict() == reference == {(0,): (6.0, "ad"), (1,): (1.5, "ce")}
    assert out.witnesses() == {(0,): {"j": 0}, (1,): {"j": 1}}
