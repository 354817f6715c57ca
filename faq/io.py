"""Readers for the files real users have: SNAP edge lists, CSV, Parquet, Matrix Market.

Two kinds of readers live here.

* The lenient library readers :func:`load_edge_array` and :func:`read_edge_list`
  take a SNAP edge list as it comes (comment headers, a bare node count, a
  header that lost its ``#``, CRLF endings) and skip what is not two integers,
  with a warning that says how many lines were skipped.
* The strict readers :func:`load_table` (any supported format) and
  :func:`load_matrix_market` read one file on the driver into numpy arrays and
  raise :class:`BadLineError` naming the file and line of the first malformed
  line, unless asked to skip such lines.  The ``sparkfaq`` command uses them to
  check every input before it starts Spark.

Formats (see :data:`FORMATS` and :func:`detect_format`): whitespace edge lists
(one row of ids per line, ``#``/``%`` comments), CSV with a header (key columns,
then optionally a ``value`` column), Parquet (a file or a directory of files;
key columns plus optional ``value``) and Matrix Market ``.mtx`` (coordinate;
``real``, ``integer`` or ``pattern``; ``general``, ``symmetric`` or
``skew-symmetric``).  Ids are integers, or strings when a file has ids that
are not integers.
"""

from __future__ import annotations

import dataclasses
import gzip
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FORMATS",
    "ArityError",
    "BadLineError",
    "InputTable",
    "MatrixMarket",
    "detect_format",
    "edges_dataframe",
    "load_edge_array",
    "load_matrix_market",
    "load_table",
    "read_edge_list",
    "read_matrix_market",
    "undirected_simple",
]

FORMATS = ("edgelist", "csv", "parquet", "mtx")
"""Input formats of :func:`load_table`: whitespace edge list, CSV, Parquet, Matrix Market."""

VALUE = "value"  # the annotation column (same name as faq.rule.VALUE)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class BadLineError(ValueError):
    """A malformed line (or row) of an input file.

    Attributes
    ----------
    path : str
        The file, as given.
    where : str
        ``"line N"`` (text files, 1-based physical lines) or ``"row N"`` (Parquet).
    """

    def __init__(self, path: str | Path, where: str, message: str) -> None:
        self.path = str(path)
        self.where = where
        super().__init__(f"{path}, {where}: {message}")


class ArityError(ValueError):
    """A file's number of key columns differs from the number expected.

    Attributes
    ----------
    path : str
        The file, as given.
    found, expected : int
        Key columns in the file, and key columns asked for.
    """

    def __init__(self, path: str | Path, found: int, expected: int, message: str) -> None:
        self.path = str(path)
        self.found = found
        self.expected = expected
        super().__init__(message)


# -- lenient SNAP readers ---------------------------------------------------------------------
def load_edge_array(path: str | Path, *, strict: bool = False) -> np.ndarray:
    """Read a SNAP-style edge list into an (m, 2) int64 array.

    Parameters
    ----------
    path : str or Path
        A whitespace-separated edge list; a name ending in ``.gz`` is gunzipped.
    strict : bool, default False
        Raise on the first line that is not exactly two integers instead of
        skipping it.

    Returns
    -------
    numpy.ndarray
        Shape (m, 2), dtype int64, the edges in file order.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    BadLineError
        With ``strict``, a line that is not exactly two integers; the message
        names the file and the line number.

    Notes
    -----
    ``#`` and ``%`` comment lines and blank lines are skipped quietly; CRLF
    line endings and a missing final newline are fine.  Without ``strict``,
    other lines that are not two integers (a bare node count, a header that
    lost its ``#``) are skipped with a warning that says how many, and extra
    columns after the first two integers (weights, timestamps) are ignored.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"edge list {str(p)!r} does not exist")
    pairs: list[tuple[int, int]] = []
    skipped = comments = 0
    with _open(p) as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith((b"#", b"%")):
                comments += 1
                continue
            parts = line.split()
            try:
                if strict and len(parts) != 2:
                    raise ValueError
                pairs.append((int(parts[0]), int(parts[1])))
            except (ValueError, IndexError):
                if strict:
                    raise BadLineError(
                        path,
                        f"line {lineno}",
                        f"expected two integer ids, found {_show(line)}",
                    ) from None
                skipped += 1
    if skipped:
        warnings.warn(
            f"{p.name}: skipped {skipped} line(s) that are not two integers "
            f"(besides {comments} comment line(s))",
            stacklevel=2,
        )
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def undirected_simple(edges: np.ndarray) -> np.ndarray:
    """One row (u, v) with u < v per undirected edge: self-loops and duplicates dropped.

    Parameters
    ----------
    edges : numpy.ndarray
        Shape (m, 2) integer ids, in any orientation.

    Returns
    -------
    numpy.ndarray
        Shape (k, 2) int64, rows sorted.
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0)


