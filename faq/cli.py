"""The ``sparkfaq`` command: solve a rule over files on local Spark.

Examples
--------
Count the triangles of a SNAP edge list::

    sparkfaq triangles tests/data/karate.txt

Any rule over any semiring, relations from edge lists, CSV, Parquet or Matrix
Market files::

    sparkfaq query "Q(a) :- E(a, b), E(b, c)" --semiring counting --relation E=edges.txt

Every format is read by one rule, the rule of :func:`faq.io.read`: ids and
rows as written (a directed relation; Matrix Market ids stay 1-based),
``--undirected`` adds the mirror of each edge of the binary relations, and
``triangles`` always counts the undirected triangles.

Every input is read and checked on the driver before Spark starts, so a bad
rule, semiring, file or line is reported at once, as one ``error: ...`` line
on stderr with exit status 2.  :func:`main` takes the argument list and
returns the exit status, so the command runs in-process too (it then uses the
active SparkSession, if any).
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from faq import Factor, Query
    from faq.io import InputTable
    from semirings import Semiring

__all__ = ["main", "CliError"]

TRIANGLE_RULE = "Q() :- E(a, b), E(b, c), E(a, c)"
"""The rule of ``sparkfaq triangles`` (over the simple graph's edges u < v: each triangle once)."""

T = TypeVar("T")

log = logging.getLogger("faq.cli")

_GRAMMAR = """\
rules:
  Head(vars) :- Rel(vars), Rel(vars), ...        e.g.  Q(a, c) :- E(a, b), F(b, c)
  The head's variables are kept; every other variable is aggregated with the
  semiring's ⊕, and the annotations of the atoms that match are multiplied
  with ⊗.  A relation may repeat (Q() :- E(a, b), E(b, c), E(a, c)), and a
  variable repeated inside an atom selects the diagonal (E(a, a)).  An empty
  head, Q(), gives a single value, printed alone.  An argument may also be a
  constant, an integer or a quoted string: E(0, b) or E('alice', b) reads only
  the rows whose first column holds it.
"""

_INPUTS = """\
input files (the reader is chosen by extension; --format overrides it):
  .csv            a header line, key columns (by position), then optionally
                  'value'; a first line of numbers only (1,2) is data, not a
                  header, and every column is then an id (--header and
                  --no-header override the guess)
  .parquet, dir/  key columns and an optional 'value' column
  .mtx            Matrix Market coordinate (real, integer or pattern; general,
                  symmetric or skew-symmetric: both triangles are read)
  anything else   a whitespace edge list (.txt, .tsv, ...): one row of ids per
                  line, ids only; '#' and '%' lines are comments
  Key columns bind to the atom's variables by position; a row without a 'value'
  is annotated with the semiring's one.  Ids are kept as written: integers keep
  their values (Matrix Market's 1-based ids stay 1-based), other ids are
  strings (mapped to integers for Spark and back on output).
  One rule for every format: 'query' reads each row as written, as a directed
  edge (u, v); a symmetric .mtx holds both directions, as its matrix does.
  --undirected reads every binary relation as an undirected graph: the mirror
  (v, u) of each edge is added, each direction kept once.  'triangles' always
  counts the undirected triangles: u-v and v-u are one edge, self-loops and
  repeats are dropped, so one graph gives one count in any format and either
  orientation.  A malformed line is an error unless --skip-bad-lines.
"""

_EXAMPLES = """\
examples:
  sparkfaq triangles tests/data/karate.txt
  sparkfaq query "Q(a) :- E(a, b), E(b, c)" --semiring counting --relation E=edges.txt
  sparkfaq query "Q(i, k) :- A(i, j), B(j, k)" --semiring min-plus \\
      --relation A=roads.csv --relation B=roads.csv --output paths.parquet
"""


class CliError(Exception):
    """A problem with the command's input, reported as one ``error:`` line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one-line :class:`CliError`."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{message} (see '{self.prog} --help')")


class _Elapsed(logging.Formatter):
    """``[  1.2 s] message``: seconds since the command started."""

    def __init__(self) -> None:
        super().__init__()
        self._t0 = time.perf_counter()

    def format(self, record: logging.LogRecord) -> str:
        return f"[{time.perf_counter() - self._t0:6.1f} s] {record.getMessage()}"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparkfaq")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown (not installed)"


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {n}")
    return n


def _parser() -> argparse.ArgumentParser:
    import semirings
    from faq.io import FORMATS

    names = ", ".join(semirings.names())
    semiring_help = "semirings:\n" + textwrap.indent(textwrap.fill(names, 76), "  ") + "\n"
    epilog = "\n".join([_GRAMMAR, semiring_help, _INPUTS, _EXAMPLES])
    raw = argparse.RawDescriptionHelpFormatter

    common = _Parser(add_help=False)
    common.add_argument(
        "--master",
        default=argparse.SUPPRESS,
        help="Spark master (default local[*]; an active session is used as it is)",
    )
    common.add_argument("--format", choices=FORMATS, help="read every input in this format")
    common.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="skip malformed lines (and say how many) instead of stopping at the first",
    )
    header = common.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        action="store_true",
        default=None,
        help="CSV inputs start with a header line (default: unless its fields are all numbers)",
    )
    header.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="CSV inputs have no header line: every line is data, every column an id",
    )
    common.add_argument(
        "--output",
        metavar="PATH",
        help="write the whole result (head variables, then value) to a CSV file, or "
        "to Parquet when PATH ends in .parquet",
    )
    common.add_argument(
        "--join", default="auto", choices=["auto", "wcoj", "binary"], help="join method"
    )
    common.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "driver", "tasks", "spark"],
        help="where steps run: by size (default), the local kernel in the driver or in "
        "Spark tasks, or Spark joins",
    )
    common.add_argument("--explain", action="store_true", help="print the plan report to stderr")
    common.add_argument(
        "--progress",
        action="store_true",
        help="log each phase and each engine step to stderr, with elapsed time",
    )

    parser = _Parser(
        prog="sparkfaq",
        description="Solve a Functional Aggregate Query over files on Spark, in any semiring.",
        epilog=epilog,
        formatter_class=raw,
    )
    parser.add_argument("--version", action="version", version=f"sparkfaq {_version()}")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{triangles,query}")
    tri = sub.add_parser(
        "triangles",
        parents=[common],
        help="count the triangles of an undirected graph",
        description=textwrap.fill(
            "Count the undirected triangles of a graph, whatever its format and "
            "orientation: the file is read as an undirected simple graph (u-v and v-u are "
            "one edge, repeats and self-loops dropped, a 'value' column ignored; a .mtx as "
            "the pattern of A+Aᵀ without the diagonal), oriented u < v, then "
            f"'{TRIANGLE_RULE}' runs over 'counting' and the count is printed.",
            78,
        ),
        epilog=_INPUTS,
        formatter_class=raw,
    )
    tri.add_argument("path", help="the graph: edge list, .csv, .parquet or .mtx")
    qp = sub.add_parser(
        "query",
        parents=[common],
        help="solve a rule over relations read from files",
        description="Solve a rule over relations read from files and print or write the result.",
        epilog=epilog,
        formatter_class=raw,
    )
    qp.add_argument("rule", help="the rule, e.g. 'Q(a) :- E(a, b), E(b, c)' (quote it)")
    qp.add_argument(
        "--semiring", default="counting", help="semiring name (default counting; see below)"
    )
    qp.add_argument(
        "--relation",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a relation of the rule and its file (once per relation)",
    )
    orient = qp.add_mutually_exclusive_group()
    orient.add_argument(
        "--undirected",
        action="store_true",
        help="read every binary relation as an undirected graph: add the mirror (v, u) of "
        "each edge (u, v), each direction once",
    )
    orient.add_argument(
        "--directed",
        action="store_true",
        help="read every row as written, one direction (the default)",
    )
    qp.add_argument(
        "--limit",
        type=_count,
        default=20,
        metavar="N",
        help="result rows to print, sorted by key (default 20; 0 prints all)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``sparkfaq`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 2 for a bad command line, rule, semiring or input (one
        ``error: ...`` line on stderr, no traceback); 130 when interrupted.
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help and --version print, then exit 0
        return exc.code if isinstance(exc.code, int) else 0
    except CliError as exc:
        return _fail(exc)
    handler = _start_progress() if args.progress else None
    try:
        return _run(args)
    except (CliError, ValueError, OverflowError) as exc:  # engine errors name the relation
        return _fail(exc)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    finally:
        if handler is not None:
            _stop_progress(*handler)


def _fail(exc: BaseException) -> int:
    message = " ".join(str(exc).split())  # always one line
    print(f"error: {message}", file=sys.stderr)
    return 2


def _start_progress() -> tuple[logging.Handler, int]:
    logger = logging.getLogger("faq")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Elapsed())
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler, old_level


def _stop_progress(handler: logging.Handler, old_level: int) -> None:
    logger = logging.getLogger("faq")
    logger.removeHandler(handler)
    logger.setLevel(old_level)


# -- the run ----------------------------------------------------------------------------------
def _run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    from faq import Query, query

    triangles = args.command == "triangles"
    if triangles:
        q = query(TRIANGLE_RULE, semiring="counting")
        specs = {"E": args.path}
    else:
        S = _semiring(args.semiring)
        try:
            q = query(args.rule, semiring=S)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        if not isinstance(q, Query):
            raise CliError(
                f"rule {args.rule!r} is a program of several (or recursive) rules; the "
                "command line solves one rule: use faq.query in Python (docs/recursion.md)"
            )
        specs = _relation_specs(args.relation, q)
    output = _output_path(args.output) if args.output else None

    keys, values, dictionary = _read_inputs(q, specs, args, triangles)
    if dictionary is not None and any(a.consts for a in q.rule.atoms):
        q = _coded_constants(q, dictionary)
    t_read = time.perf_counter()

    from faq.plan.settings import current
    from faq.session import local_session

    rows = sum(len(keys[n][0]) for n in specs)
    if (
        args.backend in ("tasks", "spark")
        or not args.master.startswith("local")
        or (rows > current().local_rows)
    ):
        log.info("starting Spark (%s)", args.master)
        spark = local_session(args.master)
        rels = {n: _dataframe(spark, keys[n], values[n]) for n in specs}
    else:  # it fits in the driver: the local kernel needs no Spark session
        log.info("%s rows fit in the driver: the local kernel runs them", f"{rows:,}")
        rels = {n: _factor(keys[n], values[n], q.semiring, n) for n in specs}
    t_spark = time.perf_counter()
    log.info("solving %s over %s", q.rule, q.semiring.name)
    out = q.solve(join=args.join, backend=args.backend, **rels)
    if output is None and not out.vars:
        print(out.scalar())
    if output is not None:
        log.info("writing %s", output)
        _write(out, dictionary, output)
    elif out.vars:
        _print_rows(out, dictionary, args.limit)
    t_solve = time.perf_counter()
    log.info("done")
    if args.explain:
        print(q.explain(join=args.join, backend=args.backend, **rels), file=sys.stderr)
    print(
        f"# read {t_read - t0:.2f} s, start {t_spark - t_read:.2f} s, "
        f"solve {t_solve - t_spark:.2f} s",
        file=sys.stderr,
    )
    return 0


def _semiring(name: str) -> Semiring:
    import semirings

    try:
        return semirings.get(name)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _relation_specs(given: list[str], q: Query) -> dict[str, str]:
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


def _output_path(text: str) -> Path:
    p = Path(text)
    if p.is_dir():
        raise CliError(f"--output {text!r} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise CliError(f"--output {text!r}: directory {str(parent)!r} does not exist")
    return p


def _read_inputs(
    q: Query, specs: dict[str, str], args: argparse.Namespace, triangles: bool
) -> tuple[dict[str, list[np.ndarray]], dict[str, np.ndarray | None], np.ndarray | None]:
    """Read and check every input on the driver: keys (int64) and values per relation.

    Every format follows one rule (see ``_INPUTS``): rows as written, ids as
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
        raise CliError(f"{prefix}{exc} (--skip-bad-lines skips malformed lines)") from None
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


def _coded_constants(q: Query, dictionary: np.ndarray) -> Query:
    """``q`` with its constants mapped like the ids (an integer as its decimal text); a
    constant that is no id gets code -1, which selects nothing."""
    from faq.query import Query
    from faq.rule import replace_constants

    def code(c: int | str) -> int:
        i = int(np.searchsorted(dictionary, str(c)))
        return i if i < len(dictionary) and dictionary[i] == str(c) else -1

    return Query(replace_constants(q.rule, code), q.semiring)


def _dataframe(spark: SparkSession, keys: list[np.ndarray], values: np.ndarray | None) -> DataFrame:
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


def _factor(keys: list[np.ndarray], values: np.ndarray | None, S: Semiring, name: str) -> Factor:
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


def _print_rows(out: Factor, dictionary: np.ndarray | None, limit: int) -> None:
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


def _write(out: Factor, dictionary: np.ndarray | None, path: Path) -> None:
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


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
