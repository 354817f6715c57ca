"""numba for the kernel: whether it is installed, the decorator with its disk cache, and the
gallop and binary searches the compiled kernels share.

:func:`jit` is ``numba.njit`` with ``cache=True`` (machine code kept on disk, see
:mod:`faq.kernel.compiled`), or without the cache where numba finds no writable
directory.  Without numba, ``NUMBA`` is False and the kernel's numpy paths run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["NUMBA", "gallop", "jit", "lower_bound"]

try:
    import numba as _numba

    NUMBA = True
except ImportError:  # pragma: no cover - numba is a dependency; kept for odd platforms
    _numba = None
    NUMBA = False


def jit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)`` with numba's disk cache, or without it where numba finds
    no writable cache directory (it refuses ``cache=True`` then); without numba, the
    function itself (so that every module imports; ``NUMBA`` tells callers to take
    their numpy paths)."""

    def wrap(fn: Callable[..., Any]) -> Any:
        if _numba is None:  # the plain function: callers take the numpy paths instead
            return fn
        try:
            return _numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return _numba.njit(**options)(fn)

    return wrap


@jit(nogil=True, inline="always")
def gallop(vals, lo, hi, v):  # pragma: no cover - compiled
    """The first index in [lo, hi) whose value is ≥ v (exponential, then binary search)."""
    step = 1
    bound = lo
    while bound < hi and vals[bound] < v:
        lo = bound + 1
        bound = lo + step
        step <<= 1
    return lower_bound(vals, lo, min(bound, hi), v)


@jit(nogil=True, inline="always")
def lower_bound(vals, lo, hi, v):  # pragma: no cover - compiled
    """The first index in [lo, hi) whose value is ≥ v (binary search; hi if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if vals[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo
