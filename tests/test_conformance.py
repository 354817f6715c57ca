"""Conformance: every backend and join method computes the same answers.

Oracle: ``faq.reference_solve`` (brute-force enumeration).  Hypothesis draws
random rules (2-5 variables, 1-4 atoms of arity 1-3, cyclic and acyclic,
repeated relations, free variables) with random relations, and each is
solved through one backend — the local kernel in the driver (one thread, or
split over threads), the local kernel inside Spark tasks, Spark DataFrame
joins, and partitioned (relations held in Spark with the ``local_rows``
threshold at 0 rows: every join step is one HyperCube shuffle and the kernel
in every cell; these small relations make one cell per step, and consecutive
one-cell steps run in one task, so ``cells`` also runs them with
``cell_min_rows=0``, several cells per step; both with ``query_task_rows=0``), and
whole inside one Spark task (``one-task``: past ``local_rows``, the inputs gathered
into one task that plans and solves there, :mod:`faq.query_task`) — with a join method drawn from
auto, wcoj and binary, for every built-in semiring and a user-defined one.
Spark runs cost seconds each, so those backends draw fewer examples;
``HYPOTHESIS_PROFILE=long`` draws more.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import faq
import semirings
from faq import query, reference_solve
from faq.testing import random_relations, random_rule
from semirings import Semiring
from tests.helpers import assert_same, factors_from

BOTTLENECK = Semiring(name="bottleneck", zero=-math.inf, one=math.inf, add=max, mul=min)
ALL = [*semirings.BUILTINS, BOTTLENECK]
EXAMPLES = {
    "driver": 6,
    "threads": 3,
    "tasks": 2,
    "spark": 2,
    "partitioned": 2,
    "cells": 2,
    "one-task": 2,
}


@pytest.mark.parametrize("backend", list(EXAMPLES))
@pytest.mark.parametrize("S", ALL, ids=lambda s: s.name)
def test_random_plans_match_reference(spark, monkeypatch, S, backend):
    # "threads": every local step splits over the driver's threads
    thread_work = 0 if backend == "threads" else faq.settings().thread_work
    forced = {"threads": "driver", "partitioned": "auto", "cells": "auto", "one-task": "auto"}
    forced = forced.get(backend, backend)
    past = backend in ("partitioned", "cells", "one-task")
    # partitioned steps, not the whole solve in one task (the default for inputs this small)
    task_rows = faq.settings().query_task_rows if backend == "one-task" else 0
    local_rows = 0 if past else faq.settings().local_rows
    cell_min_rows = 0 if backend == "cells" else faq.settings().cell_min_rows
    scale = settings().max_examples / 10  # the "long" profile draws 20 times more

    @settings(max_examples=max(1, round(EXAMPLES[backend] * scale)))
    @given(
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.sampled_from(["auto", "wcoj", "binary"]),
        st.sampled_from(["auto", "textual"]),
    )
    def check(rule_seed, data_seed, join, order):
        rule = random_rule(rule_seed)
        rels = random_relations(rule, S, data_seed, domain=4, density=0.6)
        want = reference_solve(rule, S, rels)
        q = query(str(rule), semiring=S)
        given = factors_from(rels, S)
        if past:  # held in Spark: the path past the driver
            given = {name: f.df for name, f in given.items()}
        with faq.settings(
            thread_work=thread_work,
            local_rows=local_rows,
            cell_min_rows=cell_min_rows,
            query_task_rows=task_rows,
        ):
            run = q.run(order=order, join=join, backend=forced, **given)
        assert_same(run.result.to_dict(), want, S, f"{rule} backend={backend} join={join}")
        assert run.trace.task.startswith("in one Spark task") == (backend == "one-task")
        for t, step in zip(run.trace.steps, run.plan.steps, strict=True):
            if backend == "one-task":  # planned in the task: every step on its kernel
                assert t.choice.backend == "driver"
                continue
            if past:
                assert t.choice.backend == "spark"
                joins = len(step.factors) > 1 and join != "binary"
                assert (t.choice.shares is not None) == joins, (t.choice, join)
                continue
            assert t.choice.backend == forced
            if backend == "threads" and t.choice.method == "wcoj":
                assert t.choice.tasks > 1

    check()
