"""Set relations: a tuple is present at most once (``IncrementalView(..., sets=...)``).

By default a view's relations are bags (Z-sets): inserting an edge that is
already there doubles it, which is right for multiplicities and wrong for a
graph.  A relation in *set mode* holds each tuple (key) at most once, with one
annotation.  Each delta of it is turned into the bag delta that takes the set
to its new contents, by :func:`set_delta`, before the view applies it:

* retractions first: ``(k, v)`` removes ``k`` when the set holds ``k`` with
  annotation ``v``; a retraction of anything else is refused (``"refuse"``) or
  dropped (``"ignore"``), and so is a second retraction of the same tuple;
* then insertions: ``(k, v)`` adds ``k`` when the set does not hold it (after
  the retractions); an insertion of a tuple the set holds, or a second
  insertion of it in the same delta, is refused or dropped.  Two insertions of
  one tuple with different annotations in one delta are refused in both modes
  (the set could hold only one of them).

So changing a tuple's annotation is, as for bags, a retraction of the old row
and an insertion of the new one in one delta.  In ``counting`` the annotation
of a row is its multiplicity (``value · _weight`` copies), and in ``counting``
and ``boolean`` a tuple's annotation in a set is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from faq.kernel import KeyedTable, match_keys
from incremental.deltas import Rows
from semirings.local import equal, group_starts

__all__ = ["MODES", "set_delta", "set_modes"]

MODES = ("ignore", "refuse")
"""What a set relation does with an insertion of a tuple it holds (or a retraction of one
it does not): drop it, or refuse the step with ValueError."""


def set_modes(sets: str | Mapping[str, str] | None, relations: Mapping[str, int]) -> dict[str, str]:
    """``{relation: mode}`` from the ``sets=`` argument (a string applies to every relation).

    Raises
    ------
    ValueError
        An unknown mode or relation name.
    TypeError
        ``sets`` is neither None, a string nor a mapping.
    """
    if sets is None:
        return {}
    if isinstance(sets, str):
        sets = {n: sets for n in relations}
    if not isinstance(sets, Mapping):
        raise TypeError(
            f"sets must be 'ignore', 'refuse' or a dict of relation name to one of them, "
            f"not {type(sets).__name__}"
        )
    out = {}
    for name, mode in sets.items():
        if name not in relations:
            raise ValueError(
                f"sets: unknown relation {name!r}; the relations are: {', '.join(relations)}"
            )
        if mode not in MODES:
            raise ValueError(
                f"sets: unknown mode {mode!r} for relation {name!r}; valid: {', '.join(MODES)}"
            )
        out[str(name)] = str(mode)
    return dict(sorted(out.items()))


def set_delta(name: str, mode: str, d: Rows, held: KeyedTable, regime: str) -> Rows:
    """The bag delta that applies ``d`` to the set relation ``name`` (see the module notes).

    Parameters
    ----------
    name, mode : str
        The relation and its mode (:data:`MODES`).
    d : Rows
        The delta as given.
    held : KeyedTable
        The relation's stored annotations (counts in ``counting`` and ``boolean``).
    regime : str
        :func:`incremental.regimes.regime` of the view's semiring.

    Raises
    ------
    ValueError
        (``"refuse"``) a retraction of a tuple the set does not hold with that annotation,
        or an insertion of one it holds or that the delta inserts twice; (both modes) two
        insertions of a tuple with different annotations.
    """
    unit = regime in ("counting", "boolean")
    weights = d.weights
    values = None
    if not unit:
        values = d.values if d.values is not None else held.ops.ones(np.ones(d.rows, np.int64))
    if regime == "counting" and d.values is not None:
        weights = weights * d.values.astype(np.int64)  # value · weight copies
    if not d.rows:
        return d
    perm, starts = _groups(d)
    k = len(starts)
    group = np.empty(d.rows, dtype=np.int64)
    group[perm] = np.repeat(np.arange(k), np.diff(np.append(starts, d.rows)))
    first = perm[starts]
    keys = tuple(c[first] for c in d.cols)
    present, current = _held(held, keys, k, unit)
    # retractions: those naming a held tuple with its annotation count
    out_ = weights < 0
    valid = out_ & present[group]
    if values is not None and current is not None:
        valid &= equal(values, current[group])
    removed = np.bincount(group[valid], weights=-weights[valid], minlength=k)
    if mode == "refuse":
        bad = np.flatnonzero(out_ & ~valid)
        if len(bad):
            _refuse(name, d, bad[0], "retracts", "a tuple the set does not hold")
        twice = np.flatnonzero(removed > 1)
        if len(twice):
            _refuse(name, d, perm[starts[twice[0]]], "retracts", "a tuple more than once")
    gone = removed >= 1
    # insertions: one annotation per tuple, and only into a tuple the set no longer holds
    into = weights > 0
    ins = np.flatnonzero(into)
    pick = np.full(k, -1, dtype=np.int64)
    pick[group[ins[::-1]]] = ins[::-1]  # the first insertion row of each tuple
    if values is not None and len(ins):
        differ = ins[~equal(values[ins], values[pick[group[ins]]])]
        if len(differ):
            _refuse(name, d, differ[0], "inserts", "a tuple twice with different annotations")
    added = np.bincount(group[ins], weights=weights[ins], minlength=k)
    still = present & ~gone
    if mode == "refuse":
        dup = np.flatnonzero((added > 0) & still)
        if len(dup):
            _refuse(name, d, pick[dup[0]], "inserts", "a tuple the set already holds")
        many = np.flatnonzero(added > 1)
        if len(many):
            _refuse(name, d, pick[many[0]], "inserts", "a tuple more than once")
    new = (added > 0) & ~still
    drop, put = np.flatnonzero(gone), np.flatnonzero(new)
    cols = tuple(np.concatenate([c[drop], c[put]]) for c in keys)
    w = np.concatenate([np.full(len(drop), -1), np.ones(len(put))]).astype(np.int64)
    if values is None:
        return Rows(cols, None, w)
    assert current is not None
    v = np.concatenate([current[drop], values[pick[put]]]).astype(values.dtype)
    return Rows(cols, v, w)


def _groups(d: Rows) -> tuple[np.ndarray, np.ndarray]:
    if d.cols:
        return group_starts(list(d.cols))
    return np.arange(d.rows), np.zeros(1, dtype=np.int64)


def _held(
    held: KeyedTable, keys: tuple[np.ndarray, ...], k: int, unit: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Whether the set holds each key, and its annotation (None in counting, boolean)."""
    found = held.at(keys)
    present = np.zeros(k, dtype=bool)
    current = None if unit else np.empty(k, dtype=held.ops.dtype)
    if not found.rows:
        return present, current
    assert found.values is not None
    if keys:
        hit, at = match_keys(keys, found.cols)
    else:
        hit, at = np.ones(k, dtype=bool), np.zeros(k, dtype=np.int64)
    present[hit] = True
    if current is not None:
        current[hit] = found.values[at[hit]]
    return present, current


def _refuse(name: str, d: Rows, i: Any, verb: str, what: str) -> None:
    i = int(i)
    key = tuple(_py(c[i]) for c in d.cols)
    value = "" if d.values is None else f" with annotation {_py(d.values[i])!r}"
    raise ValueError(
        f"refused: the delta of set relation {name!r} {verb} {what}: {key!r}{value} "
        "(sets={'" + name + "': 'refuse'}; 'ignore' drops such rows); the view is unchanged"
    )


def _py(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x
