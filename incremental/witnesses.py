"""Witnesses kept by a view (``IncrementalView(q, witness=True)``), tick by tick.

For a selective semiring (``S.selective``: ⊕ is max or min, see :mod:`faq.witness`)
every key of a view's answer has an assignment of the rule's bound variables that
attains its value.  :class:`WitnessState` wraps a view's driver state
(:class:`incremental.driver_state.DriverState`) and keeps one such assignment per
answer key, so ``view.result().witnesses()`` and ``witness_frame`` read as those of a
batch ``solve(witness=True)`` after every tick.

After a tick, a key's witness is found again when

* its value changed (the tick's change names it), or
* its witness uses a tuple whose annotation got worse in the tick (removed, or
  ⊕-below what it was).  A tuple that only got better cannot break a witness of a
  key whose value did not change: ⊗ is monotone in ⊕'s order, so the witness's
  product cannot drop below the value, nor rise above it.

Those keys' witnesses are found over the rows they reach: starting from the keys'
head values, each atom is read by lookups at the values of its variables known so far
(binary searches in the relations' keyed tables), and the values its rows hold name the
rows of the next atoms.  A rule of at most :data:`DIRECT_BOUND` bound variables then
joins the keys with every atom over those rows and keeps, per key, the first attaining
row (:func:`best_rows`); a rule of more is solved with ``witness=True`` with one more
atom, the keys themselves (a relation over the head).  The cost of a tick's upkeep is
the lookups of the worsened tuples in the witnesses (an index by every column), and a
join over the rows the re-derived keys reach; a rule whose atoms are not all connected
to the head reads the unconnected atoms whole, and a rule with an empty head re-solves
whole when its value or a tuple of its witness changed.  ``result()`` builds the
witness frame of every key (linear in the answer).

A view of a program keeps its answer's witnesses with the same pieces
(:mod:`incremental.witness_programs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import semirings
from faq import VALUE, Atom, Factor, Query, Rule, Witnesses
from faq.kernel import KeyedTable, Table, generic_join, match_keys
from incremental.deltas import Rows
from incremental.driver_state import DriverState
from incremental.protocol import Change, How
from incremental.regimes import Maintained, Sizes
from incremental.tables import distinct_keys
from incremental.terms import GROUPS
from semirings import Semiring
from semirings.local import distinct, equal, group_starts, local_ops, run_starts, sort_rows

__all__ = [
    "DIRECT_BOUND",
    "WitnessState",
    "best_rows",
    "check_witness_options",
    "index_of",
    "marked",
    "no_rows",
    "restricted",
    "stale_keys",
    "swapped",
    "worsened",
]

_MARK = local_ops(semirings.INTEGER)  # the witness index's annotations: 1 per row

DIRECT_BOUND = 2
"""Rules of at most this many bound variables find a tick's witnesses by one join of every
derivation of the keys (:func:`best_rows`); others by a restricted ``solve(witness=True)``."""


def check_witness_options(
    S: Semiring, witness: bool, state: str, state_dir: Any, what: str = "IncrementalView"
) -> str:
    """The state a view asked for keeps (``"driver"`` for ``"auto"`` with ``witness``:
    witnesses are kept in the driver), or a refusal of ``witness=True`` where a view does
    not keep witnesses (``what`` names the view).  Nothing is made before this check, and
    nothing is checked without ``witness``.

    Raises
    ------
    ValueError
        ``S`` is not selective, ``state="spark"``, or the view is durable (``state_dir``).
    """
    if not witness:
        return state
    if S.selective is None:
        raise ValueError(
            f"{what}: witness=True needs a selective ⊕ (max or min, e.g. max-product, "
            f"max-plus, min-plus, boolean); semiring {S.name!r} does not declare one "
            "(selective=): no single assignment attains a sum"
        )
    if state == "spark":
        raise ValueError(
            f'{what}: witness=True is not supported with state="spark" (witnesses are kept '
            'in the driver); use state="auto" or "driver"'
        )
    if state_dir is not None:
        raise ValueError(
            f"{what}: witness=True is not supported with state_dir (witnesses are not "
            "written to the folder); create the view without state_dir, or without witness="
        )
    return "driver" if state == "auto" else state


@dataclass(frozen=True)
class WitnessState(Sizes):
    """A driver state and a witness per answer key (:class:`incremental.protocol.ViewState`).

    ``index`` holds one row per answer key over the head and the bound variables (the
    key and its witness), annotated 1; None for a rule without bound variables (every
    witness is empty).
    """

    inner: DriverState
    index: KeyedTable | None
    how: How
    where: str = "driver"

    @classmethod
    def of(cls, state: Any, how: How) -> WitnessState:
        """``state`` with the witnesses of its whole answer (one batch solve).

        Raises
        ------
        ValueError
            ``state`` is not in the driver (the initial relations were larger than the
            ``local_rows`` setting, and the view went to Spark).
        """
        if not isinstance(state, DriverState):
            raise ValueError(
                "IncrementalView: witness=True keeps witnesses in the driver only, and the "
                f"initial relations were put in {state.where} (more rows than the local_rows "
                'setting); pass state="driver" to keep them in the driver'
            )
        m = state.m
        if not m.rule.bound:
            return cls(state, None, how)
        rels = {n: _shown(m, n, None) for n in m.rels}
        return cls(state, index_of(_solved(m, rels, None, how)), how)

    @property
    def m(self) -> Maintained:
        """The state's relations and output."""
        return self.inner.m

    # -- the protocol -------------------------------------------------------------------------
    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None
    ) -> tuple[WitnessState, Change]:
        """The next state, its witnesses repaired, and the change of the output."""
        inner, change = self.inner.apply(deltas, how, sets)
        if self.index is None or not change.table.rows and not deltas:
            return WitnessState(inner, self.index, how), change
        index = _repaired(self.m, inner.m, self.index, deltas, change.table, how)
        return WitnessState(inner, index, how), change

    def result(self) -> Factor:
        """The output, with a witness per key (``witnesses()``, ``witness_frame``)."""
        out = self.inner.result()
        return Factor.from_source(out.source, out.name, witnesses=Witnesses(self._frame(out)))

    def relation(self, name: str) -> Factor:
        """Relation ``name`` in the view's semiring."""
        return self.inner.relation(name)

    def describe(self) -> dict[str, Any]:
        """What the manifest records besides the parts (the driver state's)."""
        return self.inner.describe()

    def settle(self) -> None:
        """Nothing to free in the driver."""
        self.inner.settle()

    def _frame(self, out: Factor) -> pd.DataFrame:
        """Head columns, one column per bound variable, ``value``: sorted by the head."""
        rule = self.m.rule
        t = out.to_table()
        values = t.values if t.values is not None else np.full(t.rows, self.m.semiring.one)
        if self.index is None:  # no bound variables: every witness is empty
            return pd.DataFrame({**{v: t.col(v) for v in rule.head}, VALUE: values})
        w = self.index.table()
        found, at = match_keys(w.cols[: len(rule.head)], t.cols)
        if not rule.head:  # at most one key, no key columns to match
            found, at = np.ones(w.rows, dtype=bool), np.zeros(w.rows, dtype=np.int64)
        if w.rows != t.rows or not found.all():
            raise AssertionError(
                f"view of {rule}: the witnesses ({w.rows} keys) do not cover the answer "
                f"({t.rows} keys)"
            )
        cols = dict(zip(w.vars, w.cols, strict=True))
        frame = pd.DataFrame({**cols, VALUE: values[at]})
        return frame.sort_values(list(rule.head)).reset_index(drop=True) if rule.head else frame


