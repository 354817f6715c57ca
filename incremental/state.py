"""A view's state held in the driver: keyed relations, the output, and one tick's change.

:class:`LocalState` is immutable: :meth:`LocalState.apply` returns a new state
and the change of the output, or raises and leaves the old one as it was, so
a view commits a tick by replacing one reference.  The relations are
:class:`faq.kernel.keyed.KeyedTable` s, which answer the delta rule's lookups by
binary search and take a change by copying only a small table of overrides;
see :mod:`incremental.maintain` for how each kind of semiring is maintained.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import semirings
from faq import Factor, Query
from faq.kernel import Table, group_reduce
from faq.kernel.keyed import KeyedTable, changed_rows, match_keys
from faq.rule import Rule
from incremental import maintain, precision
from incremental.deltas import Rows
from incremental.sets import set_delta
from semirings import Semiring
from semirings.local import LocalOps, distinct, local_ops

__all__ = ["ANNOTATION", "LocalState"]

ANNOTATION = "__value__"
"""The key column that holds a row's annotation in a multiset (``general`` regime)."""

_INT64 = 2**63


@dataclass(frozen=True)
class LocalState:
    """Relations and output of a view, in the driver.

    Attributes
    ----------
    rule, semiring
        The view's query and semiring.
    keys : dict
        Key column names of each relation.
    rels : dict of str to KeyedTable
        Each relation's annotation per tuple, in :func:`maintain.stored_semiring`
        (counts for counting and boolean).
    rows : dict of str to KeyedTable
        ``general`` regime only: each relation's multiset of annotated rows, over
        its keys plus :data:`ANNOTATION`, with integer multiplicities.
    out : KeyedTable
        The output (derivation counts for boolean).
    comp : dict of str to KeyedTable
        ``real`` only (:mod:`incremental.precision`): ``lo-<relation>`` and ``out-lo``,
        the low parts of the compensated sums (only where not zero), and ``out-mag``,
        the magnitude of what flowed into each output key since it was last computed
        from the relations.
    """

    rule: Rule
    semiring: Semiring
    keys: dict[str, tuple[str, ...]]
    rels: dict[str, KeyedTable]
    rows: dict[str, KeyedTable]
    out: KeyedTable
    comp: dict[str, KeyedTable] = field(default_factory=dict)

    @property
    def regime(self) -> str:
        """How the semiring is maintained (see :func:`maintain.regime`)."""
        return maintain.regime(self.semiring)

    @property
    def stored(self) -> Semiring:
        """The semiring of the stored annotations."""
        return maintain.stored_semiring(self.semiring)

    @classmethod
    def empty(cls, rule: Rule, S: Semiring, keys: dict[str, tuple[str, ...]]) -> LocalState:
        """A view state with empty relations and output."""
        W = maintain.stored_semiring(S)
        o = local_ops(W)
        rels = {n: _empty_keyed(k, o) for n, k in keys.items()}
        rows = {}
        if maintain.regime(S) == "general":
            io = local_ops(semirings.INTEGER)
            ann = np.empty(0, dtype=local_ops(S).dtype)
            rows = {
                n: _empty_keyed((*k, ANNOTATION), io, (*_int_cols(k), ann)) for n, k in keys.items()
            }
        comp = {}
        if maintain.compensated(S):
            comp = {f"{p}-{n}": _empty_keyed(k, o) for n, k in keys.items() for p in ("lo", "abs")}
            comp |= {p: _empty_keyed(rule.head, o) for p in ("out-lo", "out-mag")}
        return cls(rule, S, dict(keys), rels, rows, _empty_keyed(rule.head, o), comp)

    # -- reading ------------------------------------------------------------------------------
    def result(self) -> Factor:
        """The output in the view's semiring."""
        return self._present(self.out, self.rule.name)

    def relation(self, name: str) -> Factor:
        """Relation ``name`` in the view's semiring."""
        return self._present(self.rels[name], name)

    def _present(self, kt: KeyedTable, name: str) -> Factor:
        if self.regime == "boolean":
            t = kt.table()
            return Factor.from_table(
                Table(t.vars, t.cols, np.ones(t.rows, dtype=bool)), self.semiring, name
            )
        return Factor.keyed(kt, self.semiring, name)

    def total_rows(self) -> int:
        """Rows of all relations."""
        return sum(r.rows for r in self.rels.values())

    # -- one tick -----------------------------------------------------------------------------
    def apply(
        self,
        deltas: Mapping[str, Rows],
        order: str | Sequence[str],
        join: str,
        local: bool = True,
        sets: Mapping[str, str] | None = None,
    ) -> tuple[LocalState, maintain.Change]:
        """The state after ``deltas``, and the change of the output (``local``: see
        :func:`faq.solve_delta`; ``sets``: the set relations and their modes, see
        :mod:`incremental.sets`).

        Raises
        ------
        ValueError
            A key type that differs from the relation's, a retraction of a row
            that is not there, or (counting, boolean) a negative multiplicity.
            ``self`` is unchanged.
        """
        state = self
        for name, d in deltas.items():
            state = state._typed(name, d)
        deltas = state._as_sets(deltas, sets)
        how = (order, join, local)
        if state.regime == "general":
            return state._apply_general(deltas, how)
        if state.comp:
            return state._apply_compensated(deltas, how)
        return state._apply_additive(deltas, how)

    def _as_sets(
        self, deltas: Mapping[str, Rows], sets: Mapping[str, str] | None
    ) -> dict[str, Rows]:
        """``deltas`` with those of set relations turned into the bag deltas they mean."""
        if not sets:
            return dict(deltas)
        out = dict(deltas)
        for name, mode in (sets or {}).items():
            if name in out:
                out[name] = set_delta(name, mode, out[name], self.rels[name], self.regime)
        return {n: d for n, d in out.items() if d.rows}

    def _typed(self, name: str, d: Rows) -> LocalState:
        """Check ``d``'s key types against the relation's; an empty relation takes them."""
        rel = self.rels[name]
        want = [_kind(c) for c in rel.base.cols]
        got = [_kind(c) for c in d.cols]
        if got == want or not d.rows:
            return self
        if rel.rows == 0 and rel.base.rows == 0:
            like = tuple(c[:0] for c in d.cols)
            rels = {**self.rels, name: _empty_keyed(rel.vars, rel.ops, like)}
            rows = dict(self.rows)
            if name in rows:
                ann = rows[name].base.cols[-1][:0]
                rows[name] = _empty_keyed(rows[name].vars, rows[name].ops, (*like, ann))
            comp = dict(self.comp)
            for part in (f"lo-{name}", f"abs-{name}"):
                if part in comp:
                    comp[part] = _empty_keyed(rel.vars, rel.ops, like)
            return replace(self, rels=rels, rows=rows, comp=comp)
        i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        raise ValueError(
            f"delta of relation {name!r}: key column at position {i} holds {_kind_name(got[i])} "
            f"values but relation {name!r} has {_kind_name(want[i])} keys"
        )

    # ring, counting, boolean: ⊕ of counts or annotations, then the delta rule
    def _apply_additive(
        self, deltas: Mapping[str, Rows], how: tuple[Any, str, bool]
    ) -> tuple[LocalState, maintain.Change]:
        W = self.stored
        o = local_ops(W)
        tables: dict[str, Table] = {}
        rels = dict(self.rels)
        for name, d in deltas.items():
            t = _annotation_delta(self, name, d, o)
            if not t.rows:
                continue
            new_rel, _, after = self.rels[name].plus(t)
            if self.regime in ("counting", "boolean"):
                _refuse_negative(name, after, self.semiring.name)
            tables[name], rels[name] = t, new_rel
        dq, terms, where = maintain.delta_rule(self.rule, W, self.rels, tables, *how)
        out, before, after = self.out.plus(dq)
        if self.regime != "boolean":
            change = _drop_zeros(dq, o)
        else:
            bo = local_ops(semirings.BOOLEAN)
            present = Table(before.vars, before.cols, np.ones(before.rows, dtype=bool))
            assert after.values is not None
            now = Table(after.vars, after.cols, after.values > 0)
            change, _ = changed_rows(present, now, bo)
        new = replace(self, rels=rels, out=out)
        return new, maintain.Change(change, out, terms, where)

    # real: compensated sums, and output keys that cancelled are recomputed (re-anchored)
    def _apply_compensated(
        self, deltas: Mapping[str, Rows], how: tuple[Any, str, bool]
    ) -> tuple[LocalState, maintain.Change]:
        S, head = self.semiring, self.rule.head
        o = local_ops(S)
        tables: dict[str, Table] = {}
        rels, comp = dict(self.rels), dict(self.comp)
        for name, d in deltas.items():
            keys, lo = self.keys[name], f"lo-{name}"
            cols, dh, dl = precision.delta_sums(d)
            if not len(dh):
                continue
            nh, nl = precision.add(
                precision.aligned(rels[name], cols, len(dh)),
                precision.aligned(comp[lo], cols, len(dh)),
                dh,
                dl,
            )
            precision.refuse_overflow(name, cols, nh)
            rels[name] = rels[name].replace(precision.keyed(keys, cols, nh))
            comp[lo] = comp[lo].replace(precision.keyed(keys, cols, nl))
            ab = f"abs-{name}"
            comp[ab] = comp[ab].replace(precision.keyed(keys, cols, np.abs(nh)))
            tables[name] = Table(keys, cols, dh)
        dq, terms, where = maintain.delta_rule(self.rule, S, self.rels, tables, *how)
        # the magnitude of the terms ΔQ added: the same delta rule over absolute values
        absolute = {n: self.comp[f"abs-{n}"] for n in self.rels}
        size = {n: Table(t.vars, t.cols, np.abs(t.values)) for n, t in tables.items()}
        mags = maintain.delta_rule(self.rule, S, absolute, size, *how)[0]
        new = replace(self, rels=rels, comp=comp)
        cols = precision.union_keys(dq, mags)
        n = len(cols[0]) if cols else int(bool(dq.rows or mags.rows))
        if not n:
            return new, maintain.Change(_drop_zeros(dq, o), self.out, terms, where)
        dqv = precision.aligned(KeyedTable.of(_drop_zeros(dq, o), o), cols, n)
        oh, ol = (precision.aligned(t, cols, n) for t in (self.out, comp["out-lo"]))
        nh, nl = precision.add(oh, ol, dqv, np.zeros(n))
        mag = precision.aligned(comp["out-mag"], cols, n)
        mag += precision.aligned(KeyedTable.of(mags, o), cols, n)
        change = dqv.copy()
        anchor = np.flatnonzero(precision.needs_anchor(nh, mag))
        if len(anchor):
            groups = Table(head, tuple(c[anchor] for c in cols), np.ones(len(anchor), bool))
            fresh, more, _ = maintain.recompute_groups(self.rule, S, rels, groups, *how)
            fv = _at_groups(fresh, groups, o).values
            assert fv is not None
            nh[anchor], nl[anchor], mag[anchor] = fv, 0.0, np.abs(fv)
            change[anchor] = precision.add(fv, np.zeros(len(fv)), -oh[anchor], -ol[anchor])[0]
            terms = (*terms, *(replace(t, purpose="re-anchor") for t in more))
        mag[nh == 0] = 0.0
        out = self.out.replace(precision.keyed(head, cols, nh))
        comp["out-lo"] = comp["out-lo"].replace(precision.keyed(head, cols, nl))
        comp["out-mag"] = comp["out-mag"].replace(precision.keyed(head, cols, mag))
        delta = _drop_zeros(Table(head, cols, change), o)
        return replace(new, out=out, comp=comp), maintain.Change(delta, out, terms, where)

    # every other semiring: multisets of annotated rows; ⊕ when only inserting, else the
    # affected output groups are recomputed
    def _apply_general(
        self, deltas: Mapping[str, Rows], how: tuple[Any, str, bool]
    ) -> tuple[LocalState, maintain.Change]:
        S = self.semiring
        o = local_ops(S)
        rels, rows = dict(self.rels), dict(self.rows)
        changed: dict[str, Table] = {}
        inserted: dict[str, Table] = {}
        retracting = False
        for name, d in deltas.items():
            keys = self.keys[name]
            ms = _row_counts(name, keys, d, o)
            if not ms.rows:
                continue
            with _multiplicities(name):
                new_rows, _, counts = self.rows[name].plus(ms)
            _refuse_missing(name, counts, S)
            key_cols = ms.cols[:-1]
            at = _distinct(key_cols)
            now = _annotations(new_rows, at, keys, o)
            old = self.rels[name].at(at)
            diff, _ = changed_rows(old, now, o)
            rows[name] = new_rows
            if not diff.rows:
                continue
            changed[name] = diff
            rels[name] = self.rels[name].replace(diff)
            assert ms.values is not None
            hit, _ = match_keys(key_cols, diff.cols)
            if (ms.values[hit] < 0).any():
                retracting = True
            pos = np.flatnonzero(hit & (ms.values > 0))
            ins = Table(keys, tuple(c[pos] for c in key_cols), ms.cols[-1][pos])
            inserted[name] = _repeat_reduce(ins, ms.values[pos], keys, o)
        new = replace(self, rels=rels, rows=rows)
        if not changed:
            empty = _empty_keyed(self.rule.head, o).base
            return new, maintain.Change(empty, self.out, (), "nothing to do")
        if not retracting:  # R' = R ⊕ inserted rows: the delta rule
            dq, terms, where = maintain.delta_rule(self.rule, S, self.rels, inserted, *how)
            out, before, after = self.out.plus(dq)
            change, _ = changed_rows(before, after, o)
            return replace(new, out=out), maintain.Change(change, out, terms, where)
        groups, terms = maintain.affected_groups(self.rule, self.rels, changed, *how)
        fresh, more, where = maintain.recompute_groups(self.rule, S, rels, groups, *how)
        now = _at_groups(fresh, groups, o)
        before = self.out.at(now.cols)
        change, _ = changed_rows(before, now, o)
        out = self.out.replace(change)
        report = (*(replace(t, purpose="affected groups") for t in terms), *more)
        return replace(new, out=out), maintain.Change(change, out, report, where)

    # -- initial contents and recompute -------------------------------------------------------
    def load(
        self,
        initial: Mapping[str, Rows],
        order: str | Sequence[str],
        join: str,
        sets: Mapping[str, str] | None = None,
    ) -> LocalState:
        """The state holding ``initial`` (on an empty state), its output by one batch solve
        (``sets``: as in :meth:`apply`)."""
        state = self
        for name, d in initial.items():
            state = state._typed(name, d)
        initial = state._as_sets(initial, sets)
        o = local_ops(state.stored)
        io = local_ops(semirings.INTEGER)
        rels, rows = dict(state.rels), dict(state.rows)
        for name, d in initial.items():
            keys = self.keys[name]
            if state.regime == "general":
                ms = _row_counts(name, keys, d, o)
                _refuse_missing(name, ms, self.semiring)
                rows[name] = KeyedTable.of(ms, io)
                assert ms.values is not None
                ann = Table(keys, ms.cols[:-1], ms.cols[-1])
                rels[name] = KeyedTable.of(_repeat_reduce(ann, ms.values, keys, o), o)
            elif state.comp:
                cols, dh, dl = precision.delta_sums(d)
                precision.refuse_overflow(name, cols, dh)
                rels[name] = KeyedTable.of(Table(keys, cols, dh), o)
                lo = np.flatnonzero(dl)
                comp = {
                    **state.comp,
                    f"lo-{name}": KeyedTable.of(Table(keys, tuple(c[lo] for c in cols), dl[lo]), o),
                    f"abs-{name}": KeyedTable.of(Table(keys, cols, np.abs(dh)), o),
                }
                state = replace(state, comp=comp)
            else:
                t = _annotation_delta(state, name, d, o)
                if state.regime in ("counting", "boolean"):
                    _refuse_negative(name, t, self.semiring.name)
                rels[name] = KeyedTable.of(t, o)
        state = replace(state, rels=rels, rows=rows)
        return replace(state, out=state.solve(order, join))._magnitudes().indexed()

    def _magnitudes(self) -> LocalState:
        """``real``: the output's magnitudes taken as its absolute values (after a solve)."""
        if not self.comp:
            return self
        t = self.out.table()
        assert t.values is not None
        mag = KeyedTable.of(Table(t.vars, t.cols, np.abs(t.values)), self.out.ops)
        return replace(self, comp={**self.comp, "out-mag": mag})

    def solve(self, order: str | Sequence[str], join: str) -> KeyedTable:
        """The output recomputed from the relations by a batch solve."""
        W = self.stored
        o = local_ops(W)
        if any(r.rows == 0 for r in self.rels.values()):
            return _empty_keyed(self.rule.head, o)
        q = Query(self.rule, W)
        try:
            out = q.solve(
                order=order, join=join, **{n: Factor.keyed(r, W, n) for n, r in self.rels.items()}
            )
        except OverflowError as exc:
            raise OverflowError(
                f"query {self.rule}: a {W.name!r} annotation overflowed 64-bit integers; use "
                "the 'real' semiring for an approximate answer"
            ) from exc
        kt = KeyedTable.of(_with_values(out.to_table(), o), o)
        kt.build_index()
        return kt

    def indexed(self) -> LocalState:
        """The same state with every column index built (so a first tick does not pay it)."""
        for r in (*self.rels.values(), *self.rows.values(), self.out, *self.comp.values()):
            r.build_index()
        return self

    @classmethod
    def restore(
        cls,
        rule: Rule,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        tables: Mapping[str, KeyedTable],
    ) -> LocalState:
        """A state from the keyed tables :meth:`parts` named (relations rebuilt from rows)."""
        state = cls.empty(rule, S, keys)
        o = local_ops(state.stored)
        out = tables["out"]
        if state.regime != "general":
            rels = {n: tables[f"rel-{n}"] for n in keys}
            comp = {p: tables.get(p, kt) for p, kt in state.comp.items()}
            for n, r in rels.items():  # derived, not written: the absolute annotations
                if f"abs-{n}" in comp:
                    t = r.table()
                    assert t.values is not None
                    comp[f"abs-{n}"] = KeyedTable.of(Table(t.vars, t.cols, np.abs(t.values)), r.ops)
            state = replace(state, rels=rels, out=out, comp=comp)
            return (state if "out-mag" in tables else state._magnitudes()).indexed()
        rows = {n: tables[f"rows-{n}"] for n in keys}
        rels = {}
        for n, ms in rows.items():
            t = ms.table()
            assert t.values is not None
            ann = _repeat_reduce(Table(keys[n], t.cols[:-1], t.cols[-1]), t.values, keys[n], o)
            rels[n] = KeyedTable.of(ann, o)
        return replace(state, rels=rels, rows=rows, out=out).indexed()

    def parts(self) -> dict[str, KeyedTable]:
        """The keyed tables a durable view writes (relations or multisets, and the output)."""
        if self.regime == "general":
            named = {f"rows-{n}": r for n, r in self.rows.items()}
        else:
            named = {f"rel-{n}": r for n, r in self.rels.items()}
        comp = {p: kt for p, kt in self.comp.items() if not p.startswith("abs-")}
        return {**named, "out": self.out, **comp}


