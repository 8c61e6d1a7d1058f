"""Reading and writing transcripts: JSONL (one event per line) or a JSON array of events."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson

from mst.fileio import read_bytes, write_trial_file
from mst.session.events import Event, all_events, is_event
from mst.session.lazy import lazy_jsonl


class TranscriptError(ValueError):
    """A transcript that cannot be read; the message names the file and line."""


def dumps_jsonl(events: Iterable[Event]) -> bytes:
    """One line per event, each ending in a newline: the lines joined by one ``join`` and the
    last newline added once (an option on every ``orjson.dumps`` and a list of the lines cost
    ~2.4 k instructions a transcript more, bench/perf16_collect.md)."""
    lines = b"\n".join(map(orjson.dumps, events))
    return lines + b"\n" if lines else lines


def write_transcript(path: Path | str, events: Iterable[Event]) -> None:
    """Write a transcript as JSONL; see :func:`write_trial_file` for why a crash never leaves
    half of one where a run points."""
    write_trial_file(os.fspath(path), dumps_jsonl(events))


def parse_transcript(raw: bytes, source: str) -> list[Event]:
    """Parse JSONL or a JSON array of canonical events; errors name ``source`` and the line."""
    return _parsed(raw, source)[0]


def _parsed(raw: bytes, source: str) -> tuple[list[Event], bool]:
    """:func:`parse_transcript`, and whether ``raw`` is plain JSONL (one event per line, each
    ending in a newline): told without counting the lines again when one decode read them."""
    stripped = raw.lstrip()
    body = raw.rstrip()  # copied once (a transcript ends in a newline), read by every test below
    if stripped.startswith(b"["):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TranscriptError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(value, list):
            raise TranscriptError(f"{source}: expected a JSON array of events")
        for i, item in enumerate(value):
            _check(item, f"{source}: event {i}")
        return value, raw.endswith(b"\n") and raw.count(b"\n") == len(value) and not raw.startswith(b"[")
    if stripped.startswith(b"{") and body.find(b"\n", len(raw) - len(stripped)) < 0:  # one line
        value = _load_line(raw, f"{source}:1")
        if isinstance(value, dict) and not is_event(value) and ("trace" in value or "request" in value):
            raise TranscriptError(
                f"{source}: this looks like a legacy pre-processed trace payload; "
                "give a unified-session JSONL file or a JSON array of events"
            )
        return [_check(value, f"{source}:1")], raw.count(b"\n") == 1 and raw.endswith(b"\n")
    events = _jsonl_events(body)
    if events is not None:  # one event per line of the body: plain when one newline follows it
        return events, raw.endswith(b"\n") and raw.count(b"\n", len(body)) == 1
    events = []  # the slow path, line by line, finds and names what is wrong
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        events.append(_check(_load_line(line, f"{source}:{lineno}"), f"{source}:{lineno}"))
    return events, raw.endswith(b"\n") and raw.count(b"\n") == len(events)


def _jsonl_events(body: bytes) -> list[Event] | None:
    """Well-formed JSONL (``body``: the file without its trailing whitespace) decoded in one
    call (a JSON string never holds a raw newline, so the lines joined by commas are an array),
    or None when any line is blank, bad or not an event. One decode instead of one per line:
    this runs once per trial graded."""
    if not body:
        return None
    try:
        value = orjson.loads(b"".join((b"[", body.replace(b"\n", b","), b"]")))
    except orjson.JSONDecodeError:
        return None
    if len(value) != body.count(b"\n") + 1 or not all_events(value):
        return None
    return value  # type: ignore[no-any-return]


def read_transcript(path: Path | str) -> list[Event]:
    return load_transcript(path)[0]


def load_transcript(path: Path | str) -> tuple[list[Event], bytes | None]:
    """The events, and the file's bytes when they are plain JSONL (one event per line, ending
    in a newline): a copy of the session can then reuse the bytes instead of encoding again."""
    raw = _read_raw(path)
    events, plain = _parsed(raw, os.fspath(path))
    return events, raw if plain else None


def read_transcript_lazily(path: Path | str) -> Sequence[Event]:
    """A transcript to replay: JSONL as a :class:`~mst.session.lazy.LazySession` (events decoded
    when read, see there for what is checked when), any other form as :func:`read_transcript`."""
    raw = _read_raw(path)
    source = os.fspath(path)
    return lazy_jsonl(raw, source) or parse_transcript(raw, source)


def _read_raw(path: Path | str) -> bytes:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        raise TranscriptError(f"{path}: transcript file is missing (evidence lost: `mst run --resume RUN` "
                              "collects this attempt again)") from None
    except IsADirectoryError:
        raise TranscriptError(f"{path}: is a directory, expected a transcript file") from None
    except OSError as exc:
        if exc.errno not in _BAD_PATH:
            raise  # a fault of the disk, not of the path: the caller reports it
        raise TranscriptError(f"{path}: cannot read the transcript: {exc.strerror}") from None


_BAD_PATH = frozenset({errno.ELOOP, errno.ENAMETOOLONG})  # a symlink loop, a name too long


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
