"""Parse FAQ rules (``Q(i, l) :- A(i, j), B(j, k)``) and einsum specs into a :class:`Rule`.

A rule's head lists the free variables; every other variable of the body is
aggregated with ⊕.  The same relation may appear in several atoms, and a
variable may repeat inside one atom (``E(a, a)`` selects the diagonal).

>>> r = parse_rule("Q(i, l) :- A(i, j), B(j, k), C(k, l)")
>>> r.head, [str(a) for a in r.atoms], r.bound
(('i', 'l'), ['A(i, j)', 'B(j, k)', 'C(k, l)'], ('j', 'k'))
>>> str(parse_einsum("ij,jk->ik", ["A", "B"]))
'Q(i, k) :- A(i, j), B(j, k)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Atom", "Rule", "parse_einsum", "parse_rule", "VALUE"]

VALUE = "value"
"""The reserved name of the annotation column."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ATOM_RE = re.compile(rf"\s*({_IDENT})\s*\(([^()]*)\)\s*")
_IDENT_RE = re.compile(rf"^{_IDENT}$")


@dataclass(frozen=True)
class Atom:
    """One body atom: a relation name applied to variables (by position)."""

    relation: str
    vars: tuple[str, ...]

    @property
    def distinct_vars(self) -> tuple[str, ...]:
        """The atom's variables without repeats, in first-appearance order."""
        return tuple(dict.fromkeys(self.vars))

    def __str__(self) -> str:
        return f"{self.relation}({', '.join(self.vars)})"


@dataclass(frozen=True)
class Rule:
    """A parsed query: head name, free variables, body atoms."""

    name: str
    head: tuple[str, ...]
    atoms: tuple[Atom, ...]

    @property
    def variables(self) -> tuple[str, ...]:
        """All variables, in order of first appearance in the body."""
        seen: dict[str, None] = {}
        for a in self.atoms:
            for v in a.vars:
                seen.setdefault(v, None)
        return tuple(seen)

    @property
    def bound(self) -> tuple[str, ...]:
        """The aggregated (non-head) variables, in order of first appearance."""
        return tuple(v for v in self.variables if v not in self.head)

    @property
    def relations(self) -> dict[str, int]:
        """Relation name -> arity, in order of first appearance."""
        out: dict[str, int] = {}
        for a in self.atoms:
            out.setdefault(a.relation, len(a.vars))
        return out

    def __str__(self) -> str:
        body = ", ".join(str(a) for a in self.atoms)
        return f"{self.name}({', '.join(self.head)}) :- {body}"


def _split_atoms(body: str, rule: str) -> list[str]:
    """Split a body at top-level commas (commas inside parentheses stay)."""
    parts, depth, cur = [], 0, []
    for ch in body:
        if ch == "(":
            depth += 1
            if depth > 1:
                raise ValueError(f"malformed rule {rule!r}: nested parentheses in the body")
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"malformed rule {rule!r}: unbalanced ')' in the body")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"malformed rule {rule!r}: unbalanced '(' in the body")
    parts.append("".join(cur))
    return parts


def _parse_atom(text: str, rule: str, where: str) -> Atom:
    m = _ATOM_RE.fullmatch(text)
    if m is None:
        shown = text.strip() or "(empty)"
        raise ValueError(
            f"malformed {where} {shown!r} in rule {rule!r}: expected Name(var, var, ...)"
        )
    name, args = m.group(1), m.group(2).strip()
    vars_: tuple[str, ...] = ()
    if args:
        vars_ = tuple(a.strip() for a in args.split(","))
        for v in vars_:
            if not _IDENT_RE.match(v):
                raise ValueError(
                    f"malformed {where} {text.strip()!r} in rule {rule!r}: "
                    f"{v!r} is not a variable name"
                )
            if v == VALUE:
                raise ValueError(
                    f"{where} {text.strip()!r} in rule {rule!r}: the variable name "
                    f"{VALUE!r} is reserved for the annotation column"
                )
    return Atom(name, vars_)


def parse_rule(rule: str) -> Rule:
    """Parse ``Head(vars) :- Atom(vars), ...`` into a :class:`Rule`.

    Raises ValueError pointing at the offending atom for a malformed rule, a
    head variable absent from the body, a repeated head variable, or a
    relation used with two different arities.
    """
    if not isinstance(rule, str):
        raise TypeError(f"a rule is a string, not {type(rule).__name__}")
    if ":-" not in rule:
        raise ValueError(f"malformed rule {rule!r}: expected 'Head(...) :- Body(...), ...'")
    head_text, body_text = rule.split(":-", 1)
    head = _parse_atom(head_text, rule, "head")
    if len(set(head.vars)) != len(head.vars):
        raise ValueError(f"head {head} in rule {rule!r} repeats a variable")
    if not body_text.strip():
        raise ValueError(f"malformed rule {rule!r}: the body has no atoms")
    atoms = tuple(_parse_atom(t, rule, "atom") for t in _split_atoms(body_text, rule))
    arity: dict[str, Atom] = {}
    for a in atoms:
        first = arity.setdefault(a.relation, a)
        if len(first.vars) != len(a.vars):
            raise ValueError(
                f"atom {a} in rule {rule!r}: relation {a.relation!r} has arity "
                f"{len(first.vars)} in {first} but {len(a.vars)} here"
            )
        if a.relation == head.relation:
            raise ValueError(f"atom {a} in rule {rule!r}: the head relation cannot be recursive")
    body_vars = {v for a in atoms for v in a.vars}
    for v in head.vars:
        if v not in body_vars:
            raise ValueError(
                f"head {head} in rule {rule!r}: variable {v!r} does not appear in the body"
            )
    return Rule(head.relation, head.vars, atoms)


def parse_einsum(spec: str, names: list[str]) -> Rule:
    """Turn a numpy-style einsum spec into a :class:`Rule` over relations ``names``.

    Each operand's subscripts are single letters; without ``->`` the output is
    the letters that appear exactly once, in alphabetical order (numpy's rule).
    """
    if not isinstance(spec, str):
        raise TypeError(f"an einsum spec is a string, not {type(spec).__name__}")
    s = spec.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->", 1)
        explicit = True
    else:
        lhs, out, explicit = s, "", False
    if "." in s:
        raise ValueError(f"einsum spec {spec!r}: ellipsis ('...') is not supported")
    terms = lhs.split(",") if lhs else []
    if len(terms) != len(names):
        raise ValueError(
            f"einsum spec {spec!r} names {len(terms)} operands but {len(names)} were given"
        )
    for t in [*terms, out]:
        for ch in t:
            if not ch.isalpha():
                raise ValueError(f"einsum spec {spec!r}: {ch!r} is not a subscript letter")
    counts: dict[str, int] = {}
    for t in terms:
        for ch in t:
            counts[ch] = counts.get(ch, 0) + 1
    if not explicit:
        out = "".join(sorted(ch for ch, c in counts.items() if c == 1))
    if len(set(out)) != len(out):
        raise ValueError(f"einsum spec {spec!r}: output subscripts {out!r} repeat a letter")
    for ch in out:
        if ch not in counts:
            raise ValueError(
                f"einsum spec {spec!r}: output subscript {ch!r} does not appear in any operand"
            )
    atoms = tuple(Atom(n, tuple(t)) for n, t in zip(names, terms, strict=True))
    return Rule("Q", tuple(out), atoms)
