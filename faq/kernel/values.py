"""Value conversions: key and annotation arrays typed, checked and consolidated for a semiring.

Every way into the engine (numpy arrays, pandas frames, Arrow batches from
Spark, Python dicts) ends here: keys become int64 or object arrays, annotations
the semiring's numpy dtype, values outside the semiring are refused with a
message naming the relation and column, and repeated keys are ⊕-combined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import semirings
from faq.kernel.rows import DISORDERED, fills_box, key_order
from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import Table, distinct_rows, key_sets
from faq.rule import VALUE
from semirings import Semiring
from semirings import spark as sops
from semirings.local import has_nan, local_ops

__all__ = [
    "dense_array",
    "table_dict",
    "table_frame",
    "witness_dict",
    "check_annotations",
    "check_int64_range",
    "check_key_types",
    "check_members",
    "checked_table",
    "key_array",
    "key_column",
    "key_type",
    "numpy_values",
    "pandas_table",
    "plain_semiring",
    "raw_pandas",
    "scalar_value",
    "spark_type",
    "typed_values",
]


_NESTED = ("struct<", "array<", "list<", "large_list<", "fixed_size_list<", "map<")
_SINGLE = frozenset(
    {"string", "bytes", "integer", "floating", "mixed-integer-float", "decimal", "boolean"}
    | {"datetime", "datetime64", "date", "time", "timedelta", "timedelta64", "empty"}
)
"""pandas' ``infer_dtype`` of an object column of single keys of one kind."""


def key_column(a: np.ndarray, label: str, column: Any, position: int) -> np.ndarray:
    """A local key column as the kernel keeps it: integers as int64; dates as
    ``datetime.date`` and times as pandas ``Timestamp``/``Timedelta`` objects, which read
    back as such (a datetime64[ns] column's own ``tolist`` gives nanoseconds); other
    numbers, strings and booleans as they are.  ValueError for complex numbers, and for
    an object column whose values are not single keys of one kind (dicts, lists, tuples,
    sets; integers mixed with strings): keys are compared, hashed and sorted as single
    values."""
    kind = a.dtype.kind
    if kind in "iu":
        return a.astype(np.int64)
    if kind in "mM":
        if kind == "M" and np.datetime_data(a.dtype)[0] in ("Y", "M", "W", "D"):
            return a.astype("datetime64[D]").astype(object)  # datetime.date, as Spark's
        import pandas as pd

        return pd.Series(a).astype(object).to_numpy()  # Timestamp / Timedelta
    bad = None
    if kind == "c":
        bad = "complex numbers"
    elif kind == "O" and len(a):
        import pandas as pd

        inferred = pd.api.types.infer_dtype(a, skipna=False)
        if inferred not in _SINGLE:
            kinds = sorted({type(x).__name__ for x in a[:1000]})
            bad = f"values of the types {', '.join(kinds)} ({inferred!r})"
    if bad is not None:
        raise ValueError(
            f"{label}: key column {column!r} (position {position}) holds {bad}; keys are "
            "single values of one kind (integers, floats, strings, bytes, booleans, dates, "
            "timestamps): convert the column first"
        )
    return a


def check_key_types(label: str, columns: Sequence[tuple[Any, str]]) -> None:
    """Refuse a key column, of ``columns`` (name and Spark or Arrow type, e.g.
    ``struct<x:int>`` or ``list<item: int64>``, in key order), whose type holds no single
    key: a struct, an array, a map, or nulls only (``void``, ``null``).  A key is
    compared, hashed and grouped as one value.  Reads types only: no data, no job."""
    for position, (column, type_name) in enumerate(columns):
        t = type_name.strip()
        if t in ("void", "null"):
            raise ValueError(
                f"{label}: key column {column!r} (position {position}) holds only nulls "
                f"(type {t}); keys must not be null"
            )
        if t.startswith(_NESTED):
            raise ValueError(
                f"{label}: key column {column!r} (position {position}) has type {t}; keys "
                "are single values (numbers, strings, booleans, dates, timestamps): select "
                "or flatten its fields into key columns of their own"
            )


def plain_semiring(dtype: np.dtype) -> Semiring:
    if dtype == np.bool_:
        return semirings.BOOLEAN
    if np.issubdtype(dtype, np.integer):
        return semirings.INTEGER
    return semirings.REAL


