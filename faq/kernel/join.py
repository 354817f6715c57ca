"""Generic Join: the worst-case optimal join of a bag of tables over their tries.

This is the engine's local backend.  It runs in the driver (small plans,
incremental deltas) and inside Spark tasks (:mod:`faq.spark.tasks`), always on the
same data structures:

* a :class:`Table` is a relation as numpy arrays: one key column per
  variable and an annotation array (``None`` when every annotation is one);
* a :class:`Trie` indexes a table by a variable order: level ``d`` holds the
  distinct prefixes of length ``d + 1``, each level's values sorted within
  their parent, with CSR offsets to the children (the index of Leapfrog
  Triejoin and of the edge-frames and BiGJoin systems);
* :func:`generic_join` joins a bag of tables by Generic Join, binding one
  variable at a time for a whole batch of prefixes at once: every relation
  that contains the variable counts its candidates per prefix, the one with
  the fewest proposes them, and the others keep the candidates they contain
  (a binary search inside each prefix's child range).  Annotations are
  ⊗-multiplied when a relation's last variable is bound, and the result is
  ⊕-reduced onto the output variables before it leaves the function.

The work is bounded by the AGM bound of the bag (O(N^1.5) on a triangle) up
to a logarithmic factor, and memory by ``chunk`` candidates at a time.  The
searches are compiled with numba when it is installed (``faq.kernel.NUMBA``; see
:mod:`faq.kernel.compiled`); otherwise a vectorised numpy search over composite keys does the
same.

Notes
-----
Ngo, Ré, Rudra, "Skew strikes back: new developments in the theory of join
algorithms" (SIGMOD Record 2013); Veldhuizen, "Leapfrog Triejoin" (ICDT
2014); Ammar, McSherry, Salihoglu, Joglekar, "Distributed evaluation of
subgraph queries using worst-case optimal low-memory dataflows" (VLDB 2018).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

import faq.kernel.compiled as compiled
from faq.kernel.table import Table, concat, group_reduce, ranges
from faq.kernel.trie import NUMBA, Trie, build_trie
from semirings.local import LocalOps, row_codes

__all__ = ["CHUNK", "JoinStats", "generic_join", "generic_join_threads", "index", "pair_join"]

CHUNK = 1 << 21
"""Most candidate rows one extension step materialises at a time (memory bound)."""


# -- Generic Join ------------------------------------------------------------------------------
@dataclass
class _Prefixes:
    """A batch of prefixes: output variables bound so far, weights, one node per trie."""

    cols: dict[str, np.ndarray]
    w: np.ndarray | None
    nodes: list[np.ndarray | None]  # None once a trie is fully bound (no longer needed)
    n: int


@dataclass
class JoinStats:
    """Work done by :func:`generic_join`: candidates proposed and prefixes kept, per level."""

    proposed: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)

    def add(self, level: int, proposed: int, kept: int) -> None:
        while len(self.proposed) <= level:
            self.proposed.append(0)
            self.kept.append(0)
        self.proposed[level] += proposed
        self.kept[level] += kept


def generic_join(
    tables: Sequence[Table],
    order: Sequence[str],
    keep: Sequence[str],
    ops: LocalOps,
    *,
    seed: Table | None = None,
    tries: Sequence[Trie] | None = None,
    part: tuple[int, int] | None = None,
    chunk: int = CHUNK,
    stats: JoinStats | None = None,
) -> Table:
    """The natural join of ``tables``, annotations ⊗-multiplied, ⊕-aggregated onto ``keep``.

    Parameters
    ----------
    tables : sequence of Table
        The bag (distinct keys each).  A variable may occur in several tables.
    order : sequence of str
        Binding order: every variable of the bag once.  With ``seed``, the
        seed's variables come first.
    keep : sequence of str
        Output variables (a subset of the bag's); the others are ⊕-aggregated.
    ops : LocalOps
        The semiring's numpy operations.
    seed : Table, optional
        A (small) table whose rows are the initial prefixes: its variables are
        bound first, all at once; the other tables are then searched at those
        values only (the delta query of incremental maintenance).
    tries : sequence of Trie, optional
        Prebuilt indexes of ``tables`` by ``order`` (see :func:`index`).
    part : (int, int), optional
        ``(t, T)``: only the ``t``-th of ``T`` equal slices of the candidates
        proposed at the second level (the first when there is one variable),
        so that ``T`` tasks share the work and a hub's neighbours spread
        over several tasks.  The union over ``t`` of the results, ⊕-reduced,
        is the full result.
    chunk : int
        Most candidates materialised at once.
    stats : JoinStats, optional
        Filled with the number of candidates proposed and kept per level.

    Returns
    -------
    Table
        Over ``keep``: one row per key, zero annotations dropped.
    """
    order = tuple(order)
    keep = tuple(keep)
    if tries is None:
        tries = index(tables, order, ops)
    acc = _Accumulator(keep, ops)
    start = _start(tries, order, keep, ops, seed)
    if start is None:
        return acc.result()
    first, bound = start
    levels = order[len(bound) :]
    if not levels:
        acc.add(first)
        return acc.result()
    split_at = min(1, len(levels) - 1) if part is not None else -1
    _descend(first, 0, levels, bound, tries, keep, ops, acc, chunk, part, split_at, stats)
    return acc.result()


def generic_join_threads(
    tables: Sequence[Table],
    order: Sequence[str],
    keep: Sequence[str],
    ops: LocalOps,
    threads: int,
    *,
    tries: Sequence[Trie] | None = None,
    stats: JoinStats | None = None,
) -> Table:
    """:func:`generic_join` split into ``2 * threads`` slices run on ``threads`` threads.

    The compiled searches release the GIL, so the slices run in parallel in
    the driver; their results are ⊕-combined.
    """
    from concurrent.futures import ThreadPoolExecutor

    if tries is None:
        tries = index(tables, order, ops)
    T = 2 * threads
    parts: list[Table] = []
    per = [JoinStats() for _ in range(T)]

    def one(t: int) -> Table:
        return generic_join(tables, order, keep, ops, tries=tries, part=(t, T), stats=per[t])

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(one, range(T)))
    if stats is not None:
        for s in per:
            for level, (a, b) in enumerate(zip(s.proposed, s.kept, strict=True)):
                stats.add(level, a, b)
    keep = tuple(keep)
    return group_reduce(concat(parts, ops), keep, ops)


def index(tables: Sequence[Table], order: Sequence[str], ops: LocalOps | None = None) -> list[Trie]:
    """One trie per table, by ``order`` restricted to its variables.

    Tables that are views of the same arrays (``E(a, b)`` and ``E(b, c)`` of
    one relation ``E``) indexed in the same column order share one trie.
    ``ops`` consolidates tables whose keys may repeat.
    """
    made: dict[tuple[int, ...], Trie] = {}
    out = []
    for t in tables:
        o = tuple(v for v in order if v in t.vars)
        key = (*(id(t.col(v)) for v in o), id(t.values), t.rows)
        hit = made.get(key)
        if hit is None:
            hit = made[key] = build_trie(t, o, ops)
        out.append(hit if hit.order == o else replace(hit, order=o))
    return out


def _start(
    tries: Sequence[Trie],
    order: tuple[str, ...],
    keep: tuple[str, ...],
    ops: LocalOps,
    seed: Table | None,
) -> tuple[_Prefixes, tuple[str, ...]] | None:
    """The initial prefixes (the root, or the seed's rows walked into every trie)."""
    if any(tr.rows == 0 for tr in tries) or (seed is not None and seed.rows == 0):
        return None
    if seed is None:
        root = _Prefixes({}, None, [np.zeros(1, dtype=np.int64) for _ in tries], 1)
        for j, tr in enumerate(tries):
            if tr.depth == 0:  # a table without variables: one row, its annotation
                root.w = _times(root.w, tr.values, ops)
                root.nodes[j] = None
        return root, ()
    bound = tuple(order[: len(seed.vars)])
    if set(bound) != set(seed.vars):
        raise ValueError(f"binding order {order} must start with the seed's variables {seed.vars}")
    n = seed.rows
    p = _Prefixes({v: seed.col(v) for v in keep if v in seed.vars}, seed.values, [], n)
    alive = np.arange(n, dtype=np.int64)
    nodes: list[np.ndarray | None] = []
    for tr in tries:
        node = np.zeros(len(alive), dtype=np.int64)
        d = 0
        while d < tr.depth and tr.order[d] in bound:
            node = tr.lookup(d, node, seed.col(tr.order[d])[alive])
            ok = node >= 0
            if not ok.all():
                idx = np.flatnonzero(ok)
                alive, node = alive[idx], node[idx]
                nodes = [x if x is None else x[idx] for x in nodes]
            d += 1
        nodes.append(node)
    p = _Prefixes(
        {v: c[alive] for v, c in p.cols.items()},
        None if p.w is None else p.w[alive],
        nodes,
        len(alive),
    )
    for j, tr in enumerate(tries):  # tries bound completely by the seed: multiply them in
        if all(v in bound for v in tr.order):
            p.w = _times(p.w, None if tr.values is None else tr.values[p.nodes[j]], ops)
            p.nodes[j] = None
    return p, bound


# -- two tables ---------------------------------------------------------------------------------
def pair_join(left: Table, right: Table, out: Sequence[str], ops: LocalOps) -> Table | None:
    """The join of two tables on their shared variables, each pair's annotations
    ⊗-multiplied (``left``'s first), ⊕-reduced onto ``out`` (no zeros).

    One sort of ``right``'s join keys and two binary searches per row of ``left``:
    no trie and no plan, for a join whose one side is small (a delta rule's term of
    two atoms).  The ⊕ runs in key order, as :func:`group_reduce` does.

    Returns None where it does not apply: no shared variable, a variable of ``out``
    in neither table, join columns of different kinds, or several join variables
    whose values are not integers of ranges that code a row as one int64.

    >>> from semirings import get
    >>> from semirings.local import local_ops
    >>> o = local_ops(get("min-plus"))
    >>> d = Table(("x",), (np.array([1, 2]),), np.array([0.0, 5.0]))
    >>> e = Table(("x", "y"), (np.array([1, 1, 2]), np.array([7, 8, 8])), np.array([3.0, 1.0, 1.0]))
    >>> got = pair_join(d, e, ("y",), o)
    >>> got.cols[0].tolist(), got.values.tolist()
    ([7, 8], [3.0, 1.0])
    """
    shared = [v for v in left.vars if v in right.vars]
    if not shared or any(v not in left.vars and v not in right.vars for v in out):
        return None
    if len(shared) == 1:
        kl, kr = left.col(shared[0]), right.col(shared[0])
        if kl.dtype.kind != kr.dtype.kind and not {kl.dtype.kind, kr.dtype.kind} <= set("iu"):
            return None
    else:
        both = [np.concatenate([left.col(v), right.col(v)]) for v in shared]
        if not all(c.dtype.kind in "iu" for c in both):
            return None
        coded = row_codes(both) if len(both[0]) else ([], [], np.empty(0, np.int64))
        if coded is None:
            return None
        kl, kr = coded[2][: left.rows], coded[2][left.rows :]
    order = np.argsort(kr, kind="stable")
    ks = kr[order]
    lo = np.searchsorted(ks, kl, side="left")
    counts = np.searchsorted(ks, kl, side="right") - lo
    li = np.repeat(np.arange(left.rows, dtype=np.int64), counts)
    ri = order[ranges(lo, counts)]
    wl = None if left.values is None else left.values[li]
    wr = None if right.values is None else right.values[ri]
    cols = tuple(left.col(v)[li] if v in left.vars else right.col(v)[ri] for v in out)
    return group_reduce(Table(tuple(out), cols, _times(wl, wr, ops), unique=False), out, ops)


def _times(w: np.ndarray | None, v: np.ndarray | None, ops: LocalOps) -> np.ndarray | None:
    if v is None:
        return w
    if w is None:
        return v
    return ops.mul(w, v)


def _descend(
    p: _Prefixes,
    level: int,
    levels: tuple[str, ...],
    bound: tuple[str, ...],
    tries: Sequence[Trie],
    keep: tuple[str, ...],
    ops: LocalOps,
    acc: _Accumulator,
    chunk: int,
    part: tuple[int, int] | None,
    split_at: int,
    stats: JoinStats | None,
) -> None:
    """Bind ``levels[level]`` for the prefixes ``p``, then recurse (chunk by chunk)."""
    x = levels[level]
    last = level == len(levels) - 1
    done = (*bound, *levels[:level])
    for nxt in _extend(
        p,
        x,
        done,
        tries,
        keep,
        ops,
        chunk,
        part if level == split_at else None,
        last and x not in keep,
        level,
        # the levels above the split are the same in every slice: slice 0 counts them
        stats if part is None or level >= split_at or part[0] == 0 else None,
    ):
        if nxt.n == 0:
            continue
        if last:
            acc.add(nxt)
        else:
            _descend(
                nxt, level + 1, levels, bound, tries, keep, ops, acc, chunk, part, split_at, stats
            )


def _extend(
    p: _Prefixes,
    x: str,
    done: tuple[str, ...],
    tries: Sequence[Trie],
    keep: tuple[str, ...],
    ops: LocalOps,
    chunk: int,
    part: tuple[int, int] | None,
    fold: bool,
    level: int,
    stats: JoinStats | None,
) -> Iterator[_Prefixes]:
    """Extend every prefix by ``x``: count, propose, intersect; batches of ≤ ``chunk``.

    Every trie containing ``x`` counts its candidates per prefix; the one with
    the fewest proposes them and the others keep those they contain.  With
    ``fold`` (``x`` is bound last and not kept) the candidates of each prefix
    are ⊕-reduced into it instead of becoming prefixes of their own.
    """
    rel = [j for j, tr in enumerate(tries) if p.nodes[j] is not None and x in tr.order]
    depth = {j: sum(1 for v in tries[j].order if v in done) for j in rel}
    counts = [tries[j].count(depth[j], p.nodes[j]) for j in rel]
    if len(rel) == 1:
        proposer = np.zeros(p.n, dtype=np.int64)
        fewest = counts[0]
    else:
        stacked = np.stack(counts)
        proposer = np.argmin(stacked, axis=0)
        fewest = stacked[proposer, np.arange(p.n)]
    skip = np.zeros(p.n, dtype=np.int64)
    if part is not None:  # keep one slice of the flattened candidate list
        fewest, skip = _slice(fewest, part)
    members = np.flatnonzero(fewest > 0)
    L = _Level(x, rel, depth, tries, keep, ops, fold, level, stats)
    fast = NUMBA and all(tries[j].vals[depth[j]].dtype.kind in "iu" for j in rel)
    for sub in _batches(members, fewest[members], chunk):
        if fast:
            yield _intersect(p, sub, proposer[sub], fewest[sub], skip[sub], L)
            continue
        for g_pos, j in enumerate(rel):
            group = sub[proposer[sub] == g_pos]
            if len(group):
                yield _propose(p, group, j, fewest[group], skip[group], L)


def _slice(fewest: np.ndarray, part: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Counts and offsets that keep slice ``t`` of ``T`` of the flattened candidates."""
    t, T = part
    ends = np.cumsum(fewest)
    total = int(ends[-1]) if len(ends) else 0
    lo, hi = total * t // T, total * (t + 1) // T
    begins = ends - fewest
    skip = np.clip(lo - begins, 0, fewest)
    take = np.clip(np.minimum(ends, hi) - begins - skip, 0, None)
    return take, skip


def _batches(members: np.ndarray, counts: np.ndarray, chunk: int) -> Iterator[np.ndarray]:
    total = int(counts.sum())
    if total <= chunk:
        yield members
        return
    cum = np.cumsum(counts)
    begin = 0
    while begin < len(members):
        base = cum[begin - 1] if begin else 0
        end = max(int(np.searchsorted(cum, base + chunk, side="right")), begin + 1)
        yield members[begin:end]
        begin = end


@dataclass(frozen=True)
class _Level:
    """What extending by one variable needs: the variable, the tries that hold it (``rel``)
    and how deep each trie is bound (``depth``), and what the step keeps and counts."""

    x: str
    rel: list[int]
    depth: dict[int, int]
    tries: Sequence[Trie]
    keep: tuple[str, ...]
    ops: LocalOps
    fold: bool
    level: int
    stats: JoinStats | None


def _intersect(
    p: _Prefixes,
    sub: np.ndarray,
    proposer: np.ndarray,
    take: np.ndarray,
    skip: np.ndarray,
    L: _Level,
) -> _Prefixes:
    """The compiled extension: a k-way intersection of sorted child lists per prefix."""
    rel, depth, tries, ops, stats, level = L.rel, L.depth, L.tries, L.ops, L.stats, L.level
    vals = tuple(tries[j].vals[depth[j]] for j in rel)
    starts = tuple(tries[j].starts[depth[j]] for j in rel)
    nodes = tuple(np.ascontiguousarray(p.nodes[j][sub]) for j in rel)
    proposer = proposer.astype(np.int64)
    if L.fold and all(tries[j].values is None for j in rel):  # only how many: count them
        counts = compiled.count(vals, starts, nodes, proposer, skip, take)
        if stats is not None:
            stats.add(level, int(take.sum()), int(counts.sum()))
        alive = np.flatnonzero(counts)
        owners = sub[alive]
        n = ops.ones(counts[alive])
        w = n if p.w is None else ops.mul(p.w[owners], n)
        return _Prefixes({v: c[owners] for v, c in p.cols.items()}, w, [], len(owners))
    owner, pos = compiled.intersect(vals, starts, nodes, proposer, skip, take, int(take.sum()))
    if stats is not None:
        stats.add(level, int(take.sum()), len(owner))
    found = {j: pos[i] for i, j in enumerate(rel)}
    return _grow(p, sub[owner], found, vals[0][pos[0]], L)


def _propose(
    p: _Prefixes, sub: np.ndarray, j: int, counts: np.ndarray, skip: np.ndarray, L: _Level
) -> _Prefixes:
    """Candidates of prefixes ``sub`` from trie ``j``, kept where every other trie has them
    (numpy: a binary search per candidate)."""
    rel, depth, tries = L.rel, L.depth, L.tries
    tr = tries[j]
    d = depth[j]
    child = ranges(tr.starts[d][p.nodes[j][sub]] + skip, counts)
    pidx = np.repeat(sub, counts)
    xv = tr.vals[d][child]
    found: dict[int, np.ndarray] = {j: child}
    proposed = len(child)
    for k in rel:
        if k == j:
            continue
        ck = tries[k].lookup(depth[k], p.nodes[k][pidx], xv)
        ok = ck >= 0
        if not ok.all():
            idx = np.flatnonzero(ok)
            pidx, xv, ck = pidx[idx], xv[idx], ck[idx]
            found = {r: a[idx] for r, a in found.items()}
        found[k] = ck
    if L.stats is not None:
        L.stats.add(L.level, proposed, len(pidx))
    return _grow(p, pidx, found, xv, L)


def _grow(
    p: _Prefixes, pidx: np.ndarray, found: dict[int, np.ndarray], xv: np.ndarray, L: _Level
) -> _Prefixes:
    """The prefixes extended by ``x = xv`` (``pidx``: the prefix each extends, sorted;
    ``found``: each trie's child node): weights multiplied where a trie is complete."""
    depth, tries, ops = L.depth, L.tries, L.ops
    w = None if p.w is None else p.w[pidx]
    nodes: list[np.ndarray | None] = []
    for r, tr_r in enumerate(tries):
        if p.nodes[r] is None:
            nodes.append(None)
        elif r in found:
            if depth[r] + 1 == tr_r.depth:  # complete: multiply its annotation in
                if tr_r.values is not None:
                    w = _times(w, tr_r.values[found[r]], ops)
                nodes.append(None)
            else:
                nodes.append(found[r])
        else:
            nodes.append(p.nodes[r][pidx])
    if L.fold:  # ⊕ the candidates of each prefix into it (pidx is sorted)
        if len(pidx) == 0:
            return _Prefixes({}, None, [], 0)
        starts = np.flatnonzero(np.r_[True, pidx[1:] != pidx[:-1]])
        owners = pidx[starts]
        if w is None:
            w = ops.ones(np.diff(np.append(starts, len(pidx))))
        else:
            w = ops.reduceat(w, starts)
        cols = {v: c[owners] for v, c in p.cols.items()}
        return _Prefixes(cols, w, [], len(owners))
    cols = {v: c[pidx] for v, c in p.cols.items()}
    if L.x in L.keep:
        cols[L.x] = xv
    return _Prefixes(cols, w, nodes, len(pidx))


class _Accumulator:
    """Partial results ⊕-reduced onto ``keep`` as they come, compacted when they pile up."""

    def __init__(self, keep: tuple[str, ...], ops: LocalOps) -> None:
        self.keep = keep
        self.ops = ops
        self.parts: list[Table] = []
        self.rows = 0

    def add(self, p: _Prefixes) -> None:
        if p.n == 0:
            return
        if self.keep:
            t = Table(self.keep, tuple(p.cols[v] for v in self.keep), p.w, unique=False)
        else:
            t = _scalar_table(p, self.ops)
        self.parts.append(t)
        self.rows += t.rows
        if self.rows > 4 * CHUNK and len(self.parts) > 1:
            self.parts = [group_reduce(concat(self.parts, self.ops), self.keep, self.ops)]
            self.rows = self.parts[0].rows

    def result(self) -> Table:
        if not self.parts:
            return Table(
                self.keep,
                tuple(np.empty(0, dtype=np.int64) for _ in self.keep),
                np.empty(0, dtype=self.ops.dtype),
            )
        return group_reduce(concat(self.parts, self.ops), self.keep, self.ops)


def _scalar_table(p: _Prefixes, ops: LocalOps) -> Table:
    """The prefixes' total as a one-row table without variables."""
    if p.w is None:
        total = ops.ones(np.array([p.n], dtype=np.int64))
    else:
        total = ops.reduceat(p.w, np.zeros(1, dtype=np.int64))
    return Table((), (), np.asarray(total, dtype=ops.dtype), unique=True)
