"""Fuzz: every mutated session file is either read — and its lookups and default graders then run
without an exception — or refused with a message naming the file, within 5 s and 200 MB; on
the command line (`mst graders run`), exit 0 or 2 and no traceback. Tool arguments nested 1,000
levels deep are a session like any other."""

from __future__ import annotations

import random
import time
import traceback
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from tests.graders.gsession import call, ev, request, result, rpc, start
from tests.mutate import HOSTILE_VALUES, TOKENS, FuzzLog, mutate_bytes, nested

from mst.cli import main
from mst.graders import parse_graders_config, run_graders
from mst.session.io import TranscriptError, read_transcript
from mst.session.lookups import canonical_key, create_session_lookups

LIMIT_SECONDS = 5
LIMIT_BYTES = 200 * 1024 * 1024


def _session() -> list[dict[str, Any]]:
    return [
        ev("session.format", {"version": 1}),
        ev("user.message", {"content": "find the hammer"}, ts=1000),
        request(120, 30, ts=1100),
        *call("c1", "store__search", {"query": "hammer", "limit": 5}, server="store", ts=1200),
        *call("c2", "store__get_item", {"sku": "HAM-001"}, success=False, ts=1300),
        start("c3", "bash", {"command": "ls -la"}),
        *rpc(7, "store", "get_item", {"sku": "HAM-001"}),
        ev("mcp.event", {"event": "retry", "message": "retrying"}),
        ev("assistant.message", {"content": "It costs 18.99."}, agent="sub-1"),
        request(200, 40, phase="judge"),
        result(2500, "The hammer costs 18.99."),
    ]


def _deep_value(rng: random.Random) -> bytes:
    depth = rng.choice([254, 256, 1_000, 1_023, 1_025, 5_000])
    return (b'{"k":' * depth + b"1" + b"}" * depth) if rng.random() < 0.5 else nested(depth).encode()


def _structural(rng: random.Random, events: list[dict[str, Any]]) -> bytes:
    """One event's field replaced by a hostile value (a deep one is spliced in as text, since no
    JSON encoder writes 1,000 levels)."""
    events = orjson.loads(orjson.dumps(events))
    event = rng.choice(events)
    target = event if rng.random() < 0.3 else event["data"]
    key = rng.choice([*target, "input", "arguments", "toolCallId", "success", "durationMs"])
    deep = rng.random() < 0.3
    target[key] = "@@DEEP@@" if deep else rng.choice(HOSTILE_VALUES[:-1] if key == "type" else HOSTILE_VALUES)
    if isinstance(target[key], int) and not -(2**63) <= target[key] < 2**64:
        target[key] = str(target[key])
    lines = [orjson.dumps(e) for e in events]
    raw = b"\n".join(lines) + b"\n" if rng.random() < 0.8 else b"[" + b",".join(lines) + b"]"
    return raw.replace(b'"@@DEEP@@"', _deep_value(rng)) if deep else raw


def _mutated(rng: random.Random, base: bytes, events: list[dict[str, Any]]) -> bytes:
    roll = rng.random()
    if roll < 0.4:
        return _structural(rng, events)
    if roll < 0.5:
        i = rng.randrange(len(base))
        token = rng.choice([*TOKENS, b"\n", b"{}", b"[", b'{"type":"a.b","data":{},"provenance":{}}'])
        return base[:i] + token + base[i:]
    return mutate_bytes(rng, base)


def _check(path: Path) -> str | None:
    try:
        events = read_transcript(path)
    except TranscriptError as exc:
        return None if str(exc).startswith(str(path)) else f"the message names no file: {exc}"
    except Exception:
        return traceback.format_exc(limit=-3)
    try:
        create_session_lookups(events)
        run_graders(events, parse_graders_config(None))
    except Exception:
        return traceback.format_exc(limit=-3)
    return None


def _check_cli(path: Path) -> str | None:
    out = CliRunner().invoke(main, ["graders", "run", "--json", str(path)])
    if out.exit_code not in (0, 2) or "Traceback" in out.output:
        return f"exit {out.exit_code}: {out.output[-2000:]}"
    if out.exit_code == 2 and str(path) not in out.output:
        return f"the message names no file: {out.output[-2000:]}"
    return None


def _fuzz(tmp_path: Path, seed: int, count: int, cli_every: int) -> None:
    rng = random.Random(seed)
    events = _session()
    base = b"\n".join(orjson.dumps(e) for e in events) + b"\n"
    path = tmp_path / "session.jsonl"
    log = FuzzLog(tmp_path, seed, LIMIT_SECONDS, LIMIT_BYTES)
    for i in range(count):
        path.write_bytes(_mutated(rng, base, events))
        started = time.monotonic()
        problem = _check(path)
        if problem is None and i % cli_every == 0:
            problem = _check_cli(path)
        log.record(i, path, problem, started)
    log.assert_clean(count, "sessions")


def test_tool_arguments_nested_a_thousand_levels(tmp_path: Path) -> None:
    deep = b'{"k":' * 1000 + b"1" + b"}" * 1000
    line = (b'{"type":"tool.execution_start","data":{"toolName":"t","toolCallId":"%d","input":' + deep
            + b'},"provenance":{"phase":"agent"}}\n{"type":"tool.execution_complete","data":{"toolCallId":"%d",'
            b'"success":true},"provenance":{"phase":"agent"}}\n')
    path = tmp_path / "deep.jsonl"
    path.write_bytes(line % (1, 1) + line % (2, 2))
    events = read_transcript(path)
    calls = create_session_lookups(events).tool_calls
    assert len(calls) == 2 and calls[0].args_key == calls[1].args_key
    results = {r["id"]: r for r in run_graders(events, parse_graders_config(None)).results}
    assert results["tool-success-rate"]["value"] == 1


def test_canonical_key_of_deep_values_ignores_key_order() -> None:
    def deep(*pairs: tuple[str, int]) -> dict[str, Any]:
        value: dict[str, Any] = dict(pairs)
        for _ in range(1000):
            value = {"k": value}
        return value

    assert canonical_key(deep(("a", 1), ("b", 2))) == canonical_key(deep(("b", 2), ("a", 1)))
    assert canonical_key(deep(("a", 1))) != canonical_key(deep(("a", 2)))


def test_fuzz_sessions(tmp_path: Path) -> None:
    _fuzz(tmp_path, seed=12, count=1_500, cli_every=25)


@pytest.mark.slow
def test_fuzz_sessions_long(tmp_path: Path) -> None:
    _fuzz(tmp_path, seed=7, count=10_000, cli_every=10)


@pytest.mark.parametrize("kind", ["directory", "symlink loop", "name too long"])
def test_unreadable_session_path_is_exit_2_naming_it(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("s" * 5000 if kind == "name too long" else "session.jsonl")
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink loop":
        path.symlink_to(path)
    with pytest.raises(TranscriptError, match="^" + str(path)[:200]):
        read_transcript(path)
    assert _check_cli(path) is None
