"""A `--secrets-file` value reaches a grade worker only through the `tokens` message."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers import load
from tests.runners.runners_helpers import calls, canary_free, collected_run, judged_eval, new_run, proc_leaks

CANARY = "sk-canary-runner-51e0c7d2"
AMBIENT = "ambient-canary-0b9d4e"


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_canary_never_in_bundles_results_logs_argv_or_environ(tmp_path: Path,
                                                               request: pytest.FixtureRequest) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=4, judge_secrets=["JUDGE_KEY"]))
    (tmp_path / "judges.env").write_text(f"JUDGE_KEY={CANARY}\n")
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    (tmp_path / "block-c1").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mst", "grade", str(source), "--secrets-file", "judges.env",
         "--runner", "process", "--runner-option", "shards=2", "--runner-option", "keep=true"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "AMBIENT_KEY": AMBIENT})
    deadline = time.monotonic() + 60
    while not calls(tmp_path, "start"):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert proc_leaks(CANARY) == []  # while the workers run, with the key in their environment
    workers = [leak for leak in proc_leaks(AMBIENT) if "grade-shard" in _cmdline(leak.split("/")[0])]
    assert workers == []  # the coordinator's ambient environment is not passed on
    (tmp_path / "block-c1").unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert CANARY not in out + err
    regrade = new_run(source.parent, before)
    workdir = Path(load(regrade / "run.json")["grading"]["runner"]["workDir"])
    request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))  # kept (keep=true) for this test
    bundles = list(workdir.glob("shard-*/bundle"))
    logs = list(workdir.glob("shard-*/worker.log"))
    assert len(bundles) == 2 and len(logs) == 2
    assert canary_free([tmp_path / "runs", workdir], CANARY) == []
    assert all("judge sees key=[REDACTED]" in log.read_text() for log in logs)  # redacted, not absent
    reasons = {v["reason"] for t in load(regrade / "results.json")["trials"] for v in t["verdicts"]
               if v["judge"] == "counted"}
    assert reasons and all(r.endswith("key=[REDACTED]") for r in reasons)  # the judge did read it
