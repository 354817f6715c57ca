"""Functional Aggregate Queries on Spark: factors, rules, einsum, InsideOut.

>>> from faq import query
>>> query("Q(i, k) :- A(i, j), B(j, k)", semiring="real").rule.bound
('j',)
"""

from faq.build import relation_kind
from faq.delta import DeltaResult, TermReport, solve_delta
from faq.factor import Factor
from faq.front import einsum, query
from faq.plan.settings import Settings, settings
from faq.query import Query, Run
from faq.recursion import Program, ProgramRun
from faq.reference import reference_fixpoint, reference_solve
from faq.rule import VALUE, Atom, Rule
from faq.witness import Witnesses

__all__ = [
    "VALUE",
    "Atom",
    "DeltaResult",
    "Factor",
    "Program",
    "ProgramRun",
    "Query",
    "Rule",
    "Run",
    "Settings",
    "TermReport",
    "Witnesses",
    "einsum",
    "query",
    "reference_fixpoint",
    "reference_solve",
    "relation_kind",
    "settings",
    "solve_delta",
]


_SUBMODULES = frozenset({"io", "kernel", "plan", "session", "testing"})
"""Modules reachable as attributes (``faq.io.read(path)``) without importing them first;
each is imported on first use, so ``import faq`` stays light."""


def __getattr__(name: str) -> object:
    """The submodules of :data:`_SUBMODULES`, imported when first read (PEP 562)."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"faq.{name}")
    raise AttributeError(f"module 'faq' has no attribute {name!r}")
