"""Fake ``claude`` and ``codex`` CLIs: check the arguments mst passes, then replay a recorded session.

The session is a JSONL file named by ``FAKE_SCENARIO`` (a path, or a name under ``streams/<cli>/``),
in the CLI's documented output format. Lines whose object has a ``"_fake"`` key are directives,
not output: ``{"_fake": "sleep", "seconds": s}``, ``{"_fake": "exit", "code": n}``,
``{"_fake": "kill"}`` (SIGKILL itself: a crash), ``{"_fake": "raw", "text": "..."}`` (print text as
is: unreadable output), ``{"_fake": "stderr", "text": "..."}``, ``{"_fake": "spawn"}`` (start a
grandchild that would outlive a careless parent, for leak tests), and for codex
``{"_fake": "token_count", "usage": {...}}`` (one model response's usage, appended to the session's
rollout file under ``$CODEX_HOME/sessions/`` as Codex writes it; nothing when ``CODEX_HOME`` is unset
or ``--ephemeral`` is given).

Checks done the way the real CLIs would fail: a missing required flag exits 1 with a message on
stderr; an MCP server config that names an environment variable the process lacks makes the
server ``failed`` (claude), as does a server whose name starts with ``broken`` (a server that
crashes at start); codex then does what the real 0.171 does for a server marked ``required``: exit 1
with ``required MCP servers failed to initialize: <name>: <why>`` on stderr and nothing on stdout
(a failed server that is not required is left out silently). ``FAKE_RECORD`` names a file to which
the argv, the MCP config seen, and the stdin prompt are written as JSON (never the environment).
``{prompt}`` in a replayed line is replaced by the prompt read from stdin.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fail(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.exit(1)


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def claude(argv: list[str]) -> dict[str, Any]:
    if "-p" not in argv and "--print" not in argv:
        fail("fake claude: expected -p")
    if option(argv, "--output-format") != "stream-json":
        fail("fake claude: expected --output-format stream-json")
    if "--verbose" not in argv:
        fail("Error: When using --print, --output-format=stream-json requires --verbose")
    path = option(argv, "--mcp-config")
    config = json.loads(Path(path).read_text()) if path else {"mcpServers": {}}
    status: dict[str, str] = {}
    for name, server in config["mcpServers"].items():
        text = json.dumps(server)
        missing = [v for v in REF.findall(text) if v not in os.environ]
        ok = server.get("type") in ("stdio", "http") and not missing and not name.startswith("broken")
        status[name] = "connected" if ok else "failed"
    return {"servers": status, "config": config}


def codex(argv: list[str]) -> dict[str, Any]:
    if argv[:1] != ["exec"] or "--json" not in argv:
        fail("fake codex: expected `exec --json`")
    if argv[-1] != "-":
        fail("fake codex: expected the prompt on stdin (`-`)")
    servers: dict[str, dict[str, str]] = {}
    for i, arg in enumerate(argv):
        if arg == "-c":
            key, _, value = argv[i + 1].partition("=")
            parts = key.split(".")
            if parts[0] == "mcp_servers" and len(parts) == 3:
                servers.setdefault(parts[1], {})[parts[2]] = value
    status = {}
    for name, keys in servers.items():
        needed = json.loads(keys.get("env_vars", "[]"))
        needed += re.findall(r'= "([A-Za-z0-9_]+)"', keys.get("env_http_headers", ""))
        ok = ("command" in keys or "url" in keys) and all(v in os.environ for v in needed)
        ok = ok and not name.startswith("broken")
        status[name] = "connected" if ok else "failed"
    return {"servers": status, "config": servers}


def rollout_line(thread_id: str, usage: dict[str, int], total: dict[str, int]) -> None:
    """Append one ``token_count`` line (``usage``, added to the running ``total``) to the session file."""
    for key, value in usage.items():
        total[key] = total.get(key, 0) + value
    home = os.environ.get("CODEX_HOME")
    if not home or "--ephemeral" in sys.argv:  # as Codex: no session file without a home, or when ephemeral
        return
    folder = Path(home) / "sessions" / time.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"rollout-{time.strftime('%Y-%m-%d')}T00-00-00-{thread_id}.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": total, "last_token_usage": usage}}}) + "\n")


def main() -> None:
    cli, argv = sys.argv[1], sys.argv[2:]
    seen = claude(argv) if cli == "claude" else codex(argv)
    prompt = sys.stdin.read()
    record = os.environ.get("FAKE_RECORD")
    if record:
        Path(record).write_text(json.dumps({"argv": argv, "config": seen["config"], "prompt": prompt}))
    scenario = os.environ.get("FAKE_SCENARIO", "ok")
    path = Path(scenario) if "/" in scenario else HERE / "streams" / cli / f"{scenario}.jsonl"
    for name, state in seen["servers"].items():
        if state == "failed" and cli == "codex" and seen["config"][name].get("required") == "true":
            fail("Error: thread/start: thread/start failed: error creating thread: Fatal error: Failed to initialize "
                 f"session: required MCP servers failed to initialize: {name}: handshaking with MCP server failed: "
                 "connection closed: initialize response (code -32603)")
    thread_id, total = "fake-thread", {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        directive = obj.get("_fake") if isinstance(obj, dict) else None
        if directive == "sleep":
            time.sleep(float(obj["seconds"]))
        elif directive == "exit":
            sys.exit(int(obj["code"]))
        elif directive == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif directive == "raw":
            print(obj["text"], flush=True)
        elif directive == "stderr":
            sys.stderr.write(obj["text"] + "\n")
        elif directive == "spawn":
            subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif directive == "token_count":
            rollout_line(thread_id, obj["usage"], total)
        else:
            thread_id = obj.get("thread_id", thread_id)
            if cli == "claude" and obj.get("type") == "system" and obj.get("subtype") == "init":
                # A server the recording lists keeps its recorded status, unless its config is broken.
                recorded = {m.get("name"): m.get("status") for m in obj.get("mcp_servers") or []}
                obj["mcp_servers"] = [{"name": n, "status": s if s == "failed" else recorded.get(n, s)}
                                      for n, s in seen["servers"].items()]
            print(json.dumps(obj).replace("{prompt}", prompt.strip().replace('"', "'")), flush=True)


if __name__ == "__main__":
    main()
