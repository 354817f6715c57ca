"""Witnesses of a program's answer: per key, the bound variables of a rule attaining its
value (``witness_frame``), and the paths they make (``out.path(key)``).

A path is read off the witnesses' own pointers first (:class:`PointerPaths`, time
proportional to the path); the tree below answers where those cannot.

A witness of a recursive rule such as ``D(y) :- D(x), E(x, y)`` names a predecessor
``x`` whose value, ⊗ the edge, attains ``D(y)``.  Following one witness per key need not
end at a source: where values tie (a zero-weight cycle in min-plus, weight-1 edges in
max-product, equal bottlenecks), two keys may name each other.  So :class:`WitnessPaths`
builds a tree instead, once, on the first call of ``path``:

* the *tight* derivations: per recursive rule, the ⊕ of its instances per head key and
  key of its recursive atom (the rule with that atom's variables added to its head, one
  solve), kept where it equals the head key's value; per base rule, the keys it
  attains (the *sources*);
* a breadth-first search from the sources along them: every key gets as parent a key
  reached one level earlier, so parents never loop and a path has the fewest steps of
  any path of tight derivations.

Where ⊗ is strictly monotone (min-plus, max-plus, max-product, boolean) every key of the
answer is reached: a key's value is first derived in some round, from keys whose values
were final one round earlier.  Only a rule that reads one relation of its recursive
group (a *linear* one) has paths; a rule that reads two (``T(x, z) :- T(x, y), T(y,
z)``) has trees of witnesses, and ``path`` refuses it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from faq.factor import Factor
from faq.kernel.table import Table
from faq.query import Query
from faq.rule import Rule
from semirings import Semiring
from semirings.local import equal

__all__ = ["PointerPaths", "WitnessPaths", "answer_witnesses"]

Key = tuple[Any, ...]
Node = tuple[str, Key]
Relations = Callable[[Rule], dict[str, Factor]]
"""The factors a rule reads: inputs, and the defined relations' final tables."""


def answer_witnesses(
    rules: Sequence[Rule],
    S: Semiring,
    name: str,
    head: tuple[str, ...],
    final: Table,
    relations: Relations,
    opts: Mapping[str, Any],
) -> pd.DataFrame:
    """Per key of relation ``name`` (its ``final`` table, over ``head``), the bound variables
    of the first of ``rules`` attaining its value (named as in that rule, with ``_``
    appended while a name is one of ``head``; None where the rule has no such variable)."""
    want = pd.DataFrame({v: c for v, c in zip(head, final.cols, strict=True)})
    want["value"] = final.values if final.values is not None else S.one
    found = want[list(head)].copy()
    done = np.zeros(len(found), dtype=bool)
    for r in rules:
        if r.name != name:
            continue
        names = dict(zip(r.head, head, strict=True))
        for b in r.bound:
            names[b] = b
            while names[b] in head:
                names[b] += "_"
            if names[b] not in found:
                found[names[b]] = None
        f = Query(r, S).solve(witness=True, **opts, **relations(r))
        w = f.witness_frame.rename(columns=names)
        w = w.astype({names[b]: object for b in r.bound})  # a left merge keeps ints
        m = want.merge(w, on=list(head), how="left", suffixes=("", "_rule"), indicator=True)
        hit = (m["_merge"] == "both").to_numpy() & ~done
        hit &= (m["value_rule"] == m["value"]).to_numpy()
        for b in r.bound:
            found.loc[hit, names[b]] = m.loc[hit, names[b]].to_numpy()
        done |= hit
    return found


