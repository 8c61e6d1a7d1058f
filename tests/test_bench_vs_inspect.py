"""``bench_vs_inspect.py --write-evals``: mst's side of the benchmark, written without Inspect.

bench/perf16_percase.md counts instructions on these evals; they must be the work the ratio
measures (N cases, one ``contains`` assertion, the default graders unless ``--no-graders``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_vs_inspect.py"


def test_write_evals_writes_each_n_and_runs_no_inspect(tmp_path: Path) -> None:
    out = tmp_path / "vs"
    argv = [sys.executable, str(BENCH), "--write-evals", str(out), "--samples", "3", "5",
            "--inspect-venv", str(tmp_path / "no-venv")]  # fmt: skip
    subprocess.run(argv, check=True, stdout=subprocess.PIPE)
    assert not (tmp_path / "no-venv").exists()
    for n in (3, 5):
        lines = (out / f"n-{n}" / "cases.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines] == [f"case-{i:06d}" for i in range(n)]
        text = (out / f"n-{n}" / "eval.yaml").read_text()
        assert f"name: vs-inspect-{n}" in text and "graders:" not in text
