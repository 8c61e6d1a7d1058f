"""Journals and the run model: appends survive, torn lines are repaired only on resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from mst.config.errors import UserError
from mst.fileio import atomic_write_json, read_json
from mst.runs.files import Journal, read_journal
from mst.runs.layout import RunPaths
from mst.runs.run import Run, open_run


def test_journal_round_trip_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        journal.append({"a": 1})
        journal.append({"a": 2})
    with open(path, "ab") as fh:
        fh.write(b'{"a": 3')  # a crash cut this write short
    with pytest.raises(UserError, match="truncated"):
        list(read_journal(path))
    assert [r["a"] for r in read_journal(path, repair=True)] == [1, 2]
    assert path.read_bytes().endswith(b'{"a":2}\n')  # the torn record is gone from the file
    assert [r["a"] for r in read_journal(path)] == [1, 2]


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    atomic_write_json(tmp_path / "x.json", {"b": [1, 2]})
    assert read_json(tmp_path / "x.json", "x") == {"b": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def _meta(run_id: str) -> dict[str, object]:
    return {"schema": "mst.run/v1", "id": run_id, "eval": {"name": "e", "path": "/x", "digest": "d"},
            "variants": [{"id": "v"}], "cases": [{"id": "c", "trials": 1}],
            "phases": {"collect": "partial", "grade": "partial"}}


def test_journal_record_replaces_the_snapshot_and_old_records_are_mapped(tmp_path: Path) -> None:
    run = Run(RunPaths(tmp_path), _meta("r1"))
    run.attempts[("v", "c", 0)] = {"variant": "v", "case": "c", "trial": 0, "infrastructureError": "boom"}
    run.write()
    opened = open_run(tmp_path)
    record = opened.attempts[("v", "c", 0)]
    assert record["ending"] == {"kind": "infrastructure", "what": "client-app", "why": "boom", "retryable": True}
    with Journal(tmp_path / "attempts.jsonl") as journal:
        journal.append({"variant": "v", "case": "c", "trial": 0, "try": 2,
                        "ending": {"kind": "trial", "outcome": "completed"}})
    opened = open_run(tmp_path)
    assert len(opened.attempts) == 1 and opened.attempts[("v", "c", 0)]["try"] == 2
