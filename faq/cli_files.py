"""The ``sparkfaq`` command's files: reading relations, string ids, printing and writing answers.

Every input is read and checked in the driver before Spark starts
(:func:`read_inputs`); string ids are mapped to integers for Spark and back on
output (:func:`print_rows`, :func:`write_answer`).  Errors a user can fix are
:class:`CliError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from pyspark.sql import DataFrame, SparkSession

    from faq import Factor, Query
    from faq.io import InputTable
    from semirings import Semiring

__all__ = [
    "CliError",
    "coded_constants",
    "dataframe",
    "local_factor",
    "output_path",
    "print_rows",
    "read_inputs",
    "relation_specs",
    "semiring_named",
    "write_answer",
]

T = TypeVar("T")

log = logging.getLogger("faq.cli")


class CliError(Exception):
    """A problem with the command's input, reported as one ``error:`` line (exit status 2)."""


def semiring_named(name: str) -> Semiring:
    import semirings

    try:
        return semirings.get(name)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def relation_specs(given: list[str], q: Query) -> dict[str, str]:
    """``NAME=PATH`` arguments as {name: path}, checked against the rule's relations."""
    needed = q.rule.relations
    specs: dict[str, str] = {}
    for spec in given:
        name, eq, path = spec.partition("=")
        name = name.strip()
        if not eq or not name or not path:
            raise CliError(f"--relation takes NAME=PATH, got {spec!r}")
        if name in specs:
            raise CliError(f"relation {name!r} is given twice ({specs[name]!r} and {path!r})")
        specs[name] = path
    uses = ", ".join(needed)
    extra = [n for n in specs if n not in needed]
    if extra:
        raise CliError(
            f"unexpected relation(s) {', '.join(map(repr, extra))}: the rule {q.rule} uses {uses}"
        )
    missing = [n for n in needed if n not in specs]
    if missing:
        flags = " ".join(f"--relation {n}=PATH" for n in missing)
        raise CliError(
            f"missing relation(s) {', '.join(map(repr, missing))} for the rule {q.rule}: "
            f"add {flags}"
        )
    return specs


