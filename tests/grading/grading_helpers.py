"""Helpers shared by the grading tests: resolved cases, trial views and the fixture judges.

Imported as a module (not a conftest), so helper names cannot clash with other test packages.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from mst.config.models import Assertion, JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.grading import TrialView, resolve_judge
from mst.session.events import make_event

FIXTURES = Path(__file__).parent / "fixtures"
_ASSERTION = TypeAdapter(Assertion)


def assertion(**data: Any) -> Any:
    return _ASSERTION.validate_python(data)


def calls(name: str) -> int:
    """How many times a counting fixture judge ran (in this process)."""
    module = importlib.import_module("mst_fixture_judges")  # on sys.path once a fixture judge resolved
    return int(module.CALLS.get(name, 0))


def fixture_judge(name: str, **kw: Any) -> ResolvedJudge:
    return resolve_judge(
        JudgeConfig(id=kw.pop("id", name), code=f"mst_fixture_judges:{name}", **kw), FIXTURES
    )


def pairwise_judge(name: str, **kw: Any) -> ResolvedJudge:
    return resolve_judge(PairwiseConfig(id="pairwise", code=f"mst_fixture_judges:{name}", **kw), FIXTURES)


def task_decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The packed case tasks decoded from now on (config/resolved.py), each appended as read."""
    from mst.config import resolved

    decodes: list[bytes] = []

    class Counting:
        @staticmethod
        def loads(raw: bytes) -> Any:
            decodes.append(raw)
            return orjson.loads(raw)

    monkeypatch.setattr(resolved, "orjson", Counting)
    return decodes


def make_case(
    *,
    assertions: Sequence[dict[str, Any]] = (),
    judges: Sequence[ResolvedJudge] = (),
    expected: Any = None,
    trials: int = 1,
    case_id: str = "c1",
) -> ResolvedCase:
    return ResolvedCase(
        id=case_id,
        prompt="What is 6*7?",
        expected=expected,
        metadata={"topic": "math"},
        trials=trials,
        assertions=tuple(assertion(**a) for a in assertions),
        judges=tuple(judges),
    )


def tool_events(*calls: tuple[str, dict[str, Any], bool], phase: str = "agent") -> list[dict[str, Any]]:
    """A transcript with one assistant message and the given (tool, input, success) calls."""
    events = [
        make_event("assistant.message", {"content": "Let me look that up."}, component="t", phase=phase)
    ]
    for i, (name, args, ok) in enumerate(calls):
        events.append(
            make_event(
                "tool.execution_start",
                {"toolCallId": f"t{i}", "toolName": name, "input": args, "mcpServerName": "calc"},
                component="t",
                phase=phase,
            )
        )
        done: dict[str, Any] = {"toolCallId": f"t{i}", "toolName": name, "success": ok, "durationMs": 5}
        done["output" if ok else "error"] = "ok" if ok else "boom"
        events.append(make_event("tool.execution_complete", done, component="t", phase=phase))
    events.append(
        make_event("assistant.message", {"content": "The answer is 42."}, component="t", phase=phase)
    )
    return events


def view(
    answer: str | None = "42",
    *,
    case: ResolvedCase | None = None,
    variant: str = "v1",
    trial: int = 0,
    transcript: Path | Sequence[dict[str, Any]] | None = (),
    ending: dict[str, Any] | None = None,
) -> TrialView:
    case = case or make_case()
    return TrialView.of(
        case,
        variant=variant,
        trial=trial,
        answer=answer,
        ending=ending or {"kind": "trial", "outcome": "completed"},
        transcript=list(transcript) if isinstance(transcript, tuple) else transcript,
    )
