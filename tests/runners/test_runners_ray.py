"""The ray runner: a local cluster (small, no dashboard, temp dir in the test's directory) per run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.helpers import load, run_cli
from tests.runners.runners_helpers import assert_same_files, collected_run, judged_eval, new_run, normalized_run

pytest.importorskip("ray")


def _ray_processes(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(pid)
    return found


@pytest.mark.slow
def test_ray_grade_equals_local_and_the_cluster_is_torn_down(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=5))
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    assert run_cli("grade", str(source), cwd=tmp_path).returncode == 0
    local = new_run(source.parent, before)
    # Ray's sockets live under its temp dir, and a socket path is at most 107 bytes: the test's
    # own short pytest directory, not the long per-test one.
    temp = tmp_path_factory.mktemp("ray")
    proc = run_cli("grade", str(source), "--runner", "ray", "--runner-option", "shards=2",
                   "--runner-option", f"temp_dir={temp}", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sharded = new_run(source.parent, before | {local})
    assert_same_files(normalized_run(sharded), normalized_run(local))
    runner = load(sharded / "run.json")["grading"]["runner"]
    assert runner["name"] == "ray" and [s["shard"] for s in runner["shards"]] == [1, 2]
    assert any(temp.iterdir())  # the cluster lived in the test's directory
    assert _ray_processes(str(temp)) == []  # and is gone
