"""The numpy/numba substrate: tables, tries, Generic Join, keyed tables, statistics, values.

Everything here works on :class:`Table` (numpy key columns plus an annotation
array) and a semiring's numpy operations (:func:`semirings.local.local_ops`);
nothing here knows about Spark, factors or queries.  The same kernel runs in
the driver and inside Spark tasks.

* :mod:`faq.kernel.table`: the Table and its algebra (⊕-grouping, concatenation);
* :mod:`faq.kernel.trie` and :mod:`faq.kernel.compiled`: tries and their compiled searches;
* :mod:`faq.kernel.join`: worst-case optimal Generic Join over tries;
* :mod:`faq.kernel.runners`: the runners of one step by name: the Generic Join kernel, or a
  library made for the step's shape (:mod:`faq.kernel.sparse`: GraphBLAS products;
  :mod:`faq.kernel.dense`: BLAS and compiled dense loops; :mod:`faq.kernel.library`: what
  they share), each returning exactly what the Generic Join kernel returns;
* :mod:`faq.kernel.keyed`: KeyedTable, a table kept by key under ⊕-updates;
* :mod:`faq.kernel.merge`: whole keys found in sorted rows and tries, rows merged into a trie;
* :mod:`faq.kernel.seeded`: the delta rule over keyed tables of integer counts, as seeded joins;
* :mod:`faq.kernel.paired`: rules of two atoms over keyed tables as one lookup and one pair
  join, and the one choice among the runners made for keyed tables (``keyed_delta``);
* :mod:`faq.kernel.stats`: exact row, distinct and pairwise-join counts;
* :mod:`faq.kernel.values`: key and annotation arrays typed and checked for a semiring.
"""

from faq.kernel.compiled import warm_up_in_background
from faq.kernel.compiled_paths import VIA_BASE, VIA_EDGE, VIA_GONE, path_overdelete, path_repair
from faq.kernel.join import CHUNK, JoinStats, generic_join, generic_join_threads, index
from faq.kernel.keyed import KeyedTable
from faq.kernel.merge import changed_rows, match_keys
from faq.kernel.paired import keyed_delta, paired_at, paired_delta
from faq.kernel.reach import narrow
from faq.kernel.seeded import seeded_delta, trie_orders
from faq.kernel.stats import RelationStats, pair_join_size, table_stats
from faq.kernel.table import (
    Table,
    cat_rows,
    concat,
    consolidated,
    empty_table,
    group_reduce,
    ranges,
    with_values,
)
from faq.kernel.trie import NUMBA, Trie, build_trie
from faq.kernel.values import (
    check_annotations,
    check_key_types,
    scalar_value,
    spark_type,
    typed_values,
)

__all__ = [
    "CHUNK",
    "VIA_BASE",
    "VIA_EDGE",
    "VIA_GONE",
    "NUMBA",
    "JoinStats",
    "KeyedTable",
    "RelationStats",
    "Table",
    "Trie",
    "build_trie",
    "cat_rows",
    "changed_rows",
    "check_annotations",
    "check_key_types",
    "concat",
    "consolidated",
    "empty_table",
    "generic_join",
    "generic_join_threads",
    "group_reduce",
    "index",
    "keyed_delta",
    "match_keys",
    "narrow",
    "pair_join_size",
    "path_overdelete",
    "path_repair",
    "paired_at",
    "paired_delta",
    "ranges",
    "scalar_value",
    "seeded_delta",
    "spark_type",
    "table_stats",
    "trie_orders",
    "typed_values",
    "warm_up_in_background",
    "with_values",
]
