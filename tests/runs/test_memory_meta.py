"""run.json's per-case parts are read a block at a time (issue 16): a run of 100,000 cases checks
its case ids before grading, and decoding the whole list at once was that run's peak of memory."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from mst import fileio
from mst.runs.meta import RunMeta, _Packed
from mst.runs.record_files import write_record_file


def _head(cases: list[Any]) -> dict[str, Any]:
    return {"schema": "mst.run/v1", "id": "r", "eval": {}, "variants": [], "cases": cases, "phases": {}}


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_a_packed_list_decodes_by_blocks_to_its_value(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", block)
    nested = {"prompt": "a,\n    b", "list": [1, [2, {"deep": ",\n    "}], {}], "empty": []}
    for n in (0, 1, 2, 3, 10):
        value = [{"id": f"c{i}", "task": nested} if i % 3 else i for i in range(n)] + ["x, y", [], {}]
        assert list(_Packed(value).elements()) == value


def test_a_part_given_as_an_iterator_packs_as_its_list_without_holding_it() -> None:
    # `mst run`'s first head: its cases made one at a time, never a list of a dict per case.
    for n in (0, 1, 70, 3000):
        cases = [{"id": f"case-{i:05d}", "trials": 1 + i % 3} for i in range(n)]
        made = RunMeta.from_json({**_head(iter(dict(c) for c in cases))})  # type: ignore[arg-type]
        assert made.file_head()[0] == RunMeta.from_json(_head(cases)).file_head()[0]
        assert _packed_part(made, "cases") == _Packed(cases).raw and made.to_json() == _head(cases)
    many = ({"id": f"case-{i:05d}", "trials": 1} for i in range(20_000))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        RunMeta.from_json(_head(many))  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"packing 20,000 cases given one at a time held {peak} bytes"  # a list of them: ~5 MB


def _packed_part(meta: RunMeta, name: str) -> bytes:
    return b"".join(meta.file_head()[1][name])


def test_a_packed_value_not_a_list_decodes_whole() -> None:
    assert list(_Packed({"a": [1]}).elements()) == ["a"]


def test_case_ids_are_read_without_decoding_every_case_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", 32 * 1024)
    cases = [{"id": f"case-{i:05d}", "task": {"prompt": "p" * 200, "metadata": {str(k): k for k in range(20)}}}
             for i in range(3000)]
    meta = RunMeta.from_json(_head(cases))
    tracemalloc.start()
    try:
        whole = len(orjson.loads(orjson.dumps(cases)))  # what decoding them all at once holds
        whole_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        ids = meta.case_ids
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert whole == len(ids) == 3000 and ids == {c["id"] for c in cases}
    assert peak < whole_peak / 4, f"case_ids held {peak} bytes at its peak; the whole list decoded holds {whole_peak}"


@pytest.mark.parametrize("block", [5, 1 << 20])
def test_run_json_streams_the_packed_parts_into_the_bytes_of_the_whole_document(
        tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", block)
    cases = [{"id": f"c{i}", "trials": 2, "task": {"prompt": "a\nb", "metadata": {"k": [i, {}]}}} for i in range(7)]
    data = {**_head(cases), "grading": {"judges": {"c0": ["j"], "c1": []}, "source": "live"}, "zeta": [1]}
    records = [orjson.dumps({"variant": "v", "case": f"c{i}", "trial": 0}) for i in range(3)]
    head, parts = RunMeta.from_json(data).file_head()
    assert set(parts) == {"cases", "grading"} and not {"cases", "grading"} & head.keys()
    write_record_file(tmp_path / "run.json", head, "attempts", iter(records), parts=parts)
    whole = {**data, "attempts": [orjson.loads(r) for r in records]}
    assert orjson.loads((tmp_path / "run.json").read_bytes()) == whole
    # The layout is the one-record-per-line one a reader streams, inside json_file_bytes's.
    written = (tmp_path / "run.json").read_bytes().decode().splitlines()
    expected = fileio.json_file_bytes({**whole, "attempts": ["@"]}).decode().splitlines()
    at = expected.index('    "@"')
    assert written[:at] + written[at + len(records):] == expected[:at] + expected[at + 1:]
    assert [orjson.loads(line.strip().rstrip(",")) for line in written[at:at + len(records)]] == whole["attempts"]


def test_writing_run_json_holds_no_copy_of_its_packed_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", 32 * 1024)
    cases = [{"id": f"case-{i:05d}", "trials": 1, "task": {"prompt": "p" * 100}} for i in range(5000)]
    head, parts = RunMeta.from_json(_head(cases)).file_head()
    size = len(_Packed(cases).raw)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        write_record_file(tmp_path / "run.json", head, "attempts", iter(()), parts=parts)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < size / 4, f"writing run.json held {peak} bytes at its peak; its packed parts are {size}"


def test_the_grading_read_back_shares_equal_judge_lists_and_compares_as_a_mapping() -> None:
    from mst.runs.meta import GradingMeta

    judges = {f"c{i}": ["a", "b"] if i % 2 else [] for i in range(6)}
    grading = GradingMeta({"name": "local"}, "live", judges, None, ("g",))
    meta = RunMeta.from_json({**_head([]), "grading": grading.to_json()})
    read = meta.grading
    assert read is not None and read == GradingMeta.from_json(grading.to_json())
    assert read.judges == judges and read.judges["c1"] is read.judges["c3"] and read.judges["c0"] is read.judges["c2"]
    assert meta.grading is not None and meta.grading.judges["c1"] is not read.judges["c1"]  # a fresh read each time


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([1, -2.5, None, True, False, "x", "é</", "", 10**18, -0.0, 1e-7, "a\nb"])
    if roll < 0.7:
        return [_random_json(rng, depth + 1) for _ in range(rng.choice([0, 1, 3, 70, 130]))]
    keys = ["b", "a", "é", "Z", "aa", "\U0001f600", "a b"]
    return {rng.choice(keys) + str(rng.randrange(200)): _random_json(rng, depth + 1)
            for _ in range(rng.choice([0, 1, 5, 80]))}


def test_a_packed_value_has_the_bytes_orjson_writes_one_level_down() -> None:
    rng = random.Random(3)
    long = [[{"i": i} if i % 300 else {"i": [{}]} for i in range(700)], {f"k{i:04d}": i for i in range(600)},
            {f"k{i:04d}": [i] if i % 257 else [[i]] for i in range(600)}, list(range(257)), [[]] * 300]
    for value in [*long, *(_random_json(rng) for _ in range(150))]:
        expected = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).replace(b"\n", b"\n  ")
        assert _Packed(value).raw == expected


def test_packing_many_cases_holds_a_fraction_of_their_bytes() -> None:
    # orjson's peak encoding 20,000 short sorted entries at once is ~15 times its output (and
    # its output keeps that buffer): the run's peak before it graded (issue 16). The text is
    # held deflated: a case's entry repeats its neighbours' layout (~80 bytes a case held as
    # text at 100,000 cases, from before collection to the end; session 11).
    grading = {"runner": {"name": "local"}, "judges": {f"case-{i:06d}": [] for i in range(20_000)}}
    cases = [{"id": f"case-{i:06d}", "trials": 1, "task": {"prompt": f"say {i}"}} for i in range(20_000)]
    for value in (grading, cases):
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            packed = _Packed(value)
            peak = tracemalloc.get_traced_memory()[1] - base
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        size = len(packed.raw)
        assert held < size / 4, f"a packed part of {size} bytes holds {held}"
        assert peak < 2 * size, f"packing {size} bytes held {peak} at its peak"  # zlib: ~260 KB
        assert packed.value() == value and b"".join(packed.chunks()) == packed.raw


def test_the_grading_a_meta_was_given_is_read_back_without_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from mst.runs.meta import GradingMeta

    grading = GradingMeta({"name": "local"}, "live", {"c0": ["a"], "c1": []}, "p", ("g",))
    meta = RunMeta.from_json(_head([])).with_grading(grading)
    on_disk = RunMeta.from_json(meta.to_json())  # as read back from run.json

    def no_decode(self: _Packed) -> Any:
        raise AssertionError("decoded")

    monkeypatch.setattr(_Packed, "value", no_decode)
    assert meta.grading is grading and meta.with_phases(grade="partial").grading is grading
    monkeypatch.undo()
    assert on_disk.grading == grading and on_disk.to_json()["grading"] == grading.to_json()
    moved = meta.with_grading_runner({"name": "k8s"})
    assert moved.grading is not None and moved.grading.runner == {"name": "k8s"}
    assert moved.grading.judges == grading.judges


def test_case_ids_decode_a_small_block_at_a_time_whatever_the_io_block(monkeypatch: pytest.MonkeyPatch) -> None:
    # A mebibyte of packed cases decoded at once was ~18,000 decoded cases (~18 MB) held at
    # once at 100,000 cases; the ids are read 8 KiB of cases at a time (session 9).
    monkeypatch.setattr(fileio, "IO_BLOCK", 1 << 20)
    cases = [{"id": f"case-{i:06d}", "trials": 1} for i in range(20_000)]
    meta = RunMeta.from_json(_head(cases))
    tracemalloc.start()
    try:
        ids = list(meta.iter_case_ids())
        held, peak = tracemalloc.get_traced_memory()
        peak -= held  # less the ids and their list
    finally:
        tracemalloc.stop()
    assert ids == [c["id"] for c in cases]
    assert peak < 500_000, f"reading 20,000 case ids held {peak} bytes at its peak"


def test_the_judges_of_many_cases_pack_without_a_dict_of_them() -> None:
    # `RunMeta.with_grading` packs the judge sets (no dict) as they come when their ids are in
    # order; a dict of 100,000 of them and their ids sorted were ~6 MB at once (session 11).
    from array import array

    from mst.grading.context import JudgeSets
    from mst.runs.meta import GradingMeta

    lists = [["a", "b"], []]
    for ids in ([f"case-{i:06d}" for i in range(20_000)], [f"case-{i:06d}" for i in range(20_000, 0, -1)]):
        judges = JudgeSets(ids, array("H", [i % 2 for i in range(len(ids))]), lists)
        grading = GradingMeta({"name": "local"}, "live", judges, None, ("g",))
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            meta = RunMeta.from_json(_head([])).with_grading(grading)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        as_dict = RunMeta.from_json({**_head([]), "grading": grading.to_json()})
        assert _packed_part(meta, "grading") == _packed_part(as_dict, "grading")
        if ids == sorted(ids):
            assert peak < 600_000, f"packing 20,000 cases' judges held {peak} bytes"  # a dict of them: ~1 MB
