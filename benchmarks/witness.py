"""Cost of ``solve(witness=True)`` against a plain solve on HMM chains (Viterbi).

    python benchmarks/witness.py [--sizes 8x50 32x200 64x400] [--backend driver] [--runs 3]

Each size is ``STATESxSTEPS``; prints the median seconds of both solves and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from faq import Factor, query
from faq.session import local_session


def hmm(states: int, steps: int, seed: int = 0) -> tuple[object, dict[str, Factor]]:
    """A random HMM chain query over max-product and its relations."""
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(states))
    trans = rng.dirichlet(np.ones(states), size=states)
    emit = rng.dirichlet(np.ones(4), size=states)
    obs = rng.integers(0, 4, size=steps)
    # log space (max-plus) so long chains do not underflow
    rels = {"I": Factor.from_numpy(np.log(pi * emit[:, obs[0]]), vars=("x0",), semiring="max-plus")}
    atoms = ["I(x0)"]
    for t in range(1, steps):
        m = np.log(trans * emit[:, obs[t]][None, :])
        rels[f"M{t}"] = Factor.from_numpy(m, vars=(f"x{t - 1}", f"x{t}"), semiring="max-plus")
        atoms.append(f"M{t}(x{t - 1}, x{t})")
    return query(f"Q() :- {', '.join(atoms)}", semiring="max-plus"), rels


def median_seconds(fn, runs: int) -> float:
    """Median wall-clock seconds of ``runs`` calls of ``fn`` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    """Print plain and witness solve times per HMM size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["8x50", "32x200", "64x400"])
    p.add_argument("--backend", default="driver")
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    local_session()
    print(f"{'size':>10} {'plain s':>9} {'witness s':>10} {'ratio':>6}")
    for size in a.sizes:
        states, steps = map(int, size.split("x"))
        q, rels = hmm(states, steps)
        plain = median_seconds(lambda q=q, rels=rels: q.solve(backend=a.backend, **rels), a.runs)
        wit = median_seconds(
            lambda q=q, rels=rels: q.solve(backend=a.backend, witness=True, **rels), a.runs
        )
        print(f"{size:>10} {plain:9.3f} {wit:10.3f} {wit / plain:6.2f}")


if __name__ == "__main__":
    main()
