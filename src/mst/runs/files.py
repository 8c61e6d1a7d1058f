"""Atomic files and append-only journals: a crash at any instant leaves a readable run."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from mst.config.errors import Problem, UserError


def atomic_write_bytes(path: Path | str, data: bytes, *, fsync: bool = True) -> None:
    """Temp file + rename. ``fsync=False`` for per-trial files that a (not fsynced) journal line
    follows: the rename already keeps them whole when the process dies; only run-level snapshots
    pay an fsync (milliseconds each) to also survive a power loss."""
    atomic_write_chunks(path, (data,), fsync=fsync)


def atomic_write_chunks(path: Path | str, chunks: Iterable[bytes], *, fsync: bool = True) -> None:
    """:func:`atomic_write_bytes` of ``b"".join(chunks)``, without ever holding the whole file."""
    target = os.fspath(path)
    head, name = os.path.split(target)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:  # the directory is new: make it only then (one syscall saved per file)
        os.makedirs(head or ".", exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        buffered: list[bytes] = []
        size = 0
        for chunk in chunks:
            buffered.append(chunk)
            size += len(chunk)
            if size >= 1 << 20:
                _write_all(fd, b"".join(buffered))
                buffered.clear()
                size = 0
        if buffered:
            _write_all(fd, buffered[0] if len(buffered) == 1 else b"".join(buffered))
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, target)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write_json(path: Path | str, value: Any, *, fsync: bool = True) -> None:
    atomic_write_bytes(path, orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n",
                       fsync=fsync)


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
_LIST_MARK = "\x00mst: the streamed list goes here\x00"


def atomic_write_json_list(path: Path | str, head: dict[str, Any], key: str, items: Iterable[Any], *,
                           fsync: bool = True) -> None:
    """Exactly the bytes of ``atomic_write_json(path, {**head, key: list(items)})``, written one
    item at a time: a 100,000-item list is never in memory as one value or as one bytes object."""
    doc = orjson.dumps({**head, key: _LIST_MARK}, option=_JSON_OPTIONS) + b"\n"
    mark = orjson.dumps(_LIST_MARK)
    if doc.count(mark) != 1:  # the head itself holds the mark: write it the plain way
        atomic_write_json(path, {**head, key: list(items)}, fsync=fsync)
        return
    before, _, after = doc.partition(mark)
    line = before[before.rfind(b"\n") + 1:]
    indent = len(line) - len(line.lstrip(b" "))
    pad = b"\n" + b" " * (indent + 2)

    def chunks() -> Iterator[bytes]:
        yield before
        first = True
        for item in items:
            body = orjson.dumps(item, option=_JSON_OPTIONS).replace(b"\n", pad)
            yield (b"[" if first else b",") + pad + body
            first = False
        yield b"[]" if first else b"\n" + b" " * indent + b"]"
        yield after

    atomic_write_chunks(path, chunks(), fsync=fsync)


def read_json(path: Path, what: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(Problem(str(path), f"{what} is missing")) from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        line = raw.count(b"\n", 0, exc.pos) + 1
        raise UserError(Problem(str(path), f"{what} is corrupt: {exc.msg}", line=line)) from None


class Journal:
    """Append-only JSON lines, one ``os.write`` per record.

    A single write of a line to an O_APPEND file reaches the kernel whole, so a SIGKILL can lose
    at most the record being built, never tear one already written. No fsync per line: the
    journal survives the process dying, which is what resume needs.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: dict[str, Any]) -> None:
        os.write(self._fd, orjson.dumps(record) + b"\n")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_journal(path: Path, *, repair: bool = False) -> Iterator[dict[str, Any]]:
    """Records of a journal. A bad line is an error naming the file and line.

    The only exception is a final line with no newline: that is a record whose write a crash
    cut short. With ``repair`` (resume) it is dropped from the file; otherwise it is an error.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    lines = raw.split(b"\n")
    torn = lines[-1] if lines and lines[-1] else None
    if torn is not None:
        if not repair:
            raise UserError(Problem(str(path), "last line is truncated (a crash cut it short); "
                                    "run `mst run --resume` to complete the run", line=len(lines)))
        with open(path, "r+b") as fh:
            fh.truncate(len(raw) - len(torn))
    for lineno, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UserError(Problem(str(path), f"corrupt journal line: {exc.msg}", line=lineno)) from None
        if not isinstance(value, dict):
            raise UserError(Problem(str(path), "corrupt journal line: expected a JSON object", line=lineno))
        yield value
