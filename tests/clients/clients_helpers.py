"""Helpers shared by the client tests: variants, attempt requests, transcript lookups, processes.

Imported as a module (not a conftest), so helper names cannot clash with other test packages.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mst.clients.agent import AgentClient, AgentSettings
from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import VariantConfig
from mst.session.events import Event

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "examples" / "quickstart" / "server.py"


def variant(model: str | None = "mock", servers: Mapping[str, Any] | None = None, **extra: Any) -> VariantConfig:
    return VariantConfig.model_validate({"id": "v1", "model": model, "mcpServers": dict(servers or {}), **extra})


def agent(
    settings: Mapping[str, Any] | None = None,
    *,
    model: str | None = "mock",
    servers: Mapping[str, Any] | None = None,
    base_dir: Path = REPO,
) -> AgentClient:
    v = variant(model, servers)
    return AgentClient(v, AgentSettings.model_validate(dict(settings or {})), base_dir)


def request(
    client: Any,
    tmp: Path,
    *,
    case: str = "c1",
    prompt: str = "How many claw hammers are in stock?",
    expected: Any = "42",
    trial: int = 0,
    try_number: int = 1,
    seed: int = 0,
    deadline_s: float = 60.0,
    metadata: Mapping[str, Any] | None = None,
    case_mock: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
) -> AttemptRequest:
    return AttemptRequest(
        case_id=case,
        prompt=prompt,
        expected=expected,
        metadata=dict(metadata or {}),
        variant=client.variant,
        trial=trial,
        try_number=try_number,
        seed=seed,
        deadline_s=deadline_s,
        artifacts_dir=tmp / "artifacts" / case / str(trial),
        transcript=TranscriptRecorder("test"),
        secrets=dict(secrets or {}),
        case_mock=case_mock,
    )


async def run(client: Any, tmp: Path, **kwargs: Any) -> tuple[AttemptOutcome, list[Event]]:
    req = request(client, tmp, **kwargs)
    outcome = await client.attempt(req)
    return outcome, req.transcript.events


def types(events: list[Event]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[Event], type_: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == type_]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_with_env(marker: str) -> list[int]:
    """Live processes (of this user) whose environment carries ``marker``: leak detection."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != b"Z":
            found.append(int(entry))
    return found


def wait_gone(marker: str, timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = processes_with_env(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def start_http_server(port: int, argv: list[str] | None = None,
                      env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """An MCP server over streamable HTTP on 127.0.0.1:port (by default the quickstart server),
    in a session of its own, waited for until it listens."""
    # stderr to a file, not a pipe nobody reads: a chatty server must never block on a full pipe.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            argv or [sys.executable, str(SERVER), "--http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the HTTP MCP server exited with {proc.returncode}: {log.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return proc
            except OSError:
                time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the HTTP MCP server did not listen within 60 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_everything_http(port: int, marker: str = "") -> subprocess.Popen[bytes]:
    """The reference server-everything over streamable HTTP (it reads its port from PORT)."""
    from tests.realtools import tool

    env = {"PORT": str(port), **({"MST_TEST_MARKER": marker} if marker else {})}
    return start_http_server(port, [str(tool("server-everything")), "streamableHttp"], env)


@contextmanager
def serving(start: Callable[[int], subprocess.Popen[bytes]] = start_http_server) -> Iterator[str]:
    """The URL of an HTTP MCP server started on a free port for the block, stopped after it."""
    port = free_port()
    proc = start(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)
