"""How a run keeps its records: the off-heap store, the one-record-per-line files, trial files."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import orjson
import pytest

from mst.config.errors import UserError
from mst.fileio import json_file_bytes, write_trial_file
from mst.runs.files import Journal, read_journal, read_journal_lines
from mst.runs.layout import RunPaths
from mst.runs.record_files import read_record_file, write_record_file
from mst.runs.records import KeyIndex, RecordStore
from mst.runs.run import Run, open_run


def _record(i: int) -> dict[str, object]:
    return {"variant": "v", "case": f"case-{i // 5:06d}", "trial": i % 5, "answer": f"answer {i}" * 20,
            "usage": {"inputTokens": i}}


# -- RecordStore ----------------------------------------------------------------------------------


def test_store_is_a_mapping_and_reads_return_fresh_dicts() -> None:
    store: RecordStore[tuple[str, str, int]] = RecordStore()
    store[("v", "c", 0)] = {"a": 1}
    store[("v", "c", 1)] = {"a": 2}
    store[("v", "c", 0)] = {"a": 3}  # replaced, not added
    assert len(store) == 2 and list(store) == [("v", "c", 0), ("v", "c", 1)]
    assert store[("v", "c", 0)] == {"a": 3} and store.get(("x", "c", 0)) is None
    store[("v", "c", 1)]["a"] = 99  # a decoded copy: the store is unchanged
    assert store[("v", "c", 1)] == {"a": 2}
    del store[("v", "c", 0)]
    assert ("v", "c", 0) not in store and len(store) == 1 and list(store) == [("v", "c", 1)]
    with pytest.raises(KeyError):
        store[("v", "c", 0)]


def test_put_keeps_the_callers_bytes_and_raw_returns_them() -> None:
    store: RecordStore[str] = RecordStore()
    data = orjson.dumps({"b": 1, "a": 2})
    store.put("k", {"b": 1, "a": 2}, data)
    assert store.raw("k") == data and store["k"] == {"b": 1, "a": 2}


def test_stores_sharing_a_key_index_hold_each_key_once() -> None:
    keys: KeyIndex[tuple[str, str, int]] = KeyIndex()
    attempts: RecordStore[tuple[str, str, int]] = RecordStore(keys=keys, summarize=lambda r: r["ending"])
    grades: RecordStore[tuple[str, str, int]] = RecordStore(keys=keys)
    attempts[("v", "c", 0)] = {"ending": "done"}
    attempts[("v", "c", 1)] = {"ending": "done"}
    grades[("v", "c", 1)] = {"passed": True}
    assert len(keys) == 8  # one block of slots for the variant and case, shared by both stores
    assert list(grades) == [("v", "c", 1)] and ("v", "c", 0) not in grades
    assert attempts.summary(("v", "c", 1)) == "done"
    assert attempts.summary(("v", "c", 0)) is attempts.summary(("v", "c", 1))  # equal summaries shared
    with pytest.raises(KeyError):
        attempts.summary(("v", "c", 2))


def test_one_slot_look_up_reads_every_store_sharing_the_keys() -> None:
    keys: KeyIndex[object] = KeyIndex()
    attempts: RecordStore[object] = RecordStore(keys=keys, summarize=lambda r: r["ending"])
    grades: RecordStore[object] = RecordStore(keys=keys)
    attempts[("v", "c", 9)] = {"ending": "done"}
    grades[("v", "c", 9)] = {"passed": True}
    attempts[("v", "c", 3)] = {"ending": "failed"}
    slot = attempts.slot_of(("v", "c", 9))
    assert slot == grades.slot_of(("v", "c", 9)) == keys.find(("v", "c", 9))
    assert attempts.holds(slot) and attempts.at(slot) == {"ending": "done"} and grades.at(slot) == {"passed": True}
    assert attempts.summary_at(slot) == "done" == attempts.summary(("v", "c", 9))
    other = attempts.slot_of(("v", "c", 3))
    assert other is not None and not grades.holds(other) and grades.at(other) is None
    for missing in (attempts.slot_of(("v", "c", 4)), attempts.slot_of(("v", "d", 0)), None, 10**6):
        assert not attempts.holds(missing) and attempts.at(missing) is None
        with pytest.raises(KeyError):
            attempts.summary_at(missing)
    with pytest.raises(TypeError):
        grades.summary_at(slot)


def test_raw_at_and_summaries_read_by_slot_what_raw_and_summary_read_by_key() -> None:
    keys: KeyIndex[object] = KeyIndex()
    attempts: RecordStore[object] = RecordStore(keys=keys, summarize=lambda r: r["ending"])
    grades: RecordStore[object] = RecordStore(keys=keys)
    for trial, ending in ((9, "done"), (3, "failed"), (4, "done")):
        attempts[("v", "c", trial)] = {"ending": ending, "trial": trial}
    del attempts[("v", "c", 4)]
    grades[("v", "c", 9)] = {"passed": True}
    slot = attempts.slot_of(("v", "c", 9))
    assert attempts.raw_at(slot) == attempts.raw(("v", "c", 9)) and grades.raw_at(slot) == b'{"passed":true}'
    for missing in (attempts.slot_of(("v", "c", 3)), None, 10**6):
        with pytest.raises(KeyError):
            grades.raw_at(missing)
    with pytest.raises(KeyError):
        attempts.raw_at(attempts.slot_of(("v", "c", 4)))  # deleted
    assert sorted(attempts.summaries()) == sorted(attempts.summary(k) for k in attempts) == ["done", "failed"]
    with pytest.raises(TypeError):
        list(grades.summaries())

def test_key_index_blocks_trials_and_gives_other_keys_a_slot_each() -> None:
    keys: KeyIndex[object] = KeyIndex()
    trial_keys = [("v", "c", t) for t in (0, 1, 7, 8, 20)] + [("w", "c", 0)]
    slots = [keys.slot(k) for k in trial_keys]
    assert len(set(slots)) == len(slots) and [keys.key(s) for s in slots] == trial_keys
    assert slots[:3] == [0, 1, 7] and slots[3] == 8  # trial 8 starts the variant and case's next block
    others = [("cand", "c"), "x", ("v", "c", -1), ("v", "c", "0")]
    other_slots = [keys.slot(k) for k in others]
    assert [keys.key(s) for s in other_slots] == others and len(set(other_slots)) == 4
    assert [keys.find(k) for k in [*trial_keys, *others]] == [*slots, *other_slots]
    assert keys.find(("v", "c", 2)) == 2 and keys.find(("v", "d", 0)) is None and keys.find("y") is None
    store: RecordStore[object] = RecordStore(keys=keys)
    store[("v", "c", 20)] = {"a": 1}
    store[("cand", "c")] = {"b": 2}
    store[("v", "c", 2)] = {"c": 3}
    assert set(store) == {("v", "c", 20), ("cand", "c"), ("v", "c", 2)} and ("v", "c", 1) not in store


def test_records_come_out_in_key_order_whatever_order_they_went_in() -> None:
    keys = [(v, f"c{c}", t) for v in ("b", "a") for c in (3, 1, 20, 2) for t in (9, 0, 4, 8, 1)]
    random.Random(5).shuffle(keys)
    store: RecordStore[tuple[str, str, int]] = RecordStore()
    for k in keys:
        store[k] = {"key": list(k)}
    assert list(store.raw_in_key_order()) == [store.raw(k) for k in sorted(keys)]
    pairs: RecordStore[tuple[str, str]] = RecordStore()
    for k in [("cand", "z"), ("cand", "a"), ("b", "m")]:
        pairs[k] = {"k": list(k)}
    assert [orjson.loads(r)["k"] for r in pairs.raw_in_key_order()] == [["b", "m"], ["cand", "a"], ["cand", "z"]]


def test_reads_in_any_order_interleaved_with_writes_return_each_records_bytes() -> None:
    """Reads onwards from the last come from one block read ahead (records.py, ``_bytes``):
    records past the block, straddling its end, written after it, read backwards or skipped
    over (one variant's of two), are each read as stored."""
    store: RecordStore[tuple[str, str, int]] = RecordStore()
    written: dict[tuple[str, str, int], bytes] = {}

    def put(i: int) -> None:
        record = _record(i)
        key = (str(record["variant"]), str(record["case"]), i % 5)
        written[key] = orjson.dumps({**record, "pad": "x" * (i * 37 % 3000)})  # sizes vary: ends straddle
        store.put(key, record, written[key])

    for i in range(600):
        put(i)
    keys = list(written)
    orders = [keys, keys[::2], keys[1::2], keys[::-1], random.Random(3).sample(keys, len(keys))]
    for order in orders:
        assert [store.raw(k) for k in order] == [written[k] for k in order]
    for i in range(600, 900):  # writes after a block was read, each read back at once
        put(i)
        key = next(reversed(written))
        assert store.raw(key) == written[key]
        assert store.json_at(store.slot_of(key)) == orjson.loads(written[key])
    assert list(store.raw_in_key_order()) == [written[k] for k in sorted(written)]
    assert store.json_at(None) is None and store.json_at(10**6) is None


def test_store_memory_does_not_grow_with_the_records() -> None:
    """The records live in a file; in memory, a few bytes a key. orjson's bytes objects carry
    KBs of spare buffer each, so keeping them (even only until a flush) costs ten times the data."""
    store: RecordStore[tuple[str, str, int]] = RecordStore()
    # Only what mst's own code allocates counts: a thread an earlier test left running (a
    # server, an event loop) allocates during the loop too, and made the total flaky.
    own = (tracemalloc.Filter(True, f"*{Path('mst', 'runs', '*')}"), tracemalloc.Filter(True, "*test_run_storage.py"))
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(own)
        for i in range(20_000):
            record = _record(i)
            store.put((str(record["variant"]), str(record["case"]), i % 5), record, orjson.dumps(record))
        after = tracemalloc.take_snapshot().filter_traces(own)
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert store[("v", "case-000100", 3)]["usage"] == {"inputTokens": 503}
    assert grown < 20_000 * 300, f"{grown / 20_000:.0f} bytes per record"  # records are ~250 bytes of JSON


# -- record files -----------------------------------------------------------------------------


def test_record_file_round_trip_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    records = [_record(i) for i in range(50)]
    write_record_file(path, {"schema": "s", "zeta": [1], "id": "r"}, "attempts", (orjson.dumps(r) for r in records))
    text = path.read_bytes()
    assert orjson.loads(text) == {"schema": "s", "zeta": [1], "id": "r", "attempts": records}
    assert text.count(b"\n") == len(records) + 9  # the head's nine lines and one line per record
    opened = read_record_file(path, "run.json", "attempts")
    assert opened.head == {"schema": "s", "zeta": [1], "id": "r"}
    read = list(opened.records())
    assert [r for r, _ in read] == records
    assert [line for _, line in read] == list(range(3, 53))  # after "{" and '"attempts": ['


@pytest.mark.parametrize("records", [[], [{"a": 1}]])
def test_record_file_short_lists(tmp_path: Path, records: list[dict[str, int]]) -> None:
    path = tmp_path / "r.json"
    write_record_file(path, {"run": "x"}, "trials", (orjson.dumps(r) for r in records))
    opened = read_record_file(path, "results.json", "trials")
    assert opened.head == {"run": "x"} and [r for r, _ in opened.records()] == records


def test_record_file_in_another_layout_is_read_whole(tmp_path: Path) -> None:
    """Older runs wrote each record over several lines; hand-written files may be compact."""
    doc = {"id": "r", "attempts": [_record(1), _record(2)]}
    for raw in (json_file_bytes(doc), orjson.dumps(doc)):
        path = tmp_path / "run.json"
        path.write_bytes(raw)
        opened = read_record_file(path, "run.json", "attempts")
        assert opened.head == {"id": "r"} and [r for r, _ in opened.records()] == doc["attempts"]


def test_a_corrupt_record_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_record_file(path, {"run": "x"}, "trials", [b'{"a":1}', b'{"a":2}', b'{"a":3}'])
    path.write_bytes(path.read_bytes().replace(b'{"a":2}', b'{"a":2'))
    opened = read_record_file(path, "results.json", "trials")
    with pytest.raises(UserError) as err:
        list(opened.records())
    assert f"{path}:5" in str(err.value)  # "{", "run", "trials", the first record, then this one


def test_a_missing_or_corrupt_record_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="missing"):
        read_record_file(tmp_path / "run.json", "run.json", "attempts")
    (tmp_path / "run.json").write_bytes(b'{\n  "attempts": [\n    {"a": 1},\n')
    with pytest.raises(UserError, match="corrupt"):
        read_record_file(tmp_path / "run.json", "run.json", "attempts")


