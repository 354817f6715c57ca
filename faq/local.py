"""Small plans in the driver: delta queries on pandas, reading Spark factors by key.

A delta query (one term of the delta rule of :mod:`incremental`) starts from a
small factor, the delta, and touches only the rows of the other relations
that join with it.  Run as Spark jobs, its many tiny stages cost far more than
its data (about 0.1 s a stage); run here, it costs one filtered scan of each
relation per level of the join.

:func:`run` executes an InsideOut :class:`~faq.planner.Plan` exactly as
:func:`faq.engine.execute_delta` does (the same steps; binary joins from the
delta; at cyclic bags Generic Join seeded by the delta, with its count,
propose and intersect moves), on pandas DataFrames.  The factors other than
the delta stay in Spark as :class:`Remote` factors: :func:`run` is a
generator that yields lists of :class:`Request` (the rows of a remote factor
whose variables ``on`` take one of the given key tuples) and is sent back the
answers, so a caller can serve the requests of many delta queries with one
Spark job per relation (see :class:`incremental.IncrementalView`).

It raises :class:`NeedsSpark` when the plan has a step the delta does not
reach (that step is a query over whole relations), when a remote factor
would be read without any key, or when the data grows past ``MAX_ROWS``; the
caller then runs the Spark plan instead.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faq.planner import Plan, Step
from faq.rule import VALUE
from semirings import Semiring
from semirings.local import LocalOps, local_ops

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["MAX_ROWS", "Local", "NeedsSpark", "Remote", "Request", "run"]

MAX_ROWS = 2_000_000
"""The largest intermediate (or fetched) row count a plan may reach in the driver."""

W = "__w"


class NeedsSpark(Exception):
    """The plan cannot run in the driver; the message says why."""


@dataclass(frozen=True)
class Remote:
    """A factor that stays in Spark: ``source`` tells the caller which one."""

    source: Hashable
    vars: tuple[str, ...]
    rows: float


@dataclass(frozen=True)
class Local:
    """A factor in the driver: a pandas DataFrame of ``vars`` and ``value``."""

    vars: tuple[str, ...]
    df: pd.DataFrame

    @property
    def rows(self) -> float:
        return float(len(self.df))


@dataclass(frozen=True)
class Request:
    """The rows of ``remote`` whose variables ``on`` match a row of ``keys`` (distinct)."""

    remote: Remote
    on: tuple[str, ...]
    keys: pd.DataFrame


Factor = Local | Remote
Fetching = Generator[list[Request], list["pd.DataFrame"], Local]


def run(
    plan: Plan, factors: dict[int, Factor], seed: int, S: Semiring, join: str = "auto"
) -> Fetching:
    """Evaluate ``plan`` from the local factor ``seed`` (``id`` of its PlanFactor).

    ``factors`` maps ``id(PlanFactor)`` of every atom to a Local or Remote
    factor.  Yields lists of requests, expects the list of answers (one pandas
    DataFrame of the remote's ``vars`` and ``value`` per request, exactly the
    matching rows) and returns the result over the head variables, zero
    annotations dropped.  ``join`` is ``"auto"``/``"wcoj"`` (Generic Join at
    cyclic bags) or ``"binary"``; each step's ``method`` records the choice.
    """
    o = local_ops(S)
    frames: dict[int, Factor] = dict(factors)
    seeded = {seed}
    for step in plan.steps:
        inputs = [frames.pop(id(f)) for f in step.factors]
        starts = [x for x, f in zip(inputs, step.factors, strict=True) if id(f) in seeded]
        if not starts or not isinstance(starts[0], Local):
            raise NeedsSpark(f"step {step.vars} does not involve the delta")
        start = starts[0]
        wcoj = join != "binary" and step.cyclic and len(inputs) > 1
        step.method = "wcoj" if wcoj else "binary"
        if wcoj:
            joined = yield from _generic_join(inputs, start, o, step)
        else:
            joined = yield from _binary(inputs, start, o)
        frames[id(step.output)] = _aggregate(joined, step.output.vars, o)
        seeded.add(id(step.output))
    (only,) = frames.values()
    if not isinstance(only, Local):  # pragma: no cover - the seed is the only factor then
        raise NeedsSpark("the result is not computed from the delta")
    return _aggregate(only, plan.rule.head, o)


def _aggregate(f: Local, keep: Sequence[str], o: LocalOps) -> Local:
    df = f.df
    if tuple(keep) != f.vars:
        df = o.reduce(df[[*keep, VALUE]], list(keep), VALUE)
    df = df[o.nonzero(df[VALUE].to_numpy())]
    return Local(tuple(keep), df[[*keep, VALUE]].reset_index(drop=True))


def _guard(df: pd.DataFrame, what: str) -> None:
    if len(df) > MAX_ROWS:
        raise NeedsSpark(f"{what} has {len(df):,} rows (more than {MAX_ROWS:,})")


def _times(df: pd.DataFrame, cols: Sequence[str], o: LocalOps) -> np.ndarray:
    """The ⊗-product of the columns ``cols`` of ``df``, row by row."""
    out = df[cols[0]].to_numpy()
    for c in cols[1:]:
        out = o.mul(out, df[c].to_numpy())
    return out


def _binary(inputs: list[Factor], start: Local, o: LocalOps) -> Fetching:
    """Join from ``start``: each next factor (sharing variables) is read at the keys reached."""
    acc = start.df.rename(columns={VALUE: W})
    vars_ = list(start.vars)
    pending = sorted((x for x in inputs if x is not start), key=lambda x: x.rows)
    while pending:
        nxt = next((x for x in pending if set(x.vars) & set(vars_)), None)
        if nxt is None:
            raise NeedsSpark("a factor shares no variable with the delta's join")
        pending.remove(nxt)
        on = [v for v in nxt.vars if v in vars_]
        if isinstance(nxt, Remote):
            (rows,) = yield [Request(nxt, tuple(on), acc[on].drop_duplicates())]
        else:
            rows = nxt.df
        acc = acc.merge(rows.rename(columns={VALUE: "__v"}), on=on, how="inner")
        acc[W] = _times(acc, [W, "__v"], o)
        vars_ += [v for v in nxt.vars if v not in vars_]
        acc = acc[[*vars_, W]]
        _guard(acc, "an intermediate join")
    return Local(tuple(vars_), acc.rename(columns={W: VALUE}))


def _generic_join(inputs: list[Factor], start: Local, o: LocalOps, step: Step) -> Fetching:
    """Generic Join seeded by ``start``: count, propose, intersect, one variable a level."""
    import pandas as pd

    from faq.engine import Frame, step_distinct
    from faq.wcoj import variable_order

    prefix = start.df.rename(columns={VALUE: W})
    bound = list(start.vars)
    rest = [x for x in inputs if x is not start]
    covered = [x for x in rest if set(x.vars) <= set(bound)]
    rest = [x for x in rest if x not in covered]
    if covered:  # relations over the delta's variables only: one lookup each
        got = yield [Request(x, x.vars, prefix[list(x.vars)].drop_duplicates()) for x in covered]
        for x, rows in zip(covered, got, strict=True):
            prefix = prefix.merge(rows.rename(columns={VALUE: "__v"}), on=list(x.vars))
            prefix[W] = _times(prefix, [W, "__v"], o)
            prefix = prefix[[*bound, W]]
    frames = [Frame(x.vars, None, x.rows) for x in rest]  # type: ignore[arg-type]
    order = variable_order(frames, step_distinct(step), bound)
    for x in order:
        if prefix.empty:
            prefix = pd.DataFrame({v: pd.Series(dtype=object) for v in [*bound, x, W]})
            bound.append(x)
            continue
        rels = [f for f in rest if x in f.vars]
        keys = [[v for v in f.vars if v in bound] for f in rels]
        keyed = [j for j, k in enumerate(keys) if k]
        if not keyed:
            raise NeedsSpark(f"variable {x!r} is not reached from the delta")
        complete = [set(f.vars) <= {*bound, x} for f in rels]
        requests = [
            Request(rels[j], tuple(keys[j]), prefix[keys[j]].drop_duplicates())  # type: ignore[arg-type]
            for j in keyed
            if isinstance(rels[j], Remote)
        ]
        answers = iter((yield requests) if requests else [])
        data: dict[int, pd.DataFrame] = {}
        for j in keyed:
            data[j] = next(answers) if isinstance(rels[j], Remote) else rels[j].df  # type: ignore[union-attr]
        proj = {
            j: data[j][[*keys[j], x]] if complete[j] else data[j][[*keys[j], x]].drop_duplicates()
            for j in keyed
        }
        # count: what each relation offers per prefix (inner merges drop prefixes offered nothing)
        counted = prefix
        for j in keyed:
            c = proj[j].groupby(keys[j], sort=False).size().rename(f"__c{j}").reset_index()
            counted = counted.merge(c, on=keys[j], how="inner")
        cnt = counted[[f"__c{j}" for j in keyed]].to_numpy()
        chosen = np.asarray(keyed)[np.argmin(cnt, axis=1)] if len(counted) else np.array([])
        # propose from the relation offering fewest, intersect with the others
        parts = []
        for j in keyed:
            part = counted.loc[chosen == j, [*bound, W]]
            if part.empty:
                continue
            weights = [W]
            if complete[j]:
                part = part.merge(data[j].rename(columns={VALUE: f"__v{j}"}), on=keys[j])
                weights.append(f"__v{j}")
            else:
                part = part.merge(proj[j], on=keys[j])
            for i in keyed:
                if i == j:
                    continue
                if complete[i]:
                    src = data[i].rename(columns={VALUE: f"__v{i}"})
                    part = part.merge(src, on=[*keys[i], x])
                    weights.append(f"__v{i}")
                else:
                    part = part.merge(proj[i], on=[*keys[i], x])
            part[W] = _times(part, weights, o)
            parts.append(part[[*bound, x, W]])
            _guard(part, "a Generic Join level")
        prefix = pd.concat(parts, ignore_index=True) if parts else counted[[*bound, W]].iloc[:0]
        if x not in prefix.columns:
            prefix.insert(len(bound), x, pd.Series(dtype=object))
        # relations over x alone: their annotation, looked up by the proposed values
        alone = [f for j, f in enumerate(rels) if not keys[j] and complete[j]]
        if alone and not prefix.empty:
            requests = [
                Request(f, (x,), prefix[[x]].drop_duplicates())
                for f in alone
                if isinstance(f, Remote)
            ]
            answers = iter((yield requests) if requests else [])
            for f in alone:
                rows = next(answers) if isinstance(f, Remote) else f.df  # type: ignore[union-attr]
                prefix = prefix.merge(rows.rename(columns={VALUE: "__v"}), on=[x])
                prefix[W] = _times(prefix, [W, "__v"], o)
                prefix = prefix[[*bound, x, W]]
        bound.append(x)
    return Local(tuple(bound), prefix.rename(columns={W: VALUE}).reset_index(drop=True))
