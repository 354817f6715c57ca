"""Grid tables: a dense array's cells without key columns, through a chain of dense steps.

A :class:`~faq.kernel.table.GridTable` must be the table its key columns spell out, to
every reader: the statistics, the axes of a library runner, renaming, reading back.  And a
chain of dense steps over arrays without zeros must never spell them out.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import faq
from faq import Factor, query
from faq.kernel.library import axes_of
from faq.kernel.stats import degrees
from faq.kernel.table import GridTable, Table, key_sets, renamed
from semirings.local import has_nan


def spelled(t: GridTable) -> Table:
    """The same rows as a plain table (its columns built here, not by the grid)."""
    shape = tuple(len(level) for level in t.levels)
    where = np.indices(shape).reshape(len(shape), -1)
    cols = tuple(level[w] for level, w in zip(t.levels, where, strict=True))
    return Table(t.vars, cols, t.values)


@st.composite
def grids(draw) -> GridTable:
    arity = draw(st.integers(1, 3))
    vars_ = tuple("ijk"[:arity])
    levels = []
    for _ in vars_:
        keys = draw(st.sets(st.integers(-5, 40), min_size=1, max_size=4))
        levels.append(np.array(sorted(keys), dtype=np.int64))
    cells = int(np.prod([len(level) for level in levels]))
    values = np.array(draw(st.lists(st.floats(0.5, 4), min_size=cells, max_size=cells)))
    return GridTable(vars_, levels, values)


@given(t=grids(), data=st.data())
def test_a_grid_reads_as_its_spelled_out_table(t, data):
    plain = spelled(t)
    assert t.rows == plain.rows and t.unique and t.grid is t.levels
    for var in t.vars:
        assert np.array_equal(t.col(var), plain.col(var))
    for got, want in zip(key_sets(t), t.levels, strict=True):
        assert got is want
    some = data.draw(st.lists(st.sampled_from(t.vars), min_size=1, unique=True))
    got_keys, got_counts = degrees(t, some)
    want_keys, want_counts = degrees(Table(plain.vars, tuple(c.copy() for c in plain.cols)), some)
    assert [k.tolist() for k in got_keys] == [k.tolist() for k in want_keys]
    assert got_counts.tolist() == want_counts.tolist()
    a, b = axes_of([t]), axes_of([plain])
    for var in t.vars:
        assert a[var].size == b[var].size and a[var].lo == b[var].lo
    r = renamed(t, tuple(v.upper() for v in t.vars))
    assert r.grid is t.levels and r.vars == tuple(v.upper() for v in t.vars)


def test_a_grid_refuses_levels_that_do_not_fit_its_annotations():
    with pytest.raises(ValueError, match="6 cells has 5 annotations"):
        GridTable(("i", "j"), (np.arange(2), np.arange(3)), np.ones(5))
    with pytest.raises(ValueError, match="1 levels"):
        GridTable(("i", "j"), (np.arange(2),), np.ones(2))


CHAIN = "Q(i, l) :- A(i, j), B(j, k), C(k, l)"


@given(
    n=st.integers(1, 5),
    m=st.integers(1, 5),
    semiring=st.sampled_from(["real", "integer", "counting"]),
    zeros=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_a_dense_chain_is_the_generic_join_and_spells_no_key_column_out(
    n, m, semiring, zeros, seed
):
    rng = np.random.default_rng(seed)
    low = 0 if zeros else 1
    arrays = [rng.integers(low, 4, size=s) for s in ((n, m), (m, n), (n, m))]
    if semiring == "real":
        arrays = [a.astype(np.float64) / 2 for a in arrays]
    names = {"A": ("i", "j"), "B": ("j", "k"), "C": ("k", "l")}

    def run(library: bool):
        fs = {k: Factor.from_numpy(a, vars=names[k]) for k, a in zip(names, arrays, strict=True)}
        with faq.settings(library_runners=library, dense_fraction=0.01):
            return query(CHAIN, semiring=semiring).run(backend="driver", **fs).result

    fast, slow = run(True), run(False)
    assert fast.to_dict() == slow.to_dict()
    want = arrays[0] @ arrays[1] @ arrays[2]
    assert np.array_equal(fast.to_numpy(shape=(n, m)), want)
    if not zeros:  # every input a grid, every product one
        fresh = run(True)
        t = fresh.to_table()
        assert isinstance(t, GridTable)
        fresh.to_numpy(shape=(n, m))
        assert "cols" not in vars(t)  # read back by a reshape, no column built


def test_has_nan_sees_through_infinities():
    assert not has_nan(np.array([np.inf, -np.inf, 1.0]))
    assert not has_nan(np.array([1e308, 1e308, -1e308]))
    assert has_nan(np.array([np.inf, np.nan]))
    assert has_nan(np.array([[1.0, 2.0], [np.nan, 3.0]]))
    assert not has_nan(np.arange(4))
    assert not has_nan(np.empty(0))
