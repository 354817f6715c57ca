"""The compiled one-level path of the seeded delta rule (:func:`faq.kernel.seeded.seeded_delta`
over :func:`faq.kernel.compiled.seeded_sums`) against the general path of products of base or
correction per atom, on keyed tables whose overrides cancel, repeat and remove keys."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq.kernel.seeded as seeded
import semirings
from faq.kernel import KeyedTable, Table, group_reduce
from faq.kernel.seeded import seeded_delta
from semirings.local import local_ops

OPS = local_ops(semirings.INTEGER)
TRI = [("E", ("a", "b")), ("E", ("b", "c")), ("E", ("a", "c"))]
HEADS = [(), ("a",), ("a", "b"), ("b",)]
rows = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(-3, 3)), max_size=30)


def table(rs: list[tuple[int, int, int]], vars_: tuple[str, ...] = ("x0", "x1")) -> Table:
    cols = tuple(np.asarray([r[i] for r in rs], dtype=np.int64) for i in range(2))
    t = Table(vars_, cols, np.asarray([r[2] for r in rs], dtype=np.int64), unique=False)
    return group_reduce(t, vars_, OPS)


def as_dict(t: Table) -> dict[tuple[int, ...], int]:
    assert t.values is not None
    out: dict[tuple[int, ...], int] = {}
    for i in range(t.rows):
        k = tuple(int(c[i]) for c in t.cols)
        out[k] = out.get(k, 0) + int(t.values[i])
    return {k: v for k, v in out.items() if v}


def both_paths(monkeypatch, atoms, head, keyed, deltas):
    fast = seeded_delta(atoms, head, OPS, keyed, deltas)
    with monkeypatch.context() as m:
        m.setattr(seeded, "NUMBA", False)  # the general path: products of generic joins
        slow = seeded_delta(atoms, head, OPS, keyed, deltas)
    assert fast is not None and slow is not None
    return fast, slow


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
@pytest.mark.parametrize("gil_rows", [64, 0], ids=["single-call", "stepwise"])
@settings(max_examples=60, deadline=None)
@given(
    first=rows,
    changes=st.lists(rows, max_size=4),
    delta=rows.filter(bool),
    head=st.sampled_from(HEADS),
)
def test_one_level_path_agrees_with_the_products(
    monkeypatch, use_settings, gil_rows, first, changes, delta, head
):
    # a seed of at most gil_rows rows over binary relations runs as one compiled call
    # (seeded._binary), a larger one atom by atom (seeded._stepwise)
    use_settings(gil_rows=gil_rows)
    kt = KeyedTable.of(table(first), OPS)
    for c in changes:  # overrides: new keys, removed keys, keys changed back to the base
        kt = kt.plus(table(c))[0]
    d = table(delta)
    if not d.rows:
        return
    fast, slow = both_paths(monkeypatch, TRI, head, {"E": kt}, {"E": d})
    assert as_dict(fast[0]) == as_dict(slow[0])
    assert fast[1] == slow[1]


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
def test_cancelling_corrections_and_several_relations(monkeypatch):
    """R(a, b), S(b, c), T(a, c): an override that returns a key to its base value, one
    that removes a key, and changes of two relations (the later term reads R's new state)."""
    r = KeyedTable.of(table([(1, 2, 1), (1, 3, 2), (4, 2, 1)]), OPS)
    r = r.plus(table([(1, 3, -2), (5, 5, 3)]))[0].plus(table([(5, 5, -3)]))[0]
    s = KeyedTable.of(table([(2, 7, 1), (3, 7, 5), (2, 8, 2)]), OPS)
    s = s.plus(table([(2, 8, -2), (3, 8, 4)]))[0]
    t = KeyedTable.of(table([(1, 7, 1), (1, 8, 3), (4, 7, 2)]), OPS)
    atoms = [("R", ("a", "b")), ("S", ("b", "c")), ("T", ("a", "c"))]
    deltas = {"R": table([(1, 3, 1), (4, 2, -1)]), "S": table([(2, 7, 2), (3, 8, -4)])}
    for head in HEADS:
        fast, slow = both_paths(monkeypatch, atoms, head, {"R": r, "S": s, "T": t}, deltas)
        assert as_dict(fast[0]) == as_dict(slow[0])


def spy_sums(monkeypatch, seen):
    """Call ``seen`` with what each compiled sum returns: ``seeded_sums``, its variant
    that keeps the GIL (``seeded_sums_held``), and the single call of a small seed over
    binary relations (``binary_sums``: the sums, their bound, ...)."""
    for name in ("seeded_sums", "seeded_sums_held", "binary_sums"):
        real = getattr(seeded.compiled, name)

        def spy(*args, _real=real):
            out = _real(*args)
            seen(out)
            return out

        monkeypatch.setattr(seeded.compiled, name, spy)


def test_annotations_near_the_int64_range_take_the_general_path(monkeypatch):
    """Where a partial sum could leave int64 the compiled path declines: the general path
    runs as before (an exact answer at 2**60, OverflowError past int64)."""
    called: list[float] = []
    spy_sums(monkeypatch, lambda out: called.append(out[1]))
    d = {"E": table([(1, 2, 1)])}
    kt = KeyedTable.of(table([(1, 2, 2**30), (2, 3, 2**30), (1, 3, 2**30)]), OPS)
    fast = seeded_delta(TRI, (), OPS, {"E": kt}, d)
    assert fast is not None and as_dict(fast[0]) == {(): 2**60}
    if seeded.NUMBA:
        assert called and max(called) >= 2.0**59  # the bound saw it: declined
    huge = KeyedTable.of(table([(1, 2, 2**40), (2, 3, 2**40), (1, 3, 2**40)]), OPS)
    with pytest.raises(OverflowError, match="overflowed 64-bit integers"):
        seeded_delta(TRI, (), OPS, {"E": huge}, d)


def test_touched_rows_of_a_keyed_relation_are_read_when_asked():
    """``DeltaResult.touched`` on keyed relations: each changed relation's rows before the
    change at the change's keys (read lazily; a view never asks for them)."""
    from faq import Factor, query, solve_delta

    z = semirings.INTEGER
    kt = KeyedTable.of(table([(1, 2, 1), (2, 3, 4), (1, 3, 1)]), OPS)
    kt = kt.plus(table([(2, 3, -1), (5, 6, 2)]))[0]
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="integer")
    d = Factor.from_table(table([(2, 3, 1), (5, 6, -2), (7, 7, 1)]), z, "dE")
    res = solve_delta(q, {"E": Factor.keyed(kt, z, "E")}, {"E": d})
    assert list(res.touched) == ["E"] and len(res.touched) == 1
    assert res.touched["E"].to_dict() == {(2, 3): 3, (5, 6): 2}
    assert res.change.to_dict() == {(): 2}  # 1·3·1 before; 1·4·1 + 1 (the loop 7, 7, 7) after


