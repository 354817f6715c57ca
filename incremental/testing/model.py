"""The model a view is checked against: every relation a multiset of annotated rows.

A tick is a set of deltas, one pandas frame per changed relation: key columns by
position, an optional ``value`` column (the annotation, the semiring's one by default)
and an optional ``_weight`` column (an integer multiplicity, +1 by default; -1 retracts
one copy of the annotated row).  The model keeps, per relation, the multiplicity of
every annotated row ``(key, value)`` and reads what a view must hold from it, by the
semiring's own declarations (never its name):

* **additive** (a ring, ``S.is_ring``, or a semiring that declares its ring
  ``completion``, as counting does): the annotation of a key is ``Σ weight · value``
  in the ring; a tick is legal when every key's annotation is still a value of the
  semiring afterwards (counting: no negative multiplicity);
* **multiset** (every other semiring: boolean, max/min semirings, log, user
  semirings): the annotation of a key is the ⊕ of the values of its rows, each
  counted with its multiplicity; rows annotated zero are ignored; a tick is legal
  when no row's multiplicity goes below zero (a retraction names a row the relation
  holds).

Both readings are of the rows after the whole tick (the net weight of each row), as
the views read a delta.

A relation may be a **set** (a view's ``sets=``: ``"ignore"`` or ``"refuse"``): it
holds each key at most once, with one annotation.  A delta of it is read as the view
documents it (:mod:`incremental.sets`): rows annotated zero are dropped; retractions
first (one naming a held key with its annotation removes the key; in an additive
semiring that is not a ring, counting, a row's annotation is its multiplicity,
``value · _weight`` copies, and a key's annotation in a set is one), then insertions
(a key the set no longer holds is added with the annotation of its first insertion).
A retraction of anything else, a second retraction, an insertion of a held key and a
second insertion are dropped (``"ignore"``) or make the tick illegal (``"refuse"``);
two insertions of one key with different annotations are illegal in both modes.

This module is pure Python and pandas: it shares no code with the views it checks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from faq import VALUE, Factor
from semirings import Semiring
from semirings.laws import approx_equal

__all__ = [
    "SET_MODES",
    "WEIGHT",
    "Illegal",
    "Model",
    "Row",
    "Ticks",
    "additive",
    "delta_frame",
    "read_frame",
    "ring_of",
    "same_value",
    "set_modes",
]

WEIGHT = "_weight"
"""The name of a delta's multiplicity column."""

Key = tuple[Any, ...]
Row = tuple[Key, Any, int]
"""An annotated row with its multiplicity: ``(key tuple, value, weight)``."""

Frames = Mapping[str, pd.DataFrame]

SET_MODES = ("ignore", "refuse")
"""What a set relation does with a row that would hold a key twice (or retract what it
does not hold): drop it, or refuse the tick."""


class Illegal(ValueError):
    """A delta that no view may accept (the reason is the message)."""


def additive(S: Semiring) -> bool:
    """True when a row changes its key's annotation by ``weight · value``: a ring, or a
    semiring that declares the ring it embeds in (``completion``; counting in ℤ)."""
    return S.is_ring or S.completion is not None


def ring_of(S: Semiring) -> Semiring:
    """The ring an additive semiring's annotations are summed in."""
    if S.is_ring:
        return S
    assert S.completion is not None, f"semiring {S.name!r} is not additive"
    return S.completion


def times(add: Callable[[Any, Any], Any], x: Any, n: int) -> Any:
    """The ⊕ of ``n ≥ 1`` copies of ``x``, by repeated doubling."""
    out, power = None, x
    while n:
        if n & 1:
            out = power if out is None else add(out, power)
        n >>= 1
        if n:
            power = add(power, power)
    return out


def contains(S: Semiring, x: Any) -> bool:
    """``S.contains(x)``, a membership test that raises counting as a no."""
    try:
        return bool(S.contains(x))  # type: ignore[misc]
    except Exception:
        return False


