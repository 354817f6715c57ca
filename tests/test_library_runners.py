"""The library runners (GraphBLAS, BLAS, the compiled dense loop) against the Generic Join kernel.

Oracle: :func:`faq.kernel.generic_join` on the same bag.  Every runner must return the
same table (the same rows in the same order, the same annotations: floats to a tight
tolerance, sums may be added in another order), drop the same zeros, ⊕-combine
repeated keys the same way and raise the same OverflowError, on random inputs of every
built-in semiring with repeated keys, string keys, spread-out integer keys, annotations
that cancel and empty factors.  A runner that cannot guarantee that declines
(:class:`Declined`) and :func:`faq.kernel.runners.run` runs the Generic Join kernel
instead; the tests check that it declines only where it must.  No Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import faq.kernel.table as tb
import semirings
from faq.kernel import Table, dense, generic_join, sparse
from faq.kernel import runners as kernel_runners
from faq.kernel.dense import semiring_matmul
from faq.kernel.library import Declined
from faq.kernel.runners import RUNNERS, Params
from faq.plan.runners import (
    BLAS,
    GENERIC_JOIN,
    GRAPHBLAS_MASKED,
    GRAPHBLAS_MXM,
    NAMES,
    NotApplicable,
    applies,
    estimate,
    product_shapes,
    ranked,
    shape_of,
    triangle_shapes,
)
from faq.testing import power_law_graph, triangle_count_numpy
from semirings import Semiring
from semirings.builtins import COUNTING_MAX
from semirings.local import local_ops

INF = math.inf
ENGINE = [*semirings.BUILTINS, COUNTING_MAX]
VALUES = {
    "counting": st.integers(0, 3),
    "integer": st.integers(-3, 3),
    "real": st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]),
    "boolean": st.booleans(),
    "max-product": st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]),
    "min-plus": st.sampled_from([INF, -2.0, 0.0, 1.5, 4.0]),
    "max-plus": st.sampled_from([-INF, -2.0, 0.0, 1.5, 4.0]),
    "log": st.sampled_from([-INF, -1.0, 0.0, 0.5]),
    "max-times": st.integers(0, 3),
}
"""Small annotations of each semiring, zero included (dyadic floats: sums are exact)."""

BOTTLENECK = Semiring(name="bottleneck", zero=-INF, one=INF, add=max, mul=min)


# -- the runners as the executor calls them: with the planner's reading of the bag ------------
def _shape(name: str, tables: list[Table], keep: tuple[str, ...]):
    try:
        return shape_of(name, [t.vars for t in tables], keep)
    except NotApplicable as exc:  # a bag the planner would not give this runner
        raise Declined(str(exc)) from None


def graphblas_mxm(tables, keep, ops, **kw) -> Table:
    return sparse.graphblas_mxm(tables, keep, ops, _shape(GRAPHBLAS_MXM, tables, keep), **kw)


def graphblas_masked(tables, keep, ops, **kw) -> Table:
    shapes = _shape(GRAPHBLAS_MASKED, tables, keep)
    return sparse.graphblas_masked(tables, keep, ops, shapes, **kw)


def dense_step(tables, keep, ops, **kw) -> Table:
    shape = _shape(BLAS, tables, keep) if ops.semiring.library is not None else None
    return dense.dense_step(tables, keep, ops, shape, **kw)


def with_shape(name, tables, keep, params: Params | None) -> Params:
    shape = None if name == GENERIC_JOIN else _shape(name, tables, keep)
    return replace(params or Params(), shape=shape)


def run(name, tables, order, keep, ops, params: Params | None = None):
    return kernel_runners.run(
        name, tables, order, keep, ops, with_shape(name, tables, keep, params)
    )


# -- inputs ------------------------------------------------------------------------------------
@dataclass
class Keys:
    """How one example spells its keys: small integers, spread-out integers or strings."""

    kind: str

    def column(self, xs: list[int]) -> np.ndarray:
        if self.kind == "int":
            return np.asarray(xs, dtype=np.int64)
        if self.kind == "spread":
            return np.asarray([x * 10**12 - 7 for x in xs], dtype=np.int64)
        out = np.empty(len(xs), dtype=object)
        out[:] = [f"v{x}" for x in xs]
        return out


@st.composite
def tables_over(draw, bag: list[tuple[str, ...]], S: Semiring, domain: int = 5) -> list[Table]:
    """One table per variable tuple of ``bag``: random rows, repeated keys or not,
    annotations or none, some tables empty."""
    keys = Keys(draw(st.sampled_from(["int", "int", "spread", "str"])))
    dtype = local_ops(S).dtype
    out = []
    for vs in bag:
        n = draw(st.integers(0, 14) if draw(st.integers(0, 9)) else st.just(0))
        rows = [tuple(draw(st.integers(0, domain - 1)) for _ in vs) for _ in range(n)]
        unique = draw(st.booleans())
        if unique:
            rows = list(dict.fromkeys(rows))
        cols = tuple(keys.column([r[d] for r in rows]) for d in range(len(vs)))
        annotated = draw(st.integers(0, 3)) > 0
        values = None
        if annotated:
            values = np.asarray([draw(VALUES[S.name]) for _ in rows], dtype=dtype)
        out.append(Table(vs, cols, values, unique=unique))
    return out


@st.composite
def oriented(draw, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each pair of variables in a random column order."""
    return [p if draw(st.booleans()) else (p[1], p[0]) for p in pairs]


