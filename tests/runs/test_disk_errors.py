"""A disk that cannot take the run — full, read-only, a file where a folder belongs — is one clear
line naming the path (exit 2), and the run finishes with --resume once the disk is fixed."""

from __future__ import annotations

import collections
import errno
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from tests.helpers import basic_eval, load, only_run, run_cli, write_eval

from mst.runs.disk import disk_problem
from mst.runs.files import Journal


class Tmpfs:
    """A small tmpfs mounted for one test: it can be filled, grown and made read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)

    def fill(self, leave: int) -> Path:
        """Fill the disk, then free ``leave`` bytes; returns the filler file (delete it to free the rest)."""
        filler = self.path / f"filler-{uuid.uuid4().hex[:6]}"
        with open(filler, "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        size = filler.stat().st_size
        with open(filler, "r+b") as fh:
            fh.truncate(max(size - leave, 0))
        return filler


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: the full and read-only disk tests need a tmpfs mount")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here (needs root): {done.stderr.strip()}")
    try:
        yield Tmpfs(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _eval(tmp: Path, cases: int = 30) -> Path:
    # Long prompts make transcripts of a few KB each: the disk fills part way through.
    cases_ = [{"id": f"c{i}", "prompt": "p" * 3000, "expected": str(i)} for i in range(cases)]
    doc = basic_eval(graders={}, cases=cases_)
    return write_eval(tmp, doc)


def _assert_clear(proc: subprocess.CompletedProcess[str], under: Path, what: str) -> None:
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {under}") and what in lines[0] and "resume" in lines[0], lines[0]


def _assert_exact(run: Path, cases: int = 30) -> None:
    keys = [(a["variant"], a["case"], a["trial"]) for a in load(run / "run.json")["attempts"]]
    assert len(keys) == len(set(keys)) == 2 * 2 * cases
    journal = collections.Counter((r["variant"], r["case"], r["trial"])
                                  for r in map(orjson.loads, (run / "attempts.jsonl").read_bytes().splitlines()))
    assert max(journal.values()) == 1
    assert all(t["status"] == "graded" for t in load(run / "results.json")["trials"])


def test_a_full_disk_while_collecting_is_a_clear_error_and_resumable(tmp_path: Path, tmpfs: Tmpfs) -> None:
    path = _eval(tmp_path)
    filler = tmpfs.fill(leave=96 * 1024)
    proc = run_cli("run", str(path), "--runs-dir", str(tmpfs.path / "runs"), cwd=tmp_path)
    _assert_clear(proc, tmpfs.path / "runs", "no space left on the device")
    run = only_run(tmpfs.path / "runs")
    assert load(run / "run.json")["phases"]["collect"] == "partial"
    filler.unlink()
    proc = run_cli("run", "--resume", str(run), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _assert_exact(run)
    assert [p for p in (tmpfs.path / "runs").rglob("*") if p.name.endswith((".tmp", ".staging"))] == []


def test_a_full_disk_while_grading_is_a_clear_error_and_resumable(tmp_path: Path, tmpfs: Tmpfs) -> None:
    path = _eval(tmp_path)
    proc = run_cli("run", str(path), "--runs-dir", str(tmpfs.path / "runs"), "--no-grade", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run = only_run(tmpfs.path / "runs")
    filler = tmpfs.fill(leave=64 * 1024)  # graders write three files a trial: they run out part way
    proc = run_cli("grade", str(run), "--resume", cwd=tmp_path)
    _assert_clear(proc, run, "no space left on the device")
    filler.unlink()
    proc = run_cli("grade", str(run), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _assert_exact(run)


def test_a_read_only_run_directory_is_a_clear_error_and_resumable(tmp_path: Path, tmpfs: Tmpfs) -> None:
    path = _eval(tmp_path, cases=3)
    proc = run_cli("run", str(path), "--runs-dir", str(tmpfs.path / "runs"), "--no-grade", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run = only_run(tmpfs.path / "runs")
    tmpfs.remount("ro")
    _assert_clear(run_cli("grade", str(run), "--resume", cwd=tmp_path), run, "the file system is read-only")
    _assert_clear(run_cli("run", "--resume", str(run), cwd=tmp_path), run, "the file system is read-only")
    _assert_clear(run_cli("run", str(path), "--runs-dir", str(tmpfs.path / "runs"), cwd=tmp_path),
                  tmpfs.path / "runs", "the file system is read-only")
    tmpfs.remount("rw")
    assert run_cli("run", "--resume", str(run), cwd=tmp_path).returncode == 3  # a --no-grade run: collected
    assert run_cli("grade", str(run), "--resume", cwd=tmp_path).returncode == 0
    _assert_exact(run, cases=3)


def test_transcripts_replaced_by_a_file_names_it(tmp_path: Path) -> None:
    path = _eval(tmp_path, cases=2)
    assert run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path).returncode == 0
    run = only_run(tmp_path / "runs")
    shutil.rmtree(run / "transcripts")
    (run / "transcripts").write_text("not a folder")
    for args in (["grade", str(run)], ["run", "--resume", str(run)]):
        proc = run_cli(*args, cwd=tmp_path)
        _assert_clear(proc, run / "transcripts", "is a file where mst needs a directory")


def test_a_short_journal_write_is_taken_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    journal = Journal(tmp_path / "j.jsonl")
    journal.append({"a": 1})
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:3]))  # the disk filled mid-line
    with pytest.raises(OSError) as caught:
        journal.append({"b": 2})
    monkeypatch.undo()
    journal.append({"c": 3})
    journal.close()
    assert (tmp_path / "j.jsonl").read_bytes() == b'{"a":1}\n{"c":3}\n'  # no torn line in the middle
    problem = disk_problem(caught.value)
    assert problem is not None and problem.file == str(tmp_path / "j.jsonl")
