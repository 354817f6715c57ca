"""What every reader of :mod:`faq.io` shares: the errors, :class:`InputTable`, file helpers.

:class:`InputTable` also carries the two graph readings of a binary file
(:meth:`InputTable.undirected`, :meth:`InputTable.simple_graph`) and the check
of a ``value`` column against a semiring, so that ``sparkfaq`` and
:func:`faq.io.read` apply one rule to every format.
"""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from semirings import Semiring

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "VALUE",
    "ArityError",
    "BadLineError",
    "InputTable",
    "existing_file",
    "open_bytes",
    "show_line",
]

VALUE = "value"  # the annotation column (same name as faq.rule.VALUE)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class BadLineError(ValueError):
    """A malformed line (or row) of an input file.

    Attributes
    ----------
    path : str
        The file, as given.
    where : str
        ``"line N"`` (text files, 1-based physical lines) or ``"row N"`` (Parquet).
    located : str
        The file, the place and what is wrong with it, without the hint of how to skip it.
    skippable : bool
        Whether reading with ``strict=False`` skips the line; the message then says so.
    """

    def __init__(
        self, path: str | Path, where: str, message: str, *, skippable: bool = True
    ) -> None:
        self.path = str(path)
        self.where = where
        self.located = f"{path}, {where}: {message}"
        self.skippable = skippable
        hint = " (read with strict=False to skip malformed lines)" if skippable else ""
        super().__init__(f"{self.located}{hint}")


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


@dataclass
class InputTable:
    """The rows of one input file, read on the driver.

    Attributes
    ----------
    path : str
        The file, as given.
    format : str
        One of :data:`faq.io.FORMATS`.
    columns : tuple of str
        Names of the key columns (from the header; ``c0, c1, ...`` for edge
        lists and headerless CSV, ``i, j`` for Matrix Market).
    keys : list of numpy.ndarray
        One array per key column: int64, or unicode strings (``dtype.kind ==
        "U"``) when the ids are not integers.  Ids are as written in the file
        (Matrix Market indices stay 1-based).
    values : numpy.ndarray or None
        The ``value`` column (int64, float64 or bool), or None for a file
        without one (every row annotated with the semiring's one).
    skipped : int
        Lines skipped as malformed (only when read with ``strict=False``).
    first_skipped : str or None
        Where and what the first skipped line was, e.g. ``"line 7: '2 3 4'"``.
    field : str or None
        For Matrix Market: ``real``, ``integer`` or ``pattern``.
    shape : tuple of int or None
        For Matrix Market: (M, N) from the size line.
    """

    path: str
    format: str
    columns: tuple[str, ...]
    keys: list[np.ndarray]
    values: np.ndarray | None
    skipped: int = 0
    first_skipped: str | None = None
    field: str | None = None
    shape: tuple[int, int] | None = None
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

    # -- graph readings of a binary relation ------------------------------------------------
    def undirected(self) -> InputTable:
        """Each row as an undirected edge: both (u, v) and (v, u), once each.

        However many times, and in whichever direction, the file lists an
        edge, the result holds each of its two directions once (a self-loop
        (u, u) once).  A ``value`` goes with both directions.

        Returns
        -------
        InputTable
            A new table; rows point back to the file's lines.

        Raises
        ------
        ValueError
            The table does not have two key columns, or two rows list the same
            edge with different values (the message names both lines).
        """
        k0, k1 = self._pair("--undirected / undirected=True")
        first, lo, hi = _first_of_each_edge(k0, k1, self.values, self)
        loops = lo == hi
        u = np.concatenate([lo, hi[~loops]])
        v = np.concatenate([hi, lo[~loops]])
        origin = np.concatenate([first, first[~loops]])
        return self._derived([u, v], None if self.values is None else self.values[origin], origin)

    def simple_graph(self) -> InputTable:
        """The undirected simple graph: one row (u, v) with u < v per edge, no values.

        Self-loops are dropped, u-v and v-u are one edge, repeats are one
        edge, and a ``value`` column is ignored: the oriented graph on which
        ``Q() :- E(a, b), E(b, c), E(a, c)`` counts every triangle once.

        Returns
        -------
        InputTable
            A new table; rows point back to the file's lines.
        """
        k0, k1 = self._pair("a graph")
        first, lo, hi = _first_of_each_edge(k0, k1, None, self)
        keep = lo != hi
        return self._derived([lo[keep], hi[keep]], None, first[keep])

    def _pair(self, what: str) -> tuple[np.ndarray, np.ndarray]:
        if len(self.keys) != 2:
            raise ValueError(
                f"{self.path}: {what} needs two key columns (source, target), "
                f"but the file has {len(self.keys)} ({', '.join(self.columns)})"
            )
        k0, k1 = self.keys
        if (k0.dtype.kind == "U") != (k1.dtype.kind == "U"):  # one id type for both ends
            k0, k1 = k0.astype(str), k1.astype(str)
        return k0, k1

    def _derived(
        self, keys: list[np.ndarray], values: np.ndarray | None, origin: np.ndarray
    ) -> InputTable:
        return dataclasses.replace(
            self, keys=keys, values=values, _locate=lambda i: self.where(int(origin[i]))
        )

    # -- annotations --------------------------------------------------------------------------
    def check_values(self, semiring: Semiring, label: str | None = None) -> None:
        """Check the ``value`` column against a semiring, naming the line of a bad value.

        Parameters
        ----------
        semiring : Semiring
            The semiring the values must belong to.
        label : str, optional
            How messages name the input (default: the path).

        Raises
        ------
        ValueError
            Values of the wrong type for the semiring (e.g. real numbers for
            ``counting``), a NaN, or a value outside its domain (e.g. a
            negative count); the message names the file and line.
        """
        v = self.values
        if v is None or len(v) == 0:
            return
        S = semiring
        label = label or self.path
        kinds, words = _NEEDS.get(S.spark_type or "", ("", ""))
        if kinds and v.dtype.kind not in kinds:
            held = {"b": "true/false", "i": "integers", "u": "integers", "f": "real numbers"}
            what = held.get(v.dtype.kind, str(v.dtype))
            if self.format == "mtx":
                what += f" (a {self.field!r} Matrix Market file)"
            raise ValueError(
                f"{label}: the {S.name!r} semiring needs {words} in column {VALUE!r}, "
                f"but the file holds {what}"
            )
        if v.dtype.kind == "f":
            nan = np.flatnonzero(np.isnan(v))
            if len(nan):
                raise ValueError(
                    f"{label}, {self.where(int(nan[0]))}: {VALUE!r} is NaN, which is not a "
                    f"value of the {S.name!r} semiring (domain: {S.domain})"
                )
        if v.dtype.kind in "iuf":
            for i in (int(np.argmin(v)), int(np.argmax(v))):
                try:
                    S.check_value(v[i].item(), "")
                except ValueError:
                    raise ValueError(
                        f"{label}, {self.where(i)}: {VALUE!r} {v[i].item()!r} is not a value "
                        f"of the {S.name!r} semiring (domain: {S.domain})"
                    ) from None

    def to_pandas(self, names: tuple[str, ...]) -> pd.DataFrame:
        """The rows as a pandas DataFrame: key columns named ``names``, then ``value``.

        Raises
        ------
        ValueError
            ``names`` does not name every key column.
        """
        import pandas as pd

        if len(names) != len(self.keys):
            raise ValueError(
                f"{self.path} has {len(self.keys)} key column(s) but {len(names)} "
                f"variable name(s) {tuple(names)!r} are given"
            )
        cols = {
            n: (k.astype(object) if k.dtype.kind == "U" else k)
            for n, k in zip(names, self.keys, strict=True)
        }
        if self.values is not None:
            cols[VALUE] = self.values
        return pd.DataFrame(cols)


