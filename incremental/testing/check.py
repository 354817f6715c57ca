"""One call that checks a view: replay ticks, compare every tick with batch and the oracle.

:func:`assert_incremental` replays a :class:`~incremental.testing.model.Ticks` into a
fresh view and, after every tick, compares what ``step()`` returned, ``result()`` and
``relation()`` of every input with

* a batch solve (``query.solve``) of the relations the model holds, and
* the brute-force oracle (:func:`faq.reference_solve`, or
  :func:`faq.reference_fixpoint` for a program) while the inputs are small.

A mismatch raises an ``AssertionError`` that names the tick, what differs, the key, the
expected and the actual value.  Along the way it checks that an illegal tick is
refused with a ``ValueError`` and leaves the view as it was, that a batch id sent again
is skipped, and (with ``state_dir``) that a view reopened from its folder resumes
equal.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faq import Factor, Program, Query, Rule, reference_fixpoint, reference_solve
from incremental.testing.model import (
    Illegal,
    Model,
    Ticks,
    additive,
    ring_of,
    same_value,
    set_modes,
)
from incremental.testing.strategies import inputs_of
from incremental.view import IncrementalView
from semirings import Semiring

__all__ = ["Replay", "assert_incremental", "check_witnesses"]

Key = tuple[Any, ...]
_MISSING = object()


@dataclass
class Replay:
    """What :func:`assert_incremental` did: per step ``"committed"`` or ``"refused"``,
    and how many extra checks ran."""

    outcomes: list[str] = field(default_factory=list)
    refusals: int = 0  # illegal ticks refused, the drawn one included
    skipped: int = 0  # replayed batch ids skipped
    reopened: int = 0  # reopens from the state_dir
    oracle: int = 0  # states compared with the brute-force oracle


@dataclass(frozen=True)
class _Expected:
    """What a view must hold for one state of the model."""

    result: dict[Key, Any] | None  # None: the batch solve refused (``refused`` says why)
    relations: dict[str, dict[Key, Any]]  # every relation the view can be asked about
    source: str  # where ``result`` comes from
    refused: str | None = None


def _sort_key(k: Any) -> tuple[str, str]:
    return (type(k).__name__, repr(k))


def _compare(
    label: str,
    expected: Mapping[Key, Any],
    got: Mapping[Key, Any],
    source: str,
    *,
    zero: Any = _MISSING,
    optional: frozenset[Key] = frozenset(),
) -> None:
    """Raise AssertionError at the first key where ``got`` differs from ``expected``.

    A float key whose value is within rounding of ``zero`` counts as absent, and a key of
    ``optional`` may be absent from ``got`` (it changed by rounding only).
    """

    def absent(v: Any) -> bool:
        return v is _MISSING or (
            zero is not _MISSING and isinstance(v, float) and same_value(v, zero)
        )

    bad = []
    for k in sorted(set(expected) | set(got), key=_sort_key):
        e, g = expected.get(k, _MISSING), got.get(k, _MISSING)
        if absent(e) and absent(g):
            continue
        if k in optional and g is _MISSING:
            continue
        if absent(e) or absent(g) or not same_value(e, g):
            bad.append((k, e, g))
    if bad:
        k, e, g = bad[0]
        shown = {id(_MISSING): "absent"}
        raise AssertionError(
            f"{label} differs at key {k!r}: expected {shown.get(id(e), repr(e))}, "
            f"got {shown.get(id(g), repr(g))} (expected from {source}; "
            f"{len(bad)} key(s) differ)"
        )


class _Oracle:
    """Batch solves and the brute-force oracle over the model's relations."""

    def __init__(
        self, query: Query | Program, oracle_rows: int, max_rounds: int | None = None
    ) -> None:
        self.query = query
        self.S: Semiring = query.semiring
        self.limit = oracle_rows
        self.program = isinstance(query, Program)
        self.rules: tuple[Rule, ...] = query.rules if self.program else (query.rule,)
        # a program's batch solve gets the view's max_rounds: both refuse the same ticks
        self.solve_options = {"max_rounds": max_rounds} if max_rounds is not None else {}

    def small(self, ann: Mapping[str, Mapping[Key, Any]]) -> bool:
        """Whether enumerating every rule's assignments stays within ``oracle_rows``."""
        biggest = max([len(r) for r in ann.values()] + [1])
        for r in self.rules:
            work = 1
            for a in r.atoms:
                work *= max(len(ann[a.relation]) if a.relation in ann else biggest, 1)
            if work > self.limit:
                return False
        return True

    def rounds(self, ann: Mapping[str, Mapping[Key, Any]]) -> int:
        """Rounds enough for a naive fixpoint that converges: a round past the number of
        keys the defined relations can have over the inputs' values (a least fixpoint
        over a finite domain that still changes after that many does not converge)."""
        domain = {x for rel in ann.values() for key in rel for x in key}
        arity = {r.name: len(r.head) for r in self.rules}
        return 2 + sum(max(len(domain), 1) ** a for a in arity.values())

    def expect(self, model: Model, label: str, replay: Replay) -> _Expected:
        ann = model.annotations()
        try:
            batch = self.query.solve(**self.solve_options, **model.factors()).to_dict()
        except (ValueError, OverflowError) as e:  # no fixpoint, or counts past 64 bits
            return _Expected(None, ann, "a batch solve", refused=f"{type(e).__name__}: {e}")
        if not self.small(ann):
            return _Expected(batch, ann, "a batch solve")
        replay.oracle += 1
        if self.program:
            name = "reference_fixpoint"
            try:
                fix = reference_fixpoint(self.query.text, self.S, ann, self.rounds(ann))
            except ValueError as e:
                raise AssertionError(
                    f"{label}: the batch solve converged, but {name} does not: {e}"
                ) from e
            want = fix[self.query.answer]
            rels = {**ann, **fix}
        else:
            want, name = reference_solve(self.query.rule, self.S, ann), "reference_solve"
            rels = ann
        _compare(f"{label}: the batch solve (query.solve)", want, batch, name, zero=self.S.zero)
        return _Expected(want, rels, name)


