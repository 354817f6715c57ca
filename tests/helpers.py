"""Shared test helpers: comparing engine results with the reference evaluator, counting
Spark jobs."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faq import Factor
from incremental.journal import HEADER
from semirings import Semiring
from semirings.laws import approx_equal


def factors_from(
    relations: dict[str, dict[tuple[int, ...], Any]], S: Semiring
) -> dict[str, Factor]:
    """Factors (one per relation) from ``{name: {key: value}}``."""
    out = {}
    for name, rel in relations.items():
        arity = len(next(iter(rel))) if rel else 0
        out[name] = Factor.from_dict(
            rel, vars=[f"c{i}" for i in range(arity)], semiring=S, name=name
        )
    return out


def assert_same(got: dict, want: dict, S: Semiring, context: str = "") -> None:
    """Same keys and (approximately, for floats) the same annotations."""
    missing = set(want) - set(got)
    extra = set(got) - set(want)
    assert not missing and not extra, (
        f"{context}: keys differ; missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    )
    for k, v in want.items():
        g = got[k]
        ok = approx_equal(g, v, rel=1e-7, abs_tol=1e-7) if isinstance(v, float) else g == v
        assert ok, f"{context}: at {k}: engine {g!r}, reference {v!r} ({S.name})"


def is_close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def spark_jobs(spark: Any, fn: Callable[[], Any], what: str = "jobs") -> tuple[Any, int]:
    """``fn()`` and the number of Spark jobs it ran, counted in a job group of its own
    (Spark's count for a group is cumulative: a name used twice counts both calls) once
    the status tracker has heard of them all (the benchmarks' own counter)."""
    from benchmarks._common import job_group, jobs_in_group, new_job_group

    sc = spark.sparkContext
    with job_group(sc, new_job_group(f"test-{what}"), what) as group:
        out = fn()
    return out, jobs_in_group(sc, group)


def frames_at(path: Path) -> list[tuple[int, int, int]]:
    """(offset, flags, tick) of every frame of the journal ``path``, in order."""
    data, pos, out = path.read_bytes(), 0, []
    while pos + HEADER.size <= len(data):
        _, _, flags, tick, length, _, _ = HEADER.unpack_from(data, pos)
        out.append((pos, flags, tick))
        pos += HEADER.size + length
    return out


def packed_rows(
    routed: Any, cells: int, one: Any = 1
) -> list[tuple[int, int, tuple[Any, ...], Any]]:
    """Every row a partitioned step's packs hold (:func:`faq.spark.routing.route`),
    collected and unpacked: ``(cell, input, keys, value)`` once per input the row serves
    in that cell (``cells``: the step's cells, whose routing keys the packs carry;
    ``one``: the value of a pack that carries none)."""
    from faq.spark.partitioned import routing_keys
    from faq.spark.routing import MASK, unpacked

    cell_of = {k: c for c, k in enumerate(routing_keys(cells))}
    out = []
    for key, by_group in unpacked(iter(routed.rows.toArrow().to_batches())).items():
        for g, ts in by_group.items():
            group = routed.groups[g]
            for t in ts:
                mask = t.column(MASK).to_pylist()
                valued = "value" in t.column_names
                values = t.column("value").to_pylist() if valued else [one] * t.num_rows
                for k, i in enumerate(group.inputs):
                    cols = [t.column(c).to_pylist() for c in group.columns(k)]
                    for r in range(t.num_rows):
                        if mask[r] >> k & 1:
                            out.append((cell_of[key], i, tuple(c[r] for c in cols), values[r]))
    return out
