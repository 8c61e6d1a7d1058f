"""The README's example: the quickstart eval over its real MCP server, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers import load, only_run, run_cli

from mst.cli import main

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "eval.yaml"


def test_validate_quickstart() -> None:
    result = CliRunner().invoke(main, ["validate", str(QUICKSTART)])
    assert result.exit_code == 0, result.output
    assert "5 cases, 2 variants, 20 attempts" in result.output


def test_schema_is_json_schema_of_the_eval_file() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "mst eval"
    assert {"name", "variants", "cases", "trials", "graders"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


@pytest.mark.slow
def test_quickstart_runs_offline_end_to_end(tmp_path: Path) -> None:
    proc = run_cli("run", str(QUICKSTART), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run(tmp_path / "runs")
    doc = load(run / "run.json")
    assert doc["phases"] == {"collect": "complete", "grade": "complete"}
    assert len(doc["attempts"]) == 20
    assert all(a["ending"]["kind"] == "trial" for a in doc["attempts"])
    # the agent really called the MCP server's tools
    transcript = (run / doc["attempts"][0]["transcript"]).read_text()
    assert '"tool.execution_complete"' in transcript and '"mcpServerName":"store"' in transcript
    summary = load(run / "summary.json")
    assert [v["id"] for v in summary["variants"]] == ["baseline", "candidate"]
    assert summary["variants"][1]["pairwise"] is not None
    assert len(load(run / "comparisons.json")["comparisons"]) == 5
    # An LLM judge and an LLM pairwise judge, offline: the mock model grades, seeded.
    llm = [v for t in load(run / "results.json")["trials"] for v in t["verdicts"] if v["kind"] == "llm"]
    assert len(llm) == 20 and all(v["model"] == "mock" and v["votes"] for v in llm)
    assert all(v["reason"].startswith(("the answer states ", "the answer does not state ")) for v in llm)
    assert {v["passed"] for v in llm} == {True, False}  # scripted: 90% pass, drawn per trial from its seed
    pairs = [p for c in load(run / "comparisons.json")["comparisons"] for p in c["pairs"]]
    assert pairs and all(len(p["usage"]) == 2 for p in pairs)  # both orders, each with its calls
    cand = summary["variants"][1]
    assert cand["judges"]["states-price-or-stock"]["graded"] == 10
    assert cand["pairwise"]["flips"]["rate"] is not None and summary["judgeUsage"]["inputTokens"] > 0
    assert "judges: pass rate" in proc.stdout
    assert "pass rate" in proc.stdout