# -- a tick's repair ----------------------------------------------------------------------------
def _repaired(
    old: Maintained,
    new: Maintained,
    index: KeyedTable,
    deltas: Mapping[str, Rows],
    change: Table,
    how: How,
) -> KeyedTable:
    """``index`` with the witnesses of the keys a tick may have broken found again."""
    rule = new.rule
    worse = {n: worsened(old, new, n, d) for n, d in deltas.items() if d.rows}
    worse = {n: t for n, t in worse.items() if t.rows}
    if not rule.head:  # one key: found again whole when its value or a witness tuple changed
        if not change.rows and stale_keys(rule, index, worse) is None:
            return index
        return index_of(_solved(new, {n: _shown(new, n, None) for n in new.rels}, None, how))
    keys = [change.cols] if change.rows else []
    stale = stale_keys(rule, index, worse)
    if stale is not None:
        keys.append(stale)
    if not keys:
        return index
    keys_ = distinct_keys(tuple(np.concatenate(c) for c in zip(*keys, strict=True)))
    old_rows = index.at_prefix(keys_) if index.rows else None
    live = new.out.at(keys_)  # the keys still in the answer
    found = Table(rule.head + rule.bound, tuple(c[:0] for c in index.base.cols), None)
    if live.rows:
        found = _solved(new, restricted(new, live.cols), live, how)
    return swapped(index, old_rows, found)


