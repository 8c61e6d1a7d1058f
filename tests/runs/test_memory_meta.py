"""run.json's per-case parts are read a block at a time (issue 16): a run of 100,000 cases checks
its case ids before grading, and decoding the whole list at once was that run's peak of memory."""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson
import pytest

from mst import fileio
from mst.runs.meta import RunMeta, _Packed


def _head(cases: list[Any]) -> dict[str, Any]:
    return {"schema": "mst.run/v1", "id": "r", "eval": {}, "variants": [], "cases": cases, "phases": {}}


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_a_packed_list_decodes_by_blocks_to_its_value(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "IO_BLOCK", block)
    nested = {"prompt": "a,\n    b", "list": [1, [2, {"deep": ",\n    "}], {}], "empty": []}
    for n in (0, 1, 2, 3, 10):
        value = [{"id": f"c{i}", "task": nested} if i % 3 else i for i in range(n)] + ["x, y", [], {}]
        assert list(_Packed(value).elements()) == value


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
