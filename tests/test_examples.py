"""The README's main job, as a user runs it: the answer, and no JVM where none is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NO_JVM = """
import runpy, sys
sys.argv = ["triangle_count.py", "tests/data/karate.txt"]
try:
    runpy.run_path("examples/triangle_count.py", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
from pyspark import SparkContext
print("jvm started:", SparkContext._gateway is not None)
"""


def test_the_main_job_counts_karate_without_starting_a_jvm():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [sys.executable, "-c", NO_JVM], capture_output=True, text=True, cwd=ROOT, env=env,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.startswith("karate.txt: 45 triangles"), run.stdout
    assert "worst-case optimal" in run.stdout  # the explain() report follows the count
    assert run.stdout.rstrip().endswith("jvm started: False"), run.stdout