# -- helpers --------------------------------------------------------------------------------------
def _empty_keyed(
    vars_: tuple[str, ...], ops: LocalOps, like: Sequence[np.ndarray] | None = None
) -> KeyedTable:
    cols = tuple(c[:0] for c in like) if like is not None else _int_cols(vars_)
    return KeyedTable.of(Table(vars_, cols, np.empty(0, dtype=ops.dtype)), ops)


def _int_cols(vars_: Sequence[str]) -> tuple[np.ndarray, ...]:
    return tuple(np.empty(0, np.int64) for _ in vars_)


def _kind(c: np.ndarray) -> str:
    return "int" if c.dtype.kind in "iu" else ("float" if c.dtype.kind == "f" else "str")


def _kind_name(kind: str) -> str:
    return {"int": "integer", "float": "floating-point", "str": "string"}[kind]


def _ones(o: LocalOps, n: int) -> np.ndarray:
    return o.ones(np.ones(n, dtype=np.int64))


def _with_values(t: Table, o: LocalOps) -> Table:
    return t if t.values is not None else Table(t.vars, t.cols, _ones(o, t.rows))


def _drop_zeros(t: Table, o: LocalOps) -> Table:
    if t.values is None or not t.rows:
        return t
    return t.take(np.flatnonzero(o.nonzero(t.values)))


