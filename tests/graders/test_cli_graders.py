"""``mst graders run`` and ``mst experiments analyze`` through click's CliRunner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner
from gsession import call, ev, request, result

from mst.cli.graders import experiments, graders
from mst.graders import parse_graders_config, run_graders
from mst.session.io import write_transcript

SESSION = [ev("user.message", {"content": "hi"}), request(10, 2), *call("1", "a"), *call("2", "a"), result()]


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    write_transcript(path, SESSION)
    return path


def invoke(group: Any, *args: str) -> Any:
    return CliRunner().invoke(group, [str(a) for a in args])


def test_replay_prints_a_table(session_file: Path) -> None:
    res = invoke(graders, "run", session_file)
    assert res.exit_code == 0, res.output
    for gid in ("tool-success-rate", "loops", "context-growth"):
        assert gid in res.stdout


def test_replay_json_equals_the_grading_phase(session_file: Path, tmp_path: Path) -> None:
    config_path = tmp_path / "graders.yaml"
    config_path.write_text(yaml.safe_dump({"graders": {"loops": {"threshold": 0}, "recurrence-rate": {}}}))
    res = invoke(graders, "run", session_file, "--config", config_path, "--json")
    assert res.exit_code == 0, res.output
    out = orjson.loads(res.stdout)
    phase = run_graders(SESSION, parse_graders_config({"loops": {"threshold": 0}, "recurrence-rate": {}}))
    assert out == {"manifest": phase.manifest, "results": phase.results}
    loops = next(r for r in out["results"] if r["id"] == "loops")
    assert (loops["value"], loops["status"]) == (1.0, "fail")


def test_replay_reads_a_json_array(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps(SESSION))
    res = invoke(graders, "run", path, "--json")
    assert res.exit_code == 0
    assert orjson.loads(res.stdout)["results"] == run_graders(SESSION, parse_graders_config(None)).results


def test_replay_accepts_the_bare_mapping_and_a_manifest(session_file: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps({"loops": {"enabled": False}}))
    res = invoke(graders, "run", session_file, "--config", bare, "--json")
    out = orjson.loads(res.stdout)
    assert "loops" not in {r["id"] for r in out["results"]}
    manifest = tmp_path / "grader_manifest.json"
    manifest.write_bytes(orjson.dumps(out["manifest"]))
    again = orjson.loads(invoke(graders, "run", session_file, "--config", manifest, "--json").stdout)
    assert again == out  # disabling persists through replay from the manifest


def test_replay_with_expected_reference(session_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("graders:\n  tool-wise-score: {}\n")
    expected = tmp_path / "expected.yaml"
    expected.write_text("toolCalls: [a]\n")
    out = orjson.loads(
        invoke(graders, "run", session_file, "--config", config, "--expected", expected, "--json").stdout
    )
    score = next(r for r in out["results"] if r["id"] == "tool-wise-score")
    assert score["value"] == pytest.approx(2 * 1 / 3)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b'{"trace": {"toolCalls": []}}', "legacy pre-processed trace payload"),
        (b'{"request": {"session": "x"}}', "legacy pre-processed trace payload"),
        (b'{"type": "nodot", "data": {}, "provenance": {}}\n{"type": "a.b"}\n', "not a canonical event"),
        (b"[1, 2]", "not a canonical event"),
    ],
)
def test_replay_rejects_legacy_and_malformed_input(tmp_path: Path, payload: bytes, fragment: str) -> None:
    path = tmp_path / "legacy.json"
    path.write_bytes(payload)
    res = invoke(graders, "run", path)
    assert res.exit_code == 2
    assert fragment in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_replay_user_errors_exit_2_with_one_line(session_file: Path, tmp_path: Path) -> None:
    res = invoke(graders, "run", tmp_path / "missing.jsonl")
    assert res.exit_code == 2 and "missing" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("graders:\n  loops:\n    threshold: high\n")
    res = invoke(graders, "run", session_file, "--config", bad)
    assert res.exit_code == 2
    assert "graders.loops.threshold" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = invoke(graders, "run", session_file, "--config", tmp_path / "nope.yaml")
    assert res.exit_code == 2 and "does not exist" in res.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("graders: [\n")
    res = invoke(graders, "run", session_file, "--config", broken)
    assert res.exit_code == 2 and "not valid YAML or JSON" in res.stderr


# --- experiments analyze ------------------------------------------------------------------------


def _write_run(root: Path, *, baseline: bool = True, metrics: list[str] | None = None) -> Path:
    run = root / "run-1"
    run_json: dict[str, Any] = {"variants": [{"id": "base", "baseline": baseline}, {"id": "cand"}]}
    if metrics is not None:
        run_json["metrics"] = metrics
    run.mkdir()
    (run / "run.json").write_bytes(orjson.dumps(run_json))
    config = parse_graders_config(None)
    for variant, calls in (("base", 2), ("cand", 1)):
        for case in ("c1", "c2", "c3"):
            for trial in ("0", "1"):
                session = [e for i in range(calls) for e in call(str(i), "t", {"i": i})] + [result()]
                out = run.joinpath("graders", variant, case, trial)
                out.mkdir(parents=True)
                graded = run_graders(session, config)
                (out / "grader_results.json").write_bytes(orjson.dumps(graded.results_document()))
                (out / "grader_manifest.json").write_bytes(orjson.dumps(graded.manifest))
    return run


def test_experiments_analyze_table(tmp_path: Path) -> None:
    res = invoke(experiments, "analyze", _write_run(tmp_path))
    assert res.exit_code == 0, res.output
    assert "tool-success-rate" in res.stdout and "cand" in res.stdout and "insufficient" in res.stdout


def test_experiments_analyze_json_and_metric_selection(tmp_path: Path) -> None:
    run = _write_run(tmp_path)
    res = invoke(
        experiments, "analyze", run, "--json", "--min-samples", "2", "--metric", "graders.trajectory-efficiency.value"
    )
    assert res.exit_code == 0, res.output
    out = orjson.loads(res.stdout)
    [metric] = out["metrics"]
    assert metric["id"] == "trajectory-efficiency"
    cand = next(a for a in metric["arms"] if a["variant"] == "cand")
    # base: 1 tool over 2 calls = 0.5 everywhere; cand: 1 over 1 = 1.0 → exact +0.5, higher is better.
    # Deliberate change (issue 15): identical differences in every case are no estimate of the noise,
    # so no decision (was "better").
    assert (cand["n"], cand["mean"], cand["difference"]["value"], cand["decision"]) == (6, 1.0, 0.5, "insufficient")
    assert "spread" in cand["reason"]


def test_experiments_analyze_uses_run_json_metrics(tmp_path: Path) -> None:
    out = orjson.loads(invoke(experiments, "analyze", _write_run(tmp_path, metrics=["grader:loops"]), "--json").stdout)
    assert [m["id"] for m in out["metrics"]] == ["loops"]


def test_experiments_analyze_defaults_to_every_grader_present(tmp_path: Path) -> None:
    out = orjson.loads(invoke(experiments, "analyze", _write_run(tmp_path), "--json").stdout)
    assert len(out["metrics"]) == 10
    retries = next(m for m in out["metrics"] if m["id"] == "retries")
    assert all(a["n"] == 0 and a["excluded"] == 6 for a in retries["arms"])  # unavailable, not zero


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("missing", "not a run directory"),
        ("no-baseline", "baseline: true"),
        ("bad-metric", "names no grader with results"),
        ("no-results", "no grader results"),
        ("corrupt", "is not valid JSON"),
    ],
)
def test_experiments_analyze_user_errors(tmp_path: Path, setup: str, fragment: str) -> None:
    args: list[Any] = []
    if setup == "missing":
        args = [tmp_path / "nope"]
    elif setup == "no-baseline":
        args = [_write_run(tmp_path, baseline=False)]
    elif setup == "bad-metric":
        args = [_write_run(tmp_path), "--metric", "grader:recurrence-rate"]
    elif setup == "no-results":
        (tmp_path / "r").mkdir()
        (tmp_path / "r" / "run.json").write_text('{"variants": [{"id": "a", "baseline": true}]}')
        args = [tmp_path / "r"]
    else:
        run = _write_run(tmp_path)
        (run / "graders" / "base" / "c1" / "0" / "grader_results.json").write_text("{")
        args = [run]
    res = invoke(experiments, "analyze", *args)
    assert res.exit_code == 2
    assert fragment in res.stderr and "Traceback" not in res.output