def same_value(a: Any, b: Any, rel: float = 1e-7, abs_tol: float = 1e-9) -> bool:
    """Equal values; floats within rounding (equal infinities are equal, NaN is never):
    :func:`semirings.laws.approx_equal` after reading a float's partner (a numpy scalar,
    an int) as a float, and False where the values cannot be compared."""
    floats = isinstance(a, float) or isinstance(b, float)
    try:
        if floats and not isinstance(a, bool) and not isinstance(b, bool):
            a, b = float(a), float(b)
        return bool(approx_equal(a, b, rel, abs_tol))
    except Exception:
        return False


# -- frames ----------------------------------------------------------------------------------
def _dtype(S: Semiring) -> str:
    """The pandas dtype of an annotation column of ``S``."""
    return {"double": "float64", "bigint": "int64", "boolean": "bool"}.get(
        S.spark_type or "", "object"
    )


def delta_frame(
    rows: Iterable[Row],
    semiring: Semiring,
    arity: int,
    *,
    value: bool = True,
    weight: bool = True,
    key_dtype: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """A delta as a pandas frame: key columns ``c0, c1, …``, ``value``, ``_weight``.

    Parameters
    ----------
    rows : iterable of (key tuple, value, weight)
        The annotated rows and their multiplicities.
    semiring : Semiring
        Gives the dtype of the ``value`` column (``float64``, ``int64``, ``bool`` or
        ``object``).
    arity : int
        The number of key columns.
    value, weight : bool
        Whether the frame has a ``value`` (a frame without one annotates every row with
        the semiring's one) and a ``_weight`` column (without one, every row weighs +1).
    key_dtype : str or sequence of str, optional
        The dtype of the key columns, or of each (by default inferred from the keys;
        ``int64`` for a frame without rows).

    Raises
    ------
    ValueError
        ``value=False`` with a row not annotated one, or ``weight=False`` with a row
        whose weight is not 1.
    """
    rows = list(rows)
    if not value and any(not same_value(v, semiring.one) for _, v, _ in rows):
        raise ValueError("delta_frame(value=False): every row must be annotated one")
    if not weight and any(w != 1 for _, _, w in rows):
        raise ValueError("delta_frame(weight=False): every row must weigh 1")
    data: dict[str, Any] = {}
    dtypes = [key_dtype] * arity if key_dtype is None or isinstance(key_dtype, str) else key_dtype
    if len(dtypes) != arity:
        raise ValueError(f"delta_frame: {len(dtypes)} key dtypes for {arity} key columns")
    for i, dtype in enumerate(dtypes):
        data[f"c{i}"] = _column([k[i] for k, _, _ in rows], dtype)
    if value:
        data[VALUE] = _column([v for _, v, _ in rows], _dtype(semiring))
    if weight:
        data[WEIGHT] = np.array([w for _, _, w in rows], dtype=np.int64)
    return pd.DataFrame(data, index=pd.RangeIndex(len(rows)), copy=False)


def _column(xs: list[Any], dtype: str | None) -> np.ndarray:
    """A column of ``xs`` (int64 for no values and no dtype; object keeps Python values)."""
    if dtype == "object" or (dtype is None and xs and not all(_plain(x) for x in xs)):
        out = np.empty(len(xs), dtype=object)
        out[:] = xs
        return out
    return np.array(xs, dtype=dtype or (None if xs else np.int64))


def _plain(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def read_frame(frame: Any, name: str, arity: int, S: Semiring) -> list[Row]:
    """The rows of a delta frame, read independently of the views.

    Raises
    ------
    Illegal
        The frame is no legal delta for a relation of ``arity`` key columns: another
        number of key columns, a null key, an annotation outside ``S``, a weight that is
        not an integer, or null.
    TypeError
        ``frame`` is not a pandas DataFrame.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(
            f"the delta of relation {name!r} is a {type(frame).__name__}; the testing kit "
            "reads pandas DataFrames (keys by position, then `value` and `_weight`)"
        )
    keys = [c for c in frame.columns if c not in (VALUE, WEIGHT)]
    if len(keys) != arity:
        raise Illegal(f"relation {name!r} has {arity} key column(s), the delta {len(keys)}")
    cols = [frame[c].tolist() for c in keys]
    if any(x is None or (isinstance(x, float) and math.isnan(x)) for c in cols for x in c):
        raise Illegal(f"the delta of relation {name!r} has a null key")
    n = len(frame)
    values = frame[VALUE].tolist() if VALUE in frame.columns else [S.one] * n
    for v in values:
        if not contains(S, v):
            raise Illegal(f"the delta of relation {name!r} holds {v!r}, not a value of {S.name}")
    if WEIGHT in frame.columns:
        if not pd.api.types.is_integer_dtype(frame[WEIGHT].dtype):
            raise Illegal(f"the delta of relation {name!r} has a _weight that is not integer")
        weights = [int(w) for w in frame[WEIGHT].tolist()]
    else:
        weights = [1] * n
    return [(tuple(c[i] for c in cols), values[i], weights[i]) for i in range(n)]


def set_modes(sets: str | Mapping[str, str] | None, names: Iterable[str]) -> dict[str, str]:
    """``{relation: mode}`` of a view's ``sets=`` argument (a string names every relation).

    Raises
    ------
    ValueError
        An unknown mode or relation.
    """
    names = list(names)
    if sets is None:
        return {}
    if isinstance(sets, str):
        sets = dict.fromkeys(names, sets)
    if not isinstance(sets, Mapping):
        raise ValueError(f"sets= must be 'ignore', 'refuse' or a dict of them, not {sets!r}")
    for name, mode in sets.items():
        if name not in names:
            raise ValueError(f"sets=: unknown relation {name!r}; the inputs are {names}")
        if mode not in SET_MODES:
            raise ValueError(f"sets=: unknown mode {mode!r} of {name!r}; valid: {SET_MODES}")
    return {str(n): str(m) for n, m in sorted(sets.items())}


# -- the model --------------------------------------------------------------------------------
class Model:
    """Every input relation of a view as a multiset of annotated rows, or a set (see the
    module docstring for what a key's annotation is, and which ticks are legal).

    ``sets`` gives the set relations and their modes (``{relation: "ignore" or
    "refuse"}``, as :func:`set_modes` reads a view's ``sets=``)."""

    def __init__(
        self, S: Semiring, arities: Mapping[str, int], sets: Mapping[str, str] | None = None
    ) -> None:
        self.S = S
        self.arities = dict(arities)
        self.additive = additive(S)
        self.sets = set_modes(sets, self.arities)
        self.rows: dict[str, Counter[tuple[Key, Any]]] = {n: Counter() for n in arities}

    def read(self, frames: Frames) -> dict[str, list[Row]]:
        """The rows of a tick's frames (``Illegal`` for an unknown relation or a bad frame)."""
        unknown = [n for n in frames if n not in self.arities]
        if unknown:
            raise Illegal(f"unknown relation(s) {unknown}; the inputs are {list(self.arities)}")
        return {n: read_frame(f, n, self.arities[n], self.S) for n, f in frames.items()}

    def _ignored(self, value: Any) -> bool:
        return not self.additive and self.S.is_zero(value)

    def _set_after(self, name: str, rows: Sequence[Row]) -> tuple[Counter, str | None]:
        """The set relation ``name`` after a delta (one copy of each held row), and why
        the delta is illegal (None when it is legal)."""
        S, mode = self.S, self.sets[name]
        copies_of_value = self.additive and not S.is_ring  # counting: value · weight copies
        held = {key: value for (key, value), n in self.rows[name].items() if n > 0}
        by_key: dict[Key, list[tuple[Any, int]]] = {}
        for key, value, weight in rows:
            if S.is_zero(value):
                continue
            copies = weight * value if copies_of_value else weight
            if copies:
                by_key.setdefault(key, []).append((value, copies))
        new = dict(held)
        where = f"set relation {name!r}"
        for key, group in sorted(by_key.items(), key=repr):
            present = key in held
            removed = 0
            for value, copies in group:
                if copies > 0:
                    continue
                if present and (copies_of_value or same_value(value, held[key], 0.0, 0.0)):
                    removed -= copies
                elif mode == "refuse":
                    why = f"{where} retracts {key!r} -> {value!r}, which it does not hold"
                    return Counter(), why
            if mode == "refuse" and removed > 1:
                return Counter(), f"{where} retracts {key!r} more than once"
            inserts = [(v, c) for v, c in group if c > 0]
            first = inserts[0][0] if inserts else None
            if not copies_of_value and any(not same_value(v, first, 0.0, 0.0) for v, _ in inserts):
                return Counter(), f"{where} inserts {key!r} with different annotations"
            added = sum(c for _, c in inserts)
            still = present and removed < 1
            if mode == "refuse" and added and still:
                return Counter(), f"{where} inserts {key!r}, which it holds"
            if mode == "refuse" and added > 1:
                return Counter(), f"{where} inserts {key!r} more than once"
            if removed >= 1:
                del new[key]
            if added and not still:
                new[key] = S.one if copies_of_value else first
        return Counter({(k, v): 1 for k, v in new.items()}), None

    def after(self, deltas: Mapping[str, Sequence[Row]]) -> dict[str, Counter[tuple[Key, Any]]]:
        """The multisets (or sets) of the changed relations after ``deltas`` (the model
        unchanged)."""
        out = {}
        for n, rows in deltas.items():
            if n in self.sets:
                out[n] = self._set_after(n, rows)[0]
                continue
            c = Counter(self.rows[n])
            for key, value, weight in rows:
                if not self._ignored(value):
                    c[(key, value)] += weight
            out[n] = Counter({r: k for r, k in c.items() if k != 0})
        return out

    def illegal(self, deltas: Mapping[str, Sequence[Row]]) -> str | None:
        """Why a view must refuse ``deltas``, or None when they are a legal tick."""
        for n, rows in deltas.items():
            if n in self.sets and (why := self._set_after(n, rows)[1]) is not None:
                return why
        bags = {n: rows for n, rows in deltas.items() if n not in self.sets}
        for n, rows in self.after(bags).items():
            if self.additive:
                for key, a in self._annotations(rows).items():
                    if not contains(self.S, a):
                        return (
                            f"relation {n!r} would annotate {key!r} with {a!r}, not a value "
                            f"of {self.S.name}"
                        )
                continue
            for (key, value), k in sorted(rows.items(), key=repr):
                if k < 0:
                    return (
                        f"relation {n!r}: the tick retracts the row {key!r} -> {value!r} "
                        f"{-k} more time(s) than the relation holds it"
                    )
        return None

    def apply(self, deltas: Mapping[str, Sequence[Row]]) -> None:
        """Commit a legal tick."""
        self.rows.update(self.after(deltas))

    def present(self, name: str) -> list[tuple[tuple[Key, Any], int]]:
        """The rows of ``name`` a tick may retract, with their multiplicities (sorted)."""
        return sorted(((r, k) for r, k in self.rows[name].items() if k > 0), key=repr)

    def _annotations(self, rows: Counter[tuple[Key, Any]]) -> dict[Key, Any]:
        S = self.S
        out: dict[Key, Any] = {}
        if self.additive:
            R = ring_of(S)
            for (key, value), k in sorted(rows.items(), key=repr):
                term = times(R.add, value, abs(k))
                term = R.neg(term) if k < 0 else term  # type: ignore[misc]
                out[key] = R.add(out[key], term) if key in out else term
            return {k: v for k, v in out.items() if not R.is_zero(v)}
        for (key, value), k in sorted(rows.items(), key=repr):
            if k <= 0:
                continue
            term = times(S.add, value, k)
            out[key] = S.add(out[key], term) if key in out else term
        return {k: v for k, v in out.items() if not S.is_zero(v)}

    def annotations(self) -> dict[str, dict[Key, Any]]:
        """``{relation: {key: annotation}}``: what ``view.relation(name)`` must hold."""
        return {n: self._annotations(rows) for n, rows in self.rows.items()}

    def factors(self) -> dict[str, Factor]:
        """The relations as factors for a batch solve: the multiset's rows (equal keys
        ⊕-combined by the solve), or the additive annotations."""
        out = {}
        ann = self.annotations() if self.additive else None
        for n, arity in self.arities.items():
            vars_ = [f"c{i}" for i in range(arity)]
            if ann is not None or not self.rows[n]:
                entries = ann[n] if ann is not None else {}
                out[n] = Factor.from_dict(entries, vars=vars_, semiring=self.S, name=n)
                continue
            rows = [(k, v, 1) for (k, v), m in self.present(n) for _ in range(m)]
            frame = delta_frame(rows, self.S, arity, weight=False)
            out[n] = Factor.from_pandas(frame, vars=vars_, semiring=self.S, name=n)
        return out


# -- what ticks() draws -----------------------------------------------------------------------
def _show(frame: pd.DataFrame) -> str:
    keys = [c for c in frame.columns if c not in (VALUE, WEIGHT)]
    parts = []
    for i in range(len(frame)):
        key = tuple(frame[c].iloc[i] for c in keys)
        key = tuple(x.item() if hasattr(x, "item") else x for x in key)
        w = int(frame[WEIGHT].iloc[i]) if WEIGHT in frame.columns else 1
        text = ("+" if w > 0 else "-") + repr(key)
        if VALUE in frame.columns:
            v = frame[VALUE].iloc[i]
            text += f"={v.item() if hasattr(v, 'item') else v!r}"
        parts.append(text + (f"×{abs(w)}" if abs(w) != 1 else ""))
    return "[" + ", ".join(parts) + "]"


def _show_tick(frames: Frames) -> str:
    return "{" + ", ".join(f"{n}: {_show(f)}" for n, f in frames.items()) + "}"


@dataclass(frozen=True, eq=False, repr=False)
class Ticks:
    """A sequence of ticks for a view: what :func:`incremental.testing.ticks` draws and
    :func:`incremental.testing.assert_incremental` replays.

    Attributes
    ----------
    initial : dict of str to pandas.DataFrame
        The view's initial contents, one frame per input relation.
    steps : list of dict of str to pandas.DataFrame
        One tick per entry: a delta frame per changed relation.  A tick the model finds
        illegal must be refused by the view, and leave it unchanged.
    batch_ids : sequence of int or None
        The ``batch_id`` each step is given (empty: none).
    refused : (int, dict) or None
        An illegal tick tried just before step ``i`` (with that step's batch id): it must
        be refused and change nothing, and the id must still be free afterwards.
    replay : int or None
        After step ``i``, the last committed batch id is sent again with that step's
        deltas: the view must skip it.
    reopen : int or None
        With a ``state_dir``, the view is closed and reopened before step ``i`` (``i``
        equal to the number of steps: after the last one) and must resume equal.
    sets : dict of str to str
        The set relations the ticks were drawn for (``ticks(..., sets=...)``), as
        :func:`set_modes` reads them; empty for bags.  ``assert_incremental`` must be
        given the same ``sets=``.
    """

    initial: Frames
    steps: Sequence[Frames]
    batch_ids: Sequence[int | None] = ()
    refused: tuple[int, Frames] | None = None
    replay: int | None = None
    reopen: int | None = None
    sets: Mapping[str, str] = field(default_factory=dict)

    def batch_id(self, i: int) -> int | None:
        """The batch id of step ``i`` (None when it has none)."""
        return self.batch_ids[i] if i < len(self.batch_ids) else None

    def __repr__(self) -> str:
        lines = [f"Ticks(initial={_show_tick(self.initial)},"]
        for i, step in enumerate(self.steps):
            bid = self.batch_id(i)
            lines.append(
                f"  tick {i + 1}{f' (batch {bid})' if bid is not None else ''}: {_show_tick(step)},"
            )
        if self.refused is not None:
            lines.append(
                f"  refused before tick {self.refused[0] + 1}: {_show_tick(self.refused[1])},"
            )
        if self.replay is not None:
            lines.append(f"  replay after tick {self.replay + 1},")
        if self.reopen is not None:
            lines.append(f"  reopen before tick {self.reopen + 1},")
        if self.sets:
            lines.append(f"  sets={dict(self.sets)!r},")
        return "\n".join(lines) + ")"
