"""A record store buffers a quarter block before it writes to its spill file: grading fills
three stores at once, and a whole block each was ~3 MiB of a 100,000-case run's peak (issue 16,
bench/perf16_memory.md)."""

from __future__ import annotations

import tracemalloc

import pytest

from mst import fileio
from mst.runs.records import RecordStore


def test_a_store_buffers_a_quarter_block_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", 1 << 20)
    record = b'{"x":"' + b"y" * 1000 + b'"}'
    store: RecordStore[tuple[str, str, int], dict[str, str]] = RecordStore()
    store.put(("v", "c-0", 0), {}, record)  # the spill file and the arrays made before measuring
    tracemalloc.start()
    try:
        for i in range(1, 2000):  # 2 MB of records
            store.put(("v", f"c-{i}", 0), {}, record)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()
    assert peak < 600_000, f"{peak} bytes held while storing 2 MB of records"
