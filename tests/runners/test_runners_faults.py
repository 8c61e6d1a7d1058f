"""Faults in shards: a killed worker, one that never says hello, a plugin mismatch, a Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.helpers import load, run_cli
from tests.runners.runners_helpers import calls, collected_run, judged_eval, new_run

from mst.runners.sharding import shard_of


def _start_grade(tmp: Path, source: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mst", "grade", str(source), *extra], cwd=tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _started(tmp: Path) -> list[str]:
    log = tmp / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.slow
def test_killed_worker_leaves_missing_cases_and_a_rerun_completes_them(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=6))
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    (tmp_path / "block-c3").touch()
    proc = _start_grade(tmp_path, source, "--runner", "process", "--runner-option", "shards=2")
    _wait_for(lambda: any(" base/c3/" in line for line in _started(tmp_path)))
    pid = int(next(line for line in _started(tmp_path) if " base/c3/" in line).split()[2])
    os.kill(pid, signal.SIGKILL)  # the worker grading c3, while its judge runs
    (tmp_path / "block-c3").unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    shard = shard_of("c3", 2) + 1
    assert f"grade shard {shard}: the worker ended before it was done" in err
    regrade = new_run(source.parent, before)
    assert load(regrade / "run.json")["phases"]["grade"] == "partial"
    missing = f"Missing: grade shard {shard} ended before this case was graded"
    trials = load(regrade / "results.json")["trials"]
    lost = {t["case"] for t in trials if any(e["message"] == missing for e in t["errors"])}
    assert "c3" in lost and all(shard_of(c, 2) + 1 == shard for c in lost)
    assert all(t["status"] == "graded" for t in trials if t["case"] not in lost)
    comparisons = {c["case"]: c for c in load(regrade / "comparisons.json")["comparisons"]}
    assert comparisons["c3"]["errors"] and comparisons["c3"]["errors"][0]["message"].startswith(missing)

    proc2 = run_cli("grade", str(regrade), "--resume", "--runner", "process", "--runner-option", "shards=2",
                    cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    meta = load(regrade / "run.json")
    assert meta["phases"]["grade"] == "complete"
    assert [s["shard"] for s in meta["grading"]["runner"]["shards"]] == [shard]  # only cases left to grade
    ended = Counter(calls(tmp_path))
    assert set(ended) == {f"{v}/c{i}/{t}" for v in ("base", "cand") for i in range(6) for t in range(2)}
    assert max(ended.values()) == 1  # nothing graded twice: kept verdicts were not judged again


def test_worker_that_never_says_hello_times_out_clearly(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=2, pairwise=False))
    proc = run_cli("grade", str(source), "--runner", "command", "--runner-option",
                   "template=sh -c 'sleep 30' {argv}", "--runner-option", "hello_timeout=1", cwd=tmp_path,
                   timeout=60)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "the worker did not say hello within 1s" in proc.stderr
    assert calls(tmp_path, "start") == []
    regrade = next(p for p in source.parent.iterdir() if p.is_dir() and p != source)
    errors = {e["message"] for t in load(regrade / "results.json")["trials"] for e in t["errors"]}
    assert errors and all(m.startswith("Missing: grade shard 1 ended before") for m in errors)


def _plugin(site: Path, version: str) -> None:
    info = site / f"fixture_judges-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fixture-judges\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[mst.judges]\nfx = mst_fx_judge:judge\n")
    (site / "mst_fx_judge.py").write_text(
        "from pathlib import Path\n\ndef judge(trial, options):\n"
        "    Path(options['dir'], 'plugin.called').touch()\n    return True\n")


def test_plugin_version_mismatch_fails_the_shard_before_any_judge(tmp_path: Path) -> None:
    _plugin(tmp_path / "site1", "1.0")
    _plugin(tmp_path / "site2", "2.0")
    env = {"PYTHONPATH": str(tmp_path / "site1")}
    path = judged_eval(tmp_path, cases=2, pairwise=False,
                       judges=[{"id": "fx", "plugin": "fx", "options": {"dir": str(tmp_path)}}])
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--no-grade", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    (source,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    template = f"template=env PYTHONPATH={tmp_path / 'site2'} {{argv}}"  # the worker's image has v2
    proc = run_cli("grade", str(source), "--runner", "command", "--runner-option", template, cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert ("plugin mst.judges:fx is fixture-judges==2.0 on the worker, fixture-judges==1.0 on the coordinator"
            in proc.stderr)
    assert not (tmp_path / "plugin.called").exists()


@pytest.mark.slow
def test_ctrl_c_cancels_workers_after_their_case_and_the_run_resumes(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=6, sleep=0.15))
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    proc = _start_grade(tmp_path, source, "--runner", "process", "--runner-option", "shards=2")
    _wait_for(lambda: len(calls(tmp_path)) >= 2)
    os.kill(proc.pid, signal.SIGINT)  # the coordinator only, as its own Ctrl-C handler sees it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    started = {key.split("/")[1] for key in calls(tmp_path, "start")}
    ended = Counter(calls(tmp_path))
    for case in started:  # each worker finished the case under way: all four of its trials
        assert all(ended[f"{v}/{case}/{t}"] == 1 for v in ("base", "cand") for t in range(2)), case
    assert len(started) < 6  # and started no more
    regrade = new_run(source.parent, before)
    assert load(regrade / "run.json")["phases"]["grade"] == "partial"

    proc2 = run_cli("grade", str(regrade), "--resume", cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    assert max(Counter(calls(tmp_path)).values()) == 1
    assert len(calls(tmp_path)) == 24


def test_worker_that_stops_heartbeating_is_lost(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=2, pairwise=False))
    (tmp_path / "block-c0").touch()
    proc = _start_grade(tmp_path, source, "--runner", "process", "--runner-option", "heartbeat=0.2")
    _wait_for(lambda: bool(_started(tmp_path)))
    pid = int(_started(tmp_path)[0].split()[2])
    os.kill(pid, signal.SIGSTOP)  # alive, but silent: a hung machine
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, out + err
    assert "grade shard 1: lost: no heartbeat for" in err
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # and it was ended, not left behind