def oracle(tables: list[Table], keep: tuple[str, ...], S: Semiring) -> Table | type:
    order = tuple(sorted({v for t in tables for v in t.vars}))
    try:
        return generic_join(tables, order, keep, local_ops(S))
    except OverflowError:
        return OverflowError


def assert_same(got: Table, want: Table, S: Semiring) -> None:
    """The same rows in the same order, the same annotations (floats to 1e-12)."""
    assert got.vars == want.vars
    assert [c.tolist() for c in got.cols] == [c.tolist() for c in want.cols]
    assert got.values is not None and want.values is not None
    assert got.values.dtype == want.values.dtype
    if want.values.dtype.kind == "f":
        np.testing.assert_allclose(got.values, want.values, rtol=1e-12, atol=1e-12)
    else:
        assert got.values.tolist() == want.values.tolist()


def check(runner, tables: list[Table], keep: tuple[str, ...], S: Semiring, **kw) -> None:
    """``runner`` gives what the Generic Join kernel gives; it declines only without a
    library declaration (small annotations never come near 64 bits)."""
    ops = local_ops(S)
    if S.library is None:
        with pytest.raises(Declined, match="declares no library operations"):
            runner(tables, keep, ops, **kw)
        return
    want = oracle(tables, keep, S)
    if want is OverflowError:
        with pytest.raises(OverflowError):
            runner(tables, keep, ops, **kw)
        return
    assert_same(runner(tables, keep, ops, **kw), want, S)


PRODUCT_KEEPS = [("i", "k"), ("k", "i"), ("i",), ("k",), ()]
TRIANGLE_KEEPS = [("a", "c"), ("c", "a"), ("a", "b"), ("c", "b"), ("a",), ("b",), ("c",), ()]


# -- declarations ------------------------------------------------------------------------------
def test_the_builtins_declare_their_library_operations():
    lib = {S.name: S.library for S in ENGINE}
    assert lib["log"] is None
    assert BOTTLENECK.library is None and semirings.PROVENANCE.library is None
    assert {n for n, x in lib.items() if x is not None and x.int64} == {
        "counting",
        "integer",
        "max-times",
    }
    assert {n for n, x in lib.items() if x is not None and x.sums} == {
        "counting",
        "integer",
        "real",
    }
    assert lib["min-plus"].semiring == "min_plus" and lib["min-plus"].monoid == "min"
    assert lib["counting"].pair == "plus_pair" and lib["max-plus"].pair is None
    for S in ENGINE:
        if S.library is not None:
            assert np.dtype(S.library.dtype) == np.dtype(local_ops(S).dtype), S.name
            # the ufuncs are the semiring's own ⊕ and ⊗ on its zero and one
            add, mul = S.library.add, S.library.mul
            assert add(S.zero, S.one) == S.add(S.zero, S.one)
            assert mul(S.one, S.one) == S.mul(S.one, S.one)
            assert mul(S.zero, S.one) == S.zero


# -- random bags, every built-in semiring ------------------------------------------------------
@pytest.mark.parametrize("S", ENGINE, ids=lambda S: S.name)
@given(data=st.data())
def test_graphblas_mxm_is_the_generic_join(S, data):
    bag = data.draw(oriented([("i", "j"), ("j", "k")]))
    tables = data.draw(tables_over(bag, S))
    keep = data.draw(st.sampled_from(PRODUCT_KEEPS))
    check(graphblas_mxm, tables, keep, S, threads=data.draw(st.sampled_from([0, 1])))


