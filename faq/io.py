"""Readers for the files real users have: SNAP edge lists, Matrix Market."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["read_edge_list", "load_edge_array", "undirected_simple", "edges_dataframe"]


def load_edge_array(path: str | Path) -> np.ndarray:
    """Read a SNAP-style edge list into an (m, 2) int64 array.

    ``#`` and ``%`` comment lines are skipped quietly; other lines that are not
    two integers (a bare node count, a header that lost its ``#``) are skipped
    with a warning that says how many;
    CRLF line endings and a missing final newline are fine.  Extra columns
    after the first two integers (weights, timestamps) are ignored.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"edge list {str(p)!r} does not exist")
    pairs: list[tuple[int, int]] = []
    skipped = comments = 0
    with p.open("rb") as fh:
        for raw in fh:
            line = raw.strip()
            if not line:
                continue
            if line.startswith((b"#", b"%")):
                comments += 1
                continue
            parts = line.split()
            try:
                pairs.append((int(parts[0]), int(parts[1])))
            except (ValueError, IndexError):
                skipped += 1
    if skipped:
        warnings.warn(
            f"{p.name}: skipped {skipped} line(s) that are not two integers "
            f"(besides {comments} comment line(s))",
            stacklevel=2,
        )
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def undirected_simple(edges: np.ndarray) -> np.ndarray:
    """One row (u, v) with u < v per undirected edge: self-loops and duplicates dropped."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0)


def edges_dataframe(
    edges: np.ndarray, spark: SparkSession | None = None, names: tuple[str, str] = ("src", "dst")
) -> DataFrame:
    """A two-column bigint DataFrame from an (m, 2) array (through Arrow)."""
    import pandas as pd

    from faq.session import get_spark

    spark = spark or get_spark()
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    pdf = pd.DataFrame({names[0]: e[:, 0], names[1]: e[:, 1]})
    schema = f"`{names[0]}` bigint, `{names[1]}` bigint"
    if len(pdf) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pdf, schema=schema)


def read_edge_list(
    path: str | Path,
    spark: SparkSession | None = None,
    *,
    undirected: bool = True,
    names: tuple[str, str] = ("src", "dst"),
) -> DataFrame:
    """A SNAP edge list as a DataFrame of (src, dst) pairs.

    With ``undirected`` (the default) each undirected edge appears once as
    (u, v) with u < v, self-loops dropped: the oriented graph on which
    ``Q() :- E(a, b), E(b, c), E(a, c)`` counts every triangle exactly once.
    """
    e = load_edge_array(path)
    if undirected:
        e = undirected_simple(e)
    return edges_dataframe(e, spark, names)
