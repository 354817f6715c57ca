r"""Parse FAQ rules (``Q(i, l) :- A(i, j), B(j, k)``) and einsum specs into a :class:`Rule`.

A rule's head lists the free variables; every other variable of the body is
aggregated with ⊕.  The same relation may appear in several atoms, and a
variable may repeat inside one atom (``E(a, a)`` selects the diagonal).  An
argument of a body atom may also be a constant, an integer (``-3``) or a quoted
string (``'x'`` or ``"x"``, with backslash escapes ``\\ \' \" \n \t \r``): the
atom then selects the rows whose key column equals it (``M(0, b)``).

>>> r = parse_rule("Q(i, l) :- A(i, j), B(j, k), C(k, l)")
>>> r.head, [str(a) for a in r.atoms], r.bound
(('i', 'l'), ['A(i, j)', 'B(j, k)', 'C(k, l)'], ('j', 'k'))
>>> str(parse_einsum("ij,jk->ik", ["A", "B"]))
'Q(i, k) :- A(i, j), B(j, k)'
>>> r = parse_rule("Q(b) :- M(0, b), N(b, \"x\")")
>>> r.atoms[0].consts, r.atoms[0].vars, str(r)
(((0, 0),), ('b',), "Q(b) :- M(0, b), N(b, 'x')")
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Atom",
    "Constant",
    "Rule",
    "literal",
    "parse_einsum",
    "parse_rule",
    "replace_constants",
    "split_rules",
    "without_constants",
    "VALUE",
]

VALUE = "value"
"""The reserved name of the annotation column."""

Constant = int | str
"""A constant argument of an atom: an integer (64-bit) or a string."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ATOM_RE = re.compile(rf"\s*({_IDENT})\s*\(([^()]*)\)\s*")
_IDENT_RE = re.compile(rf"^{_IDENT}$")
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_STRING_RE = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"', re.DOTALL)
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_INT64 = (-(2**63), 2**63 - 1)


def literal(c: Constant) -> str:
    """How constant ``c`` is written in a rule (``3``, ``'x'``): it parses back to ``c``.

    >>> print(literal(-3), literal("it's"), literal("a\\nb"))
    -3 'it\\'s' 'a\\nb'
    """
    if isinstance(c, str):
        back = {v: k for k, v in _ESCAPES.items() if k != '"'}
        return "'" + "".join("\\" + back[ch] if ch in back else ch for ch in c) + "'"
    return str(c)


@dataclass(frozen=True)
class Atom:
    """One body atom: a relation name applied to variables and constants (by position).

    ``vars`` are the variables, in the order of their columns; ``consts`` the
    constants as ``(column position, value)`` pairs, in column order.  The
    atom's columns are the positions of both together (see :attr:`positions`).
    """

    relation: str
    vars: tuple[str, ...]
    consts: tuple[tuple[int, Constant], ...] = ()

    def __post_init__(self) -> None:
        if not self.consts:
            return
        arity = len(self.vars) + len(self.consts)
        where = [p for p, _ in self.consts]
        if where != sorted(set(where)) or not all(0 <= p < arity for p in where):
            raise ValueError(
                f"atom of relation {self.relation!r}: constant positions {where!r} must be "
                f"distinct, increasing and below the arity {arity}"
            )
        for _, c in self.consts:
            if isinstance(c, bool) or not isinstance(c, int | str):
                raise TypeError(
                    f"atom of relation {self.relation!r}: a constant is an int or a str, "
                    f"not {type(c).__name__} ({c!r})"
                )

    @property
    def arity(self) -> int:
        """The number of columns: variables and constants."""
        return len(self.vars) + len(self.consts)

    @property
    def positions(self) -> tuple[int, ...]:
        """The column position of each entry of :attr:`vars`."""
        fixed = {p for p, _ in self.consts}
        return tuple(p for p in range(self.arity) if p not in fixed)

    @property
    def distinct_vars(self) -> tuple[str, ...]:
        """The atom's variables without repeats, in first-appearance order."""
        return tuple(dict.fromkeys(self.vars))

    @property
    def arguments(self) -> tuple[str, ...]:
        """The arguments as written, one per column: variable names and constant literals."""
        args = dict(zip(self.positions, self.vars, strict=True))
        args.update((p, literal(c)) for p, c in self.consts)
        return tuple(args[p] for p in range(self.arity))

    def __str__(self) -> str:
        return f"{self.relation}({', '.join(self.arguments)})"


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
            out.setdefault(a.relation, a.arity)
        return out

    def __str__(self) -> str:
        body = ", ".join(str(a) for a in self.atoms)
        return f"{self.name}({', '.join(self.head)}) :- {body}"


