"""Planning: the logical plan, per-variable aggregates, physical choices and the report.

* :mod:`faq.plan.logical`: variable orders, the cost model, InsideOut steps;
* :mod:`faq.plan.aggregates`: per-variable ⊕ operators (general FAQ);
* :mod:`faq.plan.physical`: where and how each step runs (driver, tasks or
  Spark; Generic Join or binary joins) and the binding orders;
* :mod:`faq.plan.reach`: the hops a change takes through a rule, and the bounds on
  what the driver looks for (``max_literals``, ``max_fetch_rows``);
* :mod:`faq.plan.settings`: every threshold, in one frozen ``Settings``;
* :mod:`faq.plan.report`: the run's trace and the text of ``explain()``;
* :mod:`faq.plan.convergence`: when a recursive program's fixpoint is refused
  (``DivergenceError``).
"""

from faq.plan.convergence import (
    DivergenceError,
    idempotent_on,
    improving_cycle,
    improving_cycle_error,
    nonconvergence,
    outside_domain,
    overflowed,
)
from faq.plan.physical import BACKENDS, JOIN_METHODS, delta_in_driver, keyed_runners
from faq.plan.reach import Bounds, Hop, Reach, bounds, hops
from faq.plan.settings import DEFAULTS, Settings, current

__all__ = [
    "delta_in_driver",
    "keyed_runners",
    "BACKENDS",
    "Bounds",
    "DEFAULTS",
    "Hop",
    "Reach",
    "JOIN_METHODS",
    "Settings",
    "bounds",
    "current",
    "hops",
    "DivergenceError",
    "idempotent_on",
    "improving_cycle",
    "improving_cycle_error",
    "nonconvergence",
    "outside_domain",
    "overflowed",
]
