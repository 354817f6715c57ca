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

:class:`InputStage` is a query's input stage: the relations it is given, by
name, checked, their constants' selections made, read (:func:`prepare_all`) and
seen through each atom, with the statistics and pairwise join sizes the planner
reads.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from faq.build import check_columns, relation_kind, rows_source
from faq.executor import Data
from faq.factor import Factor
from faq.kernel.stats import RelationStats, pair_join_size, table_stats
from faq.kernel.table import Table, group_reduce, renamed
from faq.plan.aggregates import Aggregates
from faq.plan.logical import AtomStats, Pairs
from faq.plan.physical import backend_policy
from faq.read import Request, read_all
from faq.rule import VALUE, Atom, Rule, literal
from semirings import Semiring
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "check_constants",
    "check_key_types",
    "InputStage",
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


@dataclass(frozen=True, eq=False)
class InputStage:
    """How a query reads the relations it is given, before anything is planned.

    Built once per :class:`faq.Query` from its rule: ``rule`` (the user's),
    ``plain`` (the same without constants, an atom with constants reading a fresh
    relation ``fresh[name]`` selected from the given one), ``engine_rule`` (private
    variable names, ``back`` maps them to the user's), the semiring and the
    per-variable aggregates.  :meth:`read` turns relations given by name into the
    atoms the executor runs on, their statistics and the exact pairwise join sizes.
    """

    rule: Rule
    plain: Rule
    fresh: Mapping[str, Atom]
    engine_rule: Rule
    back: Mapping[str, str]
    semiring: Semiring
    aggregates: Aggregates | None

    def factors(self, relations: Mapping[str, Any]) -> tuple[dict[str, Factor], dict[str, str]]:
        """The relations as factors of this query's semiring (nothing read from Spark),
        their key types checked against the rule's constants (the errors of :meth:`read`
        for missing or extra relations, arities and types), and how errors name each."""
        factors, renamed = self._factors(dict(relations))
        check_key_types(self.rule, factors)
        return factors, {name: self._label(name, renamed) for name in factors}

    def _factors(
        self, relations: dict[str, Any]
    ) -> tuple[dict[str, Factor], dict[str, tuple[str, ...]]]:
        """The relations as factors of this query's semiring, and the key names of those
        whose columns were renamed to plain private names (for messages)."""
        needed = self.rule.relations
        missing = [n for n in needed if n not in relations]
        extra = [n for n in relations if n not in needed]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing relation(s) {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"unexpected relation(s) {', '.join(map(repr, extra))}")
            raise ValueError(f"{'; '.join(parts)} for {self.rule} (it needs: {', '.join(needed)})")
        renamed: dict[str, tuple[str, ...]] = {}
        out = {name: self._as_factor(name, relations[name], renamed) for name in needed}
        return out, renamed

    def _as_factor(self, name: str, rel: Any, renamed: dict[str, tuple[str, ...]]) -> Factor:
        atom = next(a for a in self.rule.atoms if a.relation == name)
        f = relation_factor(name, rel, atom)  # the one rule for relations given by name
        if f.source.original is not None and not f.is_local and not _spark_safe(f.vars):
            # names Spark would misread (a dot, a backtick, equal ignoring case): plain ones
            cols = [f"k{i}" for i in range(len(f.vars))]
            df = f.df.toDF(*cols, *([VALUE] if f.has_value else []))
            renamed[name] = f.vars
            f = Factor(df, semiring=f.semiring, name=f.name if f.name is not None else name)
        return f.for_semiring(self.semiring, name)

    def read(
        self, relations: dict[str, Any], backend: str
    ) -> tuple[list[Data], list[AtomStats], Pairs]:
        """Every relation checked and counted (local ones collected), seen through each atom."""
        policy = backend_policy(backend)
        factors, renamed = self._factors(relations)
        check_key_types(self.rule, factors)
        factors = self.selections(factors)
        S = self.semiring
        why = self._nonnegative_reason()
        labels = {name: self._label(name, renamed) for name in factors}
        over = Counter(a.relation for a in self.engine_rule.atoms)  # atoms per relation
        prepared = prepare_all(
            {labels[name]: f for name, f in factors.items()},
            S,
            local=policy.collects,
            nonnegative=why,
            # repeated keys of a relation kept in Spark are ⊕-combined by the step that reads
            # it (in its cells' index); per-variable aggregates need the query's own ⊕ first
            consolidate=self.aggregates is not None,
            # under auto a relation counts once per atom that reads it (Request.uses)
            uses={labels[n]: max(over[n], 1) for n in factors} if policy.by_size else None,
        )
        rels = {name: prepared[labels[name]] for name in factors}
        if self.aggregates is not None:
            rels = {
                name: self._for_aggregates(self._label(name, renamed), r, why)
                for name, r in rels.items()
            }
        # the engine sees private variable names (v0, v1, ...), never colliding with internal
        # columns, ``value`` or each other in Spark; the planner keeps the user's names
        views: dict[tuple[str, tuple[str, ...]], Data] = {}
        atoms: list[Data] = []
        stats: list[AtomStats] = []
        back = self.back
        for a in self.engine_rule.atoms:
            key = (a.relation, a.vars)
            if key not in views:
                views[key] = _atom_view(a, rels[a.relation])
            d = views[key]
            atoms.append(d)
            exact = rels[a.relation].stats.exact and len(set(a.vars)) == len(a.vars)
            dist = {back[v]: int(x) for v, x in d.distinct.items()}
            stats.append(AtomStats(int(d.rows), dist, exact))
        pairs = self._pairs(atoms)
        return atoms, stats, pairs

    def selections(self, given: Mapping[str, Factor]) -> dict[str, Factor]:
        """The relations the engine reads (those of the rule without constants), from the
        ``given`` ones (the rule's, or some of them): an atom's constants select its
        relation's rows (pushed into the scan: a numpy mask, or a filter in the
        DataFrame's plan, before statistics are gathered).  Types are checked first
        (:func:`check_key_types`)."""
        out: dict[str, Factor] = {}
        for name in self.plain.relations:
            atom = self.fresh.get(name)
            if atom is None:
                if name in given:
                    out[name] = given[name]
            elif atom.relation in given:
                out[name] = given[atom.relation].selected(dict(atom.consts))
        return out

    def _label(self, name: str, renamed: Mapping[str, tuple[str, ...]]) -> str:
        """How errors name relation ``name`` (with its own key names when ``renamed``)."""
        atom = self.fresh.get(name)
        if atom is not None:
            return f"{self._label(atom.relation, renamed)}, rows selected by atom {atom}"
        if name not in renamed:
            return f"relation {name!r}"
        cols = ", ".join(f"k{i}={v!r}" for i, v in enumerate(renamed[name]))
        return f"relation {name!r} (key columns read by position: {cols})"

    def _nonnegative_reason(self) -> str | None:
        """Why annotations must be non-negative (an operator such as max over real ×
        needs it), or None."""
        if self.aggregates is None or not self.aggregates.nonnegative:
            return None
        ops = ", ".join(self.aggregates.nonnegative)
        return (
            f"aggregate {ops} in the {self.semiring.name!r} semiring needs non-negative "
            f"annotations ({ops} does not distribute over × on negative values)"
        )

    def _for_aggregates(self, label: str, rel: Relation, why: str | None) -> Relation:
        """A relation ready for steps with other ⊕s: repeated keys ⊕-combined with the
        semiring's own ⊕ now (a step would combine them with its own), and local
        annotations checked non-negative when an operator needs it (``why``; Spark
        relations are checked by :func:`prepare_all`)."""
        t = rel.table
        if t is None:
            return rel
        if not t.unique:
            t = group_reduce(t, t.vars, local_ops(self.semiring))
            rel = replace(rel, table=t)
        v = t.values
        if why and v is not None and len(v) and (neg := np.flatnonzero(v < 0)).size:
            raise ValueError(f"{label}: {why}, found {v[neg[0]].item()!r}")
        return rel

    def _pairs(self, atoms: list[Data]) -> Pairs:
        """Exact join sizes of every two local atoms sharing variables (numpy; no Spark job).

        Atoms kept in Spark get none: their steps are partitioned over the cluster,
        which needs no pairwise size to choose its method (and counting them would cost
        a join per pair)."""
        out: Pairs = {}
        for i, a in enumerate(atoms):
            for j in range(i + 1, len(atoms)):
                b = atoms[j]
                shared = [v for v in a.vars if v in b.vars]
                if shared and a.table is not None and b.table is not None:
                    out[frozenset((i, j))] = float(pair_join_size(a.table, shared, b.table, shared))
        return out


