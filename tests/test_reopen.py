"""Reopening a durable view: the semiring it was written with, if_exists, batch ids, files.

Oracles: a batch solve over the accumulated relations (what a reopened view must
answer), and the folder's bytes (a refused reopen or step changes nothing).

* A user semiring is recorded by its fingerprint (zero, one, and add, mul, neg on
  probes of its own domain); reopening with another definition under the same
  name is refused, naming what differs.  Before, only the name was compared, and
  ``Semiring("bottleneck", -inf, inf, max, min)`` reopened as
  ``Semiring("bottleneck", 0.0, 1.0, add, mul)`` answered with the new ⊕.
* ``if_exists="resume"`` opens an existing folder and leaves the initial relations
  unread (no Spark job), or creates the view from them.
* Any integral batch id (numpy's too) is accepted.
* A committed file deleted under a live view is noticed at the next commit:
  written again from memory (driver state), or the step refused (Spark state).
"""

from __future__ import annotations

import hashlib
import json
import logging
import operator
from pathlib import Path

import numpy as np
import pytest

from faq import Factor, query
from incremental import IncrementalView, StateError
from incremental.journal import read_frames
from semirings import Semiring
from tests.helpers import spark_jobs

INF = float("inf")
RULE = "Q(a) :- E(a, b), F(b)"


def _bottleneck() -> Semiring:
    return Semiring("bottleneck", -INF, INF, max, min)


