"""Append-only journals: one record per line, one write per record, so a crash at any instant
loses at most the record being written and leaves a run that resume completes. The atomic
writing of whole files is :mod:`mst.fileio`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from mst.errors import Problem, UserError
from mst.fileio import read_lines


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

    def append(self, record: dict[str, Any]) -> bytes:
        """Journal ``record``; returns its encoding, for a store that keeps the same bytes."""
        data = orjson.dumps(record)
        os.write(self._fd, data + b"\n")
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


def _journal_record(path: Path, line: bytes, lineno: int) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise UserError(Problem(str(path), f"corrupt journal line: {exc.msg}", line=lineno)) from None
    if not isinstance(value, dict):
        raise UserError(Problem(str(path), "corrupt journal line: expected a JSON object", line=lineno))
    return value
