"""State folders written by an earlier version reopen, answer, tick and reopen again.

``tests/data/state_folders`` holds views of both states (driver and Spark), in the
counting, min-plus, real and integer semirings, written by commit 4bee67d (before a
tick's commit became one transaction, :mod:`incremental.commit`) with
``tests/data/state_folders/make.py``: each checkpointed, then three ticks journaled
after the checkpoint, then closed.  A reopen must replay the journal to the answer
recorded beside the folder, take a further tick, and reopen again at it.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

import faq
from incremental import IncrementalView

FOLDERS = Path(__file__).with_name("data") / "state_folders"
NAMES = sorted(p.stem for p in FOLDERS.glob("*.json"))


def _same(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(math.isclose(got[k], want[k]) for k in want)


@pytest.mark.parametrize("name", NAMES)
def test_a_folder_of_an_earlier_version_reopens_replays_and_ticks(name, tmp_path, request):
    record = json.loads((FOLDERS / f"{name}.json").read_text())
    if record["state"] == "spark":
        request.getfixturevalue("spark")  # the one session of the run
    folder = tmp_path / name
    shutil.copytree(FOLDERS / name, folder)
    q = faq.query(record["rule"], semiring=record["semiring"])
    want = {tuple(r[:-1]): r[-1] for r in record["rows"]}

    view = IncrementalView(q, state_dir=folder)
    assert (view.where, view.tick) == (record["state"], record["tick"])
    assert _same(view.result().to_dict(), want)

    E = view.relation("E").to_dict()
    gone = min(E)  # one tuple deleted, one inserted
    value = 1 if record["semiring"] in ("counting", "integer") else 2.0
    delta = pd.DataFrame(
        [(*gone, E[gone], -1), (7, 1, value, 1)], columns=["a", "b", "value", "_weight"]
    )
    view.step(E=delta)
    after = {k: v for k, v in E.items() if k != gone} | {(7, 1): value}
    rel = faq.Factor.from_dict(after, ("a", "b"), semiring=record["semiring"])
    batch = q.solve(E=rel).to_dict()
    assert _same(view.result().to_dict(), batch)
    view.close()

    again = IncrementalView(q, state_dir=folder)
    assert again.tick == record["tick"] + 1
    assert _same(again.result().to_dict(), batch)
    again.close()
