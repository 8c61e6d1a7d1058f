"""The summary's per-variant figures hold little per case while they are computed (issue 16).

`variant_stats` walks a variant's cases (most share one of a few `CaseTrials`, as a run's do)
and keeps, per complete case, its passed and trial counts and its fraction in arrays: ~24
bytes a case; a list of (passed, trials) tuples and a list of fractions cost ~150.
"""

from __future__ import annotations

import math
import random
import tracemalloc

import pytest

from mst.runs.compare import Column, Columns
from mst.statistics.rates import CaseTrials, pass_rate, variant_stats

# Bytes of peak traced memory per extra case: 150 with the tuples, 23 with arrays
# (bench/perf16_memory.md, session 9).
PER_CASE_LIMIT = 60
_NAN = float("nan")


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


def test_a_column_of_few_distinct_values_holds_a_byte_a_case() -> None:
    # A float array is 8 bytes a case and metric: ten default graders and a pass rate in two
    # variants were ~180 bytes a case at the summary's peak (session 9).
    rng = random.Random(3)
    values = [rng.choice([0.0, 1.0, 0.5, _NAN, 3.0]) for _ in range(50_000)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        column = Column()
        for v in values:
            column.append(v)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held < 1.5 * len(values), f"a column of five values held {held / len(values):.1f} bytes a case"
    assert [repr(v) for v in column] == [repr(v) for v in values] and len(column) == len(values)


def test_a_column_reads_back_the_floats_appended_before_and_after_it_outgrows_its_codes() -> None:
    values = [-0.0, 0.0, _NAN, 1e-300, -2.5, 0.1 + 0.2] + [i / 7 for i in range(300)] + [-0.0, _NAN, 0.0]
    for cut in (3, len(values)):  # the codes still enough / outgrown part way
        column = Column(2)
        for v in values[:cut]:
            column.append(v)
        expected = [_NAN, _NAN, *values[:cut]]
        read = [column[i] for i in range(len(column))]
        for got in (read, list(column)):
            assert [(repr(v), math.copysign(1.0, v)) for v in got] == [(repr(v), math.copysign(1.0, v))
                                                                        for v in expected]


def test_columns_keep_their_values_in_columns_of_codes() -> None:
    columns = Columns()
    columns.add_case("a", {"passRate": 1.0, "grader:g": -0.0})
    columns.add_case("b", {"passRate": None})
    assert isinstance(columns.values["grader:g"], Column)
    assert columns.means("grader:g") == [-0.0] and math.copysign(1.0, columns.means("grader:g")[0]) < 0
    assert columns.incomplete() == 1 and columns.value("grader:g", 1) is None


def test_variant_stats_work_out_a_shared_case_s_status_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cases sharing a CaseTrials object (as the summary's do) cost one case_status between them;
    past the cap of remembered objects the figures are still those of every case."""
    from mst.statistics import rates

    calls: list[int] = []
    real = rates.case_status

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    cases = _cases(500)
    expected = variant_stats(cases)
    monkeypatch.setattr(rates, "case_status", counted)
    assert variant_stats(cases) == expected and len(calls) == len({id(ct) for ct in cases}) <= 9
    monkeypatch.setattr(rates, "_SEEN", 2)
    calls.clear()
    assert variant_stats(cases) == expected and len(calls) > 9
