"""The ``sparkfaq`` command, run in-process on the test session (and a few times as a process).

Input errors must come before Spark starts: the in-process error tests replace
``local_session`` with a function that fails the test, and the subprocess tests
time a real ``python -m faq.cli`` run.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from faq.cli import main

DATA = Path(__file__).parent / "data"
KARATE = str(DATA / "karate.txt")
NAMED = str(DATA / "named.txt")
WEIGHTS = str(DATA / "named_weights.csv")
TRI_MTX = str(DATA / "tri.mtx")
ROOT = Path(__file__).parent.parent


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# -- help and version -----------------------------------------------------------------------------
def test_help_shows_grammar_semirings_and_examples(capsys):
    import semirings

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Head(vars) :- Rel(vars)" in out
    assert "aggregated with the" in out and "⊕" in out
    assert "E(a, a)" in out and "diagonal" in out
    for name in semirings.names():
        assert name in out
    examples = out.split("examples:")[1]
    assert examples.count("  sparkfaq ") == 3
    assert main(["query", "--help"]) == 0
    sub = capsys.readouterr().out
    assert "--skip-bad-lines" in sub and "--output" in sub and "Head(vars)" in sub


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"sparkfaq {version('sparkfaq')}"


# -- errors before Spark --------------------------------------------------------------------------
@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if the command tries to get a SparkSession."""
    import faq.session

    def refuse(*args, **kwargs):
        raise AssertionError("the command started Spark before reporting the error")

    monkeypatch.setattr(faq.session, "local_session", refuse)


def _files(tmp_path: Path) -> dict[str, str]:
    files = {
        "bad3.txt": "# c\n1 2\n2 3 4\n",
        "lone.txt": "1 2\n7\n",
        "header.txt": "FromNodeId ToNodeId\n1 2\n2 3\n",
        "empty.txt": "",
        "comments.txt": "# nothing\n% here\n\n",
        "junk.txt": "1\n2\n",
        "weights.txt": "1 2 0.5\n2 3 0.5\n",
        "wide.csv": "a,b,w\n1,2,3\n",
        "neg.csv": "a,b,value\n1,2,3\n2,3,-1\n",
        "nan.csv": "a,b,value\n1,2,nan\n",
        "real.mtx": "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 0.5\n",
        "short.mtx": "%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 2\n",
        "broken.gz": "not gzip",
        "clash.csv": "a,b,value\n1,2,3\n2,1,4\n",
        "nums3.csv": "1,2,0.5\n2,3,0.5\n",
        "unary.txt": "1\n2\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: str(tmp_path / name) for name in files}


ERROR_CASES = [
    # (arguments, with @name for the files above, part of the message or a pattern)
    (["query", "Q(a :- E(a, b)"], "malformed head"),
    (["query", "Q(a) :- E(a, b)", "--semiring", "tropical"], "unknown semiring 'tropical'"),
    (["query", "Q(a) :- E(a, b)"], "missing relation(s) 'E'"),
    (["query", "Q(a) :- E(a, b)", "--relation", "E=@bad3.txt", "--relation", "F=x"], "'F'"),
    (["query", "Q(a) :- E(a, b)", "--relation", "E"], "--relation takes NAME=PATH"),
    (["query", "Q(a) :- E(a, b)", "--relation", "E=a", "--relation", "E=b"], "given twice"),
    (["query", "Q(a) :- E(a, b)", "--relation", "E=nope.txt"], "'nope.txt' does not exist"),
    (["triangles", "@broken.gz"], "cannot read"),
    (["triangles", "@bad3.txt"], "bad3.txt, line 3: expected 2"),
    (
        ["triangles", "@lone.txt"],
        "lone.txt, line 2: expected 2 whitespace-separated id(s), found 1",
    ),
    (["triangles", "@header.txt"], "line 1: 'FromNodeId ToNodeId' looks like a header"),
    (["triangles", "@empty.txt"], "empty.txt holds no edges"),
    (["triangles", "@comments.txt"], "holds no edges"),
    (["triangles", "@junk.txt", "--skip-bad-lines"], "has 1 column(s)"),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@empty.txt"],
        re.compile(r"'E': .*empty.txt holds no rows"),
    ),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@weights.txt"],
        re.compile(r"has 3 column.*E\(a, b\)"),
    ),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@wide.csv"],
        re.compile(r"3 key column.*E\(a, b\)"),
    ),
    (["query", "Q(a) :- E(a, b)", "--relation", "E=@neg.csv"], "line 3: 'value' -1 is not"),
    (["query", "Q(a) :- E(a, b)", "--semiring", "real", "--relation", "E=@nan.csv"], "NaN"),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@real.mtx"],
        re.compile(r"needs integers.*'real'"),
    ),
    (["query", "Q(a) :- E(a, b)", "--relation", "E=@short.mtx"], "declares 3 entries"),
    (["query", "Q(a) :- E(a, b, c)", "--relation", f"E={KARATE}"], "but 3 are expected"),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", f"E={KARATE}", "--output", "no/dir/o.csv"],
        "--output",
    ),
    (["triangles"], "required: path"),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@clash.csv", "--undirected"],
        "clash.csv: line 2 and line 3 give the edge {1, 2} the values 3 and 4",
    ),
    (
        ["query", "Q(a) :- E(a, b)", "--relation", "E=@nums3.csv"],
        "nums3.csv has 3 column(s) but 2 are expected; its first line holds only numbers",
    ),
    (["triangles", "@bad3.txt", "--header"], "--header applies to CSV files"),
    (["triangles", "@bad3.txt", "--no-header"], "--no-header applies to CSV files"),
    (
        ["query", "Q(a) :- W(a)", "--relation", "W=@unary.txt", "--undirected"],
        "--undirected mirrors binary relations",
    ),
    (["query", "Q(a) :- E(a, b)", "--undirected", "--directed"], "not allowed with"),
    (["query", "Q(a) :- E(a, b)", "--limit", "-1"], "--limit"),
    (["query", "D(x) :- S(x); D(y) :- D(x), E(x, y)"], "program of several (or recursive) rules"),
]


