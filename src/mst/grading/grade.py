"""Grading a trial and comparing a case's trials pairwise: the same code everywhere.

Local grading, a grade shard and the coordinator's assembly of shard results all run
:func:`grade_trial` and :func:`compare_pairwise` (docs/grading.md, "the same code
everywhere"). The one seam is the :class:`GradingSource`: every judge call goes through it.
:class:`LiveSource` calls the judges; a recorded source (shards) replays what a worker recorded,
so the records written here are produced by one code path either way.

Every assertion and judge yields a verdict or a grading error. A judge that raises (or returns
something that is not a verdict) leaves the trial *ungraded*; grading never turns a trial into
an infrastructure failure (docs/endings.md), and ``mst grade --resume`` grades it again.

Result records are plain JSON-ready dicts (they go to ``results.json`` and a journal):

* trial: ``{variant, case, trial, status: "graded"|"ungraded", passed: bool|None,
  verdicts: [{judge, kind: "assertion"|"code", identity, passed, score, reason,
  (usage, durationMs for code judges)}], errors: [{judge, kind, identity, message}]}``
* comparison: ``{case, candidate, baseline, judge, identity, pairs: [{trial, ab, ba,
  preference, reasons?}], wins, ties, losses, preference, errors: [{trial, message}]}``
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from mst.config.models import Assertion
from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.grading.assertions import assertion_identity, assertion_name, evaluate
from mst.grading.judges import (
    CaseView,
    Preference,
    TrialView,
    Verdict,
    prepared_call,
    to_preference,
    to_verdict,
)

Side = Literal["candidate", "baseline", "tie"]


# ---------------------------------------------------------------------------------------------
# What a grading source returns


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """One judge call on one trial: a verdict or an error message, with its usage and timing."""

    verdict: Verdict | None
    error: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """One pairwise call: the preferred position (A or B, or a tie), or an error message."""

    preference: Preference | None
    reason: str | None = None
    error: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None


class GradingSource(Protocol):
    """Where judge verdicts come from: live judge calls, or records a shard wrote.

    A source never raises for a judge's failure; it returns the failure as an outcome's
    ``error``. Both sync and async forms exist so a collector's event loop can grade
    concurrently while a CLI regrade stays a plain loop.
    """

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome: ...

    async def judge_async(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome: ...

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome: ...

    async def pairwise_async(
        self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView
    ) -> PairOutcome: ...


def _describe(judge: ResolvedJudge, exc: BaseException) -> str:
    text = str(exc)
    return f"judge {judge.id!r} ({judge.target}) raised {type(exc).__name__}" + (f": {text}" if text else "")


_THREADS: ThreadPoolExecutor | None = None


def _run_blocking(awaitable: Awaitable[Any]) -> Any:
    """Run an async judge from sync code, also when the caller is inside an event loop."""
    async def wrap() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrap())
    global _THREADS
    if _THREADS is None:
        _THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mst-judge")
    return _THREADS.submit(asyncio.run, wrap()).result()


class LiveSource:
    """Calls the judges in this process, timing each call and keeping the usage it reports.

    ``base_dir`` is where ``module:function`` judges are imported from when this process did
    not resolve them (a shard worker). In the async path a sync judge runs in a worker thread,
    because user code may block (an HTTP call) and must not stall the collector's event loop.
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir

    # -- trial judges --------------------------------------------------------------------------

    def _args(self, judge: ResolvedJudge, trial: TrialView) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        fn, wants_options = prepared_call(judge, base_dir=self.base_dir)
        return fn, ((trial, judge.options) if wants_options else (trial,))

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        start = time.perf_counter()
        try:
            fn, args = self._args(judge, trial)
            value = fn(*args)
            if inspect.isawaitable(value):
                value = _run_blocking(value)
            verdict = to_verdict(value, judge.threshold)
        except Exception as exc:
            return JudgeOutcome(None, _describe(judge, exc), None, _ms(start))
        return JudgeOutcome(verdict, None, verdict.usage, _ms(start))

    async def judge_async(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        start = time.perf_counter()
        try:
            fn, args = self._args(judge, trial)
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args)
            else:
                value = await asyncio.to_thread(fn, *args)
                if inspect.isawaitable(value):
                    value = await value
            verdict = to_verdict(value, judge.threshold)
        except Exception as exc:
            return JudgeOutcome(None, _describe(judge, exc), None, _ms(start))
        return JudgeOutcome(verdict, None, verdict.usage, _ms(start))

    # -- pairwise judges -----------------------------------------------------------------------

    def _pair_args(
        self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        fn, wants_options = prepared_call(judge, pairwise=True, base_dir=self.base_dir)
        return fn, ((case, a, b, judge.options) if wants_options else (case, a, b))

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        start = time.perf_counter()
        try:
            fn, args = self._pair_args(judge, case, a, b)
            value = fn(*args)
            if inspect.isawaitable(value):
                value = _run_blocking(value)
            preference, reason = to_preference(value)
        except Exception as exc:
            return PairOutcome(None, None, _describe(judge, exc), None, _ms(start))
        return PairOutcome(preference, reason, None, None, _ms(start))

    async def pairwise_async(
        self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView
    ) -> PairOutcome:
        start = time.perf_counter()
        try:
            fn, args = self._pair_args(judge, case, a, b)
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args)
            else:
                value = await asyncio.to_thread(fn, *args)
                if inspect.isawaitable(value):
                    value = await value
            preference, reason = to_preference(value)
        except Exception as exc:
            return PairOutcome(None, None, _describe(judge, exc), None, _ms(start))
        return PairOutcome(preference, reason, None, None, _ms(start))


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


