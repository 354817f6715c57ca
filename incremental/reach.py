"""The rows of a Spark-resident view that one tick reads, fetched in a Spark job per hop.

A tick of the additive regimes (rings, counting, boolean) reads its relations
in two ways: each changed relation at the keys of its delta (to ⊕ the delta in),
and every relation through the terms of the delta rule.  A term of the delta
rule joins one changed atom's delta with the other atoms; it reads only rows
that join with the delta.  :func:`gather` fetches them hop by hop: the atoms
sharing a variable with the changed one are read at the delta's values of it
(round 1, one Spark job); the values their rows hold name the rows of the
atoms one hop further (round 2, one more job); and so on until every atom of
every term is read.  A triangle, a clique or a star takes one round; a path of
three atoms from its end, two.  Which atom is read at which round, and through which
column, is planned from the rule (:func:`faq.plan.hops`, the one plan every reader of
a change's reach follows).  Each round is one Spark job per key signature (a filter
of ``IN`` lists, one plan: :func:`fetch`, over :func:`faq.spark.fetch_tagged`),
instead of a job per read.

A relation's fetched rows are kept with the values they cover (per column:
every base row holding one of them is among the rows), so later lookups inside
that cover need no job (:meth:`incremental.spark_keyed.RemoteKeyed.with_near`).

A rule whose atoms are not all connected to a changed one, or with constants,
has no such bound: :func:`gather` returns None and the tick reads as it did.
A tick whose rows are more than ``max_fetch_rows`` (a setting; :func:`fetch`
stops there), or whose round looks for more than ``max_literals`` values (the bounds
of :func:`faq.plan.bounds`, their one home), gets
a :class:`Beyond`: its delta queries then run as Spark jobs
(:func:`faq.solve_delta` with ``local=False``), with no lookups of their own
that would meet the same bound.  The first round's job also returns, whatever
the bound, each changed relation's rows at its delta's keys (at most a row a
key), so that a tick past the bound needs no job of its own for them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from faq import Rule
from faq.kernel import Table, narrow
from faq.plan import bounds, hops
from faq.spark import Scan, fetch_tagged
from incremental.hot import HotRows, hot_budget, union_rows, with_kept
from semirings.local import distinct

if TYPE_CHECKING:  # pragma: no cover
    from incremental.deltas import Rows
    from incremental.spark_keyed import RemoteKeyed

__all__ = ["OUT", "Beyond", "Near", "Reach", "fetch", "gather", "one_hop"]

Reach = dict[str, dict[int, np.ndarray]]
"""Per relation, per key column, the values whose rows a tick reads (sorted, distinct)."""

Near = dict[str, tuple[Table, dict[int, np.ndarray], "HotRows | None"]]
"""Per relation, the base rows a tick fetched, the values they cover, per column, and
the base rows it keeps in the driver from now on (None: those it kept)."""

log = logging.getLogger("faq.incremental")

OUT = "\0out"
"""The name :func:`gather` gives the output's fetched rows (no relation has it)."""


@dataclass(frozen=True)
class Beyond:
    """What :func:`gather` returns when a tick reaches more rows or values than the
    settings let the driver look for (``max_fetch_rows``, ``max_literals``): per changed
    relation, the base rows at (a superset of) its delta's keys, when the job that met
    the bound fetched them."""

    at_keys: dict[str, Table] = field(default_factory=dict)


@dataclass
class _Term:
    """One term of the delta rule: its changed atom, the atoms read so far, and the
    values each variable can take in a row of the term's join (a superset)."""

    atom: int
    known: dict[str, np.ndarray]
    read: set[int] = field(default_factory=set)
    asked: bool = False  # for the output's rows (see gather)


def one_hop(rule: Rule, deltas: Mapping[str, Rows]) -> bool:
    """Whether every term of a tick with ``deltas`` reads each other atom at its change's
    values (every atom shares a variable with each changed one: a triangle, a clique, a
    star).  Then a term's lookups, at the change's values of the variables it shares
    with an atom, all fall inside the rows :func:`gather` fetched for that atom through
    one of those variables, whatever order its join binds the rest in.  A term of two
    hops or more reads a far atom at values its join reaches, which the fetched rows
    hold only along the hops :func:`faq.plan.hops` planned: such a tick keeps the
    general path, whose lookups follow those hops."""
    changed = [
        i for i, a in enumerate(rule.atoms) if a.relation in deltas and deltas[a.relation].rows
    ]
    return all(len(hops(rule, i).rounds) <= 1 for i in changed)


