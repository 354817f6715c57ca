"""The :class:`Semiring` type: plain-Python algebra plus an optional Spark fast path.

A semiring is one immutable object.  Its Python side (``zero``, ``one``,
``add``, ``mul`` and, for rings, ``neg``) computes on plain scalars and is all a
user needs to write.  Its Spark side, :class:`SparkOps`, is optional: it gives
⊗ and the binary ⊕ as column expressions and the n-ary ⊕ as a native
aggregate, so built-in semirings never leave the JVM.  Without it the engine
falls back to Python UDFs (see :mod:`semirings.spark`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame

__all__ = [
    "FUNCTION_MARK",
    "Semiring",
    "SemiringFunctionError",
    "SparkOps",
    "guarded",
    "spark_type_of",
]

ColumnBinary = Callable[["Column", "Column"], "Column"]
ColumnUnary = Callable[["Column"], "Column"]
Reducer = Callable[["DataFrame", list[str], str], "DataFrame"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class SparkOps:
    """The native Spark side of a semiring.

    Parameters
    ----------
    type : str
        Spark SQL type of the annotation column (``"bigint"``, ``"double"``,
        ``"boolean"``).
    mul : callable
        ⊗ as a column expression ``(Column, Column) -> Column``.
    add : callable
        Binary ⊕ as a column expression (used to merge two relations).
    agg : callable, optional
        The n-ary ⊕ as an aggregate expression ``Column -> Column`` (``F.sum``,
        ``F.max``...).  Give either ``agg`` or ``reduce``.
    reduce : callable, optional
        ``(df, keys, value) -> df``: ⊕-reduce ``value`` grouped by ``keys``,
        for a ⊕ that no single native aggregate computes (logaddexp).
    valid : callable
        Predicate column: true when a value belongs to the semiring.
    neg : callable, optional
        Additive inverse as a column expression (rings only).
    """

    type: str
    mul: ColumnBinary
    add: ColumnBinary
    valid: ColumnUnary
    agg: ColumnUnary | None = None
    reduce: Reducer | None = None
    neg: ColumnUnary | None = None

    def __post_init__(self) -> None:
        if (self.agg is None) == (self.reduce is None):
            raise ValueError("SparkOps needs exactly one of agg= or reduce=")


FUNCTION_MARK = "SemiringFunctionError: "
"""What precedes the message of a :class:`SemiringFunctionError` in the traceback text of
an error a Spark worker reported: the driver finds the message there."""

_SYMBOLS = {"add": "⊕ (add)", "mul": "⊗ (mul)", "neg": "inverse (neg)"}


class SemiringFunctionError(RuntimeError):
    """A user-defined semiring's ``add``, ``mul`` or ``neg`` raised an exception.

    The message is one line naming the semiring, the operation, the Python
    exception and its arguments; the original exception is chained (its
    traceback is the ``__cause__``) when it was raised in this process.
    """


def guarded(S: Semiring, op: str) -> Callable[..., Any]:
    """``S``'s function ``op`` ("add", "mul" or "neg"), raising :class:`SemiringFunctionError`.

    The engine calls user functions through this, in the driver and in Spark
    workers; the error then says which semiring and operation failed instead
    of surfacing as a worker's stack trace.
    """
    fn = getattr(S, op)
    what = _SYMBOLS[op]

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            shown = ", ".join(_short(a) for a in args)
            raise SemiringFunctionError(
                f"semiring {S.name!r}: {what} raised "
                f"{type(exc).__name__}: {exc} (arguments: {shown})"
            ) from exc

    return call


def function_error(text: str) -> SemiringFunctionError | None:
    """The :class:`SemiringFunctionError` whose message appears in ``text`` (an error a
    Spark worker reported), or None."""
    i = text.find(FUNCTION_MARK)
    if i < 0:
        return None
    line = text[i + len(FUNCTION_MARK) :].splitlines()[0].strip()
    return SemiringFunctionError(line)


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


_CANONICAL: dict[str, Semiring] = {}
"""The engine's own semirings by name (the built-ins and internal ones), see
:meth:`Semiring.__reduce_ex__`."""


def canonical(name: str, semiring: Semiring | None = None) -> Semiring:
    """Register ``semiring`` as the engine's own semiring called ``name``, or look it up.

    Unpickling a built-in calls this with the name only, and gets the
    module-level object (its modules are imported first).
    """
    if semiring is not None:
        _CANONICAL[name] = semiring
        return semiring
    import semirings.aggregates  # noqa: F401 - registers its semirings
    import semirings.builtins  # noqa: F401

    return _CANONICAL[name]


def spark_type_of(value: Any) -> str | None:
    """Spark SQL type name for a plain Python scalar, or None when there is none.

    >>> spark_type_of(1.5), spark_type_of(True), spark_type_of(3)
    ('double', 'boolean', 'bigint')
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    return None


