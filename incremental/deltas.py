"""Reading the changes a view is given: annotated rows with multiplicities.

A view's changes (its initial contents and every ``step`` delta) follow the one
rule every entry point follows (:func:`faq.relation_kind`; README, Semantics):
a relation of arity ``k`` is given as rows of ``k`` key columns (bound by
position), an optional ``value`` column (the annotation, one by default) and,
in a view's changes only, an optional ``_weight`` column (an integer
multiplicity: +1 adds the annotated row, -1 retracts it; +1 by default).  The
rows may be

* a Spark DataFrame, or a :class:`faq.Factor` (no ``_weight``);
* a pandas DataFrame or a pyarrow Table or RecordBatch: columns as in a Spark
  DataFrame (the pandas index is ignored; NaN is null, as in Spark's
  ``createDataFrame``);
* a numpy structured array, whose fields are columns as above (keys by
  position, then ``value`` and ``_weight`` by name);
* a number or 0-d array: the annotation of the one tuple of a relation without keys.

A plain numpy array of one or more dimensions is refused (a TypeError naming
``Factor.from_numpy`` for a dense tensor and ``pandas.DataFrame(arr, columns=...)``
for rows of keys), as in ``solve``: the same object means the same everywhere.

:func:`read_delta` checks one and brings it to the driver as numpy arrays;
a pandas, Arrow or numpy delta runs no Spark job.  :func:`to_spark` turns one
into a Spark DataFrame, once, for a view whose state is in Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from faq import VALUE, Factor, relation_kind
from faq.kernel import Table, check_annotations, check_key_types, typed_values
from faq.spark import arrow_to_table
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = [
    "WEIGHT",
    "Rows",
    "check_weight_type",
    "key_names",
    "layout",
    "read_delta",
    "to_spark",
    "unknown_message",
]

WEIGHT = "_weight"
"""The name of a delta's multiplicity column."""

_ROW = "__row__"
_INTEGERS = ("bigint", "int", "smallint", "tinyint")
# Arrow types by the names Spark gives the types it reads them as (messages name types alike)
_SPARK_NAMES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "halffloat": "float",
    "float": "float",
    "double": "double",
    "string": "string",
    "large_string": "string",
    "string_view": "string",
    "bool": "boolean",
    "null": "void",
    "date32[day]": "date",
}


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
    """Check a delta and read it into the driver (one Spark job for a DataFrame
    Spark does not hold in the client; none for pandas, Arrow and numpy).

    Parameters
    ----------
    given : pyspark.sql.DataFrame, faq.Factor, pandas.DataFrame, pyarrow.Table, \
            pyarrow.RecordBatch, numpy structured array or number
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
        ``given`` is none of the kinds above, or a plain numpy array (ambiguous).
    ValueError
        Wrong number of key columns, null keys or weights, a weight that is not an
        integer, or an annotation outside the semiring.
    """
    if isinstance(given, Factor):
        if len(given.vars) != arity:
            raise ValueError(_arity_message(label, atom, arity, list(given.vars)))
        if most is not None and given.stats is not None and given.stats.rows > most:
            return None
        t = given.validated(S, label).to_table()
        if most is not None and t.rows > most:
            return None
        return Rows(t.cols, t.values, np.ones(t.rows, dtype=np.int64))
    if relation_kind(given, label) != "spark":  # a TypeError for what is not accepted
        plain = _plain_columns(given)
        if plain is not None:  # numpy columns: read as they are, no Arrow round trip
            lay = layout(plain[0], arity, label, atom)
            if most is not None and len(plain[1][0]) > most:
                return None
            return _from_numpy(plain[1], lay, S, label)
        at = _local_arrow(given, label)
        lay = layout(at.column_names, arity, label, atom)
        check_key_types(label, [(at.column_names[k], str(at.column(k).type)) for k in lay[0]])
        if lay[2] is not None:
            check_weight_type(_type_name(at.column(lay[2]).type), label)
        if most is not None and at.num_rows > most:
            return None
        return _from_arrow(at, lay, S, label)
    schema = given.schema  # one round trip; columns and types both come from it
    cols = schema.fieldNames()
    lay = layout(cols, arity, label, atom)
    check_key_types(label, [(cols[k], schema.fields[k].dataType.simpleString()) for k in lay[0]])
    if lay[2] is not None:
        check_weight_type(schema.fields[lay[2]].dataType.simpleString(), label)
    if most is None and given.isLocal():
        # data the client holds (createDataFrame of local rows): collect() reads it
        # without a Spark job (toArrow would run one, ~0.1 s a tick)
        at = _collected(given)
    else:
        at = (given if most is None else given.limit(most + 1)).toArrow()
    if most is not None and at.num_rows > most:
        return None
    return _from_arrow(at, lay, S, label)


