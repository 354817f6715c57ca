"""A second process for tests/test_state_lock.py: holds a durable view open on a folder.

Run as ``python tests/lock_holder.py FOLDER``; it reads one command a line on
stdin and answers one line on stdout:

``open``  open (the first time: create, empty) a counting view of ``Q(a) :- E(a, b)``
          on FOLDER (driver state, no SparkSession): ``ready tick=T``, or
          ``refused LockError: <message>``;
``step``  insert the edge ``(1, tick + 2)``: ``stepped tick=T``;
``close`` close the view: ``closed``.
"""

from __future__ import annotations

import sys

from faq import Factor, query
from incremental import IncrementalView, LockError


def main(folder: str) -> None:
    view = None
    for line in sys.stdin:
        command = line.strip()
        if command == "open":
            try:
                view = IncrementalView(query("Q(a) :- E(a, b)", semiring="counting"),
                                       state_dir=folder, state="driver")  # fmt: skip
            except LockError as exc:
                print(f"refused LockError: {exc}", flush=True)
                continue
            print(f"ready tick={view.tick}", flush=True)
        elif command == "step":
            assert view is not None
            edge = Factor.from_dict({(1, view.tick + 2): 1}, ("a", "b"), "counting")
            view.step(E=edge)
            print(f"stepped tick={view.tick}", flush=True)
        elif command == "close":
            assert view is not None
            view.close()
            print("closed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