_NEEDS = {
    "bigint": ("iu", "integers"),
    "double": ("iuf", "numbers"),
    "boolean": ("b", "true/false"),
}


def _first_of_each_edge(
    k0: np.ndarray, k1: np.ndarray, values: np.ndarray | None, table: InputTable
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first row of each undirected edge {u, v}, and its ends (lo ≤ hi), in file order.

    With ``values``, rows of one edge must agree on the value, else a
    ValueError names the two lines.
    """
    import pandas as pd

    swap = k1 < k0
    lo = np.where(swap, k1, k0)
    hi = np.where(swap, k0, k1)
    frame = pd.DataFrame({"lo": lo, "hi": hi})
    if values is not None:
        frame[VALUE] = values
        distinct = frame.drop_duplicates()
        clash = distinct.duplicated(["lo", "hi"], keep=False).to_numpy()
        if clash.any():
            a, b = np.flatnonzero(clash)[:2]
            i, j = int(distinct.index[a]), int(distinct.index[b])
            wi, wj = table.where(i), table.where(j)
            where = f"{wi} and {wj} give" if wi != wj else f"{wi} and its mirror give"
            raise ValueError(
                f"{table.path}: {where} the edge "
                f"{{{lo[i]}, {hi[i]}}} the values {values[i].item()!r} and {values[j].item()!r}; "
                "read as undirected, an edge has one value"
            )
    first = frame.drop_duplicates(["lo", "hi"]).index.to_numpy()
    return first, lo[first], hi[first]


# -- files ------------------------------------------------------------------------------------
def existing_file(path: str | Path, what: str = "file") -> Path:
    """``path`` as a Path, after checking that it is an existing file (not a directory)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    if p.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a directory, not a file")
    return p


def open_bytes(p: Path) -> IO[bytes]:
    """The file as bytes, gunzipped when its name ends in ``.gz``."""
    if p.name.lower().endswith(".gz"):
        return gzip.open(p, "rb")  # type: ignore[return-value]
    return p.open("rb")


def show_line(line: bytes, limit: int = 60) -> str:
    """A line for an error message: decoded, quoted, shortened."""
    text = line.decode("utf-8", "replace")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)
