"""No per-trial grader file (issue 16): one manifest per graders configuration, the results in the
trial's grading record, and the graded session rebuilt byte for byte (docs/run-directory.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.helpers import basic_eval, load, only_run, run_cli, write_eval

from mst.graders import replay
from mst.graders.results import GraderRun, record_entry, result_of_entry
from mst.runs.graded import Manifests, graded_session, graded_trials, grader_documents, grader_events, trial_record
from mst.runs.grading_records import GraderValue, TrialGrading
from mst.session.io import TranscriptError, dumps_jsonl, read_transcript

OLD_RUNS = Path(__file__).parent / "old_runs"  # written by mst before this change (see test_old_*)
GRADERS = {"loops": {"enabled": False}, "tool-failure-count": {"threshold": 0},
           "execution-step-count": {"threshold": 0.5}}


def _run(tmp_path: Path, **overrides: Any) -> Path:
    path = write_eval(tmp_path, basic_eval(**overrides))
    proc = run_cli("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return only_run(tmp_path / "runs")


def _keys(run: Path) -> list[tuple[str, str, int]]:
    return [(a["variant"], a["case"], a["trial"]) for a in load(run / "run.json")["attempts"]]


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_a_run_writes_one_manifest_and_no_grader_file_per_trial(tmp_path: Path) -> None:
    run = _run(tmp_path, graders=GRADERS)
    [name] = _files(run / "graders")  # eight trials, one file: the configuration's manifest
    assert name.startswith("manifest-") and name.endswith(".json")
    trials = load(run / "results.json")["trials"]
    assert len(trials) == 8 and {t["gradersPath"] for t in trials} == {f"graders/{name}"}
    manifest = load(run / "graders" / name)
    assert manifest["schemaVersion"] == 2 and "loops" in {g["id"] for g in manifest["graders"]}
    # A record's entry keeps what the manifest does not imply: never the unit, threshold, ...
    entry = next(g for g in trials[0]["graders"] if g["id"] == "execution-step-count")
    assert entry == {"id": "execution-step-count", "value": 1.0, "status": "fail", "message": entry["message"]}
    assert entry["message"]


def test_the_graded_session_holds_the_events_grading_made_and_replay_gives_them_again(tmp_path: Path) -> None:
    """Read as a whole, the graded session is the transcript and then the grader events, byte for
    byte what the GraderRun encoder makes of a fresh replay of that transcript with the manifest."""
    run = _run(tmp_path, graders=GRADERS)
    [manifest_file] = (run / "graders").iterdir()
    manifest = load(manifest_file)
    for key in _keys(run):
        transcript = read_transcript(run / "transcripts" / key[0] / key[1] / f"{key[2]}.jsonl")
        session = graded_session(run, *key)
        assert session[: len(transcript)] == transcript
        appended = session[len(transcript):]
        assert [e["type"] for e in appended] == ["grader.manifest"] + ["grader.result"] * 9
        replayed = replay(transcript, manifest)
        assert dumps_jsonl(appended) == replayed.events_jsonl()
        assert appended[0]["data"] == manifest and [e["data"] for e in appended[1:]] == replayed.results
        assert grader_events(run, *key) == appended  # the record and the transcript looked up alone


def test_a_graded_session_of_todays_format_is_the_one_mst_wrote_before(tmp_path: Path) -> None:
    """Golden from the code before this change: `old_runs/perfile` has a grader file per trial.
    Regraded now (no such file), each trial's rebuilt grader events are those files' bytes."""
    source = tmp_path / "perfile"
    shutil.copytree(OLD_RUNS / "perfile", source)
    shutil.copy(OLD_RUNS / "eval.yaml", tmp_path / "eval.yaml")
    proc = run_cli("grade", str(source), "--eval", "eval.yaml", "--runs-dir", "regrades", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    regraded = only_run(tmp_path / "regrades")
    assert [p for p in _files(regraded / "graders") if not p.startswith("manifest-")] == []
    for key in _keys(source):
        golden = (source / "graders" / key[0] / key[1] / f"{key[2]}.jsonl").read_bytes()
        assert dumps_jsonl(grader_events(regraded, *key)) == golden


def test_resume_with_a_changed_threshold_adds_a_manifest_and_each_trial_reads_its_own(tmp_path: Path) -> None:
    run = _run(tmp_path, graders=GRADERS)
    dropped = ("cand", "c2", 1)  # as if grading had been killed before this trial's record
    results = load(run / "results.json")
    results["trials"] = [t for t in results["trials"] if (t["variant"], t["case"], t["trial"]) != dropped]
    (run / "results.json").write_bytes(orjson.dumps(results))
    lines = (run / "grading.jsonl").read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if (lambda r: (r["variant"], r["case"], r["trial"]))(orjson.loads(line)) != dropped]
    assert len(kept) == len(lines) - 1
    (run / "grading.jsonl").write_bytes(b"".join(kept))
    changed = write_eval(tmp_path, basic_eval(graders={**GRADERS, "execution-step-count": {"threshold": 2}}),
                         "other.yaml")
    proc = run_cli("grade", str(run), "--resume", "--eval", str(changed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifests = _files(run / "graders")
    assert len(manifests) == 2 and all(m.startswith("manifest-") for m in manifests)
    paths = {}
    for key in _keys(run):
        record = trial_record(run, *key)
        assert record is not None and record.graders_path is not None
        paths[key] = record.graders_path
        [steps] = [e["data"] for e in graded_session(run, *key)
                   if e["type"] == "grader.result" and e["data"]["id"] == "execution-step-count"]
        manifest = next(e["data"] for e in graded_session(run, *key) if e["type"] == "grader.manifest")
        threshold = 2 if key == dropped else 0.5
        assert (steps["threshold"], steps["status"]) == (threshold, "pass" if key == dropped else "fail")
        assert next(g for g in manifest["graders"] if g["id"] == "execution-step-count")["threshold"] == threshold
    assert len(set(paths.values())) == 2
    assert sum(p == paths[dropped] for p in paths.values()) == 1


def test_old_runs_with_a_grader_file_per_trial_still_read(tmp_path: Path) -> None:
    """`old_runs/perfile` was written by mst before this change: `graders/<v>/<c>/<t>.jsonl`."""
    run = tmp_path / "perfile"
    shutil.copytree(OLD_RUNS / "perfile", run)
    observed = list(graded_trials(run))
    assert len(observed) == 2
    for variant, case, trial, manifest, results in observed:
        file = run / "graders" / variant / case / f"{trial}.jsonl"
        assert (manifest, results) == grader_documents(file)
        transcript = read_transcript(run / "transcripts" / variant / case / f"{trial}.jsonl")
        assert graded_session(run, variant, case, trial) == transcript + read_transcript(file)
    analysis = run_cli("experiments", "analyze", str(run), "--json", cwd=tmp_path)
    assert analysis.returncode == 0, analysis.stderr
    assert {m["id"] for m in orjson.loads(analysis.stdout)["metrics"]} >= {"execution-step-count"}


def test_old_runs_with_a_grader_folder_per_trial_still_read(tmp_path: Path) -> None:
    """`old_runs/folder` was written by an older mst still: `graders/<v>/<c>/<t>/` holds
    grader_manifest.json, grader_results.json and the whole graded session."""
    run = tmp_path / "folder"
    shutil.copytree(OLD_RUNS / "folder", run)
    observed = list(graded_trials(run))
    assert len(observed) == 2
    for variant, case, trial, manifest, results in observed:
        folder = run / "graders" / variant / case / str(trial)
        assert manifest == load(folder / "grader_manifest.json")
        assert results == load(folder / "grader_results.json")["results"]
        assert graded_session(run, variant, case, trial) == read_transcript(folder / "session.jsonl")
    analysis = run_cli("experiments", "analyze", str(run), "--json", cwd=tmp_path)
    assert analysis.returncode == 0, analysis.stderr


def test_replay_takes_the_runs_manifest_file_as_its_config(tmp_path: Path) -> None:
    run = _run(tmp_path, graders=GRADERS)
    [manifest_file] = (run / "graders").iterdir()
    key = _keys(run)[0]
    proc = run_cli("graders", "run", f"transcripts/{key[0]}/{key[1]}/{key[2]}.jsonl", "--json",
                   "--config", str(manifest_file), cwd=run)
    assert proc.returncode == 0, proc.stderr
    out = orjson.loads(proc.stdout)
    stored = [e["data"] for e in graded_session(run, *key) if e["type"] == "grader.result"]
    assert out["results"] == stored and out["manifest"] == load(manifest_file)


# --- the record's entries ---------------------------------------------------------------------------


def _graded() -> GraderRun:
    from mst.graders import parse_graders_config, run_graders

    session = [{"type": "model.request", "data": {"inputTokens": 3, "outputTokens": 1},
                "provenance": {"timestampMs": 5}},
               {"type": "session.result", "data": {"success": True}, "provenance": {"timestampMs": 9}}]
    return run_graders(session, parse_graders_config({"execution-step-count": {"threshold": 0.5}}))


def _round_trip(manifest: dict[str, Any], result: dict[str, Any]) -> tuple[GraderValue, dict[str, Any]]:
    """The entry a record keeps of ``result``, through its JSON, and the result rebuilt from it."""
    value = GraderValue.from_json(GraderValue(*record_entry(manifest, result)).to_json())
    return value, result_of_entry(manifest, *value)


def test_an_entry_keeps_what_the_manifest_does_not_imply_and_gives_the_result_back() -> None:
    graded = _graded()
    for result in graded.results:
        value, rebuilt = _round_trip(graded.manifest, result)
        assert set(value.to_json()) <= {"id", "value", "status", "message"}
        assert value.message == result["message"] and value.detail is None
        assert orjson.dumps(rebuilt) == orjson.dumps(result)
    with_diagnostics = {**graded.results[0], "diagnostics": [{"line": 1}]}
    value, rebuilt = _round_trip(graded.manifest, with_diagnostics)
    assert value.detail == {"diagnostics": [{"line": 1}]} and orjson.dumps(rebuilt) == orjson.dumps(with_diagnostics)


def test_a_result_the_manifest_would_not_rebuild_is_kept_whole() -> None:
    graded = _graded()
    first = graded.results[0]
    thresholded = next(r for r in graded.results if r["threshold"] is not None)
    odd = [
        {**first, "unit": "other"},  # not the manifest's
        {**first, "id": "not-in-the-manifest"},
        {**first, "thresholdOutcome": "met"},  # not what the status implies
        {**thresholded, "threshold": 0},  # 0 == 0.0, but not the type
        {**first, "extra": 1},  # a field the schema does not have
        {k: v for k, v in first.items() if k != "thresholdOutcome"},  # one it has, missing
        {**first, "message": None},
    ]
    for result in odd:
        value, rebuilt = _round_trip(graded.manifest, result)
        assert value.detail == {"result": result}
        assert orjson.dumps(rebuilt) == orjson.dumps(result)


def test_a_result_with_its_fields_in_another_order_is_rebuilt_in_the_schemas_order() -> None:
    """A grade shard's results come back with their keys sorted: the same result, not another."""
    graded = _graded()
    for result in graded.results:
        value, rebuilt = _round_trip(graded.manifest, dict(sorted(result.items())))
        assert value.detail is None and orjson.dumps(rebuilt) == orjson.dumps(result)


