"""How a view's output changes at a tick, for every kind of semiring.

Three regimes, chosen by the view's semiring (:func:`regime`):

* ``"ring"`` (``integer``, ``real``) and ``"counting"``: the annotation of a
  tuple changes by ``weight · value``; the delta rule gives ΔQ
  (:func:`faq.solve_delta`) and the output is ``Q ⊕ ΔQ``.  Counting is
  kept in ℤ and refuses a negative multiplicity.
* ``"boolean"``: each relation keeps, per tuple, its number of present rows
  (in ℤ), and the output keeps its *derivation count*: the same query in
  ``integer`` over those counts.  A key is in the boolean output while its
  count is positive, so deletions are exact and incremental.
* ``"general"`` (``max-product``, ``min-plus``, ``max-plus``, ``log``, user
  semirings): a relation is a multiset of annotated rows; a tuple's annotation
  is the ⊕ of its rows.  A tick that only inserts rows is a ⊕ into the
  relations, so the delta rule applies.  A tick that retracts a row (lowering
  or removing a tuple's annotation) has no ⊕-delta; the view then finds the
  output groups some derivation of a changed tuple reaches (a ``boolean``
  delta query over the relations' supports) and recomputes only those groups
  over the new relations (a delta query with the groups as its changed
  relation), as Feldera, Flink's MaxWithRetract and Snowflake's dynamic tables
  do.  A query with an empty head has one group: such a tick recomputes the
  whole query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import semirings
from faq import Factor, Query, solve_delta
from faq.kernel import Table
from faq.kernel.keyed import KeyedTable
from faq.rule import Atom, Rule
from semirings import Semiring
from semirings.local import local_ops

__all__ = ["Change", "GROUPS", "compensated", "regime", "stored_semiring"]

GROUPS = "__groups__"
"""The relation name of the affected groups in a restricted recompute."""


def regime(S: Semiring) -> str:
    """``"ring"``, ``"counting"``, ``"boolean"`` or ``"general"`` (see the module docstring)."""
    if S is semirings.COUNTING:
        return "counting"
    if S is semirings.BOOLEAN:
        return "boolean"
    return "ring" if S.is_ring else "general"


def compensated(S: Semiring) -> bool:
    """True for a ring of floats (``real``): sums are kept compensated (see precision.py)."""
    return regime(S) == "ring" and local_ops(S).dtype == np.float64


def stored_semiring(S: Semiring) -> Semiring:
    """The semiring of the annotations a view stores: ℤ for counting and boolean (counts)."""
    return semirings.INTEGER if regime(S) in ("counting", "boolean") else S


@dataclass(frozen=True)
class Change:
    """What a tick did to the output.

    ``table`` is what :meth:`IncrementalView.step` returns (ΔQ for rings and
    counting; otherwise the new annotation of every changed output key, zero
    where a key is gone), ``out`` the new output, ``terms`` the delta queries'
    reports and ``where`` where they ran.
    """

    table: Table
    out: KeyedTable
    terms: tuple[dict[str, Any], ...]
    where: str


# -- the delta rule over keyed relations ------------------------------------------------------
def delta_rule(
    rule: Rule,
    S: Semiring,
    rels: Mapping[str, KeyedTable],
    deltas: Mapping[str, Table],
    order: str | Sequence[str],
    join: str,
    local: bool = True,
) -> tuple[Table, tuple[dict[str, Any], ...], str]:
    """ΔQ over ``S`` when ``deltas`` are ⊕-ed into ``rels`` (the delta rule)."""
    q = Query(rule, S)
    relations = {n: Factor.keyed(r, S, n) for n, r in rels.items()}
    changes = {n: Factor.from_table(d, S, n) for n, d in deltas.items() if d.rows}
    if not changes:
        return _empty(rule.head, rels, S), (), "nothing to do"
    try:
        res = solve_delta(q, relations, changes, order=order, join=join, local=local)
    except OverflowError as exc:
        raise OverflowError(
            f"query {rule}: a {S.name!r} annotation overflowed 64-bit integers in a delta "
            "term; use the 'real' semiring for an approximate answer"
        ) from exc
    return res.change.to_table(), res.terms, res.where


def affected_groups(
    rule: Rule,
    rels: Mapping[str, KeyedTable],
    changed: Mapping[str, Table],
    order: str | Sequence[str],
    join: str,
    local: bool = True,
) -> tuple[Table, tuple[dict[str, Any], ...]]:
    """The output keys some derivation through a changed tuple reaches (old or new state).

    A ``boolean`` delta query over the supports of the relations before the
    change, with the changed tuples as the change: its terms read the old
    relations and their union with the changed tuples, which hold every
    derivation of the old and of the new state that uses a changed tuple.
    """
    B = semirings.BOOLEAN
    bo = local_ops(B)
    support = {n: _support(r, bo) for n, r in rels.items()}
    marks = {
        n: Table(t.vars, t.cols, np.ones(t.rows, dtype=bool)) for n, t in changed.items() if t.rows
    }
    table, terms, _ = delta_rule(rule, B, support, marks, order, join, local)
    return table, terms


def recompute_groups(
    rule: Rule,
    S: Semiring,
    rels: Mapping[str, KeyedTable],
    groups: Table,
    order: str | Sequence[str],
    join: str,
    local: bool = True,
) -> tuple[Table, tuple[dict[str, Any], ...], str]:
    """The output of ``rule`` over ``S`` restricted to the keys of ``groups``.

    With a head, a delta query whose changed relation is the groups (an extra
    atom over the head variables, empty before): it reads only the rows the
    groups reach.  With an empty head, the whole query.
    """
    o = local_ops(S)
    if not rule.head:
        q = Query(rule, S)
        out = q.solve(order=order, join=join, **{n: Factor.keyed(r, S, n) for n, r in rels.items()})
        return out.to_table(), (), "driver"
    taken = set(rule.relations)
    name = GROUPS
    while name in taken:
        name = f"_{name}"
    restricted = Rule(rule.name, rule.head, (Atom(name, rule.head), *rule.atoms))
    g = Table(rule.head, groups.cols, o.ones(np.ones(groups.rows, dtype=np.int64)))
    empty = KeyedTable.of(Table(rule.head, tuple(c[:0] for c in groups.cols), g.values[:0]), o)
    return delta_rule(restricted, S, {**rels, name: empty}, {name: g}, order, join, local)


def _support(r: KeyedTable, bo: Any) -> KeyedTable:
    """``r`` with every present key annotated ``True`` (same index)."""
    base = Table(r.vars, r.base.cols, np.ones(r.base.rows, dtype=bool))
    assert r.over.values is not None
    over = Table(r.vars, r.over.cols, r.ops.nonzero(r.over.values))
    return KeyedTable(base, over, bo, r.rows, r._index)


def _empty(head: tuple[str, ...], rels: Mapping[str, KeyedTable], S: Semiring) -> Table:
    o = local_ops(S)
    return Table(head, tuple(np.empty(0, np.int64) for _ in head), np.empty(0, dtype=o.dtype))
