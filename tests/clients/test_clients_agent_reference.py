"""The agent client against the MCP project's reference servers, over stdio and streamable HTTP.

server-everything (npm) returns every kind of content, has a long-running tool that reports
progress, a task-only tool, and strict input schemas. One HTTP server-everything serves the
module; stdio tests start their own (about 0.6 s of CPU each) and close the client, so every
process a test starts is gone when it ends.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from clients_helpers import (
    agent,
    free_port,
    of_type,
    processes_with_env,
    request,
    run,
    serving,
    start_everything_http,
    stop,
    wait_gone,
)
from tests.realtools import tool

from mst.clients.agent import AgentClient
from mst.endings import COMPLETED, Infrastructure
from mst.session.events import Event

BLOB_1 = "Resource 1: This is a base64 blob"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serving(start_everything_http) as url:
        yield url


def everything(transport: str, http_url: str, marker: str = "", **extra: Any) -> dict[str, Any]:
    if transport == "http":
        return {"url": http_url, **extra}
    env = {"MST_TEST_MARKER": marker} if marker else {}
    return {"command": str(tool("server-everything")), "args": ["stdio"], "env": env, **extra}


async def attempt(client: AgentClient, tmp: Path, **kwargs: Any) -> tuple[Any, list[Event]]:
    try:
        return await asyncio.wait_for(run(client, tmp, **kwargs), 60)
    finally:
        await client.aclose()


CONTENT_STEPS = [
    {"tool": "echo", "args": {"message": "hello"}},
    {"tool": "get-tiny-image"},
    {"tool": "get-resource-reference", "args": {"resourceType": "Text", "resourceId": 3}},
    {"tool": "get-resource-reference", "args": {"resourceType": "Blob", "resourceId": 1}},
    {"tool": "get-resource-links", "args": {"count": 2}},
    {"tool": "get-structured-content", "args": {"location": "Chicago"}},
]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_every_kind_of_content_is_kept(tmp_path: Path, http_url: str, transport: str) -> None:
    script = {"steps": CONTENT_STEPS, "answer": "{results[2]}\n===\n{results[3]}\n===\n{results[4]}"}
    client = agent({"mock": script}, servers={"e": everything(transport, http_url, lifetime="variant")})
    outcome, events = await attempt(client, tmp_path)
    assert outcome.ending == COMPLETED, outcome.ending
    echo, image, text_res, blob_res, links, structured = of_type(events, "tool.execution_complete")
    assert all(d["success"] and "rejected" not in d for d in (echo, image, text_res, blob_res, links, structured))
    assert echo["output"] == "Echo: hello" and "content" not in echo  # text only: `output` says it all

    # An image: its type, size and (small enough) data in the transcript; the model is told it is there.
    [img] = [b for b in image["content"] if b["type"] == "image"]
    assert img["mimeType"] == "image/png" and img["size"] > 1000 and len(img["data"]) > 1000
    assert f"[image 1: image/png, {img['size']} bytes]" in image["output"]

    # Embedded resources keep their URI and text (the model sees both) or their blob and type.
    [res] = [b for b in text_res["content"] if b["type"] == "resource"]
    assert res["uri"] == "demo://resource/dynamic/text/3" and res["mimeType"] == "text/plain"
    assert res["text"].startswith("Resource 3: This is a plaintext resource")
    [blob] = [b for b in blob_res["content"] if b["type"] == "resource"]
    assert blob["uri"] == "demo://resource/dynamic/blob/1" and blob["mimeType"] == "text/plain"
    assert base64.b64decode(blob["blob"]).decode().startswith(BLOB_1) and blob["size"] > 20
    seen_text, seen_blob, seen_links = (outcome.answer or "").split("\n===\n")
    assert "[resource demo://resource/dynamic/text/3 (text/plain)]\nResource 3: This is a plaintext" in seen_text
    assert f"[resource demo://resource/dynamic/blob/1 (text/plain): {blob['size']} bytes of binary data]" in seen_blob

    # Resource links: URI, name, description, type.
    got_links = [b for b in links["content"] if b["type"] == "resource_link"]
    assert [(b["uri"], b["mimeType"]) for b in got_links] == [
        ("demo://resource/dynamic/blob/1", "text/plain"), ("demo://resource/dynamic/text/2", "text/plain")]
    assert all(b["name"] and b["description"] for b in got_links)
    assert "<demo://resource/dynamic/text/2>" in seen_links

    # Structured content is kept beside the text.
    assert set(structured["structuredContent"]) == {"temperature", "conditions", "humidity"}
    assert orjson.loads(structured["output"]) == structured["structuredContent"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_failures_rejections_progress_and_task_only_tools(
    tmp_path: Path, http_url: str, transport: str
) -> None:
    steps = [
        {"tool": "get-sum", "args": {"a": "one", "b": 2}},                                  # schema violation
        {"tool": "get-resource-reference", "args": {"resourceType": "Text", "resourceId": -1}},  # it raises
        {"tool": "no-such-tool"},                                                            # unknown
        {"tool": "simulate-research-query", "args": {"topic": "x"}},                         # task-only
        {"tool": "trigger-long-running-operation", "args": {"duration": 0.6, "steps": 3}},  # progress
    ]
    client = agent({"mock": {"steps": steps, "answer": "done"}}, servers={"e": everything(transport, http_url)})
    outcome, events = await attempt(client, tmp_path)
    assert outcome.ending == COMPLETED, outcome.ending
    starts = of_type(events, "tool.execution_start")
    schema, raised, unknown, task_only, slow = of_type(events, "tool.execution_complete")
    # The server said no: the call reached it (not rejected), failed, and the trial went on.
    assert schema["success"] is False and "Input validation error" in schema["error"] and "rejected" not in schema
    assert raised["success"] is False and "Invalid resourceId" in raised["error"] and "rejected" not in raised
    # mst said no, without sending the call: `rejected` in both events.
    assert unknown["rejected"] is True and starts[2]["rejected"] is True and unknown["mcpServerName"] is None
    assert "unknown tool 'no-such-tool'" in unknown["error"]
    assert task_only["rejected"] is True and task_only["mcpServerName"] == "e"
    assert "taskSupport is 'required'" in task_only["error"]
    assert [s.get("rejected", False) for s in starts] == [False, False, True, True, False]
    # The task-only tool is not offered to the model, and the transcript says so.
    [withheld] = of_type(events, "mcp.tools_withheld")
    assert withheld["server"] == "e" and withheld["tools"] == ["simulate-research-query"]
    assert "taskSupport" in withheld["reason"]
    # Progress: a token goes with every call, and the server's notifications are recorded.
    assert slow["success"] is True
    progress = of_type(events, "tool.progress")
    assert [(p["progress"], p["total"]) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {p["toolCallId"] for p in progress} == {starts[4]["toolCallId"]}
    assert all(p["mcpServerName"] == "e" and p["toolName"] == "trigger-long-running-operation" for p in progress)
    [server] = of_type(events, "mcp.server")
    assert server["server"] == "e" and server["transport"] == transport and server["lifetime"] == "attempt"


async def test_task_only_tools_are_not_in_the_model_request(tmp_path: Path, http_url: str) -> None:
    from mst.clients._mcp_pool import ServerPool

    client = agent({"mock": {"answer": "ok"}}, servers={"e": everything("http", http_url)})
    pool = ServerPool(client.variant.mcpServers, base_dir=tmp_path, startup_timeout_s=30)
    lease = await pool.acquire({})
    try:
        names = {spec.name for spec in lease.toolbox.specs}
        assert "echo" in names and "simulate-research-query" not in names
    finally:
        pool.release(lease, reusable=True)
        await pool.aclose()


async def _kill_when_called(events: list[Event], marker: str, pids: list[int]) -> None:
    """Kill the server's process group once the long call is under way (its first progress)."""
    while not of_type(events, "tool.progress"):
        await asyncio.sleep(0.02)
    for pid in pids or processes_with_env(marker):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_server_killed_mid_call_is_a_tool_failure_and_nothing_else_is_lost(
    tmp_path: Path, http_url: str, transport: str
) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    proc = None
    if transport == "http":  # a server of its own, to kill
        port = free_port()
        proc = start_everything_http(port, marker)
        server = {"url": f"http://127.0.0.1:{port}/mcp"}
    else:
        server = everything("stdio", http_url, marker)
    steps = [
        {"tool": "trigger-long-running-operation", "args": {"duration": 20, "steps": 40}},
        {"tool": "echo", "args": {"message": "after death"}},
    ]
    dying = agent({"mock": {"steps": steps, "answer": "finished"}}, servers={"e": server})
    healthy = agent({"mock": {"steps": [{"tool": "get-sum", "args": {"a": 2, "b": 3}}], "answer": "{result}",
                              "latencyMs": 300}}, servers={"e": everything("http", http_url)})
    try:
        req = request(dying, tmp_path)
        killer = asyncio.ensure_future(_kill_when_called(req.transcript.events, marker,
                                                         [proc.pid] if proc else []))
        t0 = time.monotonic()
        outcome, (other, _) = await asyncio.wait_for(
            asyncio.gather(dying.attempt(req), run(healthy, tmp_path, trial=1)), 60)
        await killer
    finally:
        await dying.aclose()
        await healthy.aclose()
        if proc is not None:
            stop(proc)
    events = req.transcript.events
    assert outcome.ending == COMPLETED and outcome.answer == "finished", outcome.ending
    assert time.monotonic() - t0 < 15, "the dead server's call must fail when it dies, not at its end"
    long_call, after = of_type(events, "tool.execution_complete")
    assert long_call["success"] is False and "tool call failed" in long_call["error"]
    assert after["success"] is False and "rejected" not in after
    if transport == "stdio":  # its stdout closed: mst knows the server is gone and says so at once
        assert "the MCP server 'e' is no longer running" in after["error"] and after["durationMs"] < 1000
    # The attempt beside it, on another server, never noticed.
    assert other.ending == COMPLETED and other.answer == "The sum of 2 and 3 is 5."
    assert wait_gone(marker) == []


