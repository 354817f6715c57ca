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
the delta, and the worst-case optimal Generic Join extends it at cyclic bags.
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
from faq.query import Query
from faq.rule import VALUE, Atom, Rule
from incremental import zset
from semirings import Semiring
from semirings import spark as sops

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
    """One relation's committed state: a consolidated, materialised Z-set and its statistics.

    ``rows`` and ``distinct`` are exact when ``exact`` is True and otherwise
    upper bounds (good enough for the planner, and ``rows == 0`` still means
    empty).  ``typed`` is False while the relation is the default empty one,
    whose key types the first delta may choose.
    """

    df: DataFrame
    keys: tuple[str, ...]
    types: tuple[str, ...]
    rows: int
    distinct: tuple[int, ...]
    exact: bool
    typed: bool = True
    folder: str | None = None

    def factor(self, S: Semiring, name: str) -> Factor:
        stats = RelationStats(self.rows, self.distinct)
        return Factor(self.df, self.keys, S, name=name, _clean=True, _stats=stats)


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
    materialises the new relations and output with ``localCheckpoint``, so
    neither Spark lineage nor plan size grow with the number of ticks.  The
    state is kept hash-partitioned by its key columns, so merging a delta
    into it shuffles only the delta (:func:`incremental.zset.add_delta`), and
    small deltas enter their delta queries with a broadcast hint.

    The delta rule and its terms are described in :mod:`incremental.view`;
    ``last_step`` tells which terms ran at the last tick and their sizes.

    Examples
    --------
    >>> from faq import query                                       # doctest: +SKIP
    >>> tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    >>> view = IncrementalView(tri, E=edges)                        # doctest: +SKIP
    >>> view.step(E=delta).scalar(), view.result().scalar(), view.tick  # doctest: +SKIP
    (-1, 44, 1)
    """

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
        return Factor(r.df, r.keys, self.semiring, name=name, _clean=True)

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
        # 2. new relations R' = R ⊕ ΔR (only the delta is shuffled: the state is
        #    hash-partitioned by its keys); counting refuses negative multiplicities
        new_rels = dict(self._rels)
        for name, (delta, base) in checked.items():
            merged = self._materialise(zset.add_delta(base.df, delta.df, self._S, self._P))
            if self._nonneg:
                rows, distinct = self._statistics(merged, base.keys, f"relation {name!r}")
                exact = True
            else:
                rows, exact = base.rows + delta.rows, False
                distinct = tuple(
                    min(rows, x + y) for x, y in zip(base.distinct, delta.distinct, strict=True)
                )
            new_rels[name] = replace(
                base, df=merged, rows=rows, distinct=distinct, exact=exact, typed=True
            )
        # 3. the delta rule: one term per atom of a changed relation
        terms: list[DataFrame] = []
        term_rows = 0
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
                delta = checked[atom.relation][0]
                rel = _reduced(rel, a, atom, delta, self._rels[atom.relation].keys)
                bindings[label] = rel.factor(self._S, label)
            if empty:  # a factor with no rows makes the whole product zero
                report.append({"atom": i, "skipped": True})
                continue
            out = self._split.solve(order=self.order, join=self.join, **bindings)
            n = out.count()
            report.append({"atom": i, "skipped": False, "rows": n})
            if n:
                terms.append(out.df)
                term_rows += n
        # 4. ΔQ and the new output
        if not terms:
            dq = self._empty_output()
        elif len(terms) == 1:
            dq = terms[0]
        else:
            union = terms[0]
            for t in terms[1:]:
                union = union.unionByName(t)
            dq = zset.consolidate(union, self._S)
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
        self.last_step = {"tick": self._tick, "terms": report}
        return Factor(dq, self.rule.head, self._S, name=f"Δ{self.rule.name}", _clean=True)

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
                f"refused: {label} would hold {row['neg']} key(s) with a negative "
                f"multiplicity, e.g. {key!r} -> {ex[VALUE]} (a {self.semiring.name!r} view "
                "can only delete tuples it holds); the view is unchanged"
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
    def _materialise(self, df: DataFrame) -> DataFrame:
        """Compute ``df`` once and cut its lineage; the checkpoint keeps its partitioning.

        Adaptive execution is switched off while the checkpoint is computed: the
        checkpoint of an adaptive plan does not know its partitioning, and then
        every later ``add_delta`` would shuffle the whole state again.
        """
        key = "spark.sql.adaptive.enabled"
        before = self._spark.conf.get(key)
        self._spark.conf.set(key, "false")
        try:
            return df.localCheckpoint(eager=True)
        finally:
            self._spark.conf.set(key, before)

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
                    store.write(r.df, folder / f"rel-{name}.parquet")
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
def _reduced(
    rel: _Relation, atom: Atom, delta_atom: Atom, delta: _Delta, delta_keys: tuple[str, ...]
) -> _Relation:
    """``rel`` restricted to the rows that can join the delta (a semi-join reduction).

    In the term of the delta rule where ``delta_atom`` is bound to the delta,
    every contributing assignment matches a delta row, so a row of another
    atom's relation whose values of the shared variables do not appear in
    the delta contributes nothing.  Dropping those rows is exact; with the
    delta broadcast it costs a scan of ``rel``, not a shuffle, and the delta
    query's joins then see O(|Δ| · degree) rows instead of the whole state.
    The row count is an estimate (for the planner); zero still means empty
    only when ``rel`` is.
    """
    from pyspark.sql import functions as F

    shared = [v for v in atom.distinct_vars if v in delta_atom.vars]
    if not shared or delta.rows > BROADCAST_ROWS:
        return rel
    mine = [rel.keys[atom.vars.index(v)] for v in shared]
    theirs = [delta_keys[delta_atom.vars.index(v)] for v in shared]
    keys = delta.df.select(*[F.col(t).alias(m) for t, m in zip(theirs, mine, strict=True)])
    df = rel.df.join(F.broadcast(keys.distinct()), on=mine, how="left_semi")
    df = df.select(*rel.keys, VALUE)  # a join on names puts the join columns first
    fraction = 1.0
    for v, m in zip(shared, mine, strict=True):
        d_rel = max(rel.distinct[rel.keys.index(m)], 1)
        d_delta = delta.distinct[delta_atom.vars.index(v)]
        fraction = min(fraction, d_delta / d_rel)
    rows = max(1, min(rel.rows, round(rel.rows * fraction))) if rel.rows else 0
    distinct = tuple(min(d, rows) for d in rel.distinct)
    return replace(rel, df=df, rows=rows, distinct=distinct, exact=False)


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
