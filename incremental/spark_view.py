"""A view whose state lives in Spark (``IncrementalView(..., state="spark")``).

For relations beyond the driver: each relation is a materialised Z-set
hash-partitioned by its keys plus a log of deltas, and so is the output.  Each
step receives deltas (Z-sets), computes the change of
the output by the ordered delta rule, and commits the new relations and the
new output, all or nothing.

Notes
-----
For ``Q = ⊕ ⊗_i R_i`` and deltas ``ΔR_i`` the output changes by

    ΔQ = ⊕_i  Q(R_1', …, R_{i-1}', ΔR_i, R_{i+1}, …, R_n),     R' = R ⊕ ΔR,

because Q is linear in each atom (⊗ distributes over ⊕), and the terms
telescope: ``Q(R') = Q(R) ⊕ ΔQ`` in every commutative semiring.  A relation
named in several atoms is one R_i per atom, so a self-join gets one term per
atom.  Each term is an FAQ with one small factor, the delta, evaluated by
:func:`faq.solve_delta` with the same planner, executor and kernel as a
batch solve: small deltas in the driver, reading only the rows they reach.
See Budiu et al., "DBSP: Automatic Incremental View Maintenance for Rich
Query Languages" (VLDB 2023) and Abo Khamis, Ngo, Rudra, "FAQ: Questions
Asked Frequently" (PODS 2016).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import semirings
from faq import Factor, Query, solve_delta
from faq.delta import DeltaResult
from faq.rule import VALUE, Rule
from faq.session import checkpoint_ids, free_checkpoints, release_unreferenced
from incremental import zset
from incremental.deltas import unknown_message
from incremental.store import StateError, Store
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkView"]

log = logging.getLogger("faq.incremental")

_FORMAT = 2

GC_TICKS = 10
"""Every this many ticks a Spark-resident view runs both garbage collectors
(:func:`faq.session.release_unreferenced`), so that Spark's cleaner frees what the view
could not free itself: checkpoints handed out by ``result()`` or ``relation()`` and then
dropped, and the shuffle files and broadcasts of delta queries run as Spark jobs."""


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
        """The contents as a trusted factor (``df`` and ``log`` ⊕-combined as they are read)."""
        return Factor.trusted(
            self.stored(),
            self.keys,
            S,
            rows=self.rows,
            distinct=self.distinct,
            name=name,
            consolidated=self.log is None,
        )


class SparkView:
    """A view whose state lives in Spark: for relations beyond the driver (see IncrementalView).

    The output of an FAQ, maintained under insertions (and, for rings, deletions).

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

    ``real`` sums are Spark's ``sum``, in no fixed order and not compensated: unlike
    the driver state (:mod:`incremental.precision`), large values inserted and
    retracted can leave rounding errors behind.  Set relations (``sets=``) are
    refused here.

    A delta without a ``value`` column has annotation one (``+1``) per row;
    duplicate keys in a delta are ⊕-combined.  A refused step raises
    ValueError and leaves the view exactly as it was.  Each commit
    materialises what it changes with ``localCheckpoint``, so neither Spark
    lineage nor plan size grow with the number of ticks, and frees the
    checkpoints it replaces (those it handed to the caller are left to Spark's
    cleaner, so they stay readable).  A relation is kept
    as its last rewrite plus a small log of deltas (both hash-partitioned by
    key, so merging a delta shuffles only the delta; see
    :func:`incremental.zset.add_delta`), and the log is folded in once it
    outgrows ``LOG_ROWS`` and ``LOG_FRACTION`` of the relation.

    Where the delta rule runs (:func:`faq.solve_delta`): for small deltas
    (``faq.delta.LOCAL_DELTA_ROWS``) in the driver, reading only the rows of
    the state the deltas reach, with one filtered scan per relation per round
    of lookups, then the local kernel; for larger ones, or when
    ``view.local`` is False, as Spark queries.  Both use the same planner and
    executor as a batch solve.  ``last_step`` tells, per term, where it ran,
    its variable order and join methods.

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
        store: Store | None = None,
        manifest: dict[str, Any] | None = None,
        join: str = "auto",
        order: str | Sequence[str] = "auto",
        **initial: Any,
    ) -> None:  # arguments checked by IncrementalView
        self.query = query
        self.join = join
        self.order = order
        self.rule: Rule = query.rule
        self.semiring: Semiring = query.semiring
        counting = self.semiring is semirings.COUNTING
        self._nonneg = counting
        self._S: Semiring = semirings.INTEGER if counting else self.semiring
        self._query = Query(self.rule, self._S)
        self._keys = {name: _key_names(self.rule, name) for name in self.rule.relations}
        self._spark = _spark()
        self._P = _partitions(self._spark, 0)
        self._store: Store | None = store
        self._manifest: dict[str, Any] | None = manifest
        self._tick = 0
        self.batch_id: int | None = None
        self.last_step: dict[str, Any] = {}
        # checkpoints this view made (RDD ids), and those of them handed out to the caller
        self._owned: set[int] = set()
        self._shared: set[int] = set()
        if manifest is not None:
            self._resume(manifest)
            return
        unknown = [n for n in initial if n not in self.rule.relations]
        if unknown:
            raise ValueError(unknown_message(self.rule, unknown))
        checked = {
            name: self._as_factor(
                name, given, self.rule.relations[name], "initial contents"
            ).validated(self._S, f"initial contents of relation {name!r}")
            for name, given in initial.items()
            if given is not None
        }
        self._P = _partitions(self._spark, sum(f.count() for f in checked.values()))
        rels: dict[str, _Relation] = {}
        for name in self.rule.relations:
            f = checked.get(name)
            rels[name] = self._empty_relation(name) if f is None else self._load(name, f)
        self._rels = rels
        t0 = time.perf_counter()
        self._out, self._out_rows = self._initial_output()
        log.info(
            "view of %s: initial output %s rows in %.2f s",
            self.rule,
            f"{self._out_rows:,}",
            time.perf_counter() - t0,
        )
        if self._store is not None:
            self._persist(set(self._rels), True, None)

    # -- public API -------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        """The number of committed steps."""
        return self._tick

    def result(self) -> Factor:
        """The maintained output: equal to ``query.solve(**current relations)``."""
        self._shared |= checkpoint_ids(self._out)
        return Factor.trusted(
            self._out, self.rule.head, self.semiring, rows=self._out_rows, name=self.rule.name
        )

    def relation(self, name: str) -> Factor:
        """The current contents of relation ``name`` (consolidated)."""
        if name not in self._rels:
            raise ValueError(unknown_message(self.rule, [name]))
        r = self._rels[name]
        self._shared |= self._ids(r)
        return Factor.trusted(
            r.current(self._S), r.keys, self.semiring, rows=r.rows, distinct=r.distinct, name=name
        )

    def step(self, batch_id: int | None = None, **deltas: Any) -> Factor:
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
        try:
            change = self._step(batch_id, deltas)
            if not change.is_local:  # a change read from this view's checkpoints keeps them
                self._shared |= checkpoint_ids(change.df) & self._owned
            return change
        finally:
            self._release()

    def _step(self, batch_id: int | None, deltas: dict[str, Any]) -> Factor:
        t_step = time.perf_counter()
        unknown = [n for n in deltas if n not in self.rule.relations]
        if unknown:
            raise ValueError(unknown_message(self.rule, unknown))
        # 1. validate every delta (no Spark job for a local one, one job otherwise)
        checked: dict[str, tuple[Factor, _Relation]] = {}
        for name, d in deltas.items():
            if d is None:
                continue
            delta, base = self._check_delta(name, d)
            if delta.count() > 0:
                checked[name] = (delta, base)
        if checked and not self.local:
            # Spark delta queries read whole relations many times: fold the logs in first
            # (same contents, so a refusal later still leaves the view as it was)
            self._rels = {n: self._fold(r) for n, r in self._rels.items()}
            checked = {n: (d, self._fold(b)) for n, (d, b) in checked.items()}
        # 2. ΔQ by the delta rule: small deltas in the driver, reading only the rows of
        #    the (old) state they reach; the rows at the deltas' keys come back too
        result = self._delta_rule(checked) if checked else None
        # 3. new relations R' = R ⊕ ΔR: the delta joins the log (only the delta is
        #    shuffled: the state is hash-partitioned by its keys); a log grown past
        #    its limit is folded into the relation.  Counting refuses negative counts.
        new_rels = dict(self._rels)
        for name, (delta, base) in checked.items():
            assert result is not None
            rows, exact = self._new_rows(name, base, delta, result), False
            merged = self._merge(base, delta)
            if rows is None and self._nonneg:
                current = merged.current(self._S)
                rows, distinct = self._statistics(current, base.keys, f"relation {name!r}")
                exact = True
            elif rows is None:
                rows = base.rows + delta.count()
            if not exact:
                dd = delta.stats.distinct if delta.stats else (delta.count(),) * len(base.keys)
                distinct = tuple(min(rows, x + y) for x, y in zip(base.distinct, dd, strict=True))
            new_rels[name] = replace(merged, rows=rows, distinct=distinct, exact=exact, typed=True)
        # 4. the output ⊕ ΔQ
        report: list[dict[str, Any]] = []
        dq_factor = None
        term_rows = 0
        if result is not None:
            dq_factor, report = result.change, list(result.terms)
            term_rows = dq_factor.count()
        out_df, out_rows = self._out, self._out_rows
        dq = (
            self._empty_output()
            if dq_factor is None or not term_rows
            else self._as_output(dq_factor)
        )
        if term_rows:
            if out_rows == 0:  # nothing to merge with (and its key types may be a guess)
                merged_out = zset.consolidate(zset.partition(dq, self._P), self._S)
            else:
                merged_out = zset.add_delta(out_df, dq, self._S, self._P)
            out_df, out_rows = self._materialise(merged_out), out_rows + term_rows
        # 5. commit: durable first (when asked), then in memory
        if self._store is not None:
            old_rels, old_out, old_rows = self._rels, self._out, self._out_rows
            self._rels, self._out, self._out_rows = new_rels, out_df, out_rows
            self._tick += 1
            try:
                self._persist(set(checked), bool(term_rows), batch_id)
            except BaseException:
                self._rels, self._out, self._out_rows = old_rels, old_out, old_rows
                self._tick -= 1
                raise
        else:
            self._rels, self._out, self._out_rows = new_rels, out_df, out_rows
            self._tick += 1
        if batch_id is not None:
            self.batch_id = batch_id
        self.last_step = {"tick": self._tick, "terms": report, "rows": term_rows}
        if self._tick % GC_TICKS == 0:
            # what the view cannot free itself (see _release) waits on Spark's cleaner,
            # which needs both collectors to have run
            release_unreferenced(self._spark)
        log.info(
            "tick %d: %s -> change of %s rows (%s) in %.2f s",
            self._tick,
            ", ".join(f"Δ{n} {d.count():,} rows" for n, (d, _) in checked.items()) or "no change",
            f"{term_rows:,}",
            result.where if result is not None else "nothing to do",
            time.perf_counter() - t_step,
        )
        if dq_factor is not None:
            return dq_factor
        return Factor.trusted(dq, self.rule.head, self._S, rows=0, name=f"Δ{self.rule.name}")

    def _ids(self, rel: _Relation) -> frozenset[int]:
        """The checkpoints ``rel``'s state reads."""
        ids = checkpoint_ids(rel.df)
        return ids if rel.log is None else ids | checkpoint_ids(rel.log)

    def _live(self) -> set[int]:
        """The checkpoints the committed state reads."""
        live = set(checkpoint_ids(self._out))
        for r in self._rels.values():
            live |= self._ids(r)
        return live

    def _release(self) -> None:
        """Free now the checkpoints of this view that its state no longer reads.

        Each tick materialises the logs and output it changes (``localCheckpoint``)
        and so replaces earlier checkpoints; a refused step leaves the ones it made
        unused.  Spark's cleaner would free them only after both garbage
        collectors have run, so cached blocks grew with the ticks.  Checkpoints
        that ``result()``, ``relation()`` or a returned change handed to the
        caller are left to the cleaner: a DataFrame the caller keeps must stay
        readable.  Classic sessions only (with Spark Connect nothing is tracked).
        """
        if not self._owned:
            return
        dead = self._owned - self._live()
        free_checkpoints(self._spark, dead - self._shared)
        self._owned -= dead
        self._shared -= dead

    def _delta_rule(self, checked: dict[str, tuple[Factor, _Relation]]) -> DeltaResult:
        """ΔQ of this tick by :func:`faq.solve_delta` over the old relations."""
        bases = {n: (checked[n][1] if n in checked else r) for n, r in self._rels.items()}
        relations = {n: r.factor(self._S, n) for n, r in bases.items()}
        deltas = {n: d for n, (d, _) in checked.items()}
        try:
            return solve_delta(
                self._query, relations, deltas, order=self.order, join=self.join, local=self.local
            )
        except OverflowError as exc:
            raise OverflowError(
                f"query {self.rule}: a {self._S.name!r} annotation overflowed 64-bit integers "
                "in a delta term; use the 'real' semiring for an approximate answer"
            ) from exc

    def _new_rows(
        self, name: str, base: _Relation, delta: Factor, result: DeltaResult
    ) -> int | None:
        """The exact rows of ``name`` after its delta, from the rows the delta rule read at
        the delta's keys (driver path; None otherwise).  Refuses negative counts."""
        old = result.touched.get(name)
        if old is None:
            return None
        before = old.to_pandas()
        after = zset_plus(before, delta.to_pandas().set_axis(list(before.columns), axis=1), self._S)
        if self._nonneg:
            neg = after[after[VALUE] < 0]
            if len(neg):
                ex = neg.iloc[0]
                key = tuple(_native(ex[k]) for k in before.columns[:-1])
                raise ValueError(
                    _negative_message(
                        f"relation {name!r}", len(neg), key, int(ex[VALUE]), self.semiring.name
                    )
                )
        return base.rows - len(before) + len(after)

    def _as_output(self, dq: Factor) -> DataFrame:
        """ΔQ as a Spark DataFrame with the output's column types."""
        from pyspark.sql import functions as F

        schema = _schema(self.rule.head, self._head_types(), sops.ops(self._S).type)
        types = [t.split(" ", 1)[1] for t in schema.split(", ")]
        df = dq.df
        return df.select(
            *[F.col(c).cast(t.strip()).alias(c) for c, t in zip(df.columns, types, strict=True)]
        )

    def _fold(self, rel: _Relation) -> _Relation:
        """``rel`` with its log folded in (materialised), or itself when it has none."""
        if rel.log is None:
            return rel
        df = self._materialise(zset.add_delta(rel.df, rel.log, self._S, self._P))
        return replace(rel, df=df, log=None, log_rows=0)

    def _merge(self, base: _Relation, delta: Factor) -> _Relation:
        """``base`` with ``delta`` ⊕-ed into its log (materialised), or, once the log
        outgrows its limit, with the log folded into the relation (one rewrite)."""
        if base.log is None:
            log = zset.consolidate(zset.partition(delta.df, self._P), self._S)
        else:
            log = zset.add_delta(base.log, delta.df, self._S, self._P)
        log_rows = base.log_rows + delta.count()
        fold = not self.local or log_rows > _log_limit(base.rows)
        if base.rows == 0 and base.log is None:
            return replace(base, df=self._materialise(log), log=None, log_rows=0)
        if fold:
            df = zset.add_delta(base.df, log, self._S, self._P)
            return replace(base, df=self._materialise(df), log=None, log_rows=0)
        return replace(base, log=self._materialise(log), log_rows=log_rows)

    # -- loading and checking inputs -------------------------------------------------------------

    def _as_factor(self, name: str, rel: Any, arity: int, what: str) -> Factor:
        from pyspark.sql import DataFrame as SparkDataFrame

        label = f"{what} of relation {name!r}"
        if isinstance(rel, Factor):
            f = rel
        elif isinstance(rel, SparkDataFrame):
            f = Factor(_weighted(rel, self._S, label), name=name)
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

    def _load(self, name: str, checked: Factor) -> _Relation:
        """An initial relation (validated): partitioned, materialised, exact statistics."""
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        label = f"initial contents of relation {name!r}"
        types = _key_types(checked)
        keys = self._keys[name]
        df = checked.df
        df = df.select(
            *[F.col(c).cast(t).alias(k) for c, t, k in zip(checked.vars, types, keys, strict=True)],
            F.col(VALUE),
        )
        df = self._materialise(zset.consolidate(zset.partition(df, self._P), self._S))
        rows, distinct = self._statistics(df, keys, label)
        log.info(
            "loaded relation %s: %s rows in %.2f s", name, f"{rows:,}", time.perf_counter() - t0
        )
        return _Relation(df, keys, tuple(types), rows, distinct, exact=True)

    def _empty_relation(self, name: str, types: tuple[str, ...] | None = None) -> _Relation:
        keys = self._keys[name]
        typed = types is not None
        types = types or tuple("bigint" for _ in keys)
        df = self._spark.createDataFrame([], _schema(keys, types, sops.ops(self._S).type))
        return _Relation(df, keys, types, 0, tuple(0 for _ in keys), exact=True, typed=typed)

    def _check_delta(self, name: str, d: Any) -> tuple[Factor, _Relation]:
        """A validated delta for ``name`` (a trusted factor over the state's key names,
        local when small) and the relation it applies to (retyped if empty)."""
        base = self._rels[name]
        arity = self.rule.relations[name]
        f = self._as_factor(name, d, arity, "delta")
        label = f"delta of relation {name!r}"
        checked = f.validated(self._S, label)
        types = tuple(_key_types(checked))
        if not base.typed and base.rows == 0 and types != base.types:
            base = self._empty_relation(name, types)
        for i, (got, want) in enumerate(zip(types, base.types, strict=True)):
            if got != want:
                raise ValueError(
                    f"{label}: key column {f.vars[i]!r} (position {i}) has type {got} but "
                    f"relation {name!r} has keys of type {want}"
                )
        return checked.renamed(base.keys), base

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
                    t = self._rels[a.relation].types[a.positions[a.vars.index(v)]]
                    break
            types.append(t)
        return tuple(types)

    def _empty_output(self) -> DataFrame:
        schema = _schema(self.rule.head, self._head_types(), sops.ops(self._S).type)
        return self._spark.createDataFrame([], schema)

    def _initial_output(self) -> tuple[DataFrame, int]:
        if any(r.rows == 0 for r in self._rels.values()):
            return self._empty_output(), 0
        bindings = {n: r.factor(self._S, n) for n, r in self._rels.items()}
        out = self._query.solve(order=self.order, join=self.join, **bindings)
        rows = out.count()
        if not rows:
            return self._empty_output(), 0
        return self._materialise(zset.partition(self._as_output(out), self._P)), rows

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
            out = df.localCheckpoint(eager=True)
        finally:
            for k, v in before.items():
                self._spark.conf.set(k, v)
        self._owned |= checkpoint_ids(out)
        return out

    def _persist(self, changed: set[str], output_changed: bool, batch_id: int | None) -> None:
        """Write the changed relations (and output) of this tick, then the manifest, atomically."""
        store = self._store
        assert store is not None
        folder = store.new_folder(self._tick)
        prev = self._manifest
        try:
            rels = {}
            files: dict[str, Any] = {}
            for name, r in self._rels.items():
                if name in changed or r.folder is None:
                    r = replace(r, folder=folder.name)
                    path = folder / f"rel-{name}.parquet"
                    r.current(self._S).write.mode("error").parquet(str(path))
                    files.update(store.record_tree(path))
                rels[name] = r
            out_folder = prev["output"]["folder"] if prev and not output_changed else folder.name
            if out_folder == folder.name:
                path = folder / "output.parquet"
                self._out.write.mode("error").parquet(str(path))
                files.update(store.record_tree(path))
            if prev is not None:
                files.update(self._kept_files(prev, rels, out_folder, files))
            manifest = {
                "format": _FORMAT,
                "state": "spark",
                "rule": str(self.rule),
                "semiring": self.semiring.name,
                "tick": self._tick,
                "batch_id": batch_id if batch_id is not None else self.batch_id,
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
                "files": files,
            }
            store.commit(manifest)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._manifest = manifest
        self._rels = rels

    def _kept_files(
        self, prev: dict[str, Any], rels: dict[str, _Relation], out_folder: str, new: dict
    ) -> dict[str, Any]:
        """The files of the last commit that the new one keeps (the Parquet folders of
        unchanged relations and output), after a cheap check that each is still there with
        its size.  A missing or resized file cannot be written again from here: the step
        is refused (StateError naming the file) and the view left as it was."""
        store = self._store
        assert store is not None
        used = {f"{r.folder}/rel-{n}.parquet/" for n, r in rels.items()}
        used.add(f"{out_folder}/output.parquet/")
        kept = {}
        for rel, rec in prev["files"].items():
            if rel in new or not any(rel.startswith(u) for u in used):
                continue
            problem = store.damaged(rel, rec)
            if problem is not None:
                raise StateError(
                    f"{store.root / rel}: file {Path(rel).name!r} of the committed state "
                    f"{problem} (deleted or changed under the live view); the step is refused "
                    "and nothing is committed. The folder is damaged: rebuild the view"
                )
            kept[rel] = rec
        return kept

    def _resume(self, m: dict[str, Any]) -> None:
        store = self._store
        assert store is not None
        value_type = sops.ops(self._S).type
        self._P = _partitions(self._spark, sum(int(r["rows"]) for r in m["relations"].values()))
        rels = {}
        for name, r in m["relations"].items():
            keys, types = tuple(r["keys"]), tuple(r["types"])
            path = store.root / r["folder"] / f"rel-{name}.parquet"
            df = _spark().read.schema(_schema(keys, types, value_type)).parquet(str(path))
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
        out = _spark().read.schema(schema).parquet(str(path))
        self._out = self._materialise(zset.partition(out, self._P))
        self._out_rows = int(m["output"]["rows"])
        self._tick = int(m["tick"])
        self.batch_id = m.get("batch_id")