@pytest.mark.parametrize("S", ENGINE, ids=lambda S: S.name)
@given(data=st.data())
def test_graphblas_masked_is_the_generic_join(S, data):
    bag = data.draw(oriented([("a", "b"), ("b", "c"), ("a", "c")]))
    tables = data.draw(tables_over(bag, S))
    keep = data.draw(st.sampled_from(TRIANGLE_KEEPS))
    check(graphblas_masked, tables, keep, S, threads=data.draw(st.sampled_from([0, 1])))


@pytest.mark.parametrize("S", [S for S in ENGINE if S.library is not None], ids=lambda S: S.name)
@given(data=st.data())
def test_the_masked_dot_method_is_the_generic_join(S, data):
    """SuiteSparse's dot method (which the runner asks for where it estimates it cheaper:
    forced here, ``DOT_STEP = 0``) gives what the Generic Join kernel gives."""
    bag = data.draw(oriented([("a", "b"), ("b", "c"), ("a", "c")]))
    tables = data.draw(tables_over(bag, S))
    keep = data.draw(st.sampled_from(TRIANGLE_KEEPS))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sparse, "DOT_STEP", 0.0)
        check(graphblas_masked, tables, keep, S, threads=data.draw(st.sampled_from([0, 1])))


def test_the_masked_product_takes_the_dot_method_where_wedges_abound():
    """Hub edges make many wedges through few mask entries: the dot method; a sparse
    uniform graph's few wedges: SuiteSparse's own choice.  Either way, the count."""
    hub = 0
    spokes = np.arange(1, 400, dtype=np.int64)
    src = np.concatenate([spokes, np.full(spokes.size, hub), spokes[:-1]])
    dst = np.concatenate([np.full(spokes.size, hub), spokes, spokes[1:]])
    size = int(max(src.max(), dst.max())) + 1
    out, into = np.bincount(src, minlength=size), np.bincount(dst, minlength=size)
    wedges = int((into * out).sum())  # L(x, m) = R(m, y) = M(x, y) = E: Σ_m in(m)·out(m)
    steps = sparse.dot_steps(wedges, out, into, src, dst)
    assert steps is not None and sparse.DOT_STEP * steps < wedges
    e = power_law_graph(2000, 2000, seed=1, exponent=3.5)
    out, into = np.bincount(e[:, 0], minlength=2000), np.bincount(e[:, 1], minlength=2000)
    assert sparse.dot_steps(int((into * out).sum()), out, into, e[:, 0], e[:, 1]) is None
    E = Table(("a", "b"), (src, dst))
    bag = [E, Table(("b", "c"), E.cols), Table(("a", "c"), E.cols)]
    ops = local_ops(semirings.COUNTING)
    from graphblas.core.matrix import MatrixExpression

    asked: list[dict] = []
    new = MatrixExpression.new
    with pytest.MonkeyPatch.context() as mp:  # the options the product is computed with
        mp.setattr(
            MatrixExpression, "new", lambda self, *a, **k: asked.append(k) or new(self, *a, **k)
        )
        got = graphblas_masked(bag, (), ops)
    assert [k.get("axb_method") for k in asked if "mask" in k] == ["dot"]
    assert got.values.tolist() == generic_join(bag, ("a", "b", "c"), (), ops).values.tolist()
    # per spoke pair i, i+1: (i, hub, i+1), (i, i+1, hub) and (hub, i, i+1)
    assert got.values[0] == 3 * (spokes.size - 1)


