"""SIGKILL `mst run` and `mst grade` at random (seeded) moments, then finish with `--resume`:
every attempt exactly once, every trial graded, and no temporary file or directory left in the
run, the runs directory, or $TMPDIR (which points at the test's own directory)."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from tests.helpers import basic_eval, load, mock_variant, run_cli, write_eval

TEMP_SUFFIXES = (".tmp", ".staging")


def _eval(tmp: Path, cases: int) -> tuple[Path, set[tuple[str, str, int]]]:
    (tmp / "pj.py").write_text("import time\n\ndef prefer(case, a, b):\n    time.sleep(0.01)\n    return 'tie'\n")
    doc = basic_eval(trials=2, concurrency=2, graders={}, pairwise={"code": "pj:prefer"},
                     cases=[{"id": f"c{i}", "prompt": "p", "expected": str(i)} for i in range(cases)],
                     variants=[mock_variant("base", baseline=True, latencyMs=30), mock_variant("cand", latencyMs=30)])
    expected = {(v, f"c{i}", t) for v in ("base", "cand") for i in range(cases) for t in range(2)}
    return write_eval(tmp, doc), expected


def _killed(args: list[str], cwd: Path, env: dict[str, str], after: float) -> None:
    """Run `mst ARGS` and SIGKILL it (only it: its shard workers are left to notice) after ``after`` s."""
    proc = subprocess.Popen([sys.executable, "-m", "mst", *args], cwd=cwd, env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(after)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _runs(runs: Path) -> set[Path]:
    return {p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")} if runs.is_dir() else set()


def _finished(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    proc = run_cli(*args, cwd=cwd, env=env, timeout=180)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])


def _check_exact(run: Path, expected: set[tuple[str, str, int]], *, journal: bool) -> None:
    keys = [(a["variant"], a["case"], a["trial"]) for a in load(run / "run.json")["attempts"]]
    assert len(keys) == len(set(keys)) and set(keys) == expected, run
    if journal:  # mock attempts never fail: each was collected exactly once
        lines = (run / "attempts.jsonl").read_bytes().splitlines()
        counts = collections.Counter((r["variant"], r["case"], r["trial"]) for r in map(orjson.loads, lines))
        assert set(counts) == expected and max(counts.values()) == 1, run
    trials = load(run / "results.json")["trials"]
    assert sorted((t["variant"], t["case"], t["trial"]) for t in trials) == sorted(expected)
    assert all(t["status"] == "graded" for t in trials), run
    assert load(run / "run.json")["phases"] == {"collect": "complete", "grade": "complete"}


def _debris(runs: Path, tmpdir: Path) -> list[str]:
    left = [str(p) for p in runs.rglob("*") if p.name.endswith(TEMP_SUFFIXES)]
    return left + [str(p) for p in tmpdir.iterdir()]


def _cycle(tmp: Path, rng: random.Random, eval_path: Path, expected: set[tuple[str, str, int]],
           env: dict[str, str]) -> None:
    runs = tmp / "runs"
    before = _runs(runs)
    collect = ["--runner", "process", "--runner-option", "shards=2"] if rng.random() < 0.5 else []
    _killed(["run", str(eval_path), "--runs-dir", "runs", *collect], tmp, env, rng.uniform(0.2, 2.4))
    new = _runs(runs) - before
    if new:
        (run,) = new
        if rng.random() < 0.4:  # the resume is killed too, now and then
            _killed(["run", "--resume", str(run)], tmp, env, rng.uniform(0.2, 1.5))
        _finished(["run", "--resume", str(run)], tmp, env)
    else:  # killed before its directory appeared: the next run in the same runs directory
        _finished(["run", str(eval_path), "--runs-dir", "runs"], tmp, env)
        (run,) = _runs(runs) - before
    _check_exact(run, expected, journal=True)

    before = _runs(runs)
    _killed(["grade", str(run), "--runner", "process", "--runner-option", "shards=2"], tmp, env,
            rng.uniform(0.2, 4.0))
    new = _runs(runs) - before
    if new:
        (regrade,) = new
        _finished(["grade", str(regrade), "--resume"], tmp, env)
    else:
        _finished(["grade", str(run)], tmp, env)
        (regrade,) = _runs(runs) - before
    _check_exact(regrade, expected, journal=False)


def _kill_and_resume(tmp_path: Path, cycles: int, cases: int, seed: int) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir)}
    eval_path, expected = _eval(tmp_path, cases)
    rng = random.Random(seed)
    for cycle in range(cycles):
        _cycle(tmp_path, rng, eval_path, expected, env)
        assert _debris(tmp_path / "runs", tmpdir) == [], f"cycle {cycle} (seed {seed})"

def test_kill_and_resume_a_few_cycles(tmp_path: Path) -> None:
    _kill_and_resume(tmp_path, cycles=2, cases=3, seed=12)


@pytest.mark.slow
def test_kill_and_resume_many_cycles(tmp_path: Path) -> None:
    _kill_and_resume(tmp_path, cycles=24, cases=8, seed=2026)
