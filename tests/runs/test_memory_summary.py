"""The summary's per-variant figures hold little per case while they are computed (issue 16).

`variant_stats` walks a variant's cases (most share one of a few `CaseTrials`, as a run's do)
and keeps, per complete case, its passed and trial counts and its fraction in arrays: ~24
bytes a case; a list of (passed, trials) tuples and a list of fractions cost ~150.
"""

from __future__ import annotations

import random
import tracemalloc

from mst.statistics.rates import CaseTrials, pass_rate, variant_stats

# Bytes of peak traced memory per extra case: 150 with the tuples, 23 with arrays
# (bench/perf16_memory.md, session 9).
PER_CASE_LIMIT = 60


def _cases(count: int) -> list[CaseTrials]:
    rng = random.Random(1)
    shapes = [CaseTrials(3, tuple(rng.choice([True, False]) for _ in range(3))) for _ in range(8)]
    shapes.append(CaseTrials(3, (True, None, True)))  # incomplete: left out of the rates
    return [shapes[rng.randrange(len(shapes))] for _ in range(count)]


def _peak(count: int) -> int:
    cases = _cases(count)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        variant_stats(cases)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_variant_stats_hold_a_few_bytes_per_case() -> None:
    _peak(10)
    small, big = _peak(2_000), _peak(20_000)
    per_case = (big - small) / 18_000
    assert per_case < PER_CASE_LIMIT, f"variant_stats: {per_case:.0f} bytes per case"


def test_the_figures_are_those_of_the_cases_counted_one_by_one() -> None:
    cases = _cases(500)
    stats = variant_stats(cases)
    complete = [(sum(1 for p in ct.passes if p), len(ct.passes)) for ct in cases if None not in ct.passes]
    assert stats["passRate"] == pass_rate(complete)
    assert stats["cases"]["incomplete"] == 500 - len(complete)
    at_1 = sum(c / n for c, n in complete) / len(complete)
    assert abs(stats["passAtK"]["1"] - at_1) < 1e-12
    all_pass = sum(1.0 for c, n in complete if c == n) / len(complete)
    assert abs(stats["passHatK"]["3"] - all_pass) < 1e-12


def test_row_values_follow_the_columns_added_after_a_row_was_read() -> None:
    from mst.runs.compare import Columns

    columns = Columns()
    columns.add_case("a", {"passRate": 1.0, "grader:g": 0.5})
    assert columns.row_values(0) == {"graders": {"g": 0.5}}
    columns.add_case("b", {"passRate": None, "judge:j": 2.0, "grader:g": None})
    assert columns.row_values(0) == {"graders": {"g": 0.5}}  # no judge value for case a
    assert columns.row_values(1) == {"judges": {"j": 2.0}}
    assert columns.means("grader:g") == [0.5] and columns.means("judge:j") == [] and columns.incomplete() == 1
    assert Columns().means("passRate") == [] and Columns().incomplete() == 0


def test_a_case_mean_of_one_trial_is_its_value_and_refuses_what_is_not_finite() -> None:
    import pytest

    from mst.runs.summary import _case_mean

    assert _case_mean([0.1], "c") == 0.1 and _case_mean([None], "c") is None
    assert _case_mean([0.1, 0.2, None], "c") == (0.1 + 0.2) / 2
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="c: values must be finite"):
            _case_mean([bad], "c")
