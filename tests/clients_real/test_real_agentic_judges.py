"""Agentic judges with the real ``claude`` and ``codex`` CLIs (pinned, from npm) against the fake providers.

Claude Code is pointed at the fake Anthropic API with ``ANTHROPIC_BASE_URL`` (the judge's ``env``),
Codex at the fake Responses API by a custom model provider in a temporary ``CODEX_HOME``. The key
reaches each CLI by its environment only (the judge's ``secrets``), and must never be in argv.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentic_helpers import (
    ANSWER,
    CANARY,
    case,
    claude_settings,
    codex_home_for,
    codex_settings,
    judge,
    pairwise,
    server_fixture,
    trial_on_disk,
    verdict_json,
)
from fake_provider import FakeProvider, serve, slow, status, text, tool
from fake_responses import FakeResponses, serve_responses
from real_helpers import cmdlines_with
from tests.realtools import tool as real_tool

from mst.config.secrets import in_environment
from mst.grading import agentic_judge
from mst.grading.agentic_judge import runtime_version
from mst.grading.grade import compare_pairwise, grade_trial
from mst.grading.sources import LiveSource
from mst.runs.grading_records import TrialGrading
from mst.session.io import load_transcript

pytestmark = pytest.mark.slow


anthropic = server_fixture("anthropic", serve)
responses = server_fixture("responses", serve_responses)


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Workspaces are made in the system's temporary folder: here, one per test, so a test can
    tell that every workspace it caused was removed."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def workspaces(tmp: Path) -> list[Path]:
    return [p for p in tmp.iterdir() if p.name.startswith("mst-judge-")]


def graded(view: Any, resolved: Any, key: dict[str, str]) -> tuple[TrialGrading, list[str]]:
    """Grade ``view`` with ``resolved`` (its key in the environment), watching every process's argv for it."""
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(cmdlines_with(CANARY))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with in_environment(key):
            grading = grade_trial(view, case((resolved,)), LiveSource())
    finally:
        done.set()
        watcher.join()
    return grading, seen


def stream_events(grading: TrialGrading) -> list[dict[str, Any]]:
    ((_, stream),) = grading.streams
    events, _ = load_transcript(_write(stream))
    return list(events)


def _write(data: bytes) -> Path:
    path = Path(tempfile.mkdtemp(prefix="stream-")) / "s.jsonl"
    path.write_bytes(data)
    return path


def bodies(fake: FakeProvider, model: str) -> list[str]:
    return [json.dumps(r.body) for r in fake.requests if r.body.get("model") == model]


# -- Claude Code ---------------------------------------------------------------------------------


@pytest.mark.parametrize("passed", [True, False])
def test_claude_code_judge_reads_the_workspace_and_answers_a_verdict(
    tmp_path: Path, own_tmp: Path, anthropic: FakeProvider, passed: bool
) -> None:
    model = f"judge-claude-{passed}"
    anthropic.script(model, [tool("Read", {"file_path": "transcript.md"}), tool("Read", {"file_path": "task.json"}),
                             tool("StructuredOutput", {"passed": passed, "reason": f"said {CANARY}"}), text("done")])
    resolved = judge(claude_settings(anthropic.anthropic_url, model), ["ANTHROPIC_API_KEY"])
    grading, in_argv = graded(trial_on_disk(tmp_path), resolved, {"ANTHROPIC_API_KEY": CANARY})
    assert grading.status == "graded" and grading.passed is passed, grading
    (verdict,) = grading.verdicts
    assert verdict.kind == "agentic" and verdict.reason == "said [REDACTED]"
    usage = dict(verdict.calls or {})  # a model judge's calls: the verdict's top-level fields
    assert usage["model"] == f"anthropic:{model}" and usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["latencyMs"] >= 0 and isinstance(usage["costUsd"], float)
    sent = bodies(anthropic, model)
    # The judge read the rendered transcript and the task from its workspace.
    assert ANSWER in sent[1] and "check_stock" in sent[1] and '\\"shop\\": \\"hardware\\"' in sent[2]
    assert "Is the stock count right?" in sent[0]  # the rubric
    assert not in_argv, in_argv  # the key reached the CLI by its environment only
    headers = [r.headers for r in anthropic.requests if r.body.get("model") == model]
    assert all(h.get("x-api-key") == CANARY for h in headers)
    events = stream_events(grading)
    assert {e["provenance"]["phase"] for e in events} == {"judge"}
    assert [e["data"]["toolName"] for e in events if e["type"] == "tool.execution_start"] == [
        "Read", "Read", "StructuredOutput"]
    assert CANARY not in json.dumps(events)
    assert workspaces(own_tmp) == []  # removed afterwards