def _bottleneck_view(folder: Path, S: Semiring) -> IncrementalView:
    E = Factor.from_dict({(1, 2): 10.0, (1, 3): 24.0}, ("a", "b"), S)
    F = Factor.from_dict({(2,): 30.0, (3,): 50.0}, ("b",), S)
    return IncrementalView(query(RULE, semiring=S), state_dir=folder, E=E, F=F)


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("lease.json", ".lock")
    }


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _rewrite_manifest(root: Path, m: dict) -> None:
    """Write ``m`` with a correct checksum (as an older version of the code would have)."""
    body = {k: v for k, v in m.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    full = {**body, "checksum": hashlib.sha256(text.encode()).hexdigest()}
    (root / "manifest.json").write_text(json.dumps(full, indent=1, sort_keys=True))


# -- the semiring a folder was written with -----------------------------------------------------
def test_a_user_semiring_redefined_under_its_name_is_refused(tmp_path):
    view = _bottleneck_view(tmp_path, _bottleneck())
    assert view.result().to_dict() == {(1,): 24.0}  # max over b of min(E, F)
    view.close()
    state = _files(tmp_path)
    other = Semiring("bottleneck", 0.0, 1.0, operator.add, operator.mul)
    with pytest.raises(ValueError, match="defined differently") as err:
        IncrementalView(query(RULE, semiring=other), state_dir=tmp_path)
    message = str(err.value)
    assert "zero is -inf in the folder, 0.0 now" in message
    assert "one is inf in the folder, 1.0 now" in message
    assert "add(" in message and "mul(" in message
    assert _files(tmp_path) == state


def test_only_what_differs_is_named(tmp_path):
    S = Semiring("plus-times", 0.0, 1.0, operator.add, operator.mul, neg=operator.neg)
    E = Factor.from_dict({(1, 2): 2.0}, ("a", "b"), S)
    F = Factor.from_dict({(2,): 3.0}, ("b",), S)
    IncrementalView(query(RULE, semiring=S), state_dir=tmp_path, E=E, F=F).close()
    maxed = Semiring("plus-times", 0.0, 1.0, max, operator.mul, neg=operator.neg)
    with pytest.raises(ValueError, match="defined differently") as err:
        IncrementalView(query(RULE, semiring=maxed), state_dir=tmp_path)
    message = str(err.value)
    assert "add(-1.5, -1.5) is -3.0 in the folder, -1.5 now" in message, message
    assert "zero is" not in message and "one is" not in message and "mul(" not in message
    negated = Semiring("plus-times", 0.0, 1.0, operator.add, operator.mul, neg=lambda x: x)
    with pytest.raises(ValueError, match=r"neg\(-1\.5\) is 1\.5 in the folder, -1\.5 now"):
        IncrementalView(query(RULE, semiring=negated), state_dir=tmp_path)


def test_the_same_definition_reopens(spark, tmp_path):
    view = _bottleneck_view(tmp_path, _bottleneck())
    view.step(E=spark.createDataFrame([(4, 3, 40.0)], "a bigint, b bigint, value double"))
    view.close()
    again = IncrementalView(query(RULE, semiring=_bottleneck()), state_dir=tmp_path)
    assert again.tick == 1 and again.result().to_dict() == {(1,): 24.0, (4,): 40.0}
    fingerprint = _manifest(tmp_path)["semiring_fingerprint"]
    assert fingerprint["zero"] == "-inf" and fingerprint["neg"] is None


def test_a_manifest_without_a_fingerprint_reopens_with_a_warning(tmp_path, caplog):
    _bottleneck_view(tmp_path, _bottleneck()).close()
    m = _manifest(tmp_path)
    del m["semiring_fingerprint"]
    _rewrite_manifest(tmp_path, m)
    with caplog.at_level(logging.WARNING, logger="faq.incremental"):
        again = IncrementalView(query(RULE, semiring=_bottleneck()), state_dir=tmp_path)
    assert again.result().to_dict() == {(1,): 24.0}
    assert "identified by its name only" in caplog.text


def test_a_built_in_is_not_reopened_as_a_user_semiring_of_its_name(spark, tmp_path):
    E = Factor.from_dict({(1, 2): 1}, ("a", "b"), "counting")
    q = query("Q(a) :- E(a, b)", semiring="counting")
    IncrementalView(q, state="spark", state_dir=tmp_path, E=E).close()
    m = _manifest(tmp_path)
    assert m["state"] == "spark" and m["semiring_fingerprint"] is None
    fake = Semiring("counting", 0, 1, operator.add, operator.mul)
    with pytest.raises(ValueError, match="built-in semiring 'counting'"):
        IncrementalView(query("Q(a) :- E(a, b)", semiring=fake), state_dir=tmp_path)


# -- if_exists ----------------------------------------------------------------------------------
def _count_view(folder: Path, **kw) -> IncrementalView:
    E = Factor.from_dict({(1, 2): 1, (1, 3): 1}, ("a", "b"), "counting")
    return IncrementalView(
        query("Q(a) :- E(a, b)", semiring="counting"), state_dir=folder, **kw, E=E
    )


def test_initial_relations_on_an_existing_folder_point_at_resume(tmp_path):
    _count_view(tmp_path).close()
    with pytest.raises(ValueError, match='if_exists="resume"'):
        _count_view(tmp_path)
    with pytest.raises(ValueError, match="unknown if_exists 'keep'; valid: error, resume"):
        _count_view(tmp_path / "other", if_exists="keep")


def test_resume_creates_then_resumes_a_restarted_job(tmp_path):
    """A job restarted three times: the first run creates the view, the others resume."""
    for run in range(3):
        with _count_view(tmp_path, if_exists="resume") as view:
            assert view.tick == run
            delta = Factor.from_dict({(2, run): 1}, ("a", "b"), "integer")
            view.step(batch_id=run, E=delta)
    assert view.result().to_dict() == {(1,): 2, (2,): 3}


def test_resume_does_not_read_the_initial_relations(spark, tmp_path):
    q = query("Q(a) :- E(a, b)", semiring="counting")
    first = spark.createDataFrame([(1, 2), (1, 3)], "a bigint, b bigint")
    IncrementalView(q, state_dir=tmp_path, E=first).close()
    # would be refused if read: a null key
    again = spark.createDataFrame([(None, 2)], "a bigint, b bigint")
    view, jobs = spark_jobs(
        spark, lambda: IncrementalView(q, state_dir=tmp_path, if_exists="resume", E=again),
        "resume-reads-nothing",
    )  # fmt: skip
    assert jobs == 0, jobs
    assert view.result().to_dict() == {(1,): 2}
    with pytest.raises(ValueError, match="unknown relation|no relation"):
        IncrementalView(q, state_dir=tmp_path, if_exists="resume", X=again)


# -- batch ids ------------------------------------------------------------------------------------
def test_numpy_integer_batch_ids_are_accepted(tmp_path):
    view = _count_view(tmp_path)
    delta = Factor.from_dict({(5, 6): 1}, ("a", "b"), "integer")
    view.step(batch_id=np.int64(3), E=delta)
    assert view.batch_id == 3 and type(view.batch_id) is int
    m = _manifest(tmp_path)  # the tick went to the journal, its batch id a JSON int
    assert read_frames(tmp_path / m["journal"], m["tick"])[0][-1].batch_id == 3
    view.step(batch_id=np.uint8(3), E=delta)  # replayed: skipped
    assert view.last_step.skipped and view.tick == 1
    view.step(batch_id=np.int32(4), E=delta)
    assert view.tick == 2 and view.result().to_dict() == {(1,): 2, (5,): 2}
    for bad in (True, np.bool_(True), 2.0, np.int64(-1), "5"):
        with pytest.raises(ValueError, match="batch_id must be a non-negative integer"):
            view.step(batch_id=bad, E=delta)
    assert view.tick == 2


# -- files deleted under a live view ------------------------------------------------------------
def test_a_file_lost_under_a_live_driver_view_is_written_again(tmp_path, caplog):
    view = _count_view(tmp_path)
    view.step(E=Factor.from_dict({(4, 5): 1}, ("a", "b"), "integer"))
    files = sorted(_manifest(tmp_path)["files"])
    base = next(f for f in files if f.endswith("rel-E.base.parquet"))
    out = next(f for f in files if f.endswith("out.base.parquet"))
    (tmp_path / base).unlink()
    with (tmp_path / out).open("ab") as fh:
        fh.write(b"junk")
    with caplog.at_level(logging.WARNING, logger="faq.incremental"):
        view.step(E=Factor.from_dict({(4, 6): 1}, ("a", "b"), "integer"))
    assert "rel-E.base.parquet of the committed state is missing" in caplog.text
    assert "out.base.parquet of the committed state has" in caplog.text
    assert base not in _manifest(tmp_path)["files"] and out not in _manifest(tmp_path)["files"]
    view.close()
    again = IncrementalView(query("Q(a) :- E(a, b)", semiring="counting"), state_dir=tmp_path)
    assert again.tick == 2 and again.result().to_dict() == {(1,): 2, (4,): 2}


def test_a_file_lost_under_a_live_spark_view_is_written_again(spark, tmp_path, caplog):
    """As in the driver state (one store): the base is written again from the state."""
    q = query("Q(a) :- E(a, b), F(b)", semiring="integer")
    E = Factor.from_dict({(1, 2): 1, (1, 3): 1}, ("a", "b"), "integer")
    F = Factor.from_dict({(2,): 1, (3,): 1}, ("b",), "integer")
    view = IncrementalView(q, state="spark", state_dir=tmp_path, E=E, F=F)
    lost = next(f for f in sorted(_manifest(tmp_path)["files"]) if "rel-F.base.parquet/part-" in f)
    (tmp_path / lost).unlink()
    with caplog.at_level(logging.WARNING, logger="faq.incremental"):
        view.step(E=Factor.from_dict({(4, 2): 1}, ("a", "b"), "integer"))  # F unchanged
    assert "of the committed state is missing" in caplog.text and Path(lost).name in caplog.text
    assert lost not in _manifest(tmp_path)["files"]
    assert view.tick == 1 and view.result().to_dict() == {(1,): 2, (4,): 1}
    view.close()
    again = IncrementalView(q, state_dir=tmp_path)
    assert again.tick == 1 and again.result().to_dict() == {(1,): 2, (4,): 1}


def _old_spark_folder(spark, root: Path, semiring: str, rows, out) -> None:
    """A folder as the Spark state wrote it before both states shared one format: one
    Parquet folder per relation and one for the output, named in ``relations`` and
    ``output``."""
    from incremental.store import Store

    store = Store(root)
    tick = root / "tick-00000000-abcdef12"
    tick.mkdir()
    spark.createDataFrame(rows, "a bigint, b bigint, value bigint").write.parquet(
        str(tick / "rel-E.parquet")
    )
    spark.createDataFrame(out, "a bigint, value bigint").write.parquet(str(tick / "output.parquet"))
    files = store.record_tree(tick)
    store.commit(
        {
            "format": 2,
            "state": "spark",
            "rule": "Q(a) :- E(a, b)",
            "semiring": semiring,
            "tick": 4,
            "batch_id": None,
            "relations": {
                "E": {
                    "folder": tick.name,
                    "keys": ["a", "b"],
                    "types": ["bigint", "bigint"],
                    "rows": len(rows),
                    "distinct": [len(rows), len(rows)],
                    "exact": True,
                    "typed": True,
                }
            },
            "output": {"folder": tick.name, "rows": len(out)},
            "files": files,
        }
    )


def test_a_folder_of_the_old_spark_format_reopens_in_rings_and_counting(spark, tmp_path):
    _old_spark_folder(spark, tmp_path / "c", "counting", [(1, 2, 2), (3, 4, 1)], [(1, 2), (3, 1)])
    view = IncrementalView(query("Q(a) :- E(a, b)", semiring="counting"), state_dir=tmp_path / "c")
    assert view.where == "spark" and view.tick == 4
    assert view.result().to_dict() == {(1,): 2, (3,): 1}
    d = view.step(E=Factor.from_dict({(1, 2): -1, (5, 6): 1}, ("a", "b"), "integer"))
    assert d.to_dict() == {(1,): -1, (5,): 1}
    view.close()
    again = IncrementalView(query("Q(a) :- E(a, b)", semiring="counting"), state_dir=tmp_path / "c")
    assert again.tick == 5 and again.result().to_dict() == {(1,): 1, (3,): 1, (5,): 1}
    assert "parts" in _manifest(tmp_path / "c")


def test_a_folder_of_the_old_spark_format_is_refused_without_counts(spark, tmp_path):
    _old_spark_folder(spark, tmp_path, "max-plus", [(1, 2, 2)], [(1, 2)])
    with pytest.raises(StateError, match="Spark state's old format"):
        IncrementalView(query("Q(a) :- E(a, b)", semiring="max-plus"), state_dir=tmp_path)
