"""Hypothesis strategies for incremental views: a semiring's values, relations and ticks.

Every strategy reads what it needs from the query (its input relations and their
arities; a program's inputs) and from the semiring's own declarations: its ``one`` and
``zero``, what ``add`` and ``mul`` make of them, the type of its values and its
membership test ``contains``, and whether it is additive (a ring, or a declared ring
``completion``).  A user semiring works as a built-in does, and no semiring is ever
recognised by its name.

Key domains are small (``keys=range(4)`` by default) so that rows collide: joins meet,
keys repeat, and a retraction often hits a key other rows still hold.  ``key_filter=``
narrows the keys of a relation (edges ``a < b``: a graph without cycles), and
``sets=`` draws ticks for a view's set relations (``IncrementalView(..., sets=...)``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from faq import Program, Query
from incremental.testing.domains import column_domains, key_domain, key_dtype
from incremental.testing.model import (
    Model,
    Row,
    Ticks,
    additive,
    contains,
    delta_frame,
    same_value,
    set_modes,
)
from semirings import Semiring

__all__ = ["inputs_of", "relations", "semiring_values", "ticks", "value_pool"]

_NUMBERS: dict[str, list[Any]] = {
    "double": [1.0, 0.5, 2.0, -1.0, 3.0, -0.5, 0.25, 4.0],
    "bigint": [1, 2, 3, -1, 4, -2],
    "boolean": [True, False],
}
"""Plain values of each annotation type, offered to the semiring's ``contains``."""

KeyFilter = Callable[[str, tuple[Any, ...]], bool]
"""``key_filter(relation, key) -> bool``: whether a key of a relation may be drawn."""

_ENUMERATE = 100_000  # key spaces up to this size are listed and filtered once
_NEEDS_A_ROW = frozenset({"retract", "retract other", "change", "delete key", "duplicate", "flip"})
"""The kinds of change that name a row the relation holds (an insertion without one)."""


def inputs_of(query: Query | Program) -> dict[str, int]:
    """``{relation: arity}`` of the relations a view of ``query`` takes deltas for: a
    rule's relations, or a program's inputs (the relations no rule defines)."""
    if isinstance(query, Program):
        return dict(query.inputs)
    if isinstance(query, Query):
        return dict(query.rule.relations)
    raise TypeError(f"expected a query or program from faq.query(...), not {type(query).__name__}")


def _is_zero(S: Semiring, x: Any) -> bool:
    try:
        return bool(S.is_zero(x))
    except Exception:
        return False


def value_pool(semiring: Semiring, size: int = 6) -> list[Any]:
    """Up to ``size`` non-zero values of ``semiring``, then its zero.

    From the declarations: ``one``; ``one ⊕ one`` and its square under ⊗ (2 and 4 in
    counting, ``one`` again for an idempotent ⊕); then plain numbers of the type of
    the semiring's values (``1.0, 0.5, 2.0, -1.0, …`` for floats, ``1, 2, 3, -1, …`` for
    integers, ``True`` for booleans) that its ``contains`` accepts.  The values sit on a
    binary grid, so sums and products of a few of them are exact.  A semiring whose
    values are of no such type (tuples, polynomials) gets ``one`` and what ⊕ and ⊗
    make of it; pass ``values=`` to the strategies for more.
    """
    S = semiring
    found: list[Any] = []

    def offer(x: Any) -> None:
        if len(found) >= size or not contains(S, x) or _is_zero(S, x):
            return
        if not any(type(x) is type(y) and same_value(x, y, 0.0, 0.0) for y in found):
            found.append(x)

    offer(S.one)
    try:
        two = S.add(S.one, S.one)
        offer(two)
        offer(S.mul(two, two))
    except Exception:  # a user function that fails on its own identities: no such values
        pass
    for x in _NUMBERS.get(S.spark_type or "", []):
        offer(x)
    if contains(S, S.zero):
        found.append(S.zero)
    if not found:
        raise InvalidArgument(
            f"semiring {S.name!r}: its contains() accepts neither its one nor its zero; "
            "pass values= (a strategy of its values)"
        )
    return found