@pytest.mark.parametrize("S", [S for S in ENGINE if S.library is not None], ids=lambda S: S.name)
@given(data=st.data())
def test_a_self_join_builds_its_matrix_once_and_is_the_generic_join(S, data):
    """A 2-hop or a triangle over one edge table (its columns shared by every factor,
    keys from an offset): one axis for every variable, so the shared columns are one
    matrix; the answer is still the Generic Join's, for every output."""
    from faq.kernel.library import axes_of

    lo = data.draw(st.sampled_from([0, 1, 7, 1000]))
    n = data.draw(st.integers(1, 30))
    pairs = data.draw(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=n))
    pairs = sorted(set(pairs))
    cols = tuple(np.asarray([p[d] for p in pairs], dtype=np.int64) + lo for d in (0, 1))
    values = None
    if data.draw(st.booleans()):
        values = np.asarray([data.draw(VALUES[S.name]) for _ in pairs], dtype=local_ops(S).dtype)
    triangle = data.draw(st.booleans())
    names = [("a", "b"), ("b", "c"), ("a", "c")] if triangle else [("i", "j"), ("j", "k")]
    tables = [Table(vs, cols, values, unique=True) for vs in names]
    assert len({id(a) for a in axes_of(tables).values()}) == 1
    built = []
    make = sparse._matrix
    runner = graphblas_masked if triangle else graphblas_mxm
    keep = data.draw(st.sampled_from(TRIANGLE_KEEPS if triangle else PRODUCT_KEEPS))
    ops = local_ops(S)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sparse, "_matrix", lambda *a: built.append(a) or make(*a))
        try:
            got = runner(tables, keep, ops)
        except Declined as why:  # only a 64-bit bound declines here
            assert "overflow" in str(why)
        else:  # the kernel leaves out the annotations of a join of unannotated sets
            assert_same(got, tb.with_values(oracle(tables, keep, S), ops), S)
    if values is None or local_ops(S).nonzero(values).all():  # else each drops its zeros
        # a 2-hop multiplies one matrix by itself; a triangle's mask is one of its two
        # factors (the other may be read transposed); none built when the runner declined
        assert len(built) <= len(tables) - 1
    mid = cols[1] + 10**6  # shared by both factors, but i, j and k lie far apart
    far = [Table(("i", "j"), (cols[0], mid), values), Table(("j", "k"), (mid, cols[0] + 10**7))]
    assert len({id(a) for a in axes_of(far).values()}) == 3


@pytest.mark.parametrize("S", ENGINE, ids=lambda S: S.name)
@given(data=st.data())
def test_dense_product_is_the_generic_join(S, data):
    bag = data.draw(oriented([("i", "j"), ("j", "k")]))
    tables = data.draw(tables_over(bag, S, domain=4))
    keep = data.draw(st.sampled_from(PRODUCT_KEEPS))
    threads = data.draw(st.sampled_from([1, 2]))
    check(dense_step, tables, keep, S, density=0.0, threads=threads)


SUMS = [S for S in ENGINE if S.library is not None and S.library.sums]
BAGS = [
    ([("i", "j"), ("j", "k"), ("k", "l")], [("i", "l"), ("l", "i"), ("i",), ()]),
    ([("i", "j"), ("j", "k"), ("i", "k")], [("i", "k"), ("j",), ()]),
    ([("i", "j", "k"), ("k", "l")], [("i", "j", "l"), ("l", "j"), ("k",)]),
    ([("i", "j"), ("j",)], [("i",), ()]),
]


@pytest.mark.parametrize("S", SUMS, ids=lambda S: S.name)
@given(data=st.data())
def test_blas_runs_any_bag_of_a_sum_of_products(S, data):
    bag, keeps = data.draw(st.sampled_from(BAGS))
    bag = [vs if len(vs) != 2 or data.draw(st.booleans()) else vs[::-1] for vs in bag]
    tables = data.draw(tables_over(bag, S, domain=4))
    check(dense_step, tables, data.draw(st.sampled_from(keeps)), S, density=0.0)


# -- exact cases named -------------------------------------------------------------------------
def table(vars_, rows, values=None, unique=True) -> Table:
    cols = tuple(np.asarray([r[d] for r in rows], dtype=np.int64) for d in range(len(vars_)))
    return Table(tuple(vars_), cols, None if values is None else np.asarray(values), unique)


@pytest.mark.parametrize("S", [semirings.REAL, semirings.INTEGER], ids=lambda S: S.name)
def test_sums_that_cancel_are_dropped(S):
    one = 1.0 if S is semirings.REAL else 1
    A = table(("i", "j"), [(0, 0), (0, 1), (1, 0)], [one, one, one])
    B = table(("j", "k"), [(0, 0), (1, 0), (0, 1)], [one, -one, one])
    want = oracle([A, B], ("i", "k"), S)
    assert want.cols[0].tolist() == [0, 1, 1] and want.cols[1].tolist() == [1, 0, 1]
    ops = local_ops(S)
    for got in (
        graphblas_mxm([A, B], ("i", "k"), ops),
        dense_step([A, B], ("i", "k"), ops, density=0.0),
    ):
        assert_same(got, want, S)  # (0, 0) is 1 - 1: no row


