"""The ``codex`` client against a fake ``codex`` on PATH that replays recorded ``codex exec --json`` sessions."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_helpers import CANARY, REPO, SERVER, fake_clis_on_path, of_type, run, variant

from mst.clients.codex import CodexClient, toml_value
from mst.endings import COMPLETED, Infrastructure, Trial

SERVERS = {
    "store": {"command": "python", "args": [str(SERVER)], "env": {"STORE_TOKEN": "${STORE_KEY}", "MODE": "test"}},
    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${STORE_KEY}", "X-Team": "qa"}},
}
SECRETS = {"STORE_KEY": CANARY, "OPENAI_API_KEY": "sk-fake-openai"}


@pytest.fixture(autouse=True)
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))  # where the fake writes its session file
    with fake_clis_on_path():
        yield


def codex(settings: dict[str, Any] | None = None, servers: dict[str, Any] | None = None) -> CodexClient:
    return CodexClient(variant("codex", "openai:gpt-5-codex", SERVERS if servers is None else servers),
                       settings or {}, REPO)


async def test_events_become_canonical_and_secrets_stay_out_of_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "seen.json"
    monkeypatch.setenv("FAKE_SCENARIO", "ok")
    monkeypatch.setenv("FAKE_RECORD", str(record))
    outcome, events = await run(codex({"toolTimeoutSeconds": 30}), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED and outcome.answer == "42 claw hammers are in stock."
    starts, done = of_type(events, "tool.execution_start"), of_type(events, "tool.execution_complete")
    assert [(s["toolName"], s["mcpServerName"]) for s in starts] == [
        ("check_stock", "store"), ("quote_order", "store"), ("shell", None)]
    assert [d["toolCallId"] for d in done] == ["item_1", "item_2", "item_3"]
    assert [d["success"] for d in done] == [True, False, True]
    assert json.loads(done[0]["output"])["total"] == 42 and done[1]["error"] == "quantity must be at least 1"
    # One model.request per model response (from Codex's session file), not one per turn.
    requests = of_type(events, "model.request")
    assert [(r["inputTokens"], r["outputTokens"], r["cachedInputTokens"]) for r in requests] == [
        (12000, 60, 11900), (12763, 62, 12548)]
    assert outcome.usage == {"inputTokens": 24763, "outputTokens": 122, "totalTokens": 24885}
    assert of_type(events, "assistant.message") == [{"content": "42 claw hammers are in stock."}]
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert CANARY not in json.dumps(argv)
    assert argv[:3] == ["exec", "--json", "--skip-git-repo-check"] and argv[-1] == "-"
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    store, remote = seen["config"]["store"], seen["config"]["remote"]
    assert json.loads(store["args"]) == [str(SERVER)] and json.loads(store["env_vars"]) == ["STORE_TOKEN"]
    assert store["env"] == '{"MODE" = "test"}' and store["tool_timeout_sec"] == "30.0"
    assert remote["http_headers"] == '{"X-Team" = "qa"}'
    assert remote["env_http_headers"] == '{"Authorization" = "MST_MCP_HEADER_1_0"}'
    for server in (store, remote):  # waited for before the first request, and callable under `never`
        assert (server["required"], server["default_tools_approval_mode"]) == ("true", '"approve"')
    assert seen["prompt"] == "How many claw hammers are in stock?"


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("rate_limit", Infrastructure("provider-api", "", True)),
        ("server_error", Infrastructure("provider-api", "", True)),
        ("unauthorized", Infrastructure("setup", "", False)),
        ("disconnected", Infrastructure("network", "", True)),
        ("context_first", Infrastructure("setup", "", False)),
        ("context_mid", Trial("context-limit")),
        ("refused", Trial("client-error")),
        ("crash", Infrastructure("client-app", "", True)),
        ("no_result", Infrastructure("client-app", "", True)),
        ("garbage", Infrastructure("client-app", "", True)),
    ],
)
async def test_each_recorded_session_ends_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, expected: Trial | Infrastructure
) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", scenario)
    outcome, _ = await run(codex(), tmp_path, secrets=SECRETS)
    ending = outcome.ending
    if isinstance(expected, Trial):
        assert isinstance(ending, Trial) and ending.outcome == expected.outcome, ending
    else:
        assert isinstance(ending, Infrastructure), ending
        assert (ending.what, ending.retryable) == (expected.what, expected.retryable), ending


async def test_without_a_session_file_usage_stays_per_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--ephemeral``: no session file, so no per-request records are made up; the turn's totals are
    the attempt's usage, and the first-request rule falls back to the items the stream showed."""
    monkeypatch.setenv("FAKE_SCENARIO", "ok")
    outcome, events = await run(codex({"extraArgs": ["--ephemeral"]}), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED and of_type(events, "model.request") == []
    assert outcome.usage == {"inputTokens": 24763, "outputTokens": 122, "totalTokens": 24885}
    assert outcome.diagnostics["modelRequests"] is None and outcome.diagnostics["turns"] == 1
    for scenario, expected in (("context_first", "setup"), ("context_mid", "context-limit")):
        monkeypatch.setenv("FAKE_SCENARIO", scenario)
        outcome, _ = await run(codex({"extraArgs": ["--ephemeral"]}), tmp_path, secrets=SECRETS)
        ending = outcome.ending
        assert (ending.what if isinstance(ending, Infrastructure) else ending.outcome) == expected, ending


async def test_sessions_recorded_from_the_real_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``streams/codex/real_*.jsonl``, captured from the pinned CLI by ``capture_codex_streams.py``."""
    monkeypatch.setenv("FAKE_SCENARIO", "real_ok")
    outcome, events = await run(codex(), tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED and outcome.answer == "42 claw hammers are in stock."
    assert [(r["inputTokens"], r["outputTokens"]) for r in of_type(events, "model.request")] == [(5287, 5), (5384, 6)]
    monkeypatch.setenv("FAKE_SCENARIO", "real_server_error")  # a 500: Codex says "high demand", no status
    outcome, _ = await run(codex(), tmp_path, secrets=SECRETS)
    assert isinstance(outcome.ending, Infrastructure), outcome.ending
    assert (outcome.ending.what, outcome.ending.retryable) == ("provider-api", True)
    monkeypatch.setenv("FAKE_SCENARIO", "real_unreachable")  # Codex would wait for the network without end
    started = time.monotonic()
    outcome, _ = await asyncio.wait_for(run(codex({"timeLimitSeconds": 30}), tmp_path, secrets=SECRETS), 20)
    assert isinstance(outcome.ending, Infrastructure), outcome.ending
    assert (outcome.ending.what, outcome.ending.retryable) == ("network", True)
    assert time.monotonic() - started < 10
    monkeypatch.setenv("FAKE_SCENARIO", "real_mcp_failed")
    outcome, _ = await run(codex(), tmp_path, secrets=SECRETS)
    assert isinstance(outcome.ending, Infrastructure), outcome.ending
    assert (outcome.ending.what, outcome.ending.retryable) == ("setup", False)
    assert "'broken' did not start" in outcome.ending.why and "boom: the store database is locked" in outcome.ending.why


async def test_budgets_are_trials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "many_tools")
    outcome, events = await run(codex({"maxToolCalls": 3}), tmp_path, secrets=SECRETS)
    assert outcome.ending == Trial("turn-limit", "Codex asked for tool call 4; maxToolCalls is 3")
    assert len(of_type(events, "tool.execution_start")) == 4
    monkeypatch.setenv("FAKE_SCENARIO", "slow")
    outcome, _ = await asyncio.wait_for(run(codex({"timeLimitSeconds": 0.5}), tmp_path, secrets=SECRETS), 10)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"


async def test_setup_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "slow")
    broken = {"broken": {"command": "python", "args": ["-c", "raise SystemExit(3)"]}}
    outcome, _ = await asyncio.wait_for(run(codex(servers=broken), tmp_path), 10)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert "'broken' did not start" in outcome.ending.why
    outcome, _ = await run(codex(), tmp_path, secrets={})
    assert isinstance(outcome.ending, Infrastructure) and "STORE_KEY" in outcome.ending.why
    outcome, _ = await run(codex(servers={"a.b": {"url": "http://127.0.0.1:9/mcp"}}), tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    outcome, _ = await run(codex({"command": ["no-such-codex"]}), tmp_path, secrets=SECRETS)
    assert isinstance(outcome.ending, Infrastructure)
    assert (outcome.ending.what, outcome.ending.retryable) == ("client-app", False)


def test_toml_values() -> None:
    assert toml_value("a \"q\"\n") == '"a \\"q\\"\\n"'
    assert toml_value(["x", 1, True]) == '["x", 1, true]'
    assert toml_value({"K": "v", "n": 2.5}) == '{"K" = "v", "n" = 2.5}'
