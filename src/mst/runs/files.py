"""Atomic files and append-only journals: a crash at any instant leaves a readable run."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from mst.config.errors import Problem, UserError

IO_BLOCK = 1 << 20  # bytes a run's big files are read, written or buffered in at a time


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
        # Locked while written: a sweep removes a temp file only when its owner is gone
        # (mst.runs.debris), and a live writer's lock says it is not.
        fcntl.flock(fd, fcntl.LOCK_EX)
        buffered = bytearray()  # copies: orjson's bytes keep KBs of spare buffer each
        for chunk in chunks:
            buffered += chunk
            if len(buffered) >= IO_BLOCK:
                _write_all(fd, buffered, target)
                buffered.clear()
        if buffered:
            _write_all(fd, buffered, target)
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, target)
    except OSError:
        os.unlink(tmp)
        raise


def write_trial_file(path: str, data: bytes) -> None:
    """Write one of a trial's files (transcript, graded session, grader results).

    A new file is created exclusively and written in place: its trial's journal line is
    appended only after it, so a file a crash cut short belongs to a trial that resume does
    again, and no reader is pointed at it. A file that exists already (an attempt collected
    again, a trial graded again in place) is replaced atomically, because a journal line may
    point at it. No fsync, for the same reason as :func:`atomic_write_bytes`.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        atomic_write_bytes(path, data, fsync=False)
        return
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


def read_bytes(path: str | Path) -> bytes:
    """A whole file in as few system calls as it takes (no buffered file object): runs read
    one transcript per trial graded."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        chunks = [data]  # the file grew since fstat: read on to its end
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | bytearray, path: str | Path) -> None:
    """Write all of ``data``; an error names ``path`` (os.write's own errors name no file)."""
    try:
        with memoryview(data) as whole:
            view = whole
            while view:
                view = view[os.write(fd, view):]
            del view
    except OSError as exc:
        raise named(exc, path) from None


def named(exc: OSError, path: str | Path) -> OSError:
    """``exc`` with ``path`` as its file name when it has none: a full disk must say where."""
    if exc.filename is not None:
        return exc
    return type(exc)(exc.errno, exc.strerror, os.fspath(path))


def json_file_bytes(value: Any) -> bytes:
    """How every JSON file of a run is written: indented, keys sorted, a final newline."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def atomic_write_json(path: Path | str, value: Any, *, fsync: bool = True) -> None:
    atomic_write_bytes(path, json_file_bytes(value), fsync=fsync)


def read_json(path: Path, what: str) -> Any:
    try:
        raw = read_bytes(path)
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
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)

    def append(self, record: dict[str, Any]) -> bytes:
        """Journal ``record``; returns its encoding, for a store that keeps the same bytes."""
        data = orjson.dumps(record)
        line = data + b"\n"
        try:
            written = os.write(self._fd, line)
        except OSError as exc:
            raise named(exc, self.path) from None
        if written != len(line):  # a full disk took part of the line: take it back, say so
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(self.path))
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_journal(path: Path, *, repair: bool = False) -> Iterator[dict[str, Any]]:
    """Records of a journal (see :func:`read_journal_lines`)."""
    for _, record, _ in read_journal_lines(path, repair=repair):
        yield record


def read_journal_lines(path: Path, *, repair: bool = False) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """(line number, record, the line's bytes) of a journal, read in blocks (memory stays flat).
    A bad line is an error naming the file and line.

    The only exception is a final line with no newline: that is a record whose write a crash
    cut short. With ``repair`` (resume) it is dropped from the file; otherwise it is an error.
    """
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after the last block
    except FileNotFoundError:
        return
    lineno, size, torn = 0, 0, b""
    with fh:
        for line, whole in read_lines(fh):
            size += len(line) + whole
            if not whole:
                torn = line
            elif line.strip():
                yield lineno + 1, _journal_record(path, line, lineno + 1), line
            lineno += whole
    if torn:
        if not repair:
            raise UserError(Problem(str(path), "last line is truncated (a crash cut it short); "
                                    "run `mst run --resume` to complete the run", line=lineno + 1))
        with open(path, "r+b") as out:
            out.truncate(size - len(torn))


def read_lines(fh: BinaryIO, length: int | None = None) -> Iterator[tuple[bytes, bool]]:
    """The lines of ``fh`` from where it stands (``length`` bytes, or to its end), read
    :data:`IO_BLOCK` bytes at a time: (line without its newline, whether a newline ended it).
    Only the last may lack one."""
    remaining = length if length is not None else -1
    carry = b""
    while remaining:
        block = fh.read(IO_BLOCK if remaining < 0 else min(IO_BLOCK, remaining))
        if not block:
            break
        remaining -= len(block) if remaining > 0 else 0
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        for line in lines:
            yield line, True
    if carry:
        yield carry, False


def _journal_record(path: Path, line: bytes, lineno: int) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise UserError(Problem(str(path), f"corrupt journal line: {exc.msg}", line=lineno)) from None
    if not isinstance(value, dict):
        raise UserError(Problem(str(path), "corrupt journal line: expected a JSON object", line=lineno))
    return value