def test_a_records_entries_round_trip_through_its_json() -> None:
    entries = [{"id": "a", "value": 1.0, "status": "pass"},
               {"id": "b", "value": None, "status": "unavailable", "message": "no evidence"},
               {"id": "c", "value": 2.0, "status": "pass", "message": "m", "diagnostics": [{"x": 1}]},
               {"id": "d", "value": None, "status": "error", "result": {"id": "d", "status": "error"}}]
    data = {"variant": "v", "case": "c", "trial": 0, "status": "graded", "passed": True, "verdicts": [],
            "errors": [], "graders": entries, "gradersPath": "graders/manifest-0123456789abcdef.json"}
    record = TrialGrading.from_json(data)
    assert record.to_json() == data
    assert record.graders is not None and record.graders[1] == GraderValue("b", None, "unavailable", "no evidence")
    assert record.graders[2].detail == {"diagnostics": [{"x": 1}]}
    assert [GraderValue.from_json(e).to_json() for e in entries] == entries


def test_a_missing_manifest_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path, graders=GRADERS)
    [manifest_file] = (run / "graders").iterdir()
    manifest_file.unlink()
    key = _keys(run)[0]
    with pytest.raises(TranscriptError, match="grader manifest is missing"):
        graded_session(run, *key)
    assert Manifests(run).root == str(run)
