"""Reading a query's relations: checks, statistics and, for small ones, the rows themselves.

A relation that fits in the driver (at most :data:`LOCAL_ROWS` rows) is
collected once, through Arrow, and from then on handled as numpy arrays:
checked (null keys, annotations outside the semiring), consolidated and
counted exactly, with no further Spark job.  Whether an unchecked DataFrame
fits is asked of Spark's optimizer: the size estimate it uses to decide
broadcast joins (``EXPLAIN COST``; exact for cached and local data, the file
size for files).  Larger relations stay in Spark; one Spark job checks them
and gathers their statistics.
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import Table
from faq.rule import Atom, Rule, literal
from faq.spark.checks import check_value_type, size_hint, spark_prepared
from faq.spark.convert import arrow_to_table
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from faq.factor import Factor

__all__ = [
    "check_constants",
    "check_key_types",
    "LOCAL_BYTES",
    "LOCAL_ROWS",
    "Relation",
    "collect_factor",
    "prepare",
]

log = logging.getLogger("faq")

LOCAL_ROWS = 20_000_000
"""A relation with at most this many rows is read into the driver and joined by the local
kernel (20M two-column rows take about 320 MB as numpy arrays, plus their index)."""

LOCAL_BYTES = 512 * 2**20
"""Without a row estimate, a relation whose estimated size (Spark's ``sizeInBytes``, for
files the file size) is at most this is read into the driver."""

UNKNOWN_BYTES = 2**60
"""Spark's ``sizeInBytes`` for data it knows nothing about (an RDD) is ``Long.MaxValue``
(shown as 8 EiB): such a relation is read with a bound of ``LOCAL_ROWS + 1`` rows."""


@dataclass
class Relation:
    """A relation ready for execution: local rows, or a Spark DataFrame, and statistics.

    ``table`` (local) is consolidated, checked and zero-free.  ``df`` (when
    not local) is checked and typed, and consolidated lazily (a ⊕-aggregation
    in its plan) unless it was already.
    """

    name: str
    vars: tuple[str, ...]
    stats: RelationStats
    table: Table | None = None
    df: DataFrame | None = None

    @property
    def is_local(self) -> bool:
        return self.table is not None


def prepare(
    f: Factor, S: Semiring, label: str, *, local: bool = True, nonnegative: str | None = None
) -> Relation:
    """The factor ``f`` ready for a query over ``S``: local when it is or it fits.

    ``local=False`` keeps a distributed factor in Spark whatever its size.
    ``nonnegative`` (the reason, for the message) also refuses negative annotations of a
    factor kept in Spark, in the same job as the other checks; the caller checks local
    rows.
    Raises ValueError naming ``label`` and the column for null keys, a value
    column of the wrong type or annotations outside ``S``.  Reading a DataFrame
    logs one line at INFO on the ``"faq"`` logger (see
    :func:`faq.session.show_progress`): the relation, the rows read, where they
    went (the driver, or checked and kept in Spark) and the seconds it took.
    """
    t = f._local_table(required=False)
    if t is not None:
        return Relation(f.name or label, f.vars, f.stats or table_stats(t), table=t)
    t0 = time.perf_counter()
    rel = _read(f, S, label, local=local, nonnegative=nonnegative)
    log.info(
        "load %s(%s): %s rows %s in %.2f s",
        rel.name,
        ", ".join(rel.vars),
        f"{rel.stats.rows:,}",
        "into the driver" if rel.is_local else "checked, kept in Spark",
        time.perf_counter() - t0,
    )
    return rel


def _read(f: Factor, S: Semiring, label: str, *, local: bool, nonnegative: str | None) -> Relation:
    """:func:`prepare` for a factor held by a Spark DataFrame."""
    if f._has_value:
        check_value_type(f.df, S, label)
    fits = _fits(f) if local else False
    if fits is None:  # no estimate (data built from an RDD, say): read at most LOCAL_ROWS + 1
        at = f.df.limit(LOCAL_ROWS + 1).toArrow()
        if at.num_rows <= LOCAL_ROWS:
            table = _collected(f, at, S, label, consolidate=False)
            return Relation(f.name or label, f.vars, table_stats(table), table=table)
    elif fits:
        table = collect_factor(f, S, label, consolidate=False)
        return Relation(f.name or label, f.vars, table_stats(table), table=table)
    df, stats = spark_prepared(f, S, label, nonnegative=nonnegative)
    return Relation(f.name or label, f.vars, stats, df=df)


_SEEN: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Rows of the DataFrames queries have read into the driver, by DataFrame object: asking a
DataFrame read before needs no size estimate (an estimate costs about 50 ms)."""


