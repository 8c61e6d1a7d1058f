"""`lifetime: variant`: one server instance serves the variant's concurrent attempts
(docs/mcp-servers.md), each attempt keeping its own results; an instance left in an unknown
state is retired for the next attempts and closed once its last attempt is done."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from clients_helpers import agent, of_type, processes_with_env, run, wait_gone
from tests.realtools import tool

from mst.endings import COMPLETED


def _everything(marker: str) -> dict[str, Any]:
    return {"command": str(tool("server-everything")), "args": ["stdio"], "env": {"MST_TEST_MARKER": marker},
            "lifetime": "variant"}


async def test_concurrent_attempts_share_one_server_and_keep_their_own_results(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    script = {"steps": [{"tool": "echo", "args": {"message": "t{trial}"}}], "answer": "{result}"}
    client = agent({"mock": script}, servers={"e": _everything(marker)})
    try:
        async with asyncio.timeout(60):
            done = await asyncio.gather(*(run(client, tmp_path, trial=t) for t in range(6)))
            assert len(processes_with_env(marker)) == 1  # one start for six attempts at once
            more = await run(client, tmp_path, trial=6)
    finally:
        await client.aclose()
    assert wait_gone(marker) == []
    for trial, (outcome, events) in enumerate([*done, more]):
        assert outcome.ending == COMPLETED and outcome.answer == f"Echo: t{trial}"
        [call] = of_type(events, "tool.execution_complete")
        assert call["output"] == f"Echo: t{trial}"  # each attempt records its own call, not another's
    servers = [of_type(events, "mcp.server")[0] for _, events in [*done, more]]
    assert len({s["instanceId"] for s in servers}) == 1
    assert sorted(s["attemptsServed"] for s in servers) == list(range(1, 8))
    assert max(s["attemptsSharing"] for s in servers) > 1  # they ran at once, on the one instance
    assert servers[-1]["attemptsSharing"] == 1


async def test_an_abandoned_call_retires_the_shared_server_for_the_next_attempts(tmp_path: Path) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    steps = [{"tool": "trigger-long-running-operation", "args": {"duration": 5, "steps": 5}}]
    client = agent({"toolTimeoutSeconds": 0.5, "mock": {"steps": steps, "answer": "gave up"}},
                   servers={"e": _everything(marker)})
    try:
        async with asyncio.timeout(60):
            first = await asyncio.gather(*(run(client, tmp_path, trial=t) for t in range(2)))
            later, events = await run(client, tmp_path, trial=2)
    finally:
        await client.aclose()
    assert wait_gone(marker) == []
    assert all(outcome.answer == "gave up" for outcome, _ in first) and later.answer == "gave up"
    ids = [of_type(ev, "mcp.server")[0]["instanceId"] for _, ev in first]
    assert ids[0] == ids[1]  # the two concurrent attempts shared one instance
    assert of_type(events, "mcp.server")[0]["instanceId"] != ids[0]  # its state unknown: a fresh one
