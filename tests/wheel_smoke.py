"""Smoke test of an installed sparkfaq: what a user gets from ``pip install``.

Run by ``.ci/run`` in a fresh virtualenv outside the checkout, with the built wheel
installed, and by ``tests/test_wheel.py`` over the wheel installed into a folder of its
own::

    python wheel_smoke.py [--forbid DIR] [--no-spark]

It imports every module of the three packages (and fails when one of them comes from
``DIR``, the source checkout; a package of an extra whose dependencies are not installed,
``incremental.testing`` without hypothesis, must refuse with an ImportError naming the
extra), checks that the data files the library reads at run time are installed, counts
the triangles of a small graph in the driver and with the kernel inside Spark tasks (so
that Python workers import the installed package too; not with ``--no-spark``), runs a
one-tick incremental view, and runs the ``sparkfaq`` command.  Each check prints one line
``ok <what>``; the first failure ends the program with its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("semirings", "faq", "incremental")
EXTRAS = {"incremental.testing": "sparkfaq[testing]"}
"""Packages that need an extra's dependencies: without them, importing one must be an
ImportError that names the extra."""
EDGES = [(0, 1), (1, 2), (0, 2), (2, 3), (1, 3), (3, 4)]
"""A small undirected graph with two triangles: 0-1-2 and 1-2-3."""


def ok(what: str) -> None:
    print(f"ok {what}", flush=True)


def every_module(forbid: Path | None) -> Path:
    """Import every module of the three packages; return the folder they were installed in."""
    homes = set()
    count = 0
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        home = Path(pkg.__file__).resolve().parent.parent
        homes.add(home)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{name}."):
            try:
                mod = importlib.import_module(info.name)
            except ImportError as e:
                extra = next((x for p, x in EXTRAS.items() if info.name.startswith(p)), None)
                if extra is None or f"pip install '{extra}'" not in str(e):
                    raise
                ok(f"{info.name} asks for its extra: {e}")  # its dependencies are not here
                continue
            where = Path(mod.__file__).resolve()
            if forbid is not None and where.is_relative_to(forbid):
                raise AssertionError(f"{info.name} was imported from the checkout: {where}")
            count += 1
    assert len(homes) == 1, f"the packages come from several places: {sorted(homes)}"
    (home,) = homes
    ok(f"imported {count} modules from {home}")
    return home


def data_files() -> None:
    from faq import session

    assert session.LOG4J_CONFIG.is_file(), f"missing {session.LOG4J_CONFIG}"
    for name in PACKAGES:
        typed = Path(importlib.import_module(name).__file__).with_name("py.typed")
        assert typed.is_file(), f"missing {typed}"
    ok("log4j2.properties and py.typed installed")


def triangles(spark: bool) -> None:
    import numpy as np
    import pandas as pd

    from faq import Factor, query
    from faq.session import local_session

    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    rows = np.array(EDGES, dtype=np.int64)
    local = Factor.from_pandas(pd.DataFrame(rows, columns=["a", "b"]), vars=("a", "b"))
    assert tri.solve(E=local).scalar() == 2
    ok("triangles in the driver: 2")
    if not spark:
        return
    session = local_session("local[2]")
    df = session.createDataFrame([tuple(map(int, e)) for e in rows], "a long, b long")
    run = tri.run(E=df, backend="tasks")
    assert run.result.scalar() == 2, run.result.scalar()
    assert {s.choice.backend for s in run.trace.steps} == {"tasks"}
    ok("triangles with the kernel in Spark tasks: 2")


def one_tick_view() -> None:
    import pandas as pd

    from faq import query
    from incremental import IncrementalView

    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    view = IncrementalView(tri, E=pd.DataFrame(EDGES, columns=["a", "b"]))
    change = view.step(E=pd.DataFrame({"a": [0], "b": [3]}))
    assert view.tick == 1
    assert view.result().scalar() == 4, view.result().scalar()
    assert change.scalar() == 2, change.scalar()
    ok("a one-tick view: 2 -> 4 triangles")


def command(tmp: Path) -> None:
    path = tmp / "edges.txt"
    path.write_text("# u v\n" + "".join(f"{u} {v}\n" for u, v in EDGES))
    exe = shutil.which("sparkfaq") or str(Path(sys.executable).with_name("sparkfaq"))
    if not Path(exe).exists():
        # installed with --target: no console script; run its entry point instead
        args = [sys.executable, "-c", "import sys, faq.cli; sys.exit(faq.cli.main())"]
    else:
        args = [exe]
    out = subprocess.run(
        [*args, "triangles", str(path)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"sparkfaq exited with {out.returncode}\n{out.stderr}"
    assert out.stdout.strip().splitlines()[-1].strip() == "2", out.stdout
    ok("sparkfaq triangles: 2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forbid", type=Path, help="no module may be imported from here")
    parser.add_argument(
        "--no-spark", action="store_true", help="skip the one check that starts Spark"
    )
    args = parser.parse_args()
    forbid = args.forbid.resolve() if args.forbid else None
    every_module(forbid)
    data_files()
    with tempfile.TemporaryDirectory(prefix="sparkfaq-smoke-") as tmp:
        command(Path(tmp))
        one_tick_view()
        triangles(spark=not args.no_spark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
