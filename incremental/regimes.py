"""How a view's output changes at a tick, for every kind of semiring: one module for both states.

Three regimes, chosen by what the view's semiring declares (:func:`regime`):

* ``"ring"`` (a semiring with ⊕-inverses: ``integer``, ``real``) and
  ``"counting"`` (one that declares the ring it embeds in, its ``completion``:
  ``counting`` in ℤ): the annotation of a tuple changes by ``weight · value``; the
  delta rule gives ΔQ (:func:`faq.solve_delta`) and the output is
  ``Q ⊕ ΔQ``.  Counting is kept in its completion and refuses a
  negative multiplicity.  A ring of floats (``real``) keeps compensated sums
  and re-anchors keys that cancelled (:mod:`incremental.precision`).
* ``"boolean"`` (a semiring that declares ``presence``: ``boolean``): each
  relation keeps, per tuple, its number of present rows
  (in ℤ), and the output keeps its *derivation count*: the same query in
  ``integer`` over those counts.  A key is in the boolean output while its
  count is positive, so deletions are exact and incremental.
* ``"general"`` (every other semiring: ``max-product``, ``min-plus``,
  ``max-plus``, ``log``, user semirings): a relation is a multiset of
  annotated rows; a tuple's annotation is the ⊕ of its rows.  A tick that only
  inserts rows is a ⊕ into the relations, so the delta rule applies.  A tick
  that retracts a row has no ⊕-delta; the view then finds the output groups
  some derivation of a changed tuple reaches (a ``boolean`` delta query over
  the relations' supports) and recomputes only those groups over the new
  relations (a delta query with the groups as its changed relation), as
  Feldera, Flink's MaxWithRetract and Snowflake's dynamic tables do.  A query
  with an empty head has one group: such a tick recomputes the whole query.

:meth:`Maintained.apply` runs a tick over relations of any :class:`incremental.protocol.Keyed`
kind: keyed tables in the driver (:mod:`incremental.driver_state`) or
DataFrames in Spark (:mod:`incremental.spark_state`).  What it computes in
numpy is the rows the tick touches, so both states return the same changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import semirings
from faq import Factor, Rule
from faq.kernel import KeyedTable, Table, changed_rows, match_keys
from incremental import precision
from incremental.deltas import Rows
from incremental.manifest import (
    OUTPUT,
    OUTPUT_LOW,
    OUTPUT_MAGNITUDE,
    abs_part,
    low_part,
    relation_part,
    rows_part,
)
from incremental.protocol import Change, How, Keyed
from incremental.sets import set_delta
from incremental.tables import (
    ANNOTATION,
    annotation_delta,
    at_groups,
    distinct_keys,
    drop_zeros,
    empty_table,
    kind,
    kind_name,
    multiplicities,
    present,
    refuse_missing,
    refuse_negative,
    repeat_reduce,
    row_counts,
)
from incremental.terms import affected_groups, delta_rule, recompute_groups
from semirings import Semiring
from semirings.local import LocalOps, local_ops

__all__ = [
    "Maintained",
    "Sizes",
    "compensated",
    "multiset",
    "regime",
    "step_semiring",
    "stored_semiring",
]


# -- the decisions: by the semiring's declared properties -------------------------------------
def regime(S: Semiring) -> str:
    """``"ring"``, ``"counting"``, ``"boolean"`` or ``"general"`` (see the module docstring),
    read from what ``S`` declares.

    ``"ring"``: ``S`` declares ⊕-inverses (``neg``).  ``"counting"``: ``S`` declares the
    ring it embeds in (``completion``; ℕ in ℤ), and a view keeps the annotations there as
    signed counts.  ``"boolean"``: ``S`` declares ``presence`` (values only say present or
    absent), and a view keeps counts of rows.  ``"general"``: anything else.

    Raises
    ------
    ValueError
        ``S`` declares a completion whose values are not 64-bit integers, or presence
        with values other than False and True: a view keeps neither (declare nothing,
        and the view keeps ``S``'s rows in the general way).
    """
    # decided once per semiring object and kept with it (a tick reads it several times)
    return S.derived("view-regime", _regime)


def _regime(S: Semiring) -> str:
    if S.completion is not None:
        if local_ops(S.completion).dtype != np.int64:
            raise ValueError(
                f"semiring {S.name!r}: a view keeps a declared completion only when it holds "
                f"64-bit integers (counts, as counting in integer); {S.completion.name!r} "
                "does not: drop completion= and the view keeps the rows in the general way"
            )
        return "counting"
    if S.presence:
        if S.zero is not False or S.one is not True:
            raise ValueError(
                f"semiring {S.name!r}: a view keeps presence (counts of rows) only for the "
                f"values False and True, not {S.zero!r} and {S.one!r}: drop presence= and "
                "the view keeps the rows in the general way"
            )
        return "boolean"
    return "ring" if S.is_ring else "general"


def compensated(S: Semiring) -> bool:
    """True for a ring of floats (``real``): sums are kept compensated (see precision.py)."""
    return regime(S) == "ring" and local_ops(S).dtype == np.float64


def multiset(S: Semiring) -> bool:
    """True when relations are kept as multisets of annotated rows (``general``)."""
    return regime(S) == "general"


def stored_semiring(S: Semiring) -> Semiring:
    """The semiring of the annotations a view stores: the completion (ℤ for counting),
    ℤ for presence (counts of rows), ``S`` otherwise."""
    kind = regime(S)
    if kind == "counting":
        assert S.completion is not None
        return S.completion
    return semirings.INTEGER if kind == "boolean" else S


def step_semiring(S: Semiring) -> Semiring:
    """The semiring of what ``step()`` returns (and deltas are read in): the completion
    for counting (its changes are signed), ``S`` otherwise."""
    if regime(S) == "counting":
        assert S.completion is not None
        return S.completion
    return S


# -- what a state holds -----------------------------------------------------------------------
class Sizes:
    """What both view states report of their :class:`Maintained` (``self.m``): row counts
    and the parts a durable view writes."""

    m: Maintained

    def total_rows(self) -> int:
        """Rows of all relations."""
        return sum(r.rows for r in self.m.rels.values())

    def output_rows(self) -> int:
        """Rows of the output."""
        return self.m.out.rows

    def parts(self) -> dict[str, Any]:
        """The relations a durable view writes."""
        return self.m.parts()


@dataclass(frozen=True)
class Maintained:
    """Relations and output of a view, of any :class:`incremental.protocol.Keyed` kind; immutable.

    Attributes
    ----------
    rule, semiring
        The view's query and semiring.
    keys : dict
        Key column names of each relation.
    rels : dict of str to Keyed
        Each relation's annotation per tuple, in :func:`stored_semiring`.
    rows : dict of str to Keyed
        ``general`` regime only: each relation's multiset of annotated rows, over
        its keys plus :data:`incremental.tables.ANNOTATION`, with integer counts.
    out : Keyed
        The output (derivation counts for boolean).
    comp : dict of str to Keyed
        ``real`` only (:mod:`incremental.precision`): ``lo-<relation>`` and ``out-lo``,
        the low parts of the compensated sums, ``abs-<relation>`` the absolute
        annotations, and ``out-mag``, the magnitude of what flowed into each output key
        since it was last computed from the relations.
    """

    rule: Rule
    semiring: Semiring
    keys: dict[str, tuple[str, ...]]
    rels: dict[str, Keyed]
    rows: dict[str, Keyed]
    out: Keyed
    comp: dict[str, Keyed] = field(default_factory=dict)

    @property
    def regime(self) -> str:
        """How the semiring is maintained (see :func:`regime`)."""
        return regime(self.semiring)

    @property
    def stored(self) -> Semiring:
        """The semiring of the stored annotations."""
        return stored_semiring(self.semiring)

    def shown(self, kt: Keyed, name: str) -> Factor:
        """A stored relation (or the output) in the view's semiring."""
        if self.regime == "boolean":
            return kt.indicator(self.semiring, name)
        return kt.factor(self.semiring, name)

    def parts(self) -> dict[str, Keyed]:
        """The relations a durable view writes (relations or multisets, output, low parts)."""
        if self.regime == "general":
            named = {rows_part(n): r for n, r in self.rows.items()}
        else:
            named = {relation_part(n): r for n, r in self.rels.items()}
        derived = {abs_part(n) for n in self.rels}  # not written: read from the relations
        comp = {p: kt for p, kt in self.comp.items() if p not in derived}
        return {**named, OUTPUT: self.out, **comp}

    def journaled(self) -> Maintained:
        """The same state, each relation recording what it is changed by from now on (the
        tables a durable view's journal frame holds, see :mod:`incremental.journal`)."""

        def each(d: dict[str, Keyed]) -> dict[str, Keyed]:
            return {n: r.journaled() for n, r in d.items()}

        return replace(
            self,
            rels=each(self.rels),
            rows=each(self.rows),
            out=self.out.journaled(),
            comp=each(self.comp),
        )

    # -- one tick -----------------------------------------------------------------------------
    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None = None
    ) -> tuple[Maintained, Change]:
        """The state after ``deltas``, and the change of the output (``how``: order, join
        and ``local`` of the delta queries; ``sets``: the set relations and their modes,
        see :mod:`incremental.sets`).

        Raises
        ------
        ValueError
            A key type that differs from the relation's, a retraction of a row
            that is not there, or (counting, boolean) a negative multiplicity.
            ``self`` is unchanged.
        """
        state = self.typed(deltas)
        deltas = state.as_sets(deltas, sets)
        if state.regime == "general":
            return state._apply_general(deltas, how)
        if state.comp:
            return state._apply_compensated(deltas, how)
        return state._apply_additive(deltas, how)

    def as_sets(
        self, deltas: Mapping[str, Rows], sets: Mapping[str, str] | None
    ) -> dict[str, Rows]:
        """``deltas`` with those of set relations turned into the bag deltas they mean."""
        out = dict(deltas)
        for name, mode in (sets or {}).items():
            if name in out:
                out[name] = set_delta(name, mode, out[name], self.rels[name], self.regime)
        return {n: d for n, d in out.items() if d.rows}

    def typed(self, deltas: Mapping[str, Rows]) -> Maintained:
        """Check the deltas' key types against the relations'; an empty relation takes them."""
        state = self
        for name, d in deltas.items():
            rel = state.rels[name]
            want, got = rel.kinds(), [kind(c) for c in d.cols]
            if got == want or not d.rows:
                continue
            if rel.fresh:  # empty since it was made: the first delta chooses its key types
                rels = {**state.rels, name: rel.emptied(d.cols)}
                rows = dict(state.rows)
                if name in rows:
                    ann = (d.values if d.values is not None else np.empty(0, np.int64))[:0]
                    rows[name] = rows[name].emptied((*d.cols, ann))
                comp = dict(state.comp)
                for part in (low_part(name), abs_part(name)):
                    if part in comp:
                        comp[part] = comp[part].emptied(d.cols)
                state = replace(state, rels=rels, rows=rows, comp=comp)
                continue
            i = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
            raise ValueError(
                f"delta of relation {name!r}: key column at position {i} holds "
                f"{kind_name(got[i])} values but relation {name!r} has {kind_name(want[i])} keys"
            )
        return state

    # ring, counting, boolean: ⊕ of counts or annotations, then the delta rule
    def _apply_additive(self, deltas: Mapping[str, Rows], how: How) -> tuple[Maintained, Change]:
        W = self.stored
        o = local_ops(W)
        tables: dict[str, Table] = {}
        rels = dict(self.rels)
        for name, d in deltas.items():
            t = annotation_delta(self.regime, name, self.keys[name], d, o)
            if not t.rows:
                continue
            new_rel, _, after = self.rels[name].plus(t)
            if self.regime in ("counting", "boolean"):
                refuse_negative(name, after, self.semiring.name)
            tables[name], rels[name] = t, new_rel
        dq, terms, where = delta_rule(self.rule, W, self.rels, tables, how)
        out, before, after = self.out.plus(dq)
        if self.regime != "boolean":
            change = drop_zeros(dq, o)
        else:
            bo = local_ops(semirings.BOOLEAN)
            shown = Table(before.vars, before.cols, np.ones(before.rows, dtype=bool))
            assert after.values is not None
            now = Table(after.vars, after.cols, after.values > 0)
            change, _ = changed_rows(shown, now, bo)
        return replace(self, rels=rels, out=out), Change(change, terms, where)

    # real: compensated sums, and output keys that cancelled are recomputed (re-anchored)
    def _apply_compensated(self, deltas: Mapping[str, Rows], how: How) -> tuple[Maintained, Change]:
        S, head = self.semiring, self.rule.head
        o = local_ops(S)
        tables: dict[str, Table] = {}
        rels, comp = dict(self.rels), dict(self.comp)
        for name, d in deltas.items():
            keys, lo, ab = self.keys[name], low_part(name), abs_part(name)
            cols, dh, dl = precision.delta_sums(d)
            if not len(dh):
                continue
            oh = precision.aligned(rels[name], cols, len(dh))
            ol = precision.aligned(comp[lo], cols, len(dh))
            nh, nl = precision.add(oh, ol, dh, dl)
            precision.refuse_overflow(name, cols, nh)
            rels[name] = rels[name].replace(
                precision.keyed(keys, cols, nh), present(keys, cols, oh)
            )
            comp[lo] = comp[lo].replace(precision.keyed(keys, cols, nl), present(keys, cols, ol))
            comp[ab] = comp[ab].replace(
                precision.keyed(keys, cols, np.abs(nh)), present(keys, cols, np.abs(oh))
            )
            tables[name] = Table(keys, cols, dh)
        dq, terms, where = delta_rule(self.rule, S, self.rels, tables, how)
        # the magnitude of the terms ΔQ added: the same delta rule over absolute values
        absolute = {n: self.comp[abs_part(n)] for n in self.rels}
        size = {n: Table(t.vars, t.cols, np.abs(t.values)) for n, t in tables.items()}
        mags = delta_rule(self.rule, S, absolute, size, how).table
        new = replace(self, rels=rels, comp=comp)
        cols = precision.union_keys(dq, mags)
        n = len(cols[0]) if cols else int(bool(dq.rows or mags.rows))
        if not n:
            return new, Change(drop_zeros(dq, o), terms, where)
        dqv = precision.aligned(KeyedTable.of(drop_zeros(dq, o), o), cols, n)
        oh, ol = (precision.aligned(t, cols, n) for t in (self.out, comp[OUTPUT_LOW]))
        nh, nl = precision.add(oh, ol, dqv, np.zeros(n))
        mag0 = precision.aligned(comp[OUTPUT_MAGNITUDE], cols, n)
        mag = mag0 + precision.aligned(KeyedTable.of(mags, o), cols, n)
        change = dqv.copy()
        anchor = np.flatnonzero(precision.needs_anchor(nh, mag))
        if len(anchor):
            groups = Table(head, tuple(c[anchor] for c in cols), np.ones(len(anchor), bool))
            fresh, more, _ = recompute_groups(self.rule, S, rels, groups, how)
            fv = at_groups(fresh, groups, o).values
            assert fv is not None
            nh[anchor], nl[anchor], mag[anchor] = fv, 0.0, np.abs(fv)
            change[anchor] = precision.add(fv, np.zeros(len(fv)), -oh[anchor], -ol[anchor])[0]
            terms = (*terms, *(replace(t, purpose="re-anchor") for t in more))
        mag[nh == 0] = 0.0
        out = self.out.replace(precision.keyed(head, cols, nh), present(head, cols, oh))
        comp[OUTPUT_LOW] = comp[OUTPUT_LOW].replace(
            precision.keyed(head, cols, nl), present(head, cols, ol)
        )
        comp[OUTPUT_MAGNITUDE] = comp[OUTPUT_MAGNITUDE].replace(
            precision.keyed(head, cols, mag), present(head, cols, mag0)
        )
        delta = drop_zeros(Table(head, cols, change), o)
        return replace(new, out=out, comp=comp), Change(delta, terms, where)

    # every other semiring: multisets of annotated rows; ⊕ when only inserting, else the
    # affected output groups are recomputed
    def _apply_general(self, deltas: Mapping[str, Rows], how: How) -> tuple[Maintained, Change]:
        S = self.semiring
        o = local_ops(S)
        rels, rows = dict(self.rels), dict(self.rows)
        changed: dict[str, Table] = {}
        inserted: dict[str, Table] = {}
        retracting = False
        for name, d in deltas.items():
            keys = self.keys[name]
            ms = row_counts(name, keys, d, o)
            if not ms.rows:
                continue
            with multiplicities(name):
                new_rows, _, counts = self.rows[name].plus(ms)
            refuse_missing(name, counts, S)
            key_cols = ms.cols[:-1]
            at = distinct_keys(key_cols)
            now = annotations(new_rows, at, keys, o)
            old = self.rels[name].at(at)
            diff, _ = changed_rows(old, now, o)
            rows[name] = new_rows
            if not diff.rows:
                continue
            changed[name] = diff
            rels[name] = self.rels[name].replace(diff, old)
            assert ms.values is not None
            if key_cols:
                hit, _ = match_keys(key_cols, diff.cols)
            else:  # a relation without keys: its one key changed
                hit = np.ones(len(ms.values), dtype=bool)
            if (ms.values[hit] < 0).any():
                retracting = True
            pos = np.flatnonzero(hit & (ms.values > 0))
            ins = Table(keys, tuple(c[pos] for c in key_cols), ms.cols[-1][pos])
            inserted[name] = repeat_reduce(ins, ms.values[pos], keys, o)
        new = replace(self, rels=rels, rows=rows)
        if not changed:
            return new, Change(empty_table(self.rule.head, o), (), "nothing to do")
        if not retracting:  # R' = R ⊕ inserted rows: the delta rule
            dq, terms, where = delta_rule(self.rule, S, self.rels, inserted, how)
            out, before, after = self.out.plus(dq)
            change, _ = changed_rows(before, after, o)
            return replace(new, out=out), Change(change, terms, where)
        groups, terms = affected_groups(self.rule, self.rels, changed, how)
        fresh, more, where = recompute_groups(self.rule, S, rels, groups, how)
        now = at_groups(fresh, groups, o)
        before = self.out.at(now.cols)
        change, _ = changed_rows(before, now, o)
        out = self.out.replace(change, before)
        report = (*(replace(t, purpose="affected groups") for t in terms), *more)
        return replace(new, out=out), Change(change, report, where)


def annotations(
    rows: Keyed, at: tuple[np.ndarray, ...], keys: tuple[str, ...], o: LocalOps
) -> Table:
    """The annotation of each key of ``at`` from the multiset ``rows`` (zero when none)."""
    found = rows.matching(at)
    assert found.values is not None
    ann = repeat_reduce(Table(keys, found.cols[:-1], found.cols[-1]), found.values, keys, o)
    return at_groups(ann, Table(keys, at, None), o)


def row_annotations(ms: Table, keys: tuple[str, ...], o: LocalOps) -> Table:
    """A whole multiset (keys plus :data:`ANNOTATION`, counts) as one annotation per key."""
    assert ms.values is not None and ms.vars[-1] == ANNOTATION
    return repeat_reduce(Table(keys, ms.cols[:-1], ms.cols[-1]), ms.values, keys, o)
