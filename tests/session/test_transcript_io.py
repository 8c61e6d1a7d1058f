"""Transcript files: one decode for well-formed JSONL, the exact line for anything else."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from mst.session.io import TranscriptError, dumps_jsonl, load_transcript, parse_transcript, write_transcript

EVENTS = [
    {"type": "user.message", "data": {"content": "line one\nline two, with a comma"}, "provenance": {"phase": "agent"}},
    {"type": "model.request", "data": {"inputTokens": 3}, "provenance": {"phase": "agent", "index": 1}},
    {"type": "session.result", "data": {"answer": "[1, 2]"}, "provenance": {"phase": "agent", "index": 2}},
]


def _slow(raw: bytes) -> list[object]:
    return [orjson.loads(line) for line in raw.split(b"\n") if line.strip()]


def test_jsonl_decodes_to_the_same_events_as_line_by_line() -> None:
    raw = dumps_jsonl(EVENTS)
    assert parse_transcript(raw, "t") == _slow(raw) == EVENTS
    assert parse_transcript(raw.replace(b"\n", b"\r\n"), "t") == EVENTS


def test_jsonl_is_one_line_per_event_each_ending_in_a_newline() -> None:
    """The bytes a transcript file holds: each event's compact JSON and a newline, nothing for
    no events (the lines are joined once, the last newline added only when there is a line)."""
    assert dumps_jsonl(EVENTS) == b"".join(orjson.dumps(e) + b"\n" for e in EVENTS)
    assert dumps_jsonl(iter(EVENTS[:1])) == orjson.dumps(EVENTS[0]) + b"\n"
    assert dumps_jsonl([]) == b""


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (dumps_jsonl(EVENTS[:1]) + b"\n" + b'{"type": "x.y", "data": {}}\n', 3),  # blank line, then no provenance
        (dumps_jsonl(EVENTS[:2]) + b'{"type": "a.b", "data": {}, "provenance": {}}, {"type": "c.d"}\n', 3),
        (dumps_jsonl(EVENTS[:1]) + b"not json\n" + dumps_jsonl(EVENTS[1:]), 2),
        (dumps_jsonl(EVENTS) + b"[1, 2]\n", 4),
    ],
)
def test_a_bad_line_is_named_whatever_surrounds_it(raw: bytes, line: int) -> None:
    with pytest.raises(TranscriptError, match=f"^t:{line}: "):
        parse_transcript(raw, "t")


def test_blank_lines_are_skipped() -> None:
    raw = dumps_jsonl(EVENTS[:1]) + b"\n  \n" + dumps_jsonl(EVENTS[1:])
    assert parse_transcript(raw, "t") == EVENTS


def test_load_transcript_gives_the_bytes_only_for_plain_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_transcript(path, EVENTS)
    events, raw = load_transcript(path)
    assert events == EVENTS and raw == path.read_bytes()
    path.write_bytes(dumps_jsonl(EVENTS[:1]) + b"\n" + dumps_jsonl(EVENTS[1:]))  # a blank line
    assert load_transcript(path) == (EVENTS, None)
    path.write_bytes(orjson.dumps(EVENTS))  # a JSON array
    assert load_transcript(path) == (EVENTS, None)
    path.write_bytes(dumps_jsonl(EVENTS).rstrip(b"\n"))  # no final newline
    assert load_transcript(path) == (EVENTS, None)
    path.write_bytes(dumps_jsonl(EVENTS) + b"\n")  # a blank last line: one newline too many
    assert load_transcript(path) == (EVENTS, None)
    path.write_bytes(dumps_jsonl(EVENTS).rstrip(b"\n") + b" \t\n")  # trailing blanks on the last line: still plain
    assert load_transcript(path) == (EVENTS, path.read_bytes())
    with pytest.raises(TranscriptError, match="missing"):
        load_transcript(tmp_path / "absent.jsonl")