@pytest.mark.slow
async def test_slow_tool_against_the_deadline_and_closing_after_the_answer(tmp_path: Path, http_url: str) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    # mst's deadline (the collector's timeout around the attempt) fires during a slow call.
    slow = agent({"mock": {"steps": [{"tool": "trigger-long-running-operation", "args": {"duration": 30}}]}},
                 servers={"e": everything("stdio", http_url, marker)})
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(3):
            await run(slow, tmp_path)
    assert time.monotonic() - t0 < 3.5, "the deadline must not wait for the busy server to stop"
    # An answer given while the server is still busy with an abandoned call is kept: the attempt
    # returns at once, and the server is stopped afterwards (it outlives the attempt briefly).
    steps = [{"tool": "trigger-long-running-operation", "args": {"duration": 30}}]
    answered = agent({"toolTimeoutSeconds": 0.3, "mock": {"steps": steps, "answer": "gave up waiting"}},
                     servers={"e": everything("stdio", http_url, marker)})
    try:
        async with asyncio.timeout(20):
            outcome, events = await run(answered, tmp_path)
        assert outcome.ending == COMPLETED and outcome.answer == "gave up waiting"
        assert len(of_type(events, "mcp.server")) == 1
        # The server closes after the attempt, in the background (stdin closed, then the process group).
        assert processes_with_env(marker), "the busy server is closed after the answer, not before it"
    finally:
        t1 = time.monotonic()
        await slow.aclose()
        await answered.aclose()
    assert time.monotonic() - t1 < 12, "closing is bounded"
    assert processes_with_env(marker) == []


