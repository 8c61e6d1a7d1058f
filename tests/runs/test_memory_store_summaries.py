"""A record store's per-record summaries (an attempt's ending) cost two bytes a slot (issue 16):
a list of them held ~34 bytes a case at 100,000 cases, with one object per distinct value."""

from __future__ import annotations

import tracemalloc

import pytest

from mst.runs import records
from mst.runs.records import RecordStore, _Summaries


def test_repeated_summaries_cost_two_bytes_a_slot() -> None:
    kinds = [("pass", i % 3) for i in range(5)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        summaries = _Summaries()
        for slot in range(60_000):
            summaries[slot] = kinds[slot % 5]
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held / 60_000 < 3, f"{held / 60_000:.1f} bytes a slot"
    assert [summaries[s] for s in range(10)] == [kinds[s % 5] for s in range(10)]


def test_summaries_share_equal_values_and_keep_the_others_as_they_are() -> None:
    summaries = _Summaries()
    a, b = ("x", 1), ("x", 1)
    summaries[3] = a
    summaries[5] = b
    assert len(summaries) == 6 and summaries[0] is None and summaries[4] is None
    assert summaries[5] == b and summaries[5] is a  # equal ones share the first one
    summaries[3] = None
    assert summaries[3] is None
    unhashable = {"not": "hashable"}
    summaries[7] = unhashable  # no code for it: a list from here on, the values unchanged
    summaries[9] = ("x", 1)
    assert summaries[7] is unhashable and summaries[9] is a and summaries[5] is a and summaries[8] is None
    assert len(summaries) == 10


def test_summaries_past_the_distinct_limit_are_kept_unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_SHARED_SUMMARIES", 3)
    summaries = _Summaries()
    values = [(i,) for i in range(6)]
    for slot, v in enumerate(values):
        summaries[slot] = v
    summaries[6] = (1,)
    assert [summaries[s] for s in range(6)] == values and summaries[6] is summaries[1]


def test_a_store_reads_its_summaries_back() -> None:
    store: RecordStore[str, dict[str, int]] = RecordStore(summarize=lambda v: v["n"] % 2)
    for i in range(10):
        store[f"k{i}"] = {"n": i}
    del store["k3"]
    assert [store.summary(f"k{i}") for i in range(10) if i != 3] == [i % 2 for i in range(10) if i != 3]
