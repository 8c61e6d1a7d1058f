"""The ``codex`` client with the real Codex CLI (pinned, from npm) against the fake Responses API over HTTP.

Codex reads its model provider from a temporary ``CODEX_HOME`` (:func:`fake_responses.write_codex_home`),
the key from the secrets, and the variant's MCP servers from the ``-c`` overrides mst passes: the
quickstart server, the tiny stdio server, and the MCP project's ``server-everything``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import context_length, drop, raw_sse, slow, status, text, tool
from fake_responses import FakeResponses, dead_url, output_tokens, serve_responses, sse_event, write_codex_home
from real_helpers import CANARY, REPO, SERVER, TINY_SERVER, of_type, run, variant
from tests.clients.clients_helpers import free_port, start_http_server, stop
from tests.helpers import load, only_run, write_eval
from tests.realtools import tool as real_tool

from mst.clients.codex import CodexClient
from mst.endings import COMPLETED

SECRETS = {"MST_FAKE_KEY": CANARY}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeResponses]:
    with serve_responses() as server:
        yield server


def codex(home: Path, servers: dict[str, Any], **settings: Any) -> CodexClient:
    settings = {"command": [str(real_tool("codex"))], "env": {"CODEX_HOME": str(home)}, **settings}
    return CodexClient(variant("codex", f"openai:{home.name}", servers), settings, REPO)


def namespace_tools(body: dict[str, Any], space: str) -> list[str]:
    return [t["name"] for ns in body.get("tools", []) if ns.get("type") == "namespace" and ns.get("name") == space
            for t in ns.get("tools", [])]


@pytest.mark.slow
async def test_tools_on_the_first_request_callable_per_response_usage_sandbox_kept(
    tmp_path: Path, fake: FakeResponses
) -> None:
    """The server is connected before the first model request (``required``), its tool runs without
    an approval prompt, a shell write is still refused by the read-only sandbox, and every model
    response is one ``model.request`` with that response's own tokens."""
    home = write_codex_home(tmp_path / "m-quickstart", {"fake": fake.base_url})
    fake.script(home.name, [
        tool("mcp__store__check_stock", {"sku": "HAM-001"}),
        tool("exec_command", {"cmd": "echo x > written.txt; echo tried"}),
        text("42 claw hammers are in stock."),
    ])
    client = codex(home, {"store": {"command": "python", "args": [str(SERVER)]}})
    outcome, events = await run(client, tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED, outcome
    assert outcome.answer == "42 claw hammers are in stock."
    bodies = [r.body for r in fake.responses() if r.body.get("model") == home.name]
    assert len(bodies) == 3
    assert "check_stock" in namespace_tools(bodies[0], "mcp__store")  # there from the first request on
    done = of_type(events, "tool.execution_complete")
    assert (done[0]["toolName"], done[0]["mcpServerName"], done[0]["success"]) == ("check_stock", "store", True)
    assert json.loads(done[0]["output"])["total"] == 42
    assert "approval" not in json.dumps(done)
    artifacts = tmp_path / "artifacts" / "c1" / "0"
    assert done[1]["toolName"] == "shell" and "Read-only file system" in done[1]["output"]
    assert not (artifacts / "written.txt").exists()
    requests = of_type(events, "model.request")
    assert [r["outputTokens"] for r in requests] == [output_tokens(t) for t in range(3)]
    # Each response's input count is the fake's for that request (it grows with the conversation).
    assert [r["inputTokens"] for r in requests] == [10 + len(json.dumps(b["input"])) // 4 for b in bodies]
    assert outcome.usage["outputTokens"] == sum(r["outputTokens"] for r in requests)
    assert CANARY not in json.dumps(events)


@pytest.mark.slow
async def test_server_everything_over_stdio(tmp_path: Path, fake: FakeResponses) -> None:
    """The MCP project's reference server: a text result, and a schema violation as a failed call."""
    home = write_codex_home(tmp_path / "m-everything", {"fake": fake.base_url})
    fake.script(home.name, [
        tool("mcp__everything__echo", {"message": "hello from codex"}),
        tool("mcp__everything__get_sum", {"a": "not a number"}),
        text("done"),
    ])
    client = codex(home, {"everything": {"command": str(real_tool("server-everything")), "args": ["stdio"]}},
                   startupTimeoutSeconds=60)
    outcome, events = await run(client, tmp_path, secrets=SECRETS)
    assert outcome.ending == COMPLETED, outcome
    echo, bad = of_type(events, "tool.execution_complete")
    assert (echo["toolName"], echo["success"]) == ("echo", True) and "hello from codex" in echo["output"]
    # Codex offers `get-sum` to the model as `get_sum`; the transcript keeps the server's own name.
    assert (bad["toolName"], bad["success"]) == ("get-sum", False) and "Input validation error" in bad["error"]


# -- every ending of the codex client's table, through the real `mst run` ------------------------

TINY = {"command": "python", "args": [str(TINY_SERVER)]}
SETUP = {"kind": "infrastructure", "what": "setup", "retryable": False}
NETWORK = {"kind": "infrastructure", "what": "network", "retryable": True}
PROVIDER = {"kind": "infrastructure", "what": "provider-api", "retryable": True}
CLIENT_APP = {"kind": "infrastructure", "what": "client-app", "retryable": True}
_REFUSED = [raw_sse([sse_event({"type": "response.created", "response": {"id": "r"}}),
                     sse_event({"type": "response.failed", "response": {"id": "r", "error": {
                         "code": "invalid_prompt", "message": "Invalid prompt: flagged as unsafe"}}})])]

# variant id -> (fake script, MCP servers, settings, the stored ending it must have)
ENDINGS: dict[str, tuple[list[Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "ok": ([tool("mcp__store__check_stock", {"sku": "HAM-001"}), text("42 claw hammers are in stock.")],
           {"store": {"command": "python", "args": [str(SERVER)]}}, {}, {"kind": "trial", "outcome": "completed"}),
    "http-500": ([status(500, "The server had an error")], {}, {}, PROVIDER),
    "http-429": ([status(429, "Rate limit reached")], {}, {}, PROVIDER),
    "http-401": ([status(401, "Incorrect API key provided")], {}, {}, SETUP),
    "http-400": ([status(400, "Invalid 'input[0]': unsupported")], {}, {}, SETUP),
    "refused-prompt": (_REFUSED, {}, {}, {"kind": "trial", "outcome": "client-error"}),
    "dropped": ([drop()], {}, {}, NETWORK),
    "unreachable": ([text("never")], {}, {"extraArgs": ["-c", 'model_provider="dead"']}, NETWORK),
    "context-first": ([context_length()], {}, {}, SETUP),
    "context-mid": ([tool("mcp__tiny__echo", {"text": "x"}), context_length()], {"tiny": TINY}, {},
                    {"kind": "trial", "outcome": "context-limit"}),
    # The model calls a tool Codex does not have: Codex drops the call (no item in the stream), but
    # a model response was made, so the overflow after it is mid-trial.
    "context-after-dropped-call": ([tool("mcp__nosuch__lookup", {}), context_length()], {}, {},
                                   {"kind": "trial", "outcome": "context-limit"}),
    "server-fails": ([text("never")], {"store": {"command": "python", "args": ["-c", (
        "import sys; sys.stderr.write('boom: the store database is locked\\n'); sys.exit(3)")]}}, {}, SETUP),
    "server-never-ready": ([text("never")], {"store": {"command": "python", "args": ["-c", "import time; "
                                                                                         "time.sleep(60)"]}},
                           {"startupTimeoutSeconds": 1}, SETUP),
    "turn-limit": ([tool("mcp__tiny__echo", {"text": "a"}), tool("mcp__tiny__echo", {"text": "b"}), text("x")],
                   {"tiny": TINY}, {"maxToolCalls": 1}, {"kind": "trial", "outcome": "turn-limit"}),
    "time-limit": ([slow(6, text("late"))], {}, {"timeLimitSeconds": 2}, {"kind": "trial", "outcome": "time-limit"}),
    "crash": ([tool("mcp__tiny__echo", {"text": "x"})], {"tiny": {**TINY, "env": {"TINY_MCP_KILL_PARENT": "1"}}},
              {}, CLIENT_APP),
    "config-refused": ([text("never")], {}, {"extraArgs": ["-c", 'model_provider="nowhere"']}, SETUP),
    "not-installed": ([text("never")], {}, {"command": ["/nonexistent/codex"]}, {**CLIENT_APP, "retryable": False}),
}


def http_endings(url: str) -> dict[str, tuple[list[Any], dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """The quickstart server over streamable HTTP at ``url`` (a secret in a header), and one nobody serves."""
    served = {"url": url, "headers": {"Authorization": "Bearer ${MST_FAKE_KEY}"}}
    return {
        "ok-http": ([tool("mcp__store__check_stock", {"sku": "HAM-001"}), text("42 claw hammers are in stock.")],
                    {"store": served}, {}, {"kind": "trial", "outcome": "completed"}),
        "http-server-down": ([text("never")], {"store": {"url": dead_url().replace("/v1", "/mcp")}}, {}, SETUP),
    }


def endings_eval(tmp: Path, home: Path, endings: dict[str, Any]) -> Path:
    variants = []
    for vid, (_, servers, settings, _) in endings.items():
        variants.append({"id": vid, "client": "codex", "model": vid, "mcpServers": servers,
                         "secrets": ["MST_FAKE_KEY"], "settings": {
            "command": [str(real_tool("codex"))], "env": {"CODEX_HOME": str(home)}, "timeLimitSeconds": 45,
            **settings}})
    variants[0]["baseline"] = True
    doc = {"name": "codex-endings", "trials": 1, "concurrency": 4, "deadlineSeconds": 60,
           "cases": [{"id": "c1", "prompt": "How many claw hammers are in stock?", "expected": "42"}],
           "variants": variants, "assertions": [{"type": "contains", "value": "42"}]}
    return write_eval(tmp, doc)


@pytest.mark.slow
def test_every_codex_ending_in_run_json_and_summary_json(tmp_path: Path, fake: FakeResponses) -> None:
    home = write_codex_home(tmp_path / "codex-home", {"fake": fake.base_url, "dead": dead_url()})
    port = free_port()
    http_server = start_http_server(port)
    try:
        endings = {**ENDINGS, **http_endings(f"http://127.0.0.1:{port}/mcp")}
        for vid, (steps, *_) in endings.items():
            fake.script(vid, steps)
        path = endings_eval(tmp_path, home, endings)
        (tmp_path / "secrets.env").write_text(f"MST_FAKE_KEY={CANARY}\n")
        env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "RUST_LOG", "OPENAI_API_KEY")}
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "mst", "run", str(path), "--runs-dir", "runs", "--secrets-file", "secrets.env"],
            cwd=tmp_path, env={**env, "COLUMNS": "160"}, capture_output=True, text=True, timeout=240)
        elapsed = time.monotonic() - started
    finally:
        stop(http_server)
    assert done.returncode == 3, done.stdout + done.stderr  # incomplete cases: the infrastructure failures
    run_dir = only_run(tmp_path / "runs")
    attempts = {a["variant"]: a for a in load(run_dir / "run.json")["attempts"]}
    summary = {v["id"]: v for v in load(run_dir / "summary.json")["variants"]}
    seen = {vid: {k: attempts[vid]["ending"].get(k) for k in expected} for vid, (*_, expected) in endings.items()}
    assert seen == {vid: expected for vid, (*_, expected) in endings.items()}, {
        vid: attempts[vid]["ending"] for vid in endings if seen[vid] != endings[vid][3]}
    for vid, (*_, expected) in endings.items():
        if expected["kind"] == "infrastructure":
            assert attempts[vid]["infrastructureError"].startswith(expected["what"] + ": "), vid
            assert summary[vid]["infrastructure"]["byWhat"] == {expected["what"]: 1}, vid
            assert summary[vid]["cases"]["incomplete"] == 1, vid
            assert bool(summary[vid]["needsFix"]) is (not expected["retryable"]), vid
        else:
            assert attempts[vid]["infrastructureError"] is None, vid
            assert summary[vid]["trials"]["outcomes"] == {expected["outcome"]: 1}, vid
    assert summary["ok"]["cases"]["passed"] == 1 and summary["ok-http"]["cases"]["passed"] == 1
    # The reasons say what happened, in Codex's and the server's own words.
    assert "high demand" in attempts["http-500"]["ending"]["why"]
    assert "boom: the store database is locked" in attempts["server-fails"]["ending"]["why"]
    assert "'store' did not start" in attempts["server-never-ready"]["ending"]["why"]
    assert "killed by SIGKILL" in attempts["crash"]["ending"]["why"]
    # An unreachable provider is seen in seconds, not after the 45 s time limit.
    assert attempts["unreachable"]["durationMs"] < 20_000, attempts["unreachable"]
    assert elapsed < 120, elapsed
    # The key reached the provider and nothing else.
    assert any(CANARY in r.headers.get("authorization", "") for r in fake.responses())
    assert CANARY not in done.stdout + done.stderr
    for file in run_dir.rglob("*"):
        if file.is_file():
            assert CANARY.encode() not in file.read_bytes(), file
