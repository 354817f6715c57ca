"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift.

The blocks of one file run in order in one namespace (a later block may use
what an earlier one defined), from the repository's root, on the test
session.  A block preceded by a line ``<!-- not run: reason -->`` is skipped;
the reason says why (it needs data outside the repository, say).  A python
block followed directly by an ```` ```output ```` block must print exactly
that text (trailing spaces aside): the output a page shows is checked too.
Durations are the one exception: a number of seconds (``0.01 s``) matches
any other number of seconds, so a page can show a real ``explain()`` report.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")
FENCE = re.compile(r"^(\s*)```python\s*$")
OUTPUT = re.compile(r"^\s*```output\s*$")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` for each ```python block of a Markdown text."""
    return [(line, code, reason) for line, code, reason, _ in blocks_with_output(text)]


def blocks_with_output(text: str) -> list[tuple[int, str, str | None, str | None]]:
    """Each ```python block as ``(line, code, skip reason, shown output or None)``."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        previous = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        reason = SKIP.search(previous)
        i += 1
        shown = None
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and OUTPUT.match(lines[j]):
            out = []
            j += 1
            while j < len(lines) and lines[j].strip() != "```":
                out.append(lines[j])
                j += 1
            shown = textwrap.dedent("\n".join(out))
            i = j + 1
        code = textwrap.dedent("\n".join(body))
        blocks.append((start + 1, code, reason and reason.group(1), shown))
    return blocks


SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")
"""A duration in an output (``0.01 s``): it varies from run to run, so any matches any."""


def _same_output(printed: str, shown: str) -> bool:
    def norm(t: str) -> list[str]:
        return [SECONDS.sub("<seconds> s", ln.rstrip()) for ln in t.strip("\n").splitlines()]

    return norm(printed) == norm(shown)


def test_python_blocks_are_found():
    blocks = python_blocks(
        "text\n<!-- not run: needs X -->\n```python\nx = 1\n```\n```python\ny\n```"
    )
    assert blocks == [(3, "x = 1", "needs X"), (6, "y", None)]


def test_output_blocks_are_found_and_compared():
    text = "```python\nprint(1)\n```\n\n```output\n1\n```\n```python\nz\n```"
    assert blocks_with_output(text) == [(1, "print(1)", None, "1"), (8, "z", None, None)]
    assert _same_output("1  \n2\n", "1\n2")
    assert not _same_output("1\n3\n", "1\n2")
    assert _same_output(
        "step 1: 12 rows in 2.53 s\ntotal 2.53 s", "step 1: 12 rows in 0.01 s\ntotal 0.01 s"
    )
    assert not _same_output("step 1: 13 rows in 0.01 s", "step 1: 12 rows in 0.01 s")
    assert not _same_output("0.01 s; 151 candidates", "0.01 s; 226 candidates")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_doc_python_blocks_run(spark, path, monkeypatch):
    blocks = blocks_with_output(path.read_text(encoding="utf-8"))
    runnable = [(line, code, shown) for line, code, reason, shown in blocks if reason is None]
    if not runnable:
        pytest.skip(f"{path.name} has no runnable python block")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": f"doc:{path.name}"}
    for line, code, shown in runnable:
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(code, f"{path.name}:{line}", "exec"), namespace)  # noqa: S102
        except Exception as exc:
            raise AssertionError(f"{path.name}, block at line {line} fails: {exc!r}") from exc
        if shown is not None and not _same_output(buf.getvalue(), shown):
            raise AssertionError(
                f"{path.name}, block at line {line} printed\n{buf.getvalue()}\n"
                f"but the page shows\n{shown}"
            )
    assert os.getcwd() == str(ROOT)
