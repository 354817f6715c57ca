"""Incremental views: an FAQ maintained under changes of its relations (DBSP style).

A view holds the current relations and the current output of a query.  Each
:meth:`IncrementalView.step` receives deltas (Z-sets), computes the change of
the output by the ordered delta rule, and commits the new relations and the
new output, all or nothing.

Notes
-----
For ``Q = ⊕ ⊗_i R_i`` and deltas ``ΔR_i`` the output changes by

    ΔQ = ⊕_i  Q(R_1', …, R_{i-1}', ΔR_i, R_{i+1}, …, R_n),     R' = R ⊕ ΔR,

because Q is linear in each atom (⊗ distributes over ⊕), and the terms
telescope: ``Q(R') = Q(R) ⊕ ΔQ`` in every commutative semiring.  A relation
named in several atoms is one R_i per atom, so a self-join gets one term per
atom.  Each term is an FAQ with one small factor, the delta; the InsideOut
planner (:meth:`faq.Query.solve`) costs plans by row counts, so it starts from
the delta, and the worst-case optimal Generic Join, seeded by the delta, extends
it at cyclic bags; small deltas run these plans in the driver (:mod:`faq.local`).
See Budiu et al., "DBSP: Automatic Incremental View Maintenance for Rich
Query Languages" (VLDB 2023) and Abo Khamis, Ngo, Rudra, "FAQ: Questions
Asked Frequently" (PODS 2016).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import semirings
from faq.engine import JOIN_METHODS
from faq.factor import Factor, RelationStats
from faq.query import Query, spark_error
from faq.rule import VALUE, Atom, Rule
from incremental import zset
from semirings import Semiring
from semirings import spark as sops
from semirings.local import local_ops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["IncrementalView"]

MANIFEST = "manifest.json"
"""Name of the manifest file in a view's ``state_dir``."""

_FORMAT = 1

BROADCAST_ROWS = 500_000
"""Deltas up to this many rows carry a broadcast hint into their delta queries."""


@dataclass(frozen=True)
class _Relation:
    """One relation's committed state and its statistics.

    The contents are ``df ⊕ log``: ``df`` a consolidated, materialised Z-set
    hash-partitioned by its keys, and ``log`` (None or the same) the ⊕ of the
    deltas since ``df`` was last rewritten, with ``log_rows`` rows at most.  A
    tick rewrites only the small log; the log is folded into ``df`` once it
    outgrows :func:`_log_limit`, so a tick does not copy the whole relation.

    ``rows`` and ``distinct`` (of the contents) are exact when ``exact`` is
    True and otherwise upper bounds (good enough for the planner, and
    ``rows == 0`` still means empty).  ``typed`` is False while the relation
    is the default empty one, whose key types the first delta may choose.
    """

    df: DataFrame
    keys: tuple[str, ...]
    types: tuple[str, ...]
    rows: int
    distinct: tuple[int, ...]
    exact: bool
    typed: bool = True
    folder: str | None = None
    log: DataFrame | None = None
    log_rows: int = 0

    def current(self, S: Semiring) -> DataFrame:
        """The contents, consolidated (lazy; the union is co-partitioned: no shuffle)."""
        if self.log is None:
            return self.df
        return zset.consolidate(self.df.unionByName(self.log), S)

    def stored(self) -> DataFrame:
        """``df`` and ``log`` side by side, not consolidated (for filtered reads)."""
        return self.df if self.log is None else self.df.unionByName(self.log)

    def factor(self, S: Semiring, name: str) -> Factor:
        stats = RelationStats(self.rows, self.distinct)
        return Factor(self.current(S), self.keys, S, name=name, _clean=True, _stats=stats)


@dataclass(frozen=True)
class _Delta:
    """A validated delta: consolidated lazily (keys renamed to the state's), with bounds."""

    df: DataFrame
    rows: int
    distinct: tuple[int, ...]

    def factor(self, keys: tuple[str, ...], S: Semiring, name: str) -> Factor:
        from pyspark.sql import functions as F

        stats = RelationStats(self.rows, self.distinct)
        df = F.broadcast(self.df) if self.rows <= BROADCAST_ROWS else self.df
        return Factor(df, keys, S, name=name, _clean=True, _stats=stats)