def swapped(index: KeyedTable, old_rows: Table | None, found: Table) -> KeyedTable:
    """``index`` without the rows ``old_rows`` and with the rows ``found``."""
    gone = None
    if old_rows is not None and old_rows.rows:
        kept, _ = match_keys(old_rows.cols, found.cols) if found.rows else (None, None)
        pick = np.flatnonzero(~kept) if kept is not None else np.arange(old_rows.rows)
        gone = Table(
            old_rows.vars, tuple(c[pick] for c in old_rows.cols), np.zeros(len(pick), np.int64)
        )
    if index.rows == 0 and index.base.rows == 0:
        return KeyedTable.of(marked(found), _MARK) if found.rows else index
    parts = [t for t in (gone, marked(found)) if t is not None and t.rows]
    if not parts:
        return index
    both = Table(
        index.vars,
        tuple(np.concatenate(c) for c in zip(*(p.cols for p in parts), strict=True)),
        np.concatenate([p.values for p in parts]),
    )
    return index.replace(both)


def worsened(old: Maintained, new: Maintained, name: str, d: Rows) -> Table:
    """The tuples of relation ``name`` at ``d``'s keys whose annotation got worse in ⊕'s
    order (removed, or below what it was)."""
    keys = distinct_keys(d.cols)
    before = _values_at(old, name, keys)
    after = _values_at(new, name, keys)
    S = new.semiring
    o = local_ops(S)
    pairs = np.empty(2 * len(before), dtype=before.dtype if o.dtype is not object else object)
    pairs[0::2], pairs[1::2] = before, after
    best = o.reduceat(pairs, np.arange(0, len(pairs), 2)) if len(pairs) else pairs
    bad = ~equal(np.asarray(best), after)  # the ⊕ of before and after is not after
    marks = None if keys else np.ones(int(bad.sum()), dtype=np.int64)  # a relation of no keys
    return Table(new.keys[name], tuple(c[bad] for c in keys), marks)


