"""Count the triangles of a graph with the FAQ engine.

Usage::

    python examples/triangle_count.py [PATH] [--spark]

``PATH`` is a SNAP-style edge list (``#`` comments, one ``u v`` pair a line);
the default is Zachary's karate club, ``tests/data/karate.txt`` (45 triangles).
Each undirected edge is kept once as ``(u, v)`` with ``u < v``, so the rule
``Q() :- E(a, b), E(b, c), E(a, c)`` over the counting semiring counts every
triangle exactly once (as ``a < b < c``).  The triangle is a cyclic query:
InsideOut eliminates one variable with a bag holding all three atoms, and
joins that bag with the worst-case optimal Generic Join; ``explain`` shows it.

The file is read into the driver (:func:`faq.io.read`), so the count starts no
JVM: a graph that fits in memory needs no Spark.  With ``--spark`` the edges are
read as a Spark DataFrame (:func:`faq.io.read_edge_list`) on a local session
instead, and the same query runs on Spark's side of the engine (the first run
of a process then pays for starting the JVM, several seconds).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from faq import query

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "karate.txt"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spark = "--spark" in args
    args = [a for a in args if a != "--spark"]
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if args and args[0] in ("-h", "--help") else 2
    path = Path(args[0]) if args else DEFAULT

    if spark:
        from faq.io import read_edge_list
        from faq.session import local_session

        local_session("local[2]")
        edges = read_edge_list(path)  # a Spark DataFrame (src, dst), src < dst
    else:
        import faq.io

        # the simple undirected graph, each edge once as (u, v) with u < v, in the driver
        edges = faq.io.read(path, vars=("a", "b"), simple=True)
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")

    t0 = time.perf_counter()
    run = q.run(E=edges)
    seconds = time.perf_counter() - t0

    print(f"{path.name}: {run.result.scalar()} triangles ({seconds:.2f} s)")
    print()
    print(q.explain(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
