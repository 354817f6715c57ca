"""Small operations on driver tables that the regimes (:mod:`incremental.regimes`) share.

Each works on :class:`faq.kernel.Table` s of keys and annotations in numpy: the
rows of one tick's deltas and the rows of the state they reach, whichever state
(driver or Spark) holds the relations.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

import semirings
from faq.kernel import Table, cat_rows, empty_table, group_reduce, match_keys, with_values
from incremental.deltas import Rows
from semirings import Semiring
from semirings.local import LocalOps, group_starts, local_ops

__all__ = [
    "ANNOTATION",
    "annotation_delta",
    "at_groups",
    "concat",
    "distinct_keys",
    "drop_zeros",
    "empty_table",
    "int_cols",
    "kind",
    "kind_name",
    "present",
    "py",
    "refuse_missing",
    "refuse_negative",
    "repeat_reduce",
    "row_counts",
    "with_values",
]

ANNOTATION = "__value__"
"""The key column that holds a row's annotation in a multiset (``general`` regime)."""

_INT64 = 2**63


def int_cols(vars_: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Empty int64 key columns, one per variable."""
    return tuple(np.empty(0, np.int64) for _ in vars_)


def kind(c: np.ndarray) -> str:
    """``"int"``, ``"float"`` or ``"str"``: the kind of a key column."""
    return "int" if c.dtype.kind in "iu" else ("float" if c.dtype.kind == "f" else "str")


def kind_name(k: str) -> str:
    """A key kind as messages name it."""
    return {"int": "integer", "float": "floating-point", "str": "string"}[k]


def negated(t: Table, W: Semiring, o: LocalOps) -> Table:
    """``t`` with every annotation ⊗-multiplied by ``-1`` of the ring ``W`` (one where
    it has none): its retraction."""
    if not t.rows:
        return t
    t = with_values(t, o)
    neg = np.empty(t.rows, dtype=o.dtype)
    neg[:] = W.neg(W.one)  # type: ignore[misc]
    return Table(t.vars, t.cols, o.mul(t.values, neg))


def drop_zeros(t: Table, o: LocalOps) -> Table:
    """``t`` without the rows annotated zero."""
    if t.values is None or not t.rows:
        return t
    return t.take(np.flatnonzero(o.nonzero(t.values)))


def present(vars_: tuple[str, ...], cols: Sequence[np.ndarray], values: np.ndarray) -> Table:
    """The rows of ``cols``/``values`` whose float annotation is not zero."""
    keep = np.flatnonzero(values != 0)
    return Table(vars_, tuple(c[keep] for c in cols), values[keep])


def concat(a: Table, b: Table) -> Table:
    """The rows of ``a`` then those of ``b`` (same variables; both with annotations)."""
    assert a.values is not None and b.values is not None
    cols, values = cat_rows(a, b)
    if a.values.dtype == object or b.values.dtype == object:
        values = np.asarray(list(a.values) + list(b.values), dtype=object)
    return Table(a.vars, cols, values, unique=False)


def annotation_delta(regime: str, name: str, keys: tuple[str, ...], d: Rows, o: LocalOps) -> Table:
    """A delta's change of each tuple's stored annotation: ``weight · value`` (ring), the
    weight (counting with value one, boolean), consolidated."""
    w = d.weights
    if d.values is None or regime == "boolean":
        values = w.astype(o.dtype)
    elif regime in ("ring", "counting") and o.dtype == np.int64:
        v = d.values.astype(np.int64)
        big = np.abs(v.astype(np.float64)) * np.abs(w.astype(np.float64)) >= _INT64
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise OverflowError(
                f"delta of relation {name!r}: weight {int(w[i])} times value {int(v[i])} "
                "overflows 64-bit integers"
            )
        values = v * w
    else:
        values = (
            d.values * w.astype(d.values.dtype)
            if d.values.dtype != object
            else np.asarray([x * int(k) for x, k in zip(d.values, w, strict=True)], dtype=object)
        )
    return group_reduce(Table(keys, d.cols, values, unique=False), keys, o)


def row_counts(name: str, keys: tuple[str, ...], d: Rows, o: LocalOps) -> Table:
    """``d`` as a multiset delta: each distinct annotated row with its summed weight."""
    values = d.values if d.values is not None else o.ones(np.ones(d.rows, dtype=np.int64))
    ms = Table((*keys, ANNOTATION), (*d.cols, values), d.weights, unique=False)
    with multiplicities(name):
        return group_reduce(ms, ms.vars, local_ops(semirings.INTEGER))


@contextmanager
def multiplicities(name: str) -> Iterator[None]:
    """Turn an int64 overflow of row multiplicities into a message naming the relation."""
    try:
        yield
    except OverflowError as exc:
        raise OverflowError(
            f"relation {name!r}: a row's multiplicity would leave the 64-bit integers "
            "(|count| > 2**63 - 1); the view is unchanged"
        ) from exc


def refuse_negative(name: str, after: Table, semiring: str) -> None:
    """ValueError when a count of ``after`` is negative (counting, boolean)."""
    assert after.values is not None
    neg = np.flatnonzero(after.values < 0)
    if len(neg):
        i = int(neg[0])
        key = tuple(py(c[i]) for c in after.cols)
        raise ValueError(
            f"refused: relation {name!r} would hold {len(neg)} key(s) with a negative "
            f"multiplicity, e.g. {key!r} -> {int(after.values[i])} (a {semiring!r} view can "
            "only retract rows it holds); the view is unchanged"
        )


def refuse_missing(name: str, counts: Table, S: Semiring) -> None:
    """ValueError when a multiset row's count is negative (a retraction of a missing row)."""
    assert counts.values is not None
    neg = np.flatnonzero(counts.values < 0)
    if len(neg):
        i = int(neg[0])
        key = tuple(py(c[i]) for c in counts.cols[:-1])
        raise ValueError(
            f"refused: the delta of relation {name!r} retracts {len(neg)} annotated row(s) "
            f"the relation does not hold, e.g. key {key!r} with value "
            f"{py(counts.cols[-1][i])!r} (in a {S.name!r} view a retraction names a row "
            "that was inserted, with its value); the view is unchanged"
        )


def distinct_keys(cols: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The distinct rows of ``cols``."""
    if not cols:
        return ()
    perm, starts = group_starts(list(cols))
    return tuple(c[perm[starts]] for c in cols)


def repeat_reduce(t: Table, counts: np.ndarray, keys: tuple[str, ...], o: LocalOps) -> Table:
    """Per key, the ⊕ of ``t``'s values each taken its count of times (rows with count > 0).

    ``t.values`` hold the annotations here.  The ⊕ of ``w`` copies of ``x`` is computed in
    closed form as ``x ⊗ (1 ⊕ … ⊕ 1)`` (distributivity): ``w · x`` in the additive
    built-ins, ``x`` for an idempotent ⊕, ``x + ln w`` in ``log``, and for a user semiring
    the ⊕ of ``w`` ones by repeated doubling (``log2 w`` additions), so a row of weight
    ``2**62`` costs what a row of weight one does.
    """
    assert t.values is not None
    keep = np.flatnonzero(counts > 0)
    values, cols, n = t.values[keep], tuple(c[keep] for c in t.cols), counts[keep]
    if values.dtype != o.dtype and o.dtype is not object:
        values = values.astype(o.dtype)
    many = np.flatnonzero(n > 1)
    if len(many):
        values = values.copy()
        values[many] = o.mul(values[many], o.ones(n[many]))
    return group_reduce(Table(keys, cols, values, unique=False), keys, o)


def at_groups(t: Table, groups: Table, o: LocalOps) -> Table:
    """``t``'s annotations at every key of ``groups`` (zero where ``t`` has none)."""
    zero = np.asarray([o.semiring.zero], dtype=o.dtype)
    n = groups.rows if groups.vars else (1 if groups.rows or t.rows else 0)
    values = np.repeat(zero, n)
    if not groups.vars:
        if t.rows and t.values is not None:
            values[:] = t.values[:1]
        return Table((), (), values)
    found, at = match_keys(groups.cols, t.cols)
    if found.any():
        assert t.values is not None
        values[found] = t.values[at[found]]
    return Table(t.vars, groups.cols, values)


def py(x: Any) -> Any:
    """A numpy scalar as a Python value (for messages)."""
    return x.item() if hasattr(x, "item") else x
