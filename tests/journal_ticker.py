"""A process for tests/test_journal.py to kill: a durable view ticking until it is killed.

Run as ``python tests/journal_ticker.py FOLDER SIDE SEED``: it creates a
counting triangle view of :class:`Ticks` ``(SEED)``'s first delta on FOLDER
(driver state, no SparkSession, a checkpoint every 7 ticks), prints
``ticking``, then steps through the next deltas forever, appending
``TICK ANSWER`` to the file SIDE after each committed tick.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from faq import query, settings
from incremental import IncrementalView

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
CHECKPOINT_TICKS = 7


def ticker_query():
    """The view's query."""
    return query(TRIANGLE, semiring="counting")


class Ticks:
    """A deterministic sequence of valid counting deltas of ``E`` (never a negative
    count): 60 edges first, then 4 changes a tick, about a third of them deletions."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.held: list[tuple[int, int]] = []

    def next(self) -> pd.DataFrame:
        """The next delta (columns a, b, value)."""
        rows = []
        for _ in range(4 if self.held else 60):
            if self.held and self.rng.random() < 0.35:
                a, b = self.held.pop(int(self.rng.integers(len(self.held))))
                rows.append((a, b, -1))
            else:
                a, b = (int(x) for x in self.rng.integers(0, 15, size=2))
                self.held.append((a, b))
                rows.append((a, b, 1))
        return pd.DataFrame(rows, columns=["a", "b", "value"])


def main(folder: str, side: str, seed: int) -> None:
    ticks = Ticks(seed)
    with settings(journal_ticks=CHECKPOINT_TICKS):
        view = IncrementalView(ticker_query(), state_dir=folder, state="driver", E=ticks.next())
        print("ticking", flush=True)
        with open(side, "a", encoding="utf-8") as out:
            while True:
                view.step(E=ticks.next())
                out.write(f"{view.tick} {view.result().scalar()}\n")
                out.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