# ---------------------------------------------------------------------------------------------
# Per-case plan: names, identities and views computed once per case, not once per trial


@dataclass(frozen=True, slots=True)
class _Plan:
    case: ResolvedCase  # held so id(case) cannot be reused while the plan is cached
    view: CaseView
    assertions: tuple[tuple[str, str, Assertion], ...]  # (name, identity, assertion)
    judges: tuple[tuple[str, ResolvedJudge], ...]  # (name, judge)


_PLANS: dict[int, _Plan] = {}
_PLAN_LIMIT = 100_000


def _plan(case: ResolvedCase) -> _Plan:
    plan = _PLANS.get(id(case))
    if plan is not None and plan.case is case:
        return plan
    seen: dict[str, int] = {}

    def unique(name: str) -> str:
        # Two unnamed assertions of one type are both "contains"; number the later ones so
        # verdicts (and resume's `keep`) can tell them apart, stably across runs.
        count = seen.get(name, 0) + 1
        seen[name] = count
        return name if count == 1 else f"{name}#{count}"

    assertions = tuple((unique(assertion_name(a)), assertion_identity(a), a) for a in case.assertions)
    judges = tuple((unique(j.id), j) for j in case.judges)
    plan = _Plan(case, CaseView.of(case), assertions, judges)
    if len(_PLANS) >= _PLAN_LIMIT:
        _PLANS.clear()
    _PLANS[id(case)] = plan
    return plan


def case_view(case: ResolvedCase) -> CaseView:
    """The (cached) :class:`CaseView` of a resolved case."""
    return _plan(case).view


def grader_names(case: ResolvedCase) -> list[tuple[str, str]]:
    """(name, identity) of every assertion and judge of ``case``, in grading order.

    Resume compares this set with the stored verdicts to refuse when the judges changed.
    """
    plan = _plan(case)
    return [(n, i) for n, i, _ in plan.assertions] + [(n, j.identity) for n, j in plan.judges]


# ---------------------------------------------------------------------------------------------
# Trial grading


@dataclass(slots=True)
class TrialGrading:
    """The grading of one trial; :meth:`to_json` is the stored record."""

    variant: str
    case: str
    trial: int
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> Literal["graded", "ungraded"]:
        return "ungraded" if self.errors else "graded"

    @property
    def passed(self) -> bool | None:
        """All verdicts passed; ``None`` while ungraded (it is then neither passed nor failed)."""
        if self.errors:
            return None
        return all(v["passed"] for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant, "case": self.case, "trial": self.trial, "status": self.status,
            "passed": self.passed, "verdicts": self.verdicts, "errors": self.errors,
        }


def _check_trial(trial: TrialView, case: ResolvedCase) -> None:
    if not trial.is_trial:
        raise ValueError(
            f"{trial.variant}/{trial.case_id}/{trial.trial} is an infrastructure failure; "
            "only trials are graded"
        )
    if trial.case_id != case.id:
        raise ValueError(f"trial of case {trial.case_id!r} graded against case {case.id!r}")


def _kept(keep: Mapping[str, Mapping[str, Any]] | None, name: str, identity: str) -> dict[str, Any] | None:
    if not keep:
        return None
    earlier = keep.get(name)
    if earlier is None or earlier.get("identity") != identity or not isinstance(earlier.get("passed"), bool):
        return None
    return dict(earlier)


def _grade_assertions(
    plan: _Plan, trial: TrialView, keep: Mapping[str, Mapping[str, Any]] | None, out: TrialGrading
) -> None:
    for name, identity, assertion in plan.assertions:
        kept = _kept(keep, name, identity)
        if kept is not None:
            out.verdicts.append(kept)
            continue
        try:
            passed, reason = evaluate(assertion, trial)
        except Exception as exc:
            out.errors.append({"judge": name, "kind": "assertion", "identity": identity,
                               "message": f"{type(exc).__name__}: {exc}"})
            continue
        out.verdicts.append({"judge": name, "kind": "assertion", "identity": identity,
                             "passed": passed, "score": None, "reason": reason})