def test_repeated_keys_are_combined_and_cancelling_ones_dropped():
    S = semirings.INTEGER
    A = table(("i", "j"), [(0, 0), (0, 0), (1, 1), (1, 1)], [2, -2, 3, 4], unique=False)
    B = table(("j", "k"), [(0, 5), (1, 5)], [1, 1])
    want = oracle([A, B], ("i", "k"), S)
    assert want.values.tolist() == [7]
    assert_same(graphblas_mxm([A, B], ("i", "k"), local_ops(S)), want, S)


def test_repeated_unannotated_keys_count_in_the_counting_semiring():
    S = semirings.COUNTING
    E = table(("a", "b"), [(0, 1), (0, 1), (1, 2)], unique=False)
    F = table(("b", "c"), [(1, 2), (2, 0)])
    G = table(("a", "c"), [(0, 2), (1, 0), (1, 0)], unique=False)
    want = oracle([E, F, G], (), S)
    assert want.values.tolist() == [2 + 2]
    assert_same(graphblas_masked([E, F, G], (), local_ops(S)), want, S)


BIG = 2**62


@pytest.mark.parametrize("S", [semirings.COUNTING, semirings.INTEGER], ids=lambda S: S.name)
def test_a_product_past_64_bits_raises_as_the_kernel_does(S):
    A = table(("i", "j"), [(0, 0)], [BIG])
    B = table(("j", "k"), [(0, 0)], [2])
    assert oracle([A, B], ("i", "k"), S) is OverflowError
    ops = local_ops(S)
    for name in (GRAPHBLAS_MXM, BLAS):
        with pytest.raises(Declined, match="overflow"):
            params = with_shape(name, [A, B], ("i", "k"), Params(density=0.0))
            RUNNERS[name]([A, B], ("i", "j", "k"), ("i", "k"), ops, params)
        with pytest.raises(OverflowError):
            run(name, [A, B], ("i", "j", "k"), ("i", "k"), ops, Params(density=0.0))


def test_a_sum_past_64_bits_raises_and_one_that_comes_back_does_not():
    S = semirings.INTEGER
    ops = local_ops(S)
    rows = [(0, j) for j in range(4)]
    A = table(("i", "j"), rows, [2**61] * 4)  # four products of 2**61: the sum is 2**63
    B = table(("j", "k"), [(j, 0) for j in range(4)], [1] * 4)
    assert oracle([A, B], ("i", "k"), S) is OverflowError
    with pytest.raises(OverflowError):
        run(GRAPHBLAS_MXM, [A, B], ("i", "j", "k"), ("i", "k"), ops)
    # 2**62 - 2**62: the bound refuses, the kernel runs and gets 0 (no row) exactly
    C = table(("i", "j"), [(0, 0), (0, 1)], [BIG, -BIG])
    D = table(("j", "k"), [(0, 0), (1, 0)], [1, 1])
    ran = run(GRAPHBLAS_MXM, [C, D], ("i", "j", "k"), ("i", "k"), ops)
    assert ran.runner == GENERIC_JOIN and "overflow" in ran.why and ran.table.rows == 0


def test_repeated_keys_past_64_bits_raise_in_every_runner():
    S = semirings.COUNTING
    A = table(("i", "j"), [(0, 0), (0, 0)], [BIG, BIG], unique=False)
    B = table(("j", "k"), [(0, 0)], [1])
    assert oracle([A, B], ("i", "k"), S) is OverflowError
    ops = local_ops(S)
    for fn in (graphblas_mxm, dense_step):
        with pytest.raises(OverflowError):
            fn([A, B], ("i", "k"), ops)


def test_dense_integers_past_2_53_are_summed_in_int64_exactly():
    S = semirings.INTEGER
    rng = np.random.default_rng(5)
    n = 6
    grid = [(i, j) for i in range(n) for j in range(n)]
    A = table(("i", "j"), grid, rng.integers(2**29, 2**30, n * n))
    B = table(("j", "k"), grid, rng.integers(2**29, 2**30, n * n))
    want = oracle([A, B], ("i", "k"), S)
    assert int(want.values.max()) > 2**53  # float64 would round these
    assert_same(dense_step([A, B], ("i", "k"), local_ops(S)), want, S)


