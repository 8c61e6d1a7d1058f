"""What the report holds per case while a run grades and while its page is written (issue 16):
the chunk stream's case list, the page's matrix."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from mst.report.html import Matrix
from mst.report.trials import CaseList, _write_chunk


def _traced(make: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        made = make()
        return made, tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def test_the_chunk_streams_case_list_holds_a_few_bytes_a_case() -> None:
    ids = [f"case-{i:06d}" for i in range(30_000)]
    cases, held = _traced(lambda: CaseList((c, 1 + i % 3) for i, c in enumerate(ids)))
    assert held / len(ids) < 20, f"{held / len(ids):.0f} bytes a case (a list of tuples: ~64)"
    assert len(cases) == 30_000 and cases[4] == ("case-000004", 2) and cases[-1] == (ids[-1], 1 + 29_999 % 3)
    assert list(cases)[:2] == [("case-000000", 1), ("case-000001", 2)] == cases[:2]


def _rows(count: int) -> Iterator[dict[str, Any]]:
    for i in range(count):
        yield {"id": f"case-{i:06d}", "trials": 1,
               "variants": {v: {"status": "passed", "passed": 1, "graded": 1, "passRate": 1.0} for v in ("a", "b")}}


def test_the_matrix_holds_the_bytes_the_page_gives_a_case() -> None:
    matrix, held = _traced(lambda: Matrix.read(["a", "b"], _rows(30_000)))
    # '"case-000000",' and '1,' for the case; per variant 'p', '1.0,', '1,' and '1,'
    assert held / 30_000 < 1.3 * (14 + 2 + 2 * 9), f"{held / 30_000:.0f} bytes a case"
    assert matrix.case_ids()[:2] == ["case-000000", "case-000001"]


def test_a_chunk_is_written_without_a_joined_copy_of_its_entries(tmp_path: Path) -> None:
    # A chunk holds 16 cases' trials with their transcripts: joining its entries and wrapping
    # them made two more copies of it at once, the peak of a run with many trials a case.
    entries = [orjson.dumps({"case": i, "text": "x" * 500_000}) for i in range(16)]
    path = tmp_path / "c0.js"
    tracemalloc.start()
    try:
        _write_chunk(path, entries)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = sum(map(len, entries))
    assert peak < size / 4, f"{peak} bytes at once to write {size}"
    assert path.read_bytes() == b"mstChunk({" + b",".join(entries) + b"});\n"
