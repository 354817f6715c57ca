"""The sparse matrix chain of ``benchmarks/beyond_driver.py``: the matrices, the
reference answer, a checksum to compare answers by, and the Spark peers (a left-to-right
join + groupBy, and MLlib's ``BlockMatrix.multiply``).

A chain is ``M1 · M2 · … · Mk`` with ``Mt`` of shape ``dims[t] × dims[t + 1]``.  Each
matrix has ``nnz × min(rows, cols)`` non-zeros (rounded down) at distinct, uniformly random
positions: ``nnz`` per row of a wide matrix (fewer rows than columns), ``nnz`` per column
of a tall one (on average), so a
path through a narrow dimension fans out again and the answer stays about as sparse as
the inputs.  Values: uniform in ``[0.1, 1)`` for ``real`` (positive, so no sum cancels to
zero), whole numbers 1 … 100 for ``min-plus``.  Each matrix is a table ``(row, col,
value)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.testing import ranges

SHAPE = (1, 10, 1, 100, 1, 10, 1)
"""Default chain shape: ``dims[t] = n // SHAPE[t]`` (n, n/10, n, n/100, n, n/10, n)."""

LETTERS = "ijklmnopqrstuvwxyz"
COLUMNS = ("row", "col", "value")
SEMIRINGS = ("real", "min-plus")


@dataclass(frozen=True)
class Matrix:
    """A sparse matrix as coordinates: ``rows × cols``, entries ``(r[i], c[i], v[i])``."""

    rows: int
    cols: int
    r: np.ndarray
    c: np.ndarray
    v: np.ndarray

    @property
    def nnz(self) -> int:
        return len(self.v)


@dataclass(frozen=True)
class Checksum:
    """What two answers must share: stored entries, the sum and the minimum of their values."""

    entries: int
    total: float
    smallest: float | None

    def differs(self, other: Checksum, rel: float = 1e-9) -> str | None:
        """None when ``other`` agrees (values within ``rel``), else how it differs."""
        if self.entries != other.entries:
            return f"{other.entries:,} entries, reference {self.entries:,}"
        if not math.isclose(self.total, other.total, rel_tol=rel, abs_tol=1e-12):
            return f"values sum to {other.total!r}, reference {self.total!r}"
        if (self.smallest is None) != (other.smallest is None) or (
            self.smallest is not None
            and other.smallest is not None
            and not math.isclose(self.smallest, other.smallest, rel_tol=rel, abs_tol=1e-12)
        ):
            return f"smallest value {other.smallest!r}, reference {self.smallest!r}"
        return None


