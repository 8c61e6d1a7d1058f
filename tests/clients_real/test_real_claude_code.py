"""The ``claude-code`` client against a fake ``claude`` on PATH that replays recorded stream-json sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_helpers import CANARY, REPO, SERVER, fake_clis_on_path, of_type, run, variant

from mst.clients.claude_code import CONFIG_FILE, ClaudeCodeClient, split_tool
from mst.endings import COMPLETED, Infrastructure, Trial

SERVERS = {"store": {"command": "python", "args": [str(SERVER)], "env": {"STORE_TOKEN": "${STORE_KEY}"}}}
SECRETS = {"STORE_KEY": CANARY, "ANTHROPIC_API_KEY": "sk-ant-fake-000"}


@pytest.fixture(autouse=True)
def on_path() -> Iterator[None]:
    with fake_clis_on_path():
        yield


def claude(settings: dict[str, Any] | None = None, servers: dict[str, Any] | None = None) -> ClaudeCodeClient:
    return ClaudeCodeClient(variant("claude-code", "anthropic:claude-sonnet-4-5",
                                    SERVERS if servers is None else servers), settings or {}, REPO)


async def test_stream_becomes_canonical_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "seen.json"
    monkeypatch.setenv("FAKE_SCENARIO", "ok")
    monkeypatch.setenv("FAKE_RECORD", str(record))
    outcome, events = await run(claude({"maxTurns": 6}), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED and outcome.answer == "42 claw hammers are in stock."
    assert [e["type"] for e in events] == [
        "session.format", "user.message", "model.request", "assistant.message", "assistant.message",
        "tool.execution_start", "tool.execution_complete", "model.request", "assistant.message",
        "tool.execution_start", "tool.execution_complete", "model.request", "assistant.message", "session.result"]
    starts, done = of_type(events, "tool.execution_start"), of_type(events, "tool.execution_complete")
    assert [(s["toolName"], s["mcpServerName"], s["toolCallId"]) for s in starts] == [
        ("check_stock", "store", "toolu_01"), ("quote_order", "store", "toolu_02")]
    assert starts[0]["input"] == {"sku": "HAM-001"}
    assert [d["success"] for d in done] == [True, False]
    assert json.loads(done[0]["output"])["total"] == 42 and "quantity must be" in done[1]["error"]
    # Usage is counted once per API message, although msg_01A came as two lines.
    requests = of_type(events, "model.request")
    assert [r["inputTokens"] for r in requests] == [1203, 1203, 1303]
    assert outcome.usage == {"inputTokens": 3609, "outputTokens": 60, "totalTokens": 3669}
    result = of_type(events, "session.result")[0]
    assert result["costUsd"] == 0.0123 and result["turns"] == 4
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[:5] == ["-p", "--output-format", "stream-json", "--verbose", "--mcp-config"]
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert argv[argv.index("--max-turns") + 1] == "6"
    assert argv[argv.index("--allowedTools") + 1] == "mcp__store"
    assert "--strict-mcp-config" in argv and seen["prompt"] == "How many claw hammers are in stock?"
    config_path = Path(argv[argv.index("--mcp-config") + 1])
    assert config_path.parent == tmp_path / "artifacts" / "c1" / "0" and config_path.name == CONFIG_FILE
    # The secret stays a ${reference} in the file: Claude Code expands it from its environment.
    text = config_path.read_text()
    assert CANARY not in text and "${STORE_KEY}" in text
    assert seen["config"]["mcpServers"]["store"]["args"][-1] == str(SERVER)


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("turn_limit", Trial("turn-limit")),
        ("context_first", Infrastructure("setup", "", False)),
        ("context_mid", Trial("context-limit")),
        ("rate_limit", Infrastructure("provider-api", "", True)),
        ("overloaded", Infrastructure("provider-api", "", True)),
        ("auth", Infrastructure("setup", "", False)),
        ("execution_error", Trial("client-error")),
        ("crash", Infrastructure("client-app", "", True)),
        ("no_result", Infrastructure("client-app", "", True)),
        ("garbage", Infrastructure("client-app", "", True)),
    ],
)
async def test_each_recorded_session_ends_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, expected: Trial | Infrastructure
) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", scenario)
    outcome, events = await run(claude(), tmp_path, secrets=SECRETS)
    ending = outcome.ending
    if isinstance(expected, Trial):
        assert isinstance(ending, Trial) and ending.outcome == expected.outcome, ending
    else:
        assert isinstance(ending, Infrastructure), ending
        assert (ending.what, ending.retryable) == (expected.what, expected.retryable), ending
    assert of_type(events, "session.result")[0]["ending"]["kind"] == (
        "trial" if isinstance(expected, Trial) else "infrastructure")


async def test_missing_binary_is_client_app_not_retryable(tmp_path: Path) -> None:
    outcome, _ = await run(claude({"command": ["no-such-claude-binary"]}), tmp_path, secrets=SECRETS)
    assert isinstance(outcome.ending, Infrastructure)
    assert (outcome.ending.what, outcome.ending.retryable) == ("client-app", False)
    assert "was not found" in outcome.ending.why


async def test_mcp_server_that_fails_is_setup_and_stops_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session would take 30 s; the failed server in its init line ends it at once.
    monkeypatch.setenv("FAKE_SCENARIO", "slow")
    broken = {"broken": {"command": "python", "args": ["-c", "raise SystemExit(3)"]}}
    outcome, _ = await asyncio.wait_for(run(claude(servers=broken), tmp_path), 10)
    assert outcome.ending == Infrastructure(
        "setup", "MCP server 'broken' did not start: Claude Code reports its status 'failed'", False)


async def test_missing_secret_is_setup_before_the_cli_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "seen.json"
    monkeypatch.setenv("FAKE_RECORD", str(record))
    outcome, _ = await run(claude(), tmp_path, secrets={})
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert not outcome.ending.retryable and "STORE_KEY" in outcome.ending.why
    assert not record.exists()


async def test_time_limit_is_a_trial_and_kills_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "slow")
    outcome, _ = await run(claude({"timeLimitSeconds": 0.5}), tmp_path, secrets=SECRETS)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"


def test_tool_names_split_into_server_and_tool() -> None:
    assert split_tool("mcp__store__check_stock", ["store"]) == ("store", "check_stock")
    assert split_tool("mcp__my__srv__do_it", ["my__srv", "my"]) == ("my__srv", "do_it")
    assert split_tool("mcp__other__x", ["store"]) == ("other", "x")
    assert split_tool("Bash", ["store"]) == (None, "Bash")