# -- helpers -------------------------------------------------------------------------------------
LOG_ROWS = 50_000
"""A relation's log of deltas is folded into it once it holds more than this many rows
and more than ``LOG_FRACTION`` of the relation's rows."""

LOG_FRACTION = 0.05


def _log_limit(rows: int) -> float:
    return max(LOG_ROWS, LOG_FRACTION * rows)


def _negative_message(label: str, count: int, key: tuple[Any, ...], value: Any, sr: str) -> str:
    return (
        f"refused: {label} would hold {count} key(s) with a negative multiplicity, e.g. "
        f"{key!r} -> {value} (a {sr!r} view can only delete tuples it holds); the view is "
        "unchanged"
    )


def _weighted(df: DataFrame, S: Semiring, label: str) -> DataFrame:
    """A delta with a ``_weight`` column as a Z-set of ``weight · value`` (rings only)."""
    from pyspark.sql import functions as F

    if "_weight" not in df.columns:
        return df
    if not S.is_ring:
        raise ValueError(
            f"{label}: a view of the {S.name!r} semiring whose state is in Spark takes "
            "insertions only (no _weight column); retractions need the driver state "
            "(IncrementalView(..., state='driver'))"
        )
    wtype = df.schema["_weight"].dataType.typeName()
    if wtype not in ("byte", "short", "integer", "long", "void"):
        raise ValueError(  # as the driver state says: a fractional weight is never truncated
            f"{label}: column '_weight' holds multiplicities and must be an integer column, "
            f"not {wtype}"
        )
    keys = [c for c in df.columns if c not in (VALUE, "_weight")]
    t = sops.ops(S).type
    v = F.col(VALUE).cast(t) if VALUE in df.columns else F.lit(1).cast(t)
    return df.select(*keys, (v * F.col("_weight").cast(t)).alias(VALUE))


