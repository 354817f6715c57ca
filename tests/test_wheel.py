"""The built wheel is the library: what ``pip install`` gives a user imports and runs.

CI (``.ci/run``) also installs the wheel with its dependencies into a fresh virtualenv
outside the checkout and runs ``tests/wheel_smoke.py`` there; these tests check the same
wheel from the test run (the ``wheel_site`` fixture of tests/conftest.py: the wheel
installed into a folder of its own), without Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("semirings", "faq", "incremental")
SMOKE = Path(__file__).with_name("wheel_smoke.py")


def source_files() -> set[str]:
    """Every module and data file of the three packages in the checkout, relative to it."""
    out = set()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(path.relative_to(ROOT).as_posix())
    return out


def test_the_wheel_installs_every_module_and_data_file(wheel_site):
    installed = {
        p.relative_to(wheel_site).as_posix()
        for pkg in PACKAGES
        for p in (wheel_site / pkg).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    missing = sorted(source_files() - installed)
    assert not missing, f"the wheel leaves out {missing}"
    assert "faq/log4j2.properties" in installed


def test_the_installed_wheel_imports_and_runs_from_elsewhere(wheel_site, tmp_path):
    run = subprocess.run(
        [sys.executable, str(SMOKE), "--forbid", str(ROOT), "--no-spark"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(wheel_site)},
        timeout=600,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr[-4000:]}"
    lines = run.stdout.splitlines()
    assert any(ln.startswith("ok imported") and str(wheel_site) in ln for ln in lines), lines
    for want in ("ok sparkfaq triangles: 2", "ok a one-tick view", "ok triangles in the driver"):
        assert any(ln.startswith(want) for ln in lines), (want, lines)
