"""Deterministic graders wired into `mst run`: files per trial, results, summary, replay, experiments."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval

from mst.cli import main
from mst.runs.graded import graded_session, grader_documents


def _run(tmp_path: Path, **overrides: object) -> Path:
    path = write_eval(tmp_path, basic_eval(**overrides))
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return only_run(tmp_path / "runs")


def test_graders_write_one_file_per_trial_and_never_touch_the_transcript(tmp_path: Path) -> None:
    run = _run(tmp_path, graders={"loops": {"enabled": False}, "tool-success-rate": {"threshold": 0.5}})
    attempt = load(run / "run.json")["attempts"][0]
    key = (attempt["variant"], attempt["case"], attempt["trial"])
    folder = run / "graders" / attempt["variant"] / attempt["case"]
    # One grader file per trial, and no copy of the transcript's bytes (docs/run-directory.md).
    trials = len(load(run / "run.json")["attempts"])
    assert len(list((run / "graders").glob("*/*/*"))) == trials
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{a['trial']}.jsonl" for a in load(run / "run.json")["attempts"] if a["case"] == attempt["case"]
        and a["variant"] == attempt["variant"])
    transcript = (run / attempt["transcript"]).read_text()
    grader_file = (folder / f"{attempt['trial']}.jsonl").read_text()
    assert transcript.splitlines()[0] not in grader_file
    manifest, results_list = grader_documents(folder / f"{attempt['trial']}.jsonl")
    assert manifest is not None
    results = {"schemaVersion": 2, "results": results_list}
    assert results["schemaVersion"] == 2 and manifest["schemaVersion"] == 2
    ids = [r["id"] for r in results["results"]]
    assert "loops" not in ids and "tool-success-rate" in ids and len(ids) == 9
    # The graded session, read as a whole: the transcript, then the grader events.
    graded = graded_session(run, *key)
    assert graded[: len(transcript.splitlines())] == [json.loads(line) for line in transcript.splitlines()]
    appended = [e for e in graded if e["type"].startswith("grader.")]
    assert [e["type"] for e in appended] == ["grader.manifest"] + ["grader.result"] * 9
    assert {e["provenance"]["phase"] for e in appended} == {"grading"}
    assert [e["provenance"]["index"] for e in appended] == list(range(len(graded) - 10, len(graded)))
    assert "grader." not in transcript  # the collected transcript is never modified
    trial = next(t for t in load(run / "results.json")["trials"]
                 if (t["variant"], t["case"], t["trial"]) == (attempt["variant"], attempt["case"], attempt["trial"]))
    assert {g["id"] for g in trial["graders"]} == set(ids)
    summary = load(run / "summary.json")
    steps = summary["variants"][0]["graders"]["execution-step-count"]
    assert steps["mean"] == 1.0  # the mock answers in one model request
    # A grader with no value in any trial (no tool calls here) is still listed, with no mean.
    entry = summary["variants"][0]["graders"]["tool-success-rate"]  # issue 15 added keys: compare these
    assert {k: entry[k] for k in ("mean", "low", "high", "cases", "n")} == {
        "mean": None, "low": None, "high": None, "cases": 0, "n": 0}


def test_replay_cli_gives_the_grading_phase_results(tmp_path: Path) -> None:
    run = _run(tmp_path)
    attempt = load(run / "run.json")["attempts"][1]
    grader_file = run / "graders" / attempt["variant"] / attempt["case"] / f"{attempt['trial']}.jsonl"
    result = CliRunner().invoke(main, ["graders", "run", str(run / attempt["transcript"]), "--json",
                                       "--config", str(tmp_path / "eval.yaml")])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.output)
    _, stored = grader_documents(grader_file)
    assert replayed["results"] == stored


def test_metric_references_are_validated(tmp_path: Path) -> None:
    doc = basic_eval(metrics=["grader:tool-success-rate", "grader:nope", "graders.loops.value"],
                     graders={"loops": {"enabled": False}})
    result = CliRunner().invoke(main, ["validate", str(write_eval(tmp_path, doc))])
    assert result.exit_code == 2
    assert "metrics[1]: unknown grader 'nope'" in result.output
    assert "metrics[2]: grader 'loops' is disabled" in result.output


def test_experiments_analyze_a_run(tmp_path: Path) -> None:
    cases = [{"id": f"c{i}", "prompt": "p", "expected": str(i)} for i in range(25)]
    run = _run(tmp_path, cases=cases, metrics=["grader:execution-step-count"],
               variants=[mock_variant("base", baseline=True), mock_variant("cand")])
    result = CliRunner().invoke(main, ["experiments", "analyze", str(run), "--json"])
    assert result.exit_code == 0, result.output
    analysis = json.loads(result.output)
    metric = analysis["metrics"][0]
    assert metric["id"] == "execution-step-count" and metric["direction"] == "lower"
    arms = {arm["variant"]: arm for arm in metric["arms"]}
    assert arms["base"]["n"] == arms["cand"]["n"] == 50 and arms["cand"]["difference"]["pairedCases"] == 25
    assert arms["cand"]["decision"] == "inconclusive"  # identical arms: no difference to decide on


def test_replay_with_a_trials_grader_file_as_config_keeps_disabled_graders_disabled(tmp_path: Path) -> None:
    """The grader file holds the manifest its grading used: replaying with it gives the stored results."""
    run = _run(tmp_path, graders={"loops": {"enabled": False}, "retries": {"threshold": 1}})
    attempt = load(run / "run.json")["attempts"][0]
    grader_file = run / "graders" / attempt["variant"] / attempt["case"] / f"{attempt['trial']}.jsonl"
    result = CliRunner().invoke(main, ["graders", "run", str(run / attempt["transcript"]), "--json",
                                       "--config", str(grader_file)])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.output)
    manifest, stored = grader_documents(grader_file)
    assert replayed["results"] == stored and replayed["manifest"] == manifest
    assert "loops" not in {r["id"] for r in stored}


def test_a_regrade_writes_the_same_grader_files_and_graded_sessions(tmp_path: Path) -> None:
    """Replay by regrading: every trial's grader file, and so its graded session, is byte for byte
    the one the first grading wrote; the regrade stores no transcript copy either."""
    run = _run(tmp_path, graders={"loops": {"enabled": False}})
    proc = run_cli("grade", str(run), "--runs-dir", "regrades", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    regraded = only_run(tmp_path / "regrades")
    first = {p.relative_to(run): p.read_bytes() for p in (run / "graders").rglob("*") if p.is_file()}
    again = {p.relative_to(regraded): p.read_bytes() for p in (regraded / "graders").rglob("*") if p.is_file()}
    assert first == again and len(first) == len(load(run / "run.json")["attempts"])
    for a in load(run / "run.json")["attempts"]:
        key = (a["variant"], a["case"], a["trial"])
        assert graded_session(regraded, *key) == graded_session(run, *key)