class IncrementalView:
    """The output of an FAQ, maintained under insertions (and, for rings, deletions).

    Parameters
    ----------
    query : faq.Query
        The query to maintain, e.g. ``query("Q() :- E(a, b), E(b, c), E(a, c)",
        semiring="counting")``.
    state_dir : str or path-like, optional
        Folder that makes every commit durable (Parquet per relation plus a
        JSON manifest replaced atomically).  A folder that already holds a view
        of the same query is reopened at its last committed tick; then no
        initial relations may be given.
    join : {"auto", "binary", "wcoj"}
        Join method of every delta query (see :meth:`faq.Query.solve`): by
        default the worst-case optimal Generic Join at cyclic bags.
    order : str or list of str
        Variable-order strategy of every delta query (default ``"auto"``).
    **initial
        Initial contents, one Factor or DataFrame per relation name (key
        columns by position, plus an optional ``value`` column); a relation
        not given starts empty.

    Notes
    -----
    Semirings and deletions:

    * ``integer`` and ``real`` are rings: a delta's ``value`` is the signed
      change of a tuple's annotation, so a deletion is a negative weight;
    * ``counting`` is maintained in ℤ (its ring completion), so deletions
      work the same way; a step that would leave a negative multiplicity in a
      relation is refused.  :meth:`step` returns its changes in ``integer``;
    * every other semiring (``boolean``, ``max-product``, ``min-plus``, …) has
      no additive inverse: a delta's annotations are ⊕-ed into the relation
      (insertions, or raising an annotation under an idempotent ⊕).  Deleting
      is not supported yet.

    A delta without a ``value`` column has annotation one (``+1``) per row;
    duplicate keys in a delta are ⊕-combined.  A refused step raises
    ValueError and leaves the view exactly as it was.  Each commit
    materialises what it changes with ``localCheckpoint``, so neither Spark
    lineage nor plan size grow with the number of ticks.  A relation is kept
    as its last rewrite plus a small log of deltas (both hash-partitioned by
    key, so merging a delta shuffles only the delta; see
    :func:`incremental.zset.add_delta`), and the log is folded in once it
    outgrows ``LOG_ROWS`` and ``LOG_FRACTION`` of the relation.

    Where the delta rule runs: for small deltas (``LOCAL_DELTA_ROWS``) in the
    driver (:mod:`faq.local`), reading only the rows of the state the deltas
    reach, with one filtered scan per relation per round of lookups; for
    larger ones, or when ``view.local`` is False, as Spark delta queries
    (:meth:`faq.Query.solve_from`).  Both use the same InsideOut plans and
    the Generic Join seeded by the delta at cyclic bags.  ``last_step``
    tells, per term, where it ran, its variable order and join methods.

    Examples
    --------
    >>> from faq import query                                       # doctest: +SKIP
    >>> tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    >>> view = IncrementalView(tri, E=edges)                        # doctest: +SKIP
    >>> view.step(E=delta).scalar(), view.result().scalar(), view.tick  # doctest: +SKIP
    (-1, 44, 1)
    """

    local: bool = True
    """Evaluate the delta rule of small deltas in the driver (see :meth:`step`); False
    always runs the delta queries as Spark jobs."""

    def __init__(
        self,
        query: Query,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        join: str = "auto",
        order: str | Sequence[str] = "auto",
        **initial: Any,
    ) -> None:
        if not isinstance(query, Query):
            raise TypeError(
                "IncrementalView takes a faq.Query (from faq.query(...)), not "
                f"{type(query).__name__}"
            )
        if join not in JOIN_METHODS:
            raise ValueError(
                f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}"
            )
        self.query = query
        self.join = join
        self.order = order
        self.rule: Rule = query.rule
        self.semiring: Semiring = query.semiring
        counting = self.semiring is semirings.COUNTING
        self._nonneg = counting
        self._S: Semiring = semirings.INTEGER if counting else self.semiring
        self._names = _atom_names(self.rule)
        split = Rule(
            self.rule.name,
            self.rule.head,
            tuple(Atom(n, a.vars) for n, a in zip(self._names, self.rule.atoms, strict=True)),
        )
        self._split = Query(split, self._S)
        self._keys = {name: _key_names(self.rule, name) for name in self.rule.relations}
        self._spark = _spark()
        self._P = _partitions(self._spark)
        self._store = _Store(Path(state_dir)) if state_dir is not None else None
        self._tick = 0
        self.last_step: dict[str, Any] = {}
        if self._store is not None and self._store.exists():
            if initial:
                raise ValueError(
                    f"state_dir {str(self._store.root)!r} already holds a view "
                    f"(tick {self._store.read()['tick']}); reopen it without initial relations"
                )
            self._resume()
            return
        unknown = [n for n in initial if n not in self.rule.relations]
        if unknown:
            raise ValueError(self._unknown_message(unknown))
        rels: dict[str, _Relation] = {}
        for name, arity in self.rule.relations.items():
            given = initial.get(name)
            rels[name] = (
                self._empty_relation(name) if given is None else self._load(name, given, arity)
            )
        self._rels = rels
        self._out, self._out_rows = self._initial_output()
        if self._store is not None:
            self._persist(set(self._rels), True)

    # -- public API -------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        """The number of committed steps."""
        return self._tick

    def result(self) -> Factor:
        """The maintained output: equal to ``query.solve(**current relations)``."""
        return Factor(self._out, self.rule.head, self.semiring, name=self.rule.name, _clean=True)

    def relation(self, name: str) -> Factor:
        """The current contents of relation ``name`` (consolidated)."""
        if name not in self._rels:
            raise ValueError(self._unknown_message([name]))
        r = self._rels[name]
        return Factor(r.current(self._S), r.keys, self.semiring, name=name, _clean=True)

    def step(self, **deltas: Any) -> Factor:
        """Apply one tick of changes; return the change of the output and commit.

        Parameters
        ----------
        **deltas
            One Z-set per changed relation: a DataFrame (or Factor) of key
            columns plus a ``value`` column of weights (signed for rings and
            counting; a missing ``value`` means one per row).  Relations not
            named do not change.

        Returns
        -------
        faq.Factor
            ΔQ over the head variables; ``result()`` after the step equals
            ``result()`` before it ⊕ ΔQ.  For a counting view ΔQ is in
            ``integer`` (counts may go down).

        Raises
        ------
        ValueError
            An unknown relation, an arity or key-type mismatch, null keys,
            weights outside the semiring, or (counting) a negative
            multiplicity.  The view is then left unchanged.
        """
        unknown = [n for n in deltas if n not in self.rule.relations]
        if unknown:
            raise ValueError(self._unknown_message(unknown))
        # 1. validate every delta (one Spark job each unless it is a clean Factor)
        checked: dict[str, tuple[_Delta, _Relation]] = {}
        for name, d in deltas.items():
            if d is None:
                continue
            delta, base = self._check_delta(name, d)
            if delta.rows > 0:
                checked[name] = (delta, base)
        # 2. small deltas: the delta rule in the driver, reading only the rows of the
        #    (old) state that the deltas reach; refuses negative multiplicities
        local = self._local_rule(checked) if checked and self.local else None
        if checked and local is None:
            # Spark delta queries read whole relations many times: fold the logs in first
            # (same contents, so a refusal later still leaves the view as it was)
            self._rels = {n: self._fold(r) for n, r in self._rels.items()}
            checked = {n: (d, self._fold(b)) for n, (d, b) in checked.items()}
        # 3. new relations R' = R ⊕ ΔR: the delta joins the log (only the delta is
        #    shuffled: the state is hash-partitioned by its keys); a log grown past
        #    its limit is folded into the relation
        new_rels = dict(self._rels)
        for name, (delta, base) in checked.items():
            merged = self._merge(base, delta)
            exact = False
            if local is not None:
                rows = local.rows[name]
            elif self._nonneg:
                current = merged.current(self._S)
                rows, distinct = self._statistics(current, base.keys, f"relation {name!r}")
                exact = True
            else:
                rows = base.rows + delta.rows
            if not exact:
                distinct = tuple(
                    min(rows, x + y) for x, y in zip(base.distinct, delta.distinct, strict=True)
                )
            new_rels[name] = replace(merged, rows=rows, distinct=distinct, exact=exact, typed=True)
        # 4. ΔQ
        if local is not None:
            dq, term_rows, report = self._from_pandas(local.dq), len(local.dq), local.report
        else:
            dq, term_rows, report = self._spark_rule(checked, new_rels)
        out_df, out_rows = self._out, self._out_rows
        if term_rows:
            if out_rows == 0:  # nothing to merge with (and its key types may be a guess)
                merged = zset.consolidate(zset.partition(dq, self._P), self._S)
            else:
                merged = zset.add_delta(out_df, dq, self._S, self._P)
            out_df, out_rows = self._materialise(merged), out_rows + term_rows
        # 5. commit: durable first (when asked), then in memory
        if self._store is not None:
            old_rels, old_out, old_rows = self._rels, self._out, self._out_rows
            self._rels, self._out, self._out_rows = new_rels, out_df, out_rows
            self._tick += 1
            try:
                self._persist(set(checked), bool(term_rows))
            except BaseException:
                self._rels, self._out, self._out_rows = old_rels, old_out, old_rows
                self._tick -= 1
                raise
        else:
            self._rels, self._out, self._out_rows = new_rels, out_df, out_rows
            self._tick += 1
        self.last_step = {"tick": self._tick, "terms": report, "rows": term_rows}
        return Factor(dq, self.rule.head, self._S, name=f"Δ{self.rule.name}", _clean=True)

    def _spark_rule(
        self, checked: dict[str, tuple[_Delta, _Relation]], new_rels: dict[str, _Relation]
    ) -> tuple[DataFrame, int, list[dict[str, Any]]]:
        """ΔQ by Spark: one lazy delta query per atom of a changed relation, all
        computed together by one materialisation.  Returns ΔQ, its rows, a report."""
        terms: list[DataFrame] = []
        cached: list[DataFrame] = []
        report: list[dict[str, Any]] = []
        for i, atom in enumerate(self.rule.atoms):
            if atom.relation not in checked:
                continue
            bindings: dict[str, Factor] = {}
            empty = False
            for j, (a, label) in enumerate(zip(self.rule.atoms, self._names, strict=True)):
                if j == i:
                    delta = checked[a.relation][0]
                    bindings[label] = delta.factor(self._rels[a.relation].keys, self._S, label)
                    continue
                rel = new_rels[a.relation] if j < i else self._rels[a.relation]
                empty = empty or rel.rows == 0
                bindings[label] = rel.factor(self._S, label)
            if empty:  # a factor with no rows makes the whole product zero
                report.append({"atom": i, "skipped": True})
                continue
            df, held = self._split.solve_from(
                self._names[i], order=self.order, join=self.join, **bindings
            )
            plan = self._split.last_plan
            assert plan is not None
            terms.append(df)
            cached += held
            report.append(
                {
                    "atom": i,
                    "skipped": False,
                    "order": list(plan.order),
                    "methods": [st.method for st in plan.steps],
                    "where": "spark",
                }
            )
        term_rows = 0
        if not terms:
            dq = self._empty_output()
        else:
            union = terms[0]
            for t in terms[1:]:
                union = union.unionByName(t)
            try:
                dq = self._materialise(zset.consolidate(union, self._S), partitions=1)
                term_rows = dq.count()
            except Exception as exc:
                raise spark_error(exc, self._split) from exc
            finally:
                for df in cached:
                    df.unpersist()
        return dq, term_rows, report

    def _fold(self, rel: _Relation) -> _Relation:
        """``rel`` with its log folded in (materialised), or itself when it has none."""
        if rel.log is None:
            return rel
        df = self._materialise(zset.add_delta(rel.df, rel.log, self._S, self._P))
        return replace(rel, df=df, log=None, log_rows=0)

    def _merge(self, base: _Relation, delta: _Delta) -> _Relation:
        """``base`` with ``delta`` ⊕-ed into its log (materialised), or, once the log
        outgrows its limit, with the log folded into the relation (one rewrite)."""
        if base.log is None:
            log = zset.consolidate(zset.partition(delta.df, self._P), self._S)
        else:
            log = zset.add_delta(base.log, delta.df, self._S, self._P)
        log_rows = base.log_rows + delta.rows
        fold = not self.local or log_rows > _log_limit(base.rows)
        if base.rows == 0 and base.log is None:
            return replace(base, df=self._materialise(log), log=None, log_rows=0)
        if fold:
            df = zset.add_delta(base.df, log, self._S, self._P)
            return replace(base, df=self._materialise(df), log=None, log_rows=0)
        return replace(base, log=self._materialise(log), log_rows=log_rows)

    # -- the delta rule in the driver ------------------------------------------------------------
    def _local_rule(self, checked: dict[str, tuple[_Delta, _Relation]]) -> _LocalRule | None:
        """ΔQ computed in the driver (see :mod:`faq.local`), or None when it needs Spark.

        The deltas are collected (they are small); every term of the delta rule
        runs as a generator of key lookups, and each round of lookups of all
        terms costs one filtered scan per relation (the old state: a new
        version is old ⊕ Δ, formed here).  The first round also reads the state
        at the delta's keys, which gives each changed relation's exact new row
        count and (counting) refuses negative multiplicities before anything
        is written.
        """
        import pandas as pd

        from faq import local as L
        from faq.planner import AtomStats, make_plan

        if any(d.rows > LOCAL_DELTA_ROWS for d, _ in checked.values()):
            return None
        o = local_ops(self._S)
        deltas = {name: d.df.toPandas() for name, (d, _) in checked.items()}
        bases = {n: (checked[n][1] if n in checked else r) for n, r in self._rels.items()}
        gens: list[Any] = []
        report: list[dict[str, Any]] = []
        plans = []
        for i, atom in enumerate(self.rule.atoms):
            if atom.relation not in checked:
                continue
            others = [a.relation for j, a in enumerate(self.rule.atoms) if j != i]
            if any(bases[n].rows == 0 and n not in checked for n in others):
                report.append({"atom": i, "skipped": True})
                continue
            stats, factors = [], {}
            for j, a in enumerate(self.rule.atoms):
                if j == i:
                    d = checked[a.relation][0]
                    stats.append(_atom_stats(a, bases[a.relation].keys, d.rows, d.distinct))
                else:
                    r = bases[a.relation]
                    rows = r.rows + (checked[a.relation][0].rows if a.relation in checked else 0)
                    stats.append(_atom_stats(a, r.keys, rows, r.distinct))
            plan = make_plan(self._split.rule, [AtomStats(*st) for st in stats], self.order)
            for j, (a, pf) in enumerate(zip(self.rule.atoms, plan.atoms, strict=True)):
                if j == i:
                    df = _through(deltas[a.relation], bases[a.relation].keys, a)
                    factors[id(pf)] = L.Local(pf.vars, df)
                else:
                    factors[id(pf)] = L.Remote((a.relation, j < i, j), pf.vars, pf.rows)
            gens.append(L.run(plan, factors, id(plan.atoms[i]), self._S, self.join))
            plans.append((i, plan))
        try:
            results, rows = self._drive(gens, deltas, bases, o)
        except L.NeedsSpark:
            return None
        except OverflowError as exc:
            raise OverflowError(
                f"query {self.rule}: {exc} (a delta term); use the 'real' semiring for an "
                "approximate answer"
            ) from exc
        for i, plan in plans:
            report.append(
                {
                    "atom": i,
                    "skipped": False,
                    "order": list(plan.order),
                    "methods": [st.method for st in plan.steps],
                    "where": "driver",
                }
            )
        head = list(self.rule.head)
        frames = [r.df for r in results]
        if frames:
            union = pd.concat(frames, ignore_index=True)
            dq = o.reduce(union, head, VALUE) if len(frames) > 1 or head else union
            dq = dq[o.nonzero(dq[VALUE].to_numpy())][[*head, VALUE]]
        else:
            dq = pd.DataFrame(columns=[*head, VALUE])
        report.sort(key=lambda t: t["atom"])
        return _LocalRule(dq.reset_index(drop=True), rows, report)

    def _drive(
        self,
        gens: list[Any],
        deltas: dict[str, Any],
        bases: dict[str, _Relation],
        o: Any,
    ) -> tuple[list[Any], dict[str, int]]:
        """Run the term generators in lock step, one round of lookups at a time."""
        results: list[Any] = [None] * len(gens)
        pending: dict[int, list[Any]] = {}

        def advance(k: int, answer: list[Any] | None) -> None:
            try:
                pending[k] = gens[k].send(answer)
            except StopIteration as stop:
                results[k] = stop.value
                pending.pop(k, None)

        for k in range(len(gens)):
            advance(k, None)
        rows: dict[str, int] = {}
        first = True
        while pending or first:
            flat = [(k, r) for k, reqs in pending.items() for r in reqs]
            answers, new_rows = self._fetch([r for _, r in flat], deltas, bases, o, check=first)
            rows.update(new_rows)
            first = False
            by_gen: dict[int, list[Any]] = {}
            for (k, _), a in zip(flat, answers, strict=True):
                by_gen.setdefault(k, []).append(a)
            for k in list(pending):
                advance(k, by_gen.get(k, []))
        return results, rows

    def _fetch(
        self,
        requests: list[Any],
        deltas: dict[str, Any],
        bases: dict[str, _Relation],
        o: Any,
        *,
        check: bool,
    ) -> tuple[list[Any], dict[str, int]]:
        """Answer lookups with one filtered scan per relation; with ``check``, also
        read each changed relation at its delta's keys: its new exact row count."""
        import pandas as pd

        from faq.local import MAX_ROWS, NeedsSpark

        by_rel: dict[str, list[int]] = {}
        for n, r in enumerate(requests):
            by_rel.setdefault(r.remote.source[0], []).append(n)
        if check:
            for name in deltas:
                by_rel.setdefault(name, [])
        answers: list[Any] = [None] * len(requests)
        rows: dict[str, int] = {}
        for name, idx in by_rel.items():
            base = bases[name]
            keys = list(base.keys)
            conds = []
            literals = 0
            for n in idx:
                r = requests[n]
                atom = self.rule.atoms[r.remote.source[2]]
                parts = []
                for v in r.on:
                    values = r.keys[v].unique().tolist()
                    literals += len(values)
                    col = base.keys[atom.vars.index(v)]
                    parts.append(_isin(col, base.types[base.keys.index(col)], values))
                conds.append(_all(parts))
            delta = deltas.get(name)
            if check and delta is not None:
                parts = []
                for k, t in zip(keys, base.types, strict=True):
                    values = delta[k].unique().tolist()
                    literals += len(values)
                    parts.append(_isin(k, t, values))
                conds.append(_all(parts))
            if literals > MAX_LITERALS:
                raise NeedsSpark(f"{literals:,} lookup keys for relation {name!r}")
            if base.rows == 0 or not conds:
                cols = zip([*keys, VALUE], [*base.types, sops.ops(self._S).type], strict=True)
                pdf = pd.DataFrame({c: pd.Series(dtype=_numpy_type(t)) for c, t in cols})
            else:
                cond = conds[0]
                for c in conds[1:]:
                    cond = cond | c
                pdf = base.stored().filter(cond).limit(MAX_ROWS + 1).toPandas()
                if len(pdf) > MAX_ROWS:
                    raise NeedsSpark(f"lookups of relation {name!r} reach over {MAX_ROWS:,} rows")
                if base.log is not None:  # the relation's rows and its log's, ⊕-ed
                    pdf = _consolidate(pdf, keys, o)
            new = None
            if delta is not None:
                new = _plus(pdf, delta, keys, o)
            if check and delta is not None:
                rows[name] = self._new_rows(name, base, pdf, new, delta, keys)
            for n in idx:
                r = requests[n]
                _, is_new, j = r.remote.source
                src = new if (is_new and new is not None) else pdf
                df = _through(src, base.keys, self.rule.atoms[j])
                df = df.merge(r.keys.drop_duplicates(), on=list(r.on), how="inner")
                answers[n] = df[[*r.remote.vars, VALUE]]
        return answers, rows

    def _new_rows(
        self, name: str, base: _Relation, old: Any, new: Any, delta: Any, keys: list[str]
    ) -> int:
        """The exact row count of ``name`` after its delta; refuses negative counts."""
        touched = delta[keys].drop_duplicates()
        before = len(old.merge(touched, on=keys, how="inner"))
        after_rows = new.merge(touched, on=keys, how="inner")
        if self._nonneg:
            neg = after_rows[after_rows[VALUE] < 0]
            if len(neg):
                ex = neg.iloc[0]
                key = tuple(ex[k].item() if hasattr(ex[k], "item") else ex[k] for k in keys)
                raise ValueError(
                    _negative_message(
                        f"relation {name!r}", len(neg), key, int(ex[VALUE]), self.semiring.name
                    )
                )
        return base.rows - before + len(after_rows)

    def _from_pandas(self, pdf: Any) -> DataFrame:
        """ΔQ as a Spark DataFrame (one partition; it is small)."""
        schema = _schema(self.rule.head, self._head_types(), sops.ops(self._S).type)
        if not len(pdf):
            return self._spark.createDataFrame([], schema)
        records = [tuple(_native(x) for x in row) for row in pdf.itertuples(index=False)]
        return self._spark.createDataFrame(records, schema)

    def __repr__(self) -> str:
        where = f", state_dir={str(self._store.root)!r}" if self._store is not None else ""
        return f"IncrementalView({self.query!r}, tick={self._tick}{where})"

    # -- loading and checking inputs -------------------------------------------------------------
    def _unknown_message(self, unknown: list[str]) -> str:
        return (
            f"unknown relation(s) {', '.join(map(repr, unknown))} for {self.rule}; "
            f"its relations are: {', '.join(self.rule.relations)}"
        )

    def _as_factor(self, name: str, rel: Any, arity: int, what: str) -> Factor:
        from pyspark.sql import DataFrame as SparkDataFrame

        label = f"{what} of relation {name!r}"
        if isinstance(rel, Factor):
            f = rel
        elif isinstance(rel, SparkDataFrame):
            f = Factor(rel, name=name)
        else:
            raise TypeError(
                f"{label}: expected a Spark DataFrame or a Factor, got {type(rel).__name__}"
            )
        if len(f.vars) != arity:
            atom = next(a for a in self.rule.atoms if a.relation == name)
            raise ValueError(
                f"{label}: atom {atom} takes {arity} key column(s) but it has {len(f.vars)}: "
                f"{list(f.vars)!r} (columns found: {f.df.columns!r}; the weight column must be "
                f"named {VALUE!r})"
            )
        return f

    def _typed(self, f: Factor, label: str) -> tuple[DataFrame, RelationStats, list[str]]:
        """Validated (one job unless clean), consolidated, with integral keys as bigint."""
        from pyspark.sql import functions as F

        df, stats = f.prepared(self._S, label)
        types = [_key_type(df.schema[k].dataType) for k in f.vars]
        cols = [F.col(k).cast(t).alias(k) for k, t in zip(f.vars, types, strict=True)]
        return df.select(*cols, F.col(VALUE)), stats, types

    def _load(self, name: str, given: Any, arity: int) -> _Relation:
        """An initial relation: validated, consolidated, materialised, exact statistics."""

        f = self._as_factor(name, given, arity, "initial contents")
        label = f"initial contents of relation {name!r}"
        df, _, types = self._typed(f, label)
        keys = self._keys[name]
        df = df.toDF(*keys, VALUE)
        df = self._materialise(zset.consolidate(zset.partition(df, self._P), self._S))
        rows, distinct = self._statistics(df, keys, label)
        return _Relation(df, keys, tuple(types), rows, distinct, exact=True)

    def _empty_relation(self, name: str, types: tuple[str, ...] | None = None) -> _Relation:
        keys = self._keys[name]
        typed = types is not None
        types = types or tuple("bigint" for _ in keys)
        df = self._spark.createDataFrame([], _schema(keys, types, sops.ops(self._S).type))
        return _Relation(df, keys, types, 0, tuple(0 for _ in keys), exact=True, typed=typed)

    def _check_delta(self, name: str, d: Any) -> tuple[_Delta, _Relation]:
        """A validated delta for ``name`` and the relation it applies to (retyped if empty)."""
        base = self._rels[name]
        arity = self.rule.relations[name]
        f = self._as_factor(name, d, arity, "delta")
        label = f"delta of relation {name!r}"
        df, stats, types = self._typed(f, label)
        if not base.typed and base.rows == 0 and tuple(types) != base.types:
            base = self._empty_relation(name, tuple(types))
        for i, (got, want) in enumerate(zip(types, base.types, strict=True)):
            if got != want:
                raise ValueError(
                    f"{label}: key column {f.vars[i]!r} (position {i}) has type {got} but "
                    f"relation {name!r} has keys of type {want}"
                )
        df = df.toDF(*base.keys, VALUE)
        distinct = tuple(min(d, stats.rows) for d in stats.distinct)
        return _Delta(df, stats.rows, distinct), base

    def _statistics(
        self, df: DataFrame, keys: tuple[str, ...], label: str
    ) -> tuple[int, tuple[int, ...]]:
        """Exact rows and (approximate) distinct keys of a materialised relation (one job).

        For a counting view, ValueError when a multiplicity is negative.
        """
        from pyspark.sql import functions as F

        aggs = [F.count(F.lit(1)).alias("rows")]
        aggs += [F.approx_count_distinct(k).alias(f"d{i}") for i, k in enumerate(keys)]
        if self._nonneg:
            aggs.append(F.sum(F.when(F.col(VALUE) < 0, 1).otherwise(0)).alias("neg"))
        row = df.agg(*aggs).collect()[0]
        if self._nonneg and row["neg"]:
            ex = df.filter(F.col(VALUE) < 0).limit(1).collect()[0]
            key = tuple(ex[k] for k in keys)
            raise ValueError(
                _negative_message(label, row["neg"], key, ex[VALUE], self.semiring.name)
            )
        rows = int(row["rows"])
        return rows, tuple(min(int(row[f"d{i}"]), rows) for i in range(len(keys)))

    # -- output -----------------------------------------------------------------------------------
    def _head_types(self) -> tuple[str, ...]:
        types = []
        for v in self.rule.head:
            t = "bigint"
            for a in self.rule.atoms:
                if v in a.vars:
                    t = self._rels[a.relation].types[a.vars.index(v)]
                    break
            types.append(t)
        return tuple(types)

    def _empty_output(self) -> DataFrame:
        schema = _schema(self.rule.head, self._head_types(), sops.ops(self._S).type)
        return self._spark.createDataFrame([], schema)

    def _initial_output(self) -> tuple[DataFrame, int]:
        if any(r.rows == 0 for r in self._rels.values()):
            return self._empty_output(), 0
        bindings = {
            label: self._rels[a.relation].factor(self._S, label)
            for a, label in zip(self.rule.atoms, self._names, strict=True)
        }
        out = self._split.solve(order=self.order, join=self.join, **bindings)
        if not out.count():
            return out.df, 0
        return self._materialise(zset.partition(out.df, self._P)), out.count()

    # -- materialisation and durability ----------------------------------------------------------
    def _materialise(self, df: DataFrame, partitions: int | None = None) -> DataFrame:
        """Compute ``df`` once and cut its lineage; the checkpoint keeps its partitioning.

        Adaptive execution is switched off while the checkpoint is computed: the
        checkpoint of an adaptive plan does not know its partitioning, and then
        every later ``add_delta`` would shuffle the whole state again.
        """
        conf = {"spark.sql.adaptive.enabled": "false"}
        if partitions is not None:
            conf["spark.sql.shuffle.partitions"] = str(partitions)
        before = {k: self._spark.conf.get(k) for k in conf}
        for k, v in conf.items():
            self._spark.conf.set(k, v)
        try:
            return df.localCheckpoint(eager=True)
        finally:
            for k, v in before.items():
                self._spark.conf.set(k, v)

    def _persist(self, changed: set[str], output_changed: bool) -> None:
        """Write the changed relations (and output) of this tick, then the manifest, atomically."""
        store = self._store
        assert store is not None
        folder = store.new_folder(self._tick)
        try:
            rels = {}
            for name, r in self._rels.items():
                if name in changed or r.folder is None:
                    r = replace(r, folder=folder.name)
                    store.write(r.current(self._S), folder / f"rel-{name}.parquet")
                rels[name] = r
            prev = store.read() if store.exists() else None
            out_folder = prev["output"]["folder"] if prev and not output_changed else folder.name
            if out_folder == folder.name:
                store.write(self._out, folder / "output.parquet")
            manifest = {
                "format": _FORMAT,
                "rule": str(self.rule),
                "semiring": self.semiring.name,
                "tick": self._tick,
                "relations": {
                    n: {
                        "folder": r.folder,
                        "keys": list(r.keys),
                        "types": list(r.types),
                        "rows": r.rows,
                        "distinct": list(r.distinct),
                        "exact": r.exact,
                        "typed": r.typed,
                    }
                    for n, r in rels.items()
                },
                "output": {"folder": out_folder, "rows": self._out_rows},
            }
            store.commit(manifest)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._rels = rels
        store.collect_garbage({r.folder for r in rels.values()} | {out_folder})

    def _resume(self) -> None:
        store = self._store
        assert store is not None
        m = store.read()
        if m.get("format") != _FORMAT:
            raise ValueError(f"{store.root / MANIFEST}: unknown format {m.get('format')!r}")
        if m["rule"] != str(self.rule) or m["semiring"] != self.semiring.name:
            raise ValueError(
                f"state_dir {str(store.root)!r} holds a view of {m['rule']} over "
                f"{m['semiring']!r}, not of {self.rule} over {self.semiring.name!r}"
            )
        value_type = sops.ops(self._S).type
        rels = {}
        for name, r in m["relations"].items():
            keys, types = tuple(r["keys"]), tuple(r["types"])
            path = store.root / r["folder"] / f"rel-{name}.parquet"
            df = store.load(path, _schema(keys, types, value_type))
            df = self._materialise(zset.partition(df, self._P))
            rels[name] = _Relation(
                df,
                keys,
                types,
                int(r["rows"]),
                tuple(r["distinct"]),
                bool(r["exact"]),
                bool(r["typed"]),
                r["folder"],
            )
        self._rels = rels
        path = store.root / m["output"]["folder"] / "output.parquet"
        schema = _schema(self.rule.head, self._head_types(), value_type)
        self._out = self._materialise(zset.partition(store.load(path, schema), self._P))
        self._out_rows = int(m["output"]["rows"])
        self._tick = int(m["tick"])


