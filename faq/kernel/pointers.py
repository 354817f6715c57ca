"""Back-pointers: per output key, the row of a joined bag that attains the key's ⊕.

What witnesses (:mod:`faq.witness`) keep of every step, computed by the local
kernel: in the driver, and in every cell of a step partitioned over Spark
(:mod:`faq.spark.partitioned`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faq.kernel.table import Table
from semirings import Semiring
from semirings.local import LocalOps, equal, run_starts, sort_rows

__all__ = ["back_pointers", "first_attaining"]


def back_pointers(
    joined: Table, keep: Sequence[str], elim: Sequence[str], ops: LocalOps, S: Semiring
) -> Table:
    """Per key of ``keep``, the row of ``joined`` (over ``keep`` and ``elim``) whose value
    equals the ⊕ of the key's rows, the smallest ``elim`` values first among ties.

    The result has one row per key, columns ``keep`` then ``elim``, and the winning
    row's value.
    """
    allv = (*keep, *elim)
    cols = [joined.col(v) for v in allv]
    if joined.rows == 0:
        return Table(allv, tuple(cols), joined.values)
    # Rows by output key, then eliminated values ascending: the first row of a key
    # that attains its ⊕ is the tie-break winner.
    perm = sort_rows(cols)
    starts = run_starts([c[perm] for c in cols[: len(keep)]])
    idx = perm[starts]
    if joined.values is not None:
        idx = perm[first_attaining(ops, joined.values[perm], starts, S)]
    values = joined.values[idx] if joined.values is not None else None
    return Table(allv, tuple(c[idx] for c in cols), values)


def first_attaining(ops: LocalOps, values: np.ndarray, starts: np.ndarray, S: Semiring):
    """Per group of ``values`` (starting at ``starts``), the index of its first value that
    equals the ⊕ of the group.

    The ⊕ is the semiring's own (``ops.reduceat``: numpy for the built-ins, ``S.add``
    otherwise) and so is the comparison: ``==`` of the values themselves, never of
    floats made from them (exact for 64-bit and Python integers, strings, tuples...).

    Raises
    ------
    ValueError
        A group has no value equal to its ⊕ (⊕ does not select one of its arguments).
    """
    best = np.repeat(ops.reduceat(values, starts), np.diff(np.append(starts, len(values))))
    at = np.flatnonzero(equal(values, best))
    group = np.searchsorted(starts, at, side="right") - 1
    firsts = np.flatnonzero(np.diff(group, prepend=-1))
    if len(firsts) != len(starts):
        missing = np.setdiff1d(np.arange(len(starts)), group)[0]
        raise ValueError(
            f"witness=True: semiring {S.name!r}: no assignment's value equals (==) the ⊕ "
            f"{best[starts[missing]]!r} of its output key; witnesses need a ⊕ that returns "
            "one of its arguments and values that equal themselves"
        )
    return at[firsts]
