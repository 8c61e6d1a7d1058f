"""No process outlives its attempt: MCP servers of the agent client, CLI agents and what they spawn.

Each process started for an attempt carries a marker in its environment, so the test can find
any survivor in /proc, whatever re-parented it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from real_helpers import REPO, TINY_SERVER, fake_clis_on_path, run, variant
from tests.clients.clients_helpers import processes_with_env, wait_gone

from mst.clients.agent import AgentClient, AgentSettings
from mst.clients.claude_code import ClaudeCodeClient
from mst.endings import COMPLETED, Trial


async def _agent_attempts(tmp: Path, count: int, marker: str, concurrency: int = 8) -> None:
    server = {"command": "python", "args": [str(TINY_SERVER)], "env": {"MST_LEAK_MARKER": marker}}
    client = AgentClient(
        variant("agent", "mock", {"tiny": server}),
        AgentSettings.model_validate({"mock": {"steps": [{"tool": "echo", "args": {"text": "hi"}}],
                                               "answer": "{result}"}}), REPO)
    queue = iter(range(count))
    answers: list[str | None] = []

    async def worker() -> None:
        for trial in queue:
            outcome, _ = await run(client, tmp, trial=trial)
            assert outcome.ending == COMPLETED, outcome.ending
            answers.append(outcome.answer)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.aclose()
    assert answers == ["hi"] * count


async def _claude_attempts(tmp: Path, count: int, marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCENARIO", "leak")  # each run leaves a `sleep 300` grandchild behind
    client = ClaudeCodeClient(variant("claude-code", "claude-sonnet-4-5"), {"env": {"MST_LEAK_MARKER": marker}},
                              REPO)
    sem = asyncio.Semaphore(8)

    async def one(trial: int) -> None:
        async with sem:
            outcome, _ = await run(client, tmp, trial=trial)
            assert outcome.ending == COMPLETED, outcome.ending

    await asyncio.gather(*(one(t) for t in range(count)))
    # Cancelled mid-run (mst's deadline) and stopped by the client's own time budget.
    monkeypatch.setenv("FAKE_SCENARIO", "slow")
    for _ in range(3):
        task = asyncio.ensure_future(run(client, tmp, trial=0))
        await asyncio.sleep(0.4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    timed = ClaudeCodeClient(variant("claude-code", "claude-sonnet-4-5"),
                             {"env": {"MST_LEAK_MARKER": marker}, "timeLimitSeconds": 0.3}, REPO)
    outcome, _ = await run(timed, tmp)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"


async def _check(tmp: Path, agent_count: int, claude_count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"mst-leak-{uuid.uuid4()}"
    with fake_clis_on_path():
        await _claude_attempts(tmp, claude_count, marker, monkeypatch)
        await _agent_attempts(tmp, agent_count, marker)
    assert wait_gone(marker, timeout_s=10) == []
    assert processes_with_env(marker) == []
    assert all(p != os.getpid() for p in processes_with_env(marker))


async def test_200_attempts_leave_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await _check(tmp_path, 150, 50, monkeypatch)


@pytest.mark.slow
async def test_1000_attempts_leave_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await _check(tmp_path, 1000, 200, monkeypatch)
