"""Helpers for the real-parts client tests: fake CLIs on PATH, attempt requests, process checks.

Imported as a module (not a conftest) so its names cannot clash with other test packages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import VariantConfig
from mst.config.secrets import in_environment
from mst.session.events import Event

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN = HERE / "bin"
SERVER = REPO / "examples" / "quickstart" / "server.py"
TINY_SERVER = HERE / "tiny_mcp_server.py"
CANARY = "sk-canary-5d1e9b7a3f20c4"


def fake_cli_env() -> dict[str, str]:
    """Environment that puts the fake ``claude`` / ``codex`` first on PATH, run by this interpreter."""
    return {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_PYTHON": sys.executable}


def fake_clis_on_path() -> AbstractContextManager[None]:
    return in_environment(fake_cli_env())


def variant(client: str, model: str | None, servers: Mapping[str, Any] | None = None) -> VariantConfig:
    return VariantConfig.model_validate(
        {"id": "v1", "client": client, "model": model, "mcpServers": dict(servers or {})})


def request(
    client: Any, tmp: Path, *, case: str = "c1", prompt: str = "How many claw hammers are in stock?",
    trial: int = 0, secrets: Mapping[str, str] | None = None, deadline_s: float = 60.0,
) -> AttemptRequest:
    return AttemptRequest(
        case_id=case, prompt=prompt, expected="42", metadata={}, variant=client.variant, trial=trial,
        try_number=1, seed=0, deadline_s=deadline_s, artifacts_dir=tmp / "artifacts" / case / str(trial),
        transcript=TranscriptRecorder(client.variant.client), secrets=dict(secrets or {}),
    )


async def run(client: Any, tmp: Path, **kwargs: Any) -> tuple[AttemptOutcome, list[Event]]:
    req = request(client, tmp, **kwargs)
    outcome = await client.attempt(req)
    return outcome, req.transcript.events


def of_type(events: list[Event], type_: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == type_]


def children_of(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (by walking /proc parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier and p not in found}
        found |= frontier
    return found


def cmdlines_with(needle: str) -> list[str]:
    """Command lines of live processes that contain ``needle`` (argv leak detection)."""
    hits = []
    raw = needle.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if raw in cmd:
            hits.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
    return hits
