"""One tick of a maintained path program as two compiled graph walks.

A strongly connected group of one relation ``D`` of one variable whose only recursive
rule is ``D(y) :- D(x), E(x, y)`` (shortest paths, reachability by weight, most
reliable paths), over a selective semiring whose ⊗ is ``+`` or ``×`` on float64
(min-plus, max-plus, max-times: declared by ``tight``, ``selective`` and
:class:`semirings.LibraryOps`), is maintained here rather than by
:meth:`incremental.fixpoint.Fixpoint._dred`'s delta queries, round by round, when every
edge value makes a path no better (``w ≥ 0`` under min, ``w ≤ 0`` under max-plus,
``0 ≤ w ≤ 1`` under max-times, whose values are then never negative).  The steps are
the same delete and rederive:

1. the base rules' candidates through worsened inputs, judged tight against the old
   ``D`` (delta queries, as in the general path);
2. :func:`faq.kernel.compiled_paths.path_overdelete`: those keys, the heads of the worsened
   edges that a tight derivation used, and every key a tight derivation from a marked
   key reaches, over the old relations;
3. the base rules at the marked keys and through improved inputs (delta queries);
4. :func:`faq.kernel.compiled_paths.path_repair`: the marked keys rederived over the new
   edges from the rest of ``D``, and every improvement relaxed best value first.

A tick the walks cannot take (another shape, a key or annotation type they were not
built for, a log out of key order, an edge value that could improve a path, a value
leaving the domain) returns None and the general path runs it: the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.kernel import NUMBA, KeyedTable, Table, path_overdelete, path_repair
from faq.plan import current as settings
from incremental.driver_state import LocalKeyed
from incremental.tables import drop_zeros
from incremental.terms import recompute_groups
from semirings import Semiring
from semirings.local import member

__all__ = ["Walked", "linear_dred", "path_order", "path_shape"]

RTOL = 1e-9
"""The relative tolerance within which a derivation counts as tight (the general path's)."""

_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)


@dataclass(frozen=True)
class Walked:
    """What the walks set in a tick: the keys (sorted) and, per key, the key its value came
    from (the ``x`` of the recursive rule number ``rule``) and how
    (:data:`faq.kernel.compiled_paths.VIA_EDGE`, ``VIA_BASE``: a base rule, ``VIA_GONE``: deleted),
    which a view keeping witnesses takes as theirs."""

    rule: int
    keys: np.ndarray
    preds: np.ndarray
    kinds: np.ndarray


def path_shape(p: Any, g: Any) -> tuple[int, str, str] | None:
    """``(rule, D, E)`` when group ``g`` of program ``p`` is one relation ``D`` of one
    variable whose only recursive rule (number ``rule``) is ``D(y) :- D(x), E(x, y)``
    (any names, no constants, ``E`` outside the group, ``x ≠ y``); None otherwise."""
    if len(g.names) != 1 or len(g.recursive) != 1:
        return None
    r = p.rules[g.recursive[0]]
    D = g.names[0]
    if len(r.head) != 1 or len(r.atoms) != 2 or any(a.consts for a in r.atoms):
        return None
    own = [a for a in r.atoms if a.relation == D]
    edge = [a for a in r.atoms if a.relation != D]
    if len(own) != 1 or len(edge) != 1 or len(own[0].vars) != 1 or len(edge[0].vars) != 2:
        return None
    (x,), (y,) = own[0].vars, r.head
    if x == y or edge[0].vars != (x, y) or edge[0].relation in g.names:
        return None
    return g.recursive[0], D, edge[0].relation


def path_order(S: Semiring) -> tuple[bool, bool] | None:
    """``(minimize, times)`` for a semiring the walks compute: ``tight``, ``selective``,
    float64, ⊕ the library's minimum or maximum and ⊗ its ``+`` or ``×``; None otherwise."""
    lib = S.library
    if not S.tight or S.selective not in ("min", "max") or lib is None:
        return None
    if np.dtype(lib.dtype) != _F64:
        return None
    minimize = S.selective == "min"
    if lib.add is not (np.minimum if minimize else np.maximum):
        return None
    if lib.mul is np.add:
        return minimize, False
    if lib.mul is np.multiply and not minimize:
        return minimize, True
    return None


def _no_better(lo: float, hi: float, minimize: bool, times: bool) -> bool:
    """Whether every edge value in ``[lo, hi]`` makes a path no better."""
    if times:
        return lo >= 0.0 and hi <= 1.0
    return lo >= 0.0 if minimize else hi <= 0.0


def _edges_ok(kt: KeyedTable, minimize: bool, times: bool, zero: float) -> bool:
    """Whether every present edge of ``kt`` makes a path no better (the base's range is
    kept with its trie; the log is read)."""
    rng = kt.trie((0, 1)).value_range()
    if rng is not None and not _no_better(*rng, minimize, times):
        return False
    v = kt.over.values
    assert v is not None
    v = v[v != zero]
    return not len(v) or _no_better(float(v.min()), float(v.max()), minimize, times)


def _typed(kt: KeyedTable) -> bool:
    """Whether ``kt`` has int64 keys, float64 annotations and a log in key order."""
    cols = (*kt.base.cols, *kt.over.cols)
    vals = (kt.base.values, kt.over.values)
    if any(c.dtype != _I64 for c in cols) or any(v is None or v.dtype != _F64 for v in vals):
        return False
    return kt.over.rows == 0 or kt.in_key_order()


