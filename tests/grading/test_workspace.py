"""The agentic judge's workspace (mst.grading.workspace): its layout, links not copies, read-only, removed."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from mst.grading import workspace as ws
from mst.grading.judges import CaseView, TrialView

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients_real"))
from agentic_helpers import ANSWER, trial_on_disk

CASE = CaseView("c1", "How many claw hammers are in stock?", "42", {"shop": "hardware"}, 1)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_one_trial_layout_linked_and_read_only(tmp_path: Path) -> None:
    trial = trial_on_disk(tmp_path / "run", artifacts={"report.txt": b"stock: 42\n", "sub/deep.bin": b"\0" * 10})
    root, placed = ws.build(CASE, [("", trial)], parent=str(tmp_path))
    try:
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        assert files == ["artifacts", "artifacts/report.txt", "artifacts/sub", "artifacts/sub/deep.bin", "task.json",
                         "transcript.jsonl", "transcript.md"]
        assert json.loads((root / "task.json").read_text()) == {
            "case": "c1", "prompt": CASE.prompt, "expected": "42", "metadata": {"shop": "hardware"}}
        assert ANSWER in (root / "transcript.md").read_text()
        # Links, not copies: the run's own files (same inode), no bytes copied.
        assert (root / "artifacts/sub/deep.bin").stat().st_ino == (trial.artifacts_dir / "sub/deep.bin").stat().st_ino
        assert (root / "transcript.jsonl").stat().st_ino == trial.transcript_path.stat().st_ino  # type: ignore[union-attr]
        assert placed == ws.Placed(linked=3, copied=0)
        for folder in (root, root / "artifacts", root / "artifacts/sub"):
            assert _mode(folder) == 0o555, folder
        assert _mode(root / "task.json") == _mode(root / "transcript.md") == 0o444
        # The run's files keep their modes: the workspace never changes the stored run.
        assert _mode(trial.artifacts_dir / "report.txt") & 0o200  # type: ignore[operator]
    finally:
        ws.remove(root)
    assert not root.exists()
    assert (trial.artifacts_dir / "sub/deep.bin").read_bytes() == b"\0" * 10  # type: ignore[operator]


def test_pairwise_sides_are_neutral_folders(tmp_path: Path) -> None:
    a = trial_on_disk(tmp_path / "run", "the-candidate", answer="A's answer")
    b = trial_on_disk(tmp_path / "run", "the-baseline", answer="B's answer")
    root, _ = ws.build(CASE, [("A", a), ("B", b)], parent=str(tmp_path))
    try:
        assert sorted(p.name for p in root.iterdir()) == ["A", "B", "task.json"]
        assert "A's answer" in (root / "A/transcript.md").read_text()
        assert "B's answer" in (root / "B/transcript.md").read_text()
        everything = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
        assert b"the-candidate" not in everything and b"the-baseline" not in everything
        assert _mode(root / "A") == _mode(root / "B") == 0o555
    finally:
        ws.remove(root)


def test_files_are_copied_where_they_cannot_be_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = trial_on_disk(tmp_path / "run")

    def no_links(src: str, dst: str, **_: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    root, placed = ws.build(CASE, [("", trial)], parent=str(tmp_path))
    try:
        assert placed == ws.Placed(linked=0, copied=2)
        copy = root / "artifacts/report.txt"
        assert copy.read_bytes() == b"stock: 42\n" and _mode(copy) == 0o444
        assert copy.stat().st_ino != (trial.artifacts_dir / "report.txt").stat().st_ino  # type: ignore[operator]
    finally:
        ws.remove(root)


def test_a_trial_without_transcript_or_artifacts_gets_only_its_task(tmp_path: Path) -> None:
    trial = TrialView(variant="v", case_id="c1", trial=0, answer=None, ending={"kind": "trial"}, transcript=None)
    root, _ = ws.build(CASE, [("", trial)], parent=str(tmp_path))
    try:
        assert [p.name for p in root.iterdir()] == ["task.json"]
    finally:
        ws.remove(root)


def test_symlinks_in_artifacts_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("not the trial's")
    trial = trial_on_disk(tmp_path / "run")
    (trial.artifacts_dir / "link").symlink_to(secret)  # type: ignore[operator]
    root, _ = ws.build(CASE, [("", trial)], parent=str(tmp_path))
    try:
        assert not (root / "artifacts/link").exists()
    finally:
        ws.remove(root)


def test_the_workspace_is_removed_whatever_happens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    trial = trial_on_disk(tmp_path / "run")
    with pytest.raises(RuntimeError), ws.workspace(CASE, [("", trial)]) as root:
        assert root.parent == tmp_path and (root / "task.json").exists()
        raise RuntimeError("the judge crashed")
    assert not root.exists()


def test_on_another_filesystem_it_is_made_inside_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    trial = trial_on_disk(run)
    (run / "run.json").write_text("{}")
    other = tmp_path / "tmp"
    other.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(other))
    real_stat = os.stat

    class Moved:
        def __init__(self, st: os.stat_result) -> None:
            self.st_dev = st.st_dev + 1

    monkeypatch.setattr(os, "stat", lambda p, *a, **k: Moved(real_stat(p)) if str(p) == str(other)
                        else real_stat(p, *a, **k))
    assert ws.workspace_parent([trial]) == str(run / ws.HIDDEN_PARENT)
