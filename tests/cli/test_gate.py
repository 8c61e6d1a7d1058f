"""The CI gate, paired comparisons in summary.json, `mst plan` and --confidence, through the real
`mst` command on mock runs (issue 15)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import yaml
from scipy import stats as sps
from tests.helpers import mock_variant, only_run, run_cli, write_eval

from mst.statistics import cases_needed

REGRESSION = 4


def _eval(directory: Path, base_rate: float, cand_rate: float, *, cases: int = 30, **extra: Any) -> Path:
    directory.mkdir(exist_ok=True)
    answer = {"answer": "{expected}"}
    doc: dict[str, Any] = {
        "name": "gate", "trials": 3, "concurrency": 8, "deadlineSeconds": 30, "seed": 11,
        "cases": [{"id": f"c{i:02d}", "prompt": f"say {i}", "expected": str(i)} for i in range(cases)],
        "variants": [mock_variant("base", baseline=True, successRate=base_rate, seed=1, **answer),
                     mock_variant("cand", successRate=cand_rate, seed=2, **answer, **extra)],
        "assertions": [{"type": "equals"}],
    }
    return write_eval(directory, doc)


def _summary(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = orjson.loads((run / "summary.json").read_bytes())
    return doc, doc.pop("cases")


def test_a_real_regression_fails_the_gate_with_exit_4(tmp_path: Path) -> None:
    eval_path = _eval(tmp_path / "e", 0.9, 0.4)
    md, step = tmp_path / "gate.md", tmp_path / "step.md"
    done = run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), "--fail-on-regression",
                   "--summary-md", str(md), cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": str(step)})
    assert done.returncode == REGRESSION, done.stderr
    assert "REGRESSION" in md.read_text() and md.read_text() == step.read_text()
    run = only_run(tmp_path / "runs")
    again = run_cli("gate", str(run), cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": ""})
    assert again.returncode == REGRESSION and "FAILED" in again.stderr


def test_noise_only_passes_the_gate(tmp_path: Path) -> None:
    eval_path = _eval(tmp_path / "e", 0.7, 0.7)
    done = run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), "--fail-on-regression",
                   cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": ""})
    assert done.returncode == 0, done.stderr
    assert "passed" in done.stderr
    summary, _ = _summary(only_run(tmp_path / "runs"))
    cand = next(v for v in summary["variants"] if v["id"] == "cand")
    assert cand["comparison"]["metrics"]["passRate"]["decision"] in ("inconclusive", "insufficient")


def test_summary_pairs_every_candidate_with_the_baseline(tmp_path: Path) -> None:
    eval_path = _eval(tmp_path / "e", 0.8, 0.5)
    done = run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), "--confidence", "0.9",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paired by case" in done.stdout
    summary, rows = _summary(only_run(tmp_path / "runs"))
    assert summary["confidence"] == 0.9
    base, cand = summary["variants"]
    assert "comparison" not in base  # the baseline is compared with nothing
    comparison = cand["comparison"]
    assert comparison["weighting"] == "case" and comparison["cases"] == 30
    rate = comparison["metrics"]["passRate"]
    # Independent: scipy's paired t test on the per-case pass fractions the case rows list.
    a = [r["variants"]["cand"]["passRate"] for r in rows]
    b = [r["variants"]["base"]["passRate"] for r in rows]
    ref = sps.ttest_rel(a, b)
    low, high = ref.confidence_interval(0.9)
    assert math.isclose(rate["p"], ref.pvalue, rel_tol=1e-9)
    assert math.isclose(rate["low"], low, rel_tol=1e-9) and math.isclose(rate["high"], high, rel_tol=1e-9)
    assert math.isclose(rate["candidate"], cand["passRate"]["estimate"]) and rate["cases"] == 30
    assert math.isclose(cand["passRate"]["estimate"], cand["passAtK"]["1"])
    assert rate["mde"] is not None and rate["decision"] == "worse"
    # Every grader metric is paired too, from the case rows' per-case means.
    assert {f"grader:{g}" for g in cand["graders"]} <= set(comparison["metrics"]) | {
        f"grader:{g}" for g, m in cand["graders"].items() if m["mean"] is None}
    assert all("graders" in r["variants"]["cand"] for r in rows)
    # Planning from this run's spread, and a regrade at another confidence level.
    plan = run_cli("plan", "--difference", "0.1", "--from", str(only_run(tmp_path / "runs")), cwd=tmp_path)
    sd = rate["se"] * math.sqrt(rate["cases"])
    assert plan.returncode == 0 and f"→ {cases_needed(0.1, sd)} cases" in plan.stdout, plan.stderr
    regrade = run_cli("grade", str(only_run(tmp_path / "runs")), "--runs-dir", str(tmp_path / "regrades"),
                      "--confidence", "0.8", cwd=tmp_path)
    assert regrade.returncode == 0, regrade.stderr
    regraded, _ = _summary(only_run(tmp_path / "regrades"))
    narrower = regraded["variants"][1]["comparison"]["metrics"]["passRate"]
    assert regraded["confidence"] == 0.8 and narrower["high"] - narrower["low"] < rate["high"] - rate["low"]


def test_incomplete_cases_are_left_out_of_grader_means_and_comparisons(tmp_path: Path) -> None:
    # Trial 0 of c00 and c01 never becomes a trial (a non-retryable setup failure): those cases are
    # incomplete, though their trials 1 and 2 are graded and have grader results.
    inject = [{"failure": "context-overflow-first", "cases": ["c00", "c01"], "trials": [0]}]
    eval_path = _eval(tmp_path / "e", 0.8, 0.8, cases=12, inject=inject)
    done = run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    run = only_run(tmp_path / "runs")
    summary, _ = _summary(run)
    cand = summary["variants"][1]
    assert cand["cases"]["incomplete"] == 2
    steps = cand["graders"]["execution-step-count"]
    assert (steps["cases"], steps["n"], steps["excludedIncomplete"]) == (10, 30, 2)
    assert cand["comparison"]["cases"] == 10 and cand["comparison"]["excluded"]["incomplete"] == 2
    analysis = run_cli("experiments", "analyze", str(run), "--json", "--metric", "grader:execution-step-count",
                       cwd=tmp_path)
    assert analysis.returncode == 0, analysis.stderr
    arms = {a["variant"]: a for a in orjson.loads(analysis.stdout)["metrics"][0]["arms"]}
    assert (arms["cand"]["excludedIncomplete"], arms["cand"]["cases"], arms["cand"]["n"]) == (4, 10, 30)
    assert arms["base"]["excludedIncomplete"] == 0 and arms["cand"]["difference"]["pairedCases"] == 10


def test_experiments_intervals_stay_inside_the_declared_range(tmp_path: Path) -> None:
    """Durations of 0 ms in five cases and 2.4 in one: a t interval reaches below 0, the
    declared minimum of execution-duration (read from the run's grader manifest)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes(orjson.dumps({"variants": [{"id": "base", "baseline": True}, {"id": "cand"}]}))
    manifest = {"schemaVersion": 2, "graders": [{"id": "execution-duration", "min": 0.0, "max": None}]}
    for variant in ("base", "cand"):
        for i in range(6):
            value = 2.4 if (variant, i) == ("cand", 5) else 0.0
            folder = run / "graders" / variant / f"c{i}" / "0"
            folder.mkdir(parents=True)
            result = {"id": "execution-duration", "value": value, "status": "pass", "unit": "ms", "direction": "lower"}
            (folder / "grader_results.json").write_bytes(orjson.dumps({"schemaVersion": 2, "results": [result]}))
            (folder / "grader_manifest.json").write_bytes(orjson.dumps(manifest))
    done = run_cli("experiments", "analyze", str(run), "--json", "--confidence", "0.99", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    analysis = orjson.loads(done.stdout)
    assert analysis["confidence"] == 0.99
    cand = next(a for a in analysis["metrics"][0]["arms"] if a["variant"] == "cand")
    assert cand["interval"][0] == 0.0 and cand["interval"][1] > 0.4
    assert cand["difference"]["interval"][0] < 0  # a difference may be negative: no range of its own (max unset)


def test_against_a_stored_baseline_run(tmp_path: Path) -> None:
    old = _eval(tmp_path / "old", 0.9, 0.9)
    new = _eval(tmp_path / "new", 0.3, 0.3)
    for path, out in ((old, "old-runs"), (new, "new-runs")):
        assert run_cli("run", str(path), "--runs-dir", str(tmp_path / out), cwd=tmp_path).returncode == 0
    done = run_cli("gate", str(only_run(tmp_path / "new-runs")), "--against", str(only_run(tmp_path / "old-runs")),
                   "--summary-md", str(tmp_path / "g.md"), cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": ""})
    assert done.returncode == REGRESSION, done.stderr
    text = (tmp_path / "g.md").read_text()
    assert "against run" in text and text.count("REGRESSION") == 2  # both variants of the new run
    same = run_cli("gate", str(only_run(tmp_path / "old-runs")), "--against", str(only_run(tmp_path / "old-runs")),
                   "--metric", "grader:execution-duration:lower", cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": ""})
    assert same.returncode == 0, same.stderr


def test_gate_user_errors_exit_2(tmp_path: Path) -> None:
    eval_path = _eval(tmp_path / "e", 0.9, 0.9, cases=3)
    assert run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path).returncode == 0
    bad = run_cli("gate", str(only_run(tmp_path / "runs")), "--metric", "bogus", cwd=tmp_path)
    assert bad.returncode == 2 and "--metric" in bad.stderr
    assert run_cli("gate", str(tmp_path / "nowhere"), cwd=tmp_path).returncode == 2


def test_plan_says_how_many_cases_a_difference_needs(tmp_path: Path) -> None:
    done = run_cli("plan", "--difference", "0.1", "--sd", "0.3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"→ {cases_needed(0.1, 0.3)} cases" in done.stdout
    assert run_cli("plan", "--difference", "0.1", cwd=tmp_path).returncode == 2


def test_judge_scores_are_paired_and_a_position_biased_judge_flips(tmp_path: Path) -> None:
    directory = tmp_path / "e"
    directory.mkdir()
    (directory / "judges.py").write_text(
        "def scored(trial):\n    return 1.0 if trial.answer == trial.expected else 0.25\n\n"
        "def always_a(case, a, b):\n    return 'A'\n")
    eval_path = _eval(directory, 0.9, 0.5, cases=12)
    doc = yaml.safe_load(eval_path.read_text())
    doc["judges"] = [{"id": "sc", "code": "judges:scored"}]
    doc["pairwise"] = {"code": "judges:always_a"}
    eval_path.write_text(yaml.safe_dump(doc))
    done = run_cli("run", str(eval_path), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary, rows = _summary(only_run(tmp_path / "runs"))
    cand = summary["variants"][1]
    score = cand["comparison"]["metrics"]["judge:sc"]
    per_case = [r["variants"]["cand"]["judges"]["sc"] - r["variants"]["base"]["judges"]["sc"] for r in rows]
    assert score["cases"] == 12 and math.isclose(score["difference"], sum(per_case) / 12)
    assert math.isclose(score["p"], sps.ttest_1samp(per_case, 0.0).pvalue, rel_tol=1e-9)
    pairwise = cand["pairwise"]
    # "A" in both orders means candidate first, then baseline: every pair flips, every case is a tie.
    assert pairwise["flips"] == {"pairs": 36, "flips": 36, "rate": 1.0}
    assert (pairwise["ties"], pairwise["winRate"]["estimate"], pairwise["excludedIncomplete"]) == (12, 0.5, 0)
    assert "flips 100.0%" in done.stdout
