"""Packs: a run's per-trial files (transcripts, artifacts, grader files) stored as a few tar
objects instead of one object per file (docs/result-store.md, "Layout").

A 20,000-attempt run holds tens of thousands of small files; one request each would make an
upload to an object store take minutes where copying the directory takes seconds. A pack is a
plain ustar/GNU tar (``tar tf`` lists it), built the same way from the same files every time
(sorted names, fixed modes and times), so a re-upload produces byte-identical packs and skips
those already stored. The manifest records where each file's bytes start in its pack, so one
file can be read with a range request and checked against its own SHA-256.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field

PACK_BYTES = 32 * 1024 * 1024  # below s3fs's multipart threshold: a pack's ETag stays its MD5
_BLOCK = tarfile.BLOCKSIZE


@dataclass(frozen=True, slots=True)
class Member:
    path: str  # relative to the run directory
    size: int
    sha256: str
    offset: int  # where its bytes start in the pack
    key: str  # the pack's object key


@dataclass
class Pack:
    key: str
    data: bytes
    members: list[Member]


@dataclass
class PackWriter:
    """Add files in order; a full pack comes back from :meth:`add`, the last from :meth:`close`."""

    group: str
    limit: int = PACK_BYTES
    _count: int = 0
    _buffer: io.BytesIO = field(default_factory=io.BytesIO)
    _tar: tarfile.TarFile | None = None
    _members: list[Member] = field(default_factory=list)

    def add(self, path: str, data: bytes, sha256: str) -> tuple[Member, Pack | None]:
        """Add a file; its member, and the pack when this file filled it."""
        if self._tar is None:
            self._tar = tarfile.open(fileobj=self._buffer, mode="w", format=tarfile.GNU_FORMAT)  # noqa: SIM115 (closed by close())
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), 0o644, 0
        self._tar.addfile(info, io.BytesIO(data))
        padded = -(-len(data) // _BLOCK) * _BLOCK
        member = Member(path, len(data), sha256, self._tar.offset - padded, self._key())
        self._members.append(member)
        return member, (self.close() if self._tar.offset >= self.limit else None)

    def _key(self) -> str:
        return f"packs/{self.group}-{self._count:05d}.tar"

    def close(self) -> Pack | None:
        if self._tar is None:
            return None
        self._tar.close()
        pack = Pack(self._key(), self._buffer.getvalue(), self._members)
        self._count += 1
        self._buffer, self._tar, self._members = io.BytesIO(), None, []
        return pack


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def slices(data: bytes, members: list[tuple[str, int, int | None]]) -> Iterator[tuple[str, bytes]]:
    """Each (path, size, offset) member's bytes from an object (offset None: the whole object)."""
    for path, size, offset in members:
        yield path, data if offset is None else data[offset:offset + size]
