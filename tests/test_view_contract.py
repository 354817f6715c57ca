"""One view contract at every size: the driver state and the Spark state agree.

The same ticks (initial contents, insertions, retractions through ``_weight`` -1,
updates as a retraction plus an insertion, a refused retraction) go through a view
with ``state="driver"`` and one with ``state="spark"``, for every built-in semiring
and a user semiring; after each tick, ``step()``'s change and ``result()`` must be
equal (floats to 1e-9, relative: Spark's sums run in another order).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

import semirings
from faq import query
from incremental import IncrementalView

BOTTLENECK = semirings.Semiring(
    name="bottleneck", zero=float("-inf"), one=float("inf"), add=max, mul=min
)

# two annotations per semiring: a and b (b != a), both valid and not zero
VALUES = {
    "counting": (2, 3),
    "integer": (2, -3),
    "real": (0.5, 1.25),
    "boolean": (True, True),
    "max-product": (0.5, 0.25),
    "min-plus": (1.0, 2.5),
    "max-plus": (1.0, -2.5),
    "log": (0.5, -1.0),
    "bottleneck": (4.0, 7.0),
}

SEMIRINGS = [S.name for S in semirings.BUILTINS] + ["bottleneck"]


def _semiring(name: str) -> semirings.Semiring:
    return BOTTLENECK if name == "bottleneck" else semirings.get(name)


def _rows(keys: list[tuple], value, weight: list[int] | None = None, cols=("a", "b")):
    df = pd.DataFrame(keys, columns=list(cols))
    df["value"] = [value[i] if isinstance(value, list) else value for i in range(len(keys))]
    if weight is not None:
        df["_weight"] = weight
    return df


def _ticks(a, b):
    """Deltas of E(a, b) and F(b), tick by tick (None: a tick expected to be refused by
    semirings without inverses, accepted by rings)."""
    return [
        {"E": _rows([(3, 1)], a, [1]), "F": _rows([(3,)], b, [1], cols=("b",))},
        # a retraction, and an update (b -> a) as a retraction plus an insertion
        {
            "E": _rows([(1, 1)], a, [-1]),
            "F": _rows([(2,), (2,)], [b, a], [-1, 1], cols=("b",)),
        },
        {"E": _rows([(3, 1), (2, 2)], a, [2, -1])},  # a row twice, a retraction
        {"E": _rows([(9, 9)], b, [-1])},  # refused unless ⊕ has inverses
        {
            "E": _rows([(3, 1), (4, 3)], [a, b], [-1, 1]),
            "F": _rows([(1,), (3,)], [a, b], [-1, -1], cols=("b",)),
        },
    ]


def _same(x, y) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        if math.isinf(x) or math.isinf(y) or math.isnan(x) or math.isnan(y):
            return x == y or (math.isnan(x) and math.isnan(y))
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return x == y


def _equal(d: dict, s: dict) -> bool:
    return d.keys() == s.keys() and all(_same(d[k], s[k]) for k in d)


def _outcome(view: IncrementalView, delta: dict):
    try:
        return "ok", view.step(**delta).to_dict(), view.result().to_dict()
    except ValueError as exc:
        return "refused", str(exc), view.result().to_dict()


@pytest.mark.parametrize("name", SEMIRINGS)
def test_driver_and_spark_states_agree_tick_by_tick(spark, name):
    S = _semiring(name)
    a, b = VALUES[name]
    q = query("Q(a) :- E(a, b), F(b)", semiring=S)
    E = _rows([(1, 1), (1, 2), (2, 2)], [a, b, a], [1, 1, 1])
    F = _rows([(1,), (2,)], [a, b], cols=("b",))
    driver = IncrementalView(q, state="driver", E=E, F=F)
    remote = IncrementalView(q, state="spark", E=E, F=F)
    assert driver.where == "driver" and remote.where == "spark"
    assert _equal(driver.result().to_dict(), remote.result().to_dict())
    refused = 0
    for i, delta in enumerate(_ticks(a, b)):
        d, s = _outcome(driver, delta), _outcome(remote, delta)
        assert d[0] == s[0], (i, d, s)
        if d[0] == "refused":
            refused += 1
            assert d[1] == s[1], i
        else:
            assert _equal(d[1], s[1]), (i, "step", d[1], s[1])
        assert _equal(d[2], s[2]), (i, "result", d[2], s[2])
        assert driver.tick == remote.tick
    assert refused == (0 if S.is_ring else 1)
    for rel in ("E", "F"):
        assert _equal(driver.relation(rel).to_dict(), remote.relation(rel).to_dict()), rel


@pytest.mark.parametrize("name", ["min-plus", "real"])
def test_a_spark_view_reopens_and_goes_on_as_the_driver_view(spark, tmp_path, name):
    """Multisets (general), compensated parts (real) and counts are written and read back."""
    S = _semiring(name)
    a, b = VALUES[name]
    q = query("Q(a) :- E(a, b), F(b)", semiring=S)
    E = _rows([(1, 1), (1, 2), (2, 2)], [a, b, a], [1, 1, 1])
    F = _rows([(1,), (2,)], [a, b], cols=("b",))
    driver = IncrementalView(q, state="driver", E=E, F=F)
    remote = IncrementalView(q, state="spark", state_dir=tmp_path, E=E, F=F)
    ticks = _ticks(a, b)
    for delta in ticks[:2]:  # then reopened: the state is read back from the folder
        driver.step(**delta)
        remote.step(**delta)
    remote.close()
    again = IncrementalView(q, state_dir=tmp_path)
    assert again.where == "spark" and again.tick == 2
    assert _equal(driver.result().to_dict(), again.result().to_dict())
    for delta in ticks[2:3]:
        assert _equal(driver.step(**delta).to_dict(), again.step(**delta).to_dict())
        assert _equal(driver.result().to_dict(), again.result().to_dict())


@pytest.mark.parametrize("name", ["counting", "max-plus"])
def test_set_relations_in_the_spark_state(spark, name):
    S = _semiring(name)
    a = 1 if name == "counting" else VALUES[name][0]  # counting: value copies of a row
    q = query("Q(a) :- E(a, b), F(b)", semiring=S)
    E = _rows([(1, 1), (1, 1), (2, 1)], a)  # a duplicate: a set holds it once
    F = _rows([(1,)], a, cols=("b",))
    views = [IncrementalView(q, state=st, sets="ignore", E=E, F=F) for st in ("driver", "spark")]
    for delta in ({"E": _rows([(2, 1), (3, 1)], a)}, {"E": _rows([(1, 1), (1, 1)], a, [-1, -1])}):
        got = [(v.step(**delta).to_dict(), v.result().to_dict()) for v in views]
        assert _equal(got[0][0], got[1][0]) and _equal(got[0][1], got[1][1]), got
    strict = IncrementalView(q, state="spark", sets="refuse", E=_rows([(1, 1)], a), F=F)
    with pytest.raises(ValueError, match="already holds"):
        strict.step(E=_rows([(1, 1)], a))
    assert strict.tick == 0 and strict.relation("E").to_dict() == {(1, 1): a}
