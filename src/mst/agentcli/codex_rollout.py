"""Codex's own record of a session, read as it grows: one token count per model response.

``codex exec --json`` reports usage once per turn, summed over every model response of the turn,
and says nothing of a response that produced no item (a call Codex dropped, a reply it retried).
Codex also writes the session to ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``
(one JSON object per line; ``codex-rs/protocol/src/protocol.rs`` in openai/codex), where each
completed model response leaves an ``event_msg`` line of ``type: token_count`` with
``info.last_token_usage`` (that response's tokens) and ``info.total_token_usage`` (the running
sum); on a context overflow Codex writes one more, with no input or output tokens and the window's
size as total, which is not a response and is skipped. Those lines are the per-request record mst
keeps (``model.request``) and the count of model requests actually made, which decides whether a
context overflow came on the first request.

The file is found by the thread id from ``thread.started``, in the date folders of today and
yesterday (local and UTC: Codex names the folder by its own clock) while the attempt runs, and
anywhere under ``sessions/`` at the end. A session Codex does not persist (``--ephemeral``) has
no such file: :attr:`Rollout.found` stays false and the caller falls back to what the stream
shows, never to a made-up count.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import orjson

UsageHandler = Callable[[Mapping[str, Any]], None]


def codex_home(env: Mapping[str, str]) -> Path:
    """Where the Codex process started with ``env`` keeps its state."""
    home = env.get("CODEX_HOME")
    return Path(home) if home else Path.home() / ".codex"


class Rollout:
    """Tails one session's rollout file and hands each model response's usage to ``on_usage``."""

    def __init__(self, home: Path, on_usage: UsageHandler) -> None:
        self.home = home
        self.on_usage = on_usage
        self.thread_id: str | None = None
        self.responses = 0
        self.found = False
        self._file: IO[bytes] | None = None
        self._closed = False
        self._partial = b""
        self._last_total: Any = None

    def attach(self, thread_id: str) -> None:
        self.thread_id = thread_id

    def poll(self, *, final: bool = False) -> None:
        """Read what Codex has added since the last call (``final``: the process has ended)."""
        if self.thread_id is None or self._closed:
            return
        if self._file is None:
            path = self._locate(anywhere=final)
            if path is None:
                return
            with contextlib.suppress(OSError):
                self._file = path.open("rb")
            if self._file is None:
                return
            self.found = True
        chunk = self._file.read()
        if not chunk:
            return
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for the rest
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        for line in lines:
            self._line(line)

    def close(self) -> None:
        """Read the rest (the process has ended) and let the file go; later calls do nothing."""
        self.poll(final=True)
        self._closed = True
        if self._file is not None:
            self._file.close()

    def _locate(self, *, anywhere: bool) -> Path | None:
        pattern = f"rollout-*-{self.thread_id}.jsonl"
        now = dt.datetime.now()
        days = {(now + delta).date() for delta in (dt.timedelta(0), dt.timedelta(days=-1))}
        days |= {(dt.datetime.now(dt.UTC) + dt.timedelta(days=-d)).date() for d in (0, 1)}
        for day in sorted(days, reverse=True):
            folder = self.home / "sessions" / f"{day.year:04d}" / f"{day.month:02d}" / f"{day.day:02d}"
            for path in folder.glob(pattern):
                return path
        if anywhere:
            for path in (self.home / "sessions").glob(f"*/*/*/{pattern}"):
                return path
        return None

    def _line(self, line: bytes) -> None:
        if b'"token_count"' not in line:
            return
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        payload = obj.get("payload") if isinstance(obj, dict) else None
        info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
        if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
            return
        last = info["last_token_usage"]
        if not any(isinstance(last.get(k), int) and last[k] > 0 for k in ("input_tokens", "output_tokens")):
            return  # no tokens moved: Codex marking the window full after a context overflow, not a response
        total = info.get("total_token_usage")
        if total is not None and total == self._last_total:
            return  # the same count again (Codex repeats it with rate-limit updates)
        self._last_total = total
        self.responses += 1
        self.on_usage(last)