def edges_dataframe(
    edges: np.ndarray, spark: SparkSession | None = None, names: tuple[str, str] = ("src", "dst")
) -> DataFrame:
    """A two-column bigint DataFrame from an (m, 2) array (through Arrow).

    Parameters
    ----------
    edges : numpy.ndarray
        Shape (m, 2) integer ids.
    spark : SparkSession, optional
        Defaults to the active session (or a new local one).
    names : tuple of str
        The two column names.

    Returns
    -------
    pyspark.sql.DataFrame
    """
    import pandas as pd

    from faq.session import get_spark

    spark = spark or get_spark()
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    pdf = pd.DataFrame({names[0]: e[:, 0], names[1]: e[:, 1]})
    schema = f"`{names[0]}` bigint, `{names[1]}` bigint"
    if len(pdf) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pdf, schema=schema)


def read_edge_list(
    path: str | Path,
    spark: SparkSession | None = None,
    *,
    undirected: bool = True,
    names: tuple[str, str] = ("src", "dst"),
) -> DataFrame:
    """A SNAP edge list as a DataFrame of (src, dst) pairs.

    With ``undirected`` (the default) each undirected edge appears once as
    (u, v) with u < v, self-loops dropped: the oriented graph on which
    ``Q() :- E(a, b), E(b, c), E(a, c)`` counts every triangle exactly once.
    Lines that are not two integers are skipped with a warning, as by
    :func:`load_edge_array`.

    Parameters
    ----------
    path : str or Path
        The edge list.
    spark : SparkSession, optional
        Defaults to the active session (or a new local one).
    undirected : bool, default True
        Orient and deduplicate as described above; False keeps the file's pairs.
    names : tuple of str
        The two column names.

    Returns
    -------
    pyspark.sql.DataFrame
    """
    e = load_edge_array(path)
    if undirected:
        e = undirected_simple(e)
    return edges_dataframe(e, spark, names)


# -- Matrix Market ------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatrixMarket:
    """The entries of a Matrix Market coordinate file, as stored.

    Attributes
    ----------
    rows, cols : numpy.ndarray
        int64 indices, **0-based** (the file's 1-based indices minus one, as
        ``scipy.io.mmread`` gives them).
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
            Shape (k, 2) int64, one row (u, v) with u < v per edge (0-based ids).

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
        The stored entries with 0-based indices (not yet mirrored for a
        symmetric file: see :meth:`MatrixMarket.expanded`).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        A missing or unsupported header (``array`` format, ``complex`` or
        ``hermitian`` matrices), a bad size line, or (strict) a bad entry.
    """
    p = _existing_file(path, "matrix market file")
    with _open(p) as fh:
        it = enumerate(fh, 1)
        banner = next(it, (1, b""))[1].strip()
        tokens = banner.lower().split()
        if len(tokens) != 5 or tokens[0] != b"%%matrixmarket":
            raise ValueError(
                f"{path}, line 1: not a Matrix Market file (expected a first line like "
                f"'%%MatrixMarket matrix coordinate real general', found {_show(banner)})"
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
                    f"found {_show(line)}"
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
                            if fld == "integer" and not _INT64_MIN <= v <= _INT64_MAX:
                                raise ValueError
                        except ValueError:
                            kind = "64-bit integer" if fld == "integer" else "number"
                            problem = f"the value is not a {kind}"
            if problem is not None:
                if strict:
                    raise BadLineError(path, f"line {lineno}", f"{problem}, found {_show(line)}")
                skipped += 1
                if first_skipped is None:
                    first_skipped = f"line {lineno}: {_show(line)}"
                continue
            rows.append(i - 1)
            cols.append(j - 1)
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
        False: the matrix, 0-based indices, both triangles of a symmetric
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


# -- strict readers of any format -----------------------------------------------------------------
def detect_format(path: str | Path) -> str:
    """The reader for ``path``, by extension: one of :data:`FORMATS`.

    ``.csv`` (or ``.csv.gz``) is CSV, ``.parquet`` or a directory is Parquet,
    ``.mtx`` (or ``.mtx.gz``) is Matrix Market, anything else a whitespace
    edge list.
    """
    p = Path(path)
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".parquet") or p.is_dir():
        return "parquet"
    if name.endswith(".mtx"):
        return "mtx"
    return "edgelist"


