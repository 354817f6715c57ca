"""Semiring operations on numpy arrays: the local side of every semiring.

The local kernels (:mod:`faq.kernel`, in the driver or inside Spark tasks)
compute with these: ⊗ of two arrays, ⊕ of each segment of a sorted array
(``reduceat``), the ⊕ of ``n`` copies of one (annotations of relations given
without a ``value`` column), the zero test and the validity test.  A semiring
that declares :class:`~semirings.core.NumpyOps` (every built-in, see
:mod:`semirings.builtins`) runs those; one that does not (a user-defined
semiring) runs its own Python functions element by element.

64-bit integer semirings (``counting``, ``integer``) raise OverflowError where
Spark's ANSI mode would, instead of wrapping around; the check is exact
(a float estimate flags candidates, Python integers decide):

>>> import numpy as np, semirings
>>> from semirings.local import local_ops
>>> o = local_ops(semirings.INTEGER)
>>> o.mul(np.array([2, 3]), np.array([5, -1])).tolist()
[10, -3]
>>> o.reduceat(np.array([1, 2, 3, 4]), np.array([0, 1])).tolist()
[1, 9]
>>> o.mul(np.array([2**62]), np.array([4]))
Traceback (most recent call last):
...
OverflowError: 'integer' product overflowed 64-bit integers
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from semirings.core import Semiring, guarded

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["LocalOps", "local_ops"]


@dataclass(frozen=True)
class LocalOps:
    """⊗, segment ⊕, n-fold ⊕ of one and the zero test of one semiring, on numpy arrays.

    Attributes
    ----------
    semiring : Semiring
        The semiring.
    dtype : numpy dtype
        The dtype of annotation arrays (``object`` for a user-defined semiring).
    mul : callable
        ``(a, b) -> a ⊗ b`` elementwise.
    reduceat : callable
        ``(values, starts) -> out``: ``out[i]`` is the ⊕ of
        ``values[starts[i]:starts[i + 1]]`` (the last segment runs to the end);
        ``starts`` is increasing and every segment is non-empty.
    ones : callable
        ``(counts) -> out``: ``out[i]`` is the ⊕ of ``counts[i]`` copies of one
        (``counts[i] ≥ 1``): a count in ``counting``, ``log(n)`` in ``log``, one
        for an idempotent ⊕.
    nonzero : callable
        ``(values) -> bool array``: True where the value is not the semiring zero.
    check : callable
        ``(values) -> bool array``: True where the value belongs to the semiring
        (see :meth:`valid`).
    """

    semiring: Semiring
    dtype: Any
    mul: Callable[[np.ndarray, np.ndarray], np.ndarray]
    reduceat: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ones: Callable[[np.ndarray], np.ndarray]
    nonzero: Callable[[np.ndarray], np.ndarray]
    check: Callable[[np.ndarray], np.ndarray]

    def valid(self, values: np.ndarray) -> np.ndarray:
        """True where a value belongs to the semiring (vectorised when it declares numpy ops).

        ``values`` are already of ``dtype`` (a column of the semiring's type).
        """
        return self.check(np.asarray(values))

    def total(self, values: np.ndarray) -> Any:
        """⊕ of all ``values`` as a plain Python scalar (the zero for none)."""
        if len(values) == 0:
            return self.semiring.zero
        out = self.reduceat(np.asarray(values, dtype=self.dtype), np.zeros(1, dtype=np.int64))
        x = out[0]
        return x.item() if hasattr(x, "item") else x

    def reduce(self, df: pd.DataFrame, keys: Sequence[str], col: str) -> pd.DataFrame:
        """⊕ of ``col`` per distinct ``keys`` (one row for no keys; none for no rows)."""
        import pandas as pd

        keys = list(keys)
        if df.empty:
            return df[[*keys, col]].iloc[:0]
        values = df[col].to_numpy()
        if self.dtype is not object:
            values = values.astype(self.dtype, copy=False)
        if not keys:
            return pd.DataFrame({col: pd.Series([self.total(values)], dtype=self.dtype)})
        cols = [df[k].to_numpy() for k in keys]
        perm, starts = group_starts(cols)
        out = {k: c[perm][starts] for k, c in zip(keys, cols, strict=True)}
        out[col] = self.reduceat(values[perm], starts)
        return pd.DataFrame(out)


def group_starts(cols: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A permutation that sorts rows by ``cols`` and the start of each group of equal rows.

    >>> perm, starts = group_starts([np.array([3, 1, 3, 2])])
    >>> perm.tolist(), starts.tolist()
    ([1, 3, 0, 2], [0, 1, 2])
    """
    n = len(cols[0])
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    perm = sort_rows(cols)
    return perm, run_starts([c[perm] for c in cols])


def run_starts(cols: Sequence[np.ndarray]) -> np.ndarray:
    """Where each run of equal rows of the already sorted, non-empty ``cols`` starts (one
    run when there are no columns).

    >>> run_starts([np.array([1, 1, 2, 3, 3])]).tolist()
    [0, 2, 3]
    """
    if not cols:
        return np.zeros(1, dtype=np.int64)
    change = np.zeros(len(cols[0]), dtype=bool)
    change[0] = True
    for c in cols:
        change[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(change)


def equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise ``a == b`` of two annotation arrays, as the values' own ``==`` says.

    Object arrays (user semirings: Python ints of any size, strings, tuples) are
    compared value by value, so a tuple is one value, never broadcast.
    """
    if a.dtype == object or b.dtype == object:
        return np.fromiter(
            (bool(x == y) for x, y in zip(a.tolist(), b.tolist(), strict=True)),
            dtype=bool,
            count=len(a),
        )
    return np.asarray(a == b)


def member(col: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``col`` is one of ``values`` (sorted, distinct), with no sort of the
    column (``np.isin`` sorts both): for many integer rows and values spanning at most a
    few times as many integers, one load a row from a table over that span; otherwise a
    binary search a row.

    >>> member(np.array([4, 1, 9]), np.array([1, 4, 7])).tolist()
    [True, True, False]
    """
    if len(values) == 0:
        return np.zeros(len(col), dtype=bool)
    if len(values) == 1:
        return col == values[0]
    if len(col) >= _DENSE_MEMBER_ROWS and _fits_int64(col) and _fits_int64(values):
        lo, hi = int(values[0]), int(values[-1])
        if hi - lo < _DENSE_MEMBER_SPAN * len(col) + (1 << 16):
            return _member_dense(col, values, lo, hi)
    pos = np.searchsorted(values, col)
    return values[np.minimum(pos, len(values) - 1)] == col


_DENSE_MEMBER_ROWS = 64
_DENSE_MEMBER_SPAN = 8
"""A table of the values' span (bytes) is worth building for a column of at least this
many rows when the span is at most this many times the rows (plus 64 KiB): one load a
row, where a binary search costs log2(values) loads (500,000 rows against 1,850 values:
1 ms against 30 ms on this project's 2-core machine)."""


def _fits_int64(a: np.ndarray) -> bool:
    """Integers that int64 holds (uint64 may not)."""
    return a.dtype.kind == "i" or (a.dtype.kind == "u" and a.dtype.itemsize < 8)


def _member_dense(col: np.ndarray, values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """:func:`member` by a table over ``lo … hi`` (``values``' span, integers).  Each
    offset ``col - lo`` is computed in int64 and read as unsigned: one outside the span
    stays outside it even where the subtraction wraps (the span is less than 2**63)."""
    table = np.zeros(hi - lo + 2, dtype=bool)
    table[np.subtract(values, lo, dtype=np.int64)] = True  # the last slot stays False
    at = np.subtract(col, lo, dtype=np.int64).view(np.uint64)
    np.minimum(at, hi - lo + 1, out=at)
    return table[at]


def has_nan(a: np.ndarray) -> bool:
    """Whether the float array ``a`` holds a NaN.

    Its sum is NaN only when it does, or when it holds both infinities (or sums past
    both): one reduction without a temporary array decides almost every array, and
    ``np.isnan`` then decides the rest.
    """
    if a.dtype.kind not in "fc" or not a.size:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(a, axis=None)
    if not np.isnan(total):
        return False
    return bool(np.isnan(a).any())


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (as :func:`numpy.unique`).

    By sorting: numpy 2.4's hash-based ``unique`` is 5-15x slower on the int64
    key columns the engine handles (1.1 ms against 17 ms for 76,000 values).

    >>> distinct(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    if a.dtype == object or a.ndim != 1:
        return np.unique(a)
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def count_distinct(a: np.ndarray) -> int:
    """The number of distinct values of ``a`` (``len(distinct(a))``).

    Integers in a range of at most a few times their number are counted by presence
    (one linear pass, no sort: about 10x faster on the 5 million keys of a chain's
    intermediate); anything else by :func:`distinct`.

    >>> count_distinct(np.array([3, 1, 3, 2]))
    3
    """
    lo = _narrow(a)
    if lo is None:
        return len(distinct(a))
    seen = np.zeros(int(a.max()) - lo + 1, dtype=bool)
    seen[a - lo if lo else a] = True
    return int(np.count_nonzero(seen))


def value_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_counts=True)``: integers in a range of at most a few times
    their number by one count per value (a linear pass, no sort: 3 to 10 times faster).

    >>> [x.tolist() for x in value_counts(np.array([3, 1, 3]))]
    [[1, 3], [1, 2]]
    """
    lo = _narrow(a)
    if lo is None:
        return np.unique(a, return_counts=True)
    idx = a.astype(np.int64, copy=False)
    counts = np.bincount(idx - lo if lo else idx)
    present = np.flatnonzero(counts)
    return (present + lo).astype(a.dtype), counts[present]


def _narrow(a: np.ndarray) -> int | None:
    """The lowest value of ``a`` when it holds integers (one dimension, int64 range) in a
    range of at most a few times their number; None otherwise."""
    if a.ndim != 1 or a.dtype.kind not in "iu" or not len(a):
        return None
    lo, hi = int(a.min()), int(a.max())
    return lo if hi - lo < 4 * len(a) + 1024 and hi < 2**63 else None


def sort_rows(cols: Sequence[np.ndarray]) -> np.ndarray:
    """A permutation sorting rows lexicographically by ``cols`` (first column first).

    Integer columns whose value ranges multiply to less than 2**62 are sorted
    as one combined key (several times faster than :func:`numpy.lexsort`).
    """
    if len(cols) == 1:
        return np.argsort(cols[0], kind="stable")
    coded = row_keys(cols)
    if coded is not None:
        return np.argsort(coded[2], kind="stable")
    return np.lexsort(tuple(reversed(cols)))


def row_keys(cols: Sequence[np.ndarray]) -> tuple[list[int], list[int], np.ndarray] | None:
    """:func:`row_codes`, or, where the last column is floats and the others integers
    (a weight kept as a key: a multiset of weighted rows), each row as one complex128
    whose real part codes the integers and whose imaginary part is the float.  numpy
    orders complex numbers by real part, then imaginary part, so these codes order the
    rows as their keys do.  The lowest values and spans are the integer columns'.  None
    when neither applies, a float is NaN, or the integer codes pass 2**53 (the float
    mantissa).

    >>> row_keys([np.array([2, 1, 1]), np.array([0.5, 3.0, -1.0])])[2].tolist()
    [(1+0.5j), 3j, -1j]
    """
    coded = row_codes(cols)
    if coded is not None or len(cols) < 2 or cols[-1].dtype.kind != "f":
        return coded
    head = row_codes(cols[:-1])
    last = cols[-1]
    if head is None or head[2].max() >= 2**53 or np.isnan(last).any():
        return None
    return head[0], head[1], complex_codes(head[2], last)


def key_codes(
    keys: Sequence[np.ndarray], lows: Sequence[int], spans: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``keys`` coded as :func:`row_keys` codes rows whose integer columns
    have these lowest values and spans (complex codes when ``keys`` has one more, float,
    column), and whether the row lies inside those spans (a row outside has no code
    among theirs).

    >>> lows, spans, codes = row_keys([np.array([2, 1]), np.array([5, 7])])
    >>> key_codes([np.array([1, 9]), np.array([7, 7])], lows, spans)[1].tolist()
    [True, False]
    """
    n = len(keys[0])
    if (
        n <= _FEW_ROWS
        and len(lows) == len(keys)
        and all(isinstance(c, np.ndarray) and c.dtype.kind in "iu" for c in keys)
    ):
        return _few_key_codes(keys, lows, spans)
    ok = np.ones(n, dtype=bool)
    code: np.ndarray = np.zeros(n, dtype=np.int64)
    for c, lo, span in zip(keys, lows, spans, strict=False):
        off = np.asarray(c).astype(np.int64) - lo
        ok &= (off >= 0) & (off < span)
        code = code * span + np.where(ok, off, 0)
    if len(lows) < len(keys):  # a float last column: complex codes
        last = np.asarray(keys[-1], dtype=np.float64)
        ok &= ~np.isnan(last)
        code = complex_codes(code, last)
    return code, ok


_FEW_ROWS = 4
"""Up to this many rows, :func:`key_codes` of integer keys runs on Python integers (a
one-edge tick's key: about 2 µs, against 11 µs for the array operations)."""


def _few_key_codes(
    keys: Sequence[np.ndarray], lows: Sequence[int], spans: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_codes` of a few rows of integer columns, row by row: the same codes
    (a column outside its span, and every later one, adds 0) and flags."""
    cols = [c.tolist() for c in keys]
    codes, oks = [], []
    for r in range(len(cols[0])):
        code, ok = 0, True
        for col, lo, span in zip(cols, lows, spans, strict=True):
            off = col[r] - lo
            ok = ok and 0 <= off < span
            code = code * span + (off if ok else 0)
        codes.append(code)
        oks.append(ok)
    return np.array(codes, dtype=np.int64), np.array(oks, dtype=bool)


def complex_codes(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """``real + i·imag`` as complex128, exactly (``1j * inf`` would put NaN in the real part).

    >>> complex_codes(np.array([2]), np.array([np.inf])).tolist()
    [(2+infj)]
    """
    out = np.empty(len(real), dtype=np.complex128)
    out.real, out.imag = real, imag
    return out


def row_codes(cols: Sequence[np.ndarray]) -> tuple[list[int], list[int], np.ndarray] | None:
    """Each row of integer columns as one int64 code that orders the rows as their keys
    (first column most significant): the lowest value and the span of every column, and
    the codes; None when a column is not integers, there is no row, or the spans
    multiply to 2**62 or more.

    >>> row_codes([np.array([2, 1]), np.array([5, 7])])[2].tolist()
    [3, 2]
    """
    if not cols or not len(cols[0]) or any(c.dtype.kind not in "iu" for c in cols):
        return None
    lows = [int(c.min()) for c in cols]
    spans = [int(c.max()) - lo + 1 for c, lo in zip(cols, lows, strict=True)]
    total = 1
    for s in spans:
        total *= s
    if total >= 2**62:
        return None
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for c, lo, s in zip(cols, lows, spans, strict=True):
        key = key * s + (c.astype(np.int64) - lo)
    return lows, spans, key


def _generic(S: Semiring) -> LocalOps:
    add = guarded(S, "add")
    umul = np.frompyfunc(guarded(S, "mul"), 2, 1)

    def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(umul(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))

    def reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=object)
        ends = np.append(starts[1:], len(v))
        out = np.empty(len(starts), dtype=object)
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[i] = functools.reduce(add, v[s:e])
        return out

    def ones(counts: np.ndarray) -> np.ndarray:
        cache: dict[int, Any] = {}
        out = np.empty(len(counts), dtype=object)
        for i, c in enumerate(np.asarray(counts, dtype=np.int64).tolist()):
            if c not in cache:
                cache[c] = _times_one(S, c)
            out[i] = cache[c]
        return out

    def nonzero(v: np.ndarray) -> np.ndarray:
        return np.array([x != S.zero for x in v], dtype=bool)

    def ok(x: Any) -> bool:
        try:
            return bool(S.contains(x.item() if hasattr(x, "item") else x))  # type: ignore[misc]
        except Exception:  # a membership test that fails is a "no"
            return False

    def check(v: np.ndarray) -> np.ndarray:
        return np.fromiter((ok(x) for x in v), dtype=bool, count=len(v))

    return LocalOps(S, object, mul, reduceat, ones, nonzero, check)


def _times_one(S: Semiring, n: int) -> Any:
    """The ⊕ of ``n ≥ 1`` copies of one, by doubling (``log2 n`` additions)."""
    result, power = None, S.one
    while n:
        if n & 1:
            result = power if result is None else S.add(result, power)
        n >>= 1
        if n:
            power = S.add(power, power)
    return result


def local_ops(S: Semiring) -> LocalOps:
    """The numpy operations of ``S``: its declared :class:`~semirings.core.NumpyOps`, or
    its Python functions element by element when it declares none."""
    n = S.numpy
    if n is None:
        return _generic(S)
    return LocalOps(S, n.dtype, n.mul, n.reduceat, n.ones, n.nonzero, n.valid)