def chain_dims(n: int, shape: Sequence[int] = SHAPE) -> tuple[int, ...]:
    """``n // d`` for every divisor ``d`` of ``shape`` (at least 1)."""
    if len(shape) < 2 or any(d < 1 for d in shape):
        raise ValueError(f"a chain shape needs at least two divisors ≥ 1, got {list(shape)}")
    return tuple(max(n // d, 1) for d in shape)


def einsum_spec(k: int) -> str:
    """``"ij,jk,...->i?"`` for a chain of ``k`` matrices."""
    if not 1 <= k < len(LETTERS):
        raise ValueError(f"a chain of {k} matrices is not supported")
    return ",".join(LETTERS[t : t + 2] for t in range(k)) + f"->{LETTERS[0]}{LETTERS[k]}"


def random_chain(dims: Sequence[int], nnz: float, semiring: str, seed: int = 0) -> list[Matrix]:
    """The chain's matrices (see the module docstring), reproducible from ``seed``.

    The positions depend on ``seed`` only, so both semirings share one sparsity pattern.
    """
    if semiring not in SEMIRINGS:
        raise ValueError(f"semiring must be one of {SEMIRINGS}, got {semiring!r}")
    pos = np.random.default_rng(seed)
    val = np.random.default_rng([seed, SEMIRINGS.index(semiring)])
    out = []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        want = max(int(nnz * min(a, b)), 1)
        keys = np.sort(pos.choice(a * b, size=min(want, a * b), replace=False))
        r, c = keys // b, keys % b
        if semiring == "real":
            v = val.uniform(0.1, 1.0, size=len(keys))
        else:
            v = val.integers(1, 101, size=len(keys)).astype(np.float64)
        out.append(Matrix(a, b, r, c, v))
    return out


def product(a: Matrix, b: Matrix, semiring: str) -> Matrix:
    """``a · b`` in ``semiring`` by expanding every pair ``a[i, j] b[j, k]`` and reducing
    by ``(i, k)`` (numpy alone; the reference for min-plus)."""
    order = np.argsort(b.r, kind="stable")
    br, bc, bv = b.r[order], b.c[order], b.v[order]
    start = np.searchsorted(br, np.arange(b.rows))
    count = np.searchsorted(br, np.arange(b.rows), side="right") - start
    fan = count[a.c]
    idx = ranges(start[a.c], fan)
    i = np.repeat(a.r, fan)
    k = bc[idx]
    x = np.repeat(a.v, fan)
    x = x * bv[idx] if semiring == "real" else x + bv[idx]
    if len(x) == 0:
        return Matrix(a.rows, b.cols, i, k, x)
    key = i * b.cols + k
    srt = np.argsort(key, kind="stable")
    key, x = key[srt], x[srt]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    red = np.add if semiring == "real" else np.minimum
    v = red.reduceat(x, first)
    key = key[first]
    return Matrix(a.rows, b.cols, key // b.cols, key % b.cols, v)


def reference(mats: Sequence[Matrix], semiring: str) -> Checksum:
    """The chain's checksum: ``scipy.sparse`` products for ``real`` (when scipy is
    installed), :func:`product` otherwise and for ``min-plus``."""
    if semiring == "real":
        try:
            from scipy import sparse
        except ImportError:
            sparse = None
        if sparse is not None:
            acc = None
            for m in mats:
                s = sparse.csr_matrix((m.v, (m.r, m.c)), shape=(m.rows, m.cols))
                acc = s if acc is None else acc @ s
            assert acc is not None
            acc.eliminate_zeros()
            return checksum(acc.data)
    out = mats[0]
    for m in mats[1:]:
        out = product(out, m, semiring)
    return checksum(out.v)


def checksum(values: np.ndarray) -> Checksum:
    """The checksum of an answer's stored values."""
    values = np.asarray(values, dtype=np.float64)
    return Checksum(len(values), float(values.sum()), float(values.min()) if len(values) else None)


def frame_checksum(df: Any, column: str = "value") -> Checksum:
    """The checksum of a DataFrame's ``column`` (one Spark job)."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)), F.sum(column), F.min(column)).first()
    return Checksum(int(row[0]), float(row[1] or 0.0), None if row[2] is None else float(row[2]))


def factor_checksum(out: Any) -> Checksum:
    """The checksum of an engine answer (a ``faq.Factor``), from its rows in the driver
    when it has them, else with one Spark job."""
    t = out.local_table()
    if t is not None:
        values = np.ones(t.rows) if t.values is None else t.values
        return checksum(values)
    return frame_checksum(out.df)


def sql_chain(frames: Sequence[Any], semiring: str) -> Checksum:
    """Spark SQL, left to right: join the product so far with the next matrix on the
    inner index and ``groupBy`` the outer ones (``sum(x * y)`` or ``min(x + y)``)."""
    from pyspark.sql import functions as F

    acc = frames[0].select(
        F.col("row").alias("i"), F.col("col").alias("k"), F.col("value").alias("x")
    )
    for df in frames[1:]:
        nxt = df.select(F.col("row").alias("k"), F.col("col").alias("l"), F.col("value").alias("y"))
        joined = acc.join(nxt, "k")
        agg = (
            F.sum(F.col("x") * F.col("y")) if semiring == "real" else F.min(F.col("x") + F.col("y"))
        )
        acc = joined.groupBy("i", "l").agg(agg.alias("x")).withColumnRenamed("l", "k")
    return frame_checksum(acc, "x")


def dense_bytes(dims: Sequence[int]) -> int:
    """Bytes of the largest left-to-right product of the chain as dense blocks (what
    MLlib's ``BlockMatrix.multiply`` makes)."""
    return max(dims[0] * d * 8 for d in dims[2:]) if len(dims) > 2 else dims[0] * dims[1] * 8


def mllib_chain(frames: Sequence[Any], dims: Sequence[int], block: int) -> Checksum:
    """MLlib, left to right: each matrix a ``CoordinateMatrix`` made a ``BlockMatrix`` of
    ``block × block`` blocks, multiplied with ``BlockMatrix.multiply`` (real only).

    ``multiply`` makes dense result blocks, so the checksum counts their non-zero
    entries (every true entry is positive).
    """
    from pyspark.mllib.linalg.distributed import CoordinateMatrix

    acc = None
    for df, a, b in zip(frames, dims[:-1], dims[1:], strict=True):
        entries = df.select("row", "col", "value").rdd.map(tuple)
        m = CoordinateMatrix(entries, a, b).toBlockMatrix(block, block)
        acc = m if acc is None else acc.multiply(m)
    assert acc is not None

    def block_sums(kv: Any) -> tuple[int, float, float]:
        arr = kv[1].toArray()
        nz = arr[arr != 0]
        return len(nz), float(nz.sum()), float(nz.min()) if len(nz) else math.inf

    n, total, smallest = acc.blocks.map(block_sums).reduce(
        lambda x, y: (x[0] + y[0], x[1] + y[1], min(x[2], y[2]))
    )
    return Checksum(int(n), total, None if smallest == math.inf else smallest)