class WitnessPaths:
    """The paths of witnesses of a program's answer (see the module docstring).

    Parameters
    ----------
    rules : sequence of Rule
        The rules of the answer's group: ``base`` read none of ``group``, the others do.
    group : tuple of str
        The relations of the answer's group (one strongly connected group).
    answer : str
        The answer relation.
    S : Semiring
        The program's semiring.
    final : mapping of str to Table
        The group's relations at the fixpoint.
    relations : callable
        The factors a rule reads.
    opts : mapping
        ``order``, ``join`` and ``backend`` of every solve.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        group: tuple[str, ...],
        answer: str,
        S: Semiring,
        final: Mapping[str, Table],
        relations: Relations,
        opts: Mapping[str, Any],
    ) -> None:
        self.rules = tuple(r for r in rules if r.name in group)
        self.group = group
        self.answer = answer
        self.S = S
        self.final = dict(final)
        self.relations = relations
        self.opts = dict(opts)
        self._parent: dict[Node, Node | None] | None = None
        self._refusal = self._nonlinear()

    def path(self, key: Any) -> list[Key]:
        """The keys from a source (a key a base rule attains) to ``key``, along witnesses:
        each key's value is attained by a rule instance reading the key before it.

        ``key`` is a key tuple of the answer (a bare value for an answer of one variable).
        Where relations depend on each other (``Ev``/``Od``), consecutive keys belong to
        the relations the rules read in turn.

        Raises
        ------
        ValueError
            ``key`` is not a key of the answer, or a rule of the answer's group reads two
            of its recursive relations (its witnesses make trees, not paths).
        """
        want = key if isinstance(key, tuple) else (key,)
        keys = self._keys(self.answer)
        want = tuple(v.item() if hasattr(v, "item") else v for v in want)
        if want not in keys:
            arity = len(next(iter(keys))) if keys else None
            shape = f" (keys have {arity} value(s))" if arity and arity != len(want) else ""
            raise ValueError(
                f"path: key {key!r} is not in the answer {self.answer!r} ({len(keys):,} "
                f"keys){shape}"
            )
        if self._refusal:
            raise ValueError(self._refusal)
        parent = self._tree()
        node: Node | None = (self.answer, want)
        if node not in parent:
            raise ValueError(
                f"path: no chain of attaining derivations reaches {self.answer}{want!r} from a "
                "source (floating-point values that do not equal the derivations' own?)"
            )
        out: list[Key] = []
        while node is not None:
            out.append(node[1])
            node = parent[node]
        return out[::-1]

    # -- the tree ----------------------------------------------------------------------------
    def _nonlinear(self) -> str:
        for r in self.rules:
            inner = [a for a in r.atoms if a.relation in self.group]
            if len(inner) > 1:
                return (
                    f"path: rule {r} reads {len(inner)} atoms of the recursive relation(s) "
                    f"{', '.join(map(repr, self.group))}: its witnesses make trees, not "
                    "paths (use out.witnesses())"
                )
        return ""

    def _keys(self, name: str) -> dict[Key, Any]:
        t = self.final[name]
        cols = [c.tolist() for c in t.cols]
        values = t.values.tolist() if t.values is not None else [self.S.one] * t.rows
        return dict(zip(zip(*cols, strict=True), values, strict=True)) if cols else {}

    def _tree(self) -> dict[Node, Node | None]:
        if self._parent is not None:
            return self._parent
        value = {n: self._keys(n) for n in self.group}
        sources: list[Node] = []
        edges: dict[Node, list[Node]] = {}
        for r in self.rules:
            inner = [a for a in r.atoms if a.relation in self.group]
            if not inner:
                t = Query(r, self.S).solve(**self.opts, **self.relations(r)).to_table()
                for k in self._tight(t, len(r.head), value[r.name]):
                    sources.append((r.name, k[: len(r.head)]))
                continue
            (a,) = inner
            extra = tuple(dict.fromkeys(v for v in a.vars if v not in r.head))
            pairs = Rule(r.name, (*r.head, *extra), r.atoms)
            t = Query(pairs, self.S).solve(**self.opts, **self.relations(r)).to_table()
            at = {v: i for i, v in enumerate((*r.head, *extra))}
            consts = dict(a.consts)
            for k in self._tight(t, len(r.head), value[r.name]):
                it = iter(a.vars)
                pred = tuple(consts[p] if p in consts else k[at[next(it)]] for p in range(a.arity))
                edges.setdefault((a.relation, pred), []).append((r.name, k[: len(r.head)]))
        parent: dict[Node, Node | None] = {}
        todo: deque[Node] = deque()
        for s in sources:
            if s not in parent:
                parent[s] = None
                todo.append(s)
        while todo:
            u = todo.popleft()
            for v in edges.get(u, ()):
                if v not in parent:
                    parent[v] = u
                    todo.append(v)
        self._parent = parent
        return parent

    def _tight(self, t: Table, width: int, value: Mapping[Key, Any]) -> list[Key]:
        """The rows of ``t`` (head key first, ``width`` columns) whose value is the head
        key's value at the fixpoint."""
        if not t.rows:
            return []
        rows = list(zip(*(c.tolist() for c in t.cols), strict=True))
        heads = [k[:width] for k in rows]
        known = np.array([h in value for h in heads], dtype=bool)
        have = t.values if t.values is not None else np.full(t.rows, self.S.one)
        target = np.empty(t.rows, dtype=have.dtype)
        for i, h in enumerate(heads):
            target[i] = value.get(h, self.S.zero)
        same = equal(have, target)
        if have.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                same |= np.isclose(have, target, rtol=1e-12, atol=0.0)
        return [k for k, ok in zip(rows, known & same, strict=True) if ok]


