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

**The cap.**  Doubling under a small budget, and a grid for every split, could make
thousands of cells for a few hundred rows: each a Spark task with the whole routing plan
in its closure.  So the cells of a step, all its grids together, are capped by its input
rows (a cell per row) and by ``max_cell_waves`` waves of the cluster's task slots,
whatever ``cell_rows`` says; past the cap the search allows a cell the smallest budget
whose cells fit (:attr:`Shares.cap` records the limit, the cells wanted and given).

A cell's output key can come from several cells when a variable the step
eliminates has a share above one; the step's outputs are then ⊕-combined by
key (``combine``).

**Heavy values.**  All rows holding one value of a variable go to the cells
of one coordinate of that variable, so a value of high degree (a hub) can
overflow its cells whatever the shares.  When the check job's most frequent
values (:attr:`faq.kernel.stats.RelationStats.top`) show a value whose rows
would put its cell over ``cell_rows``, :func:`choose_shares` splits it off:
the rows holding the heavy values of that variable go to cells of their own,
a second grid in which the variable is not cut (share 1) and the other
variables share the cells, while the other rows keep the first grid; inputs
without the variable go to both grids.  Every combination of rows that joins
agrees on the variable's value, so it meets in exactly one cell of exactly one
grid (the skew-aware HyperCube of Beame, Koutris and Suciu).  Then the rows
left light look again: the variable whose heavy values weigh most among them is
split the same way, and so on (``heavy`` is that chain of splits: split ``k``
takes the rows heavy on its variable and light on the variables of the splits
before it), and each split's own grid looks for heavy values of the variables
it still cuts (a split within a split).  So a hub overflows no cell on any of
its variables, up to what the most frequent values show.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["MAX_CELLS", "Cap", "Heavy", "Shares", "choose_shares"]

Top = Mapping[str, Sequence[tuple[Any, int]]]
"""Per variable of an input, its most frequent values and their rows, most frequent first."""

MAX_CELLS = 1 << 12
"""The most cells the search considers for one grid (it stops doubling there)."""


@dataclass(frozen=True)
class Cap:
    """The cells of a step held under a limit that ``cell_rows`` alone would pass.

    ``limit`` names what decided (the input rows, or ``max_cell_waves`` × the task
    slots); ``cells`` is that limit; ``wanted`` the cells the ``cell_rows`` budget alone
    would make (grid and splits); ``given`` the cells made; ``budget`` the rows per cell
    the search allowed instead of ``cell_rows`` to fit under it.
    """

    limit: str
    cells: int
    wanted: int
    given: int
    budget: float

    def describe(self) -> str:
        """One clause: the cells given, the cells wanted and the limit that decided."""
        return (
            f"capped at {self.cells:,} cells by {self.limit}: "
            f"{self.given:,} given where cell_rows wanted {self.wanted:,} "
            f"(a budget of ~{self.budget:,.0f} rows per cell)"
        )


@dataclass(frozen=True)
class Shares:
    """The HyperCube of one step.

    ``shares`` is ``(variable, share)`` for every variable of the bag, in the
    bag's order; ``cells`` their product; ``load`` the estimated rows one cell
    receives; ``rows`` the rows all cells receive together (the shuffle);
    ``combine`` whether outputs of different cells must be ⊕-combined by key;
    ``heavy`` the values split off into cells of their own, in order (split ``k``
    takes the rows heavy on its variable and light on those of the splits before
    it; ``cells`` counts this grid only, :attr:`total` all of them); ``cap`` what held
    the cells under a limit the ``cell_rows`` budget alone would pass (None: nothing).
    """

    shares: tuple[tuple[str, int], ...]
    cells: int
    load: float
    rows: float
    combine: bool
    heavy: tuple[Heavy, ...] = ()
    cap: Cap | None = None

    def share(self, v: str) -> int:
        """The share of variable ``v`` (1 when it is not cut)."""
        return dict(self.shares).get(v, 1)

    def renamed(self, names: Mapping[str, str]) -> Shares:
        """The same cells with the variables renamed by ``names`` (others kept)."""
        heavy = tuple(
            replace(h, var=names.get(h.var, h.var), shares=h.shares.renamed(names))
            for h in self.heavy
        )
        shares = tuple((names.get(v, v), x) for v, x in self.shares)
        return replace(self, shares=shares, heavy=heavy)

    @property
    def total(self) -> int:
        """All cells: the grid's and those of the heavy values (theirs too)."""
        return self.cells + sum(h.shares.total for h in self.heavy)

    def describe(self) -> str:
        """One line: the shares of the cut variables, cells, and the load per cell."""
        text = _grid(self) + _splits(self)
        if self.combine:
            text += "; outputs ⊕-combined by key"
        if self.cap is not None:
            text += f"; {self.cap.describe()}"
        return text