def test_claude_code_judge_failures_are_grading_errors(tmp_path: Path, own_tmp: Path, anthropic: FakeProvider) -> None:
    key = {"ANTHROPIC_API_KEY": CANARY}
    view = trial_on_disk(tmp_path)
    # A time-out: the model answers after the judge's time limit.
    anthropic.script("judge-slow", [slow(30, text("late"))])
    slow_judge = judge(claude_settings(anthropic.anthropic_url, "judge-slow", timeLimitSeconds=3),
                       ["ANTHROPIC_API_KEY"])
    started = time.monotonic()
    timed_out, _ = graded(view, slow_judge, key)
    assert time.monotonic() - started < 20
    # A crash: the CLI exits at once (an argument it does not know), without a result.
    crash = judge(claude_settings(anthropic.anthropic_url, "judge-crash", extraArgs=["--no-such-option"]),
                  ["ANTHROPIC_API_KEY"])
    crashed, _ = graded(view, crash, key)
    # Garbage: the model ends without the structured verdict, with text that is not one.
    anthropic.script("judge-garbage", [text("I think it passed, probably.")])
    garbage = judge(claude_settings(anthropic.anthropic_url, "judge-garbage", maxTurns=1), ["ANTHROPIC_API_KEY"])
    unparsed, _ = graded(view, garbage, key)
    for grading, words in ((timed_out, "time-limit"), (crashed, "did not finish"), (unparsed, "")):
        assert grading.status == "ungraded" and grading.passed is None and not grading.verdicts, grading
        (error,) = grading.errors
        assert error.kind == "agentic" and words in error.message and CANARY not in error.message, error
    assert workspaces(own_tmp) == []