def _change(S: Semiring, before: Mapping[Key, Any], after: Mapping[Key, Any]) -> tuple:
    """What ``step()`` must return between two results, and the keys it may leave out."""
    keys = sorted(set(before) | set(after), key=_sort_key)
    optional = set()
    out = {}
    if additive(S):
        R = ring_of(S)
        for k in keys:
            b, a = before.get(k, R.zero), after.get(k, R.zero)
            d = R.add(a, R.neg(b))  # type: ignore[misc]
            if same_value(a, b):
                if not R.is_zero(d):
                    optional.add(k)
                continue
            out[k] = d
        return out, frozenset(optional), R.zero
    for k in keys:
        b, a = before.get(k, S.zero), after.get(k, S.zero)
        if same_value(a, b):
            # within rounding: the view may say it changed, at its new value (its own
            # floats before the tick may differ from the oracle's in the last bits)
            if a != b or isinstance(a, float):
                optional.add(k)
                out[k] = a
            continue
        out[k] = a
    return out, frozenset(optional), _MISSING


def check_witnesses(
    query: Query | Program,
    result: Factor,
    relations: Mapping[str, Mapping[Key, Any]],
    label: str = "result()",
) -> None:
    """Check that every key of ``result`` has a witness that attains its value.

    For a rule: the head key with the witness's bound variables is an assignment whose
    ⊗ of atom annotations (read from ``relations``) equals the key's annotation.  For a
    program: some rule defining the answer attains it with the witness's values (a rule
    without bound variables needs none; ``relations`` must then hold the defined
    relations too, as :func:`faq.reference_fixpoint` gives them).

    Raises
    ------
    AssertionError
        Naming the first key without a witness, or whose witness does not attain it.
    """
    S = query.semiring
    values = result.to_dict()
    found = result.witnesses()
    if isinstance(query, Program):
        rules = [r for r in query.rules if r.name == query.answer]
        names = query.vars[query.answer]
    else:
        rules, names = [query.rule], ()
    for key in sorted(values, key=_sort_key):
        w = found.get(key)
        if w is None:
            raise AssertionError(f"{label}: key {key!r} has no witness")
        products = [p for r in rules if (p := _attained(r, key, w, relations, S, names))]
        if not any(same_value(p[0], values[key]) for p in products):
            raise AssertionError(
                f"{label}: the witness {w!r} of key {key!r} does not attain its value: "
                f"expected {values[key]!r}, the witness gives "
                f"{[p[0] for p in products] or 'no assignment'}"
            )