@pytest.mark.slow
async def test_lifetime_variant_reuses_one_server_and_attempt_lifetime_starts_ahead(
    tmp_path: Path, http_url: str
) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    script = {"steps": [{"tool": "echo", "args": {"message": "t{trial}"}}], "answer": "{result}"}
    for lifetime in ("variant", "attempt"):
        client = agent({"mock": script}, servers={"e": everything("stdio", http_url, marker, lifetime=lifetime)})
        try:
            seen = []
            for trial in range(3):
                outcome, events = await run(client, tmp_path, trial=trial)
                assert outcome.ending == COMPLETED and outcome.answer == f"Echo: t{trial}"
                [server] = of_type(events, "mcp.server")
                seen.append(server)
            if lifetime == "variant":
                assert len({s["instanceId"] for s in seen}) == 1
                assert [s["attemptsServed"] for s in seen] == [1, 2, 3]
                assert len(processes_with_env(marker)) == 1
            else:
                assert len({s["instanceId"] for s in seen}) == 3
                assert [s["attemptsServed"] for s in seen] == [1, 1, 1]
                # Every attempt after the first finds its server started while the one before ran.
                assert [s["startedAhead"] for s in seen] == [False, True, True]
        finally:
            await client.aclose()
        assert wait_gone(marker) == []


