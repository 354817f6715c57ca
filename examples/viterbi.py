"""Viterbi decoding of a hidden Markov model as one max-product query with witnesses.

    python examples/viterbi.py [--states 8] [--steps 30] [--seed 0]

The chain ``Q() :- I(x0), M1(x0, x1), ..., MT(x{T-1}, xT)`` over max-product
(max, ×) has as its value the probability of the most likely state path;
``solve(witness=True)`` also returns the path (the bound variables
``x0 .. xT`` that attain it), found by InsideOut with back-pointers.  The path
is checked against a plain numpy Viterbi.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from faq import Factor, query
from faq.session import local_session


def numpy_viterbi(
    pi: np.ndarray, trans: np.ndarray, emit: np.ndarray, obs: np.ndarray
) -> tuple[list[int], float]:
    """The most likely state path of an HMM and its probability (numpy Viterbi)."""
    delta = pi * emit[:, obs[0]]
    back = []
    for o in obs[1:]:
        scores = delta[:, None] * trans
        back.append(scores.argmax(axis=0))
        delta = scores.max(axis=0) * emit[:, o]
    path = [int(delta.argmax())]
    for b in reversed(back):
        path.append(int(b[path[-1]]))
    return path[::-1], float(delta.max())


def main(argv: Sequence[str] | None = None) -> list[int]:
    """Decode a random HMM with ``solve(witness=True)``; print and return the path."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--states", type=int, default=8)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    local_session()
    rng = np.random.default_rng(a.seed)
    pi = rng.dirichlet(np.ones(a.states))
    trans = rng.dirichlet(np.ones(a.states), size=a.states)
    emit = rng.dirichlet(np.ones(4), size=a.states)
    obs = rng.integers(0, 4, size=a.steps)
    rels = {"I": Factor.from_numpy(pi * emit[:, obs[0]], vars=("x0",), semiring="max-product")}
    atoms = ["I(x0)"]
    for t in range(1, a.steps):
        m = trans * emit[:, obs[t]][None, :]
        rels[f"M{t}"] = Factor.from_numpy(m, vars=(f"x{t - 1}", f"x{t}"), semiring="max-product")
        atoms.append(f"M{t}(x{t - 1}, x{t})")
    q = query(f"Q() :- {', '.join(atoms)}", semiring="max-product")
    out = q.solve(witness=True, **rels)
    w = out.witnesses()[()]
    path = [w[f"x{t}"] for t in range(a.steps)]
    expected, best = numpy_viterbi(pi, trans, emit, obs)
    print(f"best path probability {out.scalar():.3e} (numpy {best:.3e})")
    print("path:", " ".join(map(str, path)))
    print("matches numpy Viterbi:", path == expected)
    assert path == expected
    return path


if __name__ == "__main__":
    main()
