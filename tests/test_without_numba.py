"""numba is a dependency, but the kernel keeps numpy paths for a platform without it:
``faq.kernel.numba_jit.NUMBA`` is False there and every module must still import (the
split of the compiled kernels into modules once broke that: an ImportError of
``gallop`` at ``import faq``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["numba"] = None  # as if numba were not installed
    import pandas as pd
    from faq import Factor, query
    from faq.kernel.numba_jit import NUMBA
    from incremental import IncrementalView
    assert not NUMBA
    q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    rows = {(0, 1): 1, (1, 2): 1, (0, 2): 1, (2, 3): 1}
    print(q.solve(E=Factor.from_dict(rows, ("a", "b"), semiring="counting")).scalar())
    view = IncrementalView(q, E=pd.DataFrame({"a": [0, 1, 0, 2], "b": [1, 2, 2, 3]}))
    print(view.step(E=pd.DataFrame({"a": [1, 1], "b": [3, 2], "_weight": [1, -1]})).to_dict())
    """
)


def test_the_engine_imports_and_runs_without_numba():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["1", "{(): -1}"]  # the triangle 0, 1, 2 is gone