def gather(
    rule: Rule,
    deltas: Mapping[str, Rows],
    rels: Mapping[str, RemoteKeyed],
    out: RemoteKeyed | None = None,
) -> Near | Beyond | None:
    """The base rows of each relation that a tick with ``deltas`` reads, fetched round
    by round (one Spark job per round and key signature), with the values they cover;
    None when the rule bounds no such rows (an atom not connected to a changed one, a
    constant); a :class:`Beyond` when they may be more than ``max_fetch_rows`` rows, or
    a round looks for more than ``max_literals`` values (:func:`faq.plan.bounds`).
    Each changed relation is also read at its delta's leading values (its lookups at
    the delta's keys); past the bound, the first round's rows at those keys come in
    the :class:`Beyond`.

    With ``out`` (the output, keyed by the head), its rows at the changed output keys
    are fetched too, under the name :data:`OUT`: a changed key agrees with some term's
    known values on every head variable, so each term asks for the output rows at the
    first head variable it knows, in the round it knows it (a term learning its first
    head variable in the last round leaves its keys to the output's own lookup).
    """
    if any(a.consts for a in rule.atoms):
        return None
    if out is not None and rule.head:
        rels = {**rels, OUT: out}
    else:
        out = None
    terms = [
        _Term(i, narrow({}, a.vars, deltas[a.relation].cols), {i})
        for i, a in enumerate(rule.atoms)
        if a.relation in deltas and deltas[a.relation].rows
    ]
    if not terms:
        return None
    plans = {t.atom: hops(rule, t.atom) for t in terms}
    if not all(p.complete for p in plans.values()):
        return None  # an atom shares no variable with what the change reaches
    bound = bounds()
    most = bound.max_fetch_rows
    ask: dict[str, dict[int, list[np.ndarray]]] = {}
    for name, d in deltas.items():
        if d.rows and d.cols:
            _ask(ask, name, 0, d.cols[0])
    near: dict[str, Table] = {}
    hot: dict[str, HotRows] = {}  # the rows each relation keeps, as this tick leaves them
    cover: dict[str, dict[int, np.ndarray]] = {}
    held = 0
    keys = {n: d.cols for n, d in deltas.items() if d.rows and d.cols}  # the first round's
    for r in itertools.count():
        steps = []  # (term, atom, column, values): a hop read at its first known column
        for t in terms:
            for h in plans[t.atom].rounds[r] if r < len(plans[t.atom].rounds) else ():
                col, v = h.cols[0]
                steps.append((t, h.atom, col, t.known[v]))
                _ask(ask, rule.atoms[h.atom].relation, col, t.known[v])
        if out is not None and steps:  # with a round's job: none of its own
            for t in terms:
                if not t.asked:
                    at = [h for h, v in enumerate(rule.head) if v in t.known]
                    if at:
                        _ask(ask, OUT, at[0], t.known[rule.head[at[0]]])
                        t.asked = True
        plan = _new_values(ask, cover)
        values = sum(len(v) for cols in plan.values() for v in cols.values())
        over = bound.literals_over(values, "values looked for by a tick")
        if over:
            log.info("%s: its delta queries read the relations in Spark", over)
            return Beyond()
        if plan:
            got, at_keys, learned = fetch(rels, plan, most - held, keys)
            keys = {}
            if got is None:
                why = bound.rows_over("a tick reaches")
                log.info("%s of the state: its delta queries read the relations in Spark", why)
                return Beyond(at_keys)
            hot.update(learned)
            rels = {**rels, **{n: replace(rels[n], hot=h) for n, h in learned.items()}}
            for name, rows in got.items():
                held += rows.rows
                _merge(near, cover, name, rows, plan[name])
        if not steps:  # a relation only read at values no row holds: none of its rows
            empty = {n: (rels[n].near_rows(()), {}, None) for n in rule.relations if n not in near}
            return {**{n: (near[n], cover[n], hot.get(n)) for n in near}, **empty}
        ask = {}
        for t, j, _, _ in steps:
            t.read.add(j)
        for t, j, col, values in steps:
            if len(t.read) == len(rule.atoms) and (out is None or t.asked):
                continue  # no further hop and no output rows to ask for: values not needed
            b = rule.atoms[j]
            narrow(t.known, b.vars, _rows_at(b.relation, col, values, near, rels, deltas))


def _ask(
    ask: dict[str, dict[int, list[np.ndarray]]], rel: str, col: int, values: np.ndarray
) -> None:
    """Look for the rows of ``rel`` whose column ``col`` holds one of ``values``."""
    ask.setdefault(rel, {}).setdefault(col, []).append(values)


def _new_values(ask: Mapping[str, Mapping[int, list[np.ndarray]]], cover: Reach) -> Reach:
    """The values ``ask`` looks for that no fetch covered yet, per relation and column."""
    plan: Reach = {}
    for name, by_col in ask.items():
        for c, vs in by_col.items():
            values = distinct(np.concatenate(vs))
            had = cover.get(name, {}).get(c)
            if had is not None and len(values):
                values = values[~np.isin(values, had)]
            if len(values):
                plan.setdefault(name, {})[c] = values
    return plan


def _merge(
    near: dict[str, Table],
    cover: dict[str, dict[int, np.ndarray]],
    name: str,
    rows: Table,
    covered: Mapping[int, np.ndarray],
) -> None:
    """Add a round's fetched ``rows`` of relation ``name`` (rows fetched before, which a
    row matching two columns' values can be, are kept once) and what they cover."""
    near[name] = rows if name not in near else union_rows(near[name], rows)
    own = cover.setdefault(name, {})
    for c, values in covered.items():
        own[c] = values if c not in own else distinct(np.concatenate([own[c], values]))


