"""A JSONL transcript whose events are decoded when read (docs/graders.md, "Replay").

``mst graders run`` on a million-event session spent most of its time making Python objects:
decoding every event (some fifteen objects each) and later freeing them, while the graders
read only the events their lookups interpret (tool calls, model requests, results: about a
third) and a handful of others. :class:`LazySession` keeps the file's lines as they are and the
type of each, read from the line's first bytes when the line starts the way mst (and any
writer of ``{"type": ...}`` first, without spaces) writes an event; an event is decoded, and
checked as a canonical event, when something reads it. A line of any other shape is decoded
and checked while the file is read, exactly as :func:`mst.session.io.parse_transcript` does.

What this gives up: a line that starts like an event but is not valid JSON further on is
reported only when it is read, and a session whose such lines no grader reads grades without
the error. The lines the lookups interpret are always read, so every fact a grader uses comes
from a checked event.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, overload

import orjson

from mst.session.events import Event, is_event

# Each line's ``{"type":"<text without escapes>"`` when it starts with one (the event's own type:
# the first key of an object cannot be nested inside it), else an empty match: one item per line.
_LINE_TYPES = re.compile(rb'(?m)^(?:\{"type":"([^"\\\n]*)")?.*$')
# The same type after each newline, and at the start: when every line starts like an event (the
# common case) this finds them all without the regular-expression engine walking each line to
# its end (that walk was most of reading's cost); any other file takes the line-by-line pattern.
_NEXT_TYPES = re.compile(rb'\n\{"type":"([^"\\\n]*)"')
_FIRST_TYPE = re.compile(rb'\{"type":"([^"\\\n]*)"')


class LazySession(Sequence[Event]):
    """The events of one JSONL transcript, decoded on each read (never cached: a grader that
    reads an event twice pays twice, and memory stays the file's lines and one type per line).

    ``types[i]`` is the type of event ``i``; reading event ``i`` raises
    :class:`~mst.session.io.TranscriptError` naming ``source`` and the line when it is not a
    canonical event of that type.
    """

    __slots__ = ("_lines", "_numbers", "source", "types")

    def __init__(self, lines: list[bytes], types: list[str], numbers: list[int] | None, source: str) -> None:
        self._lines = lines
        self._numbers = numbers  # the file's line number of each event, when blank lines shift them
        self.types = types
        self.source = source

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            return [self.event(n) for n in range(*i.indices(len(self._lines)))]
        return self.event(i if i >= 0 else i + len(self._lines))

    def __iter__(self) -> Iterator[Event]:
        return map(self.event, range(len(self._lines)))

    def event(self, i: int) -> Event:
        """Event ``i`` (not negative), decoded and checked: a canonical event of the type its
        line announced. The check is inlined (orjson makes exact dicts): it runs once per event
        the lookups interpret."""
        line = self._lines[i]
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise _error(f"{self._where(i)}: not valid JSON ({exc.msg})") from None
        if value.__class__ is dict and value.get("type") == self.types[i] and value.get("data").__class__ is dict \
                and value.get("provenance").__class__ is dict:
            return value  # type: ignore[no-any-return]
        raise _error(f"{self._where(i)}: {_NOT_EVENT}")

    def _where(self, i: int) -> str:
        return f"{self.source}:{self._numbers[i] if self._numbers is not None else i + 1}"


_NOT_EVENT = "not a canonical event (needs a dotted string 'type', an object 'data' and an object 'provenance')"


def _error(message: str) -> Exception:
    from mst.session.io import TranscriptError

    return TranscriptError(message)


def lazy_jsonl(raw: bytes, source: str) -> LazySession | None:
    """``raw`` as a :class:`LazySession` when it is JSONL of two or more events, else None (a
    JSON array or one bare object, which :func:`~mst.session.io.parse_transcript` reads). Blank
    lines are skipped; lines that do not start like an event are decoded and checked here.
    Errors name ``source`` and the line. Nothing here copies the whole of ``raw``: the file's
    bytes and its lines are the only two copies ever held at once, and each line's type is
    found (and the matched bytes freed) before the lines are made."""
    first = _FIRST_TYPE.match(raw)
    found = _NEXT_TYPES.findall(raw)
    if first is not None:
        found.insert(0, first.group(1))
    texts = _texts(set(found))
    types: list[str | None] = list(map(texts.__getitem__, found))
    del found  # before the lines are made: the peak is the file, its lines and a pointer per line
    lines = raw.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the final newline
    if len(types) != len(lines) or first is None:  # some line starts otherwise: one match per line
        found = _LINE_TYPES.findall(raw)
        del found[len(lines) :]  # the empty match after the final newline
        assert len(found) == len(lines), "one match per line"
        types = list(map(_texts(set(found)).__getitem__, found))
        del found
    if len(lines) > 1 and None not in types:  # the common case: every line starts like an event
        return LazySession(lines, types, None, source)  # type: ignore[arg-type]
    numbers = [n for n, line in enumerate(lines) if line.strip()]
    if len(numbers) < 2 or lines[numbers[0]].lstrip().startswith(b"["):
        return None
    kept = [lines[n] for n in numbers]
    return LazySession(kept, [types[n] or _line_type(lines[n], n + 1, source) for n in numbers],
                       [n + 1 for n in numbers], source)


def _texts(raw_types: set[bytes]) -> dict[bytes, str | None]:
    """Each distinct type found as text (one string object per type), or None where the line
    must be decoded to know: no type found, not valid UTF-8, or no dot (then not a canonical
    event's type, and decoding the line says what is wrong with it)."""
    out: dict[bytes, str | None] = {}
    for raw_type in raw_types:
        try:
            text: str | None = raw_type.decode()
        except UnicodeDecodeError:
            text = None
        out[raw_type] = text if text and "." in text else None
    return out


def _line_type(line: bytes, lineno: int, source: str) -> str:
    """Decode one line and check it, as the eager reader does; its type."""
    try:
        value: Any = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise _error(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
    if not is_event(value):
        raise _error(f"{source}:{lineno}: {_NOT_EVENT}")
    return str(value["type"])
