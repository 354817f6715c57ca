"""Rows to the cells of a HyperCube grid (faq.kernel.route), against a model: the compiled
placement, its numpy twin, and the hash every atom of a variable agrees on."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from faq.kernel import route as R


@st.composite
def routes(draw):
    """A batch of rows and the routes of up to four atoms over up to 12 cells: each row's
    first cell (-1: none) and the offsets every row of the route spreads over."""
    cells = draw(st.integers(1, 12))
    n = draw(st.integers(0, 40))
    out = []
    for k in range(draw(st.integers(1, 4))):
        offsets = sorted(draw(st.sets(st.integers(0, cells - 1), min_size=1, max_size=cells)))
        top = cells - offsets[-1]  # every base + offset below cells
        base = draw(st.lists(st.integers(-1, top - 1), min_size=n, max_size=n))
        out.append(R.Route(1 << k, np.array(base, dtype=np.int64), np.array(offsets)))
    return n, out, cells


def model(n, rs, cells):
    got: dict[int, dict[int, int]] = {}
    for r in rs:
        for row in range(n):
            if r.base[row] < 0:
                continue
            for o in r.offsets:
                c = got.setdefault(int(r.base[row] + o), {})
                c[row] = c.get(row, 0) | r.bit
    return {c: sorted(rows.items()) for c, rows in got.items() if c < cells}


def as_cells(row, mask, starts):
    return {
        c: list(zip(row[lo:hi].tolist(), mask[lo:hi].tolist(), strict=True))
        for c, (lo, hi) in enumerate(zip(starts[:-1], starts[1:], strict=True))
        if hi > lo
    }


@given(routes())
def test_placed_sends_each_row_once_to_each_cell_with_the_atoms_it_serves(case):
    n, rs, cells = case
    want = model(n, rs, cells)
    row, mask, starts = R.placed(n, rs, cells)
    assert len(starts) == cells + 1 and starts[0] == 0 and starts[-1] == len(row)
    assert as_cells(row, mask, starts) == want
    if rs and n:  # the numpy twin (what runs without numba) gives the same
        bases = np.stack([r.base for r in rs])
        ptr = np.cumsum([0] + [len(r.offsets) for r in rs])
        flat = np.concatenate([r.offsets for r in rs]).astype(np.int64)
        bits = np.array([r.bit for r in rs], dtype=np.int64)
        twin = R._placed_numpy(bases, flat, ptr, bits, cells)
        assert as_cells(*twin) == want


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_key_hash_is_one_function_of_the_integer_whatever_its_dtype(keys):
    a = np.array(keys, dtype=np.int64)
    h = R.key_hash(a)
    assert h.dtype == np.uint64
    assert (R.key_hash(a.astype(object).astype(np.int64)) == h).all()
    small = a[(a >= -(2**31)) & (a < 2**31)]
    assert (R.key_hash(small.astype(np.int32)) == R.key_hash(small)).all()
    # equal keys, equal hashes; a mix that spreads nearby keys over the cells
    assert len(set(R.key_hash(np.arange(64)) % np.uint64(4))) == 4


def test_a_packing_task_splits_its_packs_and_batches_and_they_unpack_to_its_rows(monkeypatch):
    """The packing task, run here as Spark would run it: its rows read in flushes of at most
    READ_PLACES (row, cell) pairs, a cell's rows in packs of at most PACK_ROWS, the packs
    in output batches of about BATCH_BYTES, and what the cells unpack is every row once per
    cell, with its atoms' mask (a relation read by two atoms)."""
    import pyarrow as pa

    from faq.plan.shares import Shares
    from faq.spark import routing

    monkeypatch.setattr(routing, "PACK_ROWS", 7)
    monkeypatch.setattr(routing, "BATCH_BYTES", 2_000)
    monkeypatch.setattr(routing, "READ_PLACES", 100)  # two places a row: flushes of 50 rows
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 50, 200), rng.integers(0, 2**40, 200)
    t = pa.table({"__k0": src, "__k1": dst, "value": rng.integers(1, 5, 200)})
    shares = Shares((("a", 2), ("b", 3)), 6, 0.0, 0.0, True)
    group = routing.Group((0, 1), ((0, 1), (0, 1)), ("bigint", "bigint"))
    packer = routing.Packer(
        0, group, (("a", "b"), ("b", "a")), tuple(routing.grids(shares)), 6, tuple(range(6))
    )
    assert packer.read_rows == 50
    out = list(packer(iter(t.to_batches(max_chunksize=30))))
    assert len(out) > 1  # batches bounded by bytes
    got = routing.unpacked(iter(out))
    assert set(got) <= set(range(6))
    seen = {}
    for cell, by in got.items():
        for p in by[0]:
            assert p.num_rows <= 7
            for m, x, y, v in zip(*(p.column(c).to_pylist() for c in p.column_names), strict=True):
                seen.setdefault((x, y, v), []).append((cell, m))
    h = R.key_hash
    for x, y, v in zip(src.tolist(), dst.tolist(), t.column("value").to_pylist(), strict=True):
        ha, hb = (int(h(np.array([k]))[0] % np.uint64(s)) for k, s in ((x, 2), (y, 3)))
        hb2, ha2 = (int(h(np.array([k]))[0] % np.uint64(s)) for k, s in ((x, 3), (y, 2)))
        want = {}
        want[ha * 3 + hb] = want.get(ha * 3 + hb, 0) | 1  # atom 0 reads (a, b) = (x, y)
        want[ha2 * 3 + hb2] = want.get(ha2 * 3 + hb2, 0) | 2  # atom 1: (b, a) = (x, y)
        assert sorted(seen.pop((x, y, v))) == sorted(want.items()), (x, y)