def test_touched_rows_are_read_when_asked_on_the_general_path_too(monkeypatch):
    """The general driver path (min-plus: no seeded tries) reads a keyed relation's rows at
    its change's keys only when ``touched`` is read, and then gives the rows before the
    change; a relation that is not keyed gives them from the lookups' own read."""
    from faq import Factor, query, solve_delta

    mp = semirings.MIN_PLUS
    ops = local_ops(mp)
    e = Table(("x0", "x1"), (np.array([1, 2, 2]), np.array([2, 3, 4])), np.array([1.0, 4.0, 2.0]))
    d = Table(("x0",), (np.array([1, 2, 9]),), np.array([0.0, 5.0, 1.0]))
    kt = KeyedTable.of(d, ops).replace(Table(("x0",), (np.array([2]),), np.array([3.0])))
    q = query("Q(y) :- D(x), E(x, y)", semiring="min-plus")
    reads = []
    real_at = KeyedTable.at
    monkeypatch.setattr(
        KeyedTable, "at", lambda self, k: reads.append(len(k[0])) or real_at(self, k)
    )
    change = Factor.from_table(Table(("x0",), (np.array([2, 7]),), np.array([1.0, 1.0])), mp, "dD")
    edges = Factor.from_table(e, mp, "E")
    res = solve_delta(q, {"D": Factor.keyed(kt, mp, "D"), "E": edges}, {"D": change})
    assert res.change.to_dict() == {(3,): 5.0, (4,): 3.0}
    assert reads == []  # the change's answer needs no read of D
    assert list(res.touched) == ["D"] and res.touched["D"].to_dict() == {(2,): 3.0}
    assert reads == [2]
    de = Table(("x0", "x1"), (np.array([2, 5]), np.array([3, 6])), np.array([1.0, 1.0]))
    res = solve_delta(
        q, {"D": Factor.keyed(kt, mp, "D"), "E": edges}, {"E": Factor.from_table(de, mp, "dE")}
    )
    assert res.change.to_dict() == {(3,): 4.0}
    assert res.touched["E"].to_dict() == {(2, 3): 4.0}


