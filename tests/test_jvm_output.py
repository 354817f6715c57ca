"""The JVM's start-up notices are left out of a local session's standard error, and
nothing else is (faq/jvm_output.py).

The filter is checked on its own over a pipe (no Spark), then in a fresh process that
starts a local session: the test run's own JVM started long before, so only a new
process shows what a user's first session prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from faq.jvm_output import copy_lines, is_noise

ROOT = Path(__file__).resolve().parent.parent
INCUBATOR = b"WARNING: Using incubator modules: jdk.incubator.vector"
SKETCHES = (
    b"Warning: Java versions > Java 11 can only operate in restricted mode where no off-heap "
    b"operations are allowed!"
)


def through_the_filter(*writes: bytes) -> bytes:
    """What :func:`copy_lines` passes on of ``writes``, written to a pipe one by one."""
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    got: list[bytes] = []

    def collect() -> None:
        while chunk := os.read(out_r, 1 << 16):
            got.append(chunk)
        os.close(out_r)

    copier = threading.Thread(target=copy_lines, args=(r, out_w))
    reader = threading.Thread(target=collect)
    copier.start()
    reader.start()
    for chunk in writes:
        os.write(w, chunk)
    os.close(w)
    copier.join(10)
    os.close(out_w)
    reader.join(10)
    return b"".join(got)


def test_the_notices_are_noise_and_nothing_else_is():
    assert is_noise(INCUBATOR + b"\n")
    assert is_noise(SKETCHES)
    assert is_noise(b"WARNING: Java versions > Java 11 can only operate in restricted mode\r\n")
    for line in (
        b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.other",
        b"ERROR Executor: Exception in task 0.0",
        b"some text WARNING: Using incubator modules: jdk.incubator.vector",
        b"",
    ):
        assert not is_noise(line), line


def test_the_filter_keeps_every_other_line_and_byte():
    long = b"x" * 200_000  # longer than a read: passed on in pieces, never dropped
    got = through_the_filter(
        INCUBATOR[:10], INCUBATOR[10:] + b"\nfirst\n", SKETCHES + b"\n", b"second", b" half\n",
        long, b"\nlast line without a newline",
    )  # fmt: skip
    assert got == b"first\nsecond half\n" + long + b"\nlast line without a newline"


SCRIPT = """
import sys
from pyspark.sql import functions as F
from faq.session import local_session

spark = local_session("local[1]")
df = spark.createDataFrame([(1,), (2,)], "a long")
# DataSketches (in Spark's catalyst jar) prints its notice the first time it loads
print(df.agg(F.hll_sketch_estimate(F.hll_sketch_agg("a"))).first()[0])
print("python stderr line", file=sys.stderr, flush=True)
# a line the JVM writes itself must still get through (test only: not the public API)
spark.sparkContext._jvm.java.lang.System.err.println("jvm stderr line")
"""


def test_a_fresh_local_session_prints_no_start_up_notices(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-4000:]
    assert run.stdout.split() == [b"2"]
    err = run.stderr
    assert b"incubator" not in err, err
    assert b"restricted mode" not in err, err
    assert b"python stderr line" in err and b"jvm stderr line" in err, err