def _rows_at(
    name: str,
    col: int,
    values: np.ndarray,
    near: Mapping[str, Table],
    rels: Mapping[str, RemoteKeyed],
    deltas: Mapping[str, Rows],
) -> tuple[np.ndarray, ...]:
    """The key columns of every row relation ``name`` can have during the tick whose
    column ``col`` holds one of ``values``: its fetched base rows, its changed keys and
    its delta (a superset: a key changed to zero or a delta row is kept too)."""
    parts = [near[name].cols] if name in near else []
    over = rels[name].over
    if over.rows:
        parts.append(over.cols)
    if name in deltas and deltas[name].rows:
        parts.append(deltas[name].cols)
    out = []
    for cols in parts:
        hit = np.flatnonzero(np.isin(cols[col], values))
        out.append(tuple(c[hit] for c in cols))
    if not out:
        return tuple(np.empty(0, values.dtype) for _ in rels[name].vars)
    return tuple(np.concatenate([p[k] for p in out]) for k in range(len(out[0])))


def fetch(
    rels: Mapping[str, RemoteKeyed],
    plan: Reach,
    most: int,
    keys: Mapping[str, tuple[np.ndarray, ...]] | None = None,
) -> tuple[dict[str, Table] | None, dict[str, Table], dict[str, HotRows]]:
    """The base rows of each relation of ``plan`` whose column ``c`` holds one of
    ``plan[rel][c]`` for some ``c`` (without the changed keys' overrides): one Spark job
    for all relations of one key signature (key and value types).  Also, per relation
    of ``keys`` (its changed keys; their rows must be among those of ``plan``), the
    rows whose column ``c`` holds a value of ``keys[rel][c]`` for every ``c`` (a
    superset of its rows at those keys), fetched whatever the bound.

    None (with the rows at ``keys`` of the key signature that met the bound) when they
    may be more than ``most`` rows: a change at a hub of a large relation reaches rows
    the driver should not hold, and its tick reads another way.  The bound is kept in
    the same job, with no shuffle (a ``limit`` would add one to every tick): each of
    the job's P partitions (a relation's base is split into ``ctx.partitions``) sends
    at most ``most // P + 1`` rows, and None means that one of them had more.  So the
    driver holds at most about ``most + P`` rows; a hub's rows (all in its key's
    partition) are refused past ``most // P``.

    Values whose rows a relation keeps in the driver (``RemoteKeyed.hot``) are not
    looked for in Spark; their rows come from the driver.  The third result holds, per
    relation that learned some, the kept rows with the heavy values this fetch brought
    (:meth:`incremental.hot.HotRows.learned`).
    """
    groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for name in plan:
        r = rels[name]
        if r.rows:
            groups.setdefault((r.types, r.vtype), []).append(name)
    keys = keys or {}
    out = {n: rels[n].near_rows(()) for n in plan}  # empty, typed
    hot: dict[str, HotRows] = {}
    for names in groups.values():
        scans, asked, kept, at = [], {}, {}, {}
        for name in names:
            r = rels[name]
            mine = keys.get(name)
            at[name] = None if mine is None else tuple(distinct(c) for c in mine)
            if r.hot is None:
                asked[name], kept[name] = plan[name], None
            else:  # values whose rows the driver keeps are not fetched again
                asked[name], kept[name] = r.hot.split(plan[name])
            if asked[name]:
                scans.append(Scan(r.base, r.vars, r.types, asked[name], at[name], r.ctx.partitions))
        scanned = [n for n in names if asked[n]]
        got, at_keys = fetch_tagged(scans, most) if scans else ([], {})
        if got is None:  # (relations of other key types: their own lookups)
            rows = {scanned[k]: rels[scanned[k]].near_rows(t) for k, t in at_keys.items()}
            for name in names:  # the rows at the keys that the driver keeps
                r = rels[name]
                if at[name] is not None and r.hot is not None:
                    held = r.hot.at(at[name])
                    rows[name] = union_rows(rows.get(name, r.near_rows(())), held)
            return None, rows, {}
        for name, part in zip(scanned, got, strict=True):
            r = rels[name]
            fetched = r.near_rows(part)
            out[name] = fetched
            old = r.hot or HotRows.empty(fetched)
            new = old.learned(fetched, asked[name], hot_budget())
            if new is not old:
                hot[name] = new
        for name in names:
            if kept[name] is not None:
                out[name] = with_kept(out[name], kept[name], asked[name])
        fetched_rows = sum(t.num_rows for t in got)
        held_rows = sum(kept[n].rows for n in names if kept[n] is not None)
        log.debug(
            "fetched %d base rows from Spark; %d more kept in the driver",
            fetched_rows,
            held_rows,
            extra={"fetched_rows": fetched_rows, "kept_rows": held_rows},
        )
    return out, {}, hot
