"""Incremental view maintenance for FAQs, DBSP style: Z-sets, the delta rule, views.

>>> from incremental import IncrementalView
>>> IncrementalView.step.__doc__.splitlines()[0]
'Apply one tick of changes; return the change of the output and commit.'
"""

from incremental import zset
from incremental.changes import changes
from incremental.lock import LockError
from incremental.protocol import StepReport
from incremental.store import StateError
from incremental.view import IncrementalView

__all__ = [
    "IncrementalView",
    "LockError",
    "StateError",
    "StepReport",
    "changes",
    "zset",
]


def __getattr__(name: str) -> object:
    """``ProgramView``, a deprecated name of :class:`IncrementalView` (which makes the
    views of programs itself, with :class:`incremental.program_state.ProgramState`); and
    ``testing`` (the strategies and checker for a user's own views), imported when first
    read, so ``import incremental`` needs no hypothesis."""
    if name == "testing":
        import importlib

        return importlib.import_module("incremental.testing")
    if name == "ProgramView":
        import warnings

        warnings.warn(
            "incremental.ProgramView is deprecated: IncrementalView(program, ...) is the "
            "view of a program",
            DeprecationWarning,
            stacklevel=2,
        )
        return IncrementalView
    raise AttributeError(f"module 'incremental' has no attribute {name!r}")