def _substitute(arg: str, files: dict[str, str]) -> str:
    for name, path in files.items():
        arg = arg.replace(f"@{name}", path)
    return arg


@pytest.mark.parametrize(("argv", "message"), ERROR_CASES)
def test_input_errors_come_before_spark(tmp_path, monkeypatch, no_spark, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    files = _files(tmp_path)
    argv = [_substitute(a, files) for a in argv]
    assert main(argv) == 2  # no_spark: refused before any session is asked for
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_error_line(err)
    if isinstance(message, re.Pattern):
        assert message.search(line), line
    else:
        assert message in line, line


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path, no_spark, capsys):
    p = tmp_path / "secret.txt"
    p.write_text("1 2\n")
    p.chmod(0)
    assert main(["triangles", str(p)]) == 2
    assert "cannot read" in _one_error_line(capsys.readouterr().err)


def test_a_relation_given_without_its_flag_names_the_flag(no_spark, capsys):
    """'E=edges.txt' without --relation was only 'unrecognized arguments'."""
    assert main(["query", "Q(a) :- E(a, b)", "E=edges.txt"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "unrecognized arguments: E=edges.txt: a relation is given as" in line
    assert "--relation E=edges.txt" in line


def test_directory_as_edge_list(tmp_path, no_spark, capsys):
    assert main(["triangles", str(tmp_path), "--format", "edgelist"]) == 2
    assert "is a directory" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["query", "Q(a) :- E(a, b)", "--semiring", "nope", "--relation", f"E={KARATE}"], "nope"),
        (["query", "Q(a) :- E(a", "--relation", f"E={KARATE}"], "malformed"),
        (["triangles", "missing.txt"], "does not exist"),
        (["query", "Q(a) :- E(a, b)", "--relation", f"E={KARATE}", "--relation", "G=x"], "'G'"),
    ],
)
def test_errors_as_a_process_start_no_spark(argv, message):
    # No JVM can start in this process (JAVA_HOME points nowhere, no java on PATH): the one
    # expected error line proves bad input is refused before Spark is started.
    env = {**os.environ, "JAVA_HOME": "/nonexistent-java", "PATH": os.path.dirname(sys.executable)}
    run = subprocess.run(
        [sys.executable, "-m", "faq.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert message in _one_error_line(run.stderr)
    assert run.stdout == ""


# -- runs on the test session ---------------------------------------------------------------------
def test_triangles_command(spark, tmp_path, capsys):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    quirky = tmp_path / "karate.txt"
    # karate with a malformed line and a bare number inserted, CRLF endings
    lines = Path(KARATE).read_text().splitlines()
    quirky.write_bytes("\r\n".join([*lines[:5], "2 3 4", "34", *lines[5:]]).encode())
    argv = ["--master", "local[2]", "triangles", str(quirky), "--skip-bad-lines", "--explain"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "45"
    assert "warning: " in err and "skipped 2 malformed line(s) (first: line 6: '2 3 4')" in err
    assert "FAQ plan" in err and "# read " in err
    # regression: the command used to overwrite the running session's settings
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_triangles_string_ids_with_progress(spark, capsys):
    assert main(["triangles", NAMED, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "2"
    assert "FAQ plan" not in err  # the plan only with --explain
    for phase in ("reading", "string ids", "fit in the driver", "solving", "step 1/1", "done"):
        assert phase in err
    assert "s] reading" in err  # elapsed time on each line
    import logging

    assert not logging.getLogger("faq").handlers  # the handler is gone afterwards


def test_spark_backend_starts_spark_and_agrees(spark, capsys):
    assert main(["triangles", NAMED, "--backend", "spark", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "2" and "starting Spark" in err and ": cells/generic-join" in err


def test_triangles_matrix_market(spark, capsys):
    assert main(["triangles", TRI_MTX]) == 0
    assert capsys.readouterr().out.strip() == "2"


def test_query_string_ids_sorted_with_header_and_limit(spark, capsys):
    # W joins E on the string ids of another file: one dictionary for the run
    rule = "Q(a) :- E(a, b), W(b)"
    argv = ["query", rule, "--relation", f"E={NAMED}", "--relation", f"W={WEIGHTS}"]
    assert main([*argv, "--directed", "--limit", "3"]) == 0
    out, err = capsys.readouterr()
    # stdout holds the data only (regression: the footer used to be printed there)
    assert out.splitlines() == ["a\tvalue", "alice\t10", "bob\t100", "carol\t1000"]
    assert "# showing 3 of 4 rows; use --output to write all" in err


def test_query_parquet_input_csv_output(spark, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    # A(i, j) with string and integer keys mixed across files: all become strings
    pq.write_table(
        pa.table({"i": [3, 1, 1, 2], "j": ["x", "x", "y", "y"], "value": [1.0, 2.0, 3.0, 4.0]}),
        tmp_path / "a.parquet",
    )
    out_csv = tmp_path / "out.csv"
    argv = [
        "query",
        "Q(i) :- A(i, j)",
        "--semiring",
        "max-plus",
        "--relation",
        f"A={tmp_path / 'a.parquet'}",
        "--output",
        str(out_csv),
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == "" and "wrote 3 row(s)" in err
    with out_csv.open() as fh:
        rows = list(csv.reader(fh))
    assert rows == [["i", "value"], ["1", "3.0"], ["2", "4.0"], ["3", "1.0"]]


def test_query_matrix_market_parquet_output(spark, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    a = tmp_path / "a.mtx"
    a.write_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 2.0\n2 1 3.0\n")
    b = tmp_path / "b.csv"
    b.write_text("j,k,value\n1,1,1\n2,1,10\n")  # Matrix Market ids are 1-based
    out_pq = tmp_path / "ab.parquet"
    argv = ["query", "Q(i, k) :- A(i, j), B(j, k)", "--semiring", "real"]
    argv += ["--relation", f"A={a}", "--relation", f"B={b}", "--output", str(out_pq)]
    assert main(argv) == 0
    table = pq.read_table(out_pq)
    assert table.column_names == ["i", "k", "value"]
    # A = [[2, 3], [3, 0]] (symmetric), B = [[1], [10]]: AB = [[32], [3]], ids as written
    assert table.to_pydict() == {"i": [1, 2], "k": [1, 1], "value": [32.0, 3.0]}


# -- one graph, one meaning in every format (issue 19, items 7 and 8) ---------------------------
def _karate_files(tmp_path: Path, edges: list[tuple[int, int]]) -> dict[str, str]:
    """The same rows (ids as written) as an edge list, CSV with and without a header,
    Parquet and a general Matrix Market file."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    lines = [f"{u} {v}" for u, v in edges]
    files = {
        "txt": "# karate\n" + "\n".join(lines) + "\n",
        "tsv": "\n".join(line.replace(" ", "\t") for line in lines) + "\n",
        "csv": "src,dst\n" + "\n".join(line.replace(" ", ",") for line in lines) + "\n",
        "headerless.csv": "\n".join(line.replace(" ", ",") for line in lines) + "\n",
        "mtx": "%%MatrixMarket matrix coordinate pattern general\n"
        f"34 34 {len(edges)}\n" + "\n".join(lines) + "\n",
    }
    paths = {}
    for ext, text in files.items():
        p = tmp_path / f"karate.{ext}"
        p.write_text(text)
        paths[ext] = str(p)
    u, v = zip(*edges, strict=True)
    pq.write_table(pa.table({"src": list(u), "dst": list(v)}), tmp_path / "karate.parquet")
    paths["parquet"] = str(tmp_path / "karate.parquet")
    return paths


def _karate_edges() -> list[tuple[int, int]]:
    from faq.io import load_edge_array

    return [(int(u), int(v)) for u, v in load_edge_array(KARATE)]


def _symmetric_mtx(tmp_path: Path, edges: list[tuple[int, int]]) -> str:
    """Karate as Matrix Market stores it: one triangle of a symmetric pattern matrix."""
    p = tmp_path / "karate_sym.mtx"
    body = "\n".join(f"{max(e)} {min(e)}" for e in edges)
    p.write_text(
        f"%%MatrixMarket matrix coordinate pattern symmetric\n34 34 {len(edges)}\n{body}\n"
    )
    return str(p)


def _stdout(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


TRIANGLE = "Q() :- E(a, b), E(b, c), E(a, c)"
TWO_HOP = "Q(a) :- E(a, b), E(b, c)"


@pytest.mark.parametrize(("flag", "triangles"), [([], 45), (["--undirected"], 270)])
def test_query_same_graph_same_answer_in_every_format(spark, tmp_path, capsys, flag, triangles):
    # karate.txt lists each edge once, as (u, v) with u > v: read as written, the triangle
    # rule sees each triangle once (45); undirected, all 6 orientations of each (270).
    # Before: 45 on the edge list (re-oriented u < v) but 270 on the .mtx, and 0-based ids.
    paths = _karate_files(tmp_path, _karate_edges())
    counts = {
        ext: _stdout(capsys, ["query", TRIANGLE, "--relation", f"E={p}", *flag])
        for ext, p in paths.items()
    }
    assert counts == {ext: f"{triangles}\n" for ext in paths}
    hops = {
        ext: _stdout(capsys, ["query", TWO_HOP, "--relation", f"E={p}", "--limit", "0", *flag])
        for ext, p in paths.items()
    }
    assert len(set(hops.values())) == 1, hops
    rows = hops["txt"].splitlines()
    assert rows[0] == "a\tvalue"
    ids = [int(r.split("\t")[0]) for r in rows[1:]]
    # ids as written (1-based, no shift): read as written node 1 is only ever a target
    # (every line is u > v); read undirected every node starts a 2-hop walk u-v-u
    assert ids == (list(range(1, 35)) if flag else [i for i in range(2, 35) if i in ids])
    assert 1 not in ids or flag


def test_query_symmetric_matrix_market_holds_both_directions(spark, tmp_path, capsys):
    edges = _karate_edges()
    sym = _symmetric_mtx(tmp_path, edges)
    txt = _karate_files(tmp_path, edges)["txt"]
    undirected = _stdout(
        capsys, ["query", TWO_HOP, "--relation", f"E={txt}", "--undirected", "--limit", "0"]
    )
    for flag in ([], ["--undirected"]):
        argv = ["query", TWO_HOP, "--relation", f"E={sym}", "--limit", "0", *flag]
        assert _stdout(capsys, argv) == undirected
    assert _stdout(capsys, ["query", TRIANGLE, "--relation", f"E={sym}"]) == "270\n"


def test_triangles_same_count_in_every_format_and_orientation(spark, tmp_path, capsys):
    edges = _karate_edges()
    both = edges + [(v, u) for u, v in edges] + [(1, 1), (5, 5)]  # both directions, self-loops
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = _karate_files(tmp_path / "one", edges)
    two = _karate_files(tmp_path / "two", both)
    paths = [*one.values(), *two.values(), _symmetric_mtx(tmp_path, edges)]
    counts = {p: _stdout(capsys, ["triangles", p]) for p in paths}
    assert counts == {p: "45\n" for p in paths}


def test_headerless_numeric_csv_is_read_as_data(spark, tmp_path, capsys):
    # one triangle; before, its first edge became the header and the count was 0
    p = tmp_path / "tri.csv"
    p.write_text("1,2\n2,3\n3,1\n")
    assert _stdout(capsys, ["triangles", str(p)]) == "1\n"
    assert _stdout(capsys, ["query", "Q(a) :- E(a, b)", "--relation", f"E={p}"]) == (
        "a\tvalue\n1\t1\n2\t1\n3\t1\n"
    )
    # --header forces the first line to be the header: two edges, no triangle
    assert _stdout(capsys, ["triangles", str(p), "--header"]) == "0\n"
    q = tmp_path / "named.csv"
    q.write_text("u,v\n1,2\n2,3\n3,1\n")  # a real header is still a header
    assert _stdout(capsys, ["triangles", str(q)]) == "1\n"
    assert _stdout(capsys, ["triangles", str(p), "--no-header"]) == "1\n"
    # the flag applies to the CSV inputs of a run, not to its edge lists
    argv = ["query", "Q(a) :- E(a, b), F(b, a)", "--relation", f"E={p}", "--relation"]
    assert _stdout(capsys, [*argv, f"F={KARATE}", "--no-header"]) == "a\tvalue\n1\t1\n2\t1\n"


def test_ids_as_written_for_matrix_market(spark, capsys):
    # tri.mtx counts from 1: the ids printed are the file's (before: shifted to 0-based)
    out = _stdout(capsys, ["query", "Q(a) :- E(a, b)", "--relation", f"E={TRI_MTX}"])
    assert [line.split("\t")[0] for line in out.splitlines()] == ["a", "1", "2", "3", "4", "5"]


def test_triangles_output_and_empty_result_footer_on_stderr(spark, tmp_path, capsys):
    out_csv = tmp_path / "t.csv"
    assert main(["triangles", KARATE, "--output", str(out_csv)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "wrote 1 row(s)" in err
    assert out_csv.read_text().splitlines() == ["value", "45"]
    p = tmp_path / "path.txt"
    p.write_text("1 2\n2 3\n")  # no 3-hop path: the result is empty
    argv = ["query", "Q(a) :- E(a, b), E(b, c), E(c, d)", "--relation", f"E={p}"]
    out = _stdout(capsys, argv)
    assert out == "a\tvalue\n"
    assert main(argv) == 0 and "# no rows" in capsys.readouterr().err


def test_help_states_the_reading_rules(capsys):
    assert main(["query", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in (
        "--undirected",
        "reads each row as written, as a directed edge",
        "1-based ids stay 1-based",
        "a first line of numbers only (1,2) is data",
        "'triangles' always counts the undirected triangles",
        "--no-header",
    ):
        assert phrase in text, phrase
    assert main(["triangles", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "whatever its format and orientation" in text and "--output" in text


def test_progress_every_logs_lines_while_a_step_runs(spark, capsys, monkeypatch):
    """Issue 37: ``--progress`` printed a step only when it ended.  While a step runs (here
    held back 0.6 s before its Spark work), ``--progress-every 0.1`` logs a line every
    0.1 s, with the elapsed time of the command; the setting and the thread are gone
    afterwards."""
    import threading
    import time

    import faq
    from faq.executor import Executor
    from faq.progress import THREAD_NAME

    real = Executor._spark_step

    def held(self, *args, **kwargs):
        time.sleep(0.6)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Executor, "_spark_step", held)
    argv = ["triangles", NAMED, "--backend", "spark", "--progress-every", "0.1"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "2"
    live = re.findall(
        r"^\[ *[\d.]+ s\] step 1/1: eliminate .* on cells/.*: running \d+ s", err, re.M
    )
    assert len(live) >= 2, err
    assert faq.settings().progress_seconds == 5.0
    assert not [t for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.mark.parametrize("every", ["0", "-1", "soon"])
def test_progress_every_refuses_a_bad_interval(capsys, every):
    assert main(["triangles", NAMED, "--progress-every", every]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--progress-every" in line and "seconds" in line, line
