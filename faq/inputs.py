"""A query's relations, ready for execution: local rows or a checked DataFrame, and statistics.

:func:`relation_factor` reads a relation given by name (to ``solve``, ``run``,
``explain``, a program or ``solve_delta``) as a :class:`faq.Factor`, by the one
rule of :func:`faq.build.relation_kind`.  :func:`prepare_all` turns the factors
given for a query's relations into :class:`Relation` records (those kept in
Spark checked a few per Spark job): a local factor as it is, a factor held in
Spark read through :func:`faq.read.read` (collected into the driver when it
fits, at most ``faq.settings().local_rows`` rows, else checked and kept in
Spark).
:func:`check_key_types` and :func:`check_constants` refuse keys that would
have to be cast.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faq.build import check_columns, relation_kind, rows_source
from faq.factor import Factor
from faq.kernel.stats import RelationStats, table_stats
from faq.kernel.table import Table
from faq.read import Request, read_all
from faq.rule import Atom, Rule, literal
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "check_constants",
    "check_key_types",
    "Relation",
    "prepare_all",
    "relation_factor",
]


@dataclass
class Relation:
    """A relation ready for execution: local rows, or a Spark DataFrame, and statistics.

    ``table`` (local) is checked (its ``unique`` flag says whether keys may
    repeat).  ``df`` (when not local) is checked and typed; ``consolidated`` says
    whether its keys are unique (a ⊕-aggregation in its plan, or known), else the
    reader ⊕-combines repeated keys where it must.
    """

    name: str
    vars: tuple[str, ...]
    stats: RelationStats
    table: Table | None = None
    df: DataFrame | None = None
    consolidated: bool = True

    @property
    def is_local(self) -> bool:
        return self.table is not None


def relation_factor(name: str, given: Any, atom: Atom, label: str | None = None) -> Factor:
    """The relation ``name`` given by name, read through ``atom`` (its arity), as a Factor.

    The one rule (:func:`faq.build.relation_kind`): a Factor as it is; a Spark
    DataFrame, a pandas DataFrame, a pyarrow Table or RecordBatch and a numpy
    structured array are rows, key columns bound to the atom's variables by position,
    then an optional ``value`` column; a number or 0-d array the annotation of a
    relation without keys.  Local rows are read for each query's semiring (as
    :meth:`Factor.from_pandas` without one): no Spark session is needed.

    Raises
    ------
    TypeError
        A plain numpy array of one or more dimensions (ambiguous: the message names
        ``Factor.from_numpy`` and ``pandas.DataFrame``), or anything else not accepted.
    ValueError
        The wrong number of key columns, a ``_weight`` column, repeated column names,
        null keys.  Messages name ``label`` (default ``"relation 'E'"``).
    """
    label = label or f"relation {name!r}"
    arity = atom.arity
    if isinstance(given, Factor):
        if len(given.vars) != arity:
            raise ValueError(
                f"{label}: atom {atom} takes {arity} variable(s) ({arity} key "
                f"column(s)) but the factor has {len(given.vars)}: {given.vars!r}"
            )
        return given
    kind = relation_kind(given, label)
    if kind == "spark":
        check_columns(list(given.columns), arity, label, str(atom))
        return Factor(given, name=name)
    return Factor.from_source(rows_source(given, kind, arity, label, str(atom)), name)


def prepare_all(
    factors: Mapping[str, Factor],
    S: Semiring,
    *,
    local: bool = True,
    nonnegative: str | None = None,
    consolidate: bool = True,
    uses: Mapping[str, int] | None = None,
) -> dict[str, Relation]:
    """Every factor of ``factors`` (by the label its errors name) ready for a query over
    ``S``: local when it is or it fits, else kept in Spark and checked there, a few
    relations per Spark job (:func:`faq.read.read_all`).

    ``local=False`` keeps a distributed factor in Spark whatever its size;
    ``consolidate=False`` leaves the repeated keys of one kept in Spark to the reader;
    ``uses`` (per label, the query's atoms over it) collects a distributed factor only
    when that many times its rows fit in ``local_rows``.
    ``nonnegative`` (the reason, for the message) also refuses negative annotations of a
    factor kept in Spark, in the same job as the other checks; the caller checks local
    rows.  Raises ValueError naming the label and the column for null keys, a value
    column of the wrong type or annotations outside ``S``.  Reading a DataFrame logs one
    line at INFO on the ``"faq"`` logger (see :func:`faq.read.read`).
    """
    out: dict[str, Relation] = {}
    requests: list[tuple[str, Factor, Request]] = []
    for label, f in factors.items():
        name = f.name or label
        t = f.local_table()
        if t is not None:
            out[label] = Relation(name, f.vars, f.stats or table_stats(t), table=t)
        else:
            r = Request(
                f.source, S, label, nonnegative, consolidate, name=name, local=local,
                uses=(uses or {}).get(label, 1),
            )  # fmt: skip
            requests.append((label, f, r))
    sources = read_all([r for _, _, r in requests])
    for (label, f, r), src in zip(requests, sources, strict=True):
        assert src.stats is not None
        unique = src.df is None or bool(src.consolidated)
        out[label] = Relation(
            r.name, f.vars, src.stats, table=src.table, df=src.df, consolidated=unique
        )
    return {label: out[label] for label in factors}


# -- key types: a variable's columns agree, a constant fits its column ---------------------
def check_key_types(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a variable whose key columns have different types in different places,
    or a constant whose column has another type.

    Integer types of any width count as one type (``bigint``); nothing else is
    unified, so a string key is never cast to a number (or a number to a
    string), and an integer constant selects only from an integer column, a
    string constant only from a string column.  Reads only schemas: no Spark job.

    Raises
    ------
    ValueError
        Naming the variable, both atoms with their relations and both types;
        or the constant, its atom, the column and its type.
    """
    check_constants(rule, factors)
    types = {name: f.key_types for name, f in factors.items()}
    seen: dict[str, tuple[str, Atom, int]] = {}
    for atom in rule.atoms:
        for i, v in zip(atom.positions, atom.vars, strict=True):
            t = types[atom.relation][i]
            if v not in seen:
                seen[v] = (t, atom, i)
                continue
            t0, atom0, i0 = seen[v]
            if t != t0:
                raise ValueError(
                    f"variable {v!r} of {rule} has keys of different types: column {i0} of "
                    f"relation {atom0.relation!r} (atom {atom0}) is {t0}, column {i} of "
                    f"relation {atom.relation!r} (atom {atom}) is {t}; keys are never cast "
                    "(integers of any width count as bigint): convert one of them first"
                )


def check_constants(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a constant of ``rule`` whose column, in the factor given for its relation
    (relations not in ``factors`` are skipped), holds keys of another type: an integer
    constant needs an integer column, a string constant a string one.  An empty local
    factor holds no keys to compare: it passes."""
    for atom in rule.atoms:
        f = factors.get(atom.relation)
        if not atom.consts or f is None or (f.is_local and f.to_table().rows == 0):
            continue
        types = f.key_types
        for i, c in atom.consts:
            want, kind = ("string", "a string") if isinstance(c, str) else ("bigint", "an integer")
            if types[i] == want:
                continue
            hint = ""
            if types[i] == "string":
                hint = f" (the string constant is written {literal(str(c))})"
            elif types[i] == "bigint" and isinstance(c, str) and re.fullmatch(r"-?[0-9]+", c):
                hint = f" (the integer constant is written {int(c)})"
            raise ValueError(
                f"atom {atom} of {rule}: the constant {literal(c)} is {kind}, but column {i} "
                f"({f.vars[i]!r}) of relation {atom.relation!r} holds {types[i]} keys; keys "
                f"are never cast{hint}"
            )