def test_mixed_key_types_decline():
    A = Table(("i", "j"), (np.array([0]), np.array([1])))
    j = np.empty(1, dtype=object)
    j[:] = ["1"]
    B = Table(("j", "k"), (j, np.array([0])))
    with pytest.raises(Declined, match="cannot be ordered"):
        graphblas_mxm([A, B], ("i", "k"), local_ops(semirings.COUNTING))


def test_shapes_that_are_not_a_product_or_a_triangle_are_not_applicable():
    for bag, keep in [
        ([("i", "j"), ("j", "k")], ("j",)),  # the shared variable kept
        ([("i", "j"), ("i", "j")], ("i",)),  # two shared variables
        ([("i", "j"), ("k", "l")], ()),  # none shared
        ([("i", "j", "k"), ("k", "l")], ()),  # not binary
        ([("i", "j"), ("j", "k"), ("k", "l")], ()),
    ]:
        with pytest.raises(NotApplicable):
            product_shapes(bag, keep)
    with pytest.raises(NotApplicable):
        triangle_shapes([("a", "b"), ("b", "c"), ("c", "d")], ())
    with pytest.raises(NotApplicable, match="every variable"):
        triangle_shapes([("a", "b"), ("b", "c"), ("a", "c")], ("a", "b", "c"))
    assert [t.m for t in triangle_shapes([("a", "b"), ("b", "c"), ("a", "c")], ("a",))] == [
        "b",
        "c",
    ]


def test_a_sparse_block_is_not_dense():
    S = semirings.REAL
    A = table(("i", "j"), [(0, 0), (9, 9)], [1.0, 1.0])
    with pytest.raises(Declined, match="density"):
        dense_step([A, A], ("i",), local_ops(S), density=0.5)
    with pytest.raises(Declined, match="cells"):
        dense_step([A], ("i", "j"), local_ops(S), density=0.0, cells=50)


def test_the_dense_loop_matches_numpy():
    rng = np.random.default_rng(0)
    A, B = rng.random((7, 9)), rng.random((9, 5))
    lib = semirings.MIN_PLUS.library
    want = np.min(A[:, :, None] + B[None, :, :], axis=1)
    for threads in (1, 3):
        np.testing.assert_array_equal(semiring_matmul(A, B, lib, INF, threads), want)


# -- the triangle count ------------------------------------------------------------------------
def test_masked_triangle_count_of_a_power_law_graph():
    e = power_law_graph(3000, 20000, seed=4)
    E = Table(("a", "b"), (e[:, 0], e[:, 1]))
    bag = [E, Table(("b", "c"), E.cols), Table(("a", "c"), E.cols)]
    S = semirings.COUNTING
    want = generic_join(bag, ("a", "b", "c"), (), local_ops(S))
    got = graphblas_masked(bag, (), local_ops(S))
    assert got.values.tolist() == want.values.tolist() == [triangle_count_numpy(e)]
    assert got.values[0] > 0
    per = graphblas_masked(bag, ("b",), local_ops(S))
    assert_same(per, generic_join(bag, ("a", "b", "c"), ("b",), local_ops(S)), S)


# -- the registry ------------------------------------------------------------------------------
@dataclass
class Info:
    vars: tuple[str, ...]
    rows: float
    distinct: dict[str, float] = field(default_factory=dict)


def test_the_kernel_has_every_runner_the_planner_names():
    assert set(NAMES) == {GENERIC_JOIN, *RUNNERS}
    assert kernel_runners.GENERIC_JOIN == GENERIC_JOIN


