"""Semirings declare what the engine asks of them (completion, presence, selective, tight),
and the engine reads the declarations, never a semiring's name or identity.

The built-ins are copied here under other names, each built only from the public
constructor (its functions as lambdas, so nothing can be recognised by identity): a
min-plus (``shortest``), a counting (``naturals``) and a boolean (``present``).  Each copy
runs through the property machinery (batch solve against ``reference_solve``, views under
random ticks with ``assert_incremental``, fixpoints against ``reference_fixpoint``) and takes
the same path as the built-in it copies.  The caches that were keyed by ``id()`` are
checked at the end.  Everything runs in the driver: no Spark session.
"""

from __future__ import annotations

import gc
import math
import operator
import pickle
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import Factor, query, reference_solve
from faq.kernel import Table
from faq.kernel.stats import degrees, pair_join_size
from faq.plan import DivergenceError
from faq.reference import reference_fixpoint
from faq.testing import random_relations, random_rule
from incremental import IncrementalView
from incremental.regimes import regime
from incremental.testing import assert_incremental, delta_frame, ticks
from semirings import NumpyOps, Semiring
from semirings import spark as spark_ops
from semirings.aggregates import COUNTING_MAX
from tests.helpers import assert_same, factors_from

INF = math.inf

# -- the new semirings: one place, public declarations only ------------------------------------
SHORTEST = Semiring(
    name="shortest",
    zero=INF,
    one=0.0,
    add=lambda a, b: a if a <= b else b,
    mul=lambda a, b: a + b,
    contains=lambda x: isinstance(x, float) and not math.isnan(x) and x != -INF,
    numpy=NumpyOps(
        np.float64,
        mul=np.add,
        reduceat=lambda v, starts: np.minimum.reduceat(np.asarray(v, np.float64), starts),
        ones=lambda counts: np.zeros(len(counts)),
        nonzero=lambda v: np.asarray(v) != INF,
        valid=lambda v: ~np.isnan(v) & (v != -INF),
    ),
    idempotent=True,
    selective="min",
    tight=True,
    domain="floats other than -inf (+inf is zero)",
)
"""min-plus again: ⊕ picks the smaller, ⊗ (+) is strictly monotone."""

NATURALS = Semiring(
    name="naturals",
    zero=0,
    one=1,
    add=lambda a, b: a + b,
    mul=lambda a, b: a * b,
    contains=lambda x: type(x) is int and 0 <= x < 2**63,
    completion=semirings.INTEGER,
)
"""counting again: ℕ in its ring completion ℤ."""

PRESENT = Semiring(
    name="present",
    zero=False,
    one=True,
    add=lambda a, b: a or b,
    mul=lambda a, b: a and b,
    contains=lambda x: isinstance(x, bool),
    idempotent=True,
    presence=True,
    selective="max",
    tight=True,
)
"""boolean again: values say present or absent."""

COPIES = {
    "shortest": (SHORTEST, semirings.MIN_PLUS),
    "naturals": (NATURALS, semirings.COUNTING),
    "present": (PRESENT, semirings.BOOLEAN),
}
SSSP = "D(x) :- S(x)\nD(y) :- D(x), E(x, y)"
TWO_HOPS = "Q(a, c) :- E(a, b), E(b, c)"


def declared(S: Semiring) -> tuple:
    return (
        S.selective,
        S.tight,
        S.presence,
        None if S.completion is None else S.completion.name,
        S.idempotent,
    )


# -- the declarations ----------------------------------------------------------------------------
def test_every_builtin_declares_what_the_engine_asks():
    got = {S.name: declared(S) for S in (*semirings.BUILTINS, COUNTING_MAX)}
    assert got == {
        "counting": (None, False, False, "integer", False),
        "integer": (None, False, False, None, False),
        "real": (None, False, False, None, False),
        "boolean": ("max", True, True, None, True),
        "max-product": ("max", True, False, None, True),
        "min-plus": ("min", True, False, None, True),
        "max-plus": ("max", True, False, None, True),
        "log": (None, False, False, None, False),
        "max-times": ("max", True, False, None, True),
    }


