"""The ``claude-code`` client against a fake ``claude`` on PATH that replays recorded stream-json sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_helpers import CANARY, HERE, REPO, SERVER, TINY_SERVER, fake_clis_on_path, of_type, run, variant

from mst.clients.claude_code import CONFIG_FILE, ClaudeCodeClient, mcp_config, split_tool
from mst.config.models import StdioServer
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


# -- sessions recorded from the real CLI (record_claude_streams.py) ------------------------------

TINY = {"tiny": {"command": "python", "args": [str(TINY_SERVER)]}}
REAL = HERE / "streams" / "claude"


def _real(name: str) -> list[str]:
    return (REAL / f"{name}.jsonl").read_text().splitlines()


def _scenario(tmp: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    path = tmp / "scenario.jsonl"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("FAKE_SCENARIO", str(path))


async def test_real_session_records_each_request_with_its_final_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "real_ok")
    outcome, events = await run(claude(servers=TINY), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED and outcome.answer == "42 claw hammers are in stock."
    # The assistant lines say output_tokens 1 (printed before the final count); the requests do not.
    assert all('"output_tokens":1}' in line for line in _real("real_ok") if line.startswith('{"type":"assistant"'))
    requests = of_type(events, "model.request")
    assert [r["outputTokens"] for r in requests] == [9, 9]
    assert sum(r["inputTokens"] for r in requests) == outcome.usage["inputTokens"]
    assert sum(r["outputTokens"] for r in requests) == outcome.usage["outputTokens"]
    assert [e["type"] for e in events][1:] == [
        "user.message", "model.request", "assistant.message", "tool.execution_start", "tool.execution_complete",
        "model.request", "assistant.message", "session.result"]
    assert of_type(events, "tool.execution_complete")[0]["output"] == "42"


async def test_a_request_whose_final_count_never_came_has_no_output_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scenario(tmp_path, monkeypatch, [line for line in _real("real_ok") if '"type":"message_delta"' not in line])
    outcome, events = await run(claude(servers=TINY), tmp_path, secrets=SECRETS)
    requests = of_type(events, "model.request")
    assert len(requests) == 2 and all("outputTokens" not in r and r["inputTokens"] > 0 for r in requests)
    assert outcome.usage["outputTokens"] == 18  # the result line's total is still complete


async def test_a_tool_result_before_its_message_s_final_count_waits_for_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code runs a tool as soon as its block is complete: the ``user`` line with its result
    may come before the message's ``message_delta``, and the count must still be the final one."""
    lines = _real("real_ok")
    user = next(i for i, line in enumerate(lines) if line.startswith('{"type":"user"'))
    delta = next(i for i, line in enumerate(lines) if '"type":"message_delta"' in line)
    assert delta < user
    _scenario(tmp_path, monkeypatch, [*lines[:delta], lines[user], *lines[delta:user], *lines[user + 1:]])
    outcome, events = await run(claude(servers=TINY), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED
    assert [r["outputTokens"] for r in of_type(events, "model.request")] == [9, 9]
    assert [e["type"] for e in events][1:] == [
        "user.message", "model.request", "assistant.message", "tool.execution_start", "tool.execution_complete",
        "model.request", "assistant.message", "session.result"]


async def test_real_rate_limit_after_retries_is_provider_api_with_the_retries_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "real_rate_limit")
    outcome, events = await run(claude(servers={}), tmp_path, secrets=SECRETS)
    ending = outcome.ending
    assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == ("provider-api", True)
    assert "HTTP 429" in ending.why and "Request rejected (429)" in ending.why and "2 of 2 retries" in ending.why
    retries = of_type(events, "model.retry")
    assert [(r["attempt"], r["maxRetries"], r["status"], r["error"]) for r in retries] == [
        (1, 2, 429, "rate_limit"), (2, 2, 429, "rate_limit")]


async def test_time_limit_while_the_cli_retries_is_the_provider_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _real("real_rate_limit")
    _scenario(tmp_path, monkeypatch, [*lines[:3], '{"_fake": "sleep", "seconds": 30}'])
    outcome, _ = await run(claude({"timeLimitSeconds": 0.5}, servers={}), tmp_path, secrets=SECRETS)
    ending = outcome.ending
    assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == ("provider-api", True), ending
    assert "still retrying" in ending.why and "HTTP 429" in ending.why


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("real_refused", Infrastructure("network", "", True)),
        ("real_context_first", Infrastructure("setup", "", False)),
        ("real_turn_limit", Trial("turn-limit")),
    ],
)
async def test_real_sessions_end_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, expected: Trial | Infrastructure
) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", scenario)
    outcome, _ = await run(claude(servers=TINY), tmp_path, secrets=SECRETS)
    ending = outcome.ending
    if isinstance(expected, Trial):
        assert isinstance(ending, Trial) and ending.outcome == expected.outcome, ending
    else:
        assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == (
            expected.what, expected.retryable), ending


async def test_a_server_still_pending_at_init_is_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "real_pending")
    outcome, events = await run(claude({"mcpStartupSeconds": 5}, servers=TINY), tmp_path, secrets=SECRETS)
    assert outcome.ending == Infrastructure(
        "setup", "MCP server 'tiny' did not start: it did not connect within 5 s (mcpStartupSeconds)", False)
    assert of_type(events, "model.request") == []  # stopped at the init line


async def test_the_cli_gets_a_private_home_a_quiet_environment_and_waits_for_its_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_CONNECTION_NONBLOCKING", "true")  # the user's own setting must not win
    client = claude({"mcpStartupSeconds": 7.5, "providerRetries": 3})
    env = client.environment(tmp_path / "home", {"ANTHROPIC_API_KEY": "k"})
    assert (env["HOME"], env["CLAUDE_CONFIG_DIR"]) == (str(tmp_path / "home"), str(tmp_path / "home" / ".claude"))
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
    assert (env["MCP_CONNECTION_NONBLOCKING"], env["MCP_TIMEOUT"], env["CLAUDE_CODE_MCP_STARTUP_WAIT_MS"]) == (
        "false", "7500", "7500")
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "3" and env["ANTHROPIC_API_KEY"] == "k"
    assert "CLAUDE_CODE_MAX_RETRIES" not in claude().environment(tmp_path, {})
    monkeypatch.setenv("HOME", "/home/me")
    monkeypatch.delenv("npm_config_cache", raising=False)
    assert claude().environment(tmp_path, {})["npm_config_cache"] == "/home/me/.npm"
    # The stdio servers keep the user's HOME (their caches), unless the variant sets one.
    config = mcp_config({"a": StdioServer(command="x"), "b": StdioServer(command="x", env={"HOME": "/srv"})},
                        REPO, {}, "/home/me")
    assert [config["mcpServers"][n]["env"]["HOME"] for n in "ab"] == ["/home/me", "/srv"]
