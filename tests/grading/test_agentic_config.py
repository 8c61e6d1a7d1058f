"""Agentic judge configuration, resolution and the stream's way through a shard's records."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.realtools import tool as real_tool

from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.grading import agentic_judge
from mst.grading.grade import grade_trial
from mst.grading.judges import CaseView, JudgeLoadError, TrialView, Verdict, resolve_judge
from mst.grading.recorded import RecordedSource, RecordingSource
from mst.grading.sources import JudgeOutcome, LiveSource

SETTINGS = {"runtime": "claude-code", "model": "anthropic:m", "rubric": "Right?"}


def test_exactly_one_kind_and_no_unknown_fields() -> None:
    with pytest.raises(ValidationError, match=r"exactly one of 'code'.*'agentic'"):
        JudgeConfig(id="j", code="m:f", agentic=SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="exactly one"):
        PairwiseConfig()
    with pytest.raises(ValidationError, match="runtime"):
        JudgeConfig(id="j", agentic={**SETTINGS, "runtime": "aider"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="maxTurn"):
        JudgeConfig(id="j", agentic={**SETTINGS, "maxTurn": 3})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="rubric"):
        JudgeConfig(id="j", agentic={"runtime": "codex"})  # type: ignore[arg-type]
    cfg = JudgeConfig(id="j", agentic={"runtime": "codex", "rubric": "r"})  # type: ignore[arg-type]
    assert cfg.agentic is not None and cfg.agentic.argv_prefix() == ["codex"] and cfg.agentic.maxTurns == 20


def test_a_missing_cli_fails_resolution_naming_the_judge_and_the_fix() -> None:
    cfg = JudgeConfig(id="review", agentic={**SETTINGS, "command": ["no-such-judge-cli"]})  # type: ignore[arg-type]
    with pytest.raises(JudgeLoadError, match=r"judge 'review' \(claude-code\).*--version.*install the claude-code CLI"):
        resolve_judge(cfg, Path("."))


def _resolved(**more: Any) -> ResolvedJudge:
    settings = {**SETTINGS, "command": [str(real_tool("claude"))], **more}
    return resolve_judge(JudgeConfig(id="review", agentic=settings, secrets=["ANTHROPIC_API_KEY"]),  # type: ignore[arg-type]
                         Path("."))


def test_needs_and_identity() -> None:
    judge = _resolved()
    assert judge.source == "agentic" and judge.target == "claude-code" and "Claude Code" in judge.version
    assert agentic_judge.needs(judge) == (("ANTHROPIC_API_KEY",), (str(real_tool("claude")),), ())
    assert _resolved(timeLimitSeconds=5).identity != judge.identity
    assert _resolved(env={"X": "1"}).identity != judge.identity


def test_a_worker_whose_cli_reports_another_version_refuses() -> None:
    judge = dataclasses.replace(_resolved(), version="1.0.0 (Claude Code)", identity="sha256:other")
    outcome = LiveSource().judge(judge, _trial(), CaseView("c1", "p", None, {}, 1))
    assert outcome.verdict is None
    assert re.search(r"judge 'review' \(agentic claude-code\): the claude-code CLI here reports '.*'; "
                     r"the judge was resolved with '1\.0\.0 \(Claude Code\)'", outcome.error or ""), outcome.error


def _trial() -> TrialView:
    return TrialView(variant="v", case_id="c1", trial=0, answer="a", ending={"kind": "trial"}, transcript=None)


class _Streaming:
    """A live source whose one judge answers with an event stream, as an agentic judge does."""

    def judge(self, judge: ResolvedJudge, trial: TrialView, case: CaseView) -> JudgeOutcome:
        return JudgeOutcome(Verdict(True, None, "ok"), None, {"inputTokens": 3}, 1.0, b'{"type":"x.y"}\n')

    def __getattr__(self, name: str) -> Any:
        return getattr(LiveSource(), name)


def test_the_judge_stream_travels_in_the_shard_records() -> None:
    judge = _resolved()
    case = ResolvedCase("c1", "p", None, {}, 1, (), (judge,))
    recording = RecordingSource(_Streaming())  # type: ignore[arg-type]
    live = grade_trial(_trial(), case, recording)
    assert live.streams == (("review", b'{"type":"x.y"}\n'),)
    replay = RecordedSource(lambda case_id: f"missing {case_id}")
    replay.add(recording.take_trial(("v", "c1", 0)))
    replayed = grade_trial(_trial(), case, replay)
    assert replayed.streams == live.streams and replayed.to_json() == live.to_json()
