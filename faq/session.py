"""The SparkSession the engine uses: the active one, or a local one made on demand."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

LOCAL_CONFIG: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def local_session(master: str = "local[*]", **config: str) -> SparkSession:
    """A local SparkSession with the settings the examples and benchmarks use.

    An already active session is returned as it is: its configuration is the
    caller's, and is not overwritten.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(master).appName("sparkfaq")
    for k, v in {**LOCAL_CONFIG, **config}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def get_spark() -> SparkSession:
    """The active SparkSession, or a new local one."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return active if active is not None else local_session()