def key_array(values: list[Any]) -> np.ndarray:
    if all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in values):
        return np.asarray(values, dtype=np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def numpy_values(arr: np.ndarray, S: Semiring, label: str) -> np.ndarray:
    """The entries of ``arr`` as the numpy type of ``S``'s annotations, checked for that type
    (not yet for ``S``'s domain: see :func:`check_members`); ``arr`` itself when it already
    is of that type (no copy: the caller copies what it keeps of a caller's array)."""
    t = sops.ops(S).type
    if t == "boolean":
        if arr.dtype != np.bool_:
            raise ValueError(f"{label}: semiring {S.name!r} needs a boolean array, got {arr.dtype}")
        return arr
    if t == "bigint":
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{label}: semiring {S.name!r} needs integers, got {arr.dtype}")
        integral = np.issubdtype(arr.dtype, np.integer)
        if not integral and (not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr))):
            raise ValueError(
                f"{label}: semiring {S.name!r} needs integers; the array holds non-integral"
                " or non-finite values"
            )
        check_int64_range(arr, S, label)
        return arr.astype(np.int64, copy=False)
    if t == "double":
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{label}: semiring {S.name!r} needs numbers, got {arr.dtype}")
        return arr.astype(np.float64, copy=False)
    return arr


def check_int64_range(arr: np.ndarray, S: Semiring, label: str) -> None:
    """ValueError naming the first entry of ``arr`` outside 64-bit integers.

    A float is compared against 2**63 exactly (the largest float below it is
    representable in int64), so no entry is ever wrapped or saturated.
    """
    if arr.size == 0:
        return
    flat = arr.reshape(-1)
    if flat.dtype.kind == "u":
        bad = flat > np.iinfo(np.int64).max
    elif flat.dtype.kind == "f":
        bad = (flat >= 2.0**63) | (flat < -(2.0**63))
    else:
        return
    if bad.any():
        value = flat[np.flatnonzero(bad)[0]].item()
        raise ValueError(
            f"{label}: {value!r} is outside the 64-bit integers of the {S.name!r} semiring "
            f"(from {-(2**63)} to {2**63 - 1}); use the 'real' semiring for larger numbers"
        )


def check_members(values: np.ndarray, S: Semiring, label: str, nan_free: bool = False) -> None:
    """Every annotation is a value of ``S`` (vectorised for the built-ins); ``nan_free``:
    the caller has checked that no annotation is NaN (a pass saved)."""
    flat = values.reshape(-1)
    if not nan_free and flat.dtype == np.float64 and has_nan(flat):
        raise ValueError(f"{label}: NaN is not a value of the {S.name!r} semiring ({S.domain})")
    ok = local_ops(S).valid(flat)
    if not ok.all():
        bad = flat[np.flatnonzero(~ok)[0]]
        S.check_value(bad.item() if hasattr(bad, "item") else bad, label)
        raise ValueError(f"{label}: {bad!r} is not a value of the {S.name!r} semiring")


def check_annotations(values: np.ndarray, S: Semiring, label: str) -> None:
    """ValueError naming ``label`` when an annotation is not a value of ``S``."""
    ok = local_ops(S).valid(values)
    if not ok.all():
        bad = np.flatnonzero(~ok)
        sample = values[bad[0]]
        sample = sample.item() if hasattr(sample, "item") else sample
        raise ValueError(
            f"{label}: column {VALUE!r} has {len(bad)} annotation(s) that are not values of "
            f"the {S.name!r} semiring (domain: {S.domain}), e.g. {sample!r}"
        )


def raw_pandas(
    pdf: Any, keys: list[str], vars_: tuple[str, ...], label: str, *, own: bool = False
) -> Table:
    """Key columns and values of a pandas DataFrame, nulls refused, not yet typed.

    With ``own`` every array is the table's own (a copy where pandas would hand out a
    view of the frame's), so that writing to the frame later leaves the table as it
    was; without it, columns that need no conversion may be views of the frame's."""
    cols = []
    for i, k in enumerate(keys):
        s = pdf[k]
        nulls = int(s.isna().sum())
        if nulls:
            raise ValueError(
                f"{label}: key column {k!r} (position {i}) has {nulls} null value(s); "
                "keys must not be null"
            )
        c = s.to_numpy(copy=own and s.dtype.kind not in "iu")  # integers: astype copies
        if c.dtype.kind == "u" and c.size and c.max() > np.iinfo(np.int64).max:
            raise ValueError(
                f"{label}: key column {k!r} holds {c.max()}, beyond the 64-bit integers keys "
                "are read as"
            )
        cols.append(key_column(c, label, k, i))
    values = pdf[VALUE].to_numpy(copy=own) if VALUE in pdf.columns else None
    return Table(vars_, tuple(cols), values, unique=False)