def to_spark(given: Any, label: str) -> Any:
    """``given`` as a Spark DataFrame of the same columns when it is a pandas, Arrow or
    numpy delta (one conversion, for a view whose state is in Spark); a Spark DataFrame,
    a Factor or None (no contents) as it is.

    Raises
    ------
    TypeError
        What the one rule refuses (:func:`faq.relation_kind`): a plain numpy array, a list...
    ValueError
        A structured array that is not 1-D, or a column Arrow cannot read (the view's own
        checks of a Spark delta follow).
    """
    if given is None or isinstance(given, Factor) or relation_kind(given, label) == "spark":
        return given
    from faq.session import get_spark

    at = _local_arrow(given, label)
    return get_spark().createDataFrame(at)


def layout(
    cols: list[str], arity: int, label: str, atom: str
) -> tuple[list[int], int | None, int | None]:
    """Positions of the key columns, of ``value`` and of ``_weight`` (None: absent)."""
    for special in (VALUE, WEIGHT):
        if cols.count(special) > 1:
            raise ValueError(
                f"{label}: column {special!r} appears {cols.count(special)} times "
                f"(columns found: {cols!r})"
            )
    keys = [i for i, c in enumerate(cols) if c not in (VALUE, WEIGHT)]
    if len(keys) != arity:
        raise ValueError(_arity_message(label, atom, arity, cols))
    value = cols.index(VALUE) if VALUE in cols else None
    weight = cols.index(WEIGHT) if WEIGHT in cols else None
    return keys, value, weight


def check_weight_type(type_name: str, label: str) -> None:
    if type_name not in (*_INTEGERS, "void"):
        raise ValueError(
            f"{label}: column {WEIGHT!r} holds multiplicities and must be an integer "
            f"column, not {type_name}"
        )


def _type_name(t: pa.DataType) -> str:
    """An Arrow type by the name Spark gives it (``bigint`` for ``int64``, ...)."""
    return _SPARK_NAMES.get(str(t), str(t))


def _local_arrow(given: Any, label: str) -> pa.Table:
    """A pandas, Arrow, structured-array or scalar delta as an Arrow table of its columns:
    NaN read as null, dictionary columns decoded, unsigned integers as int64."""
    import pyarrow as pa

    if isinstance(given, np.ndarray | np.generic | bool | int | float):
        names, arrays = _numpy_columns(np.asarray(given), label)
    elif isinstance(given, pa.Table | pa.RecordBatch):
        names, arrays = [str(c) for c in given.column_names], list(given.columns)
    else:  # pandas: numpy columns as arrays (pa.array of a Series costs 5x more)
        names = [str(c) for c in given.columns]
        arrays = [s.to_numpy() if isinstance(s.dtype, np.dtype) else s for _, s in given.items()]
    out = []
    for name, a in zip(names, arrays, strict=True):
        try:
            if not isinstance(a, pa.Array | pa.ChunkedArray):
                a = pa.array(a, from_pandas=True)
            if pa.types.is_dictionary(a.type):
                a = a.cast(a.type.value_type)
            if pa.types.is_unsigned_integer(a.type):
                a = _signed(a, name, label)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"{label}: column {name!r} cannot be read: {exc}") from None
        out.append(a)
    return pa.Table.from_arrays(out, names=names)


def _numpy_columns(a: np.ndarray, label: str) -> tuple[list[str], list[np.ndarray]]:
    """A structured array's fields, or a scalar as the one ``value`` of a relation without
    keys."""
    if a.dtype.names is None:  # a 0-d array (relation_kind refused the others)
        return [VALUE], [a.reshape(1)]
    if a.ndim != 1:
        raise ValueError(
            f"{label}: a structured array delta must be 1-D (one record a row), got shape {a.shape}"
        )
    return list(a.dtype.names), [a[n] for n in a.dtype.names]


def _signed(a: Any, name: str, label: str) -> Any:
    """An unsigned integer Arrow column as int64, refused past the int64 range."""
    import pyarrow as pa
    import pyarrow.compute as pc

    top = pc.max(a).as_py()
    if top is not None and top > np.iinfo(np.int64).max:
        raise ValueError(
            f"{label}: column {name!r} holds {top}, beyond the 64-bit integers keys and "
            "multiplicities are read as"
        )
    return a.cast(pa.int64())


def _collected(df: Any) -> pa.Table:
    """``df`` collected as Rows, then as an Arrow table of the same columns and types."""
    import pyarrow as pa

    rows = df.collect()
    if not rows:
        return df.limit(0).toArrow()
    cols = list(zip(*rows, strict=True))
    return pa.Table.from_arrays([pa.array(list(c)) for c in cols], names=list(df.columns))