def _default_contains(zero: Any, one: Any) -> Callable[[Any], bool]:
    """Membership by type: the type of ``zero`` and ``one`` (ints fit in 64 bits)."""
    kind = spark_type_of(zero) or spark_type_of(one)

    def contains(x: Any) -> bool:
        if x is None:
            return False
        if kind == "boolean":
            return isinstance(x, bool)
        if kind == "bigint":
            return isinstance(x, int) and not isinstance(x, bool) and _INT64_MIN <= x <= _INT64_MAX
        if kind == "double":
            return isinstance(x, int | float) and not isinstance(x, bool) and not math.isnan(x)
        if kind == "string":
            return isinstance(x, str)
        return True

    return contains


@dataclass(frozen=True, eq=False)
class Semiring:
    """A commutative semiring (D, ⊕, ⊗, 0, 1), optionally a ring.

    Parameters
    ----------
    name : str
        Name used in messages and in the registry.
    zero, one : scalar
        Identities of ⊕ and ⊗; ``zero`` annihilates under ⊗.
    add, mul : callable
        ⊕ and ⊗ on plain Python scalars.
    neg : callable, optional
        Additive inverse; when given, the semiring is a ring (``is_ring``) and
        deletions can be expressed as negative weights.
    idempotent : bool
        True when ``a ⊕ a == a`` (max, min, or).
    contains : callable, optional
        Membership test for plain values; by default a type check against
        ``zero`` (ints must fit in 64 bits, floats must not be NaN).
    spark : SparkOps, optional
        Native Spark fast path.  Without it the engine uses Python UDFs.
    spark_type : str, optional
        Spark SQL type of the annotation column for the UDF path; inferred from
        ``zero`` when omitted.
    zero_dtype : str, optional
        Informational description of the value domain, used in messages.

    Examples
    --------
    >>> bottleneck = Semiring(name="bottleneck", zero=float("-inf"),
    ...                       one=float("inf"), add=max, mul=min)
    >>> bottleneck.add(2.0, 5.0), bottleneck.mul(2.0, 5.0), bottleneck.is_ring
    (5.0, 2.0, False)
    """

    name: str
    zero: Any
    one: Any
    add: Callable[[Any, Any], Any]
    mul: Callable[[Any, Any], Any]
    neg: Callable[[Any], Any] | None = None
    idempotent: bool = False
    contains: Callable[[Any], bool] | None = None
    spark: SparkOps | None = None
    spark_type: str | None = None
    domain: str = field(default="")

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle a built-in by name, so a Spark task gets the very same object.

        The engine picks its vectorised numpy and native Spark paths by the
        identity of a built-in semiring; a copy made by pickling (as a Spark
        task's closure is) would fall back to the element-by-element path.
        """
        if _CANONICAL.get(self.name) is self:
            return (canonical, (self.name,))
        return super().__reduce_ex__(protocol)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a Semiring needs a non-empty name")
        for label in ("add", "mul"):
            if not callable(getattr(self, label)):
                raise TypeError(f"semiring {self.name!r}: {label} must be callable")
        if self.neg is not None and not callable(self.neg):
            raise TypeError(f"semiring {self.name!r}: neg must be callable or None")
        if self.contains is None:
            object.__setattr__(self, "contains", _default_contains(self.zero, self.one))
        if self.spark_type is None:
            inferred = self.spark.type if self.spark is not None else spark_type_of(self.zero)
            object.__setattr__(self, "spark_type", inferred)
        if not self.domain:
            object.__setattr__(self, "domain", self.spark_type or type(self.zero).__name__)

    # -- algebra on plain values -------------------------------------------------
    @property
    def is_ring(self) -> bool:
        """True when ⊕ has inverses (``neg`` is defined)."""
        return self.neg is not None

    @property
    def has_native_spark(self) -> bool:
        """True when ⊗ and ⊕ compile to native Spark expressions."""
        return self.spark is not None

    def sum(self, values: Iterable[Any]) -> Any:
        """⊕ of ``values`` (``zero`` for none).

        >>> import semirings
        >>> semirings.get("min-plus").sum([3.0, 1.0, 2.0])
        1.0
        """
        return functools.reduce(self.add, values, self.zero)

    def prod(self, values: Iterable[Any]) -> Any:
        """⊗ of ``values`` (``one`` for none)."""
        return functools.reduce(self.mul, values, self.one)

    def is_zero(self, value: Any) -> bool:
        """True when ``value`` equals the semiring zero."""
        return value == self.zero

    def check_value(self, value: Any, where: str = "value") -> None:
        """Raise ValueError when ``value`` is not an element of this semiring."""
        ok = False
        try:
            ok = bool(self.contains(value))  # type: ignore[misc]
        except Exception:  # a membership test that fails is a "no"
            ok = False
        if not ok:
            raise ValueError(
                f"{where}: {value!r} is not a value of the {self.name!r} semiring "
                f"(domain: {self.domain})"
            )

    def __repr__(self) -> str:
        kind = "ring" if self.is_ring else "semiring"
        path = "native Spark" if self.has_native_spark else "Python UDF"
        return f"Semiring({self.name!r}, {kind}, zero={self.zero!r}, one={self.one!r}, {path})"