def test_reading_a_big_record_file_holds_one_block_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_record_file(path, {"id": "r"}, "attempts", (orjson.dumps(_record(i)) for i in range(40_000)))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_record_file(path, "run.json", "attempts").records())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 40_000 and size > 12 * 2**20
    assert peak < 6 * 2**20, f"peak {peak} bytes reading a {size}-byte file"  # a few 1 MiB blocks


def test_open_run_reads_a_run_json_written_one_record_per_line(tmp_path: Path) -> None:
    run = Run(RunPaths(tmp_path), _meta())
    for i in range(7):
        run.attempts[("v", "c", i)] = {"variant": "v", "case": "c", "trial": i, "ending": {"kind": "trial",
                                        "outcome": "completed"}, "answer": str(i)}
    run.write()
    again = open_run(tmp_path)
    assert again.meta == run.meta and len(again.attempts) == 7
    assert again.attempts[("v", "c", 6)]["answer"] == "6"
    assert again.attempts.raw(("v", "c", 6)) == run.attempts.raw(("v", "c", 6))


# -- journals -------------------------------------------------------------------------------------


def test_journal_lines_across_read_blocks(tmp_path: Path) -> None:
    """Journals are read in 1 MiB blocks: records cut by a block's end come out whole."""
    path = tmp_path / "attempts.jsonl"
    records = [{"i": i, "pad": "x" * (997 + i % 13)} for i in range(3000)]  # ~3 MB, lines of odd lengths
    with Journal(path) as journal:
        encoded = [journal.append(r) for r in records]
    lines = list(read_journal_lines(path))
    assert [r for _, r, _ in lines] == records
    assert [raw for _, _, raw in lines] == encoded  # the journaled bytes, for a store to keep
    assert [n for n, _, _ in lines] == list(range(1, 3001))