class _Store:
    """A view's folder: one sub-folder of Parquet files per tick, and ``manifest.json``.

    The manifest names, for every relation and for the output, the tick
    folder holding its current contents.  It is written to a temporary file,
    flushed to disk and renamed over the old one (``os.replace`` is atomic),
    so a crash leaves either the old commit or the new one; folders that no
    manifest names are removed after each commit.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return (self.root / MANIFEST).is_file()

    def read(self) -> dict[str, Any]:
        with (self.root / MANIFEST).open(encoding="utf-8") as fh:
            return json.load(fh)

    def new_folder(self, tick: int) -> Path:
        folder = self.root / f"tick-{tick:08d}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        return folder

    def write(self, df: DataFrame, path: Path) -> None:
        df.write.mode("error").parquet(str(path))

    def load(self, path: Path, schema: str) -> DataFrame:
        return _spark().read.schema(schema).parquet(str(path))

    def commit(self, manifest: dict[str, Any]) -> None:
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex[:8]}.tmp"
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / MANIFEST)
        with contextlib.suppress(OSError):  # make the rename itself durable where supported
            fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def collect_garbage(self, keep: set[str]) -> None:
        for p in self.root.glob("tick-*"):
            if p.is_dir() and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        for p in self.root.glob(f".{MANIFEST}.*.tmp"):
            p.unlink(missing_ok=True)


# -- helpers -------------------------------------------------------------------------------------
LOG_ROWS = 50_000
"""A relation's log of deltas is folded into it once it holds more than this many rows
and more than ``LOG_FRACTION`` of the relation's rows."""

