"""Helpers for the real-parts client tests: fake CLIs on PATH, attempt requests, process checks,
``mst run`` end to end with the canary key watched.

Imported as a module (not a conftest) so its names cannot clash with other test packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tests.helpers import load

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


def run_mst_watching_argv(
    cwd: Path, eval_path: Path, env: Mapping[str, str], poll_s: float = 0.02,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``mst run`` as a user runs it, with ``secrets.env`` in ``cwd`` as its secrets file. While it
    runs, every live process's command line is scanned for the canary key: the second value is
    each one that held it (a secret must never reach argv, so it must come back empty)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mst", "run", str(eval_path), "--runs-dir", "runs", "--secrets-file", "secrets.env"],
        cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    in_argv: list[str] = []
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        in_argv += cmdlines_with(CANARY)
        time.sleep(poll_s)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), in_argv


def check_stored_endings(
    run: Path, expected: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """No file of ``run`` holds the canary key, and each variant's one attempt is stored with the
    ending ``expected`` names for it (its subset of the ending's fields), in ``run.json`` and
    ``summary.json`` alike. Returns the attempts and the summary's variants, by variant id."""
    for file in run.rglob("*"):
        if file.is_file():
            assert CANARY.encode() not in file.read_bytes(), file
    attempts = {a["variant"]: a for a in load(run / "run.json")["attempts"]}
    summary = {v["id"]: v for v in load(run / "summary.json")["variants"]}
    for vid, want in expected.items():
        ending = attempts[vid]["ending"]
        assert {k: ending.get(k) for k in want} == want, (vid, ending)
        if want["kind"] == "infrastructure":
            assert attempts[vid]["infrastructureError"].startswith(want["what"] + ": "), vid
            assert summary[vid]["infrastructure"]["byWhat"] == {want["what"]: 1}, vid
            assert summary[vid]["cases"]["incomplete"] == 1, vid
            assert bool(summary[vid]["needsFix"]) is (not want["retryable"]), vid
        else:
            assert attempts[vid]["infrastructureError"] is None, vid
            assert summary[vid]["trials"]["outcomes"] == {want["outcome"]: 1}, vid
    return attempts, summary
