"""Record the real ``claude`` CLI's stream-json output into ``streams/claude/real_*.jsonl``.

The fast tests replay these through the stand-in ``claude`` (``fake_cli.py``), so the client is
checked against what the real CLI prints, not against hand-written shapes. Regenerate them after
changing the pinned version in ``tests/realtools.py``::

    python tests/clients_real/record_claude_streams.py

Each recording runs the CLI exactly as the ``claude-code`` client does (its argv and environment)
against the fake Anthropic provider on 127.0.0.1, with the stdlib MCP server ``tiny``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from fake_provider import context_length, serve, status, text, tool  # noqa: E402
from real_helpers import TINY_SERVER, variant  # noqa: E402
from tests.realtools import tool as real_tool  # noqa: E402

from mst.clients.claude_code import CONFIG_FILE, ClaudeCodeClient, mcp_config  # noqa: E402

OUT = HERE / "streams" / "claude"
MODEL = "claude-sonnet-4-5"
TINY = {"tiny": {"command": "python", "args": [str(TINY_SERVER)]}}
SLOW_TINY = {"tiny": {"command": "/bin/sh", "args": ["-c", f"sleep 2; exec {sys.executable} {TINY_SERVER}"]}}
ECHO = tool("mcp__tiny__echo", {"text": "42"})

# name -> (steps, settings, servers, extra environment)
SCENARIOS: dict[str, tuple[list[Any], dict[str, Any], dict[str, Any], dict[str, str]]] = {
    "real_ok": ([ECHO, text("42 claw hammers are in stock.")], {}, TINY, {}),
    "real_rate_limit": ([status(429, "Number of request tokens has exceeded your per-minute rate limit")],
                        {"providerRetries": 2}, {}, {}),
    "real_refused": ([text("never")], {"providerRetries": 1}, {}, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:{closed}"}),
    "real_context_first": ([context_length()], {}, {}, {}),
    "real_turn_limit": ([ECHO], {"maxTurns": 1}, TINY, {}),
    # What the CLI does when it connects MCP servers in the background (the client prevents it).
    "real_pending": ([ECHO, text("done")], {}, SLOW_TINY,
                     {"MCP_CONNECTION_NONBLOCKING": "true", "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": "0"}),
}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(name: str, url: str, claude: Path) -> bytes:
    _, settings, servers, extra = SCENARIOS[name]
    client = ClaudeCodeClient(variant("claude-code", MODEL, servers), {"command": [str(claude)], **settings},
                              HERE.parents[1])
    with tempfile.TemporaryDirectory(prefix="mst-record-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        config = work / CONFIG_FILE
        config.write_bytes(orjson.dumps(mcp_config(client.variant.mcpServers, HERE.parents[1], {}, os.environ["HOME"])))
        env = client.environment(home, {"ANTHROPIC_API_KEY": "sk-ant-recording"})
        env["ANTHROPIC_BASE_URL"] = url
        env.update({k: v.replace("{closed}", str(_closed_port())) for k, v in extra.items()})
        done = subprocess.run(client.argv(config), input=b"How many claw hammers are in stock?", cwd=work, env=env,
                              capture_output=True, timeout=120, check=False)
    return done.stdout


def main() -> None:
    claude = real_tool("claude")
    with serve() as fake:
        for name, (steps, *_rest) in SCENARIOS.items():
            fake.script(MODEL, steps)
            (OUT / f"{name}.jsonl").write_bytes(record(name, fake.anthropic_url, claude))
            print("recorded", name)


if __name__ == "__main__":
    main()
