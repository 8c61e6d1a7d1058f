"""The agent client against the real quickstart MCP server, over stdio and streamable HTTP.

Starting a Python MCP server costs about two seconds of CPU (importing the SDK), so these tests
start as few as they can: one HTTP server for the module, a handful of stdio servers.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from clients_helpers import (
    SERVER,
    agent,
    free_port,
    of_type,
    processes_with_env,
    request,
    run,
    serving,
    wait_gone,
)

from mst.endings import COMPLETED, Infrastructure, Trial
from mst.session.lookups import create_session_lookups

SCRIPT: dict[str, Any] = {
    "steps": [
        {"tool": "check_stock", "args": {"sku": "{metadata[sku]}"}, "text": "Let me check the stock."},
        {"tool": "quote_order", "args": {"sku": "{metadata[sku]}", "quantity": 0}},
        {"tool": "quote_order", "args": {"sku": "{metadata[sku]}", "quantity": 2}},
    ],
    "answer": "{expected} in stock; two cost {results[2]}",
}


def stdio(marker: str | None = None, **extra: Any) -> dict[str, Any]:
    env = {"MST_TEST_MARKER": marker} if marker else {}
    return {"command": "python", "args": [str(SERVER)], "env": env, **extra}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serving() as url:
        yield url


def check_store_transcript(events: list[dict[str, Any]], server: str) -> None:
    starts = of_type(events, "tool.execution_start")
    done = of_type(events, "tool.execution_complete")
    assert [s["toolName"] for s in starts] == ["check_stock", "quote_order", "quote_order"]
    assert [d["toolCallId"] for d in done] == [s["toolCallId"] for s in starts]
    assert {s["mcpServerName"] for s in starts} == {d["mcpServerName"] for d in done} == {server}
    assert [d["success"] for d in done] == [True, False, True]
    assert orjson.loads(done[0]["output"])["total"] == 42
    # A tool error is part of the trial: recorded, fed back, and the trial goes on.
    assert "quantity must be at least 1" in done[1]["error"] and "output" not in done[1]
    assert orjson.loads(done[2]["output"])["total"] == "37.98"
    assert all(isinstance(d["durationMs"], int) for d in done)
    assert len(of_type(events, "model.request")) == 4


async def test_stdio_server_full_loop(tmp_path: Path) -> None:
    client = agent({"mock": SCRIPT}, servers={"store": stdio()})
    outcome, events = await run(client, tmp_path, metadata={"sku": "HAM-001"})
    assert outcome.ending == COMPLETED, outcome.ending
    check_store_transcript(events, "store")
    assert outcome.answer is not None and outcome.answer.startswith("42 in stock; two cost {")
    assert outcome.diagnostics == {"turns": 4, "toolCalls": 3}
    # The model saw the server's tools, so its input tokens include their schemas.
    assert of_type(events, "model.request")[0]["inputTokens"] > 100


async def test_streamable_http_server_full_loop(tmp_path: Path, http_url: str) -> None:
    client = agent({"mock": SCRIPT}, servers={"store": {"url": http_url}})
    for trial in range(2):
        outcome, events = await run(client, tmp_path, trial=trial, metadata={"sku": "HAM-001"})
        assert outcome.ending == COMPLETED, outcome.ending
        check_store_transcript(events, "store")


async def test_two_servers_with_the_same_tools_get_qualified_names(tmp_path: Path, http_url: str) -> None:
    script = {"steps": [{"tool": "b__get_item", "args": {"sku": "SAW-050"}}], "answer": "{result}"}
    client = agent({"mock": script}, servers={"a": {"url": http_url}, "b": {"url": http_url}})
    outcome, events = await run(client, tmp_path)
    assert outcome.ending == COMPLETED
    [start] = of_type(events, "tool.execution_start")
    assert (start["toolName"], start["mcpServerName"]) == ("get_item", "b")
    assert orjson.loads(outcome.answer or "")["name"] == "Hand saw 500 mm"


async def test_lookups_read_the_calls_mst_rejected(tmp_path: Path, http_url: str) -> None:
    # The agent client's events, read by the grading side (the shared session lookups): a call to
    # a tool no server has is marked rejected; the call that reached the server is not.
    script = {"steps": [{"tool": "get_item", "args": {"sku": "SAW-050"}}, {"tool": "no_such_tool"}],
              "answer": "done"}
    client = agent({"mock": script}, servers={"store": {"url": http_url}})
    try:
        outcome, events = await run(client, tmp_path)
    finally:
        await client.aclose()
    assert outcome.ending == COMPLETED, outcome.ending
    calls = create_session_lookups(events).tool_calls
    assert [(c.name, c.finished, c.rejected, c.reached_server) for c in calls] == [
        ("store__get_item", True, False, True), ("no_such_tool", True, True, False)]


async def test_http_server_that_is_not_there_is_a_retryable_network_failure(tmp_path: Path) -> None:
    # Refused at start: the server may be back when `--resume` tries again (docs/mcp-servers.md).
    client = agent(servers={"gone": {"url": f"http://127.0.0.1:{free_port()}/mcp"}})
    outcome, events = await run(client, tmp_path)
    await client.aclose()
    assert isinstance(outcome.ending, Infrastructure)
    assert outcome.ending.what == "network" and outcome.ending.retryable
    assert "'gone' at http://127.0.0.1:" in outcome.ending.why and "could not be reached" in outcome.ending.why
    assert of_type(events, "model.request") == []


async def test_stdio_command_not_found_is_a_setup_failure(tmp_path: Path) -> None:
    client = agent(servers={"x": {"command": "no-such-mcp-server-binary"}})
    outcome, _ = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert not outcome.ending.retryable and "not found" in outcome.ending.why


async def test_server_that_exits_reports_its_stderr_without_secrets(tmp_path: Path) -> None:
    code = "import os, sys; sys.stderr.write('boom: token=' + os.environ['TOK']); sys.exit(3)"
    server = {"command": sys.executable, "args": ["-c", code], "env": {"TOK": "${API_KEY}"}}
    client = agent(servers={"broken": server})
    outcome, _ = await run(client, tmp_path, secrets={"API_KEY": "sk-very-secret-123"})
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert not outcome.ending.retryable
    assert "boom: token=[REDACTED]" in outcome.ending.why
    assert "sk-very-secret-123" not in outcome.ending.why


async def test_missing_secret_and_missing_cwd_are_setup_failures(tmp_path: Path) -> None:
    client = agent(servers={"s": {"command": "python", "env": {"TOK": "${NOT_THERE}"}}})
    outcome, _ = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert "NOT_THERE" in outcome.ending.why
    client = agent(servers={"s": {"command": "python", "cwd": "no/such/dir"}})
    outcome, _ = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and "working directory" in outcome.ending.why


@pytest.mark.slow
async def test_limits_and_cancellation_stop_stdio_servers(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    timed = agent(
        {
            "timeLimitSeconds": 0.5,
            "mock": {"steps": SCRIPT["steps"][:1], "inject": [{"failure": "time-limit", "atRequest": 1}]},
        },
        servers={"store": stdio(marker)},
    )
    outcome, events = await run(timed, tmp_path, metadata={"sku": "HAM-001"})
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit", outcome.ending
    assert len(of_type(events, "tool.execution_complete")) == 1
    await timed.aclose()  # the attempt's server closes in the background, a pre-started spare with the client
    assert wait_gone(marker) == []

    # mst's deadline: the collector cancels the attempt; the server must still go away.
    stalled = agent({"mock": {"inject": [{"failure": "deadline"}]}}, servers={"store": stdio(marker)})
    req = request(stalled, tmp_path, deadline_s=30)
    task = asyncio.ensure_future(stalled.attempt(req))
    for _ in range(300):
        if of_type(req.transcript.events, "model.request") or processes_with_env(marker):
            break
        await asyncio.sleep(0.05)
    assert processes_with_env(marker), "the server should be running while the attempt is under way"
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await stalled.aclose()
    assert wait_gone(marker) == []


@pytest.mark.slow
async def test_many_attempts_leave_no_server_processes(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    client = agent({"mock": SCRIPT}, servers={"store": stdio(marker)})
    outcomes = await asyncio.gather(*(run(client, tmp_path, trial=t, metadata={"sku": "HAM-001"}) for t in range(3)))
    assert [o.ending for o, _ in outcomes] == [COMPLETED] * 3
    await client.aclose()
    assert wait_gone(marker) == []


async def test_http_headers_take_secrets(tmp_path: Path, http_url: str) -> None:
    server = {"url": http_url, "headers": {"Authorization": "Bearer ${API_KEY}"}}
    client = agent({"mock": {"steps": [{"tool": "get_item", "args": {"sku": "NLS-100"}}]}}, servers={"s": server})
    outcome, _ = await run(client, tmp_path, secrets={"API_KEY": "sk-1"})
    assert outcome.ending == COMPLETED
    outcome, _ = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert "API_KEY" in outcome.ending.why


@pytest.mark.slow
async def test_slow_tool_and_dead_server_fail_inside_the_trial(tmp_path: Path) -> None:
    script = {
        "steps": [
            {"tool": "slow", "args": {"seconds": 30}},
            {"tool": "echo", "args": {"text": "still here"}},
            {"tool": "die"},
            {"tool": "echo", "args": {"text": "after death"}},
        ],
        "answer": "done",
    }
    flaky = {"command": "python", "args": [str(Path(__file__).with_name("flaky_server.py"))]}
    client = agent({"toolTimeoutSeconds": 0.5, "mock": script}, servers={"flaky": flaky})
    outcome, events = await asyncio.wait_for(run(client, tmp_path), 60)
    assert outcome.ending == COMPLETED and outcome.answer == "done"
    done = of_type(events, "tool.execution_complete")
    assert [d["success"] for d in done] == [False, True, False, False]
    assert "timed out" in done[0]["error"]
    assert done[1]["output"] == "still here"


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        ("rate-limit", Infrastructure("provider-api", "mock: HTTP 429 Too Many Requests (injected rate limit)", True)),
        ("client-crash", Infrastructure("client-app", "client raised MockCrash: mock: injected client crash", True)),
    ],
)
async def test_failure_mid_trial_with_servers_keeps_its_ending(
    tmp_path: Path, http_url: str, failure: str, expected: Infrastructure
) -> None:
    script = {
        "steps": [{"tool": "get_item", "args": {"sku": "NLS-100"}}],
        "inject": [{"failure": failure, "atRequest": 1}],
    }
    client = agent({"mock": script}, servers={"store": {"url": http_url}})
    outcome, events = await run(client, tmp_path)
    assert outcome.ending == expected
    assert len(of_type(events, "tool.execution_complete")) == 1
    assert outcome.diagnostics == {"turns": 1, "toolCalls": 1}


async def test_server_that_never_answers_is_a_setup_failure(tmp_path: Path) -> None:
    # Reads its stdin and never replies: the handshake cannot finish.
    mute = {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}
    client = agent({"startupTimeoutSeconds": 0.5}, servers={"mute": mute})
    outcome, _ = await asyncio.wait_for(run(client, tmp_path), 30)
    assert outcome.ending == Infrastructure(
        "setup", "MCP server 'mute' did not start: it did not initialise within 0.5 s (startupTimeoutSeconds)", False
    )
