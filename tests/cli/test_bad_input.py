"""Bad input gets one clear message naming the file and place, a non-zero exit, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers import basic_eval, only_run, run_cli, write_eval

from mst.cli import main


def _fails(args: list[str], *needles: str) -> str:
    result = CliRunner().invoke(main, args)
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    for needle in needles:
        assert needle in out, (needle, out)
    return out


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("name: x\nvariants:\n  - id: a\n    model: [unclosed\n")
    _fails(["validate", str(path)], f"{path}:", "malformed YAML")


def test_unknown_field_names_path_and_line(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["variants"][1]["modle"] = "typo"
    path = write_eval(tmp_path, doc)
    out = _fails(["validate", str(path)], "variants[1].modle", "unknown field")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "modle" in text)
    assert f"{path}:{line}:" in out


def test_wrong_type_names_path(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval(trials="many"))
    _fails(["validate", str(path)], f"{path}:", "trials", "integer")


def test_wrong_client_setting_names_nested_path(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["variants"][0]["settings"]["mock"]["successRate"] = 2
    path = write_eval(tmp_path, doc)
    _fails(["validate", str(path)], "variants[0].settings.mock.successRate")


def test_secret_like_values_are_not_echoed(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["variants"][0]["settings"]["mock"]["successRate"] = "sk-canary-value-123"
    out = _fails(["validate", str(write_eval(tmp_path, doc))], "successRate")
    assert "sk-canary-value-123" not in out


def test_missing_dataset_file(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval(datasets=[{"path": "nope.jsonl"}]))
    _fails(["validate", str(path)], "nope.jsonl", "dataset file not found")


def test_bad_dataset_line_names_line(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": \n')
    path = write_eval(tmp_path, basic_eval(datasets=[{"path": "cases.jsonl"}]))
    _fails(["validate", str(path)], "cases.jsonl:2", "not valid JSON")


def test_duplicate_case_ids(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "c1", "prompt": "p"}\n')
    path = write_eval(tmp_path, basic_eval(datasets=[{"path": "cases.jsonl"}]))
    _fails(["validate", str(path)], "case id 'c1'", "repeats")


def test_unknown_client(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["variants"][0]["client"] = "nope"
    _fails(["validate", str(write_eval(tmp_path, doc))], "variants[0].client", "unknown client 'nope'")


def test_judge_that_cannot_be_imported(tmp_path: Path) -> None:
    path = write_eval(tmp_path, basic_eval(judges=[{"id": "j", "code": "no_such_module:f"}]))
    _fails(["validate", str(path)], "judge 'j'", "no_such_module")


def test_two_baselines(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["variants"][1]["baseline"] = True
    _fails(["validate", str(write_eval(tmp_path, doc))], "at most one variant may be the baseline")


def test_missing_eval_file(tmp_path: Path) -> None:
    _fails(["run", str(tmp_path / "absent.yaml")], "absent.yaml", "file not found")


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    proc = run_cli("run", str(write_eval(tmp_path, basic_eval())), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return only_run(tmp_path / "runs")


def test_truncated_journal_line_names_file_and_line(finished_run: Path) -> None:
    journal = finished_run / "attempts.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines) + lines[0][:20])
    _fails(["grade", str(finished_run)], f"{journal}:{len(lines) + 1}", "truncated")


def test_corrupt_journal_line_in_the_middle(finished_run: Path) -> None:
    journal = finished_run / "attempts.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[2] = b"{not json\n"
    journal.write_bytes(b"".join(lines))
    _fails(["run", "--resume", str(finished_run)], f"{journal}:3", "corrupt journal line")


def test_corrupt_run_json(finished_run: Path) -> None:
    run_json = finished_run / "run.json"
    run_json.write_bytes(run_json.read_bytes()[:200])
    _fails(["grade", str(finished_run)], f"{run_json}:", "run.json is corrupt")


def test_run_json_of_another_schema(finished_run: Path) -> None:
    (finished_run / "run.json").write_text('{"schema": "other/v9"}')
    _fails(["grade", str(finished_run)], "run.json", "not a mst.run/v1 file")


def test_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    _fails(["run", "--resume", str(tmp_path)], str(tmp_path), "not a run directory")
    _fails(["grade", str(tmp_path / "missing")], "not a run directory")


def test_resume_refuses_a_changed_eval(finished_run: Path, tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(path.read_text().replace("name: t", "name: t2"))
    _fails(["run", "--resume", str(finished_run)], "eval file changed")


def test_bad_case_mock_script_is_caught_at_load(tmp_path: Path) -> None:
    doc = basic_eval()
    doc["cases"][1]["mock"] = {"successRate": "often"}
    _fails(["validate", str(write_eval(tmp_path, doc))], "cases[1].mock.successRate")