def _attained(
    r: Rule,
    key: Key,
    w: Mapping[str, Any],
    rels: Mapping[str, Mapping[Key, Any]],
    S: Semiring,
    names: tuple[str, ...],
) -> tuple[Any] | None:
    """The ⊗ of ``r``'s atoms at the head ``key`` and the witness ``w``, or None when ``w``
    does not bind every bound variable of ``r``."""
    env = dict(zip(r.head, key, strict=True))
    for b in r.bound:
        shown = b
        while shown in names:  # a program's witness renames a clash with a key name
            shown += "_"
        if w.get(shown) is None:
            return None
        env[b] = w[shown]
    acc = S.one
    for atom in r.atoms:
        cols: dict[int, Any] = dict(atom.consts)
        cols.update((p, env[v]) for v, p in zip(atom.vars, atom.positions, strict=True))
        at = tuple(cols[p] for p in range(atom.arity))
        acc = S.mul(acc, rels.get(atom.relation, {}).get(at, S.zero))
    return (acc,)


class _Run:
    """One replay: the view, the model, the oracle and the last state they agreed on."""

    def __init__(self, query: Query | Program, make: Callable[..., Any], opts: dict) -> None:
        self.query, self.make, self.opts = query, make, opts
        self.S = query.semiring
        self.model = Model(self.S, inputs_of(query), opts.get("sets"))
        self.defined = tuple(query.defined) if isinstance(query, Program) else ()
        self.report = Replay()
        self.view: Any = None

    def snapshot(self) -> dict[str, Any]:
        v = self.view
        rels = {n: v.relation(n).to_dict() for n in (*self.model.arities, *self.defined)}
        return {"tick": v.tick, "batch_id": v.batch_id, "result": v.result().to_dict(), **rels}

    def unchanged(self, label: str, before: Mapping[str, Any]) -> None:
        now = self.snapshot()
        for part, was in before.items():
            if part in ("tick", "batch_id"):
                if now[part] != was:
                    raise AssertionError(f"{label}: view.{part} is {now[part]!r}, was {was!r}")
                continue
            what = "result()" if part == "result" else f"relation({part!r})"
            _compare(f"{label}: {what}", was, now[part], "the view before")

    def check(self, label: str, want: _Expected, witness: bool) -> None:
        """``result()`` and every ``relation()`` against the expected state."""
        v, S = self.view, self.S
        assert want.result is not None
        _compare(f"{label}: result()", want.result, v.result().to_dict(), want.source, zero=S.zero)
        stored = ring_of(S).zero if additive(S) else S.zero
        for n in (*self.model.arities, *self.defined):
            if n in want.relations:
                src = "the model of the ticks" if n in self.model.arities else want.source
                got = v.relation(n).to_dict()
                _compare(f"{label}: relation({n!r})", want.relations[n], got, src, zero=stored)
        if witness and (not self.defined or set(self.defined) <= set(want.relations)):
            check_witnesses(self.query, v.result(), want.relations, f"{label}: result()")

    def refuse(self, label: str, frames: Mapping[str, Any], batch_id: int | None, why: str) -> None:
        """An illegal tick (``why`` says what makes it so): a ValueError, nothing changed."""
        before = self.snapshot()
        try:
            self.view.step(batch_id=batch_id, **frames)
        except ValueError:
            self.unchanged(f"{label} (refused)", before)
            self.report.refusals += 1
            return
        raise AssertionError(f"{label}: the view accepted an illegal tick ({why})")


