"""Command line: run a rule over files on local Spark.

Examples
--------
Count the triangles of a SNAP edge list::

    sparkfaq triangles tests/data/karate.txt

Any rule, relations from edge lists (two integer columns) or CSV files with a
header (key columns, then optionally ``value``)::

    sparkfaq query "Q(a) :- E(a, b), E(b, c)" --semiring counting --relation E=edges.txt
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def _relation(spark: SparkSession, spec: str, undirected: bool) -> tuple[str, DataFrame]:
    name, _, path = spec.partition("=")
    if not name or not path:
        raise SystemExit(f"--relation takes NAME=PATH, got {spec!r}")
    if path.endswith(".csv"):
        return name, spark.read.csv(path, header=True, inferSchema=True)
    from faq.io import read_edge_list

    return name, read_edge_list(path, spark, undirected=undirected)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sparkfaq`` command."""
    parser = argparse.ArgumentParser(prog="sparkfaq", description=__doc__.split("\n")[0])
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    sub = parser.add_subparsers(dest="command", required=True)
    tri = sub.add_parser("triangles", help="count the triangles of an undirected edge list")
    tri.add_argument("path")
    tri.add_argument("--join", default="auto", choices=["auto", "wcoj", "binary"])
    qp = sub.add_parser("query", help="solve a rule over edge-list or CSV relations")
    qp.add_argument("rule")
    qp.add_argument("--semiring", default="counting")
    qp.add_argument("--relation", action="append", default=[], metavar="NAME=PATH")
    qp.add_argument("--directed", action="store_true", help="keep edge lists as given")
    qp.add_argument("--join", default="auto", choices=["auto", "wcoj", "binary"])
    qp.add_argument("--limit", type=int, default=20, help="result rows to print")
    args = parser.parse_args(argv)

    from faq import query
    from faq.session import local_session

    spark = local_session(args.master)
    if args.command == "triangles":
        from faq.io import read_edge_list

        q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
        rels = {"E": read_edge_list(args.path, spark)}
    else:
        q = query(args.rule, semiring=args.semiring)
        rels = dict(_relation(spark, s, not args.directed) for s in args.relation)
    t0 = time.perf_counter()
    try:
        out = q.solve(join=args.join, **rels)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - t0
    if not out.vars:
        print(out.scalar())
    else:
        for row in out.df.limit(args.limit).collect():
            print("\t".join(str(x) for x in row))
    print(f"# {seconds:.2f} s", file=sys.stderr)
    print(q.explain(**rels), file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
