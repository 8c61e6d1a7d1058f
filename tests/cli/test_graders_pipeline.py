"""Deterministic graders wired into `mst run`: the manifest, results, summary, replay, experiments."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from tests.helpers import basic_eval, load, mock_variant, only_run, run_cli, write_eval

from mst.cli import main
from mst.graders import documents_of
from mst.runs.graded import graded_session


def _run(tmp_path: Path, **overrides: object) -> Path:
    path = write_eval(tmp_path, basic_eval(**overrides))
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return only_run(tmp_path / "runs")


def _stored(run: Path, key: tuple[str, str, int]) -> tuple[dict[str, object] | None, list[dict[str, object]]]:
    """The manifest and results of a trial's graded session."""
    return documents_of(graded_session(run, *key))


def test_graders_write_one_manifest_and_never_touch_the_transcript(tmp_path: Path) -> None:
    run = _run(tmp_path, graders={"loops": {"enabled": False}, "tool-success-rate": {"threshold": 0.5}})
    attempt = load(run / "run.json")["attempts"][0]
    key = (attempt["variant"], attempt["case"], attempt["trial"])
    # One manifest for the run, no grader file per trial, no copy of the transcript (docs/run-directory.md).
    [manifest_file] = (run / "graders").iterdir()
    assert manifest_file.name.startswith("manifest-")
    transcript = (run / attempt["transcript"]).read_text()
    manifest, results_list = _stored(run, key)
    assert manifest is not None and manifest == load(manifest_file)
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
    result = CliRunner().invoke(main, ["graders", "run", str(run / attempt["transcript"]), "--json",
                                       "--config", str(tmp_path / "eval.yaml")])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.output)
    _, stored = _stored(run, (attempt["variant"], attempt["case"], attempt["trial"]))
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


def test_replay_with_the_runs_manifest_as_config_keeps_disabled_graders_disabled(tmp_path: Path) -> None:
    """The manifest file the trial's record names is what its grading used: replaying with it
    gives the stored results."""
    run = _run(tmp_path, graders={"loops": {"enabled": False}, "retries": {"threshold": 1}})
    attempt = load(run / "run.json")["attempts"][0]
    record = next(t for t in load(run / "results.json")["trials"]
                  if (t["variant"], t["case"], t["trial"]) == (attempt["variant"], attempt["case"], attempt["trial"]))
    result = CliRunner().invoke(main, ["graders", "run", str(run / attempt["transcript"]), "--json",
                                       "--config", str(run / record["gradersPath"])])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.output)
    manifest, stored = _stored(run, (attempt["variant"], attempt["case"], attempt["trial"]))
    assert replayed["results"] == stored and replayed["manifest"] == manifest
    assert "loops" not in {r["id"] for r in stored}


def test_a_regrade_writes_the_same_grader_files_and_graded_sessions(tmp_path: Path) -> None:
    """Replay by regrading: the grader manifest, and so every trial's graded session, is byte for
    byte the one the first grading wrote; the regrade stores no transcript copy either."""
    run = _run(tmp_path, graders={"loops": {"enabled": False}})
    proc = run_cli("grade", str(run), "--runs-dir", "regrades", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    regraded = only_run(tmp_path / "regrades")
    first = {p.relative_to(run): p.read_bytes() for p in (run / "graders").rglob("*") if p.is_file()}
    again = {p.relative_to(regraded): p.read_bytes() for p in (regraded / "graders").rglob("*") if p.is_file()}
    assert first == again and len(first) == 1
    for a in load(run / "run.json")["attempts"]:
        key = (a["variant"], a["case"], a["trial"])
        assert graded_session(regraded, *key) == graded_session(run, *key)
