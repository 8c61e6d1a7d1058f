"""The ``codex`` client with the real Codex CLI (pinned, from npm) against the fake Responses API over HTTP.

Codex reads its model provider from a temporary ``CODEX_HOME`` (:func:`fake_responses.write_codex_home`),
the key from the secrets, and the variant's MCP servers from the ``-c`` overrides mst passes: the
quickstart server, the tiny stdio server, and the MCP project's ``server-everything``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import text, tool
from fake_responses import FakeResponses, output_tokens, serve_responses, write_codex_home
from real_helpers import CANARY, REPO, SERVER, of_type, run, variant
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
