"""Z-sets on Spark DataFrames, grouped by how each operator incrementalises.

A Z-set is a relation whose rows carry a weight: a DataFrame of key columns
plus a ``value`` column.  Over the integers a weight is a multiplicity, and a
negative weight is a deletion; over any other semiring it is an annotation.
Absent keys have weight zero, and two rows with the same key mean the ⊕ of
their weights, so a Z-set has many representations; :func:`consolidate` picks
the canonical one (one row per key, no zero weights).

Operators are grouped by algebraic class, as in DBSP (Budiu et al., "DBSP:
Automatic Incremental View Maintenance for Rich Query Languages", VLDB 2023):

* **linear** operators (:func:`plus`, :func:`negate`, :func:`consolidate`,
  :func:`project`, :func:`partition`, :func:`add_delta`) commute with ⊕, so each is its own
  incremental version: ``Δ(f(A)) = f(ΔA)``;
* **bilinear** operators (:func:`join`) are linear in each argument
  separately, and incrementalise by the product rule
  ``Δ(A ⋈ B) = ΔA ⋈ ΔB ⊕ A ⋈ ΔB ⊕ ΔA ⋈ B`` (:func:`join_delta`), where A and B
  are the values before the change.

Every function takes the semiring of the weights, :data:`semirings.INTEGER`
(the Z of Z-sets) by default, and works for any semiring through
:func:`semirings.spark.ops`; :func:`negate` needs a ring.

Examples
--------
>>> a = spark.createDataFrame([(1, 2), (2, 1)], "k bigint, value bigint")  # doctest: +SKIP
>>> b = spark.createDataFrame([(1, -2), (3, 5)], "k bigint, value bigint")  # doctest: +SKIP
>>> to_dict(plus(a, b))                                                    # doctest: +SKIP
{(2,): 1, (3,): 5}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import semirings
from faq import VALUE
from faq.spark import union_all
from semirings import Semiring
from semirings import spark as sops

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "VALUE",
    "add_delta",
    "consolidate",
    "join",
    "join_delta",
    "key_columns",
    "minus",
    "negate",
    "partition",
    "plus",
    "project",
    "to_dict",
    "weighted",
]


# -- shape --------------------------------------------------------------------------------
def key_columns(z: DataFrame) -> list[str]:
    """The key columns of a Z-set: every column except ``value``, in order."""
    return [c for c in z.columns if c != VALUE]


def _require_value(z: DataFrame, where: str) -> None:
    if VALUE not in z.columns:
        raise ValueError(
            f"{where}: a Z-set needs a {VALUE!r} column of weights; columns found: {z.columns!r}"
        )


def weighted(df: DataFrame, semiring: str | Semiring = semirings.INTEGER) -> DataFrame:
    """``df`` as a Z-set: its ``value`` column cast to the semiring's type, or weight one per row.

    >>> weighted(spark.createDataFrame([(1, 2)], "a bigint, b bigint")).columns  # doctest: +SKIP
    ['a', 'b', 'value']
    """
    from pyspark.sql import functions as F

    S = semirings.get(semiring)
    t = sops.ops(S).type
    keys = key_columns(df)
    if VALUE in df.columns:
        return df.select(*keys, F.col(VALUE).cast(t).alias(VALUE))
    return df.select(*keys, sops.constant(S, S.one).alias(VALUE))


def to_dict(
    z: DataFrame, semiring: str | Semiring = semirings.INTEGER
) -> dict[tuple[Any, ...], Any]:
    """``{key tuple: weight}`` of the consolidated Z-set (collects it to the driver)."""
    n = len(key_columns(z))
    return {tuple(r[:n]): r[n] for r in consolidate(z, semiring).collect()}


# -- linear operators: each is its own delta ---------------------------------------------------
def consolidate(z: DataFrame, semiring: str | Semiring = semirings.INTEGER) -> DataFrame:
    """The canonical form: ⊕ the weights of equal keys, drop keys whose weight is zero.

    Linear: ``consolidate(A ⊕ B)`` represents the same Z-set as ``A ⊕ B``.
    A Z-set without keys (a scalar) consolidates to zero rows or one.
    """
    from pyspark.sql import functions as F

    _require_value(z, "consolidate")
    S = semirings.get(semiring)
    keys = key_columns(z)
    out = sops.reduce(S, z.select(*keys, VALUE), keys, VALUE)
    keep = sops.nonzero(S, F.col(VALUE))
    if not keys:  # a global aggregate yields one row even for an empty input
        keep = F.col(VALUE).isNotNull() & keep
    return out.filter(keep).select(*keys, VALUE)


def plus(a: DataFrame, b: DataFrame, semiring: str | Semiring = semirings.INTEGER) -> DataFrame:
    """``a ⊕ b``, consolidated: keys whose weights cancel disappear.

    Both Z-sets must have the same key columns (matched by name).
    """
    _require_value(a, "plus")
    _require_value(b, "plus")
    ka, kb = key_columns(a), key_columns(b)
    if sorted(ka) != sorted(kb):
        raise ValueError(f"plus: key columns differ: {ka!r} and {kb!r}")
    return consolidate(a.select(*ka, VALUE).unionByName(b.select(*ka, VALUE)), semiring)


def negate(z: DataFrame, semiring: str | Semiring = semirings.INTEGER) -> DataFrame:
    """``-z``: every weight replaced by its additive inverse (rings only).

    Raises
    ------
    ValueError
        When the semiring has no additive inverse (``is_ring`` is False).
    """
    from pyspark.sql import functions as F

    _require_value(z, "negate")
    S = semirings.get(semiring)
    o = sops.ops(S)
    if not S.is_ring or o.neg is None:
        raise ValueError(
            f"negate: the {S.name!r} semiring has no additive inverse; "
            "Z-set negation needs a ring such as 'integer' or 'real'"
        )
    keys = key_columns(z)
    return z.select(*keys, o.neg(F.col(VALUE)).alias(VALUE))


def minus(a: DataFrame, b: DataFrame, semiring: str | Semiring = semirings.INTEGER) -> DataFrame:
    """``a ⊕ (-b)``, consolidated (rings only)."""
    return plus(a, negate(b, semiring), semiring)


def project(
    z: DataFrame, keys: Sequence[str], semiring: str | Semiring = semirings.INTEGER
) -> DataFrame:
    """Keep only ``keys``, ⊕-ing the weights of rows that become equal (SQL ``GROUP BY``)."""
    _require_value(z, "project")
    missing = [k for k in keys if k not in key_columns(z)]
    if missing:
        raise ValueError(f"project: no key column(s) {missing!r}; columns found: {z.columns!r}")
    return consolidate(z.select(*keys, VALUE), semiring)


def partition(z: DataFrame, partitions: int) -> DataFrame:
    """``z`` hash-partitioned by all its key columns into ``partitions`` parts (same Z-set).

    A consolidated Z-set kept partitioned this way can absorb deltas with
    :func:`add_delta` without being shuffled.
    """
    keys = key_columns(z)
    return z.repartition(partitions, *keys) if keys else z.coalesce(1)


def add_delta(
    base: DataFrame,
    delta: DataFrame,
    semiring: str | Semiring = semirings.INTEGER,
    partitions: int | None = None,
) -> DataFrame:
    """``base ⊕ delta``, consolidated, shuffling only ``delta`` when ``base`` is partitioned.

    Same Z-set as :func:`plus`.  When ``base`` is hash-partitioned by its key
    columns into ``partitions`` parts (see :func:`partition`; a
    ``localCheckpoint`` keeps that partitioning), the delta is repartitioned
    the same way, so the union is co-partitioned and the ⊕-aggregation by key
    needs no exchange of ``base``: a tick costs a scan of the state and a
    shuffle of the delta.  The result is partitioned the same way again.

    Parameters
    ----------
    base, delta : DataFrame
        Z-sets with the same key columns (``base`` consolidated).
    semiring : str or Semiring
        The semiring of the weights.
    partitions : int, optional
        The number of hash partitions of ``base``; None shuffles both sides.
    """
    _require_value(base, "add_delta")
    _require_value(delta, "add_delta")
    keys = key_columns(base)
    if sorted(keys) != sorted(key_columns(delta)):
        raise ValueError(f"add_delta: key columns differ: {keys!r} and {key_columns(delta)!r}")
    d = delta.select(*keys, VALUE)
    if partitions is not None:
        d = partition(d, partitions)
    return consolidate(base.select(*keys, VALUE).unionByName(d), semiring)


# -- bilinear operators: the product rule ------------------------------------------------------
def join(
    a: DataFrame,
    b: DataFrame,
    semiring: str | Semiring = semirings.INTEGER,
    on: Sequence[str] | None = None,
) -> DataFrame:
    """Natural join of two Z-sets; the weight of a joined row is the ⊗ of the two weights.

    Joins on ``on`` (default: the key columns the two share; none gives the
    Cartesian product).  Bilinear: ``(A ⊕ A') ⋈ B = A ⋈ B ⊕ A' ⋈ B``, and
    likewise in ``B``.  The output may repeat keys; :func:`consolidate` it
    for the canonical form.
    """
    from pyspark.sql import functions as F

    _require_value(a, "join")
    _require_value(b, "join")
    S = semirings.get(semiring)
    o = sops.ops(S)
    ka, kb = key_columns(a), key_columns(b)
    shared = [k for k in ka if k in kb] if on is None else list(on)
    bad = [k for k in shared if k not in ka or k not in kb]
    if bad:
        raise ValueError(f"join: column(s) {bad!r} are not keys of both sides ({ka!r}, {kb!r})")
    clash = [k for k in kb if k in ka and k not in shared]
    if clash:
        raise ValueError(
            f"join: key column(s) {clash!r} appear on both sides but are not joined on"
        )
    left = a.withColumnRenamed(VALUE, "__wa")
    right = b.withColumnRenamed(VALUE, "__wb")
    joined = left.join(right, on=shared, how="inner") if shared else left.crossJoin(right)
    out_keys = [*ka, *(k for k in kb if k not in ka)]
    return joined.select(*out_keys, o.mul(F.col("__wa"), F.col("__wb")).alias(VALUE))


def join_delta(
    a: DataFrame,
    da: DataFrame,
    b: DataFrame,
    db: DataFrame,
    semiring: str | Semiring = semirings.INTEGER,
    on: Sequence[str] | None = None,
) -> DataFrame:
    """The change of ``A ⋈ B`` when ``A`` gains ``ΔA`` and ``B`` gains ``ΔB``, consolidated.

    ``Δ(A ⋈ B) = ΔA ⋈ ΔB ⊕ A ⋈ ΔB ⊕ ΔA ⋈ B`` with ``A`` and ``B`` the values
    *before* the change: the product rule of a bilinear operator.  It holds in
    any commutative semiring (⋈ distributes over ⊕), with ``(A ⊕ ΔA) ⋈ (B ⊕ ΔB)
    = A ⋈ B ⊕ Δ(A ⋈ B)``.
    """
    terms = [join(da, db, semiring, on), join(a, db, semiring, on), join(da, b, semiring, on)]
    cols = terms[0].columns
    return consolidate(union_all([t.select(*cols) for t in terms]), semiring)
