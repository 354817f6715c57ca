"""The keys the strategies of :mod:`incremental.testing.strategies` draw: the domain of
``keys=``, and per relation column that domain plus the constants the rules compare the
column with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis.errors import InvalidArgument

from faq import Program, Query

__all__ = ["column_domains", "key_domain", "key_dtype"]


def key_domain(keys: Iterable[Any]) -> list[Any]:
    """The distinct keys of ``keys=``, in order: all integers or all strings, at least one."""
    domain = list(dict.fromkeys(keys))
    if not domain:
        raise InvalidArgument("keys= must hold at least one key value")
    ints = all(isinstance(k, int) and not isinstance(k, bool) for k in domain)
    if not ints and not all(isinstance(k, str) for k in domain):
        raise InvalidArgument(f"keys= must be all integers or all strings, got {domain!r}")
    return domain


def column_domains(
    query: Query | Program, arities: Mapping[str, int], domain: list[Any]
) -> dict[str, list[list[Any]]]:
    """Per input relation, the keys each of its columns draws from: ``domain``, plus the
    constants the rules compare that column with (``F(b, 'x')``: a row matching the
    constant is drawn as often as any).  A column compared with constants of another type
    than ``domain``'s (a string constant, integer keys) draws those constants and one key
    that matches none of them: drawing ``domain`` there would give a relation the query
    refuses ("keys are never cast")."""
    kind = int if isinstance(domain[0], int) else str
    consts: dict[tuple[str, int], list[Any]] = {}
    for rule in query.rules if isinstance(query, Program) else (query.rule,):
        for atom in rule.atoms:
            if atom.relation in arities:
                for pos, c in atom.consts:
                    consts.setdefault((atom.relation, pos), []).append(c)
    out = {}
    for name, arity in arities.items():
        cols = []
        for pos in range(arity):
            cs = list(dict.fromkeys(consts.get((name, pos), [])))
            kinds = {int if isinstance(c, int) else str for c in cs}
            if len(kinds) > 1:
                raise InvalidArgument(
                    f"column {pos} of relation {name!r} is compared with constants of two "
                    f"types, {cs!r}: no key matches both"
                )
            if not cs or kinds == {kind}:
                cols.append(list(dict.fromkeys([*domain, *cs])))
            elif isinstance(cs[0], int):
                cols.append([*cs, max(cs) + 1])
            else:
                cols.append([*cs, "~" + max(cs)])
        out[name] = cols
    return out


def key_dtype(keys: list[Any]) -> str:
    """The dtype of a key column drawing from ``keys`` (all integers or all strings)."""
    return "int64" if isinstance(keys[0], int) else "object"