def _one_column(kt: KeyedTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A relation of one column as the walks read it: base keys and annotations (sorted),
    log keys and annotations (in key order)."""
    tr = kt.trie((0,))
    assert tr.values is not None and kt.over.values is not None
    return tr.vals[0], tr.values, kt.over.cols[0], kt.over.values


def _edges(kt: KeyedTable) -> tuple[np.ndarray, ...]:
    """A relation of two columns as the walks read it forwards: its base's trie (first
    values, offsets, second values, annotations) and its log (in key order)."""
    tr = kt.trie((0, 1))
    assert tr.values is not None and kt.over.values is not None
    return (tr.vals[0], tr.starts[1], tr.vals[1], tr.values, *kt.over.cols, kt.over.values)


def _at(rel: LocalKeyed, keys: np.ndarray) -> np.ndarray:
    return rel.values_at((keys,)) if len(keys) else np.empty(0, _F64)


def linear_dred(
    fx: Any,
    g: Any,
    old: Mapping[str, LocalKeyed],
    new: Mapping[str, LocalKeyed],
    worse: Mapping[str, Table],
    better: Mapping[str, Table],
) -> tuple[dict[str, LocalKeyed], dict[str, list[Table]]] | None:
    """The group's relation after the tick and the keys it touched, by the compiled walks
    (see the module docstring), or None where they do not apply.  ``fx`` is the tick's
    :class:`incremental.fixpoint.Fixpoint` (its program, semiring, delta queries and
    reports; what the walks set goes to its ``walked``)."""
    shape, order = path_shape(fx.p, g), path_order(fx.S)
    if not NUMBA or not settings().path_walks or shape is None or order is None:
        return None
    if fx.W is not fx.S:
        return None
    rule, D, E = shape
    minimize, times = order
    zero = float(fx.S.zero)
    d_old, e_old, e_new = old[D].kt, old[E].kt, new[E].kt
    if not d_old.rows or not all(_typed(kt) for kt in (d_old, e_old, e_new)):
        return None
    if not _edges_ok(e_new, minimize, times, zero):
        return None
    if times and d_old.rows and min(_range(d_old)) < 0.0:
        return None
    dcols = _one_column(d_old)
    init = []
    for i in g.base:  # 1. the base rules' candidates through worsened inputs, if tight
        r = fx.p.rules[i]
        changes = {m: worse[m] for m in r.relations if m in worse and worse[m].rows}
        if changes:
            c = fx.delta(i, old, changes)
            was = _at(old[D], c.cols[0])
            assert c.values is not None
            init.append(c.cols[0][(was != zero) & _close(c.values, was)])
    w = worse.get(E)
    wcols = _edge_rows(w)
    start = np.ascontiguousarray(np.concatenate(init)) if init else np.empty(0, _I64)
    marked, _ = path_overdelete(*dcols, *_edges(e_old), start, *wcols, zero, times, RTOL)
    marked = np.sort(marked)
    seeds = []
    for i in g.base:  # 3. the base rules at the marked keys and through improved inputs
        r = fx.p.rules[i]
        rels = {m: new[m] for m in r.relations}
        if len(marked):
            at = Table(fx.p.vars[D], (marked,), None)
            got = recompute_groups(r, fx.W, rels, at, fx.how)
            fx.report(got.terms, got.where)
            seeds.append(fx.renamed(D, got.table))
        changes = {m: better[m] for m in r.relations if m in better and better[m].rows}
        if changes:
            seeds.append(fx.delta(i, new, changes))
    seed = drop_zeros(fx.merge(seeds), fx.o) if seeds else None
    b = better.get(E)
    bcols = _edge_rows(b)
    fwd = _edges(e_new)
    rorder, rsorted = e_new.column_index(1)
    into = np.flatnonzero(member(fwd[5], marked)) if len(marked) else np.empty(0, _I64)
    into = into[np.argsort(fwd[5][into], kind="stable")]
    sk = np.ascontiguousarray(seed.cols[0]) if seed is not None else np.empty(0, _I64)
    sv = np.ascontiguousarray(seed.values) if seed is not None else np.empty(0, _F64)
    keys, values, preds, kinds = path_repair(
        *dcols,
        marked,
        *fwd,
        rorder,
        rsorted,
        e_new.base.cols[0],
        e_new.base.values,
        into,
        sk,
        sv,
        *bcols,
        zero,
        minimize,
        times,
    )
    if not np.isfinite(values[values != zero]).all():
        return None  # a value left the domain: the general path refuses it
    fx.report((), "driver")
    perm = np.argsort(keys)
    keys, values = keys[perm], values[perm]
    fx.walked[D] = Walked(rule, keys, preds[perm], kinds[perm])
    was = _at(old[D], keys)
    held = np.flatnonzero(was != zero)
    vars_ = fx.p.vars[D]
    t = Table(vars_, (keys,), values)
    after = old[D].replace(t, Table(vars_, (keys[held],), was[held])) if len(keys) else old[D]
    return {D: after}, {D: [t]}


def _range(kt: KeyedTable) -> tuple[float, float]:
    """The least and greatest present annotation of a relation of one column."""
    rng = kt.trie((0,)).value_range()
    lo, hi = rng if rng is not None else (np.inf, -np.inf)
    v = kt.over.values
    if v is not None and len(v):
        lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
    return lo, hi


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a == b``, or within :data:`RTOL` of the larger magnitude (the general path's test)."""
    with np.errstate(invalid="ignore"):
        return (a == b) | (np.abs(a - b) <= RTOL * np.maximum(np.abs(a), np.abs(b)))


def _edge_rows(t: Table | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Changed edges as the walks read them: both ends and the annotation (contiguous,
    so that the kernels' compiled signature serves)."""
    if t is None or not t.rows:
        return np.empty(0, _I64), np.empty(0, _I64), np.empty(0, _F64)
    assert t.values is not None
    c = np.ascontiguousarray
    return c(t.cols[0]), c(t.cols[1]), c(t.values)