@dataclass
class InputTable:
    """The rows of one input file, read on the driver.

    Attributes
    ----------
    path : str
        The file, as given.
    format : str
        One of :data:`FORMATS`.
    columns : tuple of str
        Names of the key columns (from the header; ``c0, c1, ...`` for edge
        lists, ``i, j`` for Matrix Market).
    keys : list of numpy.ndarray
        One array per key column: int64, or unicode strings (``dtype.kind ==
        "U"``) when the ids are not integers.
    values : numpy.ndarray or None
        The ``value`` column (int64, float64 or bool), or None for a file
        without one (every row annotated with the semiring's one).
    skipped : int
        Lines skipped as malformed (only when read with ``strict=False``).
    first_skipped : str or None
        Where and what the first skipped line was, e.g. ``"line 7: '2 3 4'"``.
    field : str or None
        For Matrix Market: ``real``, ``integer`` or ``pattern``.
    """

    path: str
    format: str
    columns: tuple[str, ...]
    keys: list[np.ndarray]
    values: np.ndarray | None
    skipped: int = 0
    first_skipped: str | None = None
    field: str | None = None
    _locate: Callable[[int], str] | None = dataclasses.field(default=None, repr=False)

    @property
    def rows(self) -> int:
        """Number of rows."""
        return len(self.keys[0]) if self.keys else 0

    @property
    def string_ids(self) -> bool:
        """True when some key column holds strings."""
        return any(k.dtype.kind == "U" for k in self.keys)

    def where(self, index: int) -> str:
        """Where row ``index`` (0-based) comes from: ``"line N"`` or ``"row N"``."""
        if self._locate is None:
            return f"row {index + 1}"
        return self._locate(index)


def load_table(
    path: str | Path,
    arity: int | None = None,
    *,
    format: str | None = None,
    strict: bool = True,
) -> InputTable:
    """Read one input file, of any supported format, on the driver, checking every row.

    Parameters
    ----------
    path : str or Path
        The file (for Parquet also a directory of part files).
    arity : int, optional
        The number of key columns expected.  For an edge list every data line
        must hold exactly this many ids (default: as many as the first data
        line); for the other formats a different number of key columns raises
        :class:`ArityError`.
    format : {"edgelist", "csv", "parquet", "mtx"}, optional
        Default: :func:`detect_format`.
    strict : bool, default True
        Raise :class:`BadLineError` (file and line) on the first malformed
        line.  False skips such lines and reports them in ``skipped`` and
        ``first_skipped``.  Malformed lines are: an edge-list line with
        another number of tokens, a header line that lost its ``#`` (a first
        line of words over a file of integer ids), a CSV row with another
        number of fields, a row with an empty key or ``value``, and a bad Matrix
        Market entry.

    Returns
    -------
    InputTable
        Keys are int64 when every id of the file is an integer, else strings.
        A Matrix Market file gives 0-based (i, j) with both triangles of a
        symmetric matrix, and a value column unless it is a ``pattern``.

    Raises
    ------
    FileNotFoundError, PermissionError, IsADirectoryError
        The file cannot be opened.
    BadLineError
        (strict) a malformed line; also, always, a ``value`` entry that is not
        a number or true/false.
    ArityError
        The file has another number of key columns than ``arity``.
    ValueError
        A file that cannot be parsed in its format at all, or a key column
        that holds neither integers nor strings.

    Notes
    -----
    ``#`` and ``%`` comment lines and blank lines of edge lists are always
    fine, as are CRLF line endings and a missing final newline.  Names ending
    in ``.gz`` are gunzipped (edge lists, CSV, Matrix Market).  Edge lists hold
    ids only: annotations go in a CSV or Parquet ``value`` column.
    """
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    if fmt == "parquet":
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"file {str(path)!r} does not exist")
        table = _read_parquet(path, arity, strict)
    elif fmt == "csv":
        table = _read_csv(_existing_file(path), arity, strict)
    elif fmt == "mtx":
        table = _read_mtx(path, arity, strict)
    else:
        table = _read_edgelist(_existing_file(path), arity, strict)
    return table


