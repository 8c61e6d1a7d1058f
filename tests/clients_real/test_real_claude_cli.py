# ruff: noqa: E501  (a table of variants reads better unwrapped)
"""Every ending of the ``claude-code`` client with the real ``claude`` CLI, through the real ``mst run``.

One eval, one case, one variant per row of the client's ending table, each with its own model
name so the fake Anthropic provider (over HTTP on 127.0.0.1) can script it. ``mst run`` runs as a
subprocess with the key from ``--secrets-file``; the test reads run.json and summary.json, the
transcripts, and what the CLI sent. The mst process's environment asks Claude Code to connect MCP
servers in the background (``MCP_CONNECTION_NONBLOCKING``, ``CLAUDE_CODE_MCP_STARTUP_WAIT_MS=0``):
the client must override that, so a server that takes 1.5 s to start is connected before the
first model request, whose tool call then reaches it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fake_anthropic_cli import no_message, refusal
from fake_provider import FakeProvider, context_length, serve, slow, status, text, tool
from real_helpers import CANARY, TINY_SERVER, check_stored_endings, cmdlines_with, of_type, run_mst_watching_argv
from tests.helpers import only_run, write_eval
from tests.realtools import tool as real_tool

pytestmark = pytest.mark.slow

SETUP = {"kind": "infrastructure", "what": "setup", "retryable": False}
PROVIDER = {"kind": "infrastructure", "what": "provider-api", "retryable": True}
NEVER_MARK = "297.5"  # a server that never answers: `sleep 297.5`, found by its argv afterwards
ECHO = tool("mcp__tiny__echo", {"text": "42"})
SLOW_TINY = {"tiny": {"command": "/bin/sh", "args": ["-c", f"sleep 1.5; exec {sys.executable} {TINY_SERVER}"]}}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# variant id -> (steps, settings, mcpServers, the ending it must be stored with)
VARIANTS: dict[str, tuple[list[Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "ok": ([ECHO, text("42 in stock")], {}, SLOW_TINY, {"kind": "trial", "outcome": "completed"}),
    "turn-limit": ([ECHO], {"maxTurns": 1}, SLOW_TINY, {"kind": "trial", "outcome": "turn-limit"}),
    "time-limit": ([slow(8, text("late"))], {"timeLimitSeconds": 2}, {}, {"kind": "trial", "outcome": "time-limit"}),
    # A persistent 429 whose retry-after keeps the CLI waiting past the client's time limit. The
    # limit leaves the CLI's start-up room on a loaded machine (at 8 s it once passed before the
    # first request had failed: a time-limit trial, rightly, but not the case under test).
    "retrying-429": ([status(429, "Number of request tokens has exceeded your per-minute rate limit",
                             retry_after="60", retry_after_ms="60000")],
                     {"timeLimitSeconds": 20, "providerRetries": 10}, {}, PROVIDER),
    "429": ([status(429, "Number of request tokens has exceeded your per-minute rate limit")], {"providerRetries": 1}, {}, PROVIDER),
    "500": ([status(500, "boom")], {"providerRetries": 0}, {}, PROVIDER),
    "529": ([status(529, "Overloaded")], {"providerRetries": 0}, {}, PROVIDER),
    "no-message": ([no_message()], {"providerRetries": 0}, {}, PROVIDER),
    "refused": ([text("never")], {"providerRetries": 0, "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:{closed}"}}, {},
                {"kind": "infrastructure", "what": "network", "retryable": True}),
    "401": ([status(401, "invalid x-api-key")], {"providerRetries": 0}, {}, SETUP),
    "404": ([], {"providerRetries": 0}, {}, SETUP),  # no script: the fake answers 404 (unknown model)
    "context-first": ([context_length()], {}, {}, SETUP),
    "context-mid": ([ECHO, context_length()], {}, SLOW_TINY, {"kind": "trial", "outcome": "context-limit"}),
    "refusal": (["refusal"], {}, {}, {"kind": "trial", "outcome": "client-error"}),
    "server-fails": ([text("never")], {}, {"store": {"command": "/bin/sh", "args": ["-c", "sleep 1; echo store: cannot open the database >&2; exit 3"]}}, SETUP),
    "server-never": ([text("never")], {"mcpStartupSeconds": 2}, {"store": {"command": "/bin/sh", "args": ["-c", f"exec sleep {NEVER_MARK}"]}}, SETUP),
    "missing": ([text("never")], {"command": ["no-such-claude"]}, {}, {"kind": "infrastructure", "what": "client-app", "retryable": False}),
    "crash": ([text("never")], {}, {"killer": {"command": "python", "args": ["-c", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"]}},
              {"kind": "infrastructure", "what": "client-app", "retryable": True}),
    "unreadable": ([text("42")], {"command": ["/bin/sh", "-c", 'echo "claude wrapper 1.0"; exec "$0" "$@"', "{claude}"]}, {},
                   {"kind": "infrastructure", "what": "client-app", "retryable": True}),
}


def model_of(vid: str) -> str:
    return f"claude-e2e-{vid}"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


def build_eval(tmp: Path, fake: FakeProvider, claude: Path) -> Path:
    variants: list[dict[str, Any]] = []
    closed = _closed_port()
    for vid, (steps, settings, servers, _) in VARIANTS.items():
        model = model_of(vid)
        if steps:
            fake.script(model, [refusal(model) if s == "refusal" else s for s in steps])
        raw = orjson.dumps({"command": [str(claude)], **settings}).decode()
        resolved = orjson.loads(raw.replace("{closed}", str(closed)).replace("{claude}", str(claude)))
        variants.append({"id": vid, "client": "claude-code", "model": model, "settings": resolved, "mcpServers": servers,
                         "secrets": ["ANTHROPIC_API_KEY"]})
    variants[0]["baseline"] = True
    doc = {"name": "real-claude", "trials": 1, "concurrency": 4, "deadlineSeconds": 60,
           "cases": [{"id": "c1", "prompt": "How many claw hammers are in stock?", "expected": "42"}],
           "variants": variants, "assertions": [{"type": "contains", "value": "42"}]}
    return write_eval(tmp, doc)


def run_mst(tmp: Path, path: Path, fake: FakeProvider) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    (tmp / "secrets.env").write_text(f"ANTHROPIC_API_KEY={CANARY}\n")
    env = {**os.environ, "COLUMNS": "160", "ANTHROPIC_BASE_URL": fake.anthropic_url,
           # What makes Claude Code connect MCP servers in the background; the client must override it.
           "MCP_CONNECTION_NONBLOCKING": "true", "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": "0"}
    env.pop("ANTHROPIC_API_KEY", None)
    done = run_mst_watching_argv(tmp, path, env, poll_s=0.05)
    # Nothing the CLIs started outlives the run: not their MCP servers, not a server that hung.
    assert cmdlines_with(str(TINY_SERVER)) == [] and cmdlines_with(f"sleep {NEVER_MARK}") == []
    return done


def events(run: Path, attempt: dict[str, Any]) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run / attempt["transcript"]).read_text().splitlines() if line.strip()]


def test_every_ending_with_the_real_claude_end_to_end(tmp_path: Path, fake: FakeProvider) -> None:
    claude = real_tool("claude")
    started = time.monotonic()
    done, in_argv = run_mst(tmp_path, build_eval(tmp_path, fake, claude), fake)
    took = time.monotonic() - started
    assert done.returncode == 3, done.stdout + done.stderr  # incomplete cases remain: the infrastructure failures
    assert in_argv == [] and CANARY not in done.stdout + done.stderr
    assert any(r.headers.get("x-api-key") == CANARY for r in fake.requests)
    run = only_run(tmp_path / "runs")
    attempts, summary = check_stored_endings(run, {vid: expected for vid, (*_, expected) in VARIANTS.items()})
    assert summary["ok"]["cases"]["passed"] == 1
    why = {vid: attempts[vid]["ending"].get("why") or attempts[vid]["ending"].get("detail") or "" for vid in VARIANTS}
    assert "Request rejected (429)" in why["429"] and "HTTP 429" in why["429"]
    assert "HTTP 429" in why["retrying-429"] and "still retrying" in why["retrying-429"]
    assert "ECONNREFUSED" in why["refused"]
    assert "'store'" in why["server-fails"] and "cannot open the database" in why["server-fails"]
    assert "'store'" in why["server-never"] and "timed out after 2000ms" in why["server-never"]
    assert "refusal" in why["refusal"]
    _check_transcripts(run, attempts, fake)
    print(f"\n{len(VARIANTS)} real-claude variants in {took:.1f} s")


def _check_transcripts(run: Path, attempts: dict[str, Any], fake: FakeProvider) -> None:
    ok = events(run, attempts["ok"])
    # The slow server was connected before the first model request: its tool ran at the first call.
    done = of_type(ok, "tool.execution_complete")
    assert [(d["toolName"], d["mcpServerName"], d["success"], d["output"]) for d in done] == [("echo", "tiny", True, "42")]
    first = next(r for r in fake.requests if r.body.get("model") == model_of("ok"))
    assert "WaitForMcpServers" not in orjson.dumps(first.body).decode()
    # One model.request per response, with its final output count (the fake's 9), before its events.
    requests = of_type(ok, "model.request")
    assert [r["outputTokens"] for r in requests] == [9, 9]
    result = of_type(ok, "session.result")[0]
    assert sum(r["inputTokens"] for r in requests) == result["usage"]["inputTokens"]
    assert sum(r["outputTokens"] for r in requests) == result["usage"]["outputTokens"] == 18
    types = [e["type"] for e in ok]
    assert types.index("model.request") < types.index("assistant.message") < types.index("tool.execution_start")
    # The CLI's retries are recorded; with providerRetries 1 there is exactly one.
    retries = of_type(events(run, attempts["429"]), "model.retry")
    assert [(r["attempt"], r["maxRetries"], r["status"], r["error"]) for r in retries] == [(1, 1, 429, "rate_limit")]
    assert len(of_type(events(run, attempts["retrying-429"]), "model.retry")) >= 1
    assert of_type(events(run, attempts["500"]), "model.retry") == []
