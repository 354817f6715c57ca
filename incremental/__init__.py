"""Incremental view maintenance for FAQs, DBSP style: Z-sets, the delta rule, views.

>>> from incremental import IncrementalView
>>> IncrementalView.step.__doc__.splitlines()[0]
'Apply one tick of changes; return the change of the output and commit.'
"""

from incremental import zset
from incremental.changes import changes
from incremental.lock import LockError
from incremental.protocol import StepReport
from incremental.recursive import ProgramView  # registers itself: IncrementalView(program)
from incremental.store import StateError
from incremental.view import IncrementalView

__all__ = [
    "IncrementalView",
    "LockError",
    "ProgramView",
    "StateError",
    "StepReport",
    "changes",
    "zset",
]