rows3 = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.integers(-3, 3)),
    max_size=25,
)


def table3(rs: list[tuple[int, int, int, int]], scale: int) -> Table:
    cols = tuple(np.asarray([r[i] * scale for r in rs], dtype=np.int64) for i in range(3))
    t = Table(("x0", "x1", "x2"), cols, np.asarray([r[3] for r in rs], dtype=np.int64), False)
    return group_reduce(t, ("x0", "x1", "x2"), OPS)


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
@settings(max_examples=60, deadline=None)
@given(
    first=st.tuples(rows3, rows3, rows),
    changes=st.lists(st.tuples(rows3, rows3, rows), max_size=3),
    delta=st.tuples(rows3, rows3),
    scale=st.sampled_from([1, 2**40]),
    head=st.sampled_from([(), ("a",), ("a", "b")]),
)
def test_one_level_path_with_ternary_atoms_and_wide_keys(
    monkeypatch, first, changes, delta, scale, head
):
    """``R(a, b, c), S(a, b, x), T(c, x)``: a correction found by a prefix of two columns,
    keys far apart (a scale of 2**40: no dense array of the seeds' values, no single sort code),
    and the later term reading the earlier relation's new state."""
    atoms = [("R", ("a", "b", "c")), ("S", ("a", "b", "x")), ("T", ("c", "x"))]

    def scaled2(rs: list[tuple[int, int, int]]) -> Table:
        return table([(u * scale, v * scale, w) for u, v, w in rs])

    r, s, t = (
        KeyedTable.of(table3(first[0], scale), OPS),
        KeyedTable.of(table3(first[1], scale), OPS),
        KeyedTable.of(scaled2(first[2]), OPS),
    )
    for cr, cs, ct in changes:
        r, s, t = r.plus(table3(cr, scale))[0], s.plus(table3(cs, scale))[0], t.plus(scaled2(ct))[0]
    pairs = (("R", table3(delta[0], scale)), ("S", table3(delta[1], scale)))
    deltas = {n: d for n, d in pairs if d.rows}
    if not deltas:
        return
    fast, slow = both_paths(monkeypatch, atoms, head, {"R": r, "S": s, "T": t}, deltas)
    assert as_dict(fast[0]) == as_dict(slow[0])


unary = st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 3)), max_size=8)


def table1(rs: list[tuple[int, int]]) -> Table:
    t = Table(("x0",), (np.asarray([r[0] for r in rs], dtype=np.int64),),
              np.asarray([r[1] for r in rs], dtype=np.int64), unique=False)  # fmt: skip
    return group_reduce(t, ("x0",), OPS)


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
@settings(max_examples=60, deadline=None)
@given(
    first=st.tuples(rows, rows, rows, unary),
    changes=st.lists(st.tuples(rows, unary), max_size=3),
    delta=st.tuples(rows.filter(bool), unary),
    head=st.sampled_from([(), ("a",), ("a", "b")]),
)
def test_one_level_path_takes_atoms_of_the_last_variable_alone(
    monkeypatch, first, changes, delta, head
):
    """``R(a, b), S(b, x), U(x), T(a, x)``: the term of R's change binds ``a, b``, and
    ``U`` holds only ``x``. Its level is one node every seed row reaches; the compiled path
    takes it (it declined such atoms before) and agrees with the products, with ``U``'s
    base, its overrides and, in the later term, its own change."""
    atoms = [("R", ("a", "b")), ("S", ("b", "x")), ("U", ("x",)), ("T", ("a", "x"))]
    r, s, u, t = (
        KeyedTable.of(table(first[0]), OPS),
        KeyedTable.of(table(first[1]), OPS),
        KeyedTable.of(table1(first[3]), OPS),
        KeyedTable.of(table(first[2]), OPS),
    )
    for cr, cu in changes:
        r, u = r.plus(table(cr))[0], u.plus(table1(cu))[0]
    deltas = {"R": table(delta[0]), "U": table1(delta[1])}
    deltas = {n: d for n, d in deltas.items() if d.rows}
    if "R" not in deltas:
        return
    called: list[bool] = []
    spy_sums(monkeypatch, lambda out: called.append(True))
    fast, slow = both_paths(monkeypatch, atoms, head, {"R": r, "S": s, "U": u, "T": t}, deltas)
    assert as_dict(fast[0]) == as_dict(slow[0])
    assert called  # R's term ran compiled


