"""``mst.fileio.write_trial_file``: the system calls a trial file costs, and that its folder hint
is only ever a hint (bench/perf16_percase.md, docs/run-directory.md)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mst import fileio
from mst.fileio import write_trial_file


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts ``os.open`` and ``os.mkdir`` calls, and the failed ones, made by fileio."""
    seen: Counter[str] = Counter()
    real_open, real_mkdir = os.open, os.mkdir

    def counted(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            try:
                return real(*args, **kwargs)
            except OSError as exc:
                seen[f"{name} {type(exc).__name__}"] += 1
                raise

        return call

    monkeypatch.setattr(os, "open", counted("open", real_open))
    monkeypatch.setattr(os, "mkdir", counted("mkdir", real_mkdir))
    monkeypatch.setattr(fileio, "_MADE", set(), raising=False)  # raising: the tests fail, not error, without it
    monkeypatch.setattr(fileio, "_MADE_PARENTS", set(), raising=False)
    return seen


def test_a_new_case_folder_under_a_folder_this_process_made_costs_no_failed_create(
    tmp_path: Path, calls: Counter[str]
) -> None:
    root = f"{tmp_path}/transcripts/v"
    write_trial_file(f"{root}/c0/0.jsonl", b"a\n")  # the first one makes transcripts/v/ too
    calls.clear()
    for case in range(1, 6):
        write_trial_file(f"{root}/c{case}/0.jsonl", b"a\n")
    assert calls == Counter({"open": 5, "mkdir": 5})  # one mkdir and one create each, nothing failed
    calls.clear()
    for case in range(6):  # later trials of the same cases: their folders are known
        write_trial_file(f"{root}/c{case}/1.jsonl", b"b\n")
    assert calls == Counter({"open": 6})
    assert sorted(os.listdir(f"{root}/c3")) == ["0.jsonl", "1.jsonl"]


def test_folders_made_by_someone_else_cost_what_they_did(tmp_path: Path, calls: Counter[str]) -> None:
    """A resumed run's or a regrade's folders exist: the create comes first, as before."""
    for case in range(3):
        os.makedirs(f"{tmp_path}/graders/v/c{case}")
    calls.clear()
    write_trial_file(f"{tmp_path}/graders/v/c0/0.jsonl", b"x\n")
    write_trial_file(f"{tmp_path}/graders/v/c1/0.jsonl", b"x\n")
    assert calls == Counter({"open": 2})


def test_the_hint_is_never_relied_on(tmp_path: Path, calls: Counter[str]) -> None:
    """Folders this process made and that went (a run deleted, made again by another process)
    are made again, and a folder someone else made meanwhile is used as it is."""
    root = f"{tmp_path}/transcripts/v"
    write_trial_file(f"{root}/c0/0.jsonl", b"1\n")
    shutil.rmtree(tmp_path / "transcripts")
    write_trial_file(f"{root}/c0/1.jsonl", b"2\n")  # its folder was known: made again
    write_trial_file(f"{root}/c1/0.jsonl", b"3\n")
    shutil.rmtree(tmp_path / "transcripts")
    write_trial_file(f"{root}/c2/0.jsonl", b"4\n")  # its parent was known and went: made again
    os.mkdir(f"{root}/c3")  # made by another writer
    write_trial_file(f"{root}/c3/0.jsonl", b"5\n")
    assert (tmp_path / "transcripts/v/c2/0.jsonl").read_bytes() == b"4\n"
    assert (tmp_path / "transcripts/v/c3/0.jsonl").read_bytes() == b"5\n"
    write_trial_file(f"{root}/c3/0.jsonl", b"6\n")  # an existing file: replaced, as before
    assert (tmp_path / "transcripts/v/c3/0.jsonl").read_bytes() == b"6\n"
    assert sorted(os.listdir(f"{root}/c3")) == ["0.jsonl"]


def test_a_file_where_the_folder_goes_is_an_error(tmp_path: Path, calls: Counter[str]) -> None:
    root = f"{tmp_path}/transcripts/v"
    write_trial_file(f"{root}/c0/0.jsonl", b"1\n")
    Path(f"{root}/c1").write_bytes(b"not a folder")
    with pytest.raises(NotADirectoryError):
        write_trial_file(f"{root}/c1/0.jsonl", b"2\n")


def test_the_record_of_made_folders_stays_bounded(
    tmp_path: Path, calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fileio, "_MADE_MAX", 4)
    for case in range(10):
        write_trial_file(f"{tmp_path}/t/v/c{case}/0.jsonl", b"x\n")
    assert len(fileio._MADE) <= 4
    assert all((tmp_path / f"t/v/c{case}/0.jsonl").exists() for case in range(10))


def test_a_short_write_goes_on_to_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``os.write`` normally takes a trial file whole; one that takes part of it is continued."""
    real_write = os.write
    sizes: list[int] = []

    def short(fd: int, data: Any) -> int:
        sizes.append(len(data))
        return real_write(fd, bytes(data)[:3])

    monkeypatch.setattr(os, "write", short)
    write_trial_file(f"{tmp_path}/t/v/c/0.jsonl", b"0123456789")
    assert (tmp_path / "t/v/c/0.jsonl").read_bytes() == b"0123456789"
    assert sizes == [10, 7, 4, 1]
