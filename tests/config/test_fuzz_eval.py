"""Fuzz: every mutated eval file (or dataset) ends in a result or a clear error naming the file —
never another exception — within 5 s and 200 MB; on the command line, exit 0 or 2, no traceback.

The inputs are seeded mutations (tests/mutate.py) of the repository's quickstart eval and of a test
eval using every section (judges, pairwise, graders, CSV/YAML/JSONL datasets, mock scripts).
"""

from __future__ import annotations

import random
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from tests.helpers import ROOT, basic_eval
from tests.mutate import FuzzLog, mutate_bytes, mutate_yaml

from mst.cli import main
from mst.config.errors import UserError
from mst.config.resolve import resolve_eval

LIMIT_SECONDS = 5
LIMIT_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Inputs:
    directory: Path
    evals: tuple[bytes, ...]
    datasets: dict[str, bytes]


def _inputs(directory: Path) -> Inputs:
    quickstart = ROOT / "examples" / "quickstart"
    for name in ("cases.jsonl", "judges.py", "server.py"):
        shutil.copy(quickstart / name, directory / name)
    (directory / "j.py").write_text("def ok(*args):\n    return True\n")
    datasets = {
        "cases.jsonl": (quickstart / "cases.jsonl").read_bytes(),
        "more.csv": b"id,prompt,expected,topic\ncsv1,hello,world,greetings\ncsv2,\"a, b\",\"c\",x\n",
        "more.yaml": b"cases:\n  - id: y1\n    prompt: p\n    trials: 2\n    metadata: {k: [1, 2]}\n",
    }
    full = basic_eval(
        seed=3, description="every section",
        datasets=[{"path": "more.csv"}, {"path": "more.yaml"}, {"path": "cases.jsonl", "format": "jsonl"}],
        judges=[{"id": "ok", "code": "j:ok", "options": {"k": [1, {"x": "y"}]}, "threshold": 0.5}],
        pairwise={"code": "j:ok", "options": {"a": 1}},
        graders={"loops": {"enabled": False}, "tool-success-rate": {"threshold": 0.9}},
        metrics=["grader:tool-success-rate"], redact=["sk-[a-z]+"], casePass={"atLeast": 0.5},
    )
    full["cases"][0]["mock"] = {"steps": [{"tool": "t", "args": {"q": 1}}], "answer": "{expected}"}
    full["cases"][0]["assertions"] = [{"type": "regex", "pattern": "4."}, {"type": "tool-calls", "max": 3}]
    evals = ((quickstart / "eval.yaml").read_bytes(), yaml.safe_dump(full, sort_keys=False).encode())
    return Inputs(directory, evals, datasets)


def _mutated(inputs: Inputs, rng: random.Random) -> Path:
    """Write one mutated input: the eval file, or (a fifth of the time) one of its datasets."""
    for name, raw in inputs.datasets.items():
        (inputs.directory / name).write_bytes(raw)
    eval_raw = rng.choice(inputs.evals)
    if rng.random() < 0.2:
        name = rng.choice(sorted(inputs.datasets))
        mutate = mutate_yaml if name.endswith(".yaml") else mutate_bytes
        (inputs.directory / name).write_bytes(mutate(rng, inputs.datasets[name]))
    else:
        eval_raw = mutate_yaml(rng, eval_raw)
    path = inputs.directory / "eval.yaml"
    path.write_bytes(eval_raw)
    return path


def _check_library(inputs: Inputs, path: Path) -> str | None:
    """None when the outcome is clean, else what went wrong."""
    try:
        resolve_eval(path)
    except UserError as exc:
        unnamed = [str(p) for p in exc.problems if str(inputs.directory) not in p.file]
        return f"a message names no file: {unnamed[0]!r}" if unnamed else None
    except Exception:
        return traceback.format_exc(limit=-3)
    return None


def _check_cli(inputs: Inputs, path: Path) -> str | None:
    result = CliRunner().invoke(main, ["validate", str(path)])
    lines = result.output.splitlines()
    if result.exit_code not in (0, 2) or "Traceback" in result.output:
        return f"exit {result.exit_code}: {result.output[-2000:]}"
    if result.exit_code == 2 and not all(line.startswith("error: ") and str(inputs.directory) in line
                                         for line in lines):
        return f"an error line names no file: {result.output[-2000:]}"
    return None


def _fuzz(tmp_path: Path, seed: int, count: int, cli_every: int) -> dict[str, int]:
    inputs = _inputs(tmp_path)
    rng = random.Random(seed)
    log = FuzzLog(tmp_path, seed, LIMIT_SECONDS, LIMIT_BYTES)
    counts = {"inputs": 0, "cli": 0}
    for i in range(count):
        path = _mutated(inputs, rng)
        started = time.monotonic()
        problem = _check_library(inputs, path)
        if problem is None and i % cli_every == 0:
            problem = _check_cli(inputs, path)
            counts["cli"] += 1
        counts["inputs"] += 1
        log.record(i, path, problem, started)
    log.assert_clean(count, "inputs")
    return counts


def test_fuzz_eval_loader(tmp_path: Path) -> None:
    counts = _fuzz(tmp_path, seed=12, count=1_000, cli_every=20)
    assert counts["inputs"] == 1_000 and counts["cli"] >= 40


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_fuzz_eval_loader_long(tmp_path: Path, seed: int) -> None:
    _fuzz(tmp_path, seed=seed, count=10_000, cli_every=5)
