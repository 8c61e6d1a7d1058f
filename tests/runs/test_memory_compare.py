"""The summary's comparison of a candidate against the baseline holds little per case (issue 16).

`compare` pairs the two variants' cases and gathers each metric's paired values: kept as index
and float arrays, that is ~16 bytes a case for the pairs and ~16 a metric's values (the paired
t analysis adds its differences); a list of index tuples and one of value tuples cost ~300.
"""

from __future__ import annotations

import math
import random
import tracemalloc

from mst.runs.compare import PASS_RATE_METRIC, Columns, Metric, PairedValues, compare
from mst.statistics import difference_of_pairs

# Bytes of peak traced memory per extra case while comparing two metrics: 312 with lists of
# tuples, 66 with arrays (bench/perf16_memory.md, session 9).
PER_CASE_LIMIT = 120


def _columns(cases: int, seed: int) -> Columns:
    rng = random.Random(seed)
    columns = Columns()
    for i in range(cases):
        columns.add_case(f"case-{i:06d}", {"passRate": rng.choice([0.0, 0.5, 1.0, None]), "grader:x": rng.random()})
    return columns


def _peak(cases: int) -> int:
    candidate, baseline = _columns(cases, 1), _columns(cases, 2)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        compare(candidate, baseline, [PASS_RATE_METRIC, Metric("grader:x")])
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_comparing_holds_a_few_bytes_per_case() -> None:
    _peak(10)
    small, big = _peak(2_000), _peak(20_000)
    per_case = (big - small) / 18_000
    assert per_case < PER_CASE_LIMIT, f"compare: {per_case:.0f} bytes per case"


def test_paired_values_read_as_the_tuples_they_replace() -> None:
    candidate, baseline = _columns(50, 1), _columns(50, 2)
    row = compare(candidate, baseline, [PASS_RATE_METRIC, Metric("grader:x")]).metrics["grader:x"]
    pairs = [(candidate.value("grader:x", i), baseline.value("grader:x", i)) for i in range(50)
             if candidate.complete(i) and baseline.complete(i)]
    assert row.cases == len(pairs) > 2
    assert row.candidate == math.fsum(a for a, _ in pairs if a is not None) / len(pairs)
    values = PairedValues()
    values.first.extend([1.0, 2.0, 3.0])
    values.second.extend([0.5, 0.25, 0.0])
    assert list(values) == [(1.0, 0.5), (2.0, 0.25), (3.0, 0.0)] and len(values) == 3
    assert values[1] == (2.0, 0.25) and values[1:] == [(2.0, 0.25), (3.0, 0.0)]


def _difference_peak(cases: int) -> int:
    rng = random.Random(cases)
    values = PairedValues()
    values.first.extend(rng.random() for _ in range(cases))
    values.second.extend(rng.random() for _ in range(cases))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        difference_of_pairs(values)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_the_paired_differences_are_a_float_array() -> None:
    # A list of differences is ~32 bytes a case (pointer and float object), an array 8: the
    # comparison's peak per metric (session 9).
    _difference_peak(10)
    per_case = (_difference_peak(40_000) - _difference_peak(4_000)) / 36_000
    assert per_case < 16, f"difference_of_pairs: {per_case:.1f} bytes per case"


def test_the_paired_figures_are_those_of_the_differences_listed() -> None:
    rng = random.Random(5)
    pairs = [(rng.random(), rng.choice([0.0, 1.0, rng.random()])) for _ in range(500)]
    diffs = [a - b for a, b in pairs]
    mean = math.fsum(diffs) / len(diffs)
    out = difference_of_pairs(pairs)
    assert out["mean"] == mean and out["cases"] == 500
    assert out["sd"] == math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / 499)