def output_path(text: str) -> Path:
    p = Path(text)
    if p.is_dir():
        raise CliError(f"--output {text!r} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CliError(f"--output {text!r}: directory {str(parent)!r} does not exist")
    return p


def read_inputs(
    q: Query, specs: dict[str, str], args: argparse.Namespace, triangles: bool
) -> tuple[dict[str, list[np.ndarray]], dict[str, np.ndarray | None], np.ndarray | None]:
    """Read and check every input on the driver: keys (int64) and values per relation.

    Every format follows one rule (see the command's ``--help``): rows as written, ids as
    written; ``--undirected`` mirrors binary relations; ``triangles`` reads
    the undirected simple graph.  Returns the key arrays, value arrays and,
    when some ids are strings, the sorted dictionary whose positions are the
    integer codes.
    """
    from faq.io import detect_format, load_table

    arity = q.rule.relations
    formats = {name: args.format or detect_format(path) for name, path in specs.items()}
    _check_flags(args, formats, arity, triangles)
    undirected = not triangles and args.undirected
    tables: dict[str, InputTable] = {}
    cache: dict[tuple[str, str, int], InputTable] = {}
    strict = not args.skip_bad_lines
    for name, path in specs.items():
        fmt = formats[name]
        log.info("reading %s (%s)", path if triangles else f"{name} from {path}", fmt)
        prefix = "" if triangles else f"relation {name!r}: "
        key = (str(path), fmt, arity[name])
        table = cache.get(key)
        if table is None:
            table = _checked(
                lambda p=path, f=fmt, a=arity[name]: load_table(
                    p, a, format=f, strict=strict, header=args.header if f == "csv" else None
                ),
                path,
                prefix,
                atom=None if triangles else _atom(q, name),
            )
            _report_skipped(path, table.skipped, table.first_skipped)
            cache[key] = table
        if table.rows == 0:
            after = f" after skipping {table.skipped} malformed line(s)" if table.skipped else ""
            if triangles:
                raise CliError(f"{path} holds no edges{after}")
            raise CliError(f"relation {name!r}: {path} holds no rows{after}")
        try:
            if triangles:
                if table.shape is not None and table.shape[0] != table.shape[1]:
                    m, n = table.shape
                    raise ValueError(f"a graph needs a square matrix, but this one is {m}×{n}")
                table = table.simple_graph()
            else:
                if undirected and arity[name] == 2:
                    table = table.undirected()
                table.check_values(q.semiring, f"relation {name!r}: {table.path}")
        except ValueError as exc:
            text = str(exc)
            raise CliError(text if str(path) in text else f"{path}: {text}") from None
        tables[name] = table
        log.info(
            "%s: %d row(s), %s ids%s",
            path,
            table.rows,
            "string" if table.string_ids else "integer",
            "" if table.values is None else ", with values",
        )
    keys: dict[str, list[np.ndarray]] = {}
    dictionary = _encode_ids(tables, keys)
    values = {name: table.values for name, table in tables.items()}
    return keys, values, dictionary


def _check_flags(
    args: argparse.Namespace, formats: dict[str, str], arity: dict[str, int], triangles: bool
) -> None:
    """Flags that would change nothing are refused, not ignored."""
    if args.header is not None and "csv" not in formats.values():
        flag = "--header" if args.header else "--no-header"
        raise CliError(f"{flag} applies to CSV files, and no input is CSV")
    if not triangles and args.undirected and 2 not in arity.values():
        raise CliError(f"--undirected mirrors binary relations, and the rule {args.rule} has none")


def _atom(q: Query, name: str) -> str:
    return str(next(a for a in q.rule.atoms if a.relation == name))


def _checked(read: Callable[[], T], path: str, prefix: str, atom: str | None = None) -> T:
    """Call a reader; turn its errors into one-line CliErrors with hints."""
    from faq.io import ArityError, BadLineError

    try:
        return read()
    except BadLineError as exc:
        hint = " (--skip-bad-lines skips malformed lines)" if exc.skippable else ""
        raise CliError(f"{prefix}{exc.located}{hint}") from None
    except ArityError as exc:
        used = f"; the rule uses it as {atom}" if atom else ""
        raise CliError(f"{prefix}{exc}{used}") from None
    except (OSError, EOFError) as exc:  # unreadable, or a broken .gz
        text = str(exc)
        if str(path) not in text:
            text = f"cannot read {path}: {getattr(exc, 'strerror', None) or text}"
        raise CliError(f"{prefix}{text}") from None
    except ValueError as exc:
        raise CliError(f"{prefix}{exc}") from None


def _report_skipped(path: str, skipped: int, first: str | None) -> None:
    if skipped:
        print(
            f"warning: {path}: skipped {skipped:,} malformed line(s) (first: {first})",
            file=sys.stderr,
        )


def _encode_ids(
    tables: dict[str, InputTable], keys: dict[str, list[np.ndarray]]
) -> np.ndarray | None:
    """Fill ``keys`` with int64 key arrays; map string ids through one sorted dictionary.

    When any file of the run has string ids, every id (integers as their
    decimal text) is looked up in one dictionary over all files, so relations
    that share a variable agree; code order is string order, so results sorted
    by code are sorted by id.  Returns the dictionary, or None (integer ids).
    """
    if not any(t.string_ids for t in tables.values()):
        for name, t in tables.items():
            keys[name] = list(t.keys)
        return None
    text = {
        name: [k if k.dtype.kind == "U" else k.astype(str) for k in t.keys]
        for name, t in tables.items()
    }
    dictionary = np.unique(np.concatenate([k for ks in text.values() for k in ks]))
    for name, ks in text.items():
        keys[name] = [np.searchsorted(dictionary, k).astype(np.int64) for k in ks]
    log.info("string ids: %d distinct, mapped to integers", len(dictionary))
    return dictionary


def coded_constants(q: Query, dictionary: np.ndarray) -> Query:
    """``q`` with its constants mapped like the ids (an integer as its decimal text); a
    constant that is no id gets code -1, which selects nothing."""
    from faq.query import Query
    from faq.rule import replace_constants

    def code(c: int | str) -> int:
        i = int(np.searchsorted(dictionary, str(c)))
        return i if i < len(dictionary) and dictionary[i] == str(c) else -1

    return Query(replace_constants(q.rule, code), q.semiring)


def dataframe(spark: SparkSession, keys: list[np.ndarray], values: np.ndarray | None) -> DataFrame:
    """A Spark DataFrame ``k0, k1, ...[, value]`` (keys bind to the atom by position)."""
    import pandas as pd

    cols: dict[str, np.ndarray] = {f"k{i}": k for i, k in enumerate(keys)}
    types = ["bigint"] * len(keys)
    if values is not None:
        cols["value"] = values
        types.append({"b": "boolean", "f": "double"}.get(values.dtype.kind, "bigint"))
    schema = ", ".join(f"`{c}` {t}" for c, t in zip(cols, types, strict=True))
    if len(keys[0]) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pd.DataFrame(cols), schema=schema)


