"""Grading sources that record what grading computed and replay it: how shards grade with local code.

A grade worker grades through a :class:`RecordingSource` (every assertion, judge call,
pairwise call and the deterministic graders computed live, each outcome kept), and ships what it
recorded beside each record. The coordinator then runs the very same :func:`grade_trial` /
:func:`compare_pairwise` with a :class:`RecordedSource` that answers each of those from the
records instead of computing it — so it runs no judge and no grader, custom JavaScript and Bash
included — and the records it writes come from one code path whether grading ran here or on a
worker (docs/grading.md).

Anything with no record (its worker was lost before it sent it back) becomes a grading error
naming why, so the trial is ungraded and a later ``mst grade --resume`` grades it.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mst.config.models import Assertion
from mst.config.resolved import ResolvedJudge
from mst.grading.judges import CaseView, TrialView, Verdict
from mst.grading.sources import AssertionOutcome, GradersOutcome, GradingSource, JudgeOutcome, PairOutcome

if TYPE_CHECKING:
    from mst.graders.config import GradersConfig
    from mst.session.events import Event

TrialCallKey = tuple[str, str, str, int, str]  # (call, variant, case, trial, identity)
PairCallKey = tuple[str, str, int, str, int, str]  # (case, a variant, a trial, b variant, b trial, identity)
_GRADERS = "graders"


def _trial_call(call: str, trial: TrialView, identity: str | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"call": call, "variant": trial.variant, "case": trial.case_id, "trial": trial.trial}
    if identity is not None:
        out["identity"] = identity
    out.update(fields)
    return out


def judge_call_json(trial: TrialView, judge: ResolvedJudge, outcome: JudgeOutcome) -> dict[str, Any]:
    v = outcome.verdict
    return _trial_call(
        "judge", trial, judge.identity,
        verdict=None if v is None else {"passed": v.passed, "score": v.score, "reason": v.reason},
        error=outcome.error, usage=dict(outcome.usage) if outcome.usage else None, durationMs=outcome.duration_ms,
        **_stream_json(outcome.stream),
    )


def _stream_json(stream: bytes | None) -> dict[str, Any]:
    """A judge's event stream travels in its call record, so the regrade writes it wherever it graded."""
    return {} if stream is None else {"stream": stream.decode("utf-8", errors="replace")}


def _stream(call: Mapping[str, Any]) -> bytes | None:
    stream = call.get("stream")
    return stream.encode() if isinstance(stream, str) else None


def pair_call_json(case: CaseView, a: TrialView, b: TrialView, judge: ResolvedJudge,
                   outcome: PairOutcome) -> dict[str, Any]:
    return {
        "call": "pairwise", "case": case.id, "a": [a.variant, a.trial], "b": [b.variant, b.trial],
        "identity": judge.identity, "preference": outcome.preference, "reason": outcome.reason,
        "error": outcome.error, "usage": dict(outcome.usage) if outcome.usage else None,
        "durationMs": outcome.duration_ms, **_stream_json(outcome.stream),
    }