def _fits(f: Factor) -> bool | None:
    """Whether ``f`` fits in the driver, from what is known without a job (None: unknown)."""
    if f._trusted and f._stats is not None:
        return f._stats.rows <= LOCAL_ROWS
    seen = _SEEN.get(f._source) if f._source is not None else None
    if seen is not None:
        return seen <= LOCAL_ROWS
    rows, size = size_hint(f.df)
    if rows is not None:
        return rows <= LOCAL_ROWS
    if size is None or size >= UNKNOWN_BYTES:
        return None
    return size <= LOCAL_BYTES


def collect_factor(f: Factor, S: Semiring, label: str, *, consolidate: bool = True) -> Table:
    """The rows of a distributed factor as a checked local table (one job).

    With ``consolidate`` False equal keys are left for the kernel's index to
    ⊕-combine (its sort finds them; the table says ``unique=False``).
    """
    if f._has_value:
        check_value_type(f.df, S, label)
    return _collected(f, f.df.toArrow(), S, label, consolidate=consolidate)


def _collected(f: Factor, at: pa.Table, S: Semiring, label: str, *, consolidate: bool) -> Table:
    """The Arrow rows read from ``f`` as a local table (checked unless ``f`` is trusted)."""
    if f._source is not None:
        _SEEN[f._source] = at.num_rows
    check = not (f._trusted and f._semiring is S)
    unique = f._trusted and f._consolidated
    return arrow_to_table(at, f.vars, S, label, check=check, unique=unique, consolidate=consolidate)


# -- key types: a variable's columns agree, a constant fits its column ---------------------
def check_key_types(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a variable whose key columns have different types in different places,
    or a constant whose column has another type.

    Integer types of any width count as one type (``bigint``); nothing else is
    unified, so a string key is never cast to a number (or a number to a
    string), and an integer constant selects only from an integer column, a
    string constant only from a string column.  Reads only schemas: no Spark job.

    Raises
    ------
    ValueError
        Naming the variable, both atoms with their relations and both types;
        or the constant, its atom, the column and its type.
    """
    check_constants(rule, factors)
    types = {name: f.key_types for name, f in factors.items()}
    seen: dict[str, tuple[str, Atom, int]] = {}
    for atom in rule.atoms:
        for i, v in zip(atom.positions, atom.vars, strict=True):
            t = types[atom.relation][i]
            if v not in seen:
                seen[v] = (t, atom, i)
                continue
            t0, atom0, i0 = seen[v]
            if t != t0:
                raise ValueError(
                    f"variable {v!r} of {rule} has keys of different types: column {i0} of "
                    f"relation {atom0.relation!r} (atom {atom0}) is {t0}, column {i} of "
                    f"relation {atom.relation!r} (atom {atom}) is {t}; keys are never cast "
                    "(integers of any width count as bigint): convert one of them first"
                )


def check_constants(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a constant of ``rule`` whose column, in the factor given for its relation
    (relations not in ``factors`` are skipped), holds keys of another type: an integer
    constant needs an integer column, a string constant a string one.  An empty local
    factor holds no keys to compare: it passes."""
    for atom in rule.atoms:
        f = factors.get(atom.relation)
        if not atom.consts or f is None or (f.is_local and f.to_table().rows == 0):
            continue
        types = f.key_types
        for i, c in atom.consts:
            want, kind = ("string", "a string") if isinstance(c, str) else ("bigint", "an integer")
            if types[i] == want:
                continue
            hint = ""
            if types[i] == "string":
                hint = f" (the string constant is written {literal(str(c))})"
            elif types[i] == "bigint" and isinstance(c, str) and re.fullmatch(r"-?[0-9]+", c):
                hint = f" (the integer constant is written {int(c)})"
            raise ValueError(
                f"atom {atom} of {rule}: the constant {literal(c)} is {kind}, but column {i} "
                f"({f.vars[i]!r}) of relation {atom.relation!r} holds {types[i]} keys; keys "
                f"are never cast{hint}"
            )