@pytest.mark.parametrize("name", list(COPIES))
def test_each_copy_declares_as_its_builtin(name):
    copy, builtin = COPIES[name]
    assert declared(copy) == declared(builtin)


def test_selective_is_read_off_a_builtin_max_or_min_when_not_declared():
    def make(add, zero=0.0, one=1.0):
        return Semiring(name="s", zero=zero, one=one, add=add, mul=operator.mul)

    assert make(max).selective == "max" and make(min).selective == "min"
    assert make(operator.or_, False, True).selective == "max"
    assert make(operator.and_, True, False).selective == "min"
    assert make(operator.or_, 0, 1).selective is None  # bitwise or of integers: not selective
    assert make(lambda a, b: max(a, b)).selective is None  # a function: only if declared
    assert not make(max).tight and not make(max).idempotent  # never more than declared


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"selective": "largest"}, ValueError, "selective must be 'max', 'min' or None"),
        ({"add": operator.add, "tight": True}, ValueError, "tight=True needs a selective"),
        ({"tight": 1}, TypeError, "tight must be True or False"),
        ({"presence": "yes"}, TypeError, "presence must be True or False"),
        ({"completion": semirings.COUNTING}, ValueError, "'counting' is not a ring"),
        ({"neg": operator.neg, "completion": semirings.INTEGER}, ValueError, "its own completion"),
        ({"presence": True, "completion": semirings.INTEGER}, ValueError, "not both"),
    ],
)
def test_declarations_are_checked(changes, error, match):
    given = {"name": "s", "zero": 0.0, "one": 1.0, "add": max, "mul": operator.mul, **changes}
    with pytest.raises(error, match=match):
        Semiring(**given)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"completion": semirings.REAL}, "completion only when it holds 64-bit integers"),
        ({"presence": True, "zero": 0, "one": 1}, "presence .* only for the values False"),
    ],
)
def test_a_view_refuses_a_declaration_it_cannot_keep(changes, match):
    given = {"name": "s", "zero": 0.0, "one": 1.0, "add": operator.add, "mul": operator.mul}
    S = Semiring(**{**given, **changes})
    with pytest.raises(ValueError, match=match):
        IncrementalView(query(TWO_HOPS, semiring=S))


def test_check_laws_checks_what_a_semiring_declares():
    semirings.check_laws(SHORTEST, [-1.0, 0.0, 2.0, 3.5])
    semirings.check_laws(NATURALS, [0, 1, 2, 5])
    semirings.check_laws(PRESENT, [False, True])
    wrong = {
        "tight: ⊗ is not strictly monotone": Semiring(
            "widest", -INF, INF, max, min, idempotent=True, tight=True
        ),  # min(2, 1) = min(1, 1): a wider path is not wider through a narrow edge
        r"⊕ is not selective \(max\)": Semiring(
            "shortest", INF, 0.0, min, operator.add, selective="max"
        ),
        "completion 'integer': its ⊕ differs": Semiring(
            "naturals", 0, 1, max, operator.mul, completion=semirings.INTEGER
        ),  # max-times is a semiring, but not the one ℤ's + extends
        "presence: 1 ⊕ 1 is not 1": Semiring(
            "present", 0, 1, operator.add, operator.mul, presence=True
        ),
    }
    values = {"widest": [1.0, 2.0], "shortest": [1.0, 2.0], "naturals": [0, 2], "present": [0]}
    for message, S in wrong.items():
        with pytest.raises(semirings.LawError, match=message):
            semirings.check_laws(S, values[S.name])


# -- the copies take the built-ins' paths --------------------------------------------------------
@pytest.mark.parametrize("name", ["naturals", "present"])
def test_a_copy_is_kept_by_a_view_as_its_builtin_is(name):
    copy, builtin = COPIES[name]
    assert regime(copy) == regime(builtin) == {"naturals": "counting", "present": "boolean"}[name]
    assert regime(Semiring("undeclared", copy.zero, copy.one, copy.add, copy.mul)) == "general"