def pandas_table(pdf: Any, vars_: tuple[str, ...], S: Semiring, label: str, check: bool) -> Table:
    keys = [c for c in pdf.columns if c != VALUE]
    raw = raw_pandas(pdf, keys, vars_, label)
    if check:
        return checked_table(raw, S, label)[0]
    o = local_ops(S)
    values = None if raw.values is None else np.asarray(raw.values, dtype=o.dtype)
    return Table(vars_, raw.cols, values)


def checked_table(raw: Table, S: Semiring, label: str) -> tuple[Table, RelationStats]:
    """``raw`` typed for ``S``, checked (values in the semiring), consolidated, zeros dropped.

    Rows without annotations whose keys are distinct stay without them
    (:func:`~faq.kernel.table.distinct_rows`)."""
    o = local_ops(S)
    values = raw.values
    if values is not None:
        values = typed_values(np.asarray(values), S, label)
        check_annotations(values, S, label)
    table = distinct_rows(Table(raw.vars, raw.cols, values, unique=raw.unique), o)
    return table, table_stats(table)


def typed_values(
    v: np.ndarray, S: Semiring, label: str, given_type: str | None = None
) -> np.ndarray:
    """Annotations as the semiring's dtype; a column of the wrong kind is refused, named
    by ``given_type`` (its type where it was read, e.g. Arrow's ``decimal128(10, 2)``)
    when numpy's would say less (``object``)."""
    t = sops.ops(S).type
    kind = v.dtype.kind
    ok = {
        "bigint": kind in "iu",
        "double": kind in "iuf",
        "boolean": kind == "b",
    }.get(t, True)
    if not ok:
        shown = {"i": "bigint", "u": "bigint", "f": "double", "b": "boolean"}.get(
            kind, given_type or str(v.dtype)
        )
        raise ValueError(
            f"{label}: column {VALUE!r} has type {shown}, but the {S.name!r} semiring holds "
            f"{S.domain}"
        )
    o = local_ops(S)
    if o.dtype is object:
        return sops.python_values(S, v.astype(object))
    if t == "bigint":
        check_int64_range(v, S, f"{label}, column {VALUE!r}")
    return v.astype(o.dtype)


def key_type(a: np.ndarray) -> str:
    """The Spark type name of a local key column; an object column by its Python values
    (``"string"``, ``"double"``..., or ``"mixed (...)"``), inferred by pandas in C."""
    if a.dtype.kind != "O":
        return spark_type(a)
    from pandas.api.types import infer_dtype

    kind = infer_dtype(a, skipna=False)
    names = {"string": "string", "integer": "bigint", "floating": "double", "boolean": "boolean"}
    names |= {"datetime": "timestamp", "datetime64": "timestamp", "date": "date"}
    names |= {"bytes": "binary"}
    if kind in names:
        return names[kind]
    return "string" if kind == "empty" else f"mixed ({kind})"


def spark_type(a: np.ndarray) -> str:
    if a.dtype.kind in "iu":
        return "bigint"
    if a.dtype.kind == "f":
        return "double"
    if a.dtype.kind == "b":
        return "boolean"
    return "string"


def scalar_value(x: Any) -> Any:
    """A numpy scalar as the plain Python scalar."""
    return x.item() if hasattr(x, "item") else x


# -- results: a consolidated table as a dict, a pandas frame, a dense array ---------------
def table_dict(t: Table, S: Semiring) -> dict[tuple[Any, ...], Any]:
    """``{key tuple: annotation}`` of a consolidated table (``()`` for no variables)."""
    values = [S.one] * t.rows if t.values is None else t.values.tolist()
    if not t.vars:
        return {(): values[-1]} if values else {}
    keys = zip(*(c.tolist() for c in t.cols), strict=True)
    return dict(zip(keys, values, strict=True))