@dataclass(frozen=True)
class Heavy:
    """Values of one variable too heavy for one cell, joined in a grid of their own.

    ``var`` is the variable; ``values`` its heavy values; ``rows`` the input
    rows that hold them (estimated); ``shares`` their grid, in which ``var``
    is not cut (and which may split heavy values of its own); ``taken`` the rows of
    each input (by index) that hold them, estimated.
    """

    var: str
    values: tuple[Any, ...]
    rows: float
    shares: Shares
    taken: Mapping[int, float] = field(default_factory=dict, compare=False, repr=False)


def _splits(s: Shares) -> str:
    """The heavy values of ``s`` and their grids (a split within a split in brackets)."""
    text = ""
    for h in s.heavy:
        shown = ", ".join(map(repr, h.values[:3])) + (", …" if len(h.values) > 3 else "")
        text += (
            f"; heavy {h.var} ({len(h.values)} value{'s' if len(h.values) != 1 else ''}: "
            f"{shown}; ~{h.rows:,.0f} rows) split over {_grid(h.shares)}"
        )
        if h.shares.heavy:
            text += f" [within it{_splits(h.shares)}]"
    return text


def _grid(s: Shares) -> str:
    cut = ", ".join(f"{v}={x}" for v, x in s.shares if x > 1) or "none"
    return (
        f"shares {cut}: {s.cells} cell{'s' if s.cells != 1 else ''}, "
        f"~{s.load:,.0f} rows per cell, {s.rows:,.0f} rows shuffled"
    )


def choose_shares(
    relations: Sequence[tuple[Sequence[str], float]],
    keep: Sequence[str],
    tasks: int,
    cell_rows: float,
    top: Sequence[Top] = (),
    min_rows: float = 0,
    cores: int = 1,
    *,
    waves: float = 0,
    depth: int = 2,
) -> Shares:
    """The cheapest shares for a bag of ``relations`` (``(variables, rows)`` each).

    Starts with ``tasks`` cells, or with ``n = ceil(rows / min_rows)`` when fewer (``rows``
    all the relations' rows together; more than ``cores`` rounded down to a multiple of
    ``cores``, so that the cells run in whole waves), and doubles the number of cells
    while the cheapest vector's load per cell is above ``cell_rows`` (up to
    :data:`MAX_CELLS`, and only while doubling lightens a cell).  Among vectors of
    equal load the one with fewer cells wins, then the one that cuts fewer eliminated
    variables (no combine).
    With ``top`` (one mapping per relation), values whose rows would put their
    cell over ``cell_rows`` are split off into a grid of their own (``heavy``).

    **The cap.**  Whatever ``cell_rows`` says, all the grids together get at most as many
    cells as the relations have rows (a cell per input row), and, with ``waves``, at most
    ``waves × cores`` (so many waves of the cluster's tasks).  When the budget alone would
    make more, the search runs again with the smallest budget it finds (a geometric
    bisection, to within 10%) whose cells fit under the cap, and the result says so
    (:attr:`Shares.cap`: the limit, the cells wanted and the cells given).

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
    top : sequence of mappings, optional
        Per relation, per variable, its most frequent values and their rows
        (upper bounds are fine), most frequent first.
    min_rows : float, optional
        The fewest rows worth a cell of their own (the ``cell_min_rows`` setting); 0
        starts from ``tasks``.
    cores : int, optional
        The tasks that run at once (the cluster's task slots).
    waves : float, optional
        The most waves of ``cores`` tasks the cells may take (the ``max_cell_waves``
        setting); 0: no cap but the rows.
    depth : int, optional
        Levels of splits: with 2, each split's grid splits its own heavy values, and
        those grids split nothing (a value's rows in a split's grid are known only by its
        count in the whole input, an upper bound that grows looser with each level).

    Returns
    -------
    Shares
        The grid (and its splits), with :attr:`Shares.cap` set when the cap decided.
    """
    total = sum(max(float(r), 0.0) for _, r in relations)
    limits = [(max(1, int(total)), f"the {total:,.0f} input rows (a cell per row)")]
    if waves > 0:
        slots = max(1, int(cores))
        plural = "s" if slots != 1 else ""
        cells = max(1, int(waves * slots))
        limits.append((cells, f"max_cell_waves={waves:g} × {slots} task slot{plural}"))
    cap, limit = min(limits, key=lambda x: x[0])
    search = (relations, keep, tasks, top, min_rows, cores, depth)
    wanted = _search(*search, cell_rows, MAX_CELLS, tasks)
    if wanted.total <= cap:
        return wanted
    lo, hi = max(float(cell_rows), 1e-9), 2 * total + 1
    # under the cap a split's grid starts from one cell and doubles only while over the
    # budget: a grid of task slots per split would leave no cells for the others
    best = _search(*search, hi, cap, 1)  # no cell over its budget, no split: ≤ cap cells
    got = _search(*search, lo, cap, 1)
    if got.total <= cap:
        best, hi = got, lo
    while hi > 1.1 * lo:
        mid = math.sqrt(lo * hi)
        got = _search(*search, mid, cap, 1)
        if got.total <= cap:
            best, hi = got, mid
        else:
            lo = mid
    return replace(best, cap=Cap(limit, cap, wanted.total, best.total, hi))