async def test_a_variant_server_that_died_is_replaced(tmp_path: Path, http_url: str) -> None:
    marker = f"mst-test-{uuid.uuid4()}"
    script = {"steps": [{"tool": "echo", "args": {"message": "x"}}], "answer": "{result}"}
    client = agent({"mock": script}, servers={"e": everything("stdio", http_url, marker, lifetime="variant")})
    try:
        _, first = await run(client, tmp_path)
        [pid] = processes_with_env(marker)
        os.killpg(pid, signal.SIGKILL)
        assert wait_gone(marker) == []
        await asyncio.sleep(0.5)  # the event loop reads the end of the dead server's stdout
        outcome, second = await run(client, tmp_path, trial=1)
        assert outcome.ending == COMPLETED and outcome.answer == "Echo: x"
        assert of_type(second, "mcp.server")[0]["instanceId"] != of_type(first, "mcp.server")[0]["instanceId"]
    finally:
        await client.aclose()
    assert wait_gone(marker) == []


async def test_reference_server_that_never_starts_is_a_setup_failure_with_its_reason(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    server = {"command": str(tool("server-filesystem")), "args": [str(missing)]}
    client = agent(servers={"fs": server})
    outcome, events = await attempt(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure), outcome.ending
    assert outcome.ending.what == "setup" and not outcome.ending.retryable
    assert "'fs' did not start" in outcome.ending.why and str(missing) in outcome.ending.why  # from its stderr
    assert of_type(events, "model.request") == []


@pytest.mark.slow
async def test_filesystem_time_and_git_servers(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "notes.txt").write_text("remember the milk\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    servers = {
        "fs": {"command": str(tool("server-filesystem")), "args": [str(tmp_path)]},
        "time": {"command": str(tool("mcp-server-time")), "args": ["--local-timezone", "UTC"]},
        "git": {"command": str(tool("mcp-server-git")), "args": ["--repository", str(tmp_path)]},
    }
    steps = [
        {"tool": "read_text_file", "args": {"path": str(tmp_path / "notes.txt")}},
        {"tool": "get_current_time", "args": {"timezone": "UTC"}},
        {"tool": "git_status", "args": {"repo_path": str(tmp_path)}},
    ]
    client = agent({"mock": {"steps": steps, "answer": "{results[0]}|{results[1]}|{results[2]}"}}, servers=servers)
    outcome, events = await attempt(client, tmp_path)
    assert outcome.ending == COMPLETED, outcome.ending
    done = of_type(events, "tool.execution_complete")
    assert [d["success"] for d in done] == [True, True, True], done
    assert [d["mcpServerName"] for d in done] == ["fs", "time", "git"]
    fs_text, time_text, git_text = (outcome.answer or "").split("|")
    assert "remember the milk" in fs_text and "UTC" in time_text and "notes.txt" in git_text
    assert {s["server"] for s in of_type(events, "mcp.server")} == {"fs", "time", "git"}

