"""Matrix Market coordinate files (``.mtx``): ``real``, ``integer`` or ``pattern``;
``general``, ``symmetric`` or ``skew-symmetric``.

Indices stay as written: Matrix Market counts from 1, and so do the ids read
here (no shift to 0-based), so that the same graph written as an edge list and
as a ``.mtx`` has the same ids.  A symmetric file stores one triangle of its
matrix; every reader of whole tables (:func:`read_mtx_table`,
:func:`faq.io.load_table`, :func:`faq.io.read`, ``sparkfaq``) gives both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.io.common import (
    INT64_MAX,
    INT64_MIN,
    VALUE,
    ArityError,
    BadLineError,
    InputTable,
    existing_file,
    open_bytes,
    show_line,
)
from faq.io.edgelist import edges_dataframe, undirected_simple

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MatrixMarket", "load_matrix_market", "read_matrix_market", "read_mtx_table"]


@dataclass(frozen=True)
class MatrixMarket:
    """The entries of a Matrix Market coordinate file, as stored.

    Attributes
    ----------
    rows, cols : numpy.ndarray
        int64 indices as written: **1-based**, as Matrix Market counts
        (``scipy.io.mmread`` would give them minus one).
    values : numpy.ndarray or None
        int64 (``integer``) or float64 (``real``) entries; None for ``pattern``.
    shape : tuple of int
        (M, N) from the size line.
    field : str
        ``"real"``, ``"integer"`` or ``"pattern"``.
    symmetry : str
        ``"general"``, ``"symmetric"`` or ``"skew-symmetric"``; a symmetric
        file stores one triangle, see :meth:`expanded`.
    lines : numpy.ndarray
        The file line of each entry.
    skipped : int
        Entry lines skipped as malformed (only when read with ``strict=False``).
    first_skipped : str or None
        Where and what the first skipped line was.
    """

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray | None
    shape: tuple[int, int]
    field: str
    symmetry: str
    lines: np.ndarray
    skipped: int = 0
    first_skipped: str | None = None

    def expanded(self) -> MatrixMarket:
        """The same matrix with both triangles stored (``general`` symmetry).

        A symmetric entry (i, j), i ≠ j, gains its mirror (j, i); a
        skew-symmetric one gains (j, i) with the negated value.
        """
        if self.symmetry == "general":
            return self
        off = self.rows != self.cols
        values = None
        if self.values is not None:
            mirror = -self.values[off] if self.symmetry == "skew-symmetric" else self.values[off]
            values = np.concatenate([self.values, mirror])
        return MatrixMarket(
            rows=np.concatenate([self.rows, self.cols[off]]),
            cols=np.concatenate([self.cols, self.rows[off]]),
            values=values,
            shape=self.shape,
            field=self.field,
            symmetry="general",
            lines=np.concatenate([self.lines, self.lines[off]]),
            skipped=self.skipped,
            first_skipped=self.first_skipped,
        )

    def graph_edges(self) -> np.ndarray:
        """The undirected simple graph of the matrix: pattern of A+Aᵀ without the diagonal.

        Returns
        -------
        numpy.ndarray
            Shape (k, 2) int64, one row (u, v) with u < v per edge (ids as written, 1-based).

        Raises
        ------
        ValueError
            The matrix is not square.
        """
        if self.shape[0] != self.shape[1]:
            raise ValueError(
                f"a graph needs a square matrix, but this one is {self.shape[0]}×{self.shape[1]}"
            )
        return undirected_simple(np.column_stack([self.rows, self.cols]))


def load_matrix_market(path: str | Path, *, strict: bool = True) -> MatrixMarket:
    """Read a Matrix Market coordinate file (``.mtx``, optionally ``.gz``).

    Parameters
    ----------
    path : str or Path
        The file.
    strict : bool, default True
        Raise :class:`BadLineError` on the first malformed entry line (wrong
        number of tokens, an index outside the declared shape, a value that is
        not a number of the declared field) and when the number of entries
        differs from the size line.  False skips malformed entry lines and
        counts them in ``skipped``.

    Returns
    -------
    MatrixMarket
        The stored entries with their 1-based indices (not yet mirrored for a
        symmetric file: see :meth:`MatrixMarket.expanded`).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        A missing or unsupported header (``array`` format, ``complex`` or
        ``hermitian`` matrices), a bad size line, or (strict) a bad entry.
    """
    p = existing_file(path, "matrix market file")
    with open_bytes(p) as fh:
        it = enumerate(fh, 1)
        banner = next(it, (1, b""))[1].strip()
        tokens = banner.lower().split()
        if len(tokens) != 5 or tokens[0] != b"%%matrixmarket":
            raise ValueError(
                f"{path}, line 1: not a Matrix Market file (expected a first line like "
                f"'%%MatrixMarket matrix coordinate real general', found {show_line(banner)})"
            )
        obj, fmt, fld, sym = (t.decode("ascii", "replace") for t in tokens[1:])
        if obj != "matrix":
            raise ValueError(f"{path}, line 1: unsupported Matrix Market object {obj!r}")
        if fmt != "coordinate":
            raise ValueError(
                f"{path}, line 1: only the 'coordinate' Matrix Market format is supported, "
                f"not {fmt!r}"
            )
        fld = "real" if fld == "double" else fld
        if fld not in ("real", "integer", "pattern"):
            raise ValueError(
                f"{path}, line 1: unsupported field {fld!r} (supported: real, integer, pattern)"
            )
        if sym not in ("general", "symmetric", "skew-symmetric"):
            raise ValueError(
                f"{path}, line 1: unsupported symmetry {sym!r} "
                "(supported: general, symmetric, skew-symmetric)"
            )
        if sym == "skew-symmetric" and fld == "pattern":
            raise ValueError(f"{path}, line 1: a pattern matrix cannot be skew-symmetric")
        size: tuple[int, int, int] | None = None
        for lineno, raw in it:
            line = raw.strip()
            if not line or line.startswith(b"%"):
                continue
            try:
                m, n, nnz = (int(t) for t in line.split())
                if min(m, n, nnz) < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"{path}, line {lineno}: expected the size line 'ROWS COLUMNS ENTRIES', "
                    f"found {show_line(line)}"
                ) from None
            size = (m, n, nnz)
            break
        if size is None:
            raise ValueError(f"{path}: the size line 'ROWS COLUMNS ENTRIES' is missing")
        m, n, nnz = size
        ntok = 2 if fld == "pattern" else 3
        conv: Callable[[bytes], Any] = int if fld == "integer" else float
        rows: list[int] = []
        cols: list[int] = []
        vals: list[Any] = []
        lines: list[int] = []
        skipped = 0
        first_skipped: str | None = None
        for lineno, raw in it:
            line = raw.strip()
            if not line or line.startswith(b"%"):
                continue
            parts = line.split()
            problem = None
            if len(parts) != ntok:
                problem = f"expected {ntok} tokens (row, column{'' if ntok == 2 else ', value'})"
            else:
                try:
                    i, j = int(parts[0]), int(parts[1])
                except ValueError:
                    problem = "row and column must be integers"
                else:
                    if not (1 <= i <= m and 1 <= j <= n):
                        problem = f"index ({i}, {j}) lies outside the {m}×{n} matrix"
                    elif ntok == 3:
                        try:
                            v = conv(parts[2])
                            if fld == "integer" and not INT64_MIN <= v <= INT64_MAX:
                                raise ValueError
                        except ValueError:
                            kind = "64-bit integer" if fld == "integer" else "number"
                            problem = f"the value is not a {kind}"
            if problem is not None:
                if strict:
                    raise BadLineError(
                        path, f"line {lineno}", f"{problem}, found {show_line(line)}"
                    )
                skipped += 1
                if first_skipped is None:
                    first_skipped = f"line {lineno}: {show_line(line)}"
                continue
            rows.append(i)
            cols.append(j)
            if ntok == 3:
                vals.append(v)
            lines.append(lineno)
    if strict and len(rows) != nnz:
        raise ValueError(
            f"{path}: the size line declares {nnz} entries but the file holds {len(rows)}"
        )
    values = None
    if fld != "pattern":
        values = np.asarray(vals, dtype=np.int64 if fld == "integer" else np.float64)
    return MatrixMarket(
        rows=np.asarray(rows, dtype=np.int64),
        cols=np.asarray(cols, dtype=np.int64),
        values=values,
        shape=(m, n),
        field=fld,
        symmetry=sym,
        lines=np.asarray(lines, dtype=np.int64),
        skipped=skipped,
        first_skipped=first_skipped,
    )


def read_matrix_market(
    path: str | Path,
    spark: SparkSession | None = None,
    *,
    graph: bool = False,
    names: tuple[str, str] = ("i", "j"),
    strict: bool = True,
) -> DataFrame:
    """A Matrix Market file as a DataFrame: (i, j[, value]), or the edges of its graph.

    Parameters
    ----------
    path : str or Path
        A coordinate ``.mtx`` file (``real``, ``integer`` or ``pattern``).
    spark : SparkSession, optional
        Defaults to the active session (or a new local one).
    graph : bool, default False
        False: the matrix, 1-based indices as written, both triangles of a symmetric
        matrix, a bigint/double ``value`` column unless the matrix is a
        pattern (then every entry is annotated with one).  True: the undirected
        simple graph (pattern of A+Aᵀ without the diagonal) as (u, v) rows
        with u < v, no value column, ready for the triangle rule.
    names : tuple of str
        The two key column names.
    strict : bool, default True
        See :func:`load_matrix_market`.

    Returns
    -------
    pyspark.sql.DataFrame
    """
    mm = load_matrix_market(path, strict=strict)
    if graph:
        return edges_dataframe(mm.graph_edges(), spark, names)
    mm = mm.expanded()
    import pandas as pd

    from faq.session import get_spark

    spark = spark or get_spark()
    cols: dict[str, np.ndarray] = {names[0]: mm.rows, names[1]: mm.cols}
    schema = f"`{names[0]}` bigint, `{names[1]}` bigint"
    if mm.values is not None:
        cols[VALUE] = mm.values
        schema += f", `{VALUE}` {'bigint' if mm.field == 'integer' else 'double'}"
    if len(mm.rows) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pd.DataFrame(cols), schema=schema)


def read_mtx_table(path: str | Path, arity: int | None, strict: bool) -> InputTable:
    """A Matrix Market file as a table (i, j[, value]): 1-based ids as written, both
    triangles of a symmetric matrix (see :func:`faq.io.load_table`)."""
    mm = load_matrix_market(path, strict=strict)
    if arity is not None and arity != 2:
        raise ArityError(
            path, 2, arity, f"{path} is a matrix (2 key columns) but {arity} are expected"
        )
    mm = mm.expanded()
    lines = mm.lines
    return InputTable(
        path=str(path),
        format="mtx",
        columns=("i", "j"),
        keys=[mm.rows, mm.cols],
        values=mm.values,
        skipped=mm.skipped,
        first_skipped=mm.first_skipped,
        field=mm.field,
        shape=mm.shape,
        _locate=lambda i: f"line {int(lines[i])}",
    )
