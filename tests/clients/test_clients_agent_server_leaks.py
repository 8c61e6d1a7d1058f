"""No MCP server process outlives the collection of a run, whatever way its attempts ended.

500 attempts through the collector (as `mst run` collects them), each with a stdio server that carries a marker in its
environment, ending by every route: completed (fresh and reused servers), mst's deadline while
the model stalls and while the server is busy in a call (it reads nothing, not even the end of
its stdin), the client's time limit mid-call, and a client crash. When the collector returns —
in the same event loop, so no loop shutdown tidies up after it — /proc must hold no process
with the marker. The server is the standard-library one, so 500
starts cost seconds, not minutes.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from clients_helpers import agent, processes_with_env, run, wait_gone
from tests.helpers import basic_eval, write_eval

from mst.collect import Collector, all_attempts
from mst.config.resolve import resolve_eval
from mst.session.redact import Redactor

TINY = Path(__file__).resolve().parents[1] / "clients_real" / "tiny_mcp_server.py"
ECHO = [{"tool": "echo", "args": {"text": "hi"}}]
BUSY = [{"tool": "sleep", "args": {"seconds": 30}}]


def _variant(vid: str, marker: str, steps: list[dict[str, Any]], lifetime: str = "attempt",
             **settings: Any) -> dict[str, Any]:
    server = {"command": "python", "args": [str(TINY)], "env": {"MST_LEAK_MARKER": marker}, "lifetime": lifetime}
    mock = {"steps": steps, "answer": "{result}", **settings.pop("mock", {})}
    return {"id": vid, "client": "agent", "model": "mock", "mcpServers": {"tiny": server},
            "settings": {"maxTurns": 4, "mock": mock, **settings}}


@pytest.mark.slow
async def test_500_attempts_ending_every_way_leave_no_server_process(tmp_path: Path) -> None:
    marker = f"mst-leak-{uuid.uuid4()}"
    variants = [
        _variant("completed", marker, ECHO),
        _variant("reused", marker, ECHO, lifetime="variant"),
        _variant("deadline-model", marker, ECHO, mock={"inject": [{"failure": "deadline", "atRequest": 1}]}),
        _variant("deadline-busy", marker, BUSY, lifetime="variant"),
        _variant("time-limit", marker, BUSY, timeLimitSeconds=0.3),
        _variant("crash", marker, ECHO, mock={"inject": [{"failure": "client-crash", "atRequest": 1}]}),
    ]
    # The deadline leaves room for the first wave: 24 attempts starting 24 servers at once on a busy machine.
    doc = basic_eval(trials=84, concurrency=24, deadlineSeconds=8, variants=variants,
                     cases=[{"id": "c1", "prompt": "say hi", "expected": "hi"}], assertions=[])
    resolved = resolve_eval(write_eval(tmp_path, doc))
    records: list[dict[str, Any]] = []
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=records.append)
    await collector.run(all_attempts(resolved))
    left = processes_with_env(marker)
    assert len(records) == 504
    routes = Counter((r["variant"], r["ending"].get("outcome") or r["ending"]["what"]) for r in records)
    expected = {"completed": "completed", "reused": "completed", "deadline-model": "deadline",
                "deadline-busy": "deadline", "time-limit": "time-limit", "crash": "client-app"}
    # On a loaded machine a server of the first wave may start too late for the deadline: that
    # attempt ends by the deadline route instead, and must leave nothing behind either.
    assert set(routes) <= {*expected.items(), *((v, "deadline") for v in expected)}, routes
    assert all(routes[(v, ending)] >= 75 for v, ending in expected.items()), routes
    assert left == []


async def test_what_a_server_leaves_running_is_killed_with_it(tmp_path: Path) -> None:
    # The server exits as soon as its stdin ends, so the SDK never signals its process group; the
    # helper it started in the background (a `sleep`, holding the server's stderr) must not survive.
    marker = f"mst-leak-{uuid.uuid4()}"
    server = {"command": "sh", "args": ["-c", f"sleep 300 & exec {sys.executable} {TINY}"],
              "env": {"MST_LEAK_MARKER": marker}, "lifetime": "variant"}
    client = agent({"mock": {"steps": ECHO, "answer": "{result}"}}, servers={"tiny": server})
    try:
        outcome, _ = await run(client, tmp_path)
        assert outcome.answer == "hi", outcome.ending
        assert len(processes_with_env(marker)) == 2  # the server and its helper
    finally:
        await client.aclose()
    assert wait_gone(marker, timeout_s=2) == []
