"""CSV and Parquet tables: key columns, then optionally a ``value`` column.

A CSV file's first line is its header, unless every field of that line is a
number: then the file has no header, its first line is data, and its columns
are ids named ``c0, c1, ...`` (``header=True``/``False`` overrides the guess;
``sparkfaq --header``/``--no-header``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.io.common import (
    INT64_MAX,
    VALUE,
    ArityError,
    BadLineError,
    InputTable,
    open_bytes,
    show_line,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["csv_has_header", "read_csv_table", "read_parquet_table"]

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_has_header(p: Path) -> bool:
    """Whether a CSV file starts with a header: False when every field of its first
    non-blank line is a number (``1,2`` or ``3, 0.5``), else True."""
    with open_bytes(p) as fh:
        for raw in fh:
            if raw.strip():
                text = raw.decode("utf-8", "replace")
                fields = next(csv.reader([text]), [])
                return not fields or not all(_NUMBER.fullmatch(f.strip()) for f in fields)
    return True


def read_csv_table(
    p: Path, arity: int | None, strict: bool, header: bool | None = None
) -> InputTable:
    """Read a CSV file: key columns, then optionally ``value`` (see :func:`faq.io.load_table`).

    ``header`` None guesses with :func:`csv_has_header`; a file without a
    header has key columns only, named ``c0, c1, ...``.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path = str(p)
    if header is None:
        header = csv_has_header(p)
    bad: list[tuple[int, str]] = []  # (row number among non-blank lines, text)

    def on_bad_row(row: Any) -> str:
        bad.append((row.number, row.text))
        return "skip"

    try:
        table = pcsv.read_csv(
            p,
            read_options=pcsv.ReadOptions(use_threads=False, autogenerate_column_names=not header),
            parse_options=pcsv.ParseOptions(invalid_row_handler=on_bad_row),
            convert_options=pcsv.ConvertOptions(null_values=[""], strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:
        if "Empty CSV file" in str(exc):
            needs = ": a CSV file needs a header line" if header else ""
            raise ValueError(f"{path} is empty{needs}") from None
        raise ValueError(f"{path}: cannot parse as CSV ({exc})") from None
    if not header:
        table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
    nonblank = _NonBlankLines(p)
    bad_numbers = sorted(n for n, _ in bad)

    def locate(i: int) -> str:
        # data row i is non-blank line i + 2 (the header is 1; i + 1 without one),
        # shifted past skipped rows
        n = i + 1 + header
        for b in bad_numbers:
            if b <= n:
                n += 1
            else:
                break
        return f"line {nonblank.physical(n)}"

    first_skipped = None
    if bad:
        number, text = bad[0]
        where = f"line {nonblank.physical(number)}"
        ncols = table.num_columns
        message = f"expected {ncols} comma-separated fields, found {show_line(text.encode())}"
        if strict:
            raise BadLineError(path, where, message)
        first_skipped = f"{where}: {show_line(text.encode())}"
    return _from_arrow(
        table, path, "csv", arity, strict, locate, len(bad), first_skipped, headerless=not header
    )


class _NonBlankLines:
    """Map pyarrow's CSV row numbers (non-blank lines, 1-based) to physical lines."""

    def __init__(self, p: Path) -> None:
        self._p = p
        self._table: list[int] | None = None

    def physical(self, number: int) -> int:
        if self._table is None:
            self._table = []
            with open_bytes(self._p) as fh:
                for lineno, raw in enumerate(fh, 1):
                    if raw.strip():
                        self._table.append(lineno)
        if 1 <= number <= len(self._table):
            return self._table[number - 1]
        return number


def read_parquet_table(path: str | Path, arity: int | None, strict: bool) -> InputTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, PermissionError):
            raise
        raise ValueError(f"{path}: cannot read as Parquet ({exc})") from None
    return _from_arrow(table, str(path), "parquet", arity, strict, None, 0, None)


def _from_arrow(
    table: pa.Table,
    path: str,
    fmt: str,
    arity: int | None,
    strict: bool,
    locate: Callable[[int], str] | None,
    skipped: int,
    first_skipped: str | None,
    headerless: bool = False,
) -> InputTable:
    """Validate and convert a pyarrow table: key columns, then optional ``value``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(table.column_names)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{path}: column name(s) {', '.join(map(repr, dupes))} repeat")
    keys = [n for n in names if n != VALUE]
    if arity is not None and len(keys) != arity and headerless:
        raise ArityError(
            path,
            len(keys),
            arity,
            f"{path} has {len(keys)} column(s) but {arity} are expected; its first line holds "
            "only numbers, so it is read as data without a header and every column as ids "
            f"(to give annotations, add a header line naming the columns, and a {VALUE!r} column)",
        )
    if arity is not None and len(keys) != arity:
        raise ArityError(
            path,
            len(keys),
            arity,
            f"{path} has {len(keys)} key column(s) {keys!r} but {arity} are expected "
            f"(columns: {names!r}; an annotation column must be named {VALUE!r})",
        )
    if not keys:
        raise ValueError(f"{path} has no key column (columns: {names!r})")

    def where_in_file(i: int) -> str:
        return locate(i) if locate is not None else f"row {i + 1}"

    # rows with an empty key or value are malformed lines
    kept: np.ndarray | None = None  # file row of each kept row, once rows are dropped
    null = None
    for n in names:
        col = table.column(n)
        if col.null_count:
            m = pc.is_null(col)
            null = m if null is None else pc.or_(null, m)
    if null is not None:
        mask = null.to_numpy(zero_copy_only=False)
        dropped = np.flatnonzero(mask)
        first = int(dropped[0])
        empty = [n for n in names if table.column(n)[first].as_py() is None]
        message = f"empty {', '.join(map(repr, empty))} (keys and {VALUE!r} must not be empty)"
        if strict:
            raise BadLineError(path, where_in_file(first), message)
        kept = np.flatnonzero(~mask)
        table = table.take(pa.array(kept))
        skipped += len(dropped)
        if first_skipped is None:
            first_skipped = f"{where_in_file(first)}: {message}"

    def where(i: int) -> str:
        return where_in_file(i if kept is None else int(kept[i]))

    key_arrays = [_key_column(table.column(n), path, n) for n in keys]
    values = None
    if VALUE in names:
        values = _value_column(table.column(VALUE), path, where)
    return InputTable(
        path=path,
        format=fmt,
        columns=tuple(keys),
        keys=key_arrays,
        values=values,
        skipped=skipped,
        first_skipped=first_skipped,
        _locate=where,
    )


def _key_column(col: pa.ChunkedArray, path: str, name: str) -> np.ndarray:
    import pyarrow as pa

    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t) and len(col) and col.to_numpy().max() > INT64_MAX:
            raise ValueError(f"{path}: key column {name!r} has ids beyond the 64-bit range")
        return col.to_numpy().astype(np.int64)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return np.array(col.to_pylist(), dtype=str)
    if pa.types.is_null(t) and len(col) == 0:
        return np.empty(0, dtype=np.int64)
    raise ValueError(
        f"{path}: key column {name!r} has type {t}; key columns must hold integers or strings"
    )


def _value_column(col: pa.ChunkedArray, path: str, where: Callable[[int], str]) -> np.ndarray:
    import pyarrow as pa

    t = col.type
    if pa.types.is_integer(t):
        return col.to_numpy().astype(np.int64)
    if pa.types.is_floating(t):
        return col.to_numpy().astype(np.float64)
    if pa.types.is_boolean(t):
        return col.to_numpy(zero_copy_only=False).astype(bool)
    if pa.types.is_null(t) and len(col) == 0:
        return np.empty(0, dtype=np.float64)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        for i, x in enumerate(col.to_pylist()):
            try:
                float(x)
            except (TypeError, ValueError):
                raise BadLineError(
                    path,
                    where(i),
                    f"{VALUE!r} is {x!r}; annotations must be numbers or true/false",
                    skippable=False,
                ) from None
    raise ValueError(
        f"{path}: column {VALUE!r} has type {t}; annotations must be numbers or true/false"
    )