def semiring_values(semiring: Semiring) -> st.SearchStrategy[Any]:
    """Values of ``semiring`` (see :func:`value_pool`): few, so that they repeat; they
    shrink towards ``one``, and the zero comes last."""
    return st.sampled_from(value_pool(semiring))


def _checked(S: Semiring, values: st.SearchStrategy[Any] | None) -> st.SearchStrategy[Any]:
    if values is None:
        return semiring_values(S)
    if not isinstance(values, st.SearchStrategy):
        raise InvalidArgument(f"values= must be a hypothesis strategy, not {values!r}")

    def check(x: Any) -> Any:
        if not contains(S, x):
            raise InvalidArgument(f"values= drew {x!r}, which is not a value of {S.name!r}")
        return x

    return values.map(check)


def _net_insertions(rows: list[Row]) -> dict[tuple[tuple[Any, ...], Any], int]:
    """The rows that ``rows`` insert more often than they retract, and by how much."""
    net: dict[tuple[tuple[Any, ...], Any], int] = {}
    for key, value, w in rows:
        net[(key, value)] = net.get((key, value), 0) + w
    return {r: n for r, n in net.items() if n > 0}


class _Draw:
    """What every strategy of a query needs: its inputs, semiring, keys and values, and
    the strategies built from them once (a draw only picks from them)."""

    def __init__(
        self,
        query: Query | Program,
        keys: Iterable[Any],
        values: Any,
        min_rows: int = 0,
        max_rows: int = 6,
        key_filter: KeyFilter | None = None,
        sets: str | Mapping[str, str] | None = None,
    ) -> None:
        if not 0 <= min_rows <= max_rows:
            raise InvalidArgument(
                f"need 0 <= min_rows <= max_rows, got min_rows={min_rows}, max_rows={max_rows}"
            )
        if key_filter is not None and not callable(key_filter):
            raise InvalidArgument(f"key_filter= must be a function, not {key_filter!r}")
        self.query = query
        self.S: Semiring = query.semiring
        self.arities = inputs_of(query)
        try:
            self.sets = set_modes(sets, self.arities)
        except ValueError as e:
            raise InvalidArgument(str(e)) from e
        self.domain = key_domain(keys)
        self.columns = column_domains(query, self.arities, self.domain)
        self.key_dtypes = {n: [key_dtype(c) for c in cols] for n, cols in self.columns.items()}
        self.values = _checked(self.S, values)
        self.own_values = values is not None
        self.ring = self.S.is_ring
        self.additive = additive(self.S)
        self.copies = self.additive and not self.ring  # a value is a multiplicity (counting)
        self.nonzero = [v for v in value_pool(self.S) if not _is_zero(self.S, v)]
        self.names = sorted(self.arities)
        self.weights = st.integers(1, 3)
        self.keys = {n: self._keys_of(n, a, key_filter) for n, a in self.arities.items()}
        self.initial = {
            n: st.lists(
                st.tuples(self.keys[n], self.values, self.weights),
                min_size=min_rows,
                max_size=max_rows,
            )
            for n in self.names
        }
        # the kinds of change, those added last at the end (examples shrink to the first)
        inserts = ["insert", "duplicate", "repeat"]
        everything = ["insert", "duplicate", "retract", "change", "delete key", "repeat", "undo"]
        if self.ring:
            everything += ["flip"]
        # (retract, loose): a relation is loose when a retraction of anything is legal (a
        # ring: a negative annotation; a set that ignores what it does not hold)
        self.kinds = {
            (False, loose): st.lists(st.sampled_from(inserts), min_size=1, max_size=3)
            for loose in (False, True)
        }
        for loose in (False, True):
            kinds = [*everything, "retract any", "retract other"] if loose else everything
            self.kinds[True, loose] = st.lists(st.sampled_from(kinds), min_size=1, max_size=3)
        self.relations = st.lists(
            st.sampled_from(self.names), min_size=1, max_size=len(self.names), unique=True
        )

    def _keys_of(
        self, name: str, arity: int, key_filter: KeyFilter | None
    ) -> st.SearchStrategy[tuple[Any, ...]]:
        """The keys of relation ``name`` (those ``key_filter`` accepts)."""
        cols = self.columns[name]
        every = st.tuples(*[st.sampled_from(c) for c in cols])
        if key_filter is None:
            return every
        space = 1
        for c in cols:
            space *= len(c)
        if space > _ENUMERATE:
            return every.filter(lambda k: key_filter(name, k))
        ok = [k for k in itertools.product(*cols) if key_filter(name, k)]
        if not ok:
            raise InvalidArgument(
                f"key_filter accepts no key of relation {name!r} ({arity} column(s) over "
                f"keys={self.domain!r})"
            )
        return st.sampled_from(ok)

    @staticmethod
    def pick(draw: Any, items: list[Any]) -> Any:
        """One of ``items`` (shrinks towards the first)."""
        return items[draw(st.integers(0, len(items) - 1))]

    def frame(self, draw: Any, rows: list[Row], name: str) -> pd.DataFrame:
        """Rows of relation ``name`` as a frame, in a drawn one of the legal forms (no
        ``_weight`` when every weight is 1, no ``value`` when every value is one)."""
        weight = not all(w == 1 for _, _, w in rows) or draw(st.booleans())
        one = all(same_value(v, self.S.one, 0.0, 0.0) for _, v, _ in rows)
        value = not one or draw(st.booleans())
        dtypes = self.key_dtypes[name]
        return delta_frame(rows, self.S, len(dtypes), value=value, weight=weight, key_dtype=dtypes)

    def initial_rows(self, draw: Any, model: Model, name: str) -> list[Row]:
        """``min_rows`` to ``max_rows`` inserted rows (weights 1 to 3), one of them maybe
        repeated (of a set relation: those that keep the contents legal)."""
        rows = draw(self.initial[name])
        if rows and draw(st.booleans()):
            rows.append(self.pick(draw, rows))
        if name in self.sets:
            return self.set_rows(draw, model, name, rows, nonempty=False)
        return rows

    def set_rows(
        self, draw: Any, model: Model, name: str, rows: list[Row], nonempty: bool = True
    ) -> list[Row]:
        """A legal delta of the set relation ``name`` from drawn ``rows``: in ``"refuse"``
        mode one copy per row (annotated one where a value is a multiplicity); then each
        row in turn, kept while the delta stays legal.  With ``nonempty``, a delta left
        empty inserts a key the set does not hold, or retracts one it holds."""
        if self.sets[name] == "refuse":
            one = self.S.one
            rows = [(k, one if self.copies else v, 1 if w > 0 else -1) for k, v, w in rows]
        kept: list[Row] = []
        for row in rows:
            if model.illegal({name: [*kept, row]}) is None:
                kept.append(row)
        if kept or not nonempty:
            return kept
        key = draw(self.keys[name])
        for (k, value), _ in model.present(name):
            if k == key:
                return [(k, value, -1)]
        return [(key, self.S.one if self.copies else self.pick(draw, self.nonzero), 1)]

    def changes(self, draw: Any, model: Model, name: str, retract: bool) -> list[Row]:
        """One legal delta of ``name``: insertions (with multiplicities), rows inserted
        again, a row repeated within the delta, retractions of rows the relation holds,
        annotation changes (retract the old row, insert the new one) and retractions of
        every row of a key, rows inserted and retracted in the same delta; in a ring,
        also retractions of anything (a held key with another annotation, say) and sign
        flips (a held row retracted twice as often as it is held), and in a set relation
        that ignores what it cannot take, retractions of anything.  A set relation's
        delta keeps the rows that leave it legal (:meth:`set_rows`)."""
        available = dict(model.present(name))
        loose = self.ring or self.sets.get(name) == "ignore"
        out: list[Row] = []
        for kind in draw(self.kinds[retract, loose]):
            present = sorted((r for r, n in available.items() if n > 0), key=repr)
            if not present and kind in _NEEDS_A_ROW:
                kind = "insert"
            inserted = _net_insertions(out)
            if (kind == "repeat" and not out) or (kind == "undo" and not inserted):
                kind = "insert"
            if kind in ("insert", "retract any"):
                key, value, w = draw(self.keys[name]), draw(self.values), draw(self.weights)
                out.append((key, value, w if kind == "insert" else -w))
            elif kind == "retract other":  # a held key, with another annotation than held
                key, held = self.pick(draw, present)
                if self.own_values:  # the values asked for, whatever they are
                    out.append((key, draw(self.values), -1))
                    continue
                other = [v for v in self.nonzero if not same_value(v, held, 0.0, 0.0)]
                out.append((key, self.pick(draw, other) if other else held, -1))
            elif kind == "duplicate":
                key, value = self.pick(draw, present)
                out.append((key, value, 1))
            elif kind == "repeat":  # the previous row again, as a row of its own
                key, value, w = out[-1]
                if w < 0 and not loose:
                    if available.get((key, value), 0) < -w:
                        continue  # not that many copies left to retract
                    available[(key, value)] += w
                out.append((key, value, w))
            elif kind == "undo":  # a row this delta inserted, retracted in the same delta
                key, value = self.pick(draw, sorted(inserted, key=repr))
                out.append((key, value, -draw(st.integers(1, inserted[(key, value)]))))
            elif kind == "retract":
                key, value = self.pick(draw, present)
                w = draw(st.integers(1, available[(key, value)]))  # up to every copy
                available[(key, value)] -= w
                out.append((key, value, -w))
            elif kind == "flip":  # a ring: the row's part of its key changes sign
                key, value = self.pick(draw, present)
                out.append((key, value, -2 * available[(key, value)]))
                available[(key, value)] = 0
            elif kind == "change":
                key, old = self.pick(draw, present)
                available[(key, old)] -= 1
                out += [(key, old, -1), (key, draw(self.values), 1)]
            else:  # every row of one key
                key = self.pick(draw, sorted({k for k, _ in present}, key=repr))
                for (k, value), n in sorted(available.items(), key=repr):
                    if k == key and n > 0:
                        out.append((k, value, -n))
                        available[(k, value)] = 0
        if not out:  # every repeat of a retraction was of copies no longer held
            out.append((draw(self.keys[name]), draw(self.values), draw(self.weights)))
        if name in self.sets:
            return self.set_rows(draw, model, name, out)
        return out

    def tick(self, draw: Any, model: Model, retract: bool) -> dict[str, list[Row]]:
        """Legal deltas of one or more relations; half the ticks insert only (the path a
        view takes without retractions)."""
        chosen = draw(self.relations)
        retract = retract and draw(st.booleans())
        return {n: self.changes(draw, model, n, retract) for n in chosen}

    def illegal(self, draw: Any, model: Model) -> dict[str, pd.DataFrame]:
        """An illegal tick: legal deltas of some relations beside one bad delta (a null
        key; a retraction of a row the relation does not hold; a key left with an
        annotation outside the semiring, as a negative count; of a set relation, a key
        inserted twice, or with two annotations)."""
        bad = self.pick(draw, self.names)
        arity = self.arities[bad]
        kinds = ["null key"] if arity else []
        if self.sets.get(bad) == "refuse":
            kinds.append("twice")
        elif bad in self.sets:
            if not self.copies and len(self.nonzero) > 1:
                kinds.append("two values")
        elif not self.additive:
            kinds.append("missing row")
        elif not self.ring:
            kinds.append("negative")
        if not kinds:  # a nullary relation of a ring: nothing it holds can be illegal
            kinds = ["unknown relation"]
        kind = self.pick(draw, kinds)
        others = {}  # beside the bad delta: legal, non-empty deltas of other relations
        for n in self.names:
            if n != bad and draw(st.booleans()):
                rows = self.changes(draw, model, n, True)
                if not rows:
                    rows = [(draw(self.keys[n]), draw(self.values), 1)]
                others[n] = rows
        frames = {n: self.frame(draw, rows, n) for n, rows in others.items()}
        if kind == "unknown relation":
            frames["NoSuchRelation"] = delta_frame([((), self.S.one, 1)], self.S, 0)
            return frames
        rows = self.changes(draw, model, bad, True)
        if kind == "null key":
            frame = self.frame(draw, [*rows, (draw(self.keys[bad]), self.S.one, 1)], bad)
            at = draw(st.integers(0, arity - 1))
            col = frame.columns[at]
            ints = self.key_dtypes[bad][at] == "int64"
            frame[col] = frame[col].astype("float64" if ints else "object")
            frame.loc[len(frame) - 1, col] = None
            frames[bad] = frame
            return frames
        if kind in ("twice", "two values"):
            key, value = draw(self.keys[bad]), self.pick(draw, self.nonzero)
            if kind == "twice":
                value = self.S.one if self.copies else value
                other = value
            else:
                other = self.pick(draw, [v for v in self.nonzero if not same_value(v, value)])
            rows = [*rows, (key, value, 1), (key, other, 1)]
            assert model.illegal({**others, bad: rows}) is not None, rows
            frames[bad] = self.frame(draw, rows, bad)
            return frames
        key, value = draw(self.keys[bad]), self.pick(draw, self.nonzero)
        w = model.rows[bad][(key, value)] + 1
        while model.illegal({**others, bad: [*rows, (key, value, -w)]}) is None:
            w *= 2  # a count past every insertion, found by doubling
        frames[bad] = self.frame(draw, [*rows, (key, value, -w)], bad)
        return frames