def _read_mtx(path: str | Path, arity: int | None, strict: bool) -> InputTable:
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
        _locate=lambda i: f"line {int(lines[i])}",
    )


def _read_edgelist(p: Path, arity: int | None, strict: bool) -> InputTable:
    path = str(p)
    rows: list[list[bytes]] = []
    lines: list[int] = []
    counts: Counter[int] = Counter()
    bad: list[tuple[int, bytes]] = []  # the first line with another token count
    with _open(p) as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith((b"#", b"%")):
                continue
            toks = line.split()
            if arity is None:
                arity = len(toks)
            counts[len(toks)] += 1
            if len(toks) != arity:
                if not bad:
                    bad.append((lineno, line))
                continue
            rows.append(toks)
            lines.append(lineno)
    arity = arity or 0
    nbad = sum(c for n, c in counts.items() if n != arity)
    if not rows and len(counts) == 1:
        (found,) = counts
        hint = ""
        if found == arity + 1:
            hint = (
                f"; edge lists hold ids only: put annotations in a CSV file with a {VALUE!r} column"
            )
        raise ArityError(
            path,
            found,
            arity,
            f"{path} has {found} column(s) (line {bad[0][0]}: {_show(bad[0][1])}) "
            f"but {arity} are expected{hint}",
        )
    if bad and strict:
        lineno, line = bad[0]
        n = len(line.split())
        raise BadLineError(
            path,
            f"line {lineno}",
            f"expected {arity} whitespace-separated id(s), found {n} token(s): {_show(line)}",
        )
    keys, header = _edgelist_keys(rows, arity)
    if header:
        text = b" ".join(rows[0])
        if strict:
            raise BadLineError(
                path,
                f"line {lines[0]}",
                f"{_show(text)} looks like a header line (every other line holds integer "
                "ids); comment it out with '#'",
            )
        bad.append((lines[0], text))
        nbad += 1
        del lines[0]
    elif keys is None:
        keys = _string_columns(rows, arity, path, lines)
    first_skipped = None
    if bad:
        lineno, text = min(bad)
        first_skipped = f"line {lineno}: {_show(text)}"
    line_arr = np.asarray(lines, dtype=np.int64)
    return InputTable(
        path=path,
        format="edgelist",
        columns=tuple(f"c{i}" for i in range(arity)),
        keys=keys,
        values=None,
        skipped=nbad,
        first_skipped=first_skipped,
        _locate=lambda i: f"line {int(line_arr[i])}",
    )


def _string_columns(
    rows: list[list[bytes]], arity: int, path: str, lines: list[int]
) -> list[np.ndarray]:
    """Key columns of string ids (every id of the file as text, integers included)."""
    try:
        return [np.array([r[c].decode() for r in rows], dtype=str) for c in range(arity)]
    except UnicodeDecodeError:
        for i, toks in enumerate(rows):
            try:
                for t in toks:
                    t.decode()
            except UnicodeDecodeError:
                raise BadLineError(path, f"line {lines[i]}", "the line is not UTF-8 text") from None
        raise  # pragma: no cover - some row failed above