def _judge_record(name: str, judge: ResolvedJudge, outcome: JudgeOutcome, out: TrialGrading) -> None:
    if outcome.verdict is None:
        out.errors.append({"judge": name, "kind": "code", "identity": judge.identity,
                           "message": outcome.error or "the judge gave no verdict"})
        return
    v = outcome.verdict
    record: dict[str, Any] = {"judge": name, "kind": "code", "identity": judge.identity,
                              "passed": v.passed, "score": v.score, "reason": v.reason}
    if outcome.usage:
        record["usage"] = dict(outcome.usage)
    if outcome.duration_ms is not None:
        record["durationMs"] = outcome.duration_ms
    out.verdicts.append(record)


def grade_trial(
    trial: TrialView,
    case: ResolvedCase,
    source: GradingSource,
    *,
    keep: Mapping[str, Mapping[str, Any]] | None = None,
) -> TrialGrading:
    """Grade one trial: every assertion, then every case judge (through ``source``).

    ``keep`` maps a judge's name to an earlier verdict record; it is reused when its identity
    equals the judge's current one (``mst grade --resume``), so only judges without a valid
    verdict run. Earlier *errors* are never kept: that judge runs again.
    """
    _check_trial(trial, case)
    plan = _plan(case)
    out = TrialGrading(trial.variant, case.id, trial.trial)
    _grade_assertions(plan, trial, keep, out)
    for name, judge in plan.judges:
        kept = _kept(keep, name, judge.identity)
        if kept is not None:
            out.verdicts.append(kept)
            continue
        _judge_record(name, judge, source.judge(judge, trial, plan.view), out)
    return out


async def grade_trial_async(
    trial: TrialView,
    case: ResolvedCase,
    source: GradingSource,
    *,
    keep: Mapping[str, Mapping[str, Any]] | None = None,
) -> TrialGrading:
    """:func:`grade_trial` for an event loop: the case's judges run concurrently."""
    _check_trial(trial, case)
    plan = _plan(case)
    out = TrialGrading(trial.variant, case.id, trial.trial)
    _grade_assertions(plan, trial, keep, out)
    pending: list[tuple[str, ResolvedJudge]] = []
    kept_by_name: dict[str, dict[str, Any]] = {}
    for name, judge in plan.judges:
        kept = _kept(keep, name, judge.identity)
        if kept is not None:
            kept_by_name[name] = kept
        else:
            pending.append((name, judge))
    outcomes: list[JudgeOutcome] = []
    if pending:
        outcomes = list(await asyncio.gather(*(source.judge_async(j, trial, plan.view) for _, j in pending)))
    by_name = {name: outcome for (name, _), outcome in zip(pending, outcomes, strict=True)}
    for name, judge in plan.judges:  # records in the case's judge order, as the sync path writes them
        if name in kept_by_name:
            out.verdicts.append(kept_by_name[name])
        else:
            _judge_record(name, judge, by_name[name], out)
    return out


# ---------------------------------------------------------------------------------------------
# Pairwise comparison


@dataclass(slots=True)
class CaseComparison:
    """Pairwise preferences of one case, candidate vs baseline; :meth:`to_json` is the record."""

    case: str
    candidate: str
    baseline: str
    judge: str
    identity: str
    pairs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def _count(self, side: Side) -> int:
        return sum(1 for p in self.pairs if p["preference"] == side)

    @property
    def wins(self) -> int:
        return self._count("candidate")

    @property
    def ties(self) -> int:
        return self._count("tie")

    @property
    def losses(self) -> int:
        return self._count("baseline")

    @property
    def preference(self) -> Side | None:
        """The side with more pair wins; a tie when even; ``None`` with no judged pair."""
        if not self.pairs:
            return None
        wins, losses = self.wins, self.losses
        return "candidate" if wins > losses else "baseline" if losses > wins else "tie"

    @property
    def complete(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case, "candidate": self.candidate, "baseline": self.baseline,
            "judge": self.judge, "identity": self.identity, "pairs": self.pairs,
            "wins": self.wins, "ties": self.ties, "losses": self.losses,
            "preference": self.preference, "errors": self.errors,
        }


def _side(position: Preference, a_is_candidate: bool) -> Side:
    if position == "tie":
        return "tie"
    return "candidate" if (position == "A") == a_is_candidate else "baseline"


def combine_orders(ab: Side, ba: Side) -> Side:
    """A preference counts only when both orders agree; a flip (or one tie) is a tie.

    Position bias is the best-known failure of pairwise judges; requiring agreement across
    both orders is the standard guard (as in MT-Bench's consistency rule).
    """
    return ab if ab == ba else "tie"