def table_frame(t: Table, S: Semiring) -> Any:
    """A table as a pandas DataFrame (key columns, then ``value``), sorted by key.

    The frame owns its columns (writing to it leaves ``t`` as it was): each is one copy
    of the table's, or the sorted rows, and the frame keeps them as they are, one block
    per column, rather than stacking the key columns into a 2-D block.  That copy is
    what a big read-back costs (600 MB for a 25-million-row result: 0.5 to 1.2 s on the
    shared test machine, most of it the first touch of fresh memory).
    """
    import pandas as pd

    data = {v: c for v, c in zip(t.vars, t.cols, strict=True)}
    values = t.values
    data[VALUE] = (
        values if values is not None else local_ops(S).ones(np.ones(t.rows, dtype=np.int64))
    )
    if not t.vars or t.rows < 2 or keys_sorted(t.cols):
        owned = {v: c.copy() for v, c in zip(t.vars, t.cols, strict=True)}  # t's stay t's
        owned[VALUE] = values.copy() if values is not None else _owned(data[VALUE])
        return pd.DataFrame(owned, copy=False)
    pdf = pd.DataFrame(data, copy=False)  # shares t's arrays until the sort takes its rows
    return pdf.sort_values(list(t.vars), kind="stable", ignore_index=True)


def _owned(a: np.ndarray) -> np.ndarray:
    """``a`` (an array made for the frame) when it owns its memory and may be written to,
    else a copy of it."""
    return a if a.base is None and a.flags.owndata and a.flags.writeable else a.copy()


def keys_sorted(cols: Sequence[np.ndarray]) -> bool:
    """Whether the rows of ``cols`` (key columns, the first most significant) are already
    in non-decreasing lexicographic order: one linear pass, for numeric and string columns
    (object columns are never said to be sorted; :func:`faq.kernel.rows.key_order`).  The
    kernel's outputs mostly are, and sorting 25 million sorted rows again took most of a
    read-back."""
    return key_order(cols) != DISORDERED


def _shape(shape: Any, label: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or a ValueError naming what is wrong."""
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"{label}: shape must be a sequence of integers, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 0:
            raise ValueError(
                f"{label}: shape {dims!r} must hold non-negative integers, found {d!r}"
            )
    return tuple(int(d) for d in dims)


def dense_array(t: Table, S: Semiring, shape: Any, label: str) -> np.ndarray:
    """A consolidated table with non-negative integer keys as a dense array of ``shape``
    (default: one more than the largest key per axis); absent entries are ``S.zero``."""
    n = len(t.vars)
    keys = key_sets(t)  # a grid's levels: its keys, without spelling its columns out
    for c in keys:
        if c.dtype.kind not in "iu" or (len(c) and c.min() < 0):
            bad = c[0] if c.dtype.kind not in "iu" else c.min()
            bad = bad.item() if isinstance(bad, np.generic) else bad
            raise ValueError(f"{label}: to_numpy needs non-negative integer keys, found {bad!r}")
    if shape is None:
        shape = tuple(int(c.max()) + 1 if len(c) else 0 for c in keys)
    shape = _shape(shape, label)
    if len(shape) != n:
        raise ValueError(f"{label}: shape {shape} has {len(shape)} axes, expected {n}")
    for c, s in zip(keys, shape, strict=True):
        if len(c) and int(c.max()) >= s:
            raise ValueError(f"{label}: key {int(c.max())} lies outside shape {shape}")
    dtype = {"boolean": bool, "bigint": np.int64}.get(S.spark_type or "", np.float64)
    if not S.has_native_spark and S.spark_type not in ("boolean", "bigint", "double"):
        dtype = object
    values = t.values if t.values is not None else np.full(t.rows, S.one, dtype=dtype)
    if t.grid is not None:  # distinct keys inside the shape: all of it when as many
        whole = all(len(c) == s for c, s in zip(keys, shape, strict=True))
    else:
        whole = fills_box(t.cols, math.prod(shape))  # keys checked inside the shape above
    if whole:
        return np.array(values, dtype=dtype).reshape(shape)  # the caller's copy
    arr = np.full(shape, S.zero, dtype=dtype)
    if n == 0:  # one row at most (the table is consolidated): index () holds it
        if len(values):
            arr[()] = values[-1]
        return arr
    arr[tuple(t.cols)] = values
    return arr


def witness_dict(frame: Any, vars_: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per head key (the ``vars_`` columns of the pandas ``frame``), the values of the other
    columns but ``value`` (the witnesses), as plain Python scalars."""
    bound = [c for c in frame.columns if c not in vars_ and c != VALUE]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in frame.itertuples(index=False, name=None):
        rec = dict(zip(frame.columns, row, strict=True))
        key = tuple(scalar_value(rec[v]) for v in vars_)
        out[key] = {v: scalar_value(rec[v]) for v in bound}
    return out
