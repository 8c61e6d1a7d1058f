"""The report's chunks written while grading goes case by case (ChunkStream): the same bytes as
chunks written afterwards from the run's files, no transcript read a second time, and a whole
report after a crash mid-grading and a resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.report.conftest import report_eval

import mst.grading.phase as phase
import mst.report.trials as trials
from mst import api
from mst.report.html import CHUNKS_DIR, stream_chunks, write_report
from mst.runs.run import open_run


def chunk_files(run_dir: Path) -> dict[str, bytes]:
    """The report's one generation of chunks, by file name (the generation's name is random)."""
    generations = list((run_dir / CHUNKS_DIR).iterdir())
    assert len(generations) == 1, generations
    return {f.name: f.read_bytes() for f in sorted(generations[0].iterdir())}


def written_afresh(run_dir: Path) -> dict[str, bytes]:
    """The chunks `mst report` writes from the run's files (no stream)."""
    write_report(run_dir)
    return chunk_files(run_dir)


def transcript_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the report module reads, from now on."""
    seen: list[str] = []
    read = trials.read_bytes

    def counting(path: str | Path) -> bytes:
        seen.append(str(path))
        return read(path)

    monkeypatch.setattr(trials, "read_bytes", counting)
    return seen


def test_the_report_reads_no_transcript_grading_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = transcript_reads(monkeypatch)
    outcome = api.run_eval(report_eval(tmp_path), runs_dir=tmp_path / "runs")
    run = outcome.run
    graded = {f"{run.root}/{run.attempts[k].transcript}" for k in run.trial_grades}
    assert graded and not graded & set(reads)  # each transcript grading read was handed over
    streamed = chunk_files(run.paths.root)
    assert written_afresh(run.paths.root) == streamed  # byte for byte what the files give


def test_a_regrade_streams_the_same_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = api.run_eval(report_eval(tmp_path), runs_dir=tmp_path / "runs").run
    reads = transcript_reads(monkeypatch)
    regrade = api.grade(source.paths.root, runs_dir=tmp_path / "regrades").run
    assert regrade.trial_grades and not {f"{regrade.root}/{regrade.attempts[k].transcript}"
                                         for k in regrade.trial_grades} & set(reads)
    assert written_afresh(regrade.paths.root) == chunk_files(regrade.paths.root)


def test_a_crash_mid_grading_then_resume_leaves_a_whole_report(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    grade = phase.grade_trial
    calls = 0

    def crashing(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 30:  # mid-grading: some cases done, their records journaled
            raise KeyboardInterrupt
        return grade(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(phase, "grade_trial", crashing)
    with pytest.raises(KeyboardInterrupt):
        api.run_eval(report_eval(tmp_path), runs_dir=tmp_path / "runs")
    monkeypatch.setattr(phase, "grade_trial", grade)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    api.resume_run(run_dir)
    resumed = chunk_files(run_dir)  # the cut-short generation is gone
    assert written_afresh(run_dir) == resumed


def test_a_stream_that_cannot_serve_is_replaced(tmp_path: Path) -> None:
    run_dir = api.run_eval(report_eval(tmp_path), runs_dir=tmp_path / "runs").run.paths.root
    fresh = written_afresh(run_dir)
    run = open_run(run_dir)
    stream = stream_chunks(run, [("case-01", 2), ("case-00", 2)], ["cand", "base"])
    stream.case_done("case-00")  # out of the page's order, and short of the run's attempts
    write_report(run, stream)
    assert chunk_files(run_dir) == fresh


def test_the_stream_writes_cases_grading_did_not_visit(tmp_path: Path) -> None:
    run_dir = api.run_eval(report_eval(tmp_path), runs_dir=tmp_path / "runs").run.paths.root
    fresh = written_afresh(run_dir)
    run = open_run(run_dir)
    stream = stream_chunks(run, [(f"case-{i:02d}", 2) for i in range(12)], ["cand", "base"])
    stream.case_done("case-05")  # the five before it are written from their files
    assert stream.close() and {f.name: f.read_bytes() for f in stream.folder.iterdir()} == fresh