def _annotation_delta(state: LocalState, name: str, d: Rows, o: LocalOps) -> Table:
    """A delta's change of each tuple's stored annotation: ``weight · value`` (ring), the
    weight (counting with value one, boolean), consolidated."""
    keys = state.keys[name]
    w = d.weights
    if d.values is None or state.regime == "boolean":
        values = w.astype(o.dtype)
    elif state.regime in ("ring", "counting") and o.dtype == np.int64:
        v = d.values.astype(np.int64)
        big = np.abs(v.astype(np.float64)) * np.abs(w.astype(np.float64)) >= _INT64
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise OverflowError(
                f"delta of relation {name!r}: weight {int(w[i])} times value {int(v[i])} "
                "overflows 64-bit integers"
            )
        values = v * w
    else:
        values = (
            d.values * w.astype(d.values.dtype)
            if d.values.dtype != object
            else np.asarray([x * int(k) for x, k in zip(d.values, w, strict=True)], dtype=object)
        )
    return group_reduce(Table(keys, d.cols, values, unique=False), keys, o)


def _row_counts(name: str, keys: tuple[str, ...], d: Rows, o: LocalOps) -> Table:
    """``d`` as a multiset delta: each distinct annotated row with its summed weight."""
    values = d.values if d.values is not None else _ones(o, d.rows)
    ms = Table((*keys, ANNOTATION), (*d.cols, values), d.weights, unique=False)
    with _multiplicities(name):
        return group_reduce(ms, ms.vars, local_ops(semirings.INTEGER))


