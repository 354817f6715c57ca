"""The code's shape is part of the contract: layers, faces, module sizes (docs/architecture.md).

Checked from the source (``ast``), no import of the library needed:

* no import cycle among the library's modules, counting imports inside functions and
  under ``TYPE_CHECKING``;
* ``semirings`` imports nothing from ``faq`` or ``incremental``; ``faq`` nothing from
  ``incremental``; ``semirings.core`` no sibling module;
* the kernel (``faq.kernel``) imports nothing from the Spark substrate, the planner or the
  front door; the planning layer nothing from the substrates;
* ``incremental`` reads ``faq`` only through its package faces;
* no module imports an underscore name from another module;
* no library module is over 800 lines, and docs/architecture.md names every module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("semirings", "faq", "incremental")
FACES = {"faq", "faq.kernel", "faq.spark", "faq.plan", "faq.session", "faq.io", "faq.testing"}
"""What ``incremental`` may import from ``faq``: the package faces (and the session and
readers, which DESIGN §2 names)."""


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = modules()


def imports(name: str) -> list[tuple[str, list[str], int]]:
    """``(module imported, names taken from it, line)`` for every import of ``name``."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    is_pkg = MODULES[name].name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, base] if base else here)
            names = [a.name for a in node.names]
            # "from pkg import sub" imports the sub-module when it is one
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            out += [(s, [], node.lineno) for s in subs]
            rest = [n for n in names if f"{base}.{n}" not in MODULES]
            if rest or not subs:
                out.append((base, rest, node.lineno))
    return [(m, ns, line) for m, ns, line in out if m.split(".")[0] in PACKAGES]


GRAPH = {name: {m for m, _, _ in imports(name) if m in MODULES and m != name} for name in MODULES}


def test_no_import_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            # a package's __init__ importing its own sub-modules is how a face works
            if v == w.rsplit(".", 1)[0] and MODULES[v].name == "__init__.py":
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in MODULES:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("semirings", ("faq", "incremental")),
        ("faq", ("incremental",)),
        (
            "faq.kernel",
            (
                "faq.spark",
                "faq.plan.logical",
                "faq.plan.physical",
                "faq.factor",
                "faq.query",
                "faq.inputs",
                "faq.executor",
                "faq.io",
            ),
        ),
        (
            "faq.plan",
            ("faq.spark", "faq.kernel", "faq.factor", "faq.query", "faq.executor", "faq.inputs"),
        ),
        ("faq.spark", ("faq.factor", "faq.query", "faq.executor", "faq.inputs", "faq.delta")),
    ],
)
def test_layers_import_only_downwards(layer, forbidden):
    bad = [
        (name, m, line)
        for name in MODULES
        if name == layer or name.startswith(layer + ".")
        for m, _, line in imports(name)
        if any(m == f or m.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, f"{layer} imports a layer above it: {bad}"


def test_semiring_core_imports_no_sibling():
    assert not [m for m in GRAPH["semirings.core"] if m.startswith("semirings")]


def test_incremental_reads_faq_through_its_faces():
    bad = [
        (name, m, line)
        for name in MODULES
        if name.startswith("incremental")
        for m, _, line in imports(name)
        if m.startswith("faq") and m not in FACES
    ]
    assert not bad, f"incremental imports faq internals: {bad}"


def test_no_private_name_crosses_a_module():
    bad = [
        (name, m, n, line)
        for name in MODULES
        for m, names, line in imports(name)
        if m != name
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert not bad, f"private names imported across modules: {bad}"


def test_modules_stay_small_and_are_documented():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert not {n: k for n, k in long.items() if k > 800}, "modules over 800 lines"
    missing = [
        n for n, p in MODULES.items() if str(p.relative_to(ROOT)).replace("\\", "/") not in text
    ]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def _names_backend(node: ast.AST) -> bool:
    """Whether ``node`` reads a backend option: a name or attribute ``backend`` (or
    ``args.backend``), or a subscript by the string ``"backend"``."""
    if isinstance(node, ast.Name):
        return node.id == "backend"
    if isinstance(node, ast.Attribute):
        return node.attr == "backend"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "backend"
    return False


def test_the_backend_option_is_compared_only_by_the_planner():
    """Issue 38: where a step runs is decided in ``faq/plan/physical.py``; everything else
    asks it (``backend_policy``, ``Choice.placement``) instead of comparing the string."""
    home = MODULES["faq.plan.physical"]
    found = []
    for name, path in MODULES.items():
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_names_backend(s) for s in sides):
                    found.append(f"{name}:{node.lineno}")
    assert not found, "the backend option compared outside the planner: " + ", ".join(found)
