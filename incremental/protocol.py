"""The one protocol both view states follow (:mod:`incremental.driver_state`,
:mod:`incremental.spark_state`).

A state is immutable: :meth:`ViewState.apply` returns the next state and the
change of the output (computed by :mod:`incremental.regimes`, the same for both
states), or raises and leaves the state as it was.  The view commits a tick by
writing the next state's :meth:`ViewState.parts` through its store (when it has
a ``state_dir``), then replacing one reference and telling the new state
(:meth:`ViewState.settle`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from faq import Factor
    from faq.kernel import Table
    from incremental.deltas import Rows
    from incremental.regimes import Change
    from incremental.store import Store
    from incremental.terms import How

__all__ = ["Part", "ViewState"]


class Part(Protocol):
    """A relation as the store writes it: a base (rewritten rarely) and the rows changed
    since (``over``: each changed key's annotation, zero where it is gone)."""

    @property
    def rows(self) -> int: ...
    @property
    def base_token(self) -> object: ...
    @property
    def over(self) -> Table: ...
    def write_base(self, store: Store, path: Any) -> dict[str, dict[str, Any]]: ...


class ViewState(Protocol):
    """Relations and output of a view: in the driver or in Spark."""

    where: str
    """``"driver"`` or ``"spark"``."""

    def apply(
        self, deltas: Mapping[str, Rows], how: How, sets: Mapping[str, str] | None
    ) -> tuple[ViewState, Change]:
        """The next state and the change of the output (nothing committed)."""
        ...

    def result(self) -> Factor:
        """The output in the view's semiring."""
        ...

    def relation(self, name: str) -> Factor:
        """A relation in the view's semiring."""
        ...

    def total_rows(self) -> int:
        """Rows of all relations (an upper bound in Spark)."""
        ...

    def parts(self) -> Mapping[str, Part]:
        """What a durable view writes, by part name (see :meth:`regimes.Maintained.parts`)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the manifest records besides the parts (e.g. key types)."""
        ...

    def settle(self) -> None:
        """Called after every step, committed or refused: free what the view no longer
        reads (Spark checkpoints; nothing in the driver)."""
        ...