@contextmanager
def _multiplicities(name: str) -> Iterator[None]:
    """Turn an int64 overflow of row multiplicities into a message naming the relation."""
    try:
        yield
    except OverflowError as exc:
        raise OverflowError(
            f"relation {name!r}: a row's multiplicity would leave the 64-bit integers "
            "(|count| > 2**63 - 1); the view is unchanged"
        ) from exc


def _refuse_negative(name: str, after: Table, semiring: str) -> None:
    assert after.values is not None
    neg = np.flatnonzero(after.values < 0)
    if len(neg):
        i = int(neg[0])
        key = tuple(_py(c[i]) for c in after.cols)
        raise ValueError(
            f"refused: relation {name!r} would hold {len(neg)} key(s) with a negative "
            f"multiplicity, e.g. {key!r} -> {int(after.values[i])} (a {semiring!r} view can "
            "only retract rows it holds); the view is unchanged"
        )


def _refuse_missing(name: str, counts: Table, S: Semiring) -> None:
    assert counts.values is not None
    neg = np.flatnonzero(counts.values < 0)
    if len(neg):
        i = int(neg[0])
        key = tuple(_py(c[i]) for c in counts.cols[:-1])
        raise ValueError(
            f"refused: the delta of relation {name!r} retracts {len(neg)} annotated row(s) "
            f"the relation does not hold, e.g. key {key!r} with value "
            f"{_py(counts.cols[-1][i])!r} (in a {S.name!r} view a retraction names a row "
            "that was inserted, with its value); the view is unchanged"
        )


