"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift.

The blocks of one file run in order in one namespace (a later block may use
what an earlier one defined), from the repository's root, on the test
session.  A block preceded by a line ``<!-- not run: reason -->`` is skipped;
the reason says why (it needs data outside the repository, say).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")
FENCE = re.compile(r"^(\s*)```python\s*$")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` for each ```python block of a Markdown text."""
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
        blocks.append((start + 1, textwrap.dedent("\n".join(body)), reason and reason.group(1)))
        i += 1
    return blocks


def test_python_blocks_are_found():
    blocks = python_blocks(
        "text\n<!-- not run: needs X -->\n```python\nx = 1\n```\n```python\ny\n```"
    )
    assert blocks == [(3, "x = 1", "needs X"), (6, "y", None)]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_doc_python_blocks_run(spark, path, monkeypatch):
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    runnable = [(line, code) for line, code, reason in blocks if reason is None]
    if not runnable:
        pytest.skip(f"{path.name} has no runnable python block")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": f"doc:{path.name}"}
    for line, code in runnable:
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), namespace)  # noqa: S102
        except Exception as exc:
            raise AssertionError(f"{path.name}, block at line {line} fails: {exc!r}") from exc
    assert os.getcwd() == str(ROOT)
