"""Benchmark scripts (run each as ``python benchmarks/<name>.py``) and their shared helpers.

Being a package lets the tests import them (``benchmarks.triangles``) and lets the
scripts share :mod:`benchmarks._common`; run as scripts they put the repository
root first on ``sys.path`` themselves.
"""
