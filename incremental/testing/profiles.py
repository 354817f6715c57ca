"""Hypothesis profiles for views: ``quick`` (a few examples) and ``long`` (a deep search).

A view's tick costs milliseconds in the driver and Spark jobs in a Spark state, so
neither profile has a deadline, and both allow slow data generation and function-scoped
fixtures (a test of a view usually takes a session or a folder).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "register_profiles"]

_RELAXED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]

PROFILES: dict[str, dict[str, object]] = {
    "quick": {"max_examples": 10, "deadline": None, "suppress_health_check": _RELAXED},
    "long": {"max_examples": 200, "deadline": None, "suppress_health_check": _RELAXED},
}
"""The profiles by name, as keyword arguments of ``hypothesis.settings``."""


def register_profiles() -> None:
    """Register the profiles ``quick`` and ``long`` with hypothesis.

    Load one with ``pytest --hypothesis-profile=quick`` (the plugin registers them
    before pytest reads the option) or ``hypothesis.settings.load_profile("long")``.
    """
    for name, kwargs in PROFILES.items():
        settings.register_profile(name, **kwargs)  # type: ignore[arg-type]
