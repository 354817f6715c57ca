"""Reading one relation held in Spark for a semiring: collect it into the driver or keep it.

A relation that fits in the driver (at most ``faq.settings().local_rows`` rows)
is collected once, through Arrow (a plain scan of local Parquet files is read from
its files, with no job: :func:`faq.spark.checks.parquet_scan`), and from then on
handled as numpy arrays:
checked (null keys, annotations outside the semiring), consolidated and
counted exactly, with no further Spark job.  Whether an unchecked DataFrame
fits is asked of Spark's optimizer: the size estimate it uses to decide
broadcast joins (``EXPLAIN COST``; exact for cached and local data, the file
size for files).  Without a row estimate, a relation whose size is at most
``faq.settings().local_bytes`` (or unknown) is read with a bound of
``local_rows + 1`` rows, so the driver never holds more than ``local_rows`` rows of
it; ``local_rows=0`` reads nothing into the driver.
Larger relations stay in Spark; one Spark job checks them and gathers their
statistics, one job for up to 64 relations of a query (:func:`read_all`,
:func:`faq.spark.checks.spark_prepared_all`).

Everything here works on a factor's :class:`faq.source.Source` record, never
on the factor: :class:`faq.Factor` (``validated``, ``to_table``) and the
query's inputs (:func:`faq.inputs.prepare_all`) both read through it.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from faq.kernel.stats import table_stats
from faq.kernel.table import Table
from faq.plan.settings import Settings, current
from faq.source import Source
from faq.spark.checks import (
    Check,
    ParquetScan,
    check_value_type,
    explain_cost,
    parquet_scan,
    read_scan,
    size_from,
    spark_arrow_type,
    spark_prepared_all,
)
from faq.spark.convert import arrow_to_table
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["UNKNOWN_BYTES", "Request", "collect", "fits", "read", "read_all"]

log = logging.getLogger("faq")

UNKNOWN_BYTES = 2**60
"""Spark's ``sizeInBytes`` for data it knows nothing about (an RDD) is ``Long.MaxValue``
(shown as 8 EiB): such a relation is read with a bound of ``local_rows + 1`` rows."""

_SEEN: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Rows of the DataFrames queries have read into the driver, by DataFrame object: asking a
DataFrame read before needs no size estimate (an estimate costs about 50 ms)."""

_SCANS: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], ParquetScan | None]] = (
    weakref.WeakKeyDictionary()
)
"""Whether the DataFrames queries have read into the driver are plain scans of local
Parquet files (for the columns read then), by DataFrame object, as their first read's
plan said: a frame read again is read as it was, with no plan asked for."""


@dataclass(frozen=True)
class Request(Check):
    """One relation to read: what :class:`faq.spark.checks.Check` says, the name its log
    line shows, and whether it may be collected into the driver (see :func:`read`)."""

    name: str = ""
    local: bool = True
    uses: int = 1
    """Atoms of the query over the relation: it is collected only if ``uses`` times its
    rows fit in ``local_rows`` (a bag over all of them must fit for its step to run in
    the driver; a relation collected for a step that does not would only be sent back)."""


def read(
    src: Source,
    S: Semiring,
    label: str,
    *,
    name: str,
    local: bool = True,
    nonnegative: str | None = None,
    consolidate: bool = True,
) -> Source:
    """The rows of ``src`` checked for ``S``: collected into the driver when they fit,
    else kept in Spark, checked and counted there.

    Parameters
    ----------
    src : Source
        A ``df`` source.
    S : Semiring
        The semiring the annotations must belong to.
    label : str
        Names the relation in error messages.
    name : str
        Names the relation in the log line.
    local : bool, default True
        False keeps the rows in Spark whatever their size.
    nonnegative : str, optional
        Also refuse negative annotations of rows kept in Spark (the reason, for
        the message), in the same job as the other checks; the caller checks
        local rows.
    consolidate : bool, default True
        False leaves repeated keys of rows kept in Spark to the caller (the
        returned source says ``consolidated=False``): no aggregation is planned.

    Returns
    -------
    Source
        A ``table`` source (checked, possibly with repeated keys, exact
        statistics) or a checked, consolidated ``df`` source with statistics.

    Raises
    ------
    ValueError
        Naming ``label`` and the column: null keys, a value column of the wrong
        type or annotations outside ``S``.

    Notes
    -----
    Logs one line at INFO on the ``"faq"`` logger (see
    :func:`faq.session.show_progress`): the relation, the rows read, where they
    went and the seconds it took.
    """
    return read_all([Request(src, S, label, nonnegative, consolidate, name=name, local=local)])[0]


