"""run.json, results.json and comparisons.json: a small head and one long list of records.

The list holds a record per attempt (or trial, or case) — 100,000 of them in a big run — so it
is never built as one value. Written, each record is the compact JSON its store already holds,
one per line, inside an indented head::

    {
      "attempts": [
        {"variant":"a","case":"c1","trial":0,...},
        {"variant":"a","case":"c1","trial":1,...}
      ],
      "cases": [...]
    }

Read, the records come one line at a time, so memory stays flat; a file in another layout
(written by hand, or by an older mst) is read whole, as any JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from mst import fileio
from mst.config.errors import Problem, UserError
from mst.fileio import atomic_write_chunks, json_file_bytes, read_json, read_lines

_MARK = "\x00mst: the record list goes here\x00"
_PAD = b"\n    "  # a record line's indent: the list is a top-level key's value
_END = b"\n  ]"


def write_record_file(path: Path | str, head: dict[str, Any], key: str, records: Iterable[bytes], *,
                      parts: Mapping[str, Iterable[bytes]] | None = None, fsync: bool = True) -> None:
    """Atomically write ``{**head, **parts, key: [records]}``, each of ``records`` one compact JSON
    value. ``parts`` are top-level values given as their bytes in chunks, formatted as
    :func:`mst.fileio.json_file_bytes` writes a value one level down (run.json's per-case parts,
    :meth:`mst.runs.meta.RunMeta.file_head`): streamed into the file as they are, never joined
    into one document (a run of 100,000 cases would hold their bytes twice more)."""
    parts = parts or {}
    marks = {name: f"\x00mst: {name} goes here\x00" for name in parts}
    doc = json_file_bytes({**head, **marks, key: _MARK})
    listed = _span(doc, orjson.dumps(_MARK), _record_list(records))
    if not doc[:listed[0]].endswith(f'\n  "{key}": '.encode()):
        raise ValueError(f"cannot stream {key!r} into this head")
    spans = sorted([listed, *(_span(doc, orjson.dumps(marks[name]), iter(chunks)) for name, chunks in parts.items())],
                   key=itemgetter(0))

    def chunks() -> Iterator[bytes | memoryview]:
        at = 0
        for start, end, fill in spans:
            yield doc[at:start]
            yield from fill
            at = end
        yield doc[at:]

    atomic_write_chunks(path, chunks(), fsync=fsync)


def _span(doc: bytes, mark: bytes, fill: Iterator[bytes | memoryview]) -> tuple[int, int, Iterator[bytes | memoryview]]:
    """Where ``mark`` (once in ``doc``) lies, and what replaces it."""
    start = doc.find(mark)
    if start < 0 or doc.find(mark, start + 1) >= 0:
        raise ValueError("a part's place is not once in the head")
    return start, start + len(mark), fill


def _record_list(records: Iterable[bytes]) -> Iterator[bytes | memoryview]:
    opening = b"[" + _PAD
    for record in records:
        yield opening
        yield record
        opening = b"," + _PAD
    yield b"[]" if opening.startswith(b"[") else _END


@dataclass
class RecordFile:
    """A record file opened for reading: its head now, its records when iterated."""

    path: Path
    head: dict[str, Any]
    _span: tuple[int, int, int] | None  # (first record's byte, the list's end, first record's line)
    _loaded: list[Any] | None  # the list, when the file had to be read whole

    def records(self) -> Iterator[tuple[Any, int | None]]:
        """Each record with its line number (None for a file read whole)."""
        if self._loaded is not None:
            yield from ((record, None) for record in self._loaded)
            return
        assert self._span is not None
        start, end, line = self._span
        with open(self.path, "rb") as fh:
            fh.seek(start)
            for text, _ in read_lines(fh, end - start):
                yield self._decode(text, line), line
                line += 1

    def _decode(self, text: bytes, line: int) -> Any:
        body = text.strip()
        if body.endswith(b","):
            body = body[:-1]
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UserError(Problem(str(self.path), f"corrupt record: {exc.msg}", line=line)) from None


def read_record_file(path: Path, what: str, key: str) -> RecordFile:
    """Open a file :func:`write_record_file` wrote (any other JSON object is read whole)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UserError(Problem(str(path), f"{what} is missing")) from None
    span = _find_span(path, key, size)
    if span is not None:
        start, end, _ = span
        with open(path, "rb") as fh:
            before = fh.read(start)
            fh.seek(end)
            after = fh.read()
        try:
            head = orjson.loads(before[:-len(_PAD) - 1] + b"[]" + after[len(_END):])
        except orjson.JSONDecodeError:
            head = None
        if isinstance(head, dict):
            head.pop(key)
            return RecordFile(path, head, span, None)
    whole = read_json(path, what)
    if not isinstance(whole, dict):
        raise UserError(Problem(str(path), f"{what} is corrupt: expected an object"))
    loaded = whole.pop(key, [])
    if not isinstance(loaded, list):
        raise UserError(Problem(str(path), f"{what} is corrupt: {key!r} is not a list"))
    return RecordFile(path, whole, None, loaded)


def _find_span(path: Path, key: str, size: int) -> tuple[int, int, int] | None:
    """Where the one-record-per-line list of ``key`` lies, scanning in blocks; None when the file
    is laid out otherwise or the list is empty (then the file is small). A JSON string never holds
    a raw newline, so neither marker can occur inside a value."""
    opening = f'\n  "{key}": ['.encode()
    with open(path, "rb") as fh:
        data = fh.read(min(size, fileio.IO_BLOCK))
        at = data.find(opening)
        if at < 0:
            return None
        first = at + len(opening)
        if data[first:first + len(_PAD) + 1] != _PAD + b"{":
            return None
        line = data.count(b"\n", 0, first) + 2
        start = first + len(_PAD)
        newline = data.find(b"\n", start)
        if data[start:newline if newline >= 0 else len(data)].rstrip().rstrip(b",")[-1:] != b"}":
            return None  # records over several lines (an older layout)
        offset, tail = 0, data
        while True:
            found = tail.find(_END, max(start - offset, 0))
            if found >= 0:
                return start, offset + found, line
            if offset + len(tail) >= size:
                return None
            keep = tail[-len(_END):]
            offset += len(tail) - len(keep)
            tail = keep + fh.read(fileio.IO_BLOCK)


__all__ = ["RecordFile", "read_record_file", "write_record_file"]
