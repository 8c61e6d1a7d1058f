"""A real run for the report's tests: two variants that differ, a code judge, a pairwise judge,
and a case whose first attempt ends in an infrastructure failure that needs a fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import basic_eval, mock_variant, only_run, run_cli, write_eval

JUDGES = '''\
def mentions_expected(trial):
    ok = str(trial.expected).lower() in (trial.answer or "").lower()
    return ok, "answer mentions the expected value" if ok else "answer does not mention it"


def prefer_correct(case, a, b):
    a_ok = str(case.expected) in (a.answer or "")
    b_ok = str(case.expected) in (b.answer or "")
    if a_ok != b_ok:
        return ("A" if a_ok else "B"), "only one answer is correct"
    return "tie", "equally good"
'''


def report_eval(directory: Path) -> Path:
    (directory / "judges.py").write_text(JUDGES)
    cases = [{"id": f"case-{i:02d}", "prompt": f"say {i}", "expected": str(i)} for i in range(12)]
    cases[3]["mock"] = {"inject": [{"failure": "context-overflow-first", "trials": [0]}]}
    doc = basic_eval(name="report-e2e", trials=2, cases=cases, seed=5,
                     variants=[mock_variant("base", baseline=True, successRate=0.9, seed=1),
                               mock_variant("cand", successRate=0.5, seed=2)],
                     judges=[{"id": "mentions", "code": "judges:mentions_expected"}],
                     pairwise={"code": "judges:prefer_correct"})
    return write_eval(directory, doc)


@pytest.fixture(scope="module")
def report_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run made by the real `mst run`, shared by a module's tests (they only read it)."""
    work = tmp_path_factory.mktemp("report-run")
    done = run_cli("run", str(report_eval(work)), "--runs-dir", str(work / "runs"), cwd=work)
    assert done.returncode in (0, 3), done.stderr
    return only_run(work / "runs")