def assert_incremental(
    query: Query | Program,
    ticks: Ticks | Mapping[str, Any],
    steps: list[Mapping[str, Any]] | None = None,
    *,
    state: str = "auto",
    witness: bool = False,
    state_dir: str | Path | None = None,
    make_view: Callable[..., Any] | None = None,
    oracle_rows: int = 200_000,
    **options: Any,
) -> Replay:
    """Replay ticks into a fresh view and check it against batch and the oracle.

    After loading and after every tick: ``step()``'s change (ΔQ for rings and counting,
    else the new annotation of every changed key, zero for a key gone), ``result()`` and
    ``relation(name)`` of every input (and of a program's defined relations) equal what
    a batch solve of the model's relations gives and, while the inputs are small, what
    the brute-force oracle gives (the batch solve is checked against it too).  An
    illegal tick (in ``steps``, or the one ``ticks.refused`` names) must raise
    ``ValueError`` and change nothing (tick, batch id, result, relations); a tick the
    batch solve refuses (a program that does not converge, counts past 64 bits: a
    ``ValueError`` or ``OverflowError``) must be refused too.  A replayed batch id must
    be skipped.  With ``state_dir`` the view is durable, and is closed and reopened
    before the tick ``ticks.reopen`` names: it must resume equal.

    Parameters
    ----------
    query : faq.Query or faq.Program
        What the view maintains.
    ticks : Ticks or dict
        What :func:`incremental.testing.ticks` draws; or the initial frames, with the
        steps as the next argument.
    steps : list of dict, optional
        The steps, when ``ticks`` is the initial frames.
    state : {"auto", "driver", "spark"}
        The view's state (``"spark"`` needs a Spark session).
    witness : bool
        Make the view with ``witness=True`` and check, after every tick, that each key
        of ``result()`` has a witness attaining it (:func:`check_witnesses`).
    state_dir : str or path, optional
        A folder; each call makes a fresh view in a new folder under it (removed after).
    make_view : callable, optional
        Makes the view, called as ``IncrementalView`` is (the default):
        ``make_view(query, state=..., **options, **initial)``, and
        ``make_view(query, state_dir=..., ...)`` to reopen.  For wrappers of views.
    oracle_rows : int
        The brute-force oracle runs while the product of a rule's relation sizes is at
        most this.
    **options
        More options of the view (``join=``, ``order=``, ``max_rounds=``...).  Two of
        them change what is expected: ``max_rounds=`` (of a program's view) is given to
        the batch solve too, so that the view must refuse exactly the ticks the batch
        refuses within that many rounds; ``sets=`` makes the model read those relations
        as sets (``"ignore"`` drops the rows a set cannot take, ``"refuse"`` makes such
        a tick illegal), as :func:`incremental.testing.ticks` draws them with the same
        ``sets=``.

    Returns
    -------
    Replay
        Per step ``"committed"`` or ``"refused"``, and counts of the other checks.

    Raises
    ------
    AssertionError
        The first difference: names the tick, what differs (the change, ``result()``,
        ``relation(name)``, the view after a refused tick or a reopen), the key, the
        expected and the actual value.
    """
    sets = set_modes(options.get("sets"), inputs_of(query))
    if not isinstance(ticks, Ticks):
        ticks = Ticks(dict(ticks), list(steps or []), sets=sets)
    elif steps is not None:
        raise TypeError("assert_incremental: give steps only with initial frames, not Ticks")
    if dict(ticks.sets) != sets:
        raise ValueError(
            f"assert_incremental: the ticks were drawn for sets={dict(ticks.sets) or None!r}, "
            f"the view is made with sets={sets or None!r}; pass ticks() and "
            "assert_incremental the same sets="
        )
    opts: dict[str, Any] = {"state": state, **options}
    if witness:
        opts["witness"] = True
    run = _Run(query, make_view or IncrementalView, opts)
    rounds = options.get("max_rounds") if isinstance(query, Program) else None
    oracle = _Oracle(query, oracle_rows, rounds)
    folder = Path(tempfile.mkdtemp(dir=state_dir, prefix="view-")) if state_dir else None
    try:
        _replay(run, oracle, ticks, folder, witness)
    finally:
        if run.view is not None and hasattr(run.view, "close"):
            with contextlib.suppress(Exception):
                run.view.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return run.report


def _open(run: _Run, folder: Path | None, initial: Mapping[str, Any]) -> Any:
    extra = {"state_dir": str(folder)} if folder is not None else {}
    try:
        return run.make(run.query, **run.opts, **extra, **initial)
    except (TypeError, ValueError) as e:
        # a view without the option takes witness= as an unknown keyword or relation
        if "witness" in run.opts and "witness" in str(e):
            raise TypeError(
                "assert_incremental(witness=True): this view takes no witness= option "
                f"(it does not maintain witnesses): {e}"
            ) from e
        raise