def local_factor(
    keys: list[np.ndarray], values: np.ndarray | None, S: Semiring, name: str
) -> Factor:
    """A local factor ``k0, k1, ...[, value]`` (keys bind to the atom by position)."""
    import pandas as pd

    from faq import Factor

    cols: dict[str, np.ndarray] = {f"k{i}": k for i, k in enumerate(keys)}
    if values is not None:
        cols["value"] = values
    return Factor.from_pandas(pd.DataFrame(cols), semiring=S, name=name)


# -- results ------------------------------------------------------------------------------------
def _decode(column: Any, dictionary: np.ndarray | None) -> Any:
    if dictionary is None:
        return column
    return dictionary[np.asarray(column, dtype=np.int64)]


def print_rows(out: Factor, dictionary: np.ndarray | None, limit: int) -> None:
    """A header line, then the rows sorted by key, on stdout; a line on stderr says when
    ``limit`` cut them."""
    head = list(out.vars)
    if out.is_local:
        pdf = out.to_pandas().sort_values(head, kind="stable")
        total = len(pdf)
        shown = pdf.head(limit) if limit else pdf
    else:  # a result that stayed in Spark: sort and cut there
        ordered = out.df.orderBy(*head)
        shown = (ordered.limit(limit) if limit else ordered).toPandas()
        total = len(shown) if not limit or len(shown) < limit else out.df.count()
    print("\t".join([*head, "value"]))
    cols = [_decode(shown[v].to_numpy(), dictionary) for v in head]
    for j, value in enumerate(shown["value"].tolist()):
        print("\t".join([*(str(c[j]) for c in cols), str(value)]))
    # stdout holds the data only; what is not data goes to stderr
    if not total:
        print("# no rows: every result is the semiring's zero", file=sys.stderr)
    elif total > len(shown):
        print(
            f"# showing {len(shown):,} of {total:,} rows; use --output to write all",
            file=sys.stderr,
        )


def write_answer(out: Factor, dictionary: np.ndarray | None, path: Path) -> None:
    """The whole result, sorted by key, as CSV or (``.parquet``) Parquet."""
    import pandas as pd

    head = list(out.vars)
    if head:
        if out.is_local:
            pdf = out.to_pandas().sort_values(head, kind="stable").reset_index(drop=True)
        else:
            pdf = out.df.orderBy(*head).toPandas()
        for v in head:
            pdf[v] = _decode(pdf[v].to_numpy(), dictionary)
    else:
        pdf = pd.DataFrame({"value": [out.scalar()]})
    if path.name.lower().endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pandas(pdf, preserve_index=False), path)
    else:
        pdf.to_csv(path, index=False)
    print(f"# wrote {len(pdf):,} row(s) to {path}", file=sys.stderr)
