"""Key types of a query's relations: a variable's columns agree, a constant fits its column.

Keys are never cast: integer types of any width count as one type (``bigint``),
and nothing else is unified.  Only schemas are read (no Spark job).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from faq.rule import Atom, Rule, literal

if TYPE_CHECKING:  # pragma: no cover
    from faq.factor import Factor

__all__ = ["check_constants", "check_key_types"]


def check_key_types(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a variable whose key columns have different types in different places,
    or a constant whose column has another type.

    Integer types of any width count as one type (``bigint``); nothing else is
    unified, so a string key is never cast to a number (or a number to a
    string), and an integer constant selects only from an integer column, a
    string constant only from a string column.  Reads only schemas: no Spark job.

    Raises
    ------
    ValueError
        Naming the variable, both atoms with their relations and both types;
        or the constant, its atom, the column and its type.
    """
    check_constants(rule, factors)
    types = {name: f.key_types for name, f in factors.items()}
    seen: dict[str, tuple[str, Atom, int]] = {}
    for atom in rule.atoms:
        for i, v in zip(atom.positions, atom.vars, strict=True):
            t = types[atom.relation][i]
            if v not in seen:
                seen[v] = (t, atom, i)
                continue
            t0, atom0, i0 = seen[v]
            if t != t0:
                raise ValueError(
                    f"variable {v!r} of {rule} has keys of different types: column {i0} of "
                    f"relation {atom0.relation!r} (atom {atom0}) is {t0}, column {i} of "
                    f"relation {atom.relation!r} (atom {atom}) is {t}; keys are never cast "
                    "(integers of any width count as bigint): convert one of them first"
                )


def check_constants(rule: Rule, factors: Mapping[str, Factor]) -> None:
    """Refuse a constant of ``rule`` whose column, in the factor given for its relation
    (relations not in ``factors`` are skipped), holds keys of another type: an integer
    constant needs an integer column, a string constant a string one.  An empty local
    factor holds no keys to compare: it passes."""
    for atom in rule.atoms:
        f = factors.get(atom.relation)
        if not atom.consts or f is None or (f.is_local and f.to_table().rows == 0):
            continue
        types = f.key_types
        for i, c in atom.consts:
            want, kind = ("string", "a string") if isinstance(c, str) else ("bigint", "an integer")
            if types[i] == want:
                continue
            hint = ""
            if types[i] == "string":
                hint = f" (the string constant is written {literal(str(c))})"
            elif types[i] == "bigint" and isinstance(c, str) and re.fullmatch(r"-?[0-9]+", c):
                hint = f" (the integer constant is written {int(c)})"
            raise ValueError(
                f"atom {atom} of {rule}: the constant {literal(c)} is {kind}, but column {i} "
                f"({f.vars[i]!r}) of relation {atom.relation!r} holds {types[i]} keys; keys "
                f"are never cast{hint}"
            )