LOG_FRACTION = 0.05


def _log_limit(rows: int) -> float:
    return max(LOG_ROWS, LOG_FRACTION * rows)


LOCAL_DELTA_ROWS = 100_000
"""Deltas up to this many rows (each) are tried by the driver-side delta rule first."""

MAX_LITERALS = 200_000
"""Most key values one relation's lookup may list (beyond, the step runs in Spark)."""


@dataclass(frozen=True)
class _LocalRule:
    """ΔQ computed in the driver, the changed relations' new row counts, and a report."""

    dq: Any
    rows: dict[str, int]
    report: list[dict[str, Any]]


def _negative_message(label: str, count: int, key: tuple[Any, ...], value: Any, sr: str) -> str:
    return (
        f"refused: {label} would hold {count} key(s) with a negative multiplicity, e.g. "
        f"{key!r} -> {value} (a {sr!r} view can only delete tuples it holds); the view is "
        "unchanged"
    )


def _atom_stats(
    atom: Atom, keys: tuple[str, ...], rows: int, distinct: tuple[int, ...]
) -> tuple[int, dict[str, int]]:
    """(rows, distinct per variable) of a relation seen through ``atom``."""
    d: dict[str, int] = {}
    for v, n in zip(atom.vars, distinct, strict=True):
        d[v] = min(d.get(v, n), n)
    return rows, d