def test_which_runners_apply_and_what_they_cost():
    chain = [Info(("i", "j"), 600_000, {"i": 400, "j": 1500}), Info(("j", "k"), 600_000)]
    chain[1].distinct.update({"j": 1500, "k": 400})
    S = semirings.REAL
    assert applies(GRAPHBLAS_MXM, chain, ("i", "k"), S) is None
    assert applies(BLAS, chain, ("i", "k"), S) is None
    assert "declares no library" in applies(GRAPHBLAS_MXM, chain, ("i", "k"), semirings.LOG)
    assert "not 3" in applies(GRAPHBLAS_MASKED, chain, ("i", "k"), S)
    sparse = [Info(vs, 1000, {v: 1000 for v in vs}) for vs in (("i", "j"), ("j", "k"))]
    assert "density" in applies(BLAS, sparse, ("i", "k"), S)
    order = ranked(chain, ("i", "k"), S, work=2.4e8)
    assert [r[0] for r in order] == [BLAS, GRAPHBLAS_MXM, GENERIC_JOIN, GRAPHBLAS_MASKED]
    assert order[2][1] < math.inf == order[3][1] and "not 3" in order[3][2]
    assert estimate(BLAS, chain, ("i", "k"), S, work=2.4e8) < estimate(
        GENERIC_JOIN, chain, ("i", "k"), S, work=2.4e8
    )
    with pytest.raises(KeyError, match="unknown runner"):
        applies("fast", chain, ("i", "k"), S)
    # the measured cases of benchmarks/kernels.py: a sparse 2-hop goes to GraphBLAS, and
    # so does the scalar triangle count (its masked product: 0.50 s of CPU against the
    # Generic Join's 0.61 s at 5.3e8 wedges, once no spinning BLAS threads slowed it)
    hop = [Info(("a", "b"), 5e5, {"a": 1e5, "b": 1e5}), Info(("b", "c"), 5e5)]
    hop[1].distinct.update({"b": 1e5, "c": 1e5})
    first = ranked(hop, ("a", "c"), semirings.MIN_PLUS, work=2.5e6, pair_rows=2.5e6)[0]
    assert first[0] == GRAPHBLAS_MXM
    tri = [Info(vs, 1e6, {v: 2e5 for v in vs}) for vs in (("a", "b"), ("b", "c"), ("a", "c"))]
    order = ranked(tri, (), semirings.COUNTING, work=5.3e8, pair_rows=5.3e8)
    assert [r[0] for r in order[:2]] == [GRAPHBLAS_MASKED, GENERIC_JOIN]
    assert {r[2].split(" ")[-1] for r in order[2:]} == {"cells", "2"}  # too large; 3 factors


def test_run_names_the_runner_and_falls_back_for_log():
    A = table(("i", "j"), [(0, 0), (0, 1)], [0.0, -1.0])
    B = table(("j", "k"), [(0, 3), (1, 3)], [0.5, 0.5])
    ops = local_ops(semirings.LOG)
    ran = run(GRAPHBLAS_MXM, [A, B], ("i", "j", "k"), ("i", "k"), ops)
    assert ran.runner == GENERIC_JOIN and "declares no library" in ran.why
    assert_same(ran.table, oracle([A, B], ("i", "k"), semirings.LOG), semirings.LOG)
    ops = local_ops(semirings.MIN_PLUS)
    ran = run(GRAPHBLAS_MXM, [A, B], ("i", "j", "k"), ("i", "k"), ops)
    assert (ran.runner, ran.why, ran.table.values.tolist()) == (GRAPHBLAS_MXM, "", [-0.5])


def test_unannotated_rows_with_distinct_keys_reach_the_runner_without_annotations():
    """An edge list without a ``value`` column (its keys distinct) is read as rows each
    annotated one, with no array of ones, so the masked product is one iso-valued matrix
    (``plus_pair``) and no annotations are multiplied in; repeated keys are counted."""
    import pandas as pd

    from faq import Factor, query

    spokes = np.arange(1, 3000, dtype=np.int64)  # a hub: many wedges, few edges
    e = np.column_stack(
        [
            np.concatenate([spokes, np.zeros_like(spokes), spokes[:-1]]),
            np.concatenate([np.zeros_like(spokes), spokes, spokes[1:]]),
        ]
    )
    seen: list[Table] = []
    masked = kernel_runners.RUNNERS[GRAPHBLAS_MASKED]

    def spy(tables, order, keep, ops, p):
        seen.extend(tables)
        return masked(tables, order, keep, ops, p)

    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    frame = pd.DataFrame({"src": e[:, 0], "dst": e[:, 1]})
    twice = pd.concat([frame, frame.iloc[:5]])  # five edges twice: each counted 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(kernel_runners.RUNNERS, GRAPHBLAS_MASKED, spy)
        run = q.run(backend="driver", E=Factor.from_pandas(frame, vars=("a", "b")))
        assert [s.ran or s.choice.runs for s in run.trace.steps] == [f"driver/{GRAPHBLAS_MASKED}"]
        assert run.result.scalar() == 3 * (spokes.size - 1)
        assert seen and all(t.values is None for t in seen)
        seen.clear()
        run = q.run(backend="driver", E=Factor.from_pandas(twice, vars=("a", "b")))
        assert seen and all(t.values is not None and t.values.max() == 2 for t in seen)
