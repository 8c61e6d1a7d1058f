# ruff: noqa: E501  (tables of variants and a recorded transcript read better unwrapped)
"""Every ending of the real clients through the real ``mst run``: run.json, summary.json, and a canary key.

One eval, one case, one variant per ending: the agent client with ``openai:`` and ``anthropic:``
models against the fake provider over HTTP (with the quickstart MCP server over streamable HTTP),
``claude-code`` and ``codex`` with the fake CLIs on PATH, and a ``command`` variant that writes a
canonical transcript. The API keys are a canary from ``--secrets-file``; while the run goes on, the
test reads every process's argv from /proc, and afterwards every file of the run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, context_length, drop, serve, slow, status, text, tool
from real_helpers import BIN, CANARY, check_stored_endings, fake_cli_env, run_mst_watching_argv
from tests.clients.clients_helpers import free_port, start_http_server, stop
from tests.helpers import only_run, write_eval

SETUP = {"kind": "infrastructure", "what": "setup", "retryable": False}
# variant id -> (its settings, the ending it must be stored with)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def _agent(model: str, steps: list[Any], provider: str = "openai", **settings: Any) -> dict[str, Any]:
    return {"client": "agent", "model": f"{provider}:{model}", "settings": settings, "steps": steps}


VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "openai-ok": (_agent("ok", [tool("check_stock", {"sku": "HAM-001"}), text("42 in stock")],
                         provider_settings={"stream": True}), {"kind": "trial", "outcome": "completed"}),
    "anthropic-ok": (_agent("claude-ok", [tool("check_stock", {"sku": "HAM-001"}), text("42 in stock")],
                            "anthropic"), {"kind": "trial", "outcome": "completed"}),
    "openai-429": (_agent("r429", [status(429)]), {"kind": "infrastructure", "what": "provider-api", "retryable": True}),
    "openai-500": (_agent("r500", [status(500)]), {"kind": "infrastructure", "what": "provider-api", "retryable": True}),
    "anthropic-529": (_agent("r529", [status(529, "Overloaded")], "anthropic"),
                      {"kind": "infrastructure", "what": "provider-api", "retryable": True}),
    "openai-drop": (_agent("drop", [drop()]), {"kind": "infrastructure", "what": "network", "retryable": True}),
    "openai-read-timeout": (_agent("slow", [slow(1.0, text("late"))], provider_settings={"timeoutSeconds": 0.3}),
                            {"kind": "infrastructure", "what": "network", "retryable": True}),
    "openai-401": (_agent("r401", [status(401, "Incorrect API key")]), SETUP),
    "openai-403": (_agent("r403", [status(403, "Forbidden")]), SETUP),
    "openai-404": (_agent("r404", [status(404, "model not found")]), SETUP),
    "openai-context-first": (_agent("ctx1", [context_length()]), SETUP),
    "openai-context-later": (_agent("ctx2", [tool("check_stock", {"sku": "HAM-001"}), context_length()]),
                             {"kind": "trial", "outcome": "context-limit"}),
    "openai-turn-limit": (_agent("loop", [tool("check_stock", {"sku": "HAM-001"})], maxTurns=2),
                          {"kind": "trial", "outcome": "turn-limit"}),
    "openai-time-limit": (_agent("stall", [slow(1.0, text("late"))], timeLimitSeconds=0.3),
                          {"kind": "trial", "outcome": "time-limit"}),
    "openai-server-fails": (_agent("unreached", [text("never")], servers={"bad": {"command": "no-such-mcp-server"}}), SETUP),
    "claude-ok": ({"client": "claude-code", "model": "claude-sonnet-4-5", "scenario": "ok"},
                  {"kind": "trial", "outcome": "completed"}),
    "claude-turn-limit": ({"client": "claude-code", "model": "claude-sonnet-4-5", "scenario": "turn_limit"},
                          {"kind": "trial", "outcome": "turn-limit"}),
    "claude-crash": ({"client": "claude-code", "model": "claude-sonnet-4-5", "scenario": "crash"},
                     {"kind": "infrastructure", "what": "client-app", "retryable": True}),
    "claude-missing": ({"client": "claude-code", "model": "claude-sonnet-4-5", "scenario": "ok",
                        "settings": {"command": ["no-such-claude"]}},
                       {"kind": "infrastructure", "what": "client-app", "retryable": False}),
    "codex-ok": ({"client": "codex", "model": "gpt-5-codex", "scenario": "ok"}, {"kind": "trial", "outcome": "completed"}),
    "codex-context-mid": ({"client": "codex", "model": "gpt-5-codex", "scenario": "context_mid"},
                          {"kind": "trial", "outcome": "context-limit"}),
    "codex-unreadable": ({"client": "codex", "model": "gpt-5-codex", "scenario": "garbage"},
                         {"kind": "infrastructure", "what": "client-app", "retryable": True}),
}

KEYS = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]  # each variant names the secrets its client gets

COMMAND_SCRIPT = r'''
import json, os, sys
events = [
    {"type": "user.message", "data": {"content": "say 42"}, "provenance": {"component": "wrapped", "phase": "agent"}},
    {"type": "model.request", "data": {"inputTokens": 11, "outputTokens": 3}, "provenance": {"component": "wrapped", "phase": "agent"}},
    {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "check_stock", "input": {"sku": "HAM-001"}, "mcpServerName": "store"}, "provenance": {"component": "wrapped", "phase": "agent"}},
    {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "toolName": "check_stock", "success": True, "output": "42", "mcpServerName": "store"}, "provenance": {"component": "wrapped", "phase": "agent"}},
    {"type": "assistant.message", "data": {"content": "42 in stock" if os.environ["OPENAI_API_KEY"] else ""}, "provenance": {"component": "wrapped", "phase": "agent"}},
]
with open(os.environ["MST_TRANSCRIPT"], "w") as fh:
    fh.writelines(json.dumps(e) + "\n" for e in events)
print("42 in stock")
'''


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


def build_eval(tmp: Path, fake: FakeProvider, mcp_url: str) -> Path:
    (tmp / "wrapped.py").write_text(COMMAND_SCRIPT)
    variants: list[dict[str, Any]] = [{
        "id": "command-transcript", "client": "command",
        "settings": {"command": [sys.executable, str(tmp / "wrapped.py")], "transcript": "transcript.jsonl"},
        "secrets": KEYS,
    }]
    for vid, (spec, _) in VARIANTS.items():
        v: dict[str, Any] = {"id": vid, "client": spec["client"], "model": spec["model"], "secrets": KEYS}
        if spec["client"] == "agent":
            fake.script(spec["model"].split(":", 1)[1], spec["steps"])
            settings = dict(spec["settings"])
            url = fake.anthropic_url if spec["model"].startswith("anthropic:") else fake.openai_url
            settings["provider"] = {"baseUrl": url, "maxRetries": 1, **settings.pop("provider_settings", {})}
            v["settings"] = settings
            v["mcpServers"] = settings.pop("servers", {"store": {"url": mcp_url}})
        else:
            v["settings"] = {**spec.get("settings", {}), "env": {"FAKE_SCENARIO": spec["scenario"]}}
            v["mcpServers"] = {"store": {"command": "python", "args": ["server.py"],
                                         "env": {"STORE_TOKEN": "${OPENAI_API_KEY}"}}}
        variants.append(v)
    variants[0]["baseline"] = True
    doc = {"name": "real-clients", "trials": 1, "concurrency": 4, "deadlineSeconds": 60,
           "cases": [{"id": "c1", "prompt": "How many claw hammers are in stock?", "expected": "42"}],
           "variants": variants, "assertions": [{"type": "contains", "value": "42"}]}
    return write_eval(tmp, doc)


def test_every_ending_end_to_end_and_the_key_never_leaks(tmp_path: Path, fake: FakeProvider) -> None:
    port = free_port()
    server = start_http_server(port)
    try:
        path = build_eval(tmp_path, fake, f"http://127.0.0.1:{port}/mcp")
        (tmp_path / "server.py").symlink_to(Path(__file__).resolve().parents[2] / "examples/quickstart/server.py")
        (tmp_path / "secrets.env").write_text(f"OPENAI_API_KEY={CANARY}\nANTHROPIC_API_KEY={CANARY}\n")
        env = {**os.environ, "COLUMNS": "160", **fake_cli_env()}
        env.pop("OPENAI_API_KEY", None)
        env.pop("ANTHROPIC_API_KEY", None)
        done, in_argv = run_mst_watching_argv(tmp_path, path, env)
        out, err = done.stdout, done.stderr
    finally:
        stop(server)
    assert in_argv == [], in_argv
    assert done.returncode == 3, out + err  # incomplete cases remain: the infrastructure failures
    assert CANARY not in out + err
    # The key did reach the provider: it was used, and kept out of everything else.
    assert any(CANARY in r.headers.get("authorization", "") + r.headers.get("x-api-key", "") for r in fake.requests)
    run = only_run(tmp_path / "runs")
    attempts, summary = check_stored_endings(run, {vid: expected for vid, (_, expected) in VARIANTS.items()})
    for vid in ("openai-ok", "anthropic-ok", "claude-ok", "codex-ok", "command-transcript"):
        assert summary[vid]["cases"]["passed"] == 1, (vid, summary[vid])
    # The command's own canonical transcript became the attempt's transcript.
    transcript = (run / attempts["command-transcript"]["transcript"]).read_text()
    assert '"toolName":"check_stock"' in transcript.replace(" ", "") and '"component":"wrapped"' in transcript
    assert attempts["command-transcript"]["ending"] == {"kind": "trial", "outcome": "completed"}
    # An agent trial against the real MCP server over HTTP recorded the server's tool result.
    agent_transcript = (run / attempts["anthropic-ok"]["transcript"]).read_text()
    assert '"mcpServerName":"store"' in agent_transcript.replace(" ", "") and '\\"total\\": 42' in agent_transcript
    assert BIN.is_dir()