def _edgelist_keys(rows: list[list[bytes]], arity: int) -> tuple[list[np.ndarray] | None, bool]:
    """Integer key columns when every token is an integer (then header=False).

    A first row of non-integers over rows of integers is a header that lost
    its ``#``: the keys of the other rows and header=True.  Otherwise (some
    ids are not integers) None: the ids are strings.
    """
    if not rows:
        return [np.empty(0, dtype=np.int64) for _ in range(arity)], False
    try:
        arr = np.array(rows, dtype="S").astype(np.int64).reshape(-1, arity)
        return [arr[:, c].copy() for c in range(arity)], False
    except (ValueError, OverflowError):
        pass
    ints: list[list[int]] = []
    nonint: list[int] = []
    for i, toks in enumerate(rows):
        try:
            vals = [int(t) for t in toks]
            if not all(_INT64_MIN <= v <= _INT64_MAX for v in vals):
                raise ValueError
            ints.append(vals)
        except ValueError:
            nonint.append(i)
            if len(nonint) > 1:
                return None, False
    if nonint == [0] and len(rows) > 1 and not any(_is_int_token(t) for t in rows[0]):
        arr = np.asarray(ints, dtype=np.int64).reshape(-1, arity)
        return [arr[:, c].copy() for c in range(arity)], True
    if not nonint:  # every token converts with int() (numpy's parser is stricter)
        arr = np.asarray(ints, dtype=np.int64).reshape(-1, arity)
        return [arr[:, c].copy() for c in range(arity)], False
    return None, False


def _is_int_token(t: bytes) -> bool:
    try:
        return _INT64_MIN <= int(t) <= _INT64_MAX
    except ValueError:
        return False


def _read_csv(p: Path, arity: int | None, strict: bool) -> InputTable:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path = str(p)
    bad: list[tuple[int, str]] = []  # (row number among non-blank lines, text)

    def on_bad_row(row: Any) -> str:
        bad.append((row.number, row.text))
        return "skip"

    try:
        table = pcsv.read_csv(
            p,
            read_options=pcsv.ReadOptions(use_threads=False),
            parse_options=pcsv.ParseOptions(invalid_row_handler=on_bad_row),
            convert_options=pcsv.ConvertOptions(null_values=[""], strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:
        if "Empty CSV file" in str(exc):
            raise ValueError(f"{path} is empty: a CSV file needs a header line") from None
        raise ValueError(f"{path}: cannot parse as CSV ({exc})") from None
    nonblank = _NonBlankLines(p)
    bad_numbers = sorted(n for n, _ in bad)

    def locate(i: int) -> str:
        # data row i is non-blank line i + 2 (the header is 1), shifted past skipped rows
        n = i + 2
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
        message = f"expected {ncols} comma-separated fields, found {_show(text.encode())}"
        if strict:
            raise BadLineError(path, where, message)
        first_skipped = f"{where}: {_show(text.encode())}"
    return _from_arrow(table, path, "csv", arity, strict, locate, len(bad), first_skipped)


class _NonBlankLines:
    """Map pyarrow's CSV row numbers (non-blank lines, 1-based) to physical lines."""

    def __init__(self, p: Path) -> None:
        self._p = p
        self._table: list[int] | None = None

    def physical(self, number: int) -> int:
        if self._table is None:
            self._table = []
            with _open(self._p) as fh:
                for lineno, raw in enumerate(fh, 1):
                    if raw.strip():
                        self._table.append(lineno)
        if 1 <= number <= len(self._table):
            return self._table[number - 1]
        return number


def _read_parquet(path: str | Path, arity: int | None, strict: bool) -> InputTable:
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
) -> InputTable:
    """Validate and convert a pyarrow table: key columns, then optional ``value``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(table.column_names)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{path}: column name(s) {', '.join(map(repr, dupes))} repeat")
    keys = [n for n in names if n != VALUE]
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
        if pa.types.is_uint64(t) and len(col) and col.to_numpy().max() > _INT64_MAX:
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
                ) from None
    raise ValueError(
        f"{path}: column {VALUE!r} has type {t}; annotations must be numbers or true/false"
    )


# -- helpers ----------------------------------------------------------------------------------
def _existing_file(path: str | Path, what: str = "file") -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    if p.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a directory, not a file")
    return p


def _open(p: Path) -> IO[bytes]:
    """The file as bytes, gunzipped when its name ends in ``.gz``."""
    if p.name.lower().endswith(".gz"):
        return gzip.open(p, "rb")  # type: ignore[return-value]
    return p.open("rb")


def _show(line: bytes, limit: int = 60) -> str:
    """A line for an error message: decoded, quoted, shortened."""
    text = line.decode("utf-8", "replace")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)
