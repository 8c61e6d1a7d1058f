"""A run's records kept off the heap: memory stays flat as the number of attempts grows.

A 100,000-attempt run holds an attempt record and a grading record per attempt (1-2 KB of JSON
each, five to ten times that as Python dicts). :class:`RecordStore` is a mapping that keeps only
an index in memory and the records, as JSON, in an unlinked temporary file (in the page cache,
not in the process). Reading a record decodes a fresh dict: mutating it does not change the
store; assign it back instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from typing import IO, Any, TypeVar

import orjson

K = TypeVar("K", bound=Hashable)

_FLUSH_AT = 1 << 20  # bytes buffered before one write to the spill file
_LEN_BITS = 32


def _intern_key(key: Any) -> Any:
    """Share the strings of (variant, case, trial) keys: one copy per id, not per record."""
    if type(key) is tuple:
        return tuple(sys.intern(p) if type(p) is str else p for p in key)
    return key


class RecordStore(MutableMapping[K, dict[str, Any]]):
    """``key -> JSON object`` with the objects spilled to a temporary file."""

    __slots__ = ("_file", "_flushed", "_index", "_pending", "_size", "_summaries", "_summarize")

    def __init__(self, items: Any = None, *, summarize: Callable[[dict[str, Any]], Any] | None = None) -> None:
        """``summarize`` keeps a small value per record in memory (an attempt's ending), so
        readers that need only that never decode the record again."""
        self._index: dict[K, int] = {}  # key -> offset << 32 | length
        self._summarize = summarize
        self._summaries: dict[K, Any] = {}
        self._file: IO[bytes] | None = None
        self._size = 0  # bytes written or pending
        self._flushed = 0  # bytes already in the file
        self._pending: list[bytes] = []
        if items:
            self.update(items)

    # -- storage -------------------------------------------------------------------------------

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="mst-records-")  # noqa: SIM115 - lives with the store
        data = b"".join(self._pending)
        self._pending.clear()
        fd = self._file.fileno()
        view = memoryview(data)
        offset = self._flushed
        while view:
            n = os.pwrite(fd, view, offset)
            offset += n
            view = view[n:]
        self._flushed = offset

    def _read(self, packed: int) -> dict[str, Any]:
        offset, length = packed >> _LEN_BITS, packed & ((1 << _LEN_BITS) - 1)
        if offset + length > self._flushed:
            self._flush()
        assert self._file is not None
        value: dict[str, Any] = orjson.loads(os.pread(self._file.fileno(), length, offset))
        return value

    # -- mapping -------------------------------------------------------------------------------

    def __setitem__(self, key: K, value: dict[str, Any]) -> None:
        data = orjson.dumps(value)
        packed = self._size << _LEN_BITS | len(data)
        self._pending.append(data)
        self._size += len(data)
        if self._size - self._flushed >= _FLUSH_AT:
            self._flush()
        if key not in self._index:
            key = _intern_key(key)
        self._index[key] = packed
        if self._summarize is not None:
            self._summaries[key] = self._summarize(value)

    def summary(self, key: K) -> Any:
        """The ``summarize`` value of the record at ``key`` (KeyError when absent)."""
        if self._summarize is None:
            return self._summarize_missing()
        return self._summaries[key]

    @staticmethod
    def _summarize_missing() -> Any:
        raise TypeError("this RecordStore keeps no summaries")

    def __getitem__(self, key: K) -> dict[str, Any]:
        return self._read(self._index[key])

    def get(self, key: K, default: Any = None) -> Any:  # type: ignore[override]
        packed = self._index.get(key)
        return default if packed is None else self._read(packed)

    def __delitem__(self, key: K) -> None:
        del self._index[key]
        self._summaries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[K]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"RecordStore({len(self)} records)"

    def close(self) -> None:
        self._pending.clear()
        if self._file is not None:
            self._file.close()
            self._file = None
