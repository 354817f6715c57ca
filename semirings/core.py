"""The :class:`Semiring` type: plain-Python algebra plus optional declared fast paths.

A semiring is one immutable object.  Its Python side (``zero``, ``one``,
``add``, ``mul`` and, for rings, ``neg``) computes on plain scalars and is all a
user needs to write.  Everything else is an optional declaration, made by the
built-ins and left empty by a user semiring:

* :class:`SparkOps`: ⊗ and the binary ⊕ as column expressions and the n-ary ⊕
  as a native aggregate, so built-in semirings never leave the JVM (without it
  the engine falls back to Python UDFs, see :mod:`semirings.spark`);
* :class:`NumpyOps`: the vectorised numpy side used by the local kernels
  (without it :func:`semirings.local.local_ops` runs the Python functions
  element by element);
* :class:`AggregateOps`: the names of ⊕ and ⊗ as query operators and which other
  aggregates form a semiring with ⊗ (:mod:`semirings.aggregates`);
* :class:`LibraryOps`: what a library runner needs to compute ⊕.⊗ exactly with
  SuiteSparse:GraphBLAS or numpy's BLAS (:mod:`faq.kernel.runners`); without it every
  step runs the Generic Join kernel;
* ``completion`` and ``presence``: how a view can keep the semiring's
  annotations in a ring (counting in ℤ, booleans as counts of rows);
* ``selective`` and ``tight``: ⊕ returns one of its arguments (witnesses), and a
  value is supported only by the derivations that attain it (a view of a recursive
  program then re-derives less after a deletion).

The engine decides by these declarations, never by a semiring's name or
identity.  This module imports no other module of the package.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    from pyspark.sql import Column, DataFrame

__all__ = [
    "FUNCTION_MARK",
    "AggregateOps",
    "LibraryOps",
    "NumpyOps",
    "Semiring",
    "SemiringFunctionError",
    "SparkOps",
    "guarded",
    "spark_type_of",
]

ColumnBinary = Callable[["Column", "Column"], "Column"]
ColumnUnary = Callable[["Column"], "Column"]
Reducer = Callable[["DataFrame", list[str], str], "DataFrame"]
ArrayBinary = Callable[["np.ndarray", "np.ndarray"], "np.ndarray"]
ArrayUnary = Callable[["np.ndarray"], "np.ndarray"]

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
    ordered : bool
        True when Spark's own ordering of the annotation column is the order a
        selective ⊕ (max or min) selects by, so a window ``orderBy`` on the value
        finds the rows that attain ⊕ (witnesses).  False (the default) makes the
        engine compare with the ⊕ computed by the semiring itself.
    """

    type: str
    mul: ColumnBinary
    add: ColumnBinary
    valid: ColumnUnary
    agg: ColumnUnary | None = None
    reduce: Reducer | None = None
    neg: ColumnUnary | None = None
    ordered: bool = False

    def __post_init__(self) -> None:
        if (self.agg is None) == (self.reduce is None):
            raise ValueError("SparkOps needs exactly one of agg= or reduce=")


@dataclass(frozen=True)
class NumpyOps:
    """The vectorised numpy side of a semiring, declared beside its :class:`SparkOps`.

    Every function takes and returns numpy arrays of ``dtype``.

    Parameters
    ----------
    dtype : numpy dtype
        The dtype of annotation arrays (``object`` for values numpy has no type for).
    mul : callable
        ``(a, b) -> a ⊗ b`` elementwise.
    reduceat : callable
        ``(values, starts) -> out``: ``out[i]`` is the ⊕ of
        ``values[starts[i]:starts[i + 1]]`` (the last segment runs to the end);
        ``starts`` is increasing and every segment is non-empty.
    ones : callable
        ``(counts) -> out``: ``out[i]`` is the ⊕ of ``counts[i] ≥ 1`` copies of one.
    nonzero : callable
        ``(values) -> bool array``: True where the value is not the semiring zero.
    valid : callable
        ``(values) -> bool array``: True where the value belongs to the semiring
        (what ``contains`` says of each value, for values already of ``dtype``).
    """

    dtype: Any
    mul: ArrayBinary
    reduceat: ArrayBinary
    ones: ArrayUnary
    nonzero: ArrayUnary
    valid: ArrayUnary