def relations(
    query: Query | Program,
    keys: Iterable[Any] = range(4),
    *,
    values: st.SearchStrategy[Any] | None = None,
    min_rows: int = 0,
    max_rows: int = 6,
    key_filter: KeyFilter | None = None,
    sets: str | Mapping[str, str] | None = None,
) -> st.SearchStrategy[dict[str, pd.DataFrame]]:
    """Initial contents for a view of ``query``: one pandas frame per input relation.

    Parameters
    ----------
    query : faq.Query or faq.Program
        Gives the relations (a program's inputs), their arities and the semiring.
    keys : iterable
        The key domain, integers or strings; small, so that keys collide.  Columns the
        rules compare with constants also draw those (as :func:`ticks` says).
    values : hypothesis strategy, optional
        The annotations; by default :func:`semiring_values` of the query's semiring.
        Every value drawn must pass the semiring's ``contains``.
    min_rows, max_rows : int
        How many rows are drawn per relation (one more may repeat a drawn one).
    key_filter : callable, optional
        ``key_filter(relation, key) -> bool``: only keys it accepts are drawn (as in
        :func:`ticks`).
    sets : {"ignore", "refuse"} or dict, optional
        Set relations, as a view's ``sets=`` (as in :func:`ticks`).

    Returns
    -------
    strategy of dict
        ``{name: frame}``; a frame has key columns ``c0, c1, …`` then ``value`` and
        ``_weight`` (multiplicities 1 to 3) or fewer columns when they are implied.
    """

    d = _Draw(query, keys, values, min_rows, max_rows, key_filter, sets)

    @st.composite
    def draw_relations(draw: Any) -> dict[str, pd.DataFrame]:
        model = Model(d.S, d.arities, d.sets)
        return {n: d.frame(draw, d.initial_rows(draw, model, n), n) for n in d.arities}

    return draw_relations()


