"""Seeded instances for tests, fuzzing and benchmarks: rules, relations, values, graphs.

Random rules and relations (:func:`random_rule`, :func:`random_relations`)
feed the property tests against the reference evaluator.  The graph
generators return an ``(m, 2)`` int64 array of undirected edges, one row
``(u, v)`` with ``u < v`` per edge: no self-loops, no duplicates, rows sorted.
That is the *oriented* edge list on which the rule
``Q() :- E(a, b), E(b, c), E(a, c)`` counts each triangle exactly once
(as ``a < b < c``), the same convention as :func:`faq.io.read_edge_list`.

>>> hub_graph(4).shape
(19, 2)
>>> int(triangle_count_numpy(hub_graph(4)))
9

>>> rule = random_rule(3)
>>> rule.head == tuple(v for v in rule.head if v in rule.variables)
True
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

from faq.kernel.table import ranges
from faq.rule import Atom, Rule
from semirings import Semiring

__all__ = [
    "NAMED_RULES",
    "hub_graph",
    "pairwise_join_sizes",
    "power_law_graph",
    "random_graph",
    "random_relations",
    "random_rule",
    "random_value",
    "triangle_count_numpy",
]

NAMED_RULES: dict[str, str] = {
    "triangle": "Q() :- E(a, b), E(b, c), E(a, c)",
    "triangle-free": "Q(a, b, c) :- R(a, b), S(b, c), T(a, c)",
    "4-cycle": "Q() :- R(a, b), S(b, c), T(c, d), U(d, a)",
    "4-clique": "Q() :- E(a, b), E(a, c), E(a, d), E(b, c), E(b, d), E(c, d)",
    "two-triangles": "Q(b) :- R(a, b), S(b, c), T(a, c), U(b, d), V(c, d)",
    "cycle-pendant": "Q(e) :- R(a, b), S(b, c), T(a, c), P(c, e)",
    "chain": "Q(i, l) :- A(i, j), B(j, k), C(k, l)",
    "star": "Q(x) :- A(x, a), B(x, b), C(x, c)",
    "self-loop": "Q(a) :- E(a, a), E(a, b)",
}
"""Small named queries, shared by tests and examples."""


def random_value(S: Semiring, rng: random.Random) -> Any:
    """A random non-zero value of a built-in semiring, on a grid where ⊕ and ⊗ are exact.

    Floats are multiples of 1/4 in a small range so sums and products are exact;
    the log semiring uses arbitrary floats (compare it approximately).
    """
    name = S.name
    if name == "counting":
        return rng.randint(1, 5)
    if name == "integer":
        return rng.choice([-3, -2, -1, 1, 2, 3, 4])
    if name == "boolean":
        return True
    if name in ("real",):
        return rng.choice([-2.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.0, 3.0])
    if name == "max-product":
        return rng.choice([0.25, 0.5, 1.0, 2.0, 4.0])
    if name in ("min-plus", "max-plus"):
        return float(rng.randint(-8, 8))
    if name == "log":
        return round(rng.uniform(-3.0, 3.0), 3)
    zero, one = S.zero, S.one
    if isinstance(zero, float) and isinstance(one, float):
        lo = zero if math.isfinite(zero) else -8.0
        hi = one if math.isfinite(one) else 8.0
        return float(rng.randint(int(min(lo, hi)), int(max(lo, hi))))
    return one


def random_rule(
    seed: int,
    n_vars: tuple[int, int] = (2, 5),
    n_atoms: tuple[int, int] = (1, 4),
    max_arity: int = 3,
    repeat_prob: float = 0.3,
) -> Rule:
    """A random rule: 2-5 variables, 1-4 atoms of arity 1-3, some free variables.

    Some atoms reuse an earlier relation (same name, same arity), so repeated
    relations are exercised; every variable appears in at least one atom.
    """
    rng = random.Random(seed)
    nv = rng.randint(*n_vars)
    na = rng.randint(*n_atoms)
    variables = [f"x{i}" for i in range(nv)]
    atoms: list[Atom] = []
    arities: dict[str, int] = {}
    uncovered = list(variables)
    rng.shuffle(uncovered)
    for k in range(na):
        reuse = [r for r in arities if rng.random() < repeat_prob]
        if reuse and k > 0:
            name = reuse[0]
            arity = arities[name]
        else:
            name = "R" + str(len(arities))
            arity = rng.randint(1, min(max_arity, nv))
            arities[name] = arity
        vs = []
        for _ in range(arity):
            if uncovered and (k >= na - 2 or rng.random() < 0.8):
                vs.append(uncovered.pop())
            else:
                vs.append(rng.choice(variables))
        atoms.append(Atom(name, tuple(vs)))
    while uncovered:  # make sure every variable occurs
        v = uncovered.pop()
        name = "R" + str(len(arities))
        arities[name] = 1
        atoms.append(Atom(name, (v,)))
    used = list(dict.fromkeys(v for a in atoms for v in a.vars))
    head = tuple(v for v in used if rng.random() < 0.35)
    return Rule("Q", head, tuple(atoms))


def random_relations(
    rule: Rule,
    S: Semiring,
    seed: int,
    domain: int = 4,
    density: float = 0.5,
) -> dict[str, dict[tuple[int, ...], Any]]:
    """Random sparse relations for every relation of ``rule``: ``{name: {key: value}}``."""
    rng = random.Random(seed)
    out: dict[str, dict[tuple[int, ...], Any]] = {}
    for name, arity in rule.relations.items():
        rel: dict[tuple[int, ...], Any] = {}
        cells = domain**arity
        n = max(1, int(cells * density * rng.uniform(0.3, 1.0)))
        for _ in range(n):
            key = tuple(rng.randrange(domain) for _ in range(arity))
            rel[key] = random_value(S, rng)
        out[name] = rel
    return out


def _finish(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Orient, drop self-loops and duplicates, sort: the canonical edge array."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    keep = lo != hi
    e = np.stack([lo[keep], hi[keep]], axis=1)
    if len(e) == 0:
        return e.reshape(0, 2)
    return np.unique(e, axis=0)


def hub_graph(n: int, hub_edges: int = 3) -> np.ndarray:
    """Three hubs whose leaves make every binary plan for the triangle build ~n² rows.

    Vertices, in id order: a low hub ``L = 0``; leaves ``A = 1 … n``; a middle
    hub ``M = n + 1``; leaves ``B = n + 2 … 2n + 1``; a high hub ``H = 2n + 2``.
    Edges: ``L–A``, ``A–M``, ``M–B`` and ``B–H`` (``4n`` edges), plus the
    first ``hub_edges`` of the hub-hub edges ``L–M``, ``M–H``, ``L–H``.

    On the oriented list (``u < v``) the three pairwise joins of
    ``E(a, b), E(b, c), E(a, c)`` each meet a hub of degree ~n:

    * ``E(a, b) ⋈ E(b, c)`` on ``b`` has ``Σ_v indeg(v)·outdeg(v)`` rows; ``M``
      has ``n`` smaller neighbours (``A``) and ``n`` larger ones (``B``): ≥ n²;
    * ``E(a, b) ⋈ E(a, c)`` on ``a`` has ``Σ_v outdeg(v)²`` rows; ``L`` alone
      gives n², ``M`` another n²: ≥ 2n²;
    * ``E(b, c) ⋈ E(a, c)`` on ``c`` has ``Σ_v indeg(v)²`` rows; ``H`` and ``M``
      give ≥ 2n².

    The triangles all use a hub-hub edge: ``L–M`` closes ``n`` triangles
    ``(L, a, M)``, ``M–H`` closes ``n`` triangles ``(M, b, H)``, and ``L–H``
    with both others closes ``(L, M, H)``.  So the triangle count is

    ``n · min(hub_edges, 2) + (1 if hub_edges == 3 else 0)``   (``2n + 1`` by default),

    linear in ``n`` while every binary join order builds ≥ n² intermediate
    rows.  With ``N = 4n + hub_edges`` edges the AGM bound is ``N^1.5``, and a
    worst-case optimal join does ``O(N)`` work here (every leaf has degree 2).

    Parameters
    ----------
    n : int
        Leaves per hub (≥ 1).
    hub_edges : int, default 3
        How many of the hub-hub edges ``L–M``, ``M–H``, ``L–H`` to add (0 … 3).

    Returns
    -------
    numpy.ndarray
        ``(4n + hub_edges, 2)`` int64 array, rows ``(u, v)`` with ``u < v``.

    Examples
    --------
    >>> e = hub_graph(1000)
    >>> len(e), int(triangle_count_numpy(e))
    (4003, 2001)
    """
    if n < 1:
        raise ValueError(f"hub_graph: n must be ≥ 1, got {n}")
    if not 0 <= hub_edges <= 3:
        raise ValueError(f"hub_graph: hub_edges must be in 0 … 3, got {hub_edges}")
    L, M, H = 0, n + 1, 2 * n + 2
    A = np.arange(1, n + 1, dtype=np.int64)
    B = np.arange(n + 2, 2 * n + 2, dtype=np.int64)
    full = lambda x: np.full(n, x, dtype=np.int64)  # noqa: E731
    u = [full(L), A, full(M), B]
    v = [A, full(M), B, full(H)]
    hubs = [(L, M), (M, H), (L, H)][:hub_edges]
    u.append(np.array([h[0] for h in hubs], dtype=np.int64))
    v.append(np.array([h[1] for h in hubs], dtype=np.int64))
    return _finish(np.concatenate(u), np.concatenate(v))


def _check_size(n_nodes: int, n_edges: int, name: str) -> None:
    if n_nodes < 2 and n_edges > 0:
        raise ValueError(f"{name}: need at least 2 nodes for an edge, got n_nodes={n_nodes}")
    most = n_nodes * (n_nodes - 1) // 2
    if not 0 <= n_edges <= most:
        raise ValueError(
            f"{name}: n_edges={n_edges} is outside 0 … {most} (a simple graph on {n_nodes} nodes)"
        )


def _sample_edges(
    n_nodes: int, n_edges: int, rng: np.random.Generator, p: np.ndarray | None, name: str
) -> np.ndarray:
    """``n_edges`` distinct undirected edges with endpoints drawn independently from ``p``.

    Draws rounds of endpoint pairs (vectorised), keeps the distinct non-loop
    ones in the order first drawn, and stops at ``n_edges``.
    """
    _check_size(n_nodes, n_edges, name)
    if n_edges == 0:
        return np.empty((0, 2), dtype=np.int64)
    keys = np.empty(0, dtype=np.int64)  # distinct lo * n + hi, in first-drawn order
    for _ in range(200):
        need = n_edges - len(keys)
        if need <= 0:
            break
        batch = int(need * 1.2) + 64
        if p is None:
            u = rng.integers(0, n_nodes, size=batch, dtype=np.int64)
            v = rng.integers(0, n_nodes, size=batch, dtype=np.int64)
        else:
            u = rng.choice(n_nodes, size=batch, p=p).astype(np.int64)
            v = rng.choice(n_nodes, size=batch, p=p).astype(np.int64)
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        new = (lo * n_nodes + hi)[lo != hi]
        allk = np.concatenate([keys, new])
        _, first = np.unique(allk, return_index=True)
        keys = allk[np.sort(first)]
    else:
        raise ValueError(
            f"{name}: could not draw {n_edges} distinct edges on {n_nodes} nodes "
            f"(got {len(keys)}); the degree distribution is too concentrated for that "
            "many edges; use more nodes or fewer edges"
        )
    keys = np.sort(keys[:n_edges])
    return np.stack([keys // n_nodes, keys % n_nodes], axis=1)


def random_graph(n_nodes: int, n_edges: int, seed: int = 0) -> np.ndarray:
    """An Erdős–Rényi ``G(n, m)`` graph: ``n_edges`` distinct edges, uniform over pairs.

    Parameters
    ----------
    n_nodes : int
        Vertex ids are ``0 … n_nodes - 1`` (isolated vertices do not appear).
    n_edges : int
        Exact number of edges, at most ``n_nodes·(n_nodes − 1)/2``.
    seed : int, default 0
        Seed of :func:`numpy.random.default_rng`; equal seeds give equal graphs.

    Returns
    -------
    numpy.ndarray
        ``(n_edges, 2)`` int64 array, rows ``(u, v)`` with ``u < v``, sorted.

    Examples
    --------
    >>> e = random_graph(100, 300, seed=1)
    >>> e.shape, bool((e[:, 0] < e[:, 1]).all())
    ((300, 2), True)
    """
    rng = np.random.default_rng(seed)
    return _sample_edges(n_nodes, n_edges, rng, None, "random_graph")


def power_law_graph(n_nodes: int, n_edges: int, seed: int = 0, exponent: float = 2.1) -> np.ndarray:
    """A Chung–Lu graph with a power-law expected degree sequence.

    Vertex ``i`` gets weight ``w_i = (i + 1)^(-1/(exponent - 1))``, so the
    expected degrees follow a power law ``P(deg = k) ~ k^(-exponent)``; both
    endpoints of every edge are drawn independently with probability
    proportional to ``w``, repeated edges and self-loops are dropped, and
    drawing continues until there are exactly ``n_edges`` distinct edges.  Ids
    are then shuffled, so hubs are spread over the id range (the orientation
    ``u < v`` does not follow degree).  For ``exponent`` near 2 the largest
    degrees are a sizeable fraction of ``n_nodes``.

    Parameters
    ----------
    n_nodes : int
        Vertex ids are ``0 … n_nodes - 1``.
    n_edges : int
        Exact number of edges.
    seed : int, default 0
        Seed of :func:`numpy.random.default_rng`.
    exponent : float, default 2.1
        Power-law exponent ``γ > 1`` of the degree distribution (smaller is more skewed).

    Returns
    -------
    numpy.ndarray
        ``(n_edges, 2)`` int64 array, rows ``(u, v)`` with ``u < v``, sorted.

    Raises
    ------
    ValueError
        ``exponent ≤ 1``, or more edges than the graph can hold (or than the
        skewed distribution can realistically produce).

    Examples
    --------
    >>> e = power_law_graph(1000, 3000, seed=2)
    >>> deg = np.bincount(e.ravel(), minlength=1000)
    >>> e.shape, bool(deg.max() > 10 * deg.mean())
    ((3000, 2), True)
    """
    if exponent <= 1:
        raise ValueError(f"power_law_graph: exponent must be > 1, got {exponent}")
    rng = np.random.default_rng(seed)
    w = np.arange(1, n_nodes + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0))
    e = _sample_edges(n_nodes, n_edges, rng, w / w.sum(), "power_law_graph")
    perm = rng.permutation(n_nodes).astype(np.int64)
    return _finish(perm[e[:, 0]], perm[e[:, 1]]) if len(e) else e


def triangle_count_numpy(edges: np.ndarray, block_paths: int = 20_000_000) -> int:
    """Number of triangles of an undirected graph, with numpy alone (a test oracle).

    The edges are oriented from lower to higher (degree, id) rank, which is
    acyclic, so every triangle ``u → v → w`` with ``u → w`` is found once, by
    checking for every edge ``u → v`` and every out-neighbour ``w`` of ``v``
    whether ``u → w`` is an edge (a binary search among the sorted edge keys).
    With this orientation out-degrees are at most ``√(2m)``, so there are
    ``O(m^1.5)`` such 2-paths (on :func:`hub_graph`, ``O(n)`` instead of the
    ``n²`` of the id order).  Edges are processed in blocks of at most
    ``block_paths`` 2-paths to bound memory.

    Parameters
    ----------
    edges : numpy.ndarray
        ``(m, 2)`` integer array of undirected edges, in any orientation;
        self-loops and duplicate edges (either direction) are ignored.
    block_paths : int, default 20_000_000
        Approximate number of 2-paths per block.

    Returns
    -------
    int
        The triangle count.

    Examples
    --------
    >>> triangle_count_numpy(np.array([[0, 1], [1, 2], [0, 2], [2, 3]]))
    1
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = _finish(e[:, 0], e[:, 1])
    if len(e) == 0:
        return 0
    ids, inv = np.unique(e, return_inverse=True)
    inv = inv.reshape(-1, 2)
    k = len(ids)
    deg = np.bincount(inv.ravel(), minlength=k)
    rank = np.empty(k, dtype=np.int64)
    rank[np.lexsort((np.arange(k), deg))] = np.arange(k)
    r = rank[inv]
    lo, hi = np.minimum(r[:, 0], r[:, 1]), np.maximum(r[:, 0], r[:, 1])
    keys = np.sort(lo * k + hi)  # sorted by (lo, hi): a CSR of out-neighbours
    lo, hi = keys // k, keys % k
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(lo, minlength=k), out=indptr[1:])
    paths = np.diff(indptr)[hi]  # 2-paths u → v → w through each edge u → v
    cum = np.cumsum(paths)
    total, start = 0, 0
    while start < len(keys):
        base = cum[start - 1] if start else 0
        stop = max(int(np.searchsorted(cum, base + block_paths, side="right")), start + 1)
        counts = paths[start:stop]
        w = hi[ranges(indptr[hi[start:stop]], counts)]
        probe = np.repeat(lo[start:stop], counts) * k + w
        pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        total += int(np.count_nonzero(keys[pos] == probe))
        start = stop
    return total


def pairwise_join_sizes(edges: np.ndarray) -> dict[str, int]:
    """Row counts of the three pairwise joins of ``E(a, b), E(b, c), E(a, c)``.

    On the oriented list (``u < v``, as given): ``"ab⋈bc"`` (on ``b``) is
    ``Σ indeg·outdeg``, ``"ab⋈ac"`` (on ``a``) is ``Σ outdeg²`` and ``"bc⋈ac"``
    (on ``c``) is ``Σ indeg²``: the smallest is what the best binary plan builds.

    >>> pairwise_join_sizes(hub_graph(100))
    {'ab⋈bc': 10401, 'ab⋈ac': 20805, 'bc⋈ac': 20805}
    """
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    k = int(e.max()) + 1 if len(e) else 0
    out = np.bincount(e[:, 0], minlength=k).astype(np.int64)
    inn = np.bincount(e[:, 1], minlength=k).astype(np.int64)
    return {
        "ab⋈bc": int((inn * out).sum()),
        "ab⋈ac": int((out * out).sum()),
        "bc⋈ac": int((inn * inn).sum()),
    }
