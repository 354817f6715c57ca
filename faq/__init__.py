"""Functional Aggregate Queries on Spark: factors, rules, einsum, InsideOut.

>>> from faq import query
>>> query("Q(i, k) :- A(i, j), B(j, k)", semiring="real").rule.bound
('j',)
"""

from faq.factor import Factor
from faq.plan.settings import Settings, settings
from faq.query import Query, einsum, query
from faq.recursion import Program
from faq.reference import reference_solve

__all__ = [
    "Factor",
    "Program",
    "Query",
    "Settings",
    "einsum",
    "query",
    "reference_solve",
    "settings",
]
