"""A view's state held in the driver: keyed tables that answer lookups by binary search.

:class:`DriverState` follows :class:`incremental.protocol.ViewState`.  Its
relations are :class:`LocalKeyed` s over :class:`faq.lookup.KeyedTable` s,
which answer the delta rule's lookups by binary search and take a change by
copying only a small table of overrides; a tick runs no Spark job.  How each
semiring is maintained is :mod:`incremental.regimes`, shared with the Spark
state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import semirings
from faq import Factor, Rule
from faq.kernel import KeyedTable, Table, match_keys, trie_orders
from incremental import precision
from incremental.deltas import Rows
from incremental.journal import Frame
from incremental.manifest import (
    OUTPUT,
    OUTPUT_LOW,
    OUTPUT_MAGNITUDE,
    abs_part,
    low_part,
    relation_part,
    rows_part,
)
from incremental.protocol import Change, Contents, How
from incremental.regimes import Maintained, Sizes, row_annotations, stored_semiring
from incremental.regimes import regime as regime_of
from incremental.store import Store
from incremental.tables import (
    ANNOTATION,
    annotation_delta,
    empty_table,
    int_cols,
    kind,
    refuse_missing,
    refuse_negative,
    row_counts,
    with_values,
)
from incremental.terms import solve
from semirings import Semiring
from semirings.local import LocalOps, distinct, local_ops

__all__ = ["DriverState", "LocalKeyed"]


@dataclass(frozen=True)
class LocalKeyed:
    """A relation in the driver (:class:`incremental.regimes.Keyed` over a KeyedTable).

    ``origin`` and ``changes`` are the journal's (:class:`incremental.protocol.Part`):
    a relation made by :meth:`journaled` records every table :meth:`plus` and
    :meth:`replace` put in it since; others record nothing.
    """

    kt: KeyedTable
    origin: object | None = field(default=None, compare=False, repr=False)
    changes: tuple[Table, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, t: Table, ops: LocalOps) -> LocalKeyed:
        """A relation holding ``t`` (consolidated, no zeros)."""
        return cls(KeyedTable.of(t, ops))

    @classmethod
    def empty(
        cls, vars_: tuple[str, ...], ops: LocalOps, like: Sequence[np.ndarray] | None = None
    ) -> LocalKeyed:
        """An empty relation (key types those of ``like``, else int64)."""
        return cls.of(empty_table(vars_, ops, like), ops)

    vars = property(lambda self: self.kt.vars)
    ops = property(lambda self: self.kt.ops)
    rows = property(lambda self: self.kt.rows)
    base = property(lambda self: self.kt.base)
    over = property(lambda self: self.kt.over)
    token = property(lambda self: Contents(self.kt))

    def journaled(self) -> LocalKeyed:
        """The same relation, recording its changes from now on (for the journal)."""
        return LocalKeyed(self.kt, self.token, ())

    def compacted(self) -> LocalKeyed:
        """The same relation with its log folded into its base (the same rows, and the
        same record of changes)."""
        kt = self.kt.compacted()
        return self if kt is self.kt else LocalKeyed(kt, self.origin, self.changes)

    def _then(self, kt: KeyedTable, change: Table) -> LocalKeyed:
        if self.origin is None:
            return LocalKeyed(kt)
        if change.rows == 0:
            return LocalKeyed(kt, self.origin, self.changes)
        return LocalKeyed(kt, self.origin, (*self.changes, with_values(change, self.kt.ops)))

    @property
    def fresh(self) -> bool:
        """Empty, and never held a row."""
        return self.kt.rows == 0 and self.kt.base.rows == 0

    @property
    def keyed_table(self) -> KeyedTable:
        """The keyed table the delta rule's runners read (:func:`incremental.terms.delta_rule`)."""
        return self.kt

    def kinds(self) -> list[str]:
        """The kinds of the key columns."""
        return [kind(c) for c in self.kt.base.cols]

    def table(self) -> Table:
        """The whole relation."""
        return self.kt.table()

    def at(self, keys: Sequence[np.ndarray]) -> Table:
        """The rows whose whole key is one of ``keys``."""
        return self.kt.at(keys)

    def values_at(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        """The annotation at each row of ``keys`` (zero where there is none; a key of at
        least one column)."""
        return self.kt.values_at(keys)

    def matching(self, keys: Sequence[np.ndarray]) -> Table:
        """The rows whose leading key columns are one of ``keys``."""
        if not keys:
            return self.kt.table()
        found = self.kt.lookup([{k: distinct(c) for k, c in enumerate(keys)}])
        hit, _ = match_keys(found.cols[: len(keys)], keys)
        return found.take(np.flatnonzero(hit))

    def plus(self, delta: Table) -> tuple[LocalKeyed, Table, Table]:
        """``self ⊕ delta``, the rows before at its keys, the annotations after."""
        new, before, after = self.kt.plus(delta)
        return self._then(new, after), before, after

    def replace(self, new: Table, old: Table | None = None) -> LocalKeyed:
        """``new``'s annotation at each of its keys (zero: removed); ``old``, the rows held
        before at (at least) those keys, spares a search of the keyed table."""
        present = None
        if old is not None and new.rows:
            present = int(match_keys(old.cols, new.cols)[0].sum()) if self.vars else old.rows
        kt = self.kt.replace(new, present)
        return self._then(kt, Table(self.vars, new.cols, new.values))

    def emptied(self, like: Sequence[np.ndarray]) -> LocalKeyed:
        """An empty relation with the key types of ``like``."""
        return LocalKeyed.empty(self.vars, self.ops, like)

    def factor(self, S: Semiring, name: str) -> Factor:
        """The relation as a keyed factor (the delta rule reads it by lookups)."""
        return Factor.keyed(self.kt, S, name)

    def indicator(self, S: Semiring, name: str) -> Factor:
        """Every present key annotated ``True`` (``S`` is boolean; same index)."""
        kt = self.kt
        base = Table(kt.vars, kt.base.cols, np.ones(kt.base.rows, dtype=bool))
        assert kt.over.values is not None
        over = Table(kt.vars, kt.over.cols, kt.ops.nonzero(kt.over.values))
        support = KeyedTable(base, over, local_ops(S), kt.rows, kt._index)
        return Factor.keyed(support, S, name)


@dataclass(frozen=True)
class DriverState(Sizes):
    """A view's relations and output in the driver (:class:`incremental.protocol.ViewState`)."""

    m: Maintained
    where: str = "driver"

    @classmethod
    def empty(cls, rule: Rule, S: Semiring, keys: dict[str, tuple[str, ...]]) -> DriverState:
        """A state with empty relations and output."""
        o = local_ops(stored_semiring(S))
        rels = {n: LocalKeyed.empty(k, o) for n, k in keys.items()}
        rows: dict[str, Any] = {}
        if regime_of(S) == "general":
            io = local_ops(semirings.INTEGER)
            ann = np.empty(0, dtype=local_ops(S).dtype)
            rows = {
                n: LocalKeyed.empty((*k, ANNOTATION), io, (*int_cols(k), ann))
                for n, k in keys.items()
            }
        comp: dict[str, Any] = {}
        if regime_of(S) == "ring" and o.dtype == np.float64:
            comp = {
                p(n): LocalKeyed.empty(k, o) for n, k in keys.items() for p in (low_part, abs_part)
            }
            comp |= {p: LocalKeyed.empty(rule.head, o) for p in (OUTPUT_LOW, OUTPUT_MAGNITUDE)}
        m = Maintained(rule, S, dict(keys), rels, rows, LocalKeyed.empty(rule.head, o), comp)
        return cls(m)

    # -- the protocol -------------------------------------------------------------------------
    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None
    ) -> tuple[DriverState, Change]:
        """The next state and the change of the output (see :meth:`Maintained.apply`)."""
        m, change = self.m.journaled().apply(deltas, how, sets)
        return DriverState(m), change

    def result(self) -> Factor:
        """The output in the view's semiring."""
        return self.m.shown(self.m.out, self.m.rule.name)

    def relation(self, name: str) -> Factor:
        """Relation ``name`` in the view's semiring."""
        return self.m.shown(self.m.rels[name], name)

    def describe(self) -> dict[str, Any]:
        """Nothing besides the parts."""
        return {}

    def settle(self) -> None:
        """Nothing to free in the driver."""

    # -- initial contents and reopening -------------------------------------------------------
    def load(
        self, initial: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None = None
    ) -> DriverState:
        """The state holding ``initial`` (on an empty state), its output by one batch solve."""
        m = self.m.typed(initial)
        initial = m.as_sets(initial, sets)
        S, regime = m.semiring, m.regime
        o = local_ops(m.stored)
        io = local_ops(semirings.INTEGER)
        rels, rows, comp = dict(m.rels), dict(m.rows), dict(m.comp)
        for name, d in initial.items():
            keys = m.keys[name]
            if regime == "general":
                ms = row_counts(name, keys, d, o)
                refuse_missing(name, ms, S)
                rows[name] = LocalKeyed.of(ms, io)
                rels[name] = LocalKeyed.of(row_annotations(ms, keys, o), o)
            elif comp:
                cols, dh, dl = precision.delta_sums(d)
                precision.refuse_overflow(name, cols, dh)
                rels[name] = LocalKeyed.of(Table(keys, cols, dh), o)
                lo = np.flatnonzero(dl)
                comp[low_part(name)] = LocalKeyed.of(
                    Table(keys, tuple(c[lo] for c in cols), dl[lo]), o
                )
                comp[abs_part(name)] = LocalKeyed.of(Table(keys, cols, np.abs(dh)), o)
            else:
                t = annotation_delta(regime, name, keys, d, o)
                if regime in ("counting", "boolean"):
                    refuse_negative(name, t, S.name)
                rels[name] = LocalKeyed.of(t, o)
        m = replace(m, rels=rels, rows=rows, comp=comp)
        m = replace(m, out=_solve(m, how))
        return DriverState(replace(m, comp=_magnitudes(m, m.comp))).indexed()

    @classmethod
    def restore(
        cls,
        rule: Rule,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        store: Store,
        manifest: dict[str, Any],
        frames: Sequence[Frame] = (),
    ) -> DriverState:
        """A state from a manifest's ``parts`` and the journal's ``frames`` after it,
        replayed by the store (:meth:`incremental.store.Store.replay`; relations rebuilt
        from multisets)."""
        m = cls.empty(rule, S, keys).m
        probe = {**m.rels, **{rows_part(n): r for n, r in m.rows.items()}, **m.comp}
        probe |= {relation_part(n): r for n, r in m.rels.items()} | {OUTPUT: m.out}
        read = {
            p: LocalKeyed(store.read_keyed(e, probe[p].vars, probe[p].ops))
            for p, e in manifest["parts"].items()
        }
        tables = store.replay(manifest, read, frames)
        return cls._rebuilt(m, keys, tables, manifest["parts"])

    @classmethod
    def _rebuilt(
        cls,
        m: Maintained,
        keys: dict[str, tuple[str, ...]],
        tables: dict[str, LocalKeyed],
        parts: Mapping[str, Any],
    ) -> DriverState:
        """The state of the parts ``tables`` (derived relations computed)."""
        o = local_ops(m.stored)
        if m.regime == "general":
            rows = {n: tables[rows_part(n)] for n in keys}
            rels = {
                n: LocalKeyed.of(row_annotations(r.table(), keys[n], o), o) for n, r in rows.items()
            }
            m = replace(m, rels=rels, rows=rows, out=tables[OUTPUT])
            return cls(m).indexed()
        rels = {n: tables[relation_part(n)] for n in keys}
        comp = {p: tables.get(p, kt) for p, kt in m.comp.items()}
        for n, r in rels.items():  # derived, not written: the absolute annotations
            if abs_part(n) in comp:
                t = r.table()
                assert t.values is not None
                comp[abs_part(n)] = LocalKeyed.of(Table(t.vars, t.cols, np.abs(t.values)), o)
        m = replace(m, rels=rels, out=tables[OUTPUT], comp=comp)
        if comp and OUTPUT_MAGNITUDE not in parts:
            m = replace(m, comp=_magnitudes(m, comp))
        return cls(m).indexed()

    def indexed(self) -> DriverState:
        """The same state with every column index built, and with integer annotations the
        tries the delta rule reads (so a first tick does not pay them)."""
        m = self.m
        for r in (*m.rels.values(), *m.rows.values(), m.out, *m.comp.values()):
            r.kt.build_index()  # type: ignore[attr-defined]
        if np.dtype(local_ops(m.stored).dtype).kind in "iu" and not any(
            a.consts for a in m.rule.atoms
        ):  # (atoms with constants are not read through tries)
            atoms = [(a.relation, a.vars) for a in m.rule.atoms]
            tries = [
                m.rels[name].kt.trie(perm)  # type: ignore[attr-defined]
                for name, perms in trie_orders(atoms).items()
                for perm in perms
            ]
            if m.rule.head:
                tries.append(m.out.kt.trie(tuple(range(len(m.rule.head)))))  # type: ignore[attr-defined]
            for tr in tries:
                tr.build_index()
        return self


def _solve(m: Maintained, how: How) -> LocalKeyed:
    """The output recomputed from the relations by a batch solve."""
    W = m.stored
    o = local_ops(W)
    if any(r.rows == 0 for r in m.rels.values()):
        return LocalKeyed.empty(m.rule.head, o)
    relations = {n: r.factor(W, n) for n, r in m.rels.items()}
    return LocalKeyed.of(with_values(solve(m.rule, W, relations, how), o), o)


def _magnitudes(m: Maintained, comp: dict[str, Any]) -> dict[str, Any]:
    """``real``: the output's magnitudes taken as its absolute values (after a solve)."""
    if not comp:
        return comp
    t = m.out.table()  # type: ignore[attr-defined]
    assert t.values is not None
    mag = LocalKeyed.of(Table(t.vars, t.cols, np.abs(t.values)), m.out.ops)
    return {**comp, OUTPUT_MAGNITUDE: mag}
