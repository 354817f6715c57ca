"""Queries: rules and einsum specs, solved by InsideOut on Spark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import semirings
from faq.engine import JOIN_METHODS, Frame, atom_frame, execute, execute_delta
from faq.factor import Factor
from faq.planner import AtomStats, Plan, make_plan
from faq.rule import VALUE, Rule, parse_einsum, parse_rule
from semirings import Semiring

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["Query", "einsum", "query"]

_RESERVED = ("order", "join", "trace")


class Query:
    """A functional aggregate query over one semiring.

    Build one with :func:`query` (a rule) or use :func:`einsum`.  The head's
    variables are free; every other variable is ⊕-aggregated.

    Examples
    --------
    >>> q = query("Q(i, l) :- A(i, j), B(j, k), C(k, l)", semiring="real")  # doctest: +SKIP
    >>> out = q.solve(A=A, B=B, C=C)                                        # doctest: +SKIP
    >>> print(q.explain(A=A, B=B, C=C))                                     # doctest: +SKIP
    """

    def __init__(self, rule: str | Rule, semiring: str | Semiring = "real") -> None:
        self.rule = parse_rule(rule) if isinstance(rule, str) else rule
        self.semiring = semirings.get(semiring)
        for name in self.rule.relations:
            if name in _RESERVED:
                raise ValueError(
                    f"relation name {name!r} in {self.rule} clashes with a solve() option; "
                    f"rename it (reserved: {', '.join(_RESERVED)})"
                )
        self.last_plan: Plan | None = None
        self._last_inputs: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return f"query({str(self.rule)!r}, semiring={self.semiring.name!r})"

    @property
    def head(self) -> tuple[str, ...]:
        """The free variables, in head order."""
        return self.rule.head

    # -- inputs ----------------------------------------------------------------------------
    def _factors(self, relations: dict[str, Any]) -> dict[str, Factor]:
        needed = self.rule.relations
        missing = [n for n in needed if n not in relations]
        extra = [n for n in relations if n not in needed]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing relation(s) {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"unexpected relation(s) {', '.join(map(repr, extra))}")
            raise ValueError(f"{'; '.join(parts)} for {self.rule} (it needs: {', '.join(needed)})")
        out: dict[str, Factor] = {}
        for name, arity in needed.items():
            out[name] = self._as_factor(name, relations[name], arity)
        return out

    def _as_factor(self, name: str, rel: Any, arity: int) -> Factor:
        from pyspark.sql import DataFrame as SparkDataFrame

        atom = next(a for a in self.rule.atoms if a.relation == name)
        if isinstance(rel, Factor):
            f = rel
        elif isinstance(rel, SparkDataFrame):
            keys = [c for c in rel.columns if c != VALUE]
            if len(keys) != arity:
                raise ValueError(
                    f"relation {name!r}: atom {atom} takes {arity} key column(s) but the "
                    f"DataFrame has {len(keys)}: {keys!r} (columns found: {rel.columns!r})"
                )
            f = Factor(rel, name=name)
        elif isinstance(rel, np.ndarray):
            f = Factor.from_numpy(
                rel, vars=[f"_{i}" for i in range(rel.ndim)], semiring=self.semiring, name=name
            )
        else:
            raise TypeError(
                f"relation {name!r}: expected a Factor, a Spark DataFrame or a numpy array, "
                f"got {type(rel).__name__}"
            )
        if len(f.vars) != arity:
            raise ValueError(
                f"relation {name!r}: atom {atom} takes {arity} variable(s) but the factor has "
                f"{len(f.vars)}: {f.vars!r}"
            )
        return f.for_semiring(self.semiring, name)

    def _prepare(
        self, relations: dict[str, Any]
    ) -> tuple[dict[int, Frame], list[AtomStats], list[DataFrame]]:
        factors = self._factors(relations)
        S = self.semiring
        prepared: dict[str, tuple[DataFrame, Any, tuple[str, ...]]] = {}
        cached: list[DataFrame] = []
        uses = {n: sum(a.relation == n for a in self.rule.atoms) for n in factors}
        for name, f in factors.items():
            df, st = f.prepared(S, f"relation {name!r}")
            if uses[name] > 1 and not f._clean:
                df = df.persist()
                cached.append(df)
            prepared[name] = (df, st, f.vars)
        stats: list[AtomStats] = []
        frames: list[DataFrame] = []
        for a in self.rule.atoms:
            df, st, keys = prepared[a.relation]
            distinct: dict[str, int] = {}
            for v, d in zip(a.vars, st.distinct, strict=True):
                distinct[v] = min(distinct.get(v, d), d)
            stats.append(AtomStats(st.rows, distinct))
            frames.append(atom_frame(a, df, keys))
        return {i: f for i, f in enumerate(frames)}, stats, cached  # type: ignore[misc]

    # -- public API --------------------------------------------------------------------------
    def plan(self, order: str | Sequence[str] = "auto", **relations: Any) -> Plan:
        """The InsideOut plan for these relations (statistics only; nothing is joined)."""
        _, stats, cached = self._prepare(relations)
        for df in cached:
            df.unpersist()
        return make_plan(self.rule, stats, order)

    def solve(
        self,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        trace: bool = False,
        **relations: Any,
    ) -> Factor:
        """Evaluate the query; return a Factor over the head variables.

        Parameters
        ----------
        order : str or list of str
            A strategy name (``"auto"``, ``"optimal"``, ``"greedy"``,
            ``"textual"``) or an explicit elimination order of the bound variables.
        join : {"auto", "binary", "wcoj"}
            Join method: by bag shape (worst-case optimal for cyclic bags), or forced.
        trace : bool
            Count every intermediate of every join (extra Spark jobs), shown by
            :meth:`explain` as "largest intermediate".
        **relations
            One Factor, Spark DataFrame or numpy array per relation name.

        Raises
        ------
        ValueError
            Missing or extra relations, arity mismatches, null keys, values
            outside the semiring, a bad order or join method.
        OverflowError
            A 64-bit integer semiring (counting, integer) overflowed.
        """
        if join not in JOIN_METHODS:
            raise ValueError(
                f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}"
            )
        frames, stats, cached = self._prepare(relations)
        plan = make_plan(self.rule, stats, order)
        atom_frames = {
            id(pf): Frame(pf.vars, frames[i], pf.rows) for i, pf in enumerate(plan.atoms)
        }
        try:
            result, rows, distinct = execute(plan, atom_frames, self.semiring, join, trace=trace)
        except Exception as exc:
            raise spark_error(exc, self) from exc
        finally:
            for df in cached:
                df.unpersist()
        self.last_plan = plan
        self._last_inputs = tuple(id(relations[n]) for n in sorted(relations))
        from faq.factor import RelationStats

        stats_out = RelationStats(rows, distinct)
        return Factor(
            result,
            self.rule.head,
            self.semiring,
            name=self.rule.name,
            _clean=True,
            _stats=stats_out,
        )

    def solve_from(
        self,
        start: str,
        order: str | Sequence[str] = "auto",
        join: str = "auto",
        **relations: Any,
    ) -> tuple[DataFrame, list[DataFrame]]:
        """The query as one lazy DataFrame whose joins all start from relation ``start``.

        For a ``start`` that is small next to the others (a delta), this is the
        delta query of incremental maintenance: the plan is the same InsideOut
        plan as :meth:`solve`, but every join reads the other relations by
        broadcasting what ``start`` reaches (Generic Join seeded by ``start`` at
        cyclic bags; see :func:`faq.engine.execute_delta`), and nothing is
        materialised.  ``start`` must occur in exactly one atom.

        Returns the result (head variables, then ``value``) and DataFrames
        cached while it runs, to ``unpersist`` once the result is materialised.
        Overflow surfaces when the result is computed; see :meth:`solve`.
        """
        if join not in JOIN_METHODS:
            raise ValueError(
                f"unknown join method {join!r}; valid methods: {', '.join(JOIN_METHODS)}"
            )
        atoms = [i for i, a in enumerate(self.rule.atoms) if a.relation == start]
        if len(atoms) != 1:
            raise ValueError(
                f"solve_from: relation {start!r} must occur in exactly one atom of "
                f"{self.rule}; it occurs in {len(atoms)}"
            )
        frames, stats, cached = self._prepare(relations)
        plan = make_plan(self.rule, stats, order)
        atom_frames = {
            id(pf): Frame(pf.vars, frames[i], pf.rows) for i, pf in enumerate(plan.atoms)
        }
        result, held = execute_delta(
            plan, atom_frames, self.semiring, id(plan.atoms[atoms[0]]), join
        )
        self.last_plan = plan
        self._last_inputs = tuple(id(relations[n]) for n in sorted(relations))
        return result, [*held, *cached]

    def explain(
        self, order: str | Sequence[str] = "auto", join: str = "auto", **relations: Any
    ) -> str:
        """The plan as text: variable order, each step's factors, join method, sizes.

        After :meth:`solve` on the same relation objects, the report of that run,
        with actual sizes; otherwise the estimated plan.
        """
        key = tuple(id(relations[n]) for n in sorted(relations))
        if self.last_plan is not None and key == self._last_inputs:
            return self.last_plan.report(self.semiring.name, after_solve=True)
        plan = self.plan(order, **relations)
        from faq.engine import choose_method

        for s in plan.steps:
            s.method = choose_method(s, join)
        return plan.report(self.semiring.name)


def spark_error(exc: Exception, q: Query) -> Exception:
    """Turn Spark's ANSI overflow error into an OverflowError that names the semiring."""
    text = str(exc)
    if (
        "ARITHMETIC_OVERFLOW" in text
        or "overflow" in text.lower()
        and "Arithmetic" in type(exc).__name__
    ):
        return OverflowError(
            f"query {q.rule}: a {q.semiring.name!r} annotation overflowed 64-bit integers "
            "(Spark ANSI mode). Use the 'real' semiring for an approximate answer."
        )
    return exc


def query(rule: str, semiring: str | Semiring = "real") -> Query:
    """A query from a rule such as ``"Q(i, l) :- A(i, j), B(j, k), C(k, l)"``.

    >>> q = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    >>> q.head, q.rule.bound
    ((), ('a', 'b', 'c'))
    """
    return Query(rule, semiring)


def einsum(
    spec: str,
    *operands: Factor | DataFrame | np.ndarray,
    semiring: str | Semiring = "real",
    order: str | Sequence[str] = "auto",
    join: str = "auto",
) -> Factor:
    """Evaluate a numpy-style einsum spec over factors, with any semiring.

    ``einsum("ij,jk->ik", A, B)`` is the product of A and B; operands are
    Factors, DataFrames or numpy arrays (dense arrays become sparse factors).
    """
    names = [f"T{i}" for i in range(len(operands))]
    rule = parse_einsum(spec, names)
    q = Query(rule, semiring)
    return q.solve(order=order, join=join, **dict(zip(names, operands, strict=True)))
