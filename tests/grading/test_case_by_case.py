"""Grading goes case by case, and a comparison reuses the views its case's grading just read."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.helpers import load
from tests.runners.runners_helpers import collected_run, judged_eval

import mst.grading.phase as phase
from mst.api import grade


def test_each_attempt_record_is_read_once_and_a_case_is_compared_after_its_trials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = collected_run(tmp_path, judged_eval(tmp_path, cases=4, trials=3))
    reads: Counter[tuple[str, str, int]] = Counter()
    real = phase.attempt_view

    def counted(run: Any, key: tuple[str, str, int], case: Any) -> Any:
        reads[key] += 1
        return real(run, key, case)

    monkeypatch.setattr(phase, "attempt_view", counted)
    outcome = grade(source, runs_dir=tmp_path / "regrades")
    attempts = load(source / "run.json")["attempts"]
    assert len(reads) == len(attempts) == 24 and set(reads.values()) == {1}  # not again for pairwise
    journal = [orjson.loads(line) for line in (outcome.run.paths.grading_journal).read_bytes().splitlines()]
    order = [(r["case"], r.get("kind") == "pairwise") for r in journal]
    assert order == [(f"c{i}", pairwise) for i in range(4) for pairwise in [False] * 6 + [True]]
    comparisons = load(outcome.run.paths.comparisons)["comparisons"]
    assert [len(c["pairs"]) for c in comparisons] == [3] * 4 and all(not c["errors"] for c in comparisons)


def test_grading_reads_each_case_a_bounded_number_of_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read of ``resolved.cases`` makes every case afresh (a view of its row): grading keeps
    no map of every case (~130 bytes a case held while a 100,000-case run grades, issue 16), and
    a case's trials share the one view its plan walk made. Planning a first grading reads none;
    grading reads each case once (its walk: the judges' secret names come from the table's
    distinct profiles, and the eval's judges were read by the preflight, once), where it read
    each four times, planning once more."""
    import mst.api as api
    from mst.config.resolved import CaseTable

    source = collected_run(tmp_path, judged_eval(tmp_path, cases=5, trials=2, pairwise=False))
    made: list[str] = []
    real_case = CaseTable._case

    def counted_case(table: CaseTable, row: int) -> Any:
        made.append(table.ids[row])
        return real_case(table, row)

    reads: dict[str, int] = {}

    def counting(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            before = len(made)
            monkeypatch.setattr(CaseTable, "_case", counted_case)
            try:
                return real(*args, **kwargs)
            finally:
                monkeypatch.setattr(CaseTable, "_case", real_case)
                reads[name] = reads.get(name, 0) + len(made) - before
        return call

    graded: list[tuple[str, int]] = []
    real_grade = phase.grade_trial

    def grade_trial(view: Any, case: Any, *args: Any, **kwargs: Any) -> Any:
        graded.append((case.id, id(case)))
        return real_grade(view, case, *args, **kwargs)

    monkeypatch.setattr(api, "plan_grading", counting("plan", phase.plan_grading))
    monkeypatch.setattr(api, "grade_run", counting("grade", phase.grade_run))
    monkeypatch.setattr(phase, "grade_trial", grade_trial)
    outcome = grade(source, runs_dir=tmp_path / "regrades")
    assert outcome.run.meta.phases.grade == "complete"
    assert reads == {"plan": 0, "grade": 5}, reads
    by_case: dict[str, set[int]] = {}
    for case_id, case in graded:
        by_case.setdefault(case_id, set()).add(case)
    assert len(graded) == 20 and {c: len(v) for c, v in by_case.items()} == {f"c{i}": 1 for i in range(5)}
