"""Resume: retryable failures collected again, never a trial; SIGKILL at any point is recoverable."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval


def _journal_keys(run: Path) -> list[tuple[str, str, int]]:
    lines = (run / "attempts.jsonl").read_bytes().splitlines()
    return [(r["variant"], r["case"], r["trial"]) for r in map(orjson.loads, lines)]


def test_resume_collects_retryable_failures_and_keeps_trials(tmp_path: Path) -> None:
    flaky = mock_variant("flaky", inject=[{"failure": "rate-limit", "trials": [1], "tries": [1]}])
    broken = mock_variant("broken", inject=[{"failure": "context-overflow-first", "cases": ["c2"]}])
    doc = basic_eval(variants=[mock_variant("base", baseline=True), flaky, broken])
    path = write_eval(tmp_path, doc)
    assert run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path).returncode == 3
    run = only_run(tmp_path / "runs")
    before = {(a["variant"], a["case"], a["trial"]): a for a in load(run / "run.json")["attempts"]}
    assert before[("flaky", "c1", 1)]["ending"]["what"] == "provider-api"

    proc = run_cli("run", "--resume", str(run), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # broken/c2 needs a fix: still incomplete
    after = {(a["variant"], a["case"], a["trial"]): a for a in load(run / "run.json")["attempts"]}
    assert set(after) == set(before)
    for key in (("flaky", "c1", 1), ("flaky", "c2", 1)):
        assert after[key]["ending"] == {"kind": "trial", "outcome": "completed"}
        assert after[key]["try"] == 2
    # trials are never collected again; non-retryable failures stay
    assert after[("base", "c1", 0)] == before[("base", "c1", 0)]
    assert after[("broken", "c2", 0)]["ending"]["what"] == "setup"
    assert after[("broken", "c2", 0)]["try"] == 1
    counts = collections.Counter(_journal_keys(run))
    assert counts[("flaky", "c1", 1)] == 2 and counts[("base", "c1", 0)] == 1
    summary = load(run / "summary.json")
    variants = {v["id"]: v for v in summary["variants"]}
    assert variants["flaky"]["cases"]["incomplete"] == 0
    assert variants["broken"]["cases"] == {"total": 2, "passed": 1, "failed": 0, "incomplete": 1}


def _start(path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mst", "run", str(path), "--runs-dir", "runs"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [0.0, 0.3, 0.8, 1.4, 2.2])
def test_sigkill_at_any_point_then_resume_is_exact(tmp_path: Path, kill_after: float) -> None:
    cases = [{"id": f"c{i}", "prompt": "p", "expected": str(i)} for i in range(12)]
    doc = basic_eval(trials=2, concurrency=3, cases=cases,
                     variants=[mock_variant("base", baseline=True, latencyMs=40), mock_variant("cand", latencyMs=40)],
                     pairwise={"code": "pj:prefer"})
    (tmp_path / "pj.py").write_text(
        "import time\n\ndef prefer(case, a, b):\n    time.sleep(0.02)\n    return 'tie'\n")
    path = write_eval(tmp_path, doc)
    proc = _start(path, tmp_path)
    started = time.monotonic()
    while not list((tmp_path / "runs").glob("*/run.json")):  # under load, start-up alone can take a second
        assert proc.poll() is None and time.monotonic() - started < 60, "mst run did not start"
        time.sleep(0.02)
    time.sleep(kill_after)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run = only_run(tmp_path / "runs")
    resumed = run_cli("run", "--resume", str(run), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    doc_after = load(run / "run.json")
    keys = [(a["variant"], a["case"], a["trial"]) for a in doc_after["attempts"]]
    expected = {(v, c["id"], t) for v in ("base", "cand") for c in cases for t in range(2)}
    assert len(keys) == len(set(keys)) == len(expected) and set(keys) == expected
    assert collections.Counter(_journal_keys(run)).most_common(1)[0][1] == 1  # nothing collected twice
    assert doc_after["phases"] == {"collect": "complete", "grade": "complete"}
    results = load(run / "results.json")["trials"]
    assert len(results) == len(expected) and all(r["status"] == "graded" for r in results)
    assert len(load(run / "comparisons.json")["comparisons"]) == len(cases)
