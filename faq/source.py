"""The source record of a factor: its rows, in exactly one form, and what is known of them.

A :class:`faq.Factor` holds one frozen :class:`Source`.  The rows are held in
one of five forms, and what the engine knows about them (the semiring they
were checked for, whether a key can repeat, their statistics) travels with
them, so that every reader (the query's inputs, the delta rule, the Spark
checks) asks the record rather than the factor's internals.

>>> import numpy as np
>>> import semirings
>>> from faq.kernel import Table
>>> t = Table(("i",), (np.array([0, 1]),), np.array([2.0, 3.0]))
>>> s = Source.local(t, semirings.REAL)
>>> s.form, s.checked is semirings.REAL, s.consolidated
('table', True, True)
>>> Source(("i",), table=t, raw=t)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: a factor's source holds its rows in exactly one form (...); got table, raw
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.kernel.keyed import KeyedTable
from faq.kernel.stats import RelationStats
from faq.kernel.table import Table
from faq.kernel.values import plain_semiring
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["FORMS", "Source"]

FORMS = ("table", "keyed", "df", "array", "raw")
"""The forms a source's rows can take (the names of the :class:`Source` fields)."""


@dataclass(frozen=True, eq=False)
class Source:
    """A relation's rows in exactly one form, plus what is known of them (immutable).

    Attributes
    ----------
    vars : tuple of str
        The variables, in key-column order.
    table : Table, optional
        Local rows (numpy arrays in the driver), checked for ``semiring`` and
        zero-free.
    keyed : KeyedTable, optional
        Local rows held as a keyed table (read by lookups in the delta rule).
    df : pyspark.sql.DataFrame, optional
        Rows in Spark: one column per variable, named as ``vars``, then
        ``value`` when ``has_value``.
    array : numpy.ndarray, optional
        A dense array of plain numbers (``Factor.from_numpy`` without a
        semiring): checked, and its zeros dropped, for each query's semiring.
    raw : Table, optional
        The rows of a pandas DataFrame given without a semiring (nulls refused,
        values not yet typed): checked for each query's semiring.
    semiring : Semiring or None
        The semiring of the annotations, when known (None: the query's).
    checked : Semiring or None
        The semiring the annotations were checked for (values in it, keys not
        null); None when nobody has checked them.
    consolidated : bool
        True when it is known that no key occurs twice.
    stats : RelationStats or None
        Row and distinct counts, when known without a Spark job.
    has_value : bool
        False for a plain relation (every row annotated with one).
    original : pyspark.sql.DataFrame or None
        The DataFrame as given (before its columns were renamed to ``vars``),
        by which the engine remembers how many rows it read from it.

    Notes
    -----
    The legal combinations (anything else raises in the constructor):

    ======  ==========  ================  =================  ===============  ===============
    form    semiring    checked           consolidated       stats            has_value
    ======  ==========  ================  =================  ===============  ===============
    table   a semiring  ``semiring``      ``table.unique``   any              values present
    keyed   a semiring  ``semiring``      True               any              True
    df      any         None or semiring  only when checked  only if checked  True if checked
    array   None        None              True               None             True
    raw     None        None              False              None             values present
    ======  ==========  ================  =================  ===============  ===============

    ``original`` is set exactly for the ``df`` form.  ``vars`` are the
    table's (or keyed table's) variables, one per array dimension.
    """

    vars: tuple[str, ...]
    table: Table | None = None
    keyed: KeyedTable | None = None
    df: DataFrame | None = None
    array: np.ndarray | None = None
    raw: Table | None = None
    semiring: Semiring | None = None
    checked: Semiring | None = None
    consolidated: bool = False
    stats: RelationStats | None = None
    has_value: bool = True
    original: DataFrame | None = None

    def __post_init__(self) -> None:
        held = [n for n in FORMS if getattr(self, n) is not None]
        if len(held) != 1:
            raise ValueError(
                "a factor's source holds its rows in exactly one form (table, keyed, df, array "
                f"or raw); got {', '.join(held) or 'none'}"
            )
        form = held[0]
        _expect_types(self, form)
        if self.checked is not None and self.checked is not self.semiring:
            raise ValueError(
                f"a {form} source checked for {self.checked.name!r} must have that semiring, "
                f"not {_name(self.semiring)}"
            )
        if (self.df is None) != (self.original is None):
            raise ValueError("a source has an original DataFrame exactly when its rows are a df")
        if form in ("table", "keyed"):
            if self.checked is None:
                raise ValueError(f"a {form} source holds checked rows: give its semiring")
            rows = self.table if self.table is not None else self.keyed
            assert rows is not None
            if rows.vars != self.vars:
                raise ValueError(f"a {form} over {rows.vars!r} is not a source over {self.vars!r}")
            unique = self.table.unique if self.table is not None else True
            value = self.table.values is not None if self.table is not None else True
            _expect(form, "consolidated", self.consolidated, unique)
            _expect(form, "has_value", self.has_value, value)
        elif form == "df":
            if self.checked is None and self.consolidated:
                raise ValueError("an unchecked df source cannot be known to be consolidated")
            if self.checked is None and self.stats is not None:
                raise ValueError("an unchecked df source has no statistics (nothing counted it)")
            if self.checked is not None and not self.has_value:
                raise ValueError("a checked df source has a value column")
        else:  # array, raw: unchecked local rows, read for each query's semiring
            if self.semiring is not None or self.checked is not None:
                got = _name(self.semiring)
                raise ValueError(f"an {form} source is unchecked: it has no semiring (got {got})")
            if self.stats is not None:
                raise ValueError(f"an {form} source has no statistics before it is checked")
            if self.array is not None:
                if self.array.ndim != len(self.vars):
                    raise ValueError(
                        f"an array of {self.array.ndim} dimensions is not a source over "
                        f"{self.vars!r}"
                    )
                _expect(form, "consolidated", self.consolidated, True)
                _expect(form, "has_value", self.has_value, True)
            else:
                assert self.raw is not None
                if self.raw.vars != self.vars:
                    raise ValueError(
                        f"a raw table over {self.raw.vars!r} is not over {self.vars!r}"
                    )
                _expect(form, "consolidated", self.consolidated, False)
                _expect(form, "has_value", self.has_value, self.raw.values is not None)

    # -- the legal records, one constructor each ------------------------------------------
    @classmethod
    def local(cls, table: Table, semiring: Semiring, stats: RelationStats | None = None) -> Source:
        """Local rows checked for ``semiring`` (zero-free; consolidated when ``table.unique``)."""
        return cls(
            table.vars,
            table=table,
            semiring=semiring,
            checked=semiring,
            consolidated=table.unique,
            stats=stats,
            has_value=table.values is not None,
        )

    @classmethod
    def of_keyed(cls, keyed: KeyedTable, semiring: Semiring) -> Source:
        """Local rows held as a keyed table (consolidated, checked for ``semiring``)."""
        stats = RelationStats(keyed.rows, (keyed.rows,) * len(keyed.vars), exact=False)
        return cls(
            keyed.vars, keyed=keyed, semiring=semiring, checked=semiring, consolidated=True,
            stats=stats,
        )  # fmt: skip

    @classmethod
    def spark(
        cls,
        df: DataFrame,
        vars: tuple[str, ...],
        semiring: Semiring | None,
        *,
        has_value: bool = True,
        checked: bool = False,
        consolidated: bool | None = None,
        stats: RelationStats | None = None,
        original: DataFrame | None = None,
    ) -> Source:
        """Rows in Spark (``df``'s columns are ``vars`` then ``value``).

        ``checked`` says the annotations are ``semiring``'s values and no key is null;
        ``consolidated`` (default: ``checked``) that no key repeats; ``original``
        (default: ``df``) is the DataFrame the caller gave.
        """
        return cls(
            tuple(vars),
            df=df,
            semiring=semiring,
            checked=semiring if checked else None,
            consolidated=checked if consolidated is None else consolidated,
            stats=stats,
            has_value=has_value,
            original=df if original is None else original,
        )

    @classmethod
    def unchecked_array(cls, array: np.ndarray, vars: tuple[str, ...]) -> Source:
        """A dense array of plain numbers, checked for each query's semiring."""
        return cls(tuple(vars), array=array, consolidated=True)

    @classmethod
    def unchecked_rows(cls, raw: Table) -> Source:
        """A pandas DataFrame's rows (nulls refused, values untyped), checked per semiring."""
        return cls(raw.vars, raw=raw, has_value=raw.values is not None)

    # -- reading ------------------------------------------------------------------------------
    @property
    def form(self) -> str:
        """Which field holds the rows: one of :data:`FORMS`."""
        return next(n for n in FORMS if getattr(self, n) is not None)

    @property
    def is_local(self) -> bool:
        """True when the rows are in the driver (every form but ``df``)."""
        return self.df is None

    @property
    def plain(self) -> Semiring:
        """The semiring the rows are read in by default: the declared one, else the
        array's or pandas values' own (boolean, integer or real)."""
        if self.semiring is not None:
            return self.semiring
        if self.array is not None:
            return plain_semiring(self.array.dtype)
        if self.raw is not None and self.raw.values is not None:
            return plain_semiring(self.raw.values.dtype)
        return semirings.REAL


def _expect(form: str, field: str, got: Any, want: Any) -> None:
    if got != want:
        raise ValueError(f"a {form} source has {field}={want!r}, got {got!r}")


def _expect_types(s: Source, form: str) -> None:
    want = {"table": Table, "keyed": KeyedTable, "array": np.ndarray, "raw": Table}.get(form)
    got = getattr(s, form)
    if want is not None and not isinstance(got, want):
        raise TypeError(f"a source's {form} must be a {want.__name__}, got {type(got).__name__}")
    if form == "df" and not hasattr(got, "columns"):
        raise TypeError(f"a source's df must be a Spark DataFrame, got {type(got).__name__}")
    for name in ("semiring", "checked"):
        v = getattr(s, name)
        if v is not None and not isinstance(v, Semiring):
            raise TypeError(f"a source's {name} must be a Semiring or None, got {v!r}")


def _name(S: Semiring | None) -> str:
    return "none" if S is None else repr(S.name)