def test_an_integer_sum_past_int64_in_a_keyed_update_is_an_overflow_error():
    """``KeyedTable.plus`` adds a change to a key's current annotation exactly up to the
    int64 limit and refuses one past it (the pairwise sum of the integer path is checked)."""
    kt = KeyedTable.of(table([(1, 2, 2**62)]), OPS).plus(table([(1, 2, 2**62 - 1)]))[0]
    assert as_dict(kt.table()) == {(1, 2): 2**63 - 1}
    with pytest.raises(OverflowError, match="overflowed 64-bit integers"):
        kt.plus(table([(1, 2, 1)]))


prefix_rows = st.lists(
    st.tuples(st.integers(0, 3), st.integers(-40, 40), st.integers(-2, 2)), max_size=120
)


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
@settings(max_examples=60, deadline=None)
@given(
    corr=prefix_rows,
    delta=prefix_rows,
    seeds=st.lists(st.integers(0, 5), min_size=1, max_size=8),
    wide=st.booleans(),
    csorted=st.booleans(),
)
def test_near_level_is_the_level_numpy_gives(corr, delta, seeds, wide, csorted):
    """:func:`faq.kernel.compiled_seeded.near_level` against numpy: the rows whose prefix a
    seed holds, equal keys summed, zero sums dropped, sorted; each seed's group.  Few
    prefixes and many rows make long unsorted groups (its own merge sort); ``wide`` spreads
    the prefixes 2**40 apart (no dense array of their values); ``csorted``: the first rows
    sorted by prefix (a log in key order), found by binary searches instead of a pass."""
    from faq.kernel.compiled_seeded import near_level

    if csorted:
        corr = sorted(corr, key=lambda r: r[0])  # by prefix only: ties keep their order

    k = 2**40 if wide else 1

    def cols(rs):
        return tuple(
            np.asarray([r[i] * (k if i == 0 else 1) for r in rs], np.int64) for i in (0, 1)
        )

    def values(rs):
        return np.asarray([r[2] for r in rs], np.int64)

    seed = np.asarray(seeds, np.int64) * k
    vals, starts, sums, node, biggest = near_level(
        cols(corr), values(corr), cols(delta), values(delta), (seed,), csorted
    )
    want: dict[tuple[int, int], int] = {}
    for p, x, v in corr + delta:
        if p * k in set(seed.tolist()):
            want[(p * k, x)] = want.get((p * k, x), 0) + v
    keys = sorted(key for key, v in want.items() if v)
    groups = sorted({p for p, _ in keys})
    assert vals.tolist() == [x for _, x in keys]
    assert sums.tolist() == [want[key] for key in keys]
    assert starts.tolist() == [sum(1 for q, _ in keys if q < p) for p in groups] + [len(keys)]
    assert node.tolist() == [groups.index(s) if s in groups else -1 for s in seed.tolist()]
    assert biggest <= sum(abs(r[2]) for r in corr + delta)


@pytest.mark.skipif(not seeded.NUMBA, reason="the compiled path needs numba")
@settings(max_examples=60, deadline=None)
@given(
    rs=st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 3)), min_size=1, max_size=40),
    seeds=st.lists(st.tuples(st.integers(-8, 8), st.integers(-1, 4)), min_size=1, max_size=10),
    wide=st.booleans(),
)
def test_descend_through_the_dense_first_level_finds_each_seeds_node(rs, seeds, wide):
    """:func:`faq.kernel.compiled_seeded.descend` with the first level's dense index
    (:meth:`faq.kernel.Trie.first_index`) reaches the node a level-by-level
    :meth:`faq.kernel.Trie.lookup` reaches, for values below, among and above the
    level's; ``wide`` spreads the first values 2**40 apart, where the trie keeps no dense
    index and the binary search runs."""
    from faq.kernel import build_trie
    from faq.kernel.compiled_seeded import descend

    k = 2**40 if wide else 1
    t = table([(a * k, b, 1) for a, b in rs], ("a", "b"))
    tr = build_trie(t, ("a", "b"))
    low, at = tr.first_index()
    assert (len(at) == 0) == (wide and len({a for a, _ in rs}) > 1)
    s0 = np.asarray([a * k for a, _ in seeds], dtype=np.int64)
    s1 = np.asarray([b for _, b in seeds], dtype=np.int64)
    got = descend(tr.vals, tr.starts, (s0, s1), low, at)
    one = tr.lookup(0, np.zeros(len(s0), dtype=np.int64), s0)
    want = np.where(one >= 0, tr.lookup(1, np.maximum(one, 0), s1), -1)
    assert got.tolist() == want.tolist()