def _plain_columns(given: Any) -> tuple[list[str], list[np.ndarray]] | None:
    """A pandas delta's names and columns when every column is a numpy array of signed
    integers, or a ``value`` column of floats without NaN (what a tick's delta mostly
    is): read without Arrow, a tenth of a one-edge tick.  None for anything else
    (unsigned, nullable, categorical or object columns, NaN, other kinds of delta),
    which :func:`_local_arrow` reads and checks."""
    if type(given).__name__ != "DataFrame" or not hasattr(given, "items") or 0 in given.shape:
        return None
    if given.shape[0] <= 4096:  # a small delta of integers: one copy, no Series per column
        names = list(given.columns)
        whole = given.to_numpy()
        if whole.dtype.kind == "i" and all(isinstance(n, str) for n in names):
            return names, [whole[:, k] for k in range(len(names))]
    names, arrays = [], []
    for name, s in given.items():
        dtype = s.dtype
        if not isinstance(dtype, np.dtype) or not isinstance(name, str):
            return None
        a = s.to_numpy()
        if dtype.kind == "f" and name == VALUE:
            if np.isnan(a).any():
                return None
        elif dtype.kind != "i":
            return None
        names.append(name)
        arrays.append(a)
    return names, arrays


def _from_numpy(
    arrays: list[np.ndarray],
    layout: tuple[list[int], int | None, int | None],
    S: Semiring,
    label: str,
) -> Rows:
    """:func:`_from_arrow` for numpy columns (signed integer keys and weights, no null)."""
    keys, value, weight = layout
    n = len(arrays[0])
    weights = arrays[weight].astype(np.int64) if weight is not None else np.ones(n, np.int64)
    cols = [arrays[i].astype(np.int64) for i in keys]
    if value is None and weights.all():  # a tick's delta mostly: every row kept
        return Rows(tuple(cols), None, weights)
    keep = weights != 0
    values = None
    if value is not None:
        values = typed_values(arrays[value], S, label)
        check_annotations(values, S, label)
        keep &= local_ops(S).nonzero(values)
    if keep.all():
        return Rows(tuple(cols), _as_ops(values, S), weights)
    idx = np.flatnonzero(keep)
    values = None if values is None else _as_ops(values[idx], S)
    return Rows(tuple(c[idx] for c in cols), values, weights[idx])


def _from_arrow(
    at: pa.Table, layout: tuple[list[int], int | None, int | None], S: Semiring, label: str
) -> Rows:
    import pyarrow as pa

    keys, value, weight = layout
    n = at.num_rows
    if weight is not None:
        w = at.column(weight)
        if w.null_count:
            raise ValueError(
                f"{label}: column {WEIGHT!r} has {w.null_count} null multiplicit(ies) (from "
                "incremental.changes: a change type or op it does not know?)"
            )
        weights = w.to_numpy().astype(np.int64, copy=False)
    else:
        weights = np.ones(n, dtype=np.int64)
    if value is not None and (nulls := at.column(value).null_count):
        raise ValueError(
            f"{label}: column {VALUE!r} has {nulls} null annotation(s) (pandas' NaN reads as "
            "null); an annotation is a value of the semiring"
        )
    arrays = [at.column(i) for i in keys] + [pa.array(np.arange(n, dtype=np.int64))]
    names = [*(f"k{i}" for i in range(len(keys))), _ROW]
    if value is not None:
        arrays.append(at.column(value))
        names.append(VALUE)
    part = pa.Table.from_arrays(arrays, names=names)
    t = arrow_to_table(
        part, tuple(names[: len(keys) + 1]), S, label, check=True, unique=True, consolidate=False
    )
    rows = t.cols[-1]
    keep = weights[rows] != 0
    idx = np.flatnonzero(keep)
    values = None if t.values is None else _as_ops(t.values[idx], S)
    return Rows(tuple(c[idx] for c in t.cols[:-1]), values, weights[rows][idx])


def _as_ops(values: np.ndarray | None, S: Semiring) -> np.ndarray | None:
    if values is not None and local_ops(S).dtype is object:
        return np.asarray(values, dtype=object)
    return values


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


def key_names(rule: Any, name: str) -> tuple[str, ...]:
    """Key column names of a relation's state: its first atom's variables, if distinct
    (and the atom has no constants)."""
    atom = next(a for a in rule.atoms if a.relation == name)
    if not atom.consts and len(set(atom.vars)) == len(atom.vars):
        return tuple(atom.vars)
    return tuple(f"c{i}" for i in range(atom.arity))