class PointerPaths:
    """Paths read off a witness frame's own pointers, in time proportional to the path;
    ``fallback`` (a :class:`WitnessPaths`) answers whatever the pointers cannot.

    For an answer that is its own recursive group, each witness row names the bound
    values of the rule attaining its key; for a rule with one atom of the answer
    (``D(y) :- D(x), E(x, y)``) those values give the key before it, and a rule with none
    (``D(x) :- S(x)``) ends the path at a source.  Every step attains its key, so the
    path does.  Where rules cannot be told apart by which bound columns a row fills, or a
    pointer is missing or loops (ties: a zero-weight cycle), the path comes from
    ``fallback``'s tree.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        answer: str,
        head: tuple[str, ...],
        frame: pd.DataFrame,
        fallback: WitnessPaths,
    ) -> None:
        self.fallback = fallback
        self.frame = frame
        self.head = head
        own = [r for r in rules if r.name == answer]
        bound_cols = {}  # the frame's column of each rule's bound variable
        for r in own:
            names = {}
            for b in r.bound:
                name = b
                while name in head:
                    name += "_"
                names[b] = name
            bound_cols[r] = names
        signature: dict[frozenset[str], Rule | None] = {}
        for r in own:
            sig = frozenset(bound_cols[r].values())
            signature[sig] = None if sig in signature else r  # None: two rules alike
        usable = len(own) == len(rules) and all(
            sum(a.relation == answer for a in r.atoms) <= 1 for r in own
        )
        self.rules = signature if usable else {}
        self.bound_cols = bound_cols
        self.answer = answer
        self.columns = [c for c in frame.columns if c not in head and c != "value"]

    @cached_property
    def rows(self) -> dict[Key, tuple[Any, ...] | None]:
        """Per key, its witness row: built on the first ``path``, not with the result."""
        f, head = self.frame, self.head
        keys = list(zip(*(f[v].tolist() for v in head), strict=True))
        if not self.columns:
            return dict.fromkeys(keys)
        rows = zip(*(f[c].tolist() for c in self.columns), strict=True)
        return dict(zip(keys, rows, strict=True))

    def path(self, key: Any) -> list[Key]:
        """The keys from a source to ``key`` (see :meth:`WitnessPaths.path`)."""
        want = key if isinstance(key, tuple) else (key,)
        want = tuple(v.item() if hasattr(v, "item") else v for v in want)
        out = self._follow(want) if self.rules else None
        return out if out is not None else self.fallback.path(key)

    def _follow(self, key: Key) -> list[Key] | None:
        out: list[Key] = []
        seen: set[Key] = set()
        while True:
            if key in seen or key not in self.rows:
                return None
            seen.add(key)
            out.append(key)
            row = self.rows[key] or ()
            filled = frozenset(c for c, v in zip(self.columns, row, strict=True) if v is not None)
            r = self.rules.get(filled)
            if r is None:
                return None
            inner = [a for a in r.atoms if a.relation == self.answer]
            if not inner:
                return out[::-1]
            value = dict(zip(r.head, key, strict=True))
            cols = self.bound_cols[r]
            for b, c in cols.items():
                v = row[self.columns.index(c)]
                value[b] = v.item() if hasattr(v, "item") else v
            (a,) = inner
            consts = dict(a.consts)
            it = iter(a.vars)
            key = tuple(consts[p] if p in consts else value[next(it)] for p in range(a.arity))
