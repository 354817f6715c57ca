"""Whitespace edge lists (SNAP and the like): one row of ids per line, ``#``/``%`` comments.

* :func:`load_edge_array` and :func:`read_edge_list` are the lenient SNAP
  readers: they skip what is not two integers, with a warning that says how
  many lines were skipped.  :func:`read_edge_list` keeps its historical
  default, the oriented simple graph (each edge once as (u, v) with u < v),
  ready for the triangle rule.
* :func:`read_edgelist_table` is the strict reader behind
  :func:`faq.io.load_table` and :func:`faq.io.read`: ids exactly as written,
  a malformed line an error naming the file and line.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from faq.io.common import (
    INT64_MAX,
    INT64_MIN,
    VALUE,
    ArityError,
    BadLineError,
    InputTable,
    open_bytes,
    show_line,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "edges_dataframe",
    "load_edge_array",
    "read_edge_list",
    "read_edgelist_table",
    "undirected_simple",
]


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
    with open_bytes(p) as fh:
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
                        f"expected two integer ids, found {show_line(line)}",
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
    :func:`load_edge_array`.  This lenient SNAP helper keeps its historical
    default; :func:`faq.io.read` reads every format by the rule of the
    ``sparkfaq`` command (``read(path, simple=True)`` is this default's
    graph, as a Factor).

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


# -- the strict reader -----------------------------------------------------------------------
def read_edgelist_table(p: Path, arity: int | None, strict: bool) -> InputTable:
    path = str(p)
    rows: list[list[bytes]] = []
    lines: list[int] = []
    counts: Counter[int] = Counter()
    bad: list[tuple[int, bytes]] = []  # the first line with another token count
    with open_bytes(p) as fh:
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
            f"{path} has {found} column(s) (line {bad[0][0]}: {show_line(bad[0][1])}) "
            f"but {arity} are expected{hint}",
        )
    if bad and strict:
        lineno, line = bad[0]
        n = len(line.split())
        raise BadLineError(
            path,
            f"line {lineno}",
            f"expected {arity} whitespace-separated id(s), found {n} token(s): {show_line(line)}",
        )
    keys, header = _edgelist_keys(rows, arity)
    if header:
        text = b" ".join(rows[0])
        if strict:
            raise BadLineError(
                path,
                f"line {lines[0]}",
                f"{show_line(text)} looks like a header line (every other line holds integer "
                "ids); comment it out with '#', or skip it",
            )
        bad.append((lines[0], text))
        nbad += 1
        del lines[0]
    elif keys is None:
        keys = _string_columns(rows, arity, path, lines)
    first_skipped = None
    if bad:
        lineno, text = min(bad)
        first_skipped = f"line {lineno}: {show_line(text)}"
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
                raise BadLineError(
                    path, f"line {lines[i]}", "the line is not UTF-8 text", skippable=False
                ) from None
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
            if not all(INT64_MIN <= v <= INT64_MAX for v in vals):
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
        return INT64_MIN <= int(t) <= INT64_MAX
    except ValueError:
        return False
