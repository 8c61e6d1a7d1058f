"""What a crash leaves is removed by the next command — and nothing a live process owns."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import basic_eval, only_run, run_cli, write_eval

from mst.runs import debris


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[str]]:
    """A live process that can be told to open and lock a path, as another mst would."""
    code = ("import fcntl, os, sys\nheld = []\nfor line in sys.stdin:\n"
            "    fd = os.open(line.strip(), os.O_RDONLY)\n    fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "    held.append(fd)\n    print('locked', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait()


def hold(proc: subprocess.Popen[str], path: Path) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{path}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "locked"


def collected(tmp_path: Path) -> Path:
    path = write_eval(tmp_path, basic_eval())
    assert run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    return only_run(tmp_path / "runs")


def test_resume_removes_dead_writers_temp_files_and_keeps_live_ones(tmp_path: Path,
                                                                    holder: subprocess.Popen[str]) -> None:
    run = collected(tmp_path)
    dead, live = dead_pid(), holder.pid
    leftovers = [run / f".run.json.{dead}.tmp", run / f".results.json.{dead}.tmp",
                 run / "graders/base/c1" / f".0.jsonl.{dead}.tmp",
                 run / "transcripts/base/c1" / f".0.jsonl.{dead}.tmp", tmp_path / "runs" / f".latest.json.{dead}.tmp"]
    alive = run / f".summary.json.{live}.tmp"  # its writer is running
    locked = run / f".comparisons.json.{dead}.tmp"  # another pid namespace's writer: its lock says it is live
    artifact = run / "artifacts/base/c1/0" / f".scratch.{dead}.tmp"  # a client's own file, whatever its name
    for file in [*leftovers, alive, locked, artifact]:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("partial")
    hold(holder, locked)

    proc = run_cli("run", "--resume", str(run), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [f for f in leftovers if f.exists()] == []
    assert alive.exists() and locked.exists() and artifact.exists()


def test_next_run_removes_a_dead_runs_staging_dir_and_work_dirs(tmp_path: Path,
                                                                holder: subprocess.Popen[str]) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = dead_pid()
    runs = tmp_path / "runs"
    staging = runs / f".20260101-000000-t-abcd.{dead}.staging"
    (staging / "transcripts").mkdir(parents=True)
    (staging / "run.json").write_text("{}")
    live_staging = runs / f".20260101-000000-t-beef.{holder.pid}.staging"
    live_staging.mkdir()
    shards = tmp / f"mst-grade-shards-{dead}-x1y2"
    (shards / "shard-1/results").mkdir(parents=True)
    worker = tmp / f"mst-worker-{dead}-q9"
    worker.mkdir()
    in_use = tmp / f"mst-collect-shards-{dead}-z3"  # its coordinator died, a worker still holds it
    in_use.mkdir()
    hold(holder, in_use)
    kept = tmp / "mst-grade-shards-kept-123-abc"  # keep=true: for the user, never swept
    kept.mkdir()
    path = write_eval(tmp_path, basic_eval())

    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path, env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr
    assert not staging.exists() and not shards.exists() and not worker.exists()
    assert live_staging.exists() and in_use.exists() and kept.exists()


def test_the_closing_sweep_waits_for_a_dead_coordinators_workers(tmp_path: Path) -> None:
    """A coordinator killed just before the next command leaves workers still starting: the
    opening sweep must keep their directory, the closing one removes it once they have exited."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    orphaned = tmp / f"mst-grade-shards-{dead_pid()}-w0"
    orphaned.mkdir()
    code = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(float(sys.argv[2]))\n")
    worker = subprocess.Popen([sys.executable, "-c", code, str(orphaned), "3"], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None and worker.stdout.readline().strip() == "locked"
    try:
        assert debris.sweep_work_dirs(str(tmp)) == [] and orphaned.exists()  # the opening sweep never waits
        path = write_eval(tmp_path, basic_eval())
        proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path, env={"TMPDIR": str(tmp)})
        assert proc.returncode == 0, proc.stderr
        assert not orphaned.exists()
    finally:
        worker.kill()
        worker.wait()


def test_a_second_writer_of_one_run_is_refused(tmp_path: Path) -> None:
    run = collected(tmp_path)
    fd = os.open(run, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running `mst run --resume` holds it
        proc = run_cli("grade", str(run), "--resume", cwd=tmp_path)
    finally:
        os.close(fd)
    assert proc.returncode == 2
    assert f"{run}: another mst command is writing this run now" in proc.stderr
    assert run_cli("grade", str(run), "--resume", cwd=tmp_path).returncode == 0


def test_owned_dir_kept_is_renamed_out_of_the_sweep(tmp_path: Path) -> None:
    owned = debris.owned_dir("mst-grade-shards-", tmp_path)
    assert owned.path.name.startswith(f"mst-grade-shards-{os.getpid()}-")
    assert debris.sweep_work_dirs(str(tmp_path)) == []  # ours, and live
    owned.close(keep=True)
    assert owned.path.name.startswith(f"mst-grade-shards-kept-{os.getpid()}-") and owned.path.is_dir()
    gone = debris.owned_dir("mst-worker-", tmp_path)
    gone.close()
    assert not gone.path.exists()


def test_a_failed_new_run_leaves_no_staging_dir(tmp_path: Path) -> None:
    from mst.runs.layout import create_run_dir

    def populate(staging: object, run_id: str) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        create_run_dir(tmp_path / "runs", "t", populate)
    assert list((tmp_path / "runs").iterdir()) == []

