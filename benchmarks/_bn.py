"""A Bayesian network read from a BIF file, as a sum-product query for the engine, with a
numpy reference (``benchmarks/beyond_driver.py --bif PATH``).

Only discrete networks in the plain BIF format of the bnlearn repository are read
(``variable X { type discrete [ k ] { s1, ..., sk }; }`` and ``probability ( X | P1, P2 )
{ (p1, p2) q1, ..., qk; ... }`` or ``{ table q1, ...; }``), plain or gzipped.
"""

from __future__ import annotations

import gzip
import re
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VARIABLE = re.compile(r"variable\s+([^\s{]+)\s*\{[^}]*?\{([^}]*)\}", re.S)
PROBABILITY = re.compile(
    r"probability\s*\(\s*([^)|]+?)\s*(?:\|\s*([^)]*?))?\s*\)\s*\{([^}]*)\}", re.S
)


@dataclass(frozen=True)
class Network:
    """Variables with their states, and one table per variable, ``P(child | parents)``.

    ``cpts[x]`` is ``(parents, array)`` with the array's axes ordered parents, then
    ``x``.
    """

    name: str
    states: dict[str, tuple[str, ...]]
    cpts: dict[str, tuple[tuple[str, ...], np.ndarray]]

    @property
    def variables(self) -> list[str]:
        return list(self.states)


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def read_bif(path: str | Path) -> Network:
    """The network of a BIF file (``.bif`` or ``.bif.gz``).

    Raises
    ------
    ValueError
        The file has no variable, a table names an unknown variable or state, a table
        is missing, or a table's numbers do not fill its shape.
    """
    p = Path(path)
    raw = p.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    text = re.sub(r"//[^\n]*", "", text)
    states = {m.group(1): tuple(_names(m.group(2))) for m in VARIABLE.finditer(text)}
    if not states:
        raise ValueError(f"{p}: no discrete variable found (is it a BIF file?)")
    cpts: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for m in PROBABILITY.finditer(text):
        child, parents = m.group(1).strip(), tuple(_names(m.group(2) or ""))
        for v in (child, *parents):
            if v not in states:
                raise ValueError(f"{p}: table of {child!r} names an unknown variable {v!r}")
        shape = tuple(len(states[v]) for v in (*parents, child))
        arr = np.full(shape, np.nan)
        for line in m.group(3).split(";"):
            line = line.strip()
            if not line:
                continue
            if line.startswith("table"):
                arr = np.array([float(x) for x in _names(line[5:])]).reshape(shape)
                continue
            head, _, probs = line.partition(")")
            idx = tuple(
                states[v].index(s) if s in states[v] else -1
                for v, s in zip(parents, _names(head.lstrip("(")), strict=True)
            )
            if -1 in idx:
                raise ValueError(f"{p}: table of {child!r} has an unknown state in {line!r}")
            arr[idx] = [float(x) for x in _names(probs)]
        if np.isnan(arr).any():
            raise ValueError(f"{p}: the table of {child!r} does not fill its {shape} entries")
        cpts[child] = (parents, arr)
    missing = [v for v in states if v not in cpts]
    if missing:
        raise ValueError(f"{p}: no probability table for {missing}")
    name = p.name.split(".")[0]
    return Network(name, states, cpts)


def var_name(net: Network, v: str) -> str:
    """The rule's name of ``v`` (``x`` and its position: BIF names may not be identifiers)."""
    return f"x{net.variables.index(v)}"


def rule(net: Network, target: str) -> tuple[str, list[str]]:
    """The marginal of ``target`` as a rule, and the relation names in its body order.

    ``Q(x_t) :- P0(parents…, x0), P1(…), …`` over ``real``: one atom per table.
    """
    if target not in net.states:
        raise ValueError(f"{target!r} is not a variable of {net.name}; try one of {net.variables}")
    atoms, names = [], []
    for t, (child, (parents, _)) in enumerate(net.cpts.items()):
        args = ", ".join(var_name(net, v) for v in (*parents, child))
        atoms.append(f"P{t}({args})")
        names.append(f"P{t}")
    return f"Q({var_name(net, target)}) :- " + ", ".join(atoms), names


def tables(net: Network) -> list[dict[str, np.ndarray]]:
    """Each table as columns ``c0, c1, …, value`` (state indices, then the probability),
    in the order of :func:`rule`'s atoms; zero probabilities are left out."""
    out = []
    for parents, arr in net.cpts.values():
        idx = np.nonzero(arr)
        cols = {f"c{k}": i.astype(np.int64) for k, i in enumerate(idx)}
        cols["value"] = arr[idx].astype(np.float64)
        out.append(cols)
        assert len(cols) == len(parents) + 2
    return out


def marginal_numpy(net: Network, target: str) -> np.ndarray:
    """``P(target)`` by ``numpy.einsum`` over every table (the reference)."""
    letters = string.ascii_letters
    if len(net.states) > len(letters):
        raise ValueError(f"{net.name}: more than {len(letters)} variables for numpy.einsum")
    sym = {v: letters[i] for i, v in enumerate(net.variables)}
    specs, arrays = [], []
    for child, (parents, arr) in net.cpts.items():
        specs.append("".join(sym[v] for v in (*parents, child)))
        arrays.append(arr)
    return np.einsum(",".join(specs) + "->" + sym[target], *arrays, optimize="greedy")