def _through(pdf: Any, keys: tuple[str, ...], atom: Atom) -> Any:
    """A pandas relation (columns ``keys`` + value) seen through ``atom``: columns
    renamed to its variables; a repeated variable keeps rows whose columns agree."""
    first: dict[str, str] = {}
    mask = None
    for col, v in zip(keys, atom.vars, strict=True):
        if v in first:
            m = pdf[first[v]] == pdf[col]
            mask = m if mask is None else mask & m
        else:
            first[v] = col
    df = pdf if mask is None else pdf[mask]
    out = df[[*first.values(), VALUE]]
    return out.set_axis([*first.keys(), VALUE], axis=1)


def _plus(old: Any, delta: Any, keys: list[str], o: Any) -> Any:
    """``old ⊕ delta`` on pandas Z-sets (keys ⊕-combined, zeros dropped)."""
    import pandas as pd

    both = pd.concat([old[[*keys, VALUE]], delta[[*keys, VALUE]]], ignore_index=True)
    return _consolidate(both, keys, o)


def _consolidate(pdf: Any, keys: list[str], o: Any) -> Any:
    """A pandas Z-set with equal keys ⊕-combined and zero weights dropped."""
    out = o.reduce(pdf, keys, VALUE)
    return out[o.nonzero(out[VALUE].to_numpy())].reset_index(drop=True)