def ticks(
    query: Query | Program,
    keys: Iterable[Any] = range(4),
    max_ticks: int = 5,
    *,
    min_ticks: int = 1,
    values: st.SearchStrategy[Any] | None = None,
    min_rows: int = 0,
    max_rows: int = 6,
    retract: bool = True,
    key_filter: KeyFilter | None = None,
    sets: str | Mapping[str, str] | None = None,
) -> st.SearchStrategy[Ticks]:
    """Legal tick sequences for a view of ``query``, to replay with
    :func:`incremental.testing.assert_incremental`.

    Each draw is a :class:`Ticks`: ``.initial`` (a frame per input relation, as
    :func:`relations` draws) and ``.steps``, ``min_ticks`` to ``max_ticks`` ticks, each a
    delta frame for one or more relations.  A delta mixes insertions with
    multiplicities (``_weight`` up to 3), rows inserted again, a row repeated within the
    delta (two retractions of one row, say), retractions of rows the relation holds,
    annotation changes (the old row retracted, the new one inserted), retractions of
    every row of a key and rows inserted and retracted in the same delta; in a ring also
    retractions of rows it does not hold (negative annotations) and sign flips (a held
    row retracted twice as often as it is held).  Every tick is legal for the view's
    contract: it never retracts a row a multiset does not hold, nor leaves a counting
    key negative.

    Beside the ticks, a draw names an illegal tick to try before one of them (it must
    be refused and change nothing), batch ids for some steps, a step after which the
    last batch id is sent again (it must be skipped) and a tick before which a durable
    view is reopened.  All of it shrinks: a failing example ends as few ticks of few
    rows.

    Parameters
    ----------
    query : faq.Query or faq.Program
        The query or program whose view is tested; any semiring.
    keys : iterable
        The key domain (integers or strings).  A column the rules compare with constants
        also draws those (``E(7, b)``: 7 besides ``keys``), or, for constants of another
        type than ``keys`` (``F(b, 'x')`` with integer keys), draws them and one key that
        matches none.
    max_ticks, min_ticks : int
        How many ticks.
    values : hypothesis strategy, optional
        The annotations (default :func:`semiring_values`).
    min_rows, max_rows : int
        How many rows each initial relation has (one more may repeat a drawn one).
        Hypothesis's first example is the smallest: with ``min_rows=0`` its relations
        are empty, so a test that affords few examples (a Spark state) wants a few.
    retract : bool
        False draws insertions only (an append-only stream).
    key_filter : callable, optional
        ``key_filter(relation, key) -> bool``: only keys it accepts are drawn, e.g.
        ``lambda name, key: name != "E" or key[0] < key[1]`` for edges of a graph
        without cycles (a counting program over a cycle has no fixpoint).  The keys
        of a drawn illegal tick pass it too, but for its null key.
    sets : {"ignore", "refuse"} or dict, optional
        Draw for a view with these set relations (a view's ``sets=``, a string for
        every relation): their ticks insert keys the set holds, retract rows it does
        not hold and repeat rows (dropped by ``"ignore"``), or, for ``"refuse"``, keep
        each key once.  Give ``assert_incremental`` the same ``sets=``: its model then
        reads those relations as sets.
    """
    if not 0 <= min_ticks <= max_ticks:
        raise InvalidArgument(f"need 0 <= min_ticks <= max_ticks, got {min_ticks}, {max_ticks}")

    if isinstance(query, Query):  # a query no view maintains: said now, not as a failure
        try:
            query.check_incremental("ticks")
        except ValueError as e:
            raise InvalidArgument(str(e)) from e
    d = _Draw(query, keys, values, min_rows, max_rows, key_filter, sets)

    @st.composite
    def draw_ticks(draw: Any) -> Ticks:
        model = Model(d.S, d.arities, d.sets)
        initial_rows = {n: d.initial_rows(draw, model, n) for n in d.arities}
        initial = {n: d.frame(draw, rows, n) for n, rows in initial_rows.items()}
        model.apply(initial_rows)
        n = draw(st.integers(min_ticks, max_ticks))
        refused_at = draw(st.integers(0, max(n - 1, 0))) if draw(st.booleans()) else None
        refused = None
        steps: list[dict[str, pd.DataFrame]] = []
        for i in range(n):
            if i == refused_at:
                refused = (i, d.illegal(draw, model))
            rows = d.tick(draw, model, retract)
            why = model.illegal(rows)
            assert why is None, f"drew an illegal tick: {why}"  # the strategy's own check
            model.apply(rows)
            steps.append({name: d.frame(draw, r, name) for name, r in rows.items()})
        ids: list[int | None] = []
        last = draw(st.integers(0, 2)) - 1
        for _ in range(n):
            if draw(st.booleans()):
                last += draw(st.integers(1, 2))
                ids.append(last)
            else:
                ids.append(None)
        after_id = [i for i in range(n) if any(b is not None for b in ids[: i + 1])]
        replay = d.pick(draw, after_id) if after_id and draw(st.booleans()) else None
        reopen = draw(st.integers(0, n)) if draw(st.booleans()) else None
        if refused is None and n == 0 and draw(st.booleans()):
            refused = (0, d.illegal(draw, model))
        return Ticks(initial, steps, tuple(ids), refused, replay, reopen, dict(d.sets))

    return draw_ticks()
