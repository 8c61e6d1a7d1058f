"""Helpers for the agentic judge tests: trials on disk, judges pointed at the fake providers.

Imported as a module (not a conftest) so its names cannot clash with other test packages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fake_responses import write_codex_home
from tests.realtools import tool as real_tool

from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.grading import TrialView, resolve_judge
from mst.session.events import make_event
from mst.session.io import dumps_jsonl

CANARY = "sk-canary-agentic-7c41d2e9"


def server_fixture(name: str, serve: Callable[[], AbstractContextManager[Any]]) -> Any:
    """A module-scoped fixture ``name`` serving one fake provider to a test module's tests."""
    @pytest.fixture(scope="module", name=name)
    def fixture() -> Iterator[Any]:
        with serve() as fake:
            yield fake

    return fixture
ANSWER = "42 claw hammers are in stock."


def trial_on_disk(root: Path, variant: str = "v1", case: str = "c1", trial: int = 0, *,
                  answer: str = ANSWER, artifacts: dict[str, bytes] | None = None) -> TrialView:
    """A trial as a run stores it: a transcript file and an artifacts folder."""
    transcript = root / "transcripts" / variant / case / f"{trial}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    events = [
        make_event("user.message", {"content": "How many claw hammers are in stock?"}, component="agent"),
        make_event("tool.execution_start", {"toolCallId": "t1", "toolName": "check_stock", "mcpServerName": "store",
                                            "input": {"sku": "HAM-001"}}, component="agent"),
        make_event("tool.execution_complete", {"toolCallId": "t1", "toolName": "check_stock", "success": True,
                                               "mcpServerName": "store", "output": '{"total": 42}'}, component="agent"),
        make_event("assistant.message", {"content": answer}, component="agent"),
    ]
    transcript.write_bytes(dumps_jsonl(events))
    folder = root / "artifacts" / variant / case / str(trial)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (artifacts if artifacts is not None else {"report.txt": b"stock: 42\n"}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return TrialView(variant=variant, case_id=case, trial=trial, answer=answer, ending={"kind": "trial",
                     "outcome": "completed"}, transcript=transcript, artifacts_dir=folder, expected="42",
                     metadata={"shop": "hardware"}, prompt="How many claw hammers are in stock?")


def case(judges: tuple[ResolvedJudge, ...] = ()) -> ResolvedCase:
    return ResolvedCase(id="c1", prompt="How many claw hammers are in stock?", expected="42",
                        metadata={"shop": "hardware"}, trials=1, assertions=(), judges=judges)


def claude_settings(base_url: str, model: str, **more: Any) -> dict[str, Any]:
    return {"runtime": "claude-code", "model": f"anthropic:{model}", "rubric": "Is the stock count right?",
            "command": [str(real_tool("claude"))], "env": {"ANTHROPIC_BASE_URL": base_url}, "maxTurns": 5,
            "timeLimitSeconds": 120, **more}


def codex_settings(home: Path, model: str, **more: Any) -> dict[str, Any]:
    return {"runtime": "codex", "model": model, "rubric": "Is the stock count right?",
            "command": [str(real_tool("codex"))], "env": {"CODEX_HOME": str(home)}, "maxTurns": 5,
            "timeLimitSeconds": 120, **more}


def codex_home_for(tmp: Path, base_url: str) -> Path:
    """A temporary CODEX_HOME with the fake Responses API as its model provider (key: MST_FAKE_KEY)."""
    return write_codex_home(tmp / "codex-home", {"fake": base_url})


def judge(settings: dict[str, Any], secrets: list[str], judge_id: str = "review") -> ResolvedJudge:
    return resolve_judge(JudgeConfig(id=judge_id, agentic=settings, secrets=secrets), Path("."))


def pairwise(settings: dict[str, Any], secrets: list[str]) -> ResolvedJudge:
    return resolve_judge(PairwiseConfig(agentic=settings, secrets=secrets), Path("."))


def verdict_json(passed: bool, reason: str = "the count matches") -> str:
    return json.dumps({"passed": passed, "reason": reason})
