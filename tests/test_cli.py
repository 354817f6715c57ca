"""The ``sparkfaq`` command, run in-process on the test session."""

from __future__ import annotations

from pathlib import Path

from faq.cli import main

KARATE = str(Path(__file__).parent / "data" / "karate.txt")


def test_triangles_command(spark, capsys):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert main(["--master", "local[2]", "triangles", KARATE]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "45"
    assert "FAQ plan" in err
    # regression: the command used to overwrite the running session's settings
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_query_command_reports_bad_rule_relation(spark, capsys):
    rule = "Q(a) :- E(a, b), F(b, c)"
    assert main(["query", rule, "--relation", f"E={KARATE}"]) == 2
    assert "missing relation(s) 'F'" in capsys.readouterr().err