def test_a_provider_failure_the_cli_gave_up_on_runs_the_judge_again(
    tmp_path: Path, own_tmp: Path, anthropic: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code told not to retry (CLAUDE_CODE_MAX_RETRIES=0) gives up on a 429 at once; the judge
    runs again after each pause of its back-off, then the 429 is the trial's grading error."""
    monkeypatch.setattr(agentic_judge, "BACKOFF_S", (0.05, 0.05))
    anthropic.script("judge-429", [status(429, "Rate limit reached", **{"retry-after": "0"})])
    limited = judge(claude_settings(anthropic.anthropic_url, "judge-429", env={
        "ANTHROPIC_BASE_URL": anthropic.anthropic_url, "CLAUDE_CODE_MAX_RETRIES": "0"}), ["ANTHROPIC_API_KEY"])
    grading, _ = graded(trial_on_disk(tmp_path), limited, {"ANTHROPIC_API_KEY": CANARY})
    assert len(bodies(anthropic, "judge-429")) == 3  # the first run and two more
    (error,) = grading.errors
    assert grading.status == "ungraded" and "provider-api" in error.message, error
    assert workspaces(own_tmp) == []


def test_claude_code_pairwise_sees_neutral_sides_and_a_flip_is_a_tie(
    tmp_path: Path, own_tmp: Path, anthropic: FakeProvider
) -> None:
    """The judge always prefers A: in the swapped order that is the other side, so the pair is a tie
    and both orders are recorded. Neither side's variant name reaches the judge."""
    model = "judge-pair"
    anthropic.script(model, [tool("Read", {"file_path": "A/transcript.md"}),
                             tool("Read", {"file_path": "B/transcript.md"}),
                             tool("StructuredOutput", {"preference": "A", "reason": "A is better"}), text("done")])
    cand = trial_on_disk(tmp_path, "candidate-variant", answer="43 claw hammers.")
    base = trial_on_disk(tmp_path, "baseline-variant")
    resolved = pairwise(claude_settings(anthropic.anthropic_url, model), ["ANTHROPIC_API_KEY"])
    with in_environment({"ANTHROPIC_API_KEY": CANARY}):
        result = compare_pairwise(case(), [cand], [base], resolved, LiveSource())
    assert not result.errors, result.errors
    (pair,) = result.pairs
    assert (pair.ab, pair.ba, pair.preference) == ("candidate", "baseline", "tie")  # the flip, recorded
    assert len(pair.usage) == 2 and all(u["inputTokens"] > 0 for u in pair.usage)
    assert [name for name, _ in result.streams] == ["0.ab", "0.ba"]
    sent = "\n".join(bodies(anthropic, model))
    assert "43 claw hammers." in sent and ANSWER in sent  # both sides were read
    for word in ("candidate", "baseline"):
        assert word not in sent.lower(), word
    assert workspaces(own_tmp) == []


# -- Codex ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("passed", [True, False])
def test_codex_judge_in_a_read_only_workspace(
    tmp_path: Path, own_tmp: Path, responses: FakeResponses, passed: bool
) -> None:
    """The judge lists its workspace (folders r-x, files mst wrote r--), cannot write there, and answers
    its verdict as its final message under ``--output-schema``."""
    home = codex_home_for(tmp_path, responses.base_url)
    model = f"judge-codex-{passed}"
    responses.script(model, [
        tool("exec_command", {"cmd": "stat -c '%a %n' . artifacts transcript.md; cat artifacts/report.txt; "
                              "touch written.txt && echo wrote"}),
        text(verdict_json(passed)),
    ])
    resolved = judge(codex_settings(home, model), ["MST_FAKE_KEY"])
    grading, in_argv = graded(trial_on_disk(tmp_path), resolved, {"MST_FAKE_KEY": CANARY})
    assert grading.status == "graded" and grading.passed is passed, grading
    (verdict,) = grading.verdicts
    assert verdict.reason == "the count matches" and dict(verdict.calls or {})["outputTokens"] > 0
    sent = [r.body for r in responses.responses() if r.body.get("model") == model]
    assert sent[0]["text"]["format"]["type"] == "json_schema"  # Codex's structured output
    assert sent[0]["text"]["format"]["schema"]["required"] == ["passed", "reason"]
    # What the command printed, as Codex sent it back to the model: the workspace as the CLI saw it.
    # (Read from the provider's side: the judge's recorded stream lacked the command's completion
    # event once in CI, a race not yet understood.)
    outputs = [str(item.get("output")) for item in sent[-1].get("input", [])
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert len(outputs) == 1, sent[-1].get("input")
    listing = outputs[0]
    assert "555 ." in listing and "555 artifacts" in listing and "444 transcript.md" in listing, listing
    assert "stock: 42" in listing and "wrote" not in listing.split("stock: 42")[1], listing
    assert not in_argv, in_argv
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in responses.responses()
               if r.body.get("model") == model)
    assert workspaces(own_tmp) == []


def test_codex_judge_garbage_and_crash_are_grading_errors(
    tmp_path: Path, own_tmp: Path, responses: FakeResponses
) -> None:
    home = codex_home_for(tmp_path, responses.base_url)
    responses.script("judge-codex-garbage", [text("Looks fine to me!")])
    garbage = judge(codex_settings(home, "judge-codex-garbage"), ["MST_FAKE_KEY"])
    unparsed, _ = graded(trial_on_disk(tmp_path), garbage, {"MST_FAKE_KEY": CANARY})
    (error,) = unparsed.errors
    assert unparsed.status == "ungraded" and "not a JSON verdict" in error.message, error
    crash = judge(codex_settings(home, "judge-codex-crash", extraArgs=["--no-such-option"]), ["MST_FAKE_KEY"])
    crashed, _ = graded(trial_on_disk(tmp_path), crash, {"MST_FAKE_KEY": CANARY})
    assert crashed.status == "ungraded" and "did not finish" in crashed.errors[0].message, crashed.errors
    assert workspaces(own_tmp) == []


def test_identity_names_the_runtime_and_its_version(anthropic: FakeProvider, tmp_path: Path) -> None:
    claude = judge(claude_settings(anthropic.anthropic_url, "m"), [])
    assert claude.version == runtime_version((str(real_tool("claude")),)) and "Claude Code" in claude.version
    codex = judge(codex_settings(tmp_path, "m"), [])
    assert codex.version.startswith("codex-cli ")
    assert len({claude.identity, codex.identity,
                judge(claude_settings(anthropic.anthropic_url, "m", rubric="Another rubric"), []).identity,
                judge(claude_settings(anthropic.anthropic_url, "m2"), []).identity,
                judge(claude_settings(anthropic.anthropic_url, "m", maxTurns=3), []).identity}) == 5
    assert judge(claude_settings(anthropic.anthropic_url, "m"), []).identity == claude.identity
    assert os.environ.get("ANTHROPIC_API_KEY") != CANARY
