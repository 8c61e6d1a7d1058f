"""Grading sources that record judge calls and replay them: how shards grade with local code.

A grade worker grades through a :class:`RecordingSource` (live judge calls, each outcome kept),
and ships what it recorded. The coordinator then runs the very same :func:`grade_trial` /
:func:`compare_pairwise` with a :class:`RecordedSource` that answers each judge call from those
records instead of calling the judge, so the records it writes come from one code path whether
grading ran here or on a worker (docs/shards.md, "Grading in shards").

A call with no record (its worker was lost before it sent it back) becomes a grading error
naming why, so the trial is ungraded and a later ``mst grade --resume`` grades it.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from typing import Any

from mst.config.resolved import ResolvedJudge
from mst.grading.grade import GradingSource, JudgeOutcome, PairOutcome
from mst.grading.judges import CaseView, TrialView, Verdict

JudgeCallKey = tuple[str, str, int, str]  # (variant, case, trial, judge identity)
PairCallKey = tuple[str, str, int, str, int, str]  # (case, a variant, a trial, b variant, b trial, identity)


def judge_call_json(trial: TrialView, judge: ResolvedJudge, outcome: JudgeOutcome) -> dict[str, Any]:
    v = outcome.verdict
    return {
        "call": "judge", "variant": trial.variant, "case": trial.case_id, "trial": trial.trial,
        "identity": judge.identity,
        "verdict": None if v is None else {"passed": v.passed, "score": v.score, "reason": v.reason},
        "error": outcome.error, "usage": dict(outcome.usage) if outcome.usage else None,
        "durationMs": outcome.duration_ms,
    }


def pair_call_json(case: CaseView, a: TrialView, b: TrialView, judge: ResolvedJudge,
                   outcome: PairOutcome) -> dict[str, Any]:
    return {
        "call": "pairwise", "case": case.id, "a": [a.variant, a.trial], "b": [b.variant, b.trial],
        "identity": judge.identity, "preference": outcome.preference, "reason": outcome.reason,
        "error": outcome.error, "usage": dict(outcome.usage) if outcome.usage else None,
        "durationMs": outcome.duration_ms,
    }


class RecordingSource:
    """Calls judges through ``live`` and keeps each outcome as JSON until :meth:`drain`."""

    def __init__(self, live: GradingSource) -> None:
        self.live = live
        self._calls: list[dict[str, Any]] = []

    def drain(self) -> list[dict[str, Any]]:
        """The calls since the last drain (grading is sequential: they belong to one record)."""
        calls, self._calls = self._calls, []
        return calls

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        outcome = self.live.judge(judge, trial, case)
        self._calls.append(judge_call_json(trial, judge, outcome))
        return outcome

    async def judge_async(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        outcome = await self.live.judge_async(judge, trial, case)
        self._calls.append(judge_call_json(trial, judge, outcome))
        return outcome

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        outcome = self.live.pairwise(judge, case, a, b)
        self._calls.append(pair_call_json(case, a, b, judge, outcome))
        return outcome

    async def pairwise_async(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView
                             ) -> PairOutcome:
        outcome = await self.live.pairwise_async(judge, case, a, b)
        self._calls.append(pair_call_json(case, a, b, judge, outcome))
        return outcome


class RecordedSource:
    """Answers judge calls from recorded outcomes; ``missing(case_id)`` says why one is absent."""

    def __init__(self, missing: Callable[[str], str]) -> None:
        self.missing = missing
        self._judge: dict[JudgeCallKey, deque[JudgeOutcome]] = defaultdict(deque)
        self._pair: dict[PairCallKey, deque[PairOutcome]] = defaultdict(deque)

    def add(self, calls: list[Mapping[str, Any]]) -> None:
        """Add recorded calls (as :class:`RecordingSource` wrote them), in call order."""
        for call in calls:
            if call["call"] == "judge":
                key = (call["variant"], call["case"], int(call["trial"]), call["identity"])
                self._judge[key].append(_judge_outcome(call))
            else:
                (av, at), (bv, bt) = call["a"], call["b"]
                pkey = (call["case"], av, int(at), bv, int(bt), call["identity"])
                self._pair[pkey].append(_pair_outcome(call))

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        queue = self._judge.get((trial.variant, trial.case_id, trial.trial, judge.identity))
        if not queue:
            return JudgeOutcome(None, self.missing(trial.case_id))
        return queue.popleft()

    async def judge_async(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        return self.judge(judge, trial, case)

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        queue = self._pair.get((case.id, a.variant, a.trial, b.variant, b.trial, judge.identity))
        if not queue:
            return PairOutcome(None, None, self.missing(case.id))
        return queue.popleft()

    async def pairwise_async(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView
                             ) -> PairOutcome:
        return self.pairwise(judge, case, a, b)


def _judge_outcome(call: Mapping[str, Any]) -> JudgeOutcome:
    v = call.get("verdict")
    verdict = None if v is None else Verdict(bool(v["passed"]), v.get("score"), v.get("reason"))
    return JudgeOutcome(verdict, call.get("error"), call.get("usage"), call.get("durationMs"))


def _pair_outcome(call: Mapping[str, Any]) -> PairOutcome:
    return PairOutcome(call.get("preference"), call.get("reason"), call.get("error"), call.get("usage"),
                       call.get("durationMs"))
