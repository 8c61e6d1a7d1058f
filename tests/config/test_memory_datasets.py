"""A JSONL dataset is read a line at a time (issue 16): the file's bytes are held while its
cases are yielded, never a list of its lines besides (100,000 lines were ~12 MB at once, most of
`resolve_eval`'s peak at 100,000 cases; bench/perf16_memory.md, session 11)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson

from mst.config.datasets import load_jsonl


def test_reading_a_jsonl_dataset_holds_its_bytes_and_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    lines = [orjson.dumps({"id": f"case-{i:06d}", "prompt": f"What is {i} plus {i}?", "expected": str(2 * i)})
             for i in range(20_000)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        count = sum(1 for _ in load_jsonl(path, {}))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < 1.3 * size, f"reading {size} bytes of JSONL held {peak} at its peak"  # a list of lines: ~2.5x


def test_jsonl_lines_keep_their_numbers_across_blank_and_crlf_lines(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id": "a"}\r\n\n  \n{"id": "b"}\n{"id": "c"}')
    assert list(load_jsonl(path, {})) == [({"id": "a"}, f"{path}:1"), ({"id": "b"}, f"{path}:4"),
                                          ({"id": "c"}, f"{path}:5")]
