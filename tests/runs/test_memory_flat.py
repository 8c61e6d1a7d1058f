"""Memory of `mst run` and `mst grade` stays flat as the number of attempts grows (issue 2).

Measured with tracemalloc in this process: the peak of Python allocations while a whole run
(collect, grade, summarize, write) or a regrade goes, at two sizes. What each extra attempt
costs must stay a few hundred bytes: its key, its place in the record stores, its share of its
case. Held records, encoded buffers kept alive, timers left queued or per-trial values gathered
for the summary all cost kilobytes per attempt and fail this.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest
from tests.helpers import mock_variant, write_eval

from mst import fileio
from mst.api import grade, run_eval

pytestmark = pytest.mark.slow

PER_ATTEMPT_LIMIT = 600  # bytes of peak memory per extra attempt


def _eval(directory: Path, attempts: int, trials: int = 5) -> Path:
    directory.mkdir()
    cases = attempts // (2 * trials)  # 2 variants × ``trials`` trials
    rows = (orjson.dumps({"id": f"case-{i:05d}", "prompt": f"What is {i} plus {i}?", "expected": str(2 * i)})
            for i in range(cases))
    (directory / "cases.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    answer = {"answer": "The answer is {expected}."}
    doc = {
        "name": "flat", "trials": trials, "concurrency": 8, "deadlineSeconds": 60, "seed": 3,
        "datasets": [{"path": "cases.jsonl"}],
        "variants": [mock_variant("base", baseline=True, successRate=0.8, seed=1, **answer),
                     mock_variant("cand", successRate=0.9, seed=2, **answer)],
        "assertions": [{"type": "final-answer"}, {"type": "regex", "pattern": "answer is [0-9]+"}],
    }
    return write_eval(directory, doc)


def _peak(work: Path, attempts: int) -> tuple[int, int]:
    """Peak traced bytes of `mst run` and then of `mst grade` on its run."""
    eval_path = _eval(work / f"eval-{attempts}", attempts)
    tracemalloc.start()
    try:
        outcome = run_eval(eval_path, runs_dir=work / f"runs-{attempts}")
        run_peak = tracemalloc.get_traced_memory()[1]
        assert outcome.summary["totals"]["attempts"] == attempts
        del outcome
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        regraded = grade(next(p for p in (work / f"runs-{attempts}").iterdir() if p.is_dir()),
                         runs_dir=work / f"regrades-{attempts}")
        grade_peak = tracemalloc.get_traced_memory()[1] - base
        assert regraded.summary["totals"]["trials"] == attempts
    finally:
        tracemalloc.stop()
    return run_peak, grade_peak


def test_peak_memory_per_attempt_stays_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Big files are read and written, and records buffered, a block at a time: small blocks let
    # small runs show what big ones would.
    monkeypatch.setattr(fileio, "IO_BLOCK", 32 * 1024)
    _peak(tmp_path, 20)  # modules imported on first use allocate too: load them all first
    small_run, small_grade = _peak(tmp_path, 500)
    big_run, big_grade = _peak(tmp_path, 2500)
    per_run = (big_run - small_run) / 2000
    per_grade = (big_grade - small_grade) / 2000
    assert per_run < PER_ATTEMPT_LIMIT, f"mst run: {per_run:.0f} bytes per attempt"
    assert per_grade < PER_ATTEMPT_LIMIT, f"mst grade: {per_grade:.0f} bytes per attempt"