def _values_at(m: Maintained, name: str, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """The annotations (in the view's semiring) of relation ``name`` at ``keys`` (zero
    where absent)."""
    S = m.semiring
    t = m.rels[name].at(keys)
    n = len(keys[0]) if keys else 1
    o = local_ops(S)
    out = np.repeat(np.asarray([S.zero], dtype=o.dtype), n)
    if t.rows:
        found, at = match_keys(keys, t.cols) if keys else (np.ones(n, bool), np.zeros(n, int))
        if m.regime == "boolean":
            out[found] = True
        else:
            assert t.values is not None
            out[found] = t.values[at[found]]
    return out


def stale_keys(rule: Rule, index: KeyedTable, worse: Mapping[str, Table]) -> np.ndarray | None:
    """The head keys whose witness uses a tuple of ``worse`` (None when none does), as
    head columns; the whole index is read by lookups at the worsened tuples' values."""
    h = len(rule.head)
    pos = {v: i for i, v in enumerate(index.vars)}
    hits: list[tuple[np.ndarray, ...]] = []
    for atom in rule.atoms:
        t = worse.get(atom.relation)
        if t is None or not t.rows or index.rows == 0:
            continue
        consts = dict(atom.consts)
        keep = np.ones(t.rows, dtype=bool)
        for p, c in consts.items():
            keep &= t.cols[p] == c
        cols = [c[keep] for c in t.cols]
        if cols and not len(cols[0]):
            continue
        cond: dict[int, np.ndarray] = {}
        for v, p in zip(atom.vars, atom.positions, strict=True):
            cond[pos[v]] = distinct(cols[p])
        rows = index.lookup([cond]) if cond else index.table()
        if not rows.rows:
            continue
        at = tuple(rows.col(v) for v in atom.vars)
        mine = tuple(cols[p] for p in atom.positions)
        hit, _ = match_keys(at, distinct_keys(mine)) if at else (np.ones(rows.rows, bool), None)
        if hit.any():
            hits.append(tuple(c[hit] for c in rows.cols[:h]))
    if not hits:
        return None
    return tuple(np.concatenate(c) for c in zip(*hits, strict=True))  # type: ignore[return-value]


# -- the restricted solve -----------------------------------------------------------------------
def restricted(m: Maintained, keys: tuple[np.ndarray, ...]) -> dict[str, Table]:
    """Every relation at the rows that derivations of the head keys ``keys`` can read (a
    superset): atoms are read by lookups at the values of their variables known so far,
    the atom with the most known columns first; an atom that meets none is read whole."""
    rule = m.rule
    known = {v: distinct(c) for v, c in zip(rule.head, keys, strict=True)}
    read: dict[str, list[Table]] = {n: [] for n in rule.relations}
    todo = list(rule.atoms)
    while todo:
        a = max(todo, key=lambda a: len(a.consts) + sum(v in known for v in set(a.vars)))
        todo.remove(a)
        cond: dict[int, np.ndarray] = {p: np.asarray([c]) for p, c in a.consts}
        cond |= {p: known[v] for v, p in zip(a.vars, a.positions, strict=True) if v in known}
        rows = m.rels[a.relation].kt.lookup([cond])  # type: ignore[attr-defined]
        read[a.relation].append(rows)
        for v, p in zip(a.vars, a.positions, strict=True):
            here = distinct(rows.cols[p])
            known[v] = np.intersect1d(known[v], here) if v in known else here
    return {n: _as_shown(m, _union(ts)) for n, ts in read.items()}


def _union(ts: list[Table]) -> Table:
    """The rows of several reads of one relation, each key once."""
    if len(ts) == 1:
        return ts[0]
    cols = tuple(np.concatenate(c) for c in zip(*(t.cols for t in ts), strict=True))
    values = np.concatenate([t.values for t in ts])  # type: ignore[misc]
    if not cols:
        return Table(ts[0].vars, (), values[:1])
    perm, starts = group_starts(list(cols))
    pick = perm[starts]
    return Table(ts[0].vars, tuple(c[pick] for c in cols), values[pick])


def _as_shown(m: Maintained, t: Table) -> Table:
    """Rows of a stored relation in the view's semiring (boolean: present, True)."""
    if m.regime == "boolean":
        return Table(t.vars, t.cols, np.ones(t.rows, dtype=bool))
    return t


def _shown(m: Maintained, name: str, conds: list[dict[int, np.ndarray]] | None) -> Table:
    """Relation ``name``'s rows (those meeting any of ``conds``; None: all) in the view's
    semiring: present tuples annotated True for a boolean view."""
    kt = m.rels[name].kt  # type: ignore[attr-defined]
    return _as_shown(m, kt.table() if conds is None else kt.lookup(conds))


def _solved(m: Maintained, rels: Mapping[str, Table], keys: Table | None, how: How) -> Table:
    """The witness rows (head, then the bound variables) of ``keys`` (None: every key) by
    a batch ``solve(witness=True)`` over ``rels``."""
    rule, S = m.rule, m.semiring
    order, join, _ = how
    if any(t.rows == 0 for t in rels.values()):
        return no_rows(rule, rels)
    if keys is not None and len(rule.bound) <= DIRECT_BOUND:
        return best_rows(rule, S, rels, keys)
    relations = {n: Factor.from_table(t, S, n) for n, t in rels.items()}
    q = rule
    if keys is not None:
        name = GROUPS
        while name in rule.relations:
            name = f"_{name}"
        q = Rule(rule.name, rule.head, (*rule.atoms, Atom(name, rule.head)))
        one = local_ops(S).ones(np.ones(keys.rows, dtype=np.int64))
        relations[name] = Factor.from_table(Table(rule.head, keys.cols, one), S, name)
    out = Query(q, S).solve(order=order, join=join, witness=True, **relations)
    w = out.witness_frame
    cols = rule.head + rule.bound
    return Table(cols, tuple(w[c].to_numpy() for c in cols), None)


def best_rows(rule: Rule, S: Semiring, rels: Mapping[str, Table], keys: Table) -> Table:
    """The witness rows of ``keys`` by one Generic Join of the keys and every atom over the
    rows they reach (every derivation of the keys, the head bound first), then per key the
    first row, in the order of the bound values, whose value is the key's ⊕: for rules of
    at most :data:`DIRECT_BOUND` bound variables, whose derivations of a few keys are few."""
    o = local_ops(S)
    tables = [Table(rule.head, keys.cols, o.ones(np.ones(keys.rows, dtype=np.int64)))]
    for a in rule.atoms:
        t = rels[a.relation]
        keep = np.ones(t.rows, dtype=bool)
        for p, c in a.consts:
            keep &= t.cols[p] == c
        first: dict[str, int] = {}
        for v, p in zip(a.vars, a.positions, strict=True):
            if v in first:  # a repeated variable: its columns agree
                keep &= t.cols[p] == t.cols[first[v]]
            else:
                first[v] = p
        pick = np.flatnonzero(keep)
        assert t.values is not None
        tables.append(
            Table(tuple(first), tuple(t.cols[p][pick] for p in first.values()), t.values[pick])
        )
    order = list(rule.head)
    while len(order) < len(rule.head) + len(rule.bound):  # the most constrained next
        rest = [v for v in rule.bound if v not in order]
        order.append(
            max(
                rest,
                key=lambda v: sum(1 for t in tables if v in t.vars and set(t.vars) & set(order)),
            )
        )
    allv = (*rule.head, *rule.bound)
    joined = generic_join(tables, order, allv, o)
    if not joined.rows:
        return no_rows(rule, rels)
    cols = [joined.col(v) for v in allv]
    perm = sort_rows(cols)
    starts = run_starts([c[perm] for c in cols[: len(rule.head)]])
    assert joined.values is not None
    values = joined.values[perm]
    best = np.repeat(o.reduceat(values, starts), np.diff(np.append(starts, len(values))))
    at = np.flatnonzero(equal(values, best))
    group = np.searchsorted(starts, at, side="right") - 1
    firsts = at[np.flatnonzero(np.diff(group, prepend=-1))]
    return Table(allv, tuple(c[perm[firsts]] for c in cols), values[firsts])


def no_rows(rule: Rule, rels: Mapping[str, Table]) -> Table:
    """No witness rows (columns typed as the relations' where they say)."""
    kinds: dict[str, np.ndarray] = {}
    for a in rule.atoms:
        t = rels[a.relation]
        for v, p in zip(a.vars, a.positions, strict=True):
            kinds.setdefault(v, t.cols[p][:0])
    cols = rule.head + rule.bound
    return Table(cols, tuple(kinds[v] for v in cols), None)


def marked(t: Table) -> Table:
    """Witness rows annotated 1 (present in the index)."""
    return Table(t.vars, t.cols, np.ones(t.rows, dtype=np.int64))


def index_of(found: Table) -> KeyedTable:
    """The witness index of ``found`` (head and bound columns)."""
    return KeyedTable.of(marked(found), _MARK)
