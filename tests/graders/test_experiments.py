"""Experiment metric references (docs/graders.md) and the analysis, with hand-computed figures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mst.graders import (
    Observation,
    analyze_experiment,
    parse_graders_config,
    parse_metric_ref,
    validate_metric_refs,
)
from mst.statistics import betainc, t_cdf, t_quantile

# --- references ---------------------------------------------------------------------------------


def test_metric_reference_forms() -> None:
    assert parse_metric_ref("grader:loops") == "loops"
    assert parse_metric_ref("graders.tool-success-rate.value") == "tool-success-rate"
    assert parse_metric_ref("graders.loops") is None
    assert parse_metric_ref("grader:") is None
    assert parse_metric_ref("grader:Bad") is None


def test_references_resolve_to_enabled_graders_including_automatic_defaults() -> None:
    config = parse_graders_config({"recurrence-rate": {}, "my-metric": {"script": "return 1"}})
    refs = ["grader:loops", "graders.recurrence-rate.value", "grader:my-metric"]
    assert validate_metric_refs(refs, config) == []


def test_unknown_disabled_and_empty_references_fail() -> None:
    config = parse_graders_config({"loops": {"enabled": False}})
    errors = validate_metric_refs(["grader:loops", "grader:nope", "", "grader:", "accuracy", None], config)
    assert errors == [
        "metrics[0]: grader 'loops' is disabled",
        "metrics[1]: unknown grader 'nope'",
        "metrics[2]: empty metric reference",
        "metrics[3]: 'grader:' is not 'grader:<id>' or 'graders.<id>.value'",
        "metrics[4]: 'accuracy' is not 'grader:<id>' or 'graders.<id>.value'",
        "metrics[5]: empty metric reference",
    ]


def test_opt_in_grader_not_configured_is_unknown() -> None:
    assert validate_metric_refs(["grader:recurrence-rate"], parse_graders_config(None)) == [
        "metrics[0]: unknown grader 'recurrence-rate'"
    ]


# --- statistics ---------------------------------------------------------------------------------


def test_t_distribution_values() -> None:
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736, rel=1e-9)
    assert t_quantile(0.975, 2) == pytest.approx(4.302652730, rel=1e-9)
    assert t_quantile(0.975, 10) == pytest.approx(2.228138852, rel=1e-9)
    assert t_quantile(0.975, 10**6) == pytest.approx(1.959966, rel=1e-5)
    # df = 2 has a closed form: P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    assert 2 * t_cdf(-3.0, 2) == pytest.approx(1 - 3 / math.sqrt(11), rel=1e-12)
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248, rel=1e-12)


# --- analysis -----------------------------------------------------------------------------------


def obs(variant: str, case: str, trial: int, value: float | None, status: str = "pass",
        gid: str = "m", direction: str = "higher") -> Observation:  # fmt: skip
    result: dict[str, Any] = {"id": gid, "value": value, "status": status, "unit": "count", "direction": direction}
    return Observation(variant, case, str(trial), [result])


DATA = [
    obs("base", "c1", 0, 1.0),
    obs("base", "c1", 1, 3.0),
    obs("base", "c2", 0, 2.0),
    obs("base", "c3", 0, 3.0),
    obs("cand", "c1", 0, 4.0),
    obs("cand", "c2", 0, 6.0),
    obs("cand", "c2", 1, 8.0),
    obs("cand", "c3", 0, 5.0),
    obs("cand", "c3", 1, None, status="unavailable"),
    obs("cand", "c3", 2, None, status="error"),
    Observation("cand", "c1", "9", []),  # the metric is missing entirely
]


def analyze(data: list[Observation], **kw: Any) -> dict[str, Any]:
    kw.setdefault("min_samples", 2)
    return analyze_experiment(data, variants=["base", "cand"], baseline="base", metrics=["m"], **kw)


def arm(analysis: dict[str, Any], variant: str) -> dict[str, Any]:
    return next(a for a in analysis["metrics"][0]["arms"] if a["variant"] == variant)


def test_mean_with_case_clustered_interval() -> None:
    cand = arm(analyze(DATA), "cand")
    assert (cand["n"], cand["cases"], cand["excluded"]) == (4, 3, 3)
    # Equal weight per case (issue 15): case means 4, 7, 5 → 16/3; t on the case means' spread.
    assert cand["mean"] == pytest.approx(16 / 3)
    half = 4.302652730 * math.sqrt((7 / 3) / 3)
    assert cand["interval"] == pytest.approx([16 / 3 - half, 16 / 3 + half])


def test_paired_difference_against_baseline() -> None:
    diff = arm(analyze(DATA), "cand")["difference"]
    assert diff["pairedCases"] == 3
    assert diff["value"] == pytest.approx(3.0)  # per-case differences 2, 5, 2
    assert diff["interval"] == pytest.approx([3 - 4.302652730, 3 + 4.302652730])
    assert diff["pValue"] == pytest.approx(1 - 3 / math.sqrt(11))


def test_decision_inconclusive_when_not_significant() -> None:
    assert arm(analyze(DATA), "cand")["decision"] == "inconclusive"
    assert arm(analyze(DATA), "base")["decision"] == "baseline"


def test_unavailable_and_failed_results_are_not_zeros() -> None:
    with_zeros = [*DATA[:8], obs("cand", "c3", 1, 0.0)]
    assert arm(analyze(DATA), "cand")["mean"] != arm(analyze(with_zeros), "cand")["mean"]
    assert arm(analyze(DATA), "cand")["mean"] == pytest.approx(16 / 3)  # case-weighted (issue 15)


def test_insufficient_samples_by_default() -> None:
    assert analyze(DATA, min_samples=20)["minSamples"] == 20
    assert arm(analyze(DATA, min_samples=20), "cand")["decision"] == "insufficient"
    assert arm(analyze(DATA, min_samples=5), "cand")["decision"] == "insufficient"  # cand has 4 valid


def _shifted(shift: float, direction: str) -> list[Observation]:
    out = []
    for i in range(12):
        base = float(i % 5)
        out.append(obs("base", f"c{i}", 0, base, direction=direction))
        out.append(obs("cand", f"c{i}", 0, base + shift + (0.1 if i % 2 else -0.1), direction=direction))
    return out


@pytest.mark.parametrize(
    ("shift", "direction", "decision"),
    [(1.0, "higher", "better"), (-1.0, "higher", "worse"), (1.0, "lower", "worse"), (-1.0, "lower", "better")],
)
def test_decision_respects_direction(shift: float, direction: str, decision: str) -> None:
    result = analyze(_shifted(shift, direction), min_samples=10)
    assert result["metrics"][0]["direction"] == direction
    assert arm(result, "cand")["decision"] == decision
    assert arm(result, "cand")["difference"]["pValue"] < 0.001


def test_fail_status_is_still_a_valid_measurement() -> None:
    data = [obs("base", "c1", 0, 1.0, status="fail"), obs("cand", "c1", 0, 2.0, status="fail")]
    assert arm(analyze(data, min_samples=1), "cand")["n"] == 1


def test_single_case_has_no_interval() -> None:
    data = [obs("base", "c1", 0, 1.0), obs("cand", "c1", 0, 2.0), obs("cand", "c1", 1, 4.0)]
    cand = arm(analyze(data, min_samples=1), "cand")
    assert cand["interval"] is None
    # One case is no estimate of spread: no decision at all (issue 15; was "inconclusive").
    assert cand["difference"]["pValue"] is None and cand["decision"] == "insufficient"


def test_identical_differences_are_exact() -> None:
    data = [o for i in range(3) for o in (obs("base", f"c{i}", 0, 1.0), obs("cand", f"c{i}", 0, 2.0))]
    diff = arm(analyze(data, min_samples=3), "cand")["difference"]
    assert (diff["value"], diff["pValue"], diff["interval"]) == (1.0, 0.0, [1.0, 1.0])


def test_unknown_baseline_is_rejected() -> None:
    with pytest.raises(ValueError, match="baseline"):
        analyze_experiment([], variants=["a"], baseline="b", metrics=["m"])


def test_analysis_is_deterministic() -> None:
    assert analyze(DATA) == analyze(list(DATA))
