"""Regenerate the ``streams/codex/real_*.jsonl`` sessions from the real Codex CLI (``python capture_codex_streams.py``).

Each scenario runs the pinned ``codex exec --json`` against the fake Responses API and writes what it
printed as a session the stand-in ``bin/codex`` replays (see ``fake_cli.py``): the stdout lines as
they came, the stderr as a ``stderr`` directive, the exit status as an ``exit`` directive, and the
per-response token counts from Codex's session file as ``token_count`` directives before the turn's
end. A run that never ends on its own (an unreachable provider) is cut after its first notice and
left sleeping, as the real one does. The fast tests read these files; run this again when the pins
in ``tests/realtools.py`` change.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from fake_provider import Step, status, text, tool  # noqa: E402
from fake_responses import dead_url, serve_responses, write_codex_home  # noqa: E402
from tests.realtools import tool as real_tool  # noqa: E402

TINY = HERE / "tiny_mcp_server.py"
BROKEN = "import sys; sys.stderr.write('boom: the store database is locked\\n'); sys.exit(3)"
# name -> (script, extra codex arguments, cut after this many stdout lines or None)
SCENARIOS: dict[str, tuple[list[Step], list[str], int | None]] = {
    "real_ok": ([tool("mcp__tiny__echo", {"text": "42"}), text("42 claw hammers are in stock.")],
                ["-c", f'mcp_servers.tiny.command="{sys.executable}"', "-c", f'mcp_servers.tiny.args=["{TINY}"]',
                 "-c", "mcp_servers.tiny.required=true",
                 "-c", 'mcp_servers.tiny.default_tools_approval_mode="approve"'],
                None),
    "real_server_error": ([status(500, "The server had an error")], [], None),
    "real_unreachable": ([text("never")], ["-c", 'model_provider="dead"'], 4),
    "real_mcp_failed": ([text("never")],
                        ["-c", 'mcp_servers.broken.command="python3"',
                         "-c", f"mcp_servers.broken.args={json.dumps(['-c', BROKEN])}",
                         "-c", "mcp_servers.broken.required=true"], None),
}


def capture(name: str, home: Path, work: Path, extra: list[str], cut: int | None) -> list[dict[str, Any]]:
    env = {**os.environ, "CODEX_HOME": str(home), "MST_FAKE_KEY": "sk-fake",
           "RUST_LOG": "error,codex_rmcp_client::stdio_server_launcher=info"}
    argv = [str(real_tool("codex")), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
            "--model", name, *extra, "-"]
    proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("How many claw hammers are in stock?")
    proc.stdin.close()
    lines: list[dict[str, Any]] = []
    for raw in proc.stdout:
        lines.append(json.loads(raw))
        if cut is not None and len(lines) >= cut:
            os.killpg(proc.pid, signal.SIGKILL)  # the npm wrapper and the native binary it started
            lines.append({"_fake": "sleep", "seconds": 60})
            break
    code = proc.wait()
    stderr = "\n".join(ln for ln in proc.stderr.read().splitlines() if "PATH aliases" not in ln).strip()
    if cut is None:
        counts = []
        for path in home.glob("sessions/*/*/*/rollout-*.jsonl"):
            for ln in path.read_text().splitlines():
                payload = json.loads(ln).get("payload") or {}
                info = payload.get("info") if payload.get("type") == "token_count" else None
                if info and (info["last_token_usage"]["input_tokens"] or info["last_token_usage"]["output_tokens"]):
                    counts.append({"_fake": "token_count", "usage": info["last_token_usage"]})
        end = next((i for i, o in enumerate(lines) if o.get("type") in ("turn.completed", "turn.failed")), len(lines))
        lines[end:end] = counts
        if stderr:
            lines.append({"_fake": "stderr", "text": stderr})
        if code:
            lines.append({"_fake": "exit", "code": code})
    return lines


def main() -> None:
    with serve_responses() as fake, tempfile.TemporaryDirectory() as tmp:
        for name, (steps, extra, cut) in SCENARIOS.items():
            fake.script(name, steps)
            home = write_codex_home(Path(tmp) / name, {"fake": fake.base_url, "dead": dead_url()})
            work = Path(tmp) / f"{name}-work"
            work.mkdir()
            started = time.monotonic()
            lines = capture(name, home, work, extra, cut)
            (HERE / "streams" / "codex" / f"{name}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
            print(f"{name}: {len(lines)} lines in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
