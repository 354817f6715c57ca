"""Readers: the quirks real SNAP files have (see shared data README), strict parsing, CSV,
Parquet and Matrix Market, and ``faq.io.read`` (one rule for every format).  Everything here but
test_read_matrix_market_dataframes runs without Spark."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import numpy as np
import pytest

from faq.io import (
    ArityError,
    BadLineError,
    detect_format,
    load_edge_array,
    load_matrix_market,
    load_table,
    undirected_simple,
)

DATA = Path(__file__).parent / "data"


def test_quirky_edge_list(tmp_path):
    p = tmp_path / "g.txt"
    # CRLF, comments, a bare node count, a header without '#', a self-loop, both
    # directions of one edge, extra columns, no final newline
    p.write_bytes(b"# comment\r\n42\r\nFromNodeId ToNodeId\r\n1 2\r\n2 1\r\n3\t3\r\n2 3 0.5\r\n1 3")
    with pytest.warns(UserWarning, match="skipped 2 line\\(s\\) .*besides 1 comment"):
        e = load_edge_array(p)
    assert e.tolist() == [[1, 2], [2, 1], [3, 3], [2, 3], [1, 3]]
    assert undirected_simple(e).tolist() == [[1, 2], [1, 3], [2, 3]]


def test_comments_alone_do_not_warn(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("# a\n% b\n0 1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_edge_array(p).shape == (1, 2)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_edge_array(tmp_path / "nope.txt")
    assert undirected_simple(np.empty((0, 2))).shape == (0, 2)


# -- strict edge lists ----------------------------------------------------------------------------
def test_load_edge_array_strict_names_file_and_line(tmp_path):
    p = tmp_path / "g.txt"
    p.write_bytes(b"# c\r\n1 2\r\n\r\n2 3 4\r\n")
    with pytest.raises(BadLineError, match=r"g\.txt, line 4: expected two integer ids.*'2 3 4'"):
        load_edge_array(p, strict=True)
    p.write_text("% c\n7\n")
    with pytest.raises(BadLineError, match="line 2"):
        load_edge_array(p, strict=True)
    p.write_bytes(b"# ok\n1 2\r\n2 3")
    assert load_edge_array(p, strict=True).tolist() == [[1, 2], [2, 3]]


def test_gzipped_edge_list(tmp_path):
    p = tmp_path / "g.txt.gz"
    p.write_bytes(gzip.compress(b"# c\n1 2\n2 3\n"))
    assert load_edge_array(p).tolist() == [[1, 2], [2, 3]]
    t = load_table(p, 2)
    assert t.format == "edgelist" and t.keys[1].tolist() == [2, 3]


def test_load_table_edge_list_formatting_is_tolerated(tmp_path):
    p = tmp_path / "g.txt"
    # CRLF, blank lines, both comment styles, tabs and runs of spaces, no final newline
    p.write_bytes(b"# c\r\n%c\r\n\r\n1\t2\r\n  2   3  \r\n\r\n3 1")
    t = load_table(p, 2)
    assert [k.tolist() for k in t.keys] == [[1, 2, 3], [2, 3, 1]]
    assert t.keys[0].dtype == np.int64 and t.values is None and t.skipped == 0
    assert t.where(1) == "line 5"
    # the arity defaults to the first data line's
    assert load_table(p).columns == ("c0", "c1")


@pytest.mark.parametrize(
    ("content", "line", "found"),
    [(b"1 2\n2 3 4\n3 4\n", 2, "found 3 token"), (b"1 2\n# c\n5\n3 4\n", 3, "found 1 token")],
)
def test_load_table_strict_and_skip(tmp_path, content, line, found):
    p = tmp_path / "g.txt"
    p.write_bytes(content)
    with pytest.raises(BadLineError, match=rf"g\.txt, line {line}: expected 2 .*{found}") as err:
        load_table(p, 2)
    assert err.value.where == f"line {line}" and err.value.path == str(p)
    t = load_table(p, 2, strict=False)
    assert t.rows == 2 and t.skipped == 1
    assert t.first_skipped.startswith(f"line {line}: ")


def test_header_that_lost_its_hash(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("# Nodes: 3\nFromNodeId\tToNodeId\n1\t2\n2\t3\n")
    with pytest.raises(BadLineError, match="line 2: 'FromNodeId ToNodeId' looks like a header"):
        load_table(p, 2)
    t = load_table(p, 2, strict=False)
    assert t.keys[0].tolist() == [1, 2] and t.keys[0].dtype == np.int64
    assert t.skipped == 1 and t.first_skipped.startswith("line 2")
    assert t.where(0) == "line 3"


def test_a_bad_line_names_the_way_to_skip_it(tmp_path):
    """faq.io.read's error names strict=False (it said only to edit the file); an error
    that strict=False does not skip names nothing."""
    import faq.io

    p = tmp_path / "g.txt"
    p.write_text("FromNodeId ToNodeId\n1 2\n2 3\n1 3\n")
    with pytest.raises(BadLineError, match=r"looks like a header.*strict=False") as info:
        faq.io.read(p)
    assert info.value.skippable and "strict=False" not in info.value.located
    assert faq.io.read(p, strict=False).to_dict() == {(1, 2): 1, (2, 3): 1, (1, 3): 1}
    bad = tmp_path / "v.csv"
    bad.write_text("a,b,value\n1,2,x\n")
    with pytest.raises(BadLineError, match="annotations must be numbers") as info:
        faq.io.read(bad, strict=False)
    assert not info.value.skippable and "strict=False" not in str(info.value)


def test_arity_mismatch_is_not_a_bad_line(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("1 2 0.5\n2 3 0.25\n")
    for strict in (True, False):
        with pytest.raises(ArityError, match="has 3 column.*but 2 are expected.*CSV") as err:
            load_table(p, 2, strict=strict)
        assert (err.value.found, err.value.expected) == (3, 2)


def test_string_ids(tmp_path):
    t = load_table(DATA / "named.txt", 2)
    assert t.string_ids and t.keys[0].dtype.kind == "U"
    assert t.keys[0].tolist()[:2] == ["alice", "bob"]
    # integers mixed with words: every id of the file is a string then
    p = tmp_path / "g.txt"
    p.write_text("1 x\n2 1\n")
    t = load_table(p, 2)
    assert [k.tolist() for k in t.keys] == [["1", "2"], ["x", "1"]]
    p.write_bytes(b"1 2\n\xff\xfe 3\n")
    with pytest.raises(BadLineError, match="line 2: the line is not UTF-8"):
        load_table(p, 2)


def test_empty_edge_list(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("# only a comment\n\n")
    t = load_table(p, 2)
    assert t.rows == 0 and [k.tolist() for k in t.keys] == [[], []]


def test_detect_format(tmp_path):
    assert detect_format("a.csv") == "csv"
    assert detect_format("a.CSV.gz") == "csv"
    assert detect_format("a.parquet") == "parquet"
    assert detect_format(tmp_path) == "parquet"  # a directory of part files
    assert detect_format("a.mtx") == "mtx"
    assert detect_format("a.txt") == detect_format("a.tsv.gz") == "edgelist"


def test_unknown_format_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="unknown format 'xls'"):
        load_table(tmp_path / "a", format="xls")
    for name in ("a.txt", "a.csv", "a.mtx", "a.parquet"):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            load_table(tmp_path / name, 2)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        load_table(tmp_path, 2, format="edgelist")


# -- CSV ------------------------------------------------------------------------------------------
def test_csv_keys_and_value(tmp_path):
    t = load_table(DATA / "named_weights.csv", 1)
    assert t.columns == ("node",) and t.keys[0].tolist() == ["bob", "carol", "dave"]
    assert t.values.tolist() == [10, 100, 1000] and t.values.dtype == np.int64
    p = tmp_path / "m.csv"
    p.write_bytes(b"value,i,j\r\n0.5,0,1\r\n2.0,1,1")  # value may come first; CRLF
    t = load_table(p, 2)
    assert t.columns == ("i", "j") and t.values.tolist() == [0.5, 2.0]
    assert t.keys[0].dtype == np.int64


def test_csv_bad_rows_name_the_physical_line(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("a,b\n1,2\n\n2,3,4\n3,4\n,5\n")
    with pytest.raises(BadLineError, match=r"e\.csv, line 4: expected 2 comma-separated"):
        load_table(p, 2)
    t = load_table(p, 2, strict=False)
    assert t.keys[0].tolist() == [1, 3] and t.skipped == 2
    assert t.first_skipped.startswith("line 4")
    assert t.where(1) == "line 5"
    p.write_text("a,b\n1,2\n\n,5\n")
    with pytest.raises(BadLineError, match=r"line 4: empty 'a'"):
        load_table(p, 2)


def test_csv_arity_value_and_type_errors(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("a,b,w\n1,2,3\n")
    with pytest.raises(ArityError, match=r"3 key column\(s\) \['a', 'b', 'w'\] but 2.*'value'"):
        load_table(p, 2)
    p.write_text("a,b,value\n1,2,3\n2,3,lots\n")
    with pytest.raises(BadLineError, match="line 3: 'value' is 'lots'"):
        load_table(p, 2)
    p.write_text("a,b\n1.5,2\n")
    with pytest.raises(ValueError, match="key column 'a' has type double"):
        load_table(p, 2)
    p.write_text("")
    with pytest.raises(ValueError, match="is empty: a CSV file needs a header"):
        load_table(p, 2)
    p.write_text("a,b\n")
    assert load_table(p, 2).rows == 0


# -- Parquet --------------------------------------------------------------------------------------
def test_parquet_file_and_directory(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"src": ["x", "y"], "dst": pa.array([1, 2], pa.int32()), "value": [0.5, 1.5]})
    pq.write_table(table, tmp_path / "e.parquet")
    t = load_table(tmp_path / "e.parquet", 2)
    assert t.keys[0].tolist() == ["x", "y"] and t.keys[1].dtype == np.int64
    assert t.values.tolist() == [0.5, 1.5] and t.where(1) == "row 2"
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(table.slice(0, 1), d / "part-0.parquet")
    pq.write_table(table.slice(1, 1), d / "part-1.parquet")
    (d / "_SUCCESS").write_bytes(b"")
    assert sorted(load_table(d, 2).keys[0].tolist()) == ["x", "y"]
    pq.write_table(pa.table({"a": [1, None]}), tmp_path / "n.parquet")
    with pytest.raises(BadLineError, match="row 2: empty 'a'"):
        load_table(tmp_path / "n.parquet", 1)
    assert load_table(tmp_path / "n.parquet", 1, strict=False).skipped == 1
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="cannot read as Parquet"):
        load_table(tmp_path / "bad.parquet", 2)


# -- Matrix Market --------------------------------------------------------------------------------
def _mtx(tmp_path, text: str) -> Path:
    p = tmp_path / "m.mtx"
    p.write_text(text)
    return p


def test_matrix_market_pattern_symmetric():
    mm = load_matrix_market(DATA / "tri.mtx")
    assert (mm.field, mm.symmetry, mm.shape, len(mm.rows)) == ("pattern", "symmetric", (5, 5), 7)
    assert mm.values is None and (mm.rows.min(), mm.rows.max()) == (1, 5)  # as written
    full = mm.expanded()
    assert len(full.rows) == 7 + 6  # the diagonal entry is not mirrored
    assert set(zip(full.rows.tolist(), full.cols.tolist(), strict=True)) >= {(1, 2), (2, 1)}
    assert mm.graph_edges().tolist() == [[1, 2], [1, 3], [2, 3], [3, 4], [3, 5], [4, 5]]
    t = load_table(DATA / "tri.mtx", 2)
    assert t.format == "mtx" and t.field == "pattern" and t.rows == 13 and t.values is None


def test_matrix_market_real_integer_skew(tmp_path):
    real = "%%MatrixMarket matrix coordinate real general\n% c\n2 3 2\n1 3 0.5\n2 1 -2e1\n"
    mm = load_matrix_market(_mtx(tmp_path, real))
    assert mm.rows.tolist() == [1, 2] and mm.cols.tolist() == [3, 1]
    assert mm.values.tolist() == [0.5, -20.0] and mm.expanded() is mm
    assert load_table(tmp_path / "m.mtx", 2).where(1) == "line 5"
    skew = "%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 1\n3 1 4\n"
    full = load_matrix_market(_mtx(tmp_path, skew)).expanded()
    assert full.values.dtype == np.int64
    assert sorted(
        zip(full.rows.tolist(), full.cols.tolist(), full.values.tolist(), strict=True)
    ) == [
        (1, 3, -4),
        (3, 1, 4),
    ]
    sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 1.5\n2 1 3\n"
    t = load_table(_mtx(tmp_path, sym), 2)
    assert sorted(zip(*(k.tolist() for k in t.keys), t.values.tolist(), strict=True)) == [
        (1, 1, 1.5),
        (1, 2, 3.0),
        (2, 1, 3.0),
    ]
    with pytest.raises(ArityError, match="is a matrix"):
        load_table(tmp_path / "m.mtx", 3)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("1 2\n", "line 1: not a Matrix Market file"),
        ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "only the 'coordinate'"),
        ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "'complex'"),
        ("%%MatrixMarket matrix coordinate real general\n2 x 1\n", "line 2: expected the size"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", "line 3: index"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n", "line 3: expected 3"),
        ("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 0.5\n", "64-bit integer"),
        ("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 1\n", "declares 2 entries"),
    ],
)
def test_matrix_market_errors(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_matrix_market(_mtx(tmp_path, text))


def test_matrix_market_skip_bad_entries(tmp_path):
    p = _mtx(tmp_path, "%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 1\n9 9\n2 2\n")
    mm = load_matrix_market(p, strict=False)
    assert mm.rows.tolist() == [1, 2] and mm.skipped == 1
    assert mm.first_skipped == "line 4: '9 9'"


def test_read_matrix_market_dataframes(spark):
    from faq.io import read_matrix_market

    df = read_matrix_market(DATA / "tri.mtx", spark)
    assert df.columns == ["i", "j"] and df.count() == 13
    g = read_matrix_market(DATA / "tri.mtx", spark, graph=True, names=("u", "v"))
    assert sorted(tuple(r) for r in g.collect())[:2] == [(1, 2), (1, 3)]


# -- headerless CSV -------------------------------------------------------------------------------
def test_csv_numeric_first_line_is_data(tmp_path):
    # before: the first edge became the header, leaving two rows keyed by columns '1', '2'
    p = tmp_path / "e.csv"
    p.write_text("1,2\n\n2,3\n3,1\n")
    t = load_table(p, 2)
    assert t.columns == ("c0", "c1") and t.rows == 3
    assert [k.tolist() for k in t.keys] == [[1, 2, 3], [2, 3, 1]]
    assert t.where(0) == "line 1" and t.where(1) == "line 3"
    forced = load_table(p, 2, header=True)
    assert forced.columns == ("1", "2") and forced.rows == 2
    with pytest.raises(ValueError, match="header=False applies to CSV files, but .* edgelist"):
        load_table(DATA / "karate.txt", 2, header=False)
    from faq.io.tables import csv_has_header

    p.write_text(" 1.5 , -2e3\n")  # numbers of any form, spaces around them
    assert not csv_has_header(p)
    p.write_text('"1","2"\n')
    assert not csv_has_header(p)
    p.write_text("1,nan\n1,2\n")  # 'nan' is a word here
    assert csv_has_header(p)
    p.write_text("1,2\n2,3,4\n")
    with pytest.raises(BadLineError, match=r"e\.csv, line 2: expected 2 comma-separated"):
        load_table(p, 2)
    p.write_text("1,2,0.5\n")
    with pytest.raises(ArityError, match="first line holds only numbers.*header line"):
        load_table(p, 2)
    p.write_text("src,2\n1,2\n")  # one word makes it a header
    assert load_table(p, 2).columns == ("src", "2")


# -- one rule for every format: faq.io.read -------------------------------------------------------
def _karate_everywhere(tmp_path: Path) -> dict[str, Path]:
    """karate.txt's rows, as written, in every format."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    e = load_edge_array(DATA / "karate.txt")
    lines = [f"{u},{v}" for u, v in e.tolist()]
    paths = {"txt": DATA / "karate.txt"}
    paths["csv"] = tmp_path / "k.csv"
    paths["csv"].write_text("src,dst\n" + "\n".join(lines) + "\n")
    paths["headerless"] = tmp_path / "k2.csv"
    paths["headerless"].write_text("\n".join(lines) + "\n")
    paths["mtx"] = tmp_path / "k.mtx"
    paths["mtx"].write_text(
        f"%%MatrixMarket matrix coordinate pattern general\n34 34 {len(e)}\n"
        + "\n".join(line.replace(",", " ") for line in lines)
    )
    paths["parquet"] = tmp_path / "k.parquet"
    pq.write_table(pa.table({"u": e[:, 0], "v": e[:, 1]}), paths["parquet"])
    return paths


