"""Property-test your own incremental views: hypothesis strategies and one check.

>>> from hypothesis import given, settings
>>> from faq import query
>>> from incremental.testing import ticks, assert_incremental
>>> q = query("Q(a, c) :- E(a, b), E(b, c)", semiring="min-plus")
>>> @settings(max_examples=5, deadline=None)
... @given(ticks(q, keys=range(3), max_ticks=3))
... def test_view(t):
...     assert_incremental(q, t)
>>> test_view()

* :func:`ticks` draws legal tick sequences for a view of a query or program (initial
  frames, then deltas: insertions with multiplicities, retractions of rows that are
  held, annotation changes, several relations at a time), plus an illegal tick, batch
  ids to replay and a point at which to reopen a durable view;
* :func:`relations` draws initial contents, :func:`semiring_values` a semiring's values,
  from its own declarations (a user semiring works as a built-in does);
* :func:`assert_incremental` replays them into a fresh view and compares every tick
  with a batch solve and the brute-force oracle;
* :mod:`incremental.testing.plugin` is a pytest plugin: a quiet Spark session fixture
  and the hypothesis profiles ``quick`` and ``long``.

Needs hypothesis: ``pip install 'sparkfaq[testing]'``.
"""

try:
    import hypothesis  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "incremental.testing needs hypothesis, which is not installed: "
        "pip install 'sparkfaq[testing]'"
    ) from exc

from incremental.testing.check import Replay, assert_incremental, check_witnesses
from incremental.testing.model import Illegal, Model, Ticks, delta_frame, read_frame
from incremental.testing.profiles import register_profiles
from incremental.testing.strategies import (
    inputs_of,
    relations,
    semiring_values,
    ticks,
    value_pool,
)

__all__ = [
    "Illegal",
    "Model",
    "Replay",
    "Ticks",
    "assert_incremental",
    "check_witnesses",
    "delta_frame",
    "inputs_of",
    "read_frame",
    "register_profiles",
    "relations",
    "semiring_values",
    "ticks",
    "value_pool",
]
