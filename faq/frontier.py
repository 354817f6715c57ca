"""A linear path program's rounds as GraphBLAS frontier products: every round in C.

The program shape of shortest paths, reachability, widest and most likely paths::

    D(y) :- D(x), E(x, y)        (or E(y, x): the edges read backwards)

over a semiring whose ⊕ selects (min, max, or) and whose ⊕.⊗ GraphBLAS computes
(:class:`~semirings.core.LibraryOps`: ``min_plus``, ``max_plus``, ``max_times``,
``lor_land``).  Its semi-naive round ``k`` is the change Δ times the edge matrix,
``Δ ⊕.⊗ E`` (one ``vxm``), whose improvements on the state ``D`` are the next change.
:func:`frontier_fixpoint` runs those rounds on a GraphBLAS vector and matrix instead
of a delta rule over kernel tables per round (14 rounds over 1M edges: 75.5 ms
against 0.93 s, docs/recursion.md), with the same rounds, the same records and the
same refusals as the driver's loop in :mod:`faq.recursion`:

* the change of round ``k`` is every key whose value ``D ⊕ (Δ ⊕.⊗ E)`` differs from
  ``D``'s (or that ``D`` lacks), as :func:`faq.kernel.merge.changed_rows` finds it;
* a change holding a value outside the semiring is refused
  (:func:`faq.plan.convergence.outside_domain`), and so is a change at round ``k``
  while the state holds fewer than ``k`` keys (an improving cycle,
  :func:`faq.plan.convergence.improving_cycle`);
* each :class:`~faq.program_run.Round` has the change's rows, the rows of Δ read and
  the rows derived (the nonzeros of ``Δ ⊕.⊗ E``).

Node keys become indices of one :class:`~faq.kernel.library.Axis` over the edges'
two columns and the base rules' keys.  Anything else (witnesses, other rule shapes,
a semiring without library operations or whose ⊕ adds, ``library_runners=False``)
keeps the driver's loop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faq.kernel.library import Axis, Declined, axes_of
from faq.kernel.sparse import graphblas
from faq.kernel.table import Table
from faq.plan.convergence import improving_cycle_error, outside_domain
from faq.plan.settings import current
from faq.program_run import Round, RoundProgress
from faq.rule import Rule
from semirings import Semiring

__all__ = ["frontier_fixpoint", "frontier_rounds", "frontier_shape"]

_SELECTS = ("min", "max", "lor")


def frontier_shape(
    S: Semiring, rules: Sequence[Rule], names: Sequence[str], held: Mapping[str, bool]
) -> tuple[str, bool] | None:
    """The edge relation of a group that is one linear path rule over ``S``, and whether
    the rule reads it backwards (``E(y, x)``); None for any other group.

    ``rules`` are the group's recursive rules, ``names`` its relations and ``held`` says
    which of the program's input relations are held in the driver (the others are kept
    in Spark).
    """
    lib = S.library
    if (
        lib is None
        or not S.idempotent
        or lib.sums
        or lib.monoid not in _SELECTS
        or not current().library_runners
    ):
        return None
    if len(names) != 1 or len(rules) != 1:
        return None
    r = rules[0]
    if len(r.atoms) != 2 or len(r.head) != 1 or any(a.consts for a in r.atoms):
        return None
    inner = [a for a in r.atoms if a.relation == names[0]]
    outer = [a for a in r.atoms if a.relation != names[0]]
    if len(inner) != 1 or len(outer) != 1 or len(inner[0].vars) != 1:
        return None
    (x,), (y,), edge = inner[0].vars, r.head, outer[0]
    if x == y or not held.get(edge.relation, False) or len(edge.vars) != 2:
        return None
    if edge.vars == (x, y):
        return edge.relation, False
    if edge.vars == (y, x):
        return edge.relation, True
    return None


def frontier_fixpoint(
    S: Semiring,
    name: str,
    var: str,
    base: Table,
    edges: Table,
    backwards: bool,
    where: tuple[str, ...],
) -> tuple[Table, list[Round]]:
    """The least fixpoint of ``name(var)`` from its base rules' change ``base`` over the
    edge table ``edges``, and its rounds (round 0 excluded).

    Parameters
    ----------
    S : Semiring
        A semiring :func:`frontier_shape` accepts.
    name, var : str
        The relation and its one variable.
    base : Table
        Round 0's change: the base rules' rows, ⊕-combined (over ``var``).
    edges : Table
        The edge relation's rows (two key columns, consolidated, no zeros).
    backwards : bool
        The rule reads the edges as ``E(y, x)``.
    where : tuple of str
        Each round's place, as its record says it.

    Returns
    -------
    (Table, list of Round)
        The state at the fixpoint over ``(var,)`` and the records of rounds 1, 2, ...

    Raises
    ------
    faq.plan.convergence.DivergenceError
        A value outside ``S`` or an improving cycle, as the driver's loop refuses them.
    Declined
        The keys cannot be numbered on one axis (keys of several types).
    """
    gb = graphblas()
    lib = S.library
    assert lib is not None
    src, dst = (edges.cols[1], edges.cols[0]) if backwards else edges.cols
    ax = _axis([src, dst, base.cols[0]])
    n = max(ax.size, 1)
    semiring = getattr(gb.semiring, lib.semiring)
    monoid = getattr(gb.monoid, lib.monoid)
    E = gb.Matrix.from_coo(
        ax.index(src), ax.index(dst), _values(edges, S), nrows=n, ncols=n, dup_op=monoid
    )
    D = gb.Vector.from_coo(ax.index(base.cols[0]), _values(base, S), size=n, dtype=lib.dtype)
    delta = D.dup()
    rounds: list[Round] = []
    progress = RoundProgress((name,))
    k = 0
    while delta.nvals:
        k += 1
        t0 = time.perf_counter()
        bad = outside_domain(S, (name,), {name: _table(delta, ax, var)}, k - 1)
        if bad is not None:
            raise bad
        cand = delta.vxm(E, semiring).new()
        cand = cand.select(gb.select.valuene, S.zero).new()  # ⊗ reaching zero: no row
        new = D.ewise_add(cand, monoid).new()
        changed = new.ewise_mult(D, gb.binary.ne).new()
        nxt = gb.Vector(lib.dtype, n)
        nxt(~D.S) << new
        nxt(changed.V) << new
        if nxt.nvals and D.nvals < k:
            raise improving_cycle_error(S, (name,), {name: _table(nxt, ax, var)}, k)
        sizes = ((name, int(nxt.nvals)),)
        rounds.append(
            Round((name,), k, sizes, where, time.perf_counter() - t0, delta.nvals, cand.nvals)
        )
        progress.round(k, sizes)
        D, delta = new, nxt
    progress.done(k)
    return _table(D, ax, var), rounds


def _values(t: Table, S: Semiring) -> np.ndarray:
    """``t``'s annotations (the semiring's one for a table without any)."""
    lib = S.library
    assert lib is not None
    if t.values is not None:
        return t.values.astype(lib.dtype, copy=False)
    return np.full(t.rows, S.one, dtype=lib.dtype)


def _axis(cols: Sequence[np.ndarray]) -> Axis:
    """One axis over the keys of every column (the node keys of both edge columns and the
    base rules' keys)."""
    cols = [c for c in cols if len(c)] or list(cols[:1])
    return axes_of([Table(("node",), (np.concatenate(cols),))])["node"]


def _table(v: Any, ax: Axis, var: str) -> Table:
    """A GraphBLAS vector's entries as a table over ``var``, in key order."""
    idx, vals = v.to_coo()
    return Table((var,), (ax.keys(idx),), vals)


def frontier_rounds(
    S: Semiring,
    rules: Sequence[Rule],
    names: tuple[str, ...],
    vars_: Mapping[str, tuple[str, ...]],
    delta: Mapping[str, Table],
    inputs: Mapping[str, Any],
) -> tuple[Table, list[Round], str] | None:
    """A recursive group's fixpoint by :func:`frontier_fixpoint` when it has the shape
    (:func:`frontier_shape`), from round 0's change ``delta``, over the program's
    ``inputs`` (Factors; those held in the driver are read): the state, the rounds and
    what ran them, for ``explain()``; None when the driver's loop must run them.  Only the
    edge relation's rows are read, once the group has the shape."""
    shape = frontier_shape(S, rules, names, {n: f.is_local for n, f in inputs.items()})
    if shape is None:
        return None
    edge, backwards = shape
    name = names[0]
    edges = inputs[edge].local_table()
    assert edges is not None  # held in the driver (frontier_shape)
    try:
        state, rounds = frontier_fixpoint(
            S, name, vars_[name][0], delta[name], edges, backwards, ("driver",)
        )
    except Declined:
        return None
    assert S.library is not None
    return (
        state,
        rounds,
        f"every round one GraphBLAS product Δ{name} ⊕.⊗ {edge} ({S.library.semiring})",
    )
