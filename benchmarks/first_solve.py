"""Where the first solve of a process spends its time: imports, Spark, numba, the query.

    python benchmarks/first_solve.py [--runs 2] [--master local[2]]

Each run is a fresh Python process (what a user's script is) that times, in
order: ``import faq``; ``local_session()`` (the JVM and SparkContext start);
the first solve of the triangle count over a ``Factor.from_dict`` graph
(driver only: no Spark job, so its time is the kernel's numba code being
compiled or loaded from numba's disk cache, plus the solve itself); the same
solve again (warm); the first solve over the karate-club edge list read with
``read_edge_list`` (Spark's first jobs: the size estimate and the read into the
driver) and that solve again.  The kernel's own log line (``kernel ready in
...``) says how long compiling took and how many signatures came from the disk
cache; the ``load`` lines how long reading each relation took.

The first ``--runs`` processes share one new, empty numba cache directory
(``NUMBA_CACHE_DIR``), so the first of them starts cold (nothing compiled yet,
as after installing) and the later ones find the disk cache warm.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, logging, sys, time
t0 = time.perf_counter()
import faq
from faq import Factor, query
from faq.io import read_edge_list
from faq.session import local_session
marks = {"import faq": time.perf_counter() - t0}
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("faq").addHandler(Keep())
logging.getLogger("faq").setLevel(logging.INFO)
t = time.perf_counter()
spark = local_session(sys.argv[1])
marks["local_session()"] = time.perf_counter() - t
tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
edges = {(i, j): 1 for i in range(40) for j in range(i + 1, 40) if (i * j) % 7 < 3}
local = Factor.from_dict(edges, vars=("a", "b"), semiring="counting")
for label, E in (("driver", local), ("karate", None)):
    for n in ("first", "second"):
        if E is None:
            E = read_edge_list("tests/data/karate.txt")
        t = time.perf_counter()
        tri.solve(E=E).scalar()
        marks[f"{n} solve, {label}"] = time.perf_counter() - t
marks["total"] = time.perf_counter() - t0
print(json.dumps({"marks": marks, "log": lines}))
"""


def run_child(master: str, cache: str) -> dict:
    """One fresh process's timings (see the module docstring)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, master],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    """Print the phases of ``--runs`` fresh processes, the first with a cold numba cache."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="processes (the first is cold)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        results = [run_child(args.master, cache) for _ in range(args.runs)]
    names = list(results[0]["marks"])
    heads = ["cold cache" if i == 0 else f"warm cache {i}" for i in range(len(results))]
    print(f"{'phase':<24}" + "".join(f"{h:>14}" for h in heads))
    for name in names:
        print(f"{name:<24}" + "".join(f"{r['marks'][name]:>13.2f}s" for r in results))
    for h, r in zip(heads, results, strict=True):
        for ln in r["log"]:
            if ln.startswith(("kernel", "load")):  # the step lines are in the table's times
                print(f"{h}: {ln}")


if __name__ == "__main__":
    main()