def _tick_of_sssp(S: Semiring) -> tuple[dict, tuple]:
    """A shortest-path view after deleting edge (0, 1): the result and the delta terms the
    tick ran.  Node 2 keeps its distance 1 (edge 0 -> 2); its derivation through node 1
    (1 + 5) never attained it, so a tight semiring re-derives only node 1."""
    E = [((0, 1), 1.0, 1), ((0, 2), 1.0, 1), ((1, 2), 5.0, 1), ((2, 3), 1.0, 1), ((3, 4), 1.0, 1)]
    p = query(SSSP, semiring=S)
    view = IncrementalView(p, S=delta_frame([((0,), 0.0, 1)], S, 1), E=delta_frame(E, S, 2))
    view.step(E=delta_frame([((0, 1), 1.0, -1)], S, 2))
    return view.result().to_dict(), view.last_step.terms


def test_a_program_view_of_the_copy_deletes_only_tight_derivations_as_min_plus_does():
    loose = Semiring(
        "shortest-loose", INF, 0.0, SHORTEST.add, SHORTEST.mul, idempotent=True, selective="min"
    )
    with faq.settings(path_walks=False):  # the built-in's delta queries, not its walks
        want, builtin_terms = _tick_of_sssp(semirings.MIN_PLUS)
    got, terms = _tick_of_sssp(SHORTEST)  # a user semiring declares no LibraryOps: no walks
    assert want == got == {(0,): 0.0, (2,): 1.0, (3,): 2.0, (4,): 3.0}
    assert terms == builtin_terms
    assert _tick_of_sssp(semirings.MIN_PLUS)[0] == want  # by the compiled walks
    also, loose_terms = _tick_of_sssp(loose)  # same answer, more work: 2, 3, 4 re-derived
    assert also == want and len(loose_terms) > len(terms)


def test_the_copy_has_the_witnesses_of_min_plus():
    E = {(0, 1): 2.0, (0, 2): 1.0, (1, 3): 1.0, (2, 3): 2.0, (2, 4): 5.0}
    got = {}
    for S in (semirings.MIN_PLUS, SHORTEST):
        edges = Factor.from_dict(E, ("a", "b"), S)
        out = query("Q(a, c) :- E(a, b), E(b, c)", semiring=S).solve(E=edges, witness=True)
        got[S.name] = (out.to_dict(), out.witnesses())
    assert got["shortest"] == got["min-plus"]
    assert got["shortest"][1][(0, 3)] == {"b": 1}  # 2 + 1 beats 1 + 2 by the tie-break
    with pytest.raises(ValueError, match="needs a selective ⊕.*does not declare one"):
        undeclared = Semiring("s", INF, 0.0, SHORTEST.add, SHORTEST.mul)
        query(TWO_HOPS, semiring=undeclared).solve(
            E=Factor.from_dict(E, ("a", "b"), undeclared), witness=True
        )


# -- the property machinery on the copies -----------------------------------------------
@settings(max_examples=10)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(list(COPIES)))
def test_batch_solves_of_a_copy_match_the_reference_and_its_builtin(rule_seed, data_seed, name):
    copy, builtin = COPIES[name]
    rule = random_rule(rule_seed)
    rels = random_relations(rule, builtin, data_seed, domain=3, density=0.6)
    want = reference_solve(rule, copy, rels)
    got = query(str(rule), semiring=copy).solve(**factors_from(rels, copy)).to_dict()
    assert_same(got, want, copy, str(rule))
    same = query(str(rule), semiring=builtin).solve(**factors_from(rels, builtin)).to_dict()
    assert_same(got, same, copy, f"{rule} against {builtin.name}")


@pytest.mark.parametrize("name", list(COPIES))
def test_views_of_a_copy_stay_equal_to_batch_and_the_reference(name):
    copy, _ = COPIES[name]
    q = query(TWO_HOPS, semiring=copy)

    @settings(max_examples=6)
    @given(ticks(q, keys=range(4), max_ticks=4, min_rows=2))
    def check(t):
        assert_incremental(q, t)

    check()


@pytest.mark.parametrize("name", ["shortest", "present"])
def test_program_views_of_a_copy_stay_equal_to_batch_and_the_reference(name):
    copy, _ = COPIES[name]
    p = query(SSSP, semiring=copy)
    values = st.sampled_from([0.0, 1.0, 2.5]) if copy is SHORTEST else None

    @settings(max_examples=6)
    @given(ticks(p, keys=range(5), max_ticks=4, min_ticks=2, min_rows=3, values=values))
    def check(t):
        assert_incremental(p, t)

    check()