def _pairs(
    case: ResolvedCase, candidate_trials: Sequence[TrialView], baseline_trials: Sequence[TrialView]
) -> list[tuple[int, TrialView, TrialView]]:
    """Trial i with trial i, only where both sides have a trial (not an infrastructure failure)."""
    baseline = {t.trial: t for t in baseline_trials if t.is_trial and t.case_id == case.id}
    pairs = [(t.trial, t, baseline[t.trial]) for t in candidate_trials
             if t.is_trial and t.case_id == case.id and t.trial in baseline]
    pairs.sort(key=lambda p: p[0])
    return pairs


def _kept_pairs(keep: Mapping[str, Any] | None, identity: str) -> dict[int, dict[str, Any]]:
    if not keep or keep.get("identity") != identity:
        return {}
    return {p["trial"]: dict(p) for p in keep.get("pairs", ()) if isinstance(p, dict) and "trial" in p}


def _pair_record(trial: int, ab: PairOutcome, ba: PairOutcome, out: CaseComparison) -> None:
    failed = [o.error or "the judge gave no preference" for o in (ab, ba) if o.preference is None]
    if failed:
        out.errors.append({"trial": trial, "message": "; ".join(failed)})
        return
    assert ab.preference is not None and ba.preference is not None
    ab_side, ba_side = _side(ab.preference, True), _side(ba.preference, False)
    record: dict[str, Any] = {"trial": trial, "ab": ab_side, "ba": ba_side,
                              "preference": combine_orders(ab_side, ba_side)}
    if ab.reason is not None or ba.reason is not None:
        record["reasons"] = {"ab": ab.reason, "ba": ba.reason}
    usage = [dict(o.usage) for o in (ab, ba) if o.usage]
    if usage:
        record["usage"] = usage
    durations = [o.duration_ms for o in (ab, ba) if o.duration_ms is not None]
    if durations:
        record["durationMs"] = round(sum(durations), 3)
    out.pairs.append(record)


def _comparison(
    case: ResolvedCase, candidate_trials: Sequence[TrialView], baseline_trials: Sequence[TrialView],
    judge: ResolvedJudge, candidate: str | None, baseline: str | None,
) -> CaseComparison:
    if candidate is None:
        candidate = candidate_trials[0].variant if candidate_trials else ""
    if baseline is None:
        baseline = baseline_trials[0].variant if baseline_trials else ""
    return CaseComparison(case.id, candidate, baseline, judge.id, judge.identity)


def compare_pairwise(
    case: ResolvedCase,
    candidate_trials: Sequence[TrialView],
    baseline_trials: Sequence[TrialView],
    judge: ResolvedJudge,
    source: GradingSource,
    *,
    keep: Mapping[str, Any] | None = None,
    candidate: str | None = None,
    baseline: str | None = None,
) -> CaseComparison:
    """Judge each pair in both orders: A=candidate/B=baseline, then swapped.

    ``keep`` is the earlier comparison record of this case; its pairs are reused when its judge
    identity is unchanged, so a resumed grading judges only the pairs without a preference.
    ``candidate``/``baseline`` name the variants when a side has no trials to take them from.
    """
    out = _comparison(case, candidate_trials, baseline_trials, judge, candidate, baseline)
    view = _plan(case).view
    kept = _kept_pairs(keep, judge.identity)
    for index, cand, base in _pairs(case, candidate_trials, baseline_trials):
        if index in kept:
            out.pairs.append(kept[index])
            continue
        ab = source.pairwise(judge, view, cand, base)
        ba = source.pairwise(judge, view, base, cand)
        _pair_record(index, ab, ba, out)
    return out


async def compare_pairwise_async(
    case: ResolvedCase,
    candidate_trials: Sequence[TrialView],
    baseline_trials: Sequence[TrialView],
    judge: ResolvedJudge,
    source: GradingSource,
    *,
    keep: Mapping[str, Any] | None = None,
    candidate: str | None = None,
    baseline: str | None = None,
) -> CaseComparison:
    """:func:`compare_pairwise` for an event loop: all pairs and both orders run concurrently."""
    out = _comparison(case, candidate_trials, baseline_trials, judge, candidate, baseline)
    view = _plan(case).view
    kept = _kept_pairs(keep, judge.identity)
    todo = [(i, c, b) for i, c, b in _pairs(case, candidate_trials, baseline_trials) if i not in kept]
    results = await asyncio.gather(*(
        coro for _, c, b in todo
        for coro in (source.pairwise_async(judge, view, c, b), source.pairwise_async(judge, view, b, c))
    ))
    judged = {i: (results[2 * k], results[2 * k + 1]) for k, (i, _, _) in enumerate(todo)}
    for index, _, _ in _pairs(case, candidate_trials, baseline_trials):
        if index in kept:
            out.pairs.append(kept[index])
        else:
            ab, ba = judged[index]
            _pair_record(index, ab, ba, out)
    return out