def test_a_corrupt_journal_line_is_named_after_a_block_boundary(tmp_path: Path) -> None:
    path = tmp_path / "grading.jsonl"
    with Journal(path) as journal:
        for i in range(2500):
            journal.append({"i": i, "pad": "y" * 1000})
    raw = path.read_bytes().split(b"\n")
    raw[2100] = b'{"i": oops}'
    path.write_bytes(b"\n".join(raw))
    with pytest.raises(UserError) as err:
        list(read_journal(path))
    assert f"{path}:2101" in str(err.value)


# -- trial files ------------------------------------------------------------------------------


def test_a_new_trial_file_is_written_in_place_and_an_existing_one_replaced(tmp_path: Path) -> None:
    target = tmp_path / "graders" / "v" / "c" / "0" / "session.jsonl"
    write_trial_file(str(target), b"first\n")  # its folders are made on the way
    assert target.read_bytes() == b"first\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["session.jsonl"]
    # A regrade hard-links a source run's files: writing again must not change the linked copy.
    shared = tmp_path / "source-copy.jsonl"
    os.link(target, shared)
    write_trial_file(str(target), b"second\n")
    assert target.read_bytes() == b"second\n" and shared.read_bytes() == b"first\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["session.jsonl"]


def _meta() -> dict[str, object]:
    return {"schema": "mst.run/v1", "id": "r1", "eval": {"name": "e", "path": "/x", "digest": "d"},
            "variants": [{"id": "v"}], "cases": [{"id": "c", "trials": 7}],
            "phases": {"collect": "complete", "grade": "partial"}}
