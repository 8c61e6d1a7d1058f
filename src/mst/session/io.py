"""Reading and writing transcripts: JSONL (one event per line) or a JSON array of events."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import orjson

from mst.session.events import Event, is_event


class TranscriptError(ValueError):
    """A transcript that cannot be read; the message names the file and line."""


def dumps_jsonl(events: Iterable[Event]) -> bytes:
    newline = orjson.OPT_APPEND_NEWLINE
    return b"".join([orjson.dumps(e, option=newline) for e in events])


def write_transcript(path: Path | str, events: Iterable[Event]) -> None:
    """Atomically write a transcript (temp file + rename): a crash never leaves half of one."""
    data = dumps_jsonl(events)
    target = os.fspath(path)
    head, name = os.path.split(target)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:  # the directory is new: make it only then
        os.makedirs(head or ".", exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, target)


def parse_transcript(raw: bytes, source: str) -> list[Event]:
    """Parse JSONL or a JSON array of canonical events; errors name ``source`` and the line."""
    stripped = raw.lstrip()
    if stripped.startswith(b"["):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TranscriptError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(value, list):
            raise TranscriptError(f"{source}: expected a JSON array of events")
        for i, item in enumerate(value):
            _check(item, f"{source}: event {i}")
        return value
    if stripped.startswith(b"{") and b"\n" not in raw.strip():
        value = _load_line(raw, f"{source}:1")
        if isinstance(value, dict) and not is_event(value) and ("trace" in value or "request" in value):
            raise TranscriptError(
                f"{source}: this looks like a legacy pre-processed trace payload; "
                "give a unified-session JSONL file or a JSON array of events"
            )
        return [_check(value, f"{source}:1")]
    events: list[Event] = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        events.append(_check(_load_line(line, f"{source}:{lineno}"), f"{source}:{lineno}"))
    return events


def read_transcript(path: Path) -> list[Event]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TranscriptError(f"{path}: transcript file is missing") from None
    return parse_transcript(raw, str(path))


def _load_line(line: bytes, where: str) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise TranscriptError(f"{where}: not valid JSON ({exc.msg})") from None


def _check(value: object, where: str) -> Event:
    if not isinstance(value, dict) or not is_event(value):
        raise TranscriptError(
            f"{where}: not a canonical event (needs a dotted string 'type', an object 'data' "
            "and an object 'provenance')"
        )
    return value
