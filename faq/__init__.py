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
