"""Write the state folders that tests/test_old_folders.py reopens.

Run once, from a checkout of the version whose folders are kept (``--out`` the folder to
fill), with a Java and PySpark at hand::

    PYTHONPATH=. python tests/data/state_folders/make.py --out tests/data/state_folders

Each view is built with initial relations, checkpointed, then ticked three times (the
ticks journaled after the checkpoint), and closed; its answer after the last tick is
written beside it (``<name>.json``: the rule, semiring, state and tick, and the
rows as lists ``[key..., value]``).  The folders were
written by commit 4bee67d, before a tick's commit became one transaction.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd

import faq
from faq.session import local_session
from incremental import IncrementalView

E0 = [(1, 2, 3.0), (2, 3, 1.0), (3, 1, 2.0), (2, 4, 5.0), (4, 1, 1.0)]
TICKS = [
    [(1, 3, 1.0, 1), (2, 3, 1.0, -1)],
    [(4, 2, 2.0, 1), (5, 1, 4.0, 1)],
    [(1, 2, 3.0, -1), (1, 2, 1.0, 1)],
]
VIEWS = {
    # name: (rule, semiring, state)
    "driver-counting": ("Q(a, c) :- E(a, b), E(b, c)", "counting", "driver"),
    "driver-min-plus": ("Q(a, c) :- E(a, b), E(b, c)", "min-plus", "driver"),
    "driver-real": ("Q(a) :- E(a, b), E(b, c)", "real", "driver"),
    "spark-counting": ("Q(a, c) :- E(a, b), E(b, c)", "counting", "spark"),
    "spark-integer": ("Q(a) :- E(a, b), E(b, c)", "integer", "spark"),
}


def frame(rows: list[tuple], semiring: str, weighted: bool) -> pd.DataFrame:
    """Rows as a pandas frame of the semiring's values (counting: every value 1)."""
    cols = ["a", "b", "value", "_weight"] if weighted else ["a", "b", "value"]
    df = pd.DataFrame(rows, columns=cols)
    if semiring in ("counting", "integer"):
        df["value"] = 1
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    out = ap.parse_args().out
    local_session()
    for name, (rule, semiring, state) in VIEWS.items():
        folder = out / name
        shutil.rmtree(folder, ignore_errors=True)
        q = faq.query(rule, semiring=semiring)
        view = IncrementalView(
            q, state_dir=folder, state=state, E=frame(E0, semiring, weighted=False)
        )
        for t in TICKS:
            view.step(E=frame(t, semiring, weighted=True))
        got = view.result().to_dict()
        view.close()
        rows = sorted([*k, v] for k, v in got.items())
        record = {"rule": rule, "semiring": semiring, "state": state, "tick": view.tick}
        (out / f"{name}.json").write_text(json.dumps({**record, "rows": rows}) + "\n")
        print(name, view.where, view.tick, len(rows))


if __name__ == "__main__":
    main()
