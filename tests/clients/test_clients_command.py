"""The command client: argv and stdin prompts, answers, transcripts, endings, secrets, process groups."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from clients_helpers import REPO, of_type, processes_with_env, request, types, wait_gone
from pydantic import ValidationError

from mst.clients.command import CommandClient, CommandSettings
from mst.config.models import VariantConfig
from mst.endings import COMPLETED, Infrastructure, Trial

FAKE = str(Path(__file__).with_name("fake_agent.py"))


def command(*argv: str, **settings: Any) -> CommandClient:
    v = VariantConfig.model_validate({"id": "cmd", "client": "command", "model": "some-model"})
    return CommandClient(v, CommandSettings.model_validate({"command": list(argv), **settings}), REPO)


async def attempt(client: CommandClient, tmp: Path, **kwargs: Any) -> tuple[Any, list[dict[str, Any]]]:
    req = request(client, tmp, **kwargs)
    outcome = await client.attempt(req)
    return outcome, req.transcript.events


async def test_prompt_in_argv_answer_on_stdout(tmp_path: Path) -> None:
    client = command(sys.executable, FAKE, "echo", "answer:", "{prompt}", "case={case}")
    outcome, events = await attempt(client, tmp_path, prompt="what is 6*7?")
    assert outcome.ending == COMPLETED
    assert outcome.answer == "answer: what is 6*7? case=c1"
    assert types(events) == ["session.format", "user.message", "assistant.message", "session.result"]
    assert of_type(events, "assistant.message") == [{"content": outcome.answer}]


async def test_prompt_on_stdin(tmp_path: Path) -> None:
    outcome, _ = await attempt(command(sys.executable, FAKE, "stdin", stdin=True), tmp_path, prompt="hello")
    assert outcome.answer == "got: hello"


async def test_secrets_reach_the_environment_not_argv(tmp_path: Path) -> None:
    client = command(sys.executable, FAKE, "env", env={"EXTRA": "x"})
    outcome, _ = await attempt(client, tmp_path, secrets={"API_KEY": "sk-secret-1"})
    seen = orjson.loads(outcome.answer)
    assert seen["key"] == "sk-secret-1" and seen["extra"] == "x" and seen["case"] == "c1"
    assert "sk-secret-1" not in " ".join(seen["argv"])
    # It runs in the attempt's artifacts directory by default.
    assert Path(seen["cwd"]) == Path(seen["artifacts"]) == tmp_path / "artifacts" / "c1" / "0"


async def test_command_not_found_is_a_non_retryable_client_app_failure(tmp_path: Path) -> None:
    outcome, events = await attempt(command("no-such-agent-binary", "{prompt}"), tmp_path)
    assert outcome.ending == Infrastructure("client-app", "command 'no-such-agent-binary' not found", False)
    assert of_type(events, "session.result")[0]["outcome"] == "infrastructure"


async def test_non_zero_exit_is_a_client_error_trial_without_secrets(tmp_path: Path) -> None:
    outcome, _ = await attempt(command(sys.executable, FAKE, "fail"), tmp_path, secrets={"API_KEY": "sk-hidden-9"})
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "client-error"
    detail = outcome.ending.detail or ""
    assert "status 2" in detail and "something broke" in detail
    assert "sk-hidden-9" not in detail and "[REDACTED]" in detail
    assert outcome.answer is None


async def test_killed_by_a_signal_is_a_retryable_client_app_failure(tmp_path: Path) -> None:
    outcome, _ = await attempt(command(sys.executable, FAKE, "crash"), tmp_path)
    assert isinstance(outcome.ending, Infrastructure)
    assert outcome.ending.what == "client-app" and outcome.ending.retryable and "SIGKILL" in outcome.ending.why


async def test_transcript_becomes_the_attempt_s_transcript(tmp_path: Path) -> None:
    client = command(sys.executable, FAKE, "transcript", transcript="transcript-{case}.jsonl")
    outcome, events = await attempt(client, tmp_path)
    assert outcome.ending == COMPLETED and outcome.answer == "the answer"
    assert types(events) == [
        "session.format",
        "user.message",
        "model.request",
        "model.request",
        "assistant.message",
        "session.result",
    ]
    assert outcome.usage == {"inputTokens": 30, "outputTokens": 7, "totalTokens": 37}
    assert (tmp_path / "artifacts" / "c1" / "0" / "transcript-c1.jsonl").is_file()


@pytest.mark.parametrize("mode", ["bad-transcript", "echo"])
async def test_unreadable_or_missing_transcript_is_a_retryable_client_app_failure(tmp_path: Path, mode: str) -> None:
    client = command(sys.executable, FAKE, mode, transcript="t.jsonl")
    outcome, _ = await attempt(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure)
    assert outcome.ending.what == "client-app" and outcome.ending.retryable and "transcript" in outcome.ending.why


async def test_answer_from_a_file(tmp_path: Path) -> None:
    client = command(sys.executable, FAKE, "answer-file", "out-{trial}.txt", answerFrom={"file": "out-{trial}.txt"})
    outcome, _ = await attempt(client, tmp_path, trial=3)
    assert outcome.ending == COMPLETED and outcome.answer == "from the file"
    missing = command(sys.executable, FAKE, "echo", "x", answerFrom={"file": "never.txt"})
    outcome, _ = await attempt(missing, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.retryable


async def test_time_limit_kills_the_process_group(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    client = command(sys.executable, FAKE, "sleep", env={"MST_TEST_MARKER": marker}, timeLimitSeconds=1.0)
    outcome, _ = await attempt(client, tmp_path)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"
    assert wait_gone(marker) == []


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    client = command(sys.executable, FAKE, "sleep", env={"MST_TEST_MARKER": marker})
    task = asyncio.ensure_future(client.attempt(request(client, tmp_path)))
    for _ in range(200):
        if len(processes_with_env(marker)) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(processes_with_env(marker)) >= 2, "the command and its grandchild should be running"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_gone(marker) == []


async def test_processes_left_behind_are_killed(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    client = command(sys.executable, FAKE, "daemon", env={"MST_TEST_MARKER": marker})
    outcomes = await asyncio.gather(*(attempt(client, tmp_path, trial=t) for t in range(5)))
    assert [o.answer for o, _ in outcomes] == ["done"] * 5
    assert wait_gone(marker) == []


def test_settings_validation() -> None:
    for bad in ({"command": []}, {"command": ["x"], "answerFrom": "stderr"}, {"command": ["x"], "nope": 1}):
        with pytest.raises(ValidationError):
            CommandSettings.model_validate(bad)
