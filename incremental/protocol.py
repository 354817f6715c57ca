"""The one protocol every view state follows (:mod:`incremental.driver_state`,
:mod:`incremental.spark_state`, and for a program :mod:`incremental.program_state`).

A state is immutable: :meth:`ViewState.apply` returns the next state and the
change of the output (computed by :mod:`incremental.regimes`, the same for the
driver and Spark states; a program's by :mod:`incremental.fixpoint`), or raises
and leaves the state as it was.  The view commits a tick through its store
(:mod:`incremental.commit`, when it has a ``state_dir``), which reads the next state
only through :meth:`ViewState.parts` (each :class:`Part` hands it its tables; the
store writes them), :meth:`ViewState.describe` and ``where``; then the view replaces
one reference and tells the new state (:meth:`ViewState.settle`).  A state reopens
from a folder by its class's ``restore`` (:class:`StateKind`), which reads its parts
and hands them to the store to replay the journal on
(:meth:`incremental.store.Store.replay`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from faq.kernel import Table

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from faq import Factor, TermReport
    from faq.kernel import KeyedTable
    from incremental.deltas import Rows
    from semirings import Semiring
    from semirings.local import LocalOps

__all__ = [
    "Change",
    "Contents",
    "How",
    "Keyed",
    "Part",
    "StateKind",
    "StepReport",
    "ViewState",
]


class How(NamedTuple):
    """How a view's delta queries run (the view's options, read by name).

    Attributes
    ----------
    order : str or sequence of str
        The variable order of every delta query and recompute (``"auto"``, a strategy
        name, or the variables).
    join : str
        The join method (``"auto"``, ``"wcoj"``, ``"binary"``).
    local : bool
        Whether a delta query may run in the driver over the rows its change reaches
        (:func:`faq.solve_delta`'s ``local``); False: as Spark queries.
    """

    order: Any
    join: str
    local: bool


@dataclass(frozen=True)
class Change:
    """What a tick did to the output.

    ``table`` is what :meth:`IncrementalView.step` returns (ΔQ for rings and
    counting; otherwise the new annotation of every changed output key, zero
    where a key is gone), ``terms`` the delta queries' reports and ``where``
    where they ran.
    """

    table: Table
    terms: tuple[TermReport, ...]
    where: str


@dataclass(frozen=True)
class StepReport:
    """What the last :meth:`IncrementalView.step` did (``view.last_step``).

    Attributes
    ----------
    tick : int
        The view's tick after the step.
    batch_id : int or None
        The step's ``batch_id``, if it had one.
    skipped : bool
        True when the batch was already committed (the step changed nothing).
    terms : tuple of faq.TermReport
        The delta queries the step ran: where each ran, its order and methods.
    rows : int
        Rows of the change the step returned.
    where : str
        Where the delta queries ran (``"driver"``, ``"spark"``, or why nothing ran).
    commit_s : float
        Seconds the step spent making itself durable (with a ``state_dir``): writing its
        intent and its commit frame (or a checkpoint), and waiting for the intent's
        sync; 0 without a ``state_dir``.
    """

    tick: int
    batch_id: int | None = None
    skipped: bool = False
    terms: tuple[TermReport, ...] = ()
    rows: int = 0
    where: str = ""
    commit_s: float = 0.0


class Keyed(Protocol):
    """A relation a state keeps: one annotation per key, read and changed at given keys.

    Implemented by :class:`incremental.driver_state.LocalKeyed` (a keyed table in the
    driver) and :class:`incremental.spark_keyed.RemoteKeyed` (a DataFrame in Spark and
    the keys changed since it was written, in the driver).  Every method returns driver
    tables of the rows asked for; none changes the object (a change returns a new one).
    """

    @property
    def vars(self) -> tuple[str, ...]: ...
    @property
    def ops(self) -> LocalOps: ...
    @property
    def rows(self) -> int: ...
    @property
    def fresh(self) -> bool: ...
    @property
    def keyed_table(self) -> KeyedTable | None: ...
    def kinds(self) -> list[str]: ...
    def at(self, keys: Sequence[np.ndarray]) -> Table: ...
    def matching(self, keys: Sequence[np.ndarray]) -> Table: ...
    def plus(self, delta: Table) -> tuple[Keyed, Table, Table]: ...
    def replace(self, new: Table, old: Table | None = None) -> Keyed: ...
    def emptied(self, like: Sequence[np.ndarray]) -> Keyed: ...
    def journaled(self) -> Keyed: ...
    def factor(self, S: Semiring, name: str) -> Factor: ...
    def indicator(self, S: Semiring, name: str) -> Factor: ...


class Contents:
    """A part's :attr:`Part.token`: the objects that hold its contents, equal to another
    token only when it holds the very same objects (identity, never ``id()``: a freed
    object's id may be reused, an object held here cannot be freed)."""

    __slots__ = ("held",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, *held: object) -> None:
        self.held = held

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Contents) or len(other.held) != len(self.held):
            return False
        return all(a is b for a, b in zip(self.held, other.held, strict=True))

    def __repr__(self) -> str:
        return f"Contents({', '.join(type(x).__name__ for x in self.held)})"


class Part(Protocol):
    """A relation as the store writes it: a base (rewritten rarely) and the rows changed
    since (``over``: each changed key's annotation, zero where it is gone).

    ``base`` is a driver :class:`faq.kernel.Table` or a Spark DataFrame (key columns,
    then the annotation); the store writes it (:meth:`incremental.store.Store.write_base`)
    when it is another object than the last checkpoint wrote.  For the journal
    (:mod:`incremental.journal`): ``token`` identifies the contents, ``origin`` the
    token of the part this one was changed from during the tick (None: it cannot say
    what changed, the tick needs a checkpoint) and ``changes`` the tables replaced
    since ``origin``, in order.
    """

    @property
    def rows(self) -> int: ...
    @property
    def token(self) -> object: ...
    @property
    def origin(self) -> object | None: ...
    @property
    def changes(self) -> tuple[Table, ...]: ...
    @property
    def base(self) -> Any: ...
    @property
    def over(self) -> Table: ...


class ViewState(Protocol):
    """Relations and output of a view: in the driver or in Spark, or of a program."""

    where: str
    """``"driver"`` or ``"spark"`` (a program's state: ``"driver"``)."""

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

    def output_rows(self) -> int:
        """Rows of the output."""
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


class StateKind(Protocol):
    """A kind of view state (its class): how it reopens from a folder."""

    def restore(
        self,
        rule: Any,
        S: Semiring,
        keys: dict[str, tuple[str, ...]],
        store: Any,
        manifest: dict[str, Any],
        frames: Sequence[Any] = (),
    ) -> ViewState:
        """The state of the checkpoint ``manifest`` (checked, upgraded) with the journal's
        ``frames`` replayed: its parts read from the folder (``store.read_keyed``,
        ``store.read_table``) and handed to ``store.replay``, which returns them replayed
        and records what the checkpoint wrote."""
        ...
