"""Reading Codex's session file as it grows: one usage per model response, nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mst.agentcli.codex_rollout import Rollout, codex_home

THREAD = "01a232ae-0315-7e32-94b1-110f7c0c11ea"


def token_count(last: dict[str, int], total: dict[str, int]) -> bytes:
    info = {"total_token_usage": total, "last_token_usage": last, "model_context_window": 1000}
    return json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": info}}).encode() + b"\n"


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def test_one_usage_per_response_as_the_file_grows(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "2025" / "01" / "02"  # not today: found only in the final look
    folder.mkdir(parents=True)
    path = folder / f"rollout-2025-01-02T03-04-05-{THREAD}.jsonl"
    first, second = usage(100, 5), usage(130, 6)
    line = token_count(first, first)
    path.write_bytes(b'{"type":"session_meta","payload":{}}\n' + line + line)  # the same count twice
    seen: list[dict[str, Any]] = []
    rollout = Rollout(tmp_path, seen.append)
    rollout.poll()  # no thread id yet: nothing to look for
    rollout.attach(THREAD)
    rollout.poll()
    assert not rollout.found and seen == []  # outside today's folders while the attempt runs
    rollout.poll(final=True)
    assert rollout.found and seen == [first]
    window_full = token_count({"input_tokens": 0, "output_tokens": 0, "total_tokens": 1000}, usage(100, 900))
    later = token_count(second, usage(230, 11))
    with path.open("ab") as fh:
        fh.write(window_full + later[:20])  # Codex is still writing the last line
    rollout.poll()
    assert seen == [first]
    with path.open("ab") as fh:
        fh.write(later[20:])
    rollout.close()
    assert seen == [first, second] and rollout.responses == 2
    rollout.close()  # a second close reads nothing and does not fail


def test_no_session_file_is_not_found(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path, lambda usage: None)
    rollout.attach(THREAD)
    rollout.close()
    assert (rollout.found, rollout.responses) == (False, 0)


def test_codex_home() -> None:
    assert codex_home({"CODEX_HOME": "/x/y"}) == Path("/x/y")
    assert codex_home({}) == Path.home() / ".codex"
