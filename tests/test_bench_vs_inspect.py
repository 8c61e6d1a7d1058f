"""``bench_vs_inspect.py --write-evals``: mst's side of the benchmark, written without Inspect.

bench/perf16_percase.md counts instructions on these evals; they must be the work the ratio
measures (N cases, one ``contains`` assertion, the default graders unless ``--no-graders``), and
evals ``mst validate`` accepts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from mst.graders import parse_graders_config

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_vs_inspect.py"
MST = Path(sys.executable).parent / "mst"


def _write(out: Path, venv: Path, *extra: str) -> None:
    argv = [sys.executable, str(BENCH), "--write-evals", str(out), "--samples", "3", "5",
            "--inspect-venv", str(venv), *extra]  # fmt: skip
    subprocess.run(argv, check=True, stdout=subprocess.PIPE)


def test_write_evals_writes_each_n_and_runs_no_inspect(tmp_path: Path) -> None:
    out = tmp_path / "vs"
    _write(out, tmp_path / "no-venv")
    assert not (tmp_path / "no-venv").exists()
    for n in (3, 5):
        lines = (out / f"n-{n}" / "cases.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines] == [f"case-{i:06d}" for i in range(n)]
        eval_file = out / f"n-{n}" / "eval.yaml"
        document = yaml.safe_load(eval_file.read_text())
        assert document["name"] == f"vs-inspect-{n}" and "graders" not in document
        assert [a["type"] for a in document["assertions"]] == ["contains"]
        subprocess.run([str(MST), "validate", str(eval_file)], check=True, stdout=subprocess.PIPE)


def test_write_evals_no_graders_disables_every_default(tmp_path: Path) -> None:
    out = tmp_path / "vs"
    _write(out, tmp_path / "no-venv", "--no-graders")
    eval_file = out / "n-3" / "eval.yaml"
    graders = yaml.safe_load(eval_file.read_text())["graders"]
    assert parse_graders_config(graders).enabled == ()
    subprocess.run([str(MST), "validate", str(eval_file)], check=True, stdout=subprocess.PIPE)
