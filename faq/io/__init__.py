"""Readers for the files real users have: edge lists, CSV, Parquet, Matrix Market.

One rule for every format
-------------------------
* **Ids are kept as written.**  Integer ids keep their values (Matrix Market
  indices stay 1-based, no shift to 0); a file whose ids are not all integers
  has string ids.
* **Rows are read as written: a directed relation.**  An edge list line
  ``u v``, a CSV or Parquet row and a Matrix Market entry are the pair
  (u, v), in that direction only.  A Matrix Market file declared
  ``symmetric`` holds both triangles of its matrix, so both directions.
  Rows listed twice count twice (keys that repeat are ⊕-combined, as in any
  relation).
* **undirected** (``read(..., undirected=True)``, ``sparkfaq query
  --undirected``): each row is an undirected edge; the relation holds both
  (u, v) and (v, u), once each, however many times and in whichever
  direction the file lists the edge.
* **simple** (``read(..., simple=True)``, ``sparkfaq triangles``): the
  undirected simple graph, each edge once as (u, v) with u < v, self-loops
  and values dropped; the triangle rule counts each triangle once on it.

So the same graph in any format gives the same answer.  The lenient SNAP
helpers :func:`load_edge_array` and :func:`read_edge_list` (whose default
is the simple graph) are kept as they were.

Formats (see :data:`FORMATS` and :func:`detect_format`): whitespace edge lists
(one row of ids per line, ``#``/``%`` comments; ids only), CSV (a header line,
unless every field of the first line is a number; key columns, then
optionally a ``value`` column), Parquet (a file or a directory of files; key
columns plus optional ``value``) and Matrix Market ``.mtx`` (coordinate;
``real``, ``integer`` or ``pattern``; ``general``, ``symmetric`` or
``skew-symmetric``).  Each format has its module: :mod:`faq.io.edgelist`,
:mod:`faq.io.tables` (CSV, Parquet), :mod:`faq.io.mtx`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from faq.io.common import (
    ArityError,
    BadLineError,
    InputTable,
    existing_file,
)
from faq.io.edgelist import (
    edges_dataframe,
    load_edge_array,
    read_edge_list,
    read_edgelist_table,
    undirected_simple,
)
from faq.io.mtx import MatrixMarket, load_matrix_market, read_matrix_market, read_mtx_table
from faq.io.tables import read_csv_table, read_parquet_table

if TYPE_CHECKING:  # pragma: no cover
    from faq.factor import Factor
    from semirings import Semiring

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
    "read",
    "read_edge_list",
    "read_matrix_market",
    "undirected_simple",
]

FORMATS = ("edgelist", "csv", "parquet", "mtx")
"""Input formats of :func:`load_table` and :func:`read`: whitespace edge list, CSV,
Parquet, Matrix Market."""


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


def load_table(
    path: str | Path,
    arity: int | None = None,
    *,
    format: str | None = None,
    strict: bool = True,
    header: bool | None = None,
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
    header : bool, optional
        CSV only (another format raises ValueError): whether the first line
        is a header.  Default: it is,
        unless every one of its fields is a number (then the file is read
        without a header, its columns named ``c0, c1, ...``, all ids).

    Returns
    -------
    InputTable
        Keys are int64 when every id of the file is an integer, else strings.
        Ids are as written in the file: a Matrix Market file gives its
        1-based (i, j), with both triangles of a symmetric matrix, and a
        value column unless it is a ``pattern``.  Rows are as written (none
        mirrored, merged or dropped): see :meth:`InputTable.undirected` and
        :meth:`InputTable.simple_graph` for the graph readings.

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
    if header is not None and fmt != "csv":
        raise ValueError(f"header={header} applies to CSV files, but {path} is read as {fmt}")
    if fmt == "parquet":
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"file {str(path)!r} does not exist")
        table = read_parquet_table(path, arity, strict)
    elif fmt == "csv":
        table = read_csv_table(existing_file(path), arity, strict, header)
    elif fmt == "mtx":
        table = read_mtx_table(path, arity, strict)
    else:
        table = read_edgelist_table(existing_file(path), arity, strict)
    return table


def read(
    path: str | Path,
    format: str | None = None,
    *,
    vars: Sequence[str] = ("src", "dst"),
    undirected: bool = False,
    simple: bool = False,
    header: bool | None = None,
    semiring: str | Semiring | None = None,
    strict: bool = True,
    name: str | None = None,
) -> Factor:
    """Read a file of any supported format into a local :class:`~faq.Factor`.

    The rules are those of the ``sparkfaq`` command (see the module
    docstring): ids as written, rows as written (a directed relation);
    ``undirected`` adds the mirror of each edge, ``simple`` gives the
    undirected simple graph that ``sparkfaq triangles`` counts on.

    Parameters
    ----------
    path : str or Path
        The file (for Parquet also a directory of part files).
    format : {"edgelist", "csv", "parquet", "mtx"}, optional
        Default: by extension (:func:`detect_format`).
    vars : sequence of str, default ("src", "dst")
        The variables of the key columns, in order; the file must have as
        many key columns.
    undirected : bool, default False
        Each row is an undirected edge: the factor holds (u, v) and (v, u),
        once each (rows listing one edge with different values are an error).
    simple : bool, default False
        The undirected simple graph: one row (u, v) with u < v per edge,
        self-loops and values dropped.
    header : bool, optional
        CSV only: whether the first line is a header (default: yes, unless
        every field of it is a number).
    semiring : str or Semiring, optional
        Check the ``value`` column against this semiring now (naming the
        line of a bad value); without it each query checks against its own.
    strict : bool, default True
        False skips malformed lines, with a warning that says how many.
    name : str, optional
        The factor's name in error messages (default: the file name).

    Returns
    -------
    Factor
        Local (numpy arrays in the driver) over ``vars``, with a ``value``
        column when the file has one (else every row is annotated with one).

    Raises
    ------
    FileNotFoundError, PermissionError, IsADirectoryError
        The file cannot be opened.
    BadLineError
        A malformed line (``strict``): the message names the file and line.
    ArityError
        The file's number of key columns differs from ``len(vars)``.
    ValueError
        Any other bad input, named: an unknown format, ``undirected`` or
        ``simple`` on a file without two key columns, a value outside
        ``semiring``.

    Examples
    --------
    >>> E = read("tests/data/karate.txt", simple=True)  # doctest: +SKIP
    >>> query("Q() :- E(a, b), E(b, c), E(a, c)").solve(E=E).scalar()  # doctest: +SKIP
    45
    """
    import semirings
    from faq.factor import Factor

    vars_ = tuple(vars) if not isinstance(vars, str) else (vars,)
    if undirected and simple:
        raise ValueError("give undirected=True or simple=True, not both (simple is undirected)")
    S = None if semiring is None else semirings.get(semiring)
    table = load_table(path, len(vars_), format=format, strict=strict, header=header)
    if table.skipped:
        warnings.warn(
            f"{path}: skipped {table.skipped:,} malformed line(s) (first: {table.first_skipped})",
            stacklevel=2,
        )
    if simple:
        table = table.simple_graph()
    elif undirected:
        table = table.undirected()
    if S is not None:
        table.check_values(S)
    label = name or Path(path).name
    return Factor.from_pandas(table.to_pandas(vars_), vars=vars_, semiring=S, name=label)