@dataclass(frozen=True)
class AggregateOps:
    """How a semiring's ⊕ and ⊗ are named as query operators, and what may replace ⊕.

    A query's ``aggregates={"y": op}`` may eliminate a variable with another
    operator than ⊕ when that operator, with the same ⊗ and zero, is itself a
    semiring (:func:`semirings.aggregates.with_add`).

    Parameters
    ----------
    own : str
        The name of ⊕ as an aggregate operator (``"sum"``, ``"max"``, ``"min"``,
        ``"or"``, ``"logsumexp"``).
    times : str
        The name of ⊗ (``"×"``, ``"+"``, ``"and"``), used to explain a refusal.
    aliases : tuple of str
        Other names of the same ⊕ (``"max"`` is ``"or"`` on booleans).
    others : mapping
        ``{operator: name of the engine semiring it forms with ⊗ and zero}``.
    nonnegative : frozenset of str
        Operators of ``others`` that are sound only on non-negative values.
    """

    own: str
    times: str
    aliases: tuple[str, ...] = ()
    others: Mapping[str, str] = field(default_factory=dict)
    nonnegative: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LibraryOps:
    """What a library runner needs to compute a semiring's ⊕.⊗ with GraphBLAS or numpy.

    A built-in declares this when a library computes its matrix products exactly as
    the Generic Join kernel does (up to the order of a floating-point sum); a
    semiring without it (``log``, provenance, a user semiring) has no library
    runner.  Names are python-graphblas's.

    Parameters
    ----------
    dtype : numpy dtype
        The type the libraries compute in (``float64``, ``int64``, ``bool``).
    semiring : str
        The GraphBLAS semiring of ⊕.⊗ (``"plus_times"``, ``"min_plus"``,
        ``"max_plus"``, ``"max_times"``, ``"lor_land"``).
    monoid : str
        The GraphBLAS monoid of ⊕ (``"plus"``, ``"min"``, ``"max"``, ``"lor"``):
        duplicate keys combined, rows and matrices reduced.
    times : str
        The GraphBLAS binary operator of ⊗ (``"times"``, ``"plus"``, ``"land"``).
    add, mul : numpy ufunc
        ⊕ and ⊗ as numpy ufuncs (``np.minimum``, ``np.add``...), for dense blocks.
    pair : str, optional
        A GraphBLAS semiring that gives the product of two factors whose
        annotations are all one without reading them (``"plus_pair"``: counts of
        paths; ``"lor_pair"``); None when one ⊗ one is not what ``PAIR`` returns.
    sums : bool
        ⊕ is + and ⊗ is ×: numpy's ``matmul`` and ``einsum`` compute ⊕.⊗ (BLAS for
        floats; integers through floats while every partial sum is below 2**53).
    int64 : bool
        Annotations are 64-bit integers, which the libraries wrap around on
        overflow where the kernel raises OverflowError: a runner must first prove
        that no product (and, when ``sums``, no partial sum) leaves 64 bits, and
        leave the step to the Generic Join when it cannot.
    """

    dtype: Any
    semiring: str
    monoid: str
    times: str
    add: Any
    mul: Any
    pair: str | None = None
    sums: bool = False
    int64: bool = False


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
    module-level object: importing this module imports the :mod:`semirings`
    package first, whose modules register every engine semiring.

    Raises
    ------
    KeyError
        No engine semiring is called ``name``.
    """
    if semiring is not None:
        _CANONICAL[name] = semiring
        return semiring
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


def _selects(S: Semiring) -> str | None:
    """``selective`` read off ``S.add`` when it is not declared: the builtin max or min
    (``or`` and ``and`` over booleans)."""
    add = S.add
    booleans = isinstance(S.zero, bool) and isinstance(S.one, bool)
    if add is max or (booleans and add is operator.or_):
        return "max"
    if add is min or (booleans and add is operator.and_):
        return "min"
    return None


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
    domain : str, optional
        Informational description of the value domain, used in messages.
    numpy : NumpyOps, optional
        Vectorised numpy operations.  Without them the local kernels call
        ``add`` and ``mul`` element by element.
    aggregates : AggregateOps, optional
        Operator names of ⊕ and ⊗ for queries' ``aggregates``.  Without it the
        semiring accepts only its own ⊕, called ``"add"``.
    completion : Semiring, optional
        For a semiring that is not a ring but embeds in one (ℕ in ℤ): that ring,
        whose values and operations extend this one's.  A view keeps the
        annotations there, so deletions are negative weights.
    presence : bool
        True when a value says only whether something is present: ⊕ of any
        number of ones is one and every value is zero or one (booleans).  A value
        is then the image of a count of rows (``n > 0``), so a view can keep counts.
    library : LibraryOps, optional
        How GraphBLAS and numpy's BLAS compute ⊕.⊗ exactly.  Without it every step
        runs the Generic Join kernel.
    selective : {"max", "min"}, optional
        ⊕ returns one of its arguments: the larger in Python's order of the values
        (``"max"``: max, or on booleans) or the smaller (``"min"``: min, and).  Then
        every aggregate is attained by one assignment, which ``witness=True`` finds;
        with :attr:`SparkOps.ordered`, Spark's order of the column is that order.  A
        selective ⊕ is idempotent: declare ``idempotent=True`` too.  When omitted it
        is read off ``add``: ``"max"`` for the builtin :func:`max` (or
        :func:`operator.or_` over booleans), ``"min"`` for :func:`min` (or
        :func:`operator.and_`), None otherwise.
    tight : bool
        Only the derivations that attain a value support it: ⊕ is ``selective`` and
        ⊗ is strictly monotone in its order on non-zero values (``a`` better than
        ``b`` makes ``a ⊗ c`` better than ``b ⊗ c`` for every non-zero ``c``:
        min-plus, max-plus, max-product, boolean; not ``max``/``min``, whose ⊗
        ``min`` ties).  An incremental view of a recursive program then deletes,
        after a fact got worse, only the keys some derivation through it attains,
        instead of every key it reaches.  False (the default) is always sound.

    The declarations are read by :mod:`faq.witness` (``selective``),
    :mod:`incremental.regimes` (``completion``, ``presence``: how a view keeps its
    annotations) and :mod:`incremental.fixpoint` (``idempotent``, ``tight``).  A
    semiring that declares nothing takes the general path everywhere: same answers,
    more work.

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
    numpy: NumpyOps | None = None
    aggregates: AggregateOps | None = None
    completion: Semiring | None = None
    presence: bool = False
    library: LibraryOps | None = None
    selective: str | None = None
    tight: bool = False
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle an engine semiring by name, so a Spark task gets the very same object.

        Its declared operations are closures that plain pickling cannot carry,
        and the store identifies an engine semiring by ``canonical(name) is S``.
        """
        if _CANONICAL.get(self.name) is self:
            return (canonical, (self.name,))
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict[str, Any]:
        """The fields, without what was derived from them (:meth:`derived`: Spark UDFs)."""
        return {k: v for k, v in self.__dict__.items() if k != "_derived"}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__["_derived"] = {}

    def derived(self, what: str, make: Callable[[Semiring], Any]) -> Any:
        """``make(self)``, made once per semiring object and kept with it.

        What other modules compute from a semiring and keep (its Spark UDF ops,
        :func:`semirings.spark.ops`) lives exactly as long as the semiring: it is
        dropped with the object, never pickled, and never found by another semiring
        (as a cache keyed by ``id()`` could, after the id is reused).
        """
        found = self._derived.get(what)
        if found is None:
            found = self._derived.setdefault(what, make(self))
        return found

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a Semiring needs a non-empty name")
        for label in ("add", "mul"):
            if not callable(getattr(self, label)):
                raise TypeError(f"semiring {self.name!r}: {label} must be callable")
        if self.neg is not None and not callable(self.neg):
            raise TypeError(f"semiring {self.name!r}: neg must be callable or None")
        for label, kind in (
            ("spark", SparkOps),
            ("numpy", NumpyOps),
            ("aggregates", AggregateOps),
            ("library", LibraryOps),
            ("completion", Semiring),
        ):
            value = getattr(self, label)
            if value is not None and not isinstance(value, kind):
                raise TypeError(
                    f"semiring {self.name!r}: {label} must be a {kind.__name__} or None, "
                    f"not {type(value).__name__}"
                )
        if self.contains is None:
            object.__setattr__(self, "contains", _default_contains(self.zero, self.one))
        if self.spark_type is None:
            inferred = self.spark.type if self.spark is not None else spark_type_of(self.zero)
            object.__setattr__(self, "spark_type", inferred)
        if not self.domain:
            object.__setattr__(self, "domain", self.spark_type or type(self.zero).__name__)
        if self.completion is not None and not self.completion.is_ring:
            raise ValueError(
                f"semiring {self.name!r}: completion {self.completion.name!r} is not a ring"
            )
        if self.completion is not None and self.is_ring:
            raise ValueError(
                f"semiring {self.name!r}: a ring is its own completion; "
                f"drop completion={self.completion.name!r}"
            )
        for label in ("presence", "tight"):
            if not isinstance(getattr(self, label), bool):
                raise TypeError(
                    f"semiring {self.name!r}: {label} must be True or False, "
                    f"not {getattr(self, label)!r}"
                )
        if self.presence and self.completion is not None:
            raise ValueError(
                f"semiring {self.name!r}: declare presence or a completion, not both "
                "(a view keeps counts of rows, or the values in the ring, not both)"
            )
        if self.selective is None:
            object.__setattr__(self, "selective", _selects(self))
        if self.selective not in (None, "max", "min"):
            raise ValueError(
                f"semiring {self.name!r}: selective must be 'max', 'min' or None, "
                f"not {self.selective!r}"
            )
        if self.tight and self.selective is None:
            raise ValueError(
                f"semiring {self.name!r}: tight=True needs a selective ⊕ "
                "(declare selective='max' or 'min')"
            )

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