def _native(x: Any) -> Any:
    """A numpy scalar as the Python value Spark accepts."""
    return x.item() if hasattr(x, "item") else x


def _key_names(rule: Rule, name: str) -> tuple[str, ...]:
    """Key column names of a relation's state: its first atom's variables, if distinct
    (and the atom has no constants)."""
    atom = next(a for a in rule.atoms if a.relation == name)
    if not atom.consts and len(set(atom.vars)) == len(atom.vars):
        return atom.vars
    return tuple(f"c{i}" for i in range(atom.arity))


def _key_types(f: Factor) -> list[str]:
    """Spark types of a factor's key columns, any integer type as ``bigint``."""
    return list(f.key_types)


def zset_plus(old: Any, delta: Any, S: Semiring) -> Any:
    """``old ⊕ delta`` on pandas Z-sets of the same columns (equal keys ⊕-combined, zeros
    dropped)."""
    import pandas as pd

    from semirings.local import local_ops

    o = local_ops(S)
    keys = [c for c in old.columns if c != VALUE]
    both = pd.concat([old, delta[old.columns]], ignore_index=True)
    out = o.reduce(both, keys, VALUE)
    return out[o.nonzero(out[VALUE].to_numpy())].reset_index(drop=True)


def _schema(keys: tuple[str, ...], types: tuple[str, ...], value_type: str) -> str:
    cols = [f"`{k}` {t}" for k, t in zip(keys, types, strict=True)]
    return ", ".join([*cols, f"`{VALUE}` {value_type}"])


def _spark() -> SparkSession:
    from faq.session import get_spark

    return get_spark()


ROWS_PER_PARTITION = 1_000_000
"""Rows of state per partition the view aims at (a view's partition count is fixed when it
is created or reopened, from its rows, and never above the session's shuffle partitions)."""


def _partitions(spark: SparkSession, rows: int) -> int:
    """Partitions of a view's materialised state: one per ``ROWS_PER_PARTITION`` rows, at
    least the cores Spark runs on and at most the session's shuffle partitions (so a
    session left at Spark's 200 does not spread a small view over 200 tasks a tick)."""
    from faq.spark.tasks import parallelism

    try:
        most = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    except (ValueError, TypeError):
        most = 1
    want = max(parallelism(spark), -(-rows // ROWS_PER_PARTITION))
    return max(1, min(most, want))