def _search(
    relations: Sequence[tuple[Sequence[str], float]],
    keep: Sequence[str],
    tasks: int,
    top: Sequence[Top],
    min_rows: float,
    cores: int,
    depth: int,
    cell_rows: float,
    limit: int,
    split_tasks: int,
) -> Shares:
    """:func:`choose_shares` under the budget ``cell_rows``, every grid of at most
    ``limit`` cells (their sum is the caller's to check), the grids of splits starting
    from ``split_tasks`` cells."""
    vars_: list[str] = []
    for vs, _ in relations:
        vars_ += [v for v in vs if v not in vars_]
    rels = [(frozenset(vs), max(float(rows), 0.0)) for vs, rows in relations]
    kept = set(keep)
    size = max(1, int(tasks))
    if min_rows > 0:
        n = max(1, math.ceil(sum(r for _, r in rels) / min_rows))
        if n < size:  # 3 cells on 2 cores take as long as 4: two waves
            size = n if n <= cores else n - n % max(1, cores)
    size = min(size, limit)
    best = _cheapest(vars_, rels, kept, size)
    while best[0] > cell_rows and size < limit:
        nxt = min(2 * size, limit)
        more = _cheapest(vars_, rels, kept, nxt)
        if more[0] >= 0.9 * best[0]:  # more cells hardly lighten one (rows every cell
            break  # gets: an input whose variables the grid does not cut)
        best, size = more, nxt
    load, cells, _, vector = best
    shares = tuple(zip(vars_, vector, strict=True))
    rows = sum(r * cells / math.prod(s for v, s in shares if v in vs) for vs, r in rels)
    combine = any(s > 1 for v, s in shares if v not in kept)
    out = Shares(shares, cells, load, rows, combine)
    splits: list[Heavy] = []
    light, known = list(relations), [dict(t) for t in top]
    while known and depth > 0:  # each split drops its values from what is known: it ends
        h = _heavy(light, known, keep, out, split_tasks, cell_rows, depth, limit)
        if h is None:
            break
        splits.append(h)
        combine = combine or h.shares.combine or h.var not in kept
        light = [(vs, max(0.0, r - h.taken.get(i, 0.0))) for i, (vs, r) in enumerate(light)]
        gone = set(h.values)
        known = [
            {
                v: tuple(x for x in vals if not (v == h.var and x[0] in gone))
                for v, vals in t.items()
            }
            for t in known
        ]
    return replace(out, heavy=tuple(splits), combine=combine) if splits else out


def _heavy(
    relations: Sequence[tuple[Sequence[str], float]],
    top: Sequence[Top],
    keep: Sequence[str],
    grid: Shares,
    tasks: int,
    cell_rows: float,
    depth: int,
    limit: int,
) -> Heavy | None:
    """The values (of the one variable where they weigh most) whose rows would put
    their cell of ``grid`` over ``cell_rows``, with a grid of their own, which splits
    its own heavy values in turn while ``depth`` allows (:func:`choose_shares`); None
    if none."""
    s = dict(grid.shares)
    top = [*top, *[{}] * (len(relations) - len(top))]  # nothing known of the others
    best: tuple[float, str, list[Any], dict[int, float]] | None = None
    for v in s:
        holders = [i for i, (vs, _) in enumerate(relations) if v in vs]
        values = dict.fromkeys(x for i in holders for x, _ in top[i].get(v, ()))
        heavy: list[Any] = []
        rows = dict.fromkeys(holders, 0.0)
        for x in values:  # at most the rows the input has here (a split's grid: fewer)
            per = {i: min(_degree(top[i], v, x), relations[i][1]) for i in holders}
            load = sum(
                d / math.prod(s[u] for u in relations[i][0] if u != v) for i, d in per.items()
            )
            # over the budget, and a real part of its cell (in a grid over the budget
            # anyway, a light value is no reason for cells of its own)
            if grid.load + load > cell_rows and 4 * load >= grid.load:
                heavy.append(x)
                for i, d in per.items():
                    rows[i] += d
        weight = sum(rows.values())
        if heavy and (best is None or weight > best[0]):
            best = (weight, v, heavy, rows)
    if best is None:
        return None
    weight, v, heavy, rows = best
    rest = [
        ([u for u in vs if u != v], min(rows[i], r) if i in rows else r)
        for i, (vs, r) in enumerate(relations)
    ]
    within = [{u: vals for u, vals in t.items() if u != v} for t in top]
    shares = _search(rest, keep, tasks, within, 0, 1, depth - 1, cell_rows, limit, tasks)
    return Heavy(v, tuple(heavy), weight, shares, rows)


def _degree(top: Top, v: str, x: Any) -> float:
    """The rows of one relation holding ``v = x``, from its most frequent values: the
    count listed, else at most the smallest one listed (0 when nothing is listed)."""
    listed = top.get(v, ())
    for y, n in listed:
        if y == x:
            return float(n)
    return float(min((n for _, n in listed), default=0))


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
