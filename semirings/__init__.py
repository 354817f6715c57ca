"""Semirings for FAQ queries: built-ins with native Spark paths, and your own.

>>> import semirings
>>> S = semirings.get("min-plus")
>>> S.add(3.0, 5.0), S.mul(3.0, 5.0), S.zero
(3.0, 8.0, inf)
"""

from semirings.builtins import (
    BOOLEAN,
    BUILTINS,
    COUNTING,
    INTEGER,
    LOG,
    MAX_PLUS,
    MAX_PRODUCT,
    MIN_PLUS,
    REAL,
    logaddexp,
)
from semirings.core import (
    AggregateOps,
    LibraryOps,
    NumpyOps,
    Semiring,
    SemiringFunctionError,
    SparkOps,
)
from semirings.laws import LawError, check_laws
from semirings.provenance import PROVENANCE, specialise
from semirings.registry import get, names, register

register(PROVENANCE)

__all__ = [
    "BOOLEAN",
    "BUILTINS",
    "COUNTING",
    "INTEGER",
    "LOG",
    "MAX_PLUS",
    "MAX_PRODUCT",
    "MIN_PLUS",
    "PROVENANCE",
    "REAL",
    "AggregateOps",
    "LawError",
    "LibraryOps",
    "NumpyOps",
    "Semiring",
    "SemiringFunctionError",
    "SparkOps",
    "check_laws",
    "get",
    "logaddexp",
    "names",
    "register",
    "specialise",
]
