"""Reading the changes a view is given: annotated rows with multiplicities.

A delta for a relation of arity ``k`` is a DataFrame (or :class:`faq.Factor`)
of ``k`` key columns (bound by position), an optional ``value`` column (the
annotation, one by default) and an optional ``_weight`` column (an integer
multiplicity: +1 adds the annotated row, -1 retracts it; +1 by default).
:func:`read_delta` checks one and brings it to the driver as numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from faq import Factor
from faq.gather import arrow_to_table
from faq.kernel import Table
from faq.rule import VALUE
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["WEIGHT", "Rows", "read_delta", "unknown_message"]

WEIGHT = "_weight"
"""The name of a delta's multiplicity column."""

_ROW = "__row__"


@dataclass(frozen=True)
class Rows:
    """Annotated rows with multiplicities, in the driver.

    ``cols`` are the key columns (by position), ``values`` the annotations
    (None: every one is the semiring's one; rows annotated zero are already
    dropped), ``weights`` the int64 multiplicities (never zero).
    """

    cols: tuple[np.ndarray, ...]
    values: np.ndarray | None
    weights: np.ndarray

    @property
    def rows(self) -> int:
        """Number of rows."""
        return len(self.weights)

    def table(self, vars_: tuple[str, ...]) -> Table:
        """The rows as a table over ``vars_`` (not consolidated; values as they are)."""
        return Table(vars_, self.cols, self.values, unique=False)


def read_delta(
    given: Any, arity: int, S: Semiring, label: str, atom: str, most: int | None = None
) -> Rows | None:
    """Check a delta and read it into the driver (one Spark job for a DataFrame).

    Parameters
    ----------
    given : pyspark.sql.DataFrame or faq.Factor
        The delta (see the module docstring).
    arity : int
        The relation's number of key columns.
    S : Semiring
        The semiring of the annotations.
    label : str
        How messages name the delta, e.g. ``"delta of relation 'E'"``.
    atom : str
        An atom of the relation, for arity messages.
    most : int, optional
        Read at most this many rows; None (nothing read) when there are more.

    Raises
    ------
    TypeError
        ``given`` is neither a DataFrame nor a Factor.
    ValueError
        Wrong number of key columns, null keys or weights, a weight that is not an
        integer, or an annotation outside the semiring.
    """
    from pyspark.sql import DataFrame as SparkDataFrame

    if isinstance(given, Factor):
        if len(given.vars) != arity:
            raise ValueError(_arity_message(label, atom, arity, list(given.vars)))
        if most is not None and given.stats is not None and given.stats.rows > most:
            return None
        t = given.validated(S, label).to_table()
        if most is not None and t.rows > most:
            return None
        return Rows(t.cols, t.values, np.ones(t.rows, dtype=np.int64))
    connect = type(given).__module__.startswith("pyspark.sql.connect")
    if not isinstance(given, SparkDataFrame) and not connect:
        raise TypeError(
            f"{label}: expected a Spark DataFrame or a Factor, got {type(given).__name__}"
        )
    cols = list(given.columns)
    keys = [c for c in cols if c not in (VALUE, WEIGHT)]
    if len(keys) != arity:
        raise ValueError(_arity_message(label, atom, arity, cols))
    if WEIGHT in cols:
        t = given.schema[WEIGHT].dataType.simpleString()
        if t not in ("bigint", "int", "smallint", "tinyint"):
            raise ValueError(
                f"{label}: column {WEIGHT!r} holds multiplicities and must be an integer "
                f"column, not {t}"
            )
    if most is None and given.isLocal():
        # data the client holds (createDataFrame of local rows): collect() reads it
        # without a Spark job (toArrow would run one, ~0.1 s a tick)
        at = _collected(given)
    else:
        at = (given if most is None else given.limit(most + 1)).toArrow()
    if most is not None and at.num_rows > most:
        return None
    return _from_arrow(at, keys, S, label)


def _collected(df: Any) -> pa.Table:
    """``df`` collected as Rows, then as an Arrow table of the same columns and types."""
    import pyarrow as pa

    rows = df.collect()
    names = list(df.columns)
    if not rows:
        return df.limit(0).toArrow()
    cols = list(zip(*rows, strict=True))
    return pa.table({n: pa.array(list(c)) for n, c in zip(names, cols, strict=True)})


def _from_arrow(at: pa.Table, keys: list[str], S: Semiring, label: str) -> Rows:
    import pyarrow as pa

    n = at.num_rows
    if WEIGHT in at.column_names:
        w = at.column(WEIGHT)
        if w.null_count:
            raise ValueError(
                f"{label}: column {WEIGHT!r} has {w.null_count} null multiplicit(ies) (from "
                "incremental.changes: a change type or op it does not know?)"
            )
        weights = w.to_numpy().astype(np.int64)
    else:
        weights = np.ones(n, dtype=np.int64)
    names = [*keys, *([VALUE] if VALUE in at.column_names else [])]
    part = at.select(names).append_column(_ROW, pa.array(np.arange(n, dtype=np.int64)))
    part = part.select([*keys, _ROW, *names[len(keys) :]])
    vars_ = (*(f"k{i}" for i in range(len(keys))), _ROW)
    t = arrow_to_table(part, vars_, S, label, check=True, unique=True, consolidate=False)
    rows = t.cols[-1]
    keep = weights[rows] != 0
    idx = np.flatnonzero(keep)
    values = None if t.values is None else t.values[idx]
    if values is not None and t.values is not None and local_ops(S).dtype is object:
        values = np.asarray(values, dtype=object)
    return Rows(tuple(c[idx] for c in t.cols[:-1]), values, weights[rows][idx])


def _arity_message(label: str, atom: str, arity: int, cols: list[str]) -> str:
    return (
        f"{label}: atom {atom} takes {arity} key column(s) but the delta has "
        f"{len([c for c in cols if c not in (VALUE, WEIGHT)])} (columns found: {cols!r}; the "
        f"annotation column must be named {VALUE!r} and the multiplicity column {WEIGHT!r})"
    )


def unknown_message(rule: Any, unknown: list[str]) -> str:
    """The message for relation names ``rule`` does not have."""
    return (
        f"unknown relation(s) {', '.join(map(repr, unknown))} for {rule}; "
        f"its relations are: {', '.join(rule.relations)}"
    )
