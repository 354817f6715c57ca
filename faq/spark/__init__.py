"""The Spark substrate: conversion, checks, joins and aggregates, the kernel in tasks and cells.

Spark moves data; the kernel joins.  Nothing here chooses a plan: these
modules take the orders and methods the planning layer (:mod:`faq.plan`)
decided.

* :mod:`faq.spark.convert`: Arrow batches <-> kernel tables;
* :mod:`faq.spark.checks`: null keys, types, semiring values and statistics in one job;
* :mod:`faq.spark.ops`: binary joins, Generic Join on DataFrames, aggregation;
* :mod:`faq.spark.tasks`: the kernel inside Spark tasks over a broadcast index;
* :mod:`faq.spark.partitioned`: past what a worker holds, one HyperCube shuffle and the
  kernel in every cell;
* :mod:`faq.spark.reach`: the rows a change reaches, by ``IN``-list or semi-join scans;
* :mod:`faq.spark.delta_task`: the delta rule's one-task mechanics.
"""

from faq.spark.convert import arrow_to_table, to_spark
from faq.spark.ops import all_of, in_list, isin_literals, sql_name, union_all
from faq.spark.reach import Scan, fetch_tagged
from faq.spark.tasks import TaskError, driver_cores, is_connect, parallelism

__all__ = [
    "Scan",
    "TaskError",
    "all_of",
    "arrow_to_table",
    "driver_cores",
    "fetch_tagged",
    "in_list",
    "is_connect",
    "isin_literals",
    "parallelism",
    "sql_name",
    "to_spark",
    "union_all",
]