def _distinct(cols: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    from semirings.local import group_starts

    if not cols:
        return ()
    perm, starts = group_starts(list(cols))
    return tuple(c[perm[starts]] for c in cols)


def _repeat_reduce(t: Table, counts: np.ndarray, keys: tuple[str, ...], o: LocalOps) -> Table:
    """Per key, the ⊕ of ``t``'s values each taken its count of times (rows with count > 0).

    ``t.values`` hold the annotations here.  The ⊕ of ``w`` copies of ``x`` is computed in
    closed form as ``x ⊗ (1 ⊕ … ⊕ 1)`` (distributivity): ``w · x`` in the additive
    built-ins, ``x`` for an idempotent ⊕, ``x + ln w`` in ``log``, and for a user semiring
    the ⊕ of ``w`` ones by repeated doubling (``log2 w`` additions), so a row of weight
    ``2**62`` costs what a row of weight one does.
    """
    assert t.values is not None
    keep = np.flatnonzero(counts > 0)
    values, cols, n = t.values[keep], tuple(c[keep] for c in t.cols), counts[keep]
    if values.dtype != o.dtype and o.dtype is not object:
        values = values.astype(o.dtype)
    many = np.flatnonzero(n > 1)
    if len(many):
        values = values.copy()
        values[many] = o.mul(values[many], o.ones(n[many]))
    return group_reduce(Table(keys, cols, values, unique=False), keys, o)


def _annotations(
    rows: KeyedTable, at: tuple[np.ndarray, ...], keys: tuple[str, ...], o: LocalOps
) -> Table:
    """The annotation of each key of ``at`` from the multiset ``rows`` (zero when none)."""
    if keys:
        found = rows.lookup([{k: distinct(c) for k, c in enumerate(at)}])
        hit, _ = match_keys(found.cols[:-1], at)
        found = found.take(np.flatnonzero(hit))
    else:
        found = rows.table()
    assert found.values is not None
    ann = _repeat_reduce(Table(keys, found.cols[:-1], found.cols[-1]), found.values, keys, o)
    return _at_groups(ann, Table(keys, at, None), o)


def _at_groups(t: Table, groups: Table, o: LocalOps) -> Table:
    """``t``'s annotations at every key of ``groups`` (zero where ``t`` has none)."""
    zero = np.asarray([o.semiring.zero], dtype=o.dtype)
    n = groups.rows if groups.vars else (1 if groups.rows or t.rows else 0)
    values = np.repeat(zero, n)
    if not groups.vars:
        if t.rows and t.values is not None:
            values[:] = t.values[:1]
        return Table((), (), values)
    found, at = match_keys(groups.cols, t.cols)
    if found.any():
        assert t.values is not None
        values[found] = t.values[at[found]]
    return Table(t.vars, groups.cols, values)


def _py(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x
