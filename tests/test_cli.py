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
import time
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
    (["query", "Q(a) :- E(a, b)", "--limit", "-1"], "--limit"),
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
    t0 = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - t0 < 2
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
def test_errors_as_a_process_are_fast_and_clean(argv, message):
    t0 = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "faq.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    seconds = time.perf_counter() - t0
    assert run.returncode == 2, run.stderr
    assert message in _one_error_line(run.stderr)
    assert run.stdout == ""
    assert seconds < 2, f"{seconds:.1f} s: did the command start Spark first?"


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
    assert out.strip() == "2" and "starting Spark" in err and "on spark" in err


def test_triangles_matrix_market(spark, capsys):
    assert main(["triangles", TRI_MTX]) == 0
    assert capsys.readouterr().out.strip() == "2"


def test_query_string_ids_sorted_with_header_and_limit(spark, capsys):
    # W joins E on the string ids of another file: one dictionary for the run
    rule = "Q(a) :- E(a, b), W(b)"
    argv = ["query", rule, "--relation", f"E={NAMED}", "--relation", f"W={WEIGHTS}"]
    assert main([*argv, "--directed", "--limit", "3"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines() == [
        "a\tvalue",
        "alice\t10",
        "bob\t100",
        "carol\t1000",
        "# showing 3 of 4 rows; use --output to write all",
    ]


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
    b.write_text("j,k,value\n0,0,1\n1,0,10\n")
    out_pq = tmp_path / "ab.parquet"
    argv = ["query", "Q(i, k) :- A(i, j), B(j, k)", "--semiring", "real"]
    argv += ["--relation", f"A={a}", "--relation", f"B={b}", "--output", str(out_pq)]
    assert main(argv) == 0
    table = pq.read_table(out_pq)
    assert table.column_names == ["i", "k", "value"]
    # A = [[2, 3], [3, 0]] (symmetric), B = [[1], [10]]: AB = [[32], [3]]
    assert table.to_pydict() == {"i": [0, 1], "k": [0, 0], "value": [32.0, 3.0]}
