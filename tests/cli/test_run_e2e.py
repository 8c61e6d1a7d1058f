"""`mst run` end to end through the real CLI: files, summary, every ending, exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval

# failure injected by the mock → the stored ending it must become
ENDINGS: dict[str, dict[str, Any]] = {
    "rate-limit": {"kind": "infrastructure", "what": "provider-api", "retryable": True},
    "server-error": {"kind": "infrastructure", "what": "provider-api", "retryable": True},
    "network": {"kind": "infrastructure", "what": "network", "retryable": True},
    "client-crash": {"kind": "infrastructure", "what": "client-app", "retryable": True},
    "context-overflow-first": {"kind": "infrastructure", "what": "setup", "retryable": False},
    "deadline": {"kind": "infrastructure", "what": "deadline", "retryable": True},
    "context-overflow": {"kind": "trial", "outcome": "context-limit"},
    "turn-limit": {"kind": "trial", "outcome": "turn-limit"},
    "time-limit": {"kind": "trial", "outcome": "time-limit"},
    "client-error": {"kind": "trial", "outcome": "client-error"},
}


def test_quickstart_style_run_writes_every_file(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval())
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = only_run(tmp_path / "runs")
    for name in ("run.json", "attempts.jsonl", "results.json", "summary.json", "comparisons.json"):
        assert (run / name).is_file(), name
    assert load(tmp_path / "runs" / "latest.json")["run"] == run.name
    doc = load(run / "run.json")
    assert doc["schema"] == "mst.run/v1"
    assert doc["phases"] == {"collect": "complete", "grade": "complete"}
    assert len(doc["attempts"]) == 8
    for attempt in doc["attempts"]:
        assert attempt["ending"] == {"kind": "trial", "outcome": "completed"}
        assert attempt["infrastructureError"] is None
        assert (run / attempt["transcript"]).is_file()
    summary = load(run / "summary.json")
    for variant in summary["variants"]:
        assert variant["passRate"]["estimate"] == 1.0
        assert variant["cases"] == {"total": 2, "passed": 2, "failed": 0, "incomplete": 0}
    assert "base" in proc.stdout and "cand" in proc.stdout


def test_every_ending_reaches_run_json_and_summary(tmp_path: Path) -> None:
    variants = [mock_variant("ok", baseline=True)]
    for failure in ENDINGS:
        variant = mock_variant(failure, inject=[{"failure": failure}])
        if failure in ("turn-limit", "context-overflow"):
            variant["settings"]["mock"]["steps"] = [{"tool": "missing_tool"}]
        if failure == "time-limit":
            variant["settings"]["timeLimitSeconds"] = 0.2
        variants.append(variant)
    doc = basic_eval(trials=1, variants=variants, deadlineSeconds=1.5,
                     cases=[{"id": "c1", "prompt": "say 42", "expected": "42"}])
    path = write_eval(tmp_path, doc)
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # incomplete cases remain
    run = only_run(tmp_path / "runs")
    attempts = {a["variant"]: a for a in load(run / "run.json")["attempts"]}
    summary = {v["id"]: v for v in load(run / "summary.json")["variants"]}
    for failure, expected in ENDINGS.items():
        ending = attempts[failure]["ending"]
        assert {k: ending[k] for k in expected} == expected, (failure, ending)
        if expected["kind"] == "infrastructure":
            assert attempts[failure]["infrastructureError"].startswith(expected["what"] + ": ")
            assert summary[failure]["infrastructure"]["byWhat"] == {expected["what"]: 1}
            assert summary[failure]["cases"]["incomplete"] == 1
            assert summary[failure]["passRate"]["estimate"] is None
        else:
            assert attempts[failure]["infrastructureError"] is None
            assert summary[failure]["trials"]["outcomes"] == {expected["outcome"]: 1}
            assert summary[failure]["cases"]["incomplete"] == 0
    assert [n["what"] for n in summary["context-overflow-first"]["needsFix"]] == ["setup"]
    assert summary["network"]["needsFix"] == []


def test_no_grade_then_grade_then_resume(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval())
    proc = run_cli("run", str(path), "--runs-dir", "runs", "--no-grade", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # nothing graded yet: every case incomplete
    source = only_run(tmp_path / "runs")
    assert load(source / "run.json")["phases"] == {"collect": "complete", "grade": "skipped"}
    proc = run_cli("grade", str(source), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    regrades = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != source]
    assert len(regrades) == 1
    regrade = regrades[0]
    doc = load(regrade / "run.json")
    assert doc["regradeOf"] == source.name
    assert doc["phases"]["grade"] == "complete"
    transcript = doc["attempts"][0]["transcript"]
    assert (regrade / transcript).stat().st_ino == (source / transcript).stat().st_ino  # linked, not copied
    proc = run_cli("grade", str(regrade), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("trials", [1, 3])
def test_failing_trials_make_failed_cases_not_incomplete(tmp_path: Path, trials: int) -> None:
    doc = basic_eval(trials=trials, variants=[mock_variant("v", successRate=0.0)])
    proc = run_cli("run", str(write_eval(tmp_path, doc)), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = load(only_run(tmp_path / "runs") / "summary.json")
    variant = summary["variants"][0]
    assert variant["cases"]["failed"] == 2
    assert variant["passRate"]["estimate"] == 0.0
