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
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    pass

from faq.cli_files import (
    CliError,
    coded_constants,
    dataframe,
    local_factor,
    output_path,
    print_rows,
    read_inputs,
    relation_specs,
    semiring_named,
    write_answer,
)

__all__ = ["CliError", "main"]

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


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one-line :class:`CliError`."""

    def error(self, message: str) -> None:  # type: ignore[override]
        given = re.findall(r"(?<![\w-])([A-Za-z_]\w*=\S+)", message.partition(": ")[2])
        if message.startswith("unrecognized arguments") and given:
            shown = " ".join(f"--relation {g}" for g in given)
            raise CliError(f"{message}: a relation is given as {shown} (see '{self.prog} --help')")
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


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return x


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
        help="log each phase and each engine step to stderr, with elapsed time, and every "
        "5 s while a step runs: its Spark tasks done out of tasks, running, rows read",
    )
    common.add_argument(
        "--progress-every",
        type=_seconds,
        metavar="SECONDS",
        help="--progress, with a line this often while a step runs (default 5)",
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
    every = args.progress_every
    handler = _start_progress() if args.progress or every is not None else None
    try:
        if every is None:
            return _run(args)
        from faq.plan.settings import settings

        with settings(progress_seconds=every):
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
        S = semiring_named(args.semiring)
        try:
            q = query(args.rule, semiring=S)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        if not isinstance(q, Query):
            raise CliError(
                f"rule {args.rule!r} is a program of several (or recursive) rules; the "
                "command line solves one rule: use faq.query in Python (docs/recursion.md)"
            )
        specs = relation_specs(args.relation, q)
    output = output_path(args.output) if args.output else None

    keys, values, dictionary = read_inputs(q, specs, args, triangles)
    if dictionary is not None and any(a.consts for a in q.rule.atoms):
        q = coded_constants(q, dictionary)
    t_read = time.perf_counter()

    from faq.plan.physical import backend_policy
    from faq.plan.settings import current
    from faq.session import local_session

    rows = sum(len(keys[n][0]) for n in specs)
    if (
        backend_policy(args.backend).needs_session
        or not args.master.startswith("local")
        or (rows > current().local_rows)
    ):
        log.info("starting Spark (%s)", args.master)
        spark = local_session(args.master)
        rels = {n: dataframe(spark, keys[n], values[n]) for n in specs}
    else:  # it fits in the driver: the local kernel needs no Spark session
        log.info("%s rows fit in the driver: the local kernel runs them", f"{rows:,}")
        rels = {n: local_factor(keys[n], values[n], q.semiring, n) for n in specs}
    t_spark = time.perf_counter()
    log.info("solving %s over %s", q.rule, q.semiring.name)
    run = q.run(join=args.join, backend=args.backend, **rels)
    out = run.result
    if output is None and not out.vars:
        print(out.scalar())
    if output is not None:
        log.info("writing %s", output)
        write_answer(out, dictionary, output)
    elif out.vars:
        print_rows(out, dictionary, args.limit)
    t_solve = time.perf_counter()
    log.info("done")
    if args.explain:
        print(q.explain(run), file=sys.stderr)
    print(
        f"# read {t_read - t0:.2f} s, start {t_spark - t_read:.2f} s, "
        f"solve {t_solve - t_spark:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