def read_all(requests: Sequence[Request]) -> list[Source]:
    """:func:`read` for several relations: each that fits is collected (one job each), and
    those kept in Spark are checked and counted a few per job
    (:func:`faq.spark.checks.spark_prepared_all`).  Errors are raised in the order of
    ``requests``; one log line per relation."""
    limits = current()
    out: list[Source | None] = []
    kept: list[int] = []
    for r in requests:
        if r.src.df is None:
            raise ValueError(
                f"{r.label}: only a source held in Spark is read (this one is {r.src.form})"
            )
        t0 = time.perf_counter()
        table = _local(r, limits)
        out.append(table)
        if table is None:
            kept.append(len(out) - 1)
        else:
            _log(r, table, time.perf_counter() - t0)
    t0 = time.perf_counter()
    checked = spark_prepared_all([requests[i] for i in kept])
    seconds = (time.perf_counter() - t0) / max(len(kept), 1)
    for i, (df, stats, unique) in zip(kept, checked, strict=True):
        r = requests[i]
        out[i] = Source.spark(df, r.src.vars, r.S, checked=True, consolidated=unique, stats=stats)
        _log(r, out[i], seconds)
    return [o for o in out if o is not None]


def _log(r: Request, out: Source, seconds: float) -> None:
    assert out.stats is not None
    log.info(
        "load %s(%s): %s rows %s in %.2f s",
        r.name,
        ", ".join(r.src.vars),
        f"{out.stats.rows:,}",
        "into the driver" if out.is_local else "checked, kept in Spark",
        seconds,
    )


def _local(r: Request, limits: Settings) -> Source | None:
    """``r``'s rows collected into the driver when they fit (one job), else None."""
    src, S, label = r.src, r.S, r.label
    assert src.df is not None
    if src.has_value:
        check_value_type(src.df, S, label)
    if r.uses > 1:
        limits = replace(limits, local_rows=limits.local_rows // r.uses)
    fit, text = _fits(src, limits) if r.local else (False, None)
    if fit is None:  # no estimate (data built from an RDD, say): read at most local_rows + 1
        at = src.df.limit(limits.local_rows + 1).toArrow()
        if at.num_rows <= limits.local_rows:
            table = _collected(src, at, S, label, consolidate=False)
            return Source.local(table, S, table_stats(table))
    elif fit:
        table = _collected(src, _arrow_rows(src, text), S, label, consolidate=False)
        return Source.local(table, S, table_stats(table))
    return None


def _arrow_rows(src: Source, text: str | None) -> pa.Table:
    """All the rows of ``src`` (kept in Spark, known to fit) as Arrow: read straight from
    its files when it is a plain scan of local Parquet files
    (:func:`faq.spark.checks.parquet_scan`, from its plan ``text``, or, for a frame read
    before, as found then), else by Spark."""
    df = src.df
    assert df is not None
    columns = tuple(df.columns)
    if text is not None:
        scan = parquet_scan(df, text, columns)
        if src.original is not None:
            _SCANS[src.original] = (columns, scan)
    else:
        known = _SCANS.get(src.original) if src.original is not None else None
        scan = known[1] if known is not None and known[0] == columns else None
    if scan is None:
        return df.toArrow()
    return read_scan(scan, columns, [spark_arrow_type(f.dataType) for f in df.schema.fields])


def fits(src: Source, limits: Settings) -> bool | None:
    """Whether the Spark rows of ``src`` fit in the driver (at most ``limits.local_rows``),
    from what is known without a job; None when only a read of at most
    ``local_rows + 1`` rows can tell (no row estimate, and no size estimate or one of
    at most ``limits.local_bytes``).  With ``local_rows=0`` nothing fits: nothing is
    read into the driver."""
    return _fits(src, limits)[0]


def _fits(src: Source, limits: Settings) -> tuple[bool | None, str | None]:
    """:func:`fits`, and the ``EXPLAIN COST`` text it read (None if it read none)."""
    assert src.df is not None
    if limits.local_rows <= 0:
        return False, None
    if src.checked is not None and src.stats is not None:
        return src.stats.rows <= limits.local_rows, None
    seen = _SEEN.get(src.original) if src.original is not None else None
    if seen is not None:
        return seen <= limits.local_rows, None
    text = explain_cost(src.df)
    rows, size = (None, None) if text is None else size_from(src.df, text)
    if rows is not None:
        return rows <= limits.local_rows, text
    if size is None or size >= UNKNOWN_BYTES or size <= limits.local_bytes:
        return None, text  # a bounded read decides: a small file can hold many rows
    return False, text


def collect(src: Source, S: Semiring, label: str, *, consolidate: bool = True) -> Table:
    """The Spark rows of ``src`` as a local table checked for ``S`` (one job).

    With ``consolidate`` False equal keys are left for the kernel's index to
    ⊕-combine (its sort finds them; the table says ``unique=False``).
    """
    if src.df is None:
        raise ValueError(f"{label}: only a source held in Spark is collected ({src.form})")
    if src.has_value:
        check_value_type(src.df, S, label)
    return _collected(src, src.df.toArrow(), S, label, consolidate=consolidate)


def _collected(src: Source, at: pa.Table, S: Semiring, label: str, *, consolidate: bool) -> Table:
    """The Arrow rows read from ``src`` as a local table (checked unless ``src`` was for ``S``)."""
    if src.original is not None:
        _SEEN[src.original] = at.num_rows
    return arrow_to_table(
        at,
        src.vars,
        S,
        label,
        check=src.checked is not S,
        unique=src.consolidated,
        consolidate=consolidate,
    )