class RecordingSource:
    """Computes through ``live`` and keeps each outcome as JSON, by the record it belongs to.

    Grading may run several trials at once (a pool of judge calls), so the calls are kept per
    trial and per case comparison, and taken with that record (:meth:`take_trial`, :meth:`take_pair`).
    """

    def __init__(self, live: GradingSource) -> None:
        self.live = live
        self._lock = threading.Lock()
        self._trials: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
        self._pairs: dict[tuple[str, frozenset[str]], list[dict[str, Any]]] = defaultdict(list)

    def _keep_trial(self, trial: TrialView, call: dict[str, Any]) -> None:
        with self._lock:
            self._trials[(trial.variant, trial.case_id, trial.trial)].append(call)

    def take_trial(self, key: tuple[str, str, int]) -> list[dict[str, Any]]:
        """The calls of the trial ``key``'s grading, in the order they were made."""
        with self._lock:
            return self._trials.pop(key, [])

    def take_pair(self, case: str, candidate: str, baseline: str) -> list[dict[str, Any]]:
        """The pairwise calls of one case's comparison of ``candidate`` with ``baseline``."""
        with self._lock:
            return self._pairs.pop((case, frozenset((candidate, baseline))), [])

    def assertion(self, name: str, identity: str, assertion: Assertion, trial: TrialView) -> AssertionOutcome:
        outcome = self.live.assertion(name, identity, assertion, trial)
        self._keep_trial(trial, _trial_call("assertion", trial, identity, passed=outcome.passed,
                                            reason=outcome.reason, error=outcome.error))
        return outcome

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        outcome = self.live.judge(judge, trial, case)
        self._keep_trial(trial, judge_call_json(trial, judge, outcome))
        return outcome

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        outcome = self.live.pairwise(judge, case, a, b)
        with self._lock:
            self._pairs[(case.id, frozenset((a.variant, b.variant)))].append(pair_call_json(case, a, b, judge, outcome))
        return outcome

    def graders(self, trial: TrialView, config: GradersConfig, session: Sequence[Event],
                manifest: dict[str, Any]) -> GradersOutcome:
        outcome = self.live.graders(trial, config, session, manifest)
        self._keep_trial(trial, _trial_call(_GRADERS, trial, None, results=None if outcome.results is None
                                            else list(outcome.results), error=outcome.error))
        return outcome


class RecordedSource:
    """Answers from recorded outcomes and computes nothing; ``missing(case_id)`` says why one is absent."""

    def __init__(self, missing: Callable[[str], str]) -> None:
        self.missing = missing
        self._trial: dict[TrialCallKey, deque[Mapping[str, Any]]] = defaultdict(deque)
        self._pair: dict[PairCallKey, deque[Mapping[str, Any]]] = defaultdict(deque)

    def add(self, calls: Sequence[Mapping[str, Any]]) -> None:
        """Add recorded calls (as :class:`RecordingSource` wrote them), in call order."""
        for call in calls:
            kind = call["call"]
            if kind == "pairwise":
                (av, at), (bv, bt) = call["a"], call["b"]
                self._pair[(call["case"], av, int(at), bv, int(bt), call["identity"])].append(call)
            else:
                key = (kind, call["variant"], call["case"], int(call["trial"]), call.get("identity") or "")
                self._trial[key].append(call)

    def _take(self, kind: str, trial: TrialView, identity: str) -> Mapping[str, Any] | None:
        queue = self._trial.get((kind, trial.variant, trial.case_id, trial.trial, identity))
        return queue.popleft() if queue else None

    def assertion(self, name: str, identity: str, assertion: Assertion, trial: TrialView) -> AssertionOutcome:
        call = self._take("assertion", trial, identity)
        if call is None:
            return AssertionOutcome(None, None, self.missing(trial.case_id))
        return AssertionOutcome(call.get("passed"), call.get("reason"), call.get("error"))

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        call = self._take("judge", trial, judge.identity)
        if call is None:
            return JudgeOutcome(None, self.missing(trial.case_id))
        v = call.get("verdict")
        verdict = None if v is None else Verdict(bool(v["passed"]), v.get("score"), v.get("reason"))
        return JudgeOutcome(verdict, call.get("error"), call.get("usage"), call.get("durationMs"), _stream(call))

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        queue = self._pair.get((case.id, a.variant, a.trial, b.variant, b.trial, judge.identity))
        if not queue:
            return PairOutcome(None, None, self.missing(case.id))
        call = queue.popleft()
        return PairOutcome(call.get("preference"), call.get("reason"), call.get("error"), call.get("usage"),
                           call.get("durationMs"), _stream(call))

    def graders(self, trial: TrialView, config: GradersConfig, session: Sequence[Event],
                manifest: dict[str, Any]) -> GradersOutcome:
        call = self._take(_GRADERS, trial, "")
        if call is None:
            return GradersOutcome(None, self.missing(trial.case_id))
        results = call.get("results")
        return GradersOutcome(None if results is None else tuple(results), call.get("error"))
