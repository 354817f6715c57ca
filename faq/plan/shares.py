"""HyperCube shares: how a step's bag is cut into cells, one Spark task each.

A step partitioned over the cluster gives every variable ``v`` of its bag a
*share* ``s_v`` (a positive integer); the cells are the points of the grid
``[0, s_v)`` over all variables, ``cells = Π s_v``.  A row of a relation ``R``
goes to every cell whose coordinate on each of ``R``'s variables is the hash
of the row's value modulo its share: to ``Π_{v ∉ R} s_v`` cells.  Every
combination of rows that joins meets in exactly one cell, so each cell runs
the local kernel on its own rows and the union of the cells' results is the
join (Afrati and Ullman's Shares; Beame, Koutris and Suciu's HyperCube).

:func:`choose_shares` picks the shares the way DISC and ADJ do on Spark:
enumerate the integer share vectors whose product is at most the number of
cells ``P``, cost each as the load of one cell (the rows it receives,
``Σ_R |R| / Π_{v ∈ R} s_v``), keep the cheapest, and double ``P`` until that
load fits the per-cell budget (the ``cell_rows`` setting).  An acyclic step
(two relations sharing a variable) comes out one-dimensional: all of ``P``
on the join variable, plain hash partitioning.

A cell's output key can come from several cells when a variable the step
eliminates has a share above one; the step's outputs are then ⊕-combined by
key (``combine``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["MAX_CELLS", "Shares", "choose_shares"]

MAX_CELLS = 1 << 12
"""The most cells the search considers (it stops doubling there)."""


@dataclass(frozen=True)
class Shares:
    """The HyperCube of one step.

    ``shares`` is ``(variable, share)`` for every variable of the bag, in the
    bag's order; ``cells`` their product; ``load`` the estimated rows one cell
    receives; ``rows`` the rows all cells receive together (the shuffle);
    ``combine`` whether outputs of different cells must be ⊕-combined by key.
    """

    shares: tuple[tuple[str, int], ...]
    cells: int
    load: float
    rows: float
    combine: bool

    def share(self, v: str) -> int:
        """The share of variable ``v`` (1 when it is not cut)."""
        return dict(self.shares).get(v, 1)

    def describe(self) -> str:
        """One line: the shares of the cut variables, cells, and the load per cell."""
        cut = ", ".join(f"{v}={s}" for v, s in self.shares if s > 1) or "none"
        text = (
            f"shares {cut}: {self.cells} cell{'s' if self.cells != 1 else ''}, "
            f"~{self.load:,.0f} rows per cell, {self.rows:,.0f} rows shuffled"
        )
        if self.combine:
            text += "; outputs ⊕-combined by key"
        return text


def choose_shares(
    relations: Sequence[tuple[Sequence[str], float]],
    keep: Sequence[str],
    tasks: int,
    cell_rows: float,
) -> Shares:
    """The cheapest shares for a bag of ``relations`` (``(variables, rows)`` each).

    Starts with ``tasks`` cells (at least one) and doubles the number of cells
    while the cheapest vector's load per cell is above ``cell_rows`` (up to
    :data:`MAX_CELLS`).  Among vectors of equal load the one with fewer cells
    wins, then the one that cuts fewer eliminated variables (no combine).

    Parameters
    ----------
    relations : sequence of (variables, rows)
        The step's inputs.
    keep : sequence of str
        The step's output variables (the others are eliminated).
    tasks : int
        Cells to start from: the tasks that can run at once.
    cell_rows : float
        The budget: most rows one cell should receive.
    """
    vars_: list[str] = []
    for vs, _ in relations:
        vars_ += [v for v in vs if v not in vars_]
    rels = [(frozenset(vs), max(float(rows), 0.0)) for vs, rows in relations]
    kept = set(keep)
    P = max(1, int(tasks))
    while True:
        best = _cheapest(vars_, rels, kept, P)
        if best[0] <= cell_rows or P >= MAX_CELLS:
            break
        P *= 2
    load, cells, _, vector = best
    shares = tuple(zip(vars_, vector, strict=True))
    rows = sum(r * cells / math.prod(s for v, s in shares if v in vs) for vs, r in rels)
    combine = any(s > 1 for v, s in shares if v not in kept)
    return Shares(shares, cells, load, rows, combine)


def _cheapest(
    vars_: list[str], rels: list[tuple[frozenset[str], float]], kept: set[str], P: int
) -> tuple[float, int, int, tuple[int, ...]]:
    best: tuple[float, int, int, tuple[int, ...]] | None = None
    for vector in _vectors(len(vars_), P):
        s = dict(zip(vars_, vector, strict=True))
        load = sum(r / math.prod(s[v] for v in vs) for vs, r in rels)
        cells = math.prod(vector)
        cut = sum(1 for v, x in s.items() if x > 1 and v not in kept)
        key = (round(load, 6), cells, cut, vector)
        if best is None or key < best:
            best = key
    assert best is not None
    return best


def _vectors(k: int, P: int) -> Iterator[tuple[int, ...]]:
    """Vectors of ``k`` positive integers whose product is at most ``P``: all but the last
    entry from :data:`_SMOOTH`, the last as large as that allows (a larger share never adds
    load to a cell)."""
    if k == 0:
        yield ()
        return
    if k == 1:
        yield (P,)
        return
    for first in _SMOOTH:
        if first > P:
            break
        for rest in _vectors(k - 1, P // first):
            yield (first, *rest)


_SMOOTH = sorted(2**a * 3**b for a in range(13) for b in range(8) if 2**a * 3**b <= MAX_CELLS)
"""The shares tried for all but the last variable: products of powers of 2 and 3 (a
coarser grid than every integer, so that the search stays fast on six variables)."""