def _replay(run: _Run, oracle: _Oracle, t: Ticks, folder: Path | None, witness: bool) -> None:
    model, S = run.model, run.S
    try:
        rows = model.read(t.initial)
    except Illegal as e:
        raise ValueError(f"assert_incremental: the initial contents are illegal: {e}") from e
    why = model.illegal(rows)
    if why is not None:
        raise ValueError(f"assert_incremental: the initial contents are illegal: {why}")
    model.apply(rows)
    label = "tick 0 (initial contents)"
    want = oracle.expect(model, label, run.report)
    if want.result is None:  # a program that does not converge: no view of it either
        try:
            run.view = _open(run, folder, t.initial)
        except (ValueError, OverflowError):
            run.report.refusals += 1
            return
        raise AssertionError(
            f"{label}: the view was made, but a batch solve of the same relations refuses "
            f"them: {want.refused}"
        )
    run.view = _open(run, folder, t.initial)
    run.check(label, want, witness)
    committed: int | None = None  # the last batch id committed
    for i, frames in enumerate(t.steps):
        tick = run.view.tick + 1
        bid = t.batch_id(i)
        if t.reopen == i and folder is not None:
            _reopen(run, folder, f"reopened before tick {tick}")
        if t.refused is not None and t.refused[0] == i:
            run.refuse(f"tick {tick}", t.refused[1], bid, "drawn as illegal")
        label = f"tick {tick}"
        try:
            rows = model.read(frames)
            why = model.illegal(rows)
        except Illegal as e:
            why = str(e)
        if why is not None:
            run.refuse(label, frames, bid, why)
            run.report.outcomes.append("refused")
            continue
        saved = {n: c.copy() for n, c in model.rows.items()}
        model.apply(rows)
        after = oracle.expect(model, label, run.report)
        before = run.snapshot() if after.result is None else {}
        try:
            out = run.view.step(batch_id=bid, **frames)
        except (ValueError, OverflowError) as e:
            if after.result is None:  # the batch solve refuses too: the view must not change
                run.unchanged(f"{label} (refused like the batch solve)", before)
                model.rows = saved
                run.report.outcomes.append("refused")
                continue
            raise AssertionError(
                f"{label}: the view refused a legal tick ({type(e).__name__}: {e}); a batch "
                "solve of the same relations does not"
            ) from e
        if after.result is None:
            raise AssertionError(
                f"{label}: the view committed the tick, but a batch solve of the same "
                f"relations refuses it: {after.refused}"
            )
        if run.view.tick != tick:
            raise AssertionError(f"{label}: view.tick is {run.view.tick}, expected {tick}")
        committed = bid if bid is not None else committed
        if run.view.batch_id != committed:
            raise AssertionError(
                f"{label}: view.batch_id is {run.view.batch_id!r}, expected {committed!r}"
            )
        if tuple(out.vars) != tuple(run.query.head):
            raise AssertionError(f"{label}: step() returned a factor over {out.vars}")
        change, optional, zero = _change(S, want.result, after.result)
        _compare(
            f"{label}: step()'s change",
            change,
            out.to_dict(),
            f"{after.source}, before and after the tick",
            zero=zero,
            optional=optional,
        )
        run.check(label, after, witness)
        run.report.outcomes.append("committed")
        want = after
        if t.replay == i and committed is not None:
            _skip(run, frames, committed, f"{label}: batch {committed} sent again")
    if t.reopen == len(t.steps) and folder is not None:
        _reopen(run, folder, "reopened after the last tick")


def _skip(run: _Run, frames: Mapping[str, Any], batch_id: int, label: str) -> None:
    before = run.snapshot()
    out = run.view.step(batch_id=batch_id, **frames)
    if out.to_dict():
        raise AssertionError(f"{label}: step() returned {out.to_dict()!r}, expected no change")
    last = getattr(run.view, "last_step", None)
    if last is not None and not last.skipped:
        raise AssertionError(f"{label}: last_step.skipped is False")
    run.unchanged(f"{label} (skipped)", before)
    run.report.skipped += 1


def _reopen(run: _Run, folder: Path, label: str) -> None:
    before = run.snapshot()
    run.view.close()
    run.view = run.make(run.query, state_dir=str(folder), **run.opts)
    run.unchanged(label, before)
    run.report.reopened += 1
