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
