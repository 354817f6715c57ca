"""A Structured Streaming driver that maintains a triangle count: run by tests/test_streaming.py.

Run as ``python tests/stream_job.py INPUT STATE CKPT``.  It opens (the first
time: creates, empty) the durable view ``IncrementalView(q, state_dir=STATE)``
of the counting triangle query, then streams the Parquet files of ``INPUT``
(columns ``src``, ``dst``, ``_weight``), one file per micro-batch, through
``view.foreach_batch("E")`` with the Spark checkpoint ``CKPT`` and an
``availableNow`` trigger, so a run ends once every file present at its start
is processed.  Spark and the view are both restartable: a run killed at any
moment and started again with the same folders must apply every file exactly
once.

Every line it prints is flushed at once, so the test can follow it:

``ready tick=T batch_id=B count=C``
    the view is open (reopened at tick ``T``, last batch ``B``, count ``C``);
``begin N``
    micro-batch ``N`` reached ``foreachBatch``;
``applied N tick=T batch_id=B count=C`` / ``skipped N ...``
    the view's step for batch ``N`` returned (``skipped``: the view had
    already committed it) and the state it left;
``hold WHERE N``
    only for the batch named by ``$STREAM_JOB_HOLD`` (``WHERE:N``): the job
    stops there for ``$STREAM_JOB_HOLD_SECONDS`` (default 600) so the test can
    kill it at that point.  ``before``: in ``foreachBatch``, before the step
    (Spark has logged the batch's offsets, the view has not applied it);
    ``commit``: inside the step's commit, with the tick half written: half of
    its journal frame is on disk (a torn frame), or, for a tick that writes a
    checkpoint, its files are written and its manifest not yet renamed into
    place; either way the tick is not committed; ``after``: the
    step has committed, Spark has not yet recorded the batch as done;
``{"count": ..., "tick": ..., "batch_id": ..., "edges": [[src, dst, m], ...]}``
    the last line, once the stream has ended: the final count and the view's
    relation ``E`` (net multiplicities).

A failure (an exception in the stream) ends the program with its traceback on
stderr and a non-zero status.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faq import query
from faq.session import local_session
from incremental import IncrementalView

TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
SCHEMA = "src bigint, dst bigint, _weight bigint"
HOLDS = ("before", "commit", "after")

current: dict[str, int | None] = {"batch": None}
"""The micro-batch being applied (read by the commit hold)."""


def say(line: str) -> None:
    """Print one progress line, flushed."""
    print(line, flush=True)


def parse_hold(spec: str) -> tuple[str, int] | None:
    """``"WHERE:N"`` from ``$STREAM_JOB_HOLD`` as ``(WHERE, N)``; None for an empty spec."""
    if not spec:
        return None
    where, _, batch = spec.partition(":")
    if where not in HOLDS or not batch.isdigit():
        raise SystemExit(f"STREAM_JOB_HOLD must be one of {HOLDS} ':' a batch id, not {spec!r}")
    return where, int(batch)


def hold(where: str, batch: int) -> None:
    """Announce the hold point and wait there (the test kills the job meanwhile)."""
    say(f"hold {where} {batch}")
    time.sleep(float(os.environ.get("STREAM_JOB_HOLD_SECONDS", "600")))


def hold_in_commit(state: Path, batch: int) -> None:
    """Hold inside the view's commit of ``batch``: once half of its journal frame is
    written (``os.pwrite`` to a ``journal.bin`` under ``state``), or, for a tick that
    writes a checkpoint, just before its manifest is renamed over
    ``STATE/manifest.json`` (``os.replace`` or ``os.rename``)."""
    target = (state / "manifest.json").resolve()
    folder = state.resolve()
    pwrite = os.pwrite

    def journal_write(fd: int, data: Any, offset: int) -> int:
        if current["batch"] == batch:
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if where.name == "journal.bin" and folder in where.parents:
                half = memoryview(data)[: max(1, len(data) // 2)]
                pwrite(fd, half, offset)
                hold("commit", batch)
        return pwrite(fd, data, offset)

    os.pwrite = journal_write

    def wrap(rename: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(rename)
        def renamed(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
            if current["batch"] == batch and Path(dst).resolve() == target:
                hold("commit", batch)
            return rename(src, dst, *args, **kwargs)

        return renamed

    os.replace = wrap(os.replace)
    os.rename = wrap(os.rename)


def state_line(view: IncrementalView) -> str:
    """``tick=T batch_id=B count=C`` of ``view``."""
    count = int(view.result().scalar())
    return f"tick={view.tick} batch_id={view.batch_id} count={count}"


def main(input_dir: str, state_dir: str, checkpoint: str) -> None:
    held = parse_hold(os.environ.get("STREAM_JOB_HOLD", ""))
    spark = local_session(
        "local[2]",
        **{
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    try:
        view = IncrementalView(query(TRIANGLE, semiring="counting"), state_dir=state_dir)
        say(f"ready {state_line(view)}")
        if held is not None and held[0] == "commit":
            hold_in_commit(Path(state_dir), held[1])
        apply = view.foreach_batch("E")

        def each(df: Any, batch_id: int) -> None:
            current["batch"] = batch_id
            say(f"begin {batch_id}")
            if held == ("before", batch_id):
                hold("before", batch_id)
            apply(df, batch_id)
            done = "skipped" if view.last_step is not None and view.last_step.skipped else "applied"
            say(f"{done} {batch_id} {state_line(view)}")
            if held == ("after", batch_id):
                hold("after", batch_id)
            current["batch"] = None

        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(input_dir)
        run = (
            stream.writeStream.foreachBatch(each)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        run.awaitTermination()
        edges = sorted(
            [int(a), int(b), int(m)] for (a, b), m in view.relation("E").to_dict().items() if m
        )
        final = {
            "count": int(view.result().scalar()),
            "tick": view.tick,
            "batch_id": view.batch_id,
            "edges": edges,
        }
        say(json.dumps(final))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