def _atom_view(atom: Atom, rel: Relation) -> Data:
    """The relation seen through ``atom``: columns renamed to its variables; a variable
    repeated in the atom keeps only rows whose columns agree."""
    from faq.spark.ops import atom_frame
    from faq.spark.partitioned import Source

    first: dict[str, int] = {}
    for i, v in enumerate(atom.vars):
        first.setdefault(v, i)
    repeated = len(first) != len(atom.vars)
    if rel.table is not None:
        t = rel.table
        if repeated:
            mask = np.ones(t.rows, dtype=bool)
            for i, v in enumerate(atom.vars):
                mask &= t.cols[i] == t.cols[first[v]]
            t = t.take(np.flatnonzero(mask))
        if repeated:
            cols = tuple(t.cols[i] for i in first.values())
            table = Table(tuple(first), cols, t.values, unique=t.unique)
        else:  # the same columns, renamed (a grid stays one)
            table = renamed(t, tuple(first))
        dist = {v: float(rel.stats.distinct[i]) for v, i in first.items()}
        return Data(tuple(first), float(table.rows), table=table, distinct=dist)
    assert rel.df is not None
    df = atom_frame(atom, rel.df, rel.vars)
    keys = tuple(rel.vars)
    source = (
        None if repeated else (Source(rel.df, keys, tuple(keys[i] for i in first.values())), df)
    )
    dist = {v: float(rel.stats.distinct[i]) for v, i in first.items()}
    top = {v: rel.stats.top[i] for v, i in first.items() if i < len(rel.stats.top)}
    return Data(
        tuple(first),
        float(rel.stats.rows),
        df=df,
        distinct=dist,
        consolidated=rel.consolidated,
        top=top,
        spread=rel.stats.scanned > rel.stats.rows,
        source=source,
    )


def _spark_safe(names: Sequence[str]) -> bool:
    """True when Spark reads every name as itself: plain identifiers, none starting with
    ``__`` (internal columns), none equal to another or to ``value`` ignoring case."""
    folded = {v.casefold() for v in names} | {VALUE}
    return len(folded) == len(names) + 1 and all(
        re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", v) for v in names
    )
