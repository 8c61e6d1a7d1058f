"""Grading sources: the one seam between grading and where its verdicts come from.

:func:`~mst.grading.grade.grade_trial` and :func:`~mst.grading.grade.compare_pairwise` ask a
:class:`GradingSource` for every verdict — each assertion, each judge, each pairwise call and
the trial's deterministic graders. :class:`LiveSource` computes them in this process; a shard's
recording answers from what a worker computed (:mod:`mst.grading.recorded`), so the records a
regrade writes come from one code path wherever the grading ran (docs/grading.md).

A source never raises for a grader's failure; it returns the failure as an outcome's ``error``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mst.config.models import Assertion
from mst.config.resolved import ResolvedJudge
from mst.graders.results import grader_entries, grader_results  # at import: a per-call import cost ~8 k a trial
from mst.grading.assertions import evaluate
from mst.grading.judge_access import JudgeAccess, current, using
from mst.grading.judges import (
    CaseView,
    Preference,
    TrialView,
    Verdict,
    kind_module,
    prepared_call,
    to_preference,
    to_verdict,
)
from mst.runs.grading_records import GraderValue

if TYPE_CHECKING:
    from mst.graders.config import GradersConfig
    from mst.graders.results import Entry
    from mst.session.events import Event


@dataclass(frozen=True, slots=True)
class AssertionOutcome:
    """One built-in assertion on one trial: (passed, reason), or an error message."""

    passed: bool | None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """One judge call on one trial: a verdict or an error message, with its usage and timing."""

    verdict: Verdict | None
    error: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None
    stream: bytes | None = None  # the judge's own event stream (JSONL), written beside the regrade


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """One pairwise call: the preferred position (A or B, or a tie), or an error message."""

    preference: Preference | None
    reason: str | None = None
    error: str | None = None
    usage: Mapping[str, Any] | None = None
    duration_ms: float | None = None
    stream: bytes | None = None


class GradersOutcome:
    """The deterministic graders of one trial: their schema-v2 results, or an error message.

    The live source gives the results as the trial's record keeps them, ``entries``
    (:func:`mst.graders.results.grader_entries`: no result dict is made per grader); then
    :attr:`results` rebuilds the dicts from them and ``manifest`` when asked (a shard's
    recording asks). Immutable, as the other outcomes."""

    __slots__ = ("_results", "entries", "error", "manifest")

    def __init__(self, results: tuple[Mapping[str, Any], ...] | None, error: str | None = None, *,
                 entries: tuple[Entry, ...] | None = None, manifest: Mapping[str, Any] | None = None) -> None:
        self._results, self.error, self.entries, self.manifest = results, error, entries, manifest

    @property
    def results(self) -> tuple[Mapping[str, Any], ...] | None:
        """The results, made from ``entries`` when the source gave those."""
        if self._results is None and self.entries is not None and self.manifest is not None:
            from mst.graders.results import result_of_entry

            manifest = self.manifest
            self._results = tuple(result_of_entry(manifest, *entry) for entry in self.entries)
        return self._results

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GradersOutcome):
            return NotImplemented
        return (self.results, self.error) == (other.results, other.error)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GradersOutcome(results={self.results!r}, error={self.error!r})"


class GradingSource(Protocol):
    """Where every verdict of a grading comes from: computed here, or replayed from a shard."""

    def assertion(self, name: str, identity: str, assertion: Assertion, trial: TrialView) -> AssertionOutcome: ...

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome: ...

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome: ...

    def graders(self, trial: TrialView, config: GradersConfig, session: Sequence[Event],
                manifest: dict[str, Any]) -> GradersOutcome: ...


def _describe(judge: ResolvedJudge, exc: BaseException) -> str:
    text = str(exc)
    return f"judge {judge.id!r} ({judge.target}) raised {type(exc).__name__}" + (f": {text}" if text else "")


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class LiveSource:
    """Computes every verdict in this process, timing each judge call and keeping its usage.

    ``base_dir`` is where ``module:function`` judges are imported from when this process did
    not resolve them (a shard worker). A judge may be sync or async: an async one runs to
    completion here (in a helper thread when the caller is inside an event loop). ``access`` is
    the grading's provider access, which a code judge reaches with
    :func:`mst.grading.judge_access.current` while it is called.
    """

    def __init__(self, base_dir: Path | None = None, access: JudgeAccess | None = None) -> None:
        self.base_dir = base_dir
        self.access = access if access is not None else JudgeAccess()

    def assertion(self, name: str, identity: str, assertion: Assertion, trial: TrialView) -> AssertionOutcome:
        try:
            passed, reason = evaluate(assertion, trial)
        except Exception as exc:
            return AssertionOutcome(None, None, f"{type(exc).__name__}: {exc}")
        return AssertionOutcome(passed, reason)

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        kind = kind_module(judge.source)
        if kind is not None:
            outcome: JudgeOutcome = kind.judge(judge, trial, case, self.access)
            return outcome
        start = time.perf_counter()
        try:
            fn, wants_options = prepared_call(judge, base_dir=self.base_dir)
            verdict = to_verdict(self._call(fn, (trial, judge.options) if wants_options else (trial,)),
                                 judge.threshold)
        except Exception as exc:
            return JudgeOutcome(None, _describe(judge, exc), None, _ms(start))
        return JudgeOutcome(verdict, None, verdict.usage, _ms(start))

    def pairwise(self, judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView) -> PairOutcome:
        kind = kind_module(judge.source)
        if kind is not None:
            outcome: PairOutcome = kind.pairwise(judge, case, a, b, self.access)
            return outcome
        start = time.perf_counter()
        try:
            fn, wants_options = prepared_call(judge, pairwise=True, base_dir=self.base_dir)
            preference, reason = to_preference(
                self._call(fn, (case, a, b, judge.options) if wants_options else (case, a, b)))
        except Exception as exc:
            return PairOutcome(None, None, _describe(judge, exc), None, _ms(start))
        return PairOutcome(preference, reason, None, None, _ms(start))

    def graders(self, trial: TrialView, config: GradersConfig, session: Sequence[Event],
                manifest: dict[str, Any]) -> GradersOutcome:
        # The session is the trial's own events when nothing is redacted: then the lookups are
        # the trial's too (built once per trial, shared with tool assertions and judges).
        lookups = trial.lookups if trial.has_events(session) else None
        entries = grader_entries(session, config, manifest, expected=trial.expected, lookups=lookups,
                                 kind=GraderValue)  # the record's own values: no copy per grader
        if entries is not None:  # built-ins only: their entries, no result dict per grader
            return GradersOutcome(None, entries=tuple(entries), manifest=manifest)
        return GradersOutcome(tuple(grader_results(session, config, expected=trial.expected, lookups=lookups)))

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if current() is not self.access:  # set already where a grading sets it for its loop
            with using(self.access):
                return self._call(fn, args)
        value = fn(*args)
        if value.__class__ in _PLAIN:  # what most judges return: never awaitable, no ABC check
            return value
        return run_to_completion(value) if inspect.isawaitable(value) else value


_PLAIN = frozenset({bool, int, float, str, tuple, dict, Verdict, type(None)})


_THREADS: list[ThreadPoolExecutor] = []
_THREADS_LOCK = threading.Lock()


def run_to_completion(awaitable: Awaitable[Any]) -> Any:
    """Run an async judge from sync code, also when the caller is inside an event loop (then in a
    helper thread of one shared pool, made on first need)."""
    async def wrap() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrap())
    with _THREADS_LOCK:
        if not _THREADS:
            _THREADS.append(ThreadPoolExecutor(max_workers=4, thread_name_prefix="mst-judge"))
    context = contextvars.copy_context()  # the helper thread sees this grading's judge access too
    return _THREADS[0].submit(context.run, asyncio.run, wrap()).result()


__all__ = [
    "AssertionOutcome",
    "GradersOutcome",
    "GradingSource",
    "JudgeOutcome",
    "LiveSource",
    "PairOutcome",
    "run_to_completion",
]
