"""A keyed table's log folded into its base on a helper thread, while ticks go on.

:meth:`faq.kernel.KeyedTable.replace` begins a fold (:func:`begin`) once the log passes
the ``log_rows`` and ``log_fraction`` settings, and swaps in its result when it is done:
the new base and its tries, made by merging the log's rows into the sorted rows of the
tries built so far (:func:`faq.kernel.merge.merged_tries`, no sort of the relation),
under the rows of the keys changed since it began (:func:`since`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from faq.kernel.merge import match_keys, merged_tries
from faq.kernel.table import Table
from faq.kernel.trie import Trie, trie_rows
from semirings.local import LocalOps

__all__ = ["Fold", "Folded", "begin", "early", "since"]

Folded = tuple[Table, dict[Any, Any]]
"""A fold's result: the new base and its keyed table's index (its tries by column order)."""


@dataclass(frozen=True)
class Fold:
    """A fold under way: its result to come (``job``, None when merging turned out not to
    apply) and the keys changed since it began (one tuple of columns each)."""

    job: Future[Folded | None]
    touched: tuple[Sequence[np.ndarray], ...]


_FOLDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="faq-fold")
"""The helper thread folds run on, one at a time (numpy releases the GIL in their merges)."""


def begin(base: Table, over: Table, ops: LocalOps, index: Mapping[Any, Any]) -> Fold | None:
    """A fold of the log ``over`` into ``base`` begun on the helper thread (it reads only
    what is taken here), or None where merging does not apply: annotations that are not
    integers, keys that are not (no 64-bit sort key to merge by), or no trie of the base
    in column order among its keyed table's ``index``."""
    if np.dtype(ops.dtype).kind not in "iu" or not base.vars:
        return None
    if any(c.dtype.kind not in "iu" for c in over.cols):
        return None
    built = {
        k[1]: got[1]
        for k, got in list(index.items())
        if isinstance(k, tuple) and k[0] == "trie" and got[0] is base.values
    }
    if tuple(range(len(base.vars))) not in built:
        return None
    return Fold(_FOLDER.submit(_folded, built, over, ops, base.vars), ())


def _folded(
    built: Mapping[tuple[int, ...], Trie], over: Table, ops: LocalOps, vars_: tuple[str, ...]
) -> Folded | None:
    """The base with ``over`` folded in and its tries, by merging ``over`` into the sorted
    rows of the tries ``built`` so far; None where that does not apply (keys too wide for
    one 64-bit sort key)."""
    tries = merged_tries(built, over, ops)
    if tries is None:
        return None
    for t in tries.values():  # built here, on the helper thread, not by a tick
        t.build_index()
    new = tries[tuple(range(len(vars_)))]
    assert new.values is not None
    b = Table(vars_, tuple(trie_rows(new)), new.values)
    return b, {("trie", perm): (b.values, t) for perm, t in tries.items()}


def since(over: Table, touched: Sequence[Sequence[np.ndarray]]) -> Table:
    """The rows of the log ``over`` whose keys are among ``touched`` (the keys changed
    since a fold began): the log over the folded base, once the fold is done."""
    keys = [np.concatenate(cs) for cs in zip(*touched, strict=True)]
    hit, _ = match_keys(over.cols, keys)
    return over.take(np.flatnonzero(hit))


def early(log: int, change: int, limit: float, ticks: int) -> bool:
    """Whether a fold should begin before the log reaches ``limit``: the log of ``log``
    rows holds more than ``ticks`` changes of ``change`` rows, and more than an eighth
    of ``limit`` (a small log costs a tick little; a fold costs a pass over the base).
    What each tick pays for the log (copies of it, reads of it) is then several times
    what its own change costs, and the helper thread folds it while ticks go on."""
    return ticks > 0 and log > ticks * change and log > limit / 8
