"""A local and a sharded run of the same work write the same files (docs/shards.md, "Grading in shards")."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import load, run_cli
from tests.runners.runners_helpers import assert_same_files, calls, collected_run, judged_eval, new_run, normalized_run


def _grade(tmp: Path, source: Path, *extra: str) -> Path:
    before = {p for p in source.parent.iterdir() if p.is_dir()}
    proc = run_cli("grade", str(source), *extra, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return new_run(source.parent, before)


def test_sharded_grade_writes_the_same_files_as_local(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=7))
    local = _grade(tmp_path, source)
    local_calls = sorted(calls(tmp_path))
    (tmp_path / "calls.log").unlink()
    sharded = _grade(tmp_path, source, "--runner", "process", "--runner-option", "shards=3")
    assert sorted(calls(tmp_path)) == local_calls  # every judge ran once, in a worker
    files = normalized_run(sharded)
    assert_same_files(files, normalized_run(local))
    # The deterministic graders' one manifest is among those compared, and no file per trial.
    [manifest] = [k for k in files if k.startswith("graders/")]
    assert manifest.startswith("graders/manifest-")
    runner = load(sharded / "run.json")["grading"]["runner"]
    assert runner["name"] == "process" and runner["shardCount"] == 3
    assert len(runner["shards"]) == 3 and all(s["machine"]["cpus"] >= 1 for s in runner["shards"])
    assert load(tmp_path / "runs" / "latest.json")["run"] == sharded.name


def test_sharded_collect_writes_the_same_files_as_local(tmp_path: Path) -> None:
    path = judged_eval(tmp_path, cases=5, trials=3, seed=7)
    runs = tmp_path / "runs"
    assert run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    (local,) = [p for p in runs.iterdir() if p.is_dir()]
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--runner", "process", "--runner-option", "shards=2",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sharded = new_run(runs, {local})
    assert_same_files(normalized_run(sharded, collected=True), normalized_run(local, collected=True))
    meta = load(sharded / "run.json")
    assert meta["runner"]["name"] == "process" and meta["grading"]["runner"] == {"name": "local"}


@pytest.mark.slow
def test_command_runner_moves_files_through_the_channel(tmp_path: Path) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=4))
    local = _grade(tmp_path, source)
    remote = _grade(tmp_path, source, "--runner", "command", "--runner-option", "shards=2",
                    "--runner-option", "template=sh -c 'cd / && exec \"$@\"' worker {argv}")
    assert_same_files(normalized_run(remote), normalized_run(local))