def _isin(col: str, spark_type: str, values: list[Any]) -> Any:
    """``col IN values`` as a Spark condition.  Integer keys go over as one SQL string:
    building the literals one by one costs a py4j round trip each."""
    from pyspark.sql import functions as F

    if spark_type == "bigint" and values:
        return F.expr(f"`{col}` IN ({', '.join(str(int(v)) for v in values)})")
    return F.col(col).isin(values)


def _all(conds: list[Any]) -> Any:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _numpy_type(spark_type: str) -> str:
    """The pandas dtype ``toPandas`` gives a non-null Spark column of this type."""
    return {
        "bigint": "int64",
        "int": "int32",
        "double": "float64",
        "float": "float32",
        "boolean": "bool",
    }.get(spark_type, "object")


def _native(x: Any) -> Any:
    """A numpy scalar as the Python value Spark accepts."""
    return x.item() if hasattr(x, "item") else x


def _atom_names(rule: Rule) -> tuple[str, ...]:
    """One fresh relation name per atom (``E__1``, ``E__2``…), distinct from the rule's names."""
    taken = set(rule.relations)
    names = []
    for i, a in enumerate(rule.atoms, 1):
        n = f"{a.relation}__{i}"
        while n in taken:
            n = f"_{n}"
        taken.add(n)
        names.append(n)
    return tuple(names)


def _key_names(rule: Rule, name: str) -> tuple[str, ...]:
    """Key column names of a relation's state: its first atom's variables, if distinct."""
    atom = next(a for a in rule.atoms if a.relation == name)
    if len(set(atom.vars)) == len(atom.vars):
        return atom.vars
    return tuple(f"c{i}" for i in range(len(atom.vars)))


def _key_type(dtype: Any) -> str:
    from pyspark.sql import types as T

    if isinstance(dtype, T.IntegralType):
        return "bigint"
    return dtype.simpleString()


def _schema(keys: tuple[str, ...], types: tuple[str, ...], value_type: str) -> str:
    cols = [f"`{k}` {t}" for k, t in zip(keys, types, strict=True)]
    return ", ".join([*cols, f"`{VALUE}` {value_type}"])


def _spark() -> SparkSession:
    from faq.session import get_spark

    return get_spark()


def _partitions(spark: SparkSession) -> int:
    """Partitions of a materialised state: the session's shuffle partitions (at least 1)."""
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    except (ValueError, TypeError):
        return 1