@settings(max_examples=10)
@given(
    st.dictionaries(
        st.tuples(st.integers(0, 5), st.integers(0, 5)),
        st.sampled_from([0.0, 1.0, 2.0, 3.5]),
        max_size=14,
    )
)
def test_the_copy_solves_shortest_paths_as_the_reference_fixpoint(E):
    src = {(0,): 0.0}
    want = reference_fixpoint(SSSP, SHORTEST, {"S": src, "E": E})["D"]
    program = query(SSSP, semiring=SHORTEST)
    got = program.solve(
        S=Factor.from_dict(src, ("a",), SHORTEST), E=Factor.from_dict(E, ("a", "b"), SHORTEST)
    ).to_dict()
    assert got == want


def test_the_copy_refuses_a_negative_cycle_without_a_bound_as_min_plus_does():
    E = {(0, 1): 1.0, (1, 2): -3.0, (2, 1): 1.0}  # 1 -> 2 -> 1 costs -2
    for S in (semirings.MIN_PLUS, SHORTEST):
        program = query(SSSP, semiring=S)
        inputs = {
            "S": Factor.from_dict({(0,): 0.0}, ("a",), S),
            "E": Factor.from_dict(E, ("a", "b"), S),
        }
        with pytest.raises(DivergenceError, match="improves values each time around it"):
            program.solve(max_rounds=10**6, **inputs)


# -- a declaration changes what a durable view stores: the folder remembers it ---------
def test_a_folder_refuses_a_semiring_whose_declared_keeping_changed(tmp_path):
    plain = Semiring("nat", 0, 1, NATURALS.add, NATURALS.mul, contains=NATURALS.contains)
    q = query(TWO_HOPS, semiring=plain)
    IncrementalView(q, state_dir=tmp_path, E=delta_frame([((0, 1), 2, 1)], plain, 2)).close()
    counted = Semiring(
        "nat", 0, 1, NATURALS.add, NATURALS.mul, contains=NATURALS.contains,
        completion=semirings.INTEGER,
    )  # fmt: skip
    with pytest.raises(ValueError, match="kept as they are in the folder, completion integer"):
        IncrementalView(query(TWO_HOPS, semiring=counted), state_dir=tmp_path)
    again = IncrementalView(q, state_dir=tmp_path)  # the same declarations reopen
    assert again.relation("E").to_dict() == {(0, 1): 2}
    again.close()


# -- caches that were keyed by id() -----------------------------------------------------
def test_a_user_semirings_spark_ops_live_and_die_with_it():
    S = Semiring("udf-only", 0.0, 1.0, max, operator.mul)
    ops = spark_ops.ops(S)  # no session needed until a UDF is applied
    assert spark_ops.ops(S) is ops and ops.type == "double"
    other = Semiring("udf-only", 0, 1, max, operator.mul)
    assert spark_ops.ops(other).type == "bigint"  # its own, though named alike
    copy = pickle.loads(pickle.dumps(semirings.MIN_PLUS))
    assert copy is semirings.MIN_PLUS
    gone = weakref.ref(S)
    del S, ops
    gc.collect()
    assert gone() is None  # an id()-keyed cache of its ops kept it alive for ever


def test_degrees_are_those_of_the_table_asked_about():
    a = Table(("x",), (np.arange(3),))
    b = Table(("y",), (np.arange(5),))
    assert degrees(a, ())[1].tolist() == [3] and degrees(b, ())[1].tolist() == [5]
    assert pair_join_size(a, (), b, ()) == 15 and pair_join_size(b, (), b, ()) == 25


def test_degrees_are_remembered_while_their_columns_live_and_freed_with_them():
    col = np.arange(1000) % 7
    t = Table(("a",), (col,))
    values, counts = degrees(t, ("a",))
    assert degrees(t, ("a",))[1] is counts  # remembered: one pass per column
    assert counts.tolist() == [143] * 6 + [142] and values[0].tolist() == list(range(7))
    gone = weakref.ref(counts)
    del values, counts, t, col
    gc.collect()
    assert gone() is None