def _masked(rule: str) -> str:
    """``rule`` with the inside of every quoted string blanked (same length), so the
    commas, parentheses and ``:-`` of a string constant are not read as syntax."""
    out = list(rule)
    i = 0
    while i < len(rule):
        q = rule[i]
        if q not in "'\"":
            i += 1
            continue
        j = i + 1
        while j < len(rule) and rule[j] != q:
            j += 2 if rule[j] == "\\" else 1
        if j >= len(rule):
            raise ValueError(f"malformed rule {rule!r}: unterminated string {rule[i:]!r}")
        out[i + 1 : j] = "_" * (j - i - 1)
        i = j + 1
    return "".join(out)


def _split(masked: str, rule: str, what: str = "the body") -> list[tuple[int, int]]:
    """The spans of ``masked`` between top-level commas (commas inside parentheses stay)."""
    spans, depth, start = [], 0, 0
    for i, ch in enumerate(masked):
        if ch == "(":
            depth += 1
            if depth > 1:
                raise ValueError(f"malformed rule {rule!r}: nested parentheses in {what}")
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"malformed rule {rule!r}: unbalanced ')' in {what}")
        elif ch == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    if depth != 0:
        raise ValueError(f"malformed rule {rule!r}: unbalanced '(' in {what}")
    spans.append((start, len(masked)))
    return spans


def _parse_atom(text: str, masked: str, rule: str, where: str) -> Atom:
    """One atom from ``text`` (``masked``: the same text, strings blanked)."""
    m = _ATOM_RE.fullmatch(masked)
    shown = text.strip() or "(empty)"
    if m is None:
        raise ValueError(
            f"malformed {where} {shown!r} in rule {rule!r}: expected Name(var, var, ...)"
        )
    name = m.group(1)
    a, b = m.span(2)
    vars_: list[str] = []
    consts: list[tuple[int, Constant]] = []
    if text[a:b].strip():
        for pos, (s, e) in enumerate(_split(masked[a:b], rule)):
            arg = text[a + s : a + e].strip()
            if _IDENT_RE.match(arg):
                if arg == VALUE:
                    raise ValueError(
                        f"{where} {shown!r} in rule {rule!r}: the variable name "
                        f"{VALUE!r} is reserved for the annotation column"
                    )
                vars_.append(arg)
                continue
            c = _constant(arg, shown, rule, where)
            if where == "head":
                raise ValueError(
                    f"head {shown!r} in rule {rule!r}: the constant {arg} cannot be in the "
                    "head, which lists variables only (a constant in a body atom selects rows)"
                )
            consts.append((pos, c))
    return Atom(name, tuple(vars_), tuple(consts))


def _constant(arg: str, shown: str, rule: str, where: str) -> Constant:
    """The value of constant ``arg`` (an integer or a quoted string); ValueError otherwise."""
    if _INT_RE.match(arg):
        n = int(arg)
        if not _INT64[0] <= n <= _INT64[1]:
            raise ValueError(
                f"{where} {shown!r} in rule {rule!r}: the integer constant {arg} does not "
                "fit in 64 bits"
            )
        return n
    if _STRING_RE.fullmatch(arg):
        out, i, body = [], 0, arg[1:-1]
        while i < len(body):
            ch = body[i]
            if ch == "\\":
                nxt = body[i + 1]  # a string ends with its quote, never with a lone backslash
                if nxt not in _ESCAPES:
                    raise ValueError(
                        f"{where} {shown!r} in rule {rule!r}: unknown escape '\\{nxt}' in the "
                        f"string {arg}; known escapes: \\\\ \\' \\\" \\n \\t \\r"
                    )
                out.append(_ESCAPES[nxt])
                i += 2
            else:
                out.append(ch)
                i += 1
        return "".join(out)
    shown_arg = arg or "(empty)"
    raise ValueError(
        f"malformed {where} {shown!r} in rule {rule!r}: {shown_arg!r} is not a variable name"
        + ("" if where == "head" else ", an integer or a quoted string")
    )


def split_rules(text: str) -> list[str]:
    """The rules of a program: ``text`` cut at ``;`` and at line ends (outside strings).

    A line without ``:-`` continues the rule before it (a long body may span
    lines); blank pieces are dropped.

    >>> split_rules("D(x) :- S(x)" + chr(10) + "D(y) :- D(x)," + chr(10) + " E(x, y); P(x) :- D(x)")
    ['D(x) :- S(x)', 'D(y) :- D(x), E(x, y)', 'P(x) :- D(x)']
    """
    if not isinstance(text, str):
        raise TypeError(f"a rule is a string, not {type(text).__name__}")
    masked = _masked(text)
    rules: list[str] = []
    start, after_newline = 0, False
    for i, ch in enumerate([*masked, ";"]):
        if ch not in ";\n":
            continue
        piece = text[start:i].strip()
        if piece and rules and after_newline and ":-" not in _masked(piece):
            rules[-1] = f"{rules[-1]} {piece}"
        elif piece:
            rules.append(piece)
        start, after_newline = i + 1, ch == "\n"
    return rules


