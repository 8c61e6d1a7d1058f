"""Atomic file I/O, shared by every layer that writes files: a crash at any instant leaves each
file either whole or absent (temp file + rename), never torn.

A leaf module: it imports nothing from mst but the leaf :mod:`mst.errors`, so ``session`` (transcripts)
and ``runs`` (the run directory) both use it without depending on each other. The journals
(append-only records) are the run directory's own concern and live in :mod:`mst.runs.files`.
See ``docs/run-directory.md``."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from mst.errors import Problem, UserError

IO_BLOCK = 1 << 20  # bytes a run's big files are read, written or buffered in at a time


def atomic_write_bytes(path: Path | str, data: bytes, *, fsync: bool = True) -> None:
    """Temp file + rename. ``fsync=False`` for per-trial files that a (not fsynced) journal line
    follows: the rename already keeps them whole when the process dies; only run-level snapshots
    pay an fsync (milliseconds each) to also survive a power loss."""
    atomic_write_chunks(path, (data,), fsync=fsync)


def atomic_write_chunks(path: Path | str, chunks: Iterable[bytes | memoryview], *, fsync: bool = True) -> None:
    """:func:`atomic_write_bytes` of ``b"".join(chunks)``, without ever holding the whole file."""
    target = os.fspath(path)
    head, name = os.path.split(target)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:  # the directory is new: make it only then (one syscall saved per file)
        _make_dir(head or ".")
        fd = os.open(tmp, flags, 0o666)
    try:
        # Locked while written: a sweep removes a temp file only when its owner is gone
        # (mst.runs.debris, docs/run-directory.md), and a live writer's lock says it is not.
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


_CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def write_trial_file(path: str, data: bytes) -> None:
    """Write one of a trial's files (transcript, graded session, grader results).

    A new file is created exclusively and written in place: its trial's journal line is
    appended only after it, so a file a crash cut short belongs to a trial that resume does
    again, and no reader is pointed at it. A file that exists already (an attempt collected
    again, a trial graded again in place) is replaced atomically, because a journal line may
    point at it. No fsync, for the same reason as :func:`atomic_write_bytes`.

    A trial's folder (``transcripts/<variant>/<case>/``, docs/run-directory.md) is new once per
    case: when this process made its parent, the folder is made first (:func:`_new_folder`),
    which saves the create that would fail and its exception (bench/perf16_percase.md).
    """
    head = path.rpartition("/")[0]
    if head not in _MADE and head.rpartition("/")[0] in _MADE_PARENTS:
        _new_folder(head)
    try:
        fd = os.open(path, _CREATE_NEW, 0o666)
    except FileNotFoundError:
        _make_dir(head or ".")
        fd = os.open(path, _CREATE_NEW, 0o666)
    except FileExistsError:
        atomic_write_bytes(path, data, fsync=False)
        return
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


# Folders this process made: a hint of which trial folders are new, never relied on (every
# create still falls back to making the folder, and a folder made meanwhile is fine). The
# parents (a run's ``transcripts/<variant>``) are few; the trial folders are one per case, so
# that set is emptied when it grows past _MADE_MAX and memory stays flat. A case's trials are
# written close together (collected case-major, graded case by case), so the recent ones do.
_MADE_PARENTS: set[str] = set()
_MADE: set[str] = set()
_MADE_MAX = 256


def _new_folder(path: str) -> None:
    """Make ``path``, a folder expected to be new; one that exists already (another process,
    a deleted record of ours) is left for the create to use."""
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except FileNotFoundError:  # its parent went (a run directory deleted): the create's fallback makes both
        _MADE_PARENTS.discard(path.rpartition("/")[0])
        return
    _made(path)


def _made(path: str) -> None:
    if len(_MADE) >= _MADE_MAX:
        _MADE.clear()
    _MADE.add(path)


def _make_dir(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` that tries the one ``mkdir`` first: a trial file's
    folder is new once per case and its parent is there already, and ``makedirs`` would
    ``stat`` the folder and its parent before making it. When the parent had to be made too,
    it is remembered: its other subfolders are new as well (:func:`write_trial_file`)."""
    try:
        os.mkdir(path)
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)
        _MADE_PARENTS.add(os.path.dirname(path))
    except FileExistsError:
        if not os.path.isdir(path):  # a file where the folder goes: makedirs's own error
            raise
    _made(path)


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
    """Write all of ``data``; an error names ``path`` (os.write's own errors name no file).
    One ``os.write`` takes a trial file whole; only a short write makes the view to go on."""
    try:
        written = os.write(fd, data)
        if written == len(data):
            return
        with memoryview(data) as whole:
            view = whole[written:]
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