def test_read_gives_one_factor_for_one_graph_in_every_format(tmp_path):
    from faq import query
    from faq.io import read

    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    paths = _karate_everywhere(tmp_path)
    sym = tmp_path / "sym.mtx"  # one triangle of a symmetric matrix: both directions
    sym.write_text(paths["mtx"].read_text().replace("general", "symmetric"))
    as_written = {k: read(p).to_dict() for k, p in paths.items()}
    assert all(d == as_written["txt"] for d in as_written.values())
    assert len(as_written["txt"]) == 78 and min(min(k) for k in as_written["txt"]) == 1
    undirected = read(paths["txt"], undirected=True).to_dict()
    assert len(undirected) == 156
    for p in [*paths.values(), sym]:
        assert read(p, undirected=True).to_dict() == undirected
        assert tri.solve(E=read(p, simple=True)).scalar() == 45
    assert read(sym).to_dict() == undirected  # a symmetric matrix holds both directions
    assert tri.solve(E=read(paths["txt"])).scalar() == 45  # each u > v: every triangle once
    assert tri.solve(E=read(paths["csv"], undirected=True)).scalar() == 270


def test_read_options_and_errors(tmp_path):
    from faq import Factor
    from faq.io import read

    p = tmp_path / "w.csv"
    p.write_text("a,b,value\n1,2,3\n2,1,3\n2,2,5\n")
    f = read(p, vars=("x", "y"), semiring="counting", name="W")
    assert isinstance(f, Factor) and f.vars == ("x", "y") and f.name == "W"
    assert f.to_dict() == {(1, 2): 3, (2, 1): 3, (2, 2): 5}
    # undirected: each edge both ways once, whatever the file repeats; self-loop once
    assert read(p, undirected=True).to_dict() == {(1, 2): 3, (2, 1): 3, (2, 2): 5}
    assert read(p, simple=True).to_dict() == {(1, 2): 1.0}  # values dropped
    p.write_text("a,b,value\n1,2,3\n2,1,4\n")
    with pytest.raises(ValueError, match=r"line 2 and line 3 give the edge \{1, 2\} the values 3"):
        read(p, undirected=True)
    skew = tmp_path / "s.mtx"  # a skew-symmetric entry and its mirror differ in sign
    skew.write_text("%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 1\n3 1 4\n")
    with pytest.raises(ValueError, match=r"s\.mtx: line 3 and its mirror give the edge \{1, 3\}"):
        read(skew, undirected=True)
    p.write_text("a,b,value\n1,2,3\n2,1,-4\n")
    with pytest.raises(ValueError, match=r"w\.csv, line 3: 'value' -4 is not a value"):
        read(p, semiring="counting")
    with pytest.raises(ArityError, match="2 key column"):
        read(p, vars=("x",))
    with pytest.raises(ValueError, match="not both"):
        read(p, undirected=True, simple=True)
    u = tmp_path / "u.txt"
    u.write_text("1\n2\n")
    with pytest.raises(ValueError, match="needs two key columns"):
        read(u, vars=("x",), undirected=True)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n2 3 4\n3 1\n")
    with pytest.raises(BadLineError, match=r"bad\.txt, line 2"):
        read(bad)
    with pytest.warns(UserWarning, match="skipped 1 malformed line"):
        assert read(bad, strict=False).to_dict() == {(1, 2): 1.0, (3, 1): 1.0}


def test_read_string_ids(tmp_path):
    from faq import query
    from faq.io import read

    named = read(DATA / "named.txt", simple=True)
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    assert tri.solve(E=named).scalar() == 2
    # a Parquet file with string sources and integer targets: one id type for mirroring
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"s": ["1", "x"], "t": [2, 1]}), tmp_path / "m.parquet")
    assert read(tmp_path / "m.parquet", undirected=True).to_dict() == {
        ("1", "2"): 1.0,
        ("2", "1"): 1.0,
        ("1", "x"): 1.0,
        ("x", "1"): 1.0,
    }


def test_engine_never_imports_io():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "import faq, incremental, semirings\n"
        "from faq import Factor, query\n"
        "A = Factor.from_numpy(np.eye(2), vars=('i', 'j'))\n"
        "query('Q(i) :- A(i, j)').solve(A=A)\n"
        "print(sorted(m for m in sys.modules if m.startswith('faq.io')))\n"
    )
    root = Path(__file__).parent.parent
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