def parse_rule(rule: str, recursive: bool = False) -> Rule:
    """Parse ``Head(vars) :- Atom(args), ...`` into a :class:`Rule`.

    An argument of a body atom is a variable, an integer or a quoted string
    (see the module notes).  Raises ValueError pointing at the offending atom
    for a malformed rule or constant, a constant in the head, a head variable
    absent from the body, a repeated head variable, or a relation used with two
    different arities; and, unless ``recursive`` (a rule of a program, see
    :mod:`faq.recursion`), for the head relation used in the body.
    """
    if not isinstance(rule, str):
        raise TypeError(f"a rule is a string, not {type(rule).__name__}")
    masked = _masked(rule)
    if ":-" not in masked:
        raise ValueError(f"malformed rule {rule!r}: expected 'Head(...) :- Body(...), ...'")
    cut = masked.index(":-")
    head = _parse_atom(rule[:cut], masked[:cut], rule, "head")
    if len(set(head.vars)) != len(head.vars):
        raise ValueError(f"head {head} in rule {rule!r} repeats a variable")
    body, body_masked = rule[cut + 2 :], masked[cut + 2 :]
    if not body.strip():
        raise ValueError(f"malformed rule {rule!r}: the body has no atoms")
    atoms = tuple(
        _parse_atom(body[s:e], body_masked[s:e], rule, "atom") for s, e in _split(body_masked, rule)
    )
    arity: dict[str, Atom] = {}
    for a in atoms:
        first = arity.setdefault(a.relation, a)
        if first.arity != a.arity:
            raise ValueError(
                f"atom {a} in rule {rule!r}: relation {a.relation!r} has arity "
                f"{first.arity} in {first} but {a.arity} here"
            )
        if a.relation == head.relation and not recursive:
            raise ValueError(f"atom {a} in rule {rule!r}: the head relation cannot be recursive")
    body_vars = {v for a in atoms for v in a.vars}
    for v in head.vars:
        if v not in body_vars:
            raise ValueError(
                f"head {head} in rule {rule!r}: variable {v!r} does not appear in the body"
            )
    return Rule(head.relation, head.vars, atoms)


def replace_constants(rule: Rule, f: Callable[[Constant], Constant]) -> Rule:
    """``rule`` with every constant ``c`` replaced by ``f(c)`` (ids mapped to codes, say).

    >>> str(replace_constants(parse_rule("Q(b) :- M('x', b)"), lambda c: len(c)))
    'Q(b) :- M(1, b)'
    """
    atoms = tuple(
        Atom(a.relation, a.vars, tuple((p, f(c)) for p, c in a.consts)) for a in rule.atoms
    )
    return Rule(rule.name, rule.head, atoms)


def without_constants(rule: Rule) -> tuple[Rule, dict[str, Atom]]:
    """``rule`` with every atom that has constants reading a fresh relation instead.

    The fresh relation (``M__c1``…; one per relation and set of constants) has the
    atom's variable columns only: it holds the rows of the atom's relation whose
    constant columns equal the constants, without those columns.  Returns the
    rule and, per fresh name, the atom it stands for (its relation, constants
    and :attr:`Atom.positions`).  A rule without constants is returned as it is.

    >>> r, fresh = without_constants(parse_rule("Q(b) :- M(0, b), M(b, c)"))
    >>> str(r), {n: str(a) for n, a in fresh.items()}
    ('Q(b) :- M__c1(b), M(b, c)', {'M__c1': 'M(0, b)'})
    """
    if not any(a.consts for a in rule.atoms):
        return rule, {}
    taken = {rule.name, *rule.relations}
    names: dict[tuple[str, tuple[tuple[int, Constant], ...]], str] = {}
    fresh: dict[str, Atom] = {}
    atoms = []
    for a in rule.atoms:
        if not a.consts:
            atoms.append(a)
            continue
        key = (a.relation, a.consts)
        if key not in names:
            k, n = len(names) + 1, ""
            while not n or n in taken:
                n = f"{a.relation}__c{k}"
                k += 1
            taken.add(n)
            names[key] = n
            fresh[n] = a
        atoms.append(Atom(names[key], a.vars))
    return Rule(rule.name, rule.head, tuple(atoms)), fresh


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
    terms = lhs.split(",")  # as numpy: "->" is one operand without subscripts (a 0-d array)
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
