"""Honest comparisons (issue 15): decisions need cases and spread, one weighting, bounded
intervals, power, Holm, pairwise rates — each checked against scipy / statsmodels or a closed form."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint

from mst.graders import Observation, analyze_experiment
from mst.runs.compare import PASS_RATE, PASS_RATE_METRIC, Columns, Metric, compare
from mst.statistics import (
    cases_needed,
    clustered_mean,
    decide,
    difference_of_pairs,
    holm,
    minimum_detectable_effect,
    proportion_of_cases,
    sign_test,
    t_quantile,
)
from mst.statistics.rates import flip_rate, pass_rate, preference_counts


def obs(variant: str, case: str, trial: int, value: float, direction: str = "higher") -> Observation:
    result = {"id": "m", "value": value, "status": "pass", "direction": direction}
    return Observation(variant, case, str(trial), [result])


def arm(analysis: dict[str, Any], variant: str = "cand") -> dict[str, Any]:
    return next(a for a in analysis["metrics"][0]["arms"] if a["variant"] == variant)


def analyze(data: list[Observation], **kw: Any) -> dict[str, Any]:
    return analyze_experiment(data, variants=["base", "cand"], baseline="base", metrics=["m"], **kw)


# --- no decision from zero spread, and cases not trials ------------------------------------------


def _two_cases_ten_trials() -> list[Observation]:
    return [o for c in ("c1", "c2") for t in range(10)
            for o in (obs("base", c, t, 2.0 if c == "c1" else 5.0), obs("cand", c, t, 1.0 if c == "c1" else 4.0))]


def test_identical_differences_on_two_cases_decide_nothing() -> None:
    result = arm(analyze(_two_cases_ten_trials(), min_samples=2))
    assert result["difference"]["value"] == -1.0 and result["difference"]["pairedCases"] == 2
    assert result["decision"] == "insufficient" and "spread" in result["reason"]  # was "worse"


def test_the_minimum_sample_counts_cases_not_trials() -> None:
    data = [o for c in ("c1", "c2") for t in range(10)
            for o in (obs("base", c, t, 1.0 + t % 3), obs("cand", c, t, 5.0 + t % 2 + (c == "c2")))]
    result = arm(analyze(data, min_samples=20))  # 20 trials per arm, but 2 cases
    assert result["n"] == 20 and result["cases"] == 2
    assert result["decision"] == "insufficient" and "2 paired case(s)" in result["reason"]


def test_decide_needs_cases_and_a_standard_error() -> None:
    flat = difference_of_pairs([(1.0, 0.0)] * 12)
    assert (flat["p"], flat["se"]) == (0.0, 0.0)
    assert decide(flat, "higher", min_cases=2)[0] == "insufficient"
    spread = difference_of_pairs([(1.0 + 0.1 * (i % 3), 0.0) for i in range(12)])
    assert decide(spread, "higher", min_cases=12)[0] == "better"
    assert decide(spread, "higher", min_cases=13)[0] == "insufficient"
    assert decide(spread, "lower", min_cases=2)[0] == "worse"


# --- one weighting ---------------------------------------------------------------------------------


def test_arm_means_and_difference_agree_in_sign() -> None:
    # Trial-weighted, the candidate is higher (12/5 vs 10/5); case by case it is lower (+1, −2).
    data = [*(obs("cand", "c1", t, 3.0, "lower") for t in range(4)), obs("cand", "c2", 0, 0.0, "lower"),
            obs("base", "c1", 0, 2.0, "lower"), *(obs("base", "c2", t, 2.0, "lower") for t in range(4))]
    analysis = analyze(data, min_samples=2)
    cand, base = arm(analysis), arm(analysis, "base")
    diff = cand["difference"]
    assert analysis["weighting"] == "case" and analysis["minSamplesCounts"] == "cases"
    assert (cand["mean"], base["mean"], diff["value"]) == (1.5, 2.0, -0.5)
    assert diff["candidateMean"] - diff["baselineMean"] == diff["value"]
    assert math.copysign(1, cand["mean"] - base["mean"]) == math.copysign(1, diff["value"])


def test_paired_difference_matches_scipy() -> None:
    rng = random.Random(5)
    pairs = [(rng.random(), rng.random() * 0.8) for _ in range(17)]
    ours = difference_of_pairs(pairs, confidence=0.9)
    ref = sps.ttest_rel([a for a, _ in pairs], [b for _, b in pairs])
    low, high = ref.confidence_interval(0.9)
    assert ours["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert (ours["low"], ours["high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert ours["mean"] == pytest.approx(ours["a"] - ours["b"], abs=1e-15)


# --- intervals that hold near the bounds and stay inside the range ---------------------------------


def test_pass_rate_interval_is_wilson_on_the_effective_sample_size() -> None:
    counts = [(5, 5)] * 29 + [(4, 5)]  # one failing trial in 150
    result = pass_rate(counts)
    fractions = [c / n for c, n in counts]
    p = sum(fractions) / 30
    n_eff = min(150, p * (1 - p) / (sps.tstd(fractions) ** 2 / 30))
    t = t_quantile(0.975, 29)
    alpha = 2 * sps.norm.sf(t)  # statsmodels' Wilson takes a normal quantile: give it t's
    low, high = proportion_confint(p * n_eff, n_eff, alpha=alpha, method="wilson")
    assert result["method"] == "wilson-effective" and result["effectiveN"] == pytest.approx(n_eff)
    assert (result["low"], result["high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert result["low"] < 0.98  # p ± t·SE gave [0.980, 1]


def test_intervals_stay_inside_the_declared_range() -> None:
    durations = {f"c{i}": [0.0] for i in range(5)} | {"c5": [2.4]}
    free, bounded = clustered_mean(durations), clustered_mean(durations, bounds=(0.0, None))
    assert free["low"] < 0 and bounded["low"] == 0.0 and bounded["high"] == free["high"]
    ratio = difference_of_pairs([(1.0, 0.0), (1.0, 0.2), (1.0, 0.0)], bounds=(0.0, 1.0))
    assert ratio["high"] <= 1.0 and ratio["low"] >= -1.0
    data = [o for i in range(6) for o in (obs("base", f"c{i}", 0, 1.0), obs("cand", f"c{i}", 0, 1.0 + 3 * (i == 0)))]
    analysis = analyze(data, min_samples=2, bounds={"m": (1.0, 4.0)})
    assert arm(analysis)["interval"][0] >= 1.0 and arm(analysis)["difference"]["interval"][0] >= -3.0


def _coverage(a: float, b: float, cases: int, trials: int, reps: int, rng: random.Random) -> float:
    mean = a / (a + b)
    covered = 0
    for _ in range(reps):
        counts = []
        for _ in range(cases):
            p = rng.betavariate(a, b)
            counts.append((sum(rng.random() < p for _ in range(trials)), trials))
        r = pass_rate(counts)
        covered += r["low"] <= mean <= r["high"]
    return covered / reps


@pytest.mark.slow
@pytest.mark.parametrize("cases", [8, 30])
@pytest.mark.parametrize(("a", "b"), [(2.0, 2.0), (6.0, 0.6), (12.0, 0.25)])
def test_pass_rate_interval_covers_near_the_bounds(a: float, b: float, cases: int) -> None:
    """Simulated coverage of the 95% trial pass-rate interval, cases × 5 trials (fixed seed)."""
    coverage = _coverage(a, b, cases, 5, 2000, random.Random(f"{a}-{b}-{cases}"))
    assert coverage >= 0.93, coverage


# --- power, planning, Holm -------------------------------------------------------------------------


@pytest.mark.parametrize(("difference", "sd"), [(0.05, 0.3), (0.1, 0.3), (0.2, 0.5), (1.0, 1.0)])
def test_cases_needed_matches_the_noncentral_t(difference: float, sd: float) -> None:
    exact = TTestPower().solve_power(effect_size=difference / sd, alpha=0.05, power=0.8)
    assert math.ceil(exact) <= cases_needed(difference, sd) <= math.ceil(exact) + 1
    need = cases_needed(difference, sd)
    mde = minimum_detectable_effect(sd, need)
    assert mde is not None and mde <= difference < minimum_detectable_effect(sd, need - 1)  # type: ignore[operator]
    power_at_mde = TTestPower().power(effect_size=mde / sd, nobs=need, alpha=0.05)
    assert power_at_mde == pytest.approx(0.8, abs=0.01)
    assert minimum_detectable_effect(0.0, 30) is None and minimum_detectable_effect(0.3, 1) is None


def test_holm_matches_statsmodels() -> None:
    ps = [0.01, 0.04, 0.03, 0.2, 0.001]
    assert holm([*ps[:2], None, *ps[2:]]) == pytest.approx(
        [*multipletests(ps, method="holm")[1][:2], None, *multipletests(ps, method="holm")[1][2:]])


# --- pairwise --------------------------------------------------------------------------------------


def test_win_rate_counts_ties_half_and_sign_test_is_exact() -> None:
    prefs = ["candidate"] * 9 + ["baseline"] * 3 + ["tie"] * 4 + [None]
    result = preference_counts(prefs)
    assert (result["wins"], result["losses"], result["ties"], result["notCompared"]) == (9, 3, 4, 1)
    assert result["winRate"]["estimate"] == pytest.approx((9 + 2) / 16)
    assert result["winRate"]["low"] < 11 / 16 < result["winRate"]["high"]
    assert result["p"] == pytest.approx(sps.binomtest(9, 12).pvalue, rel=1e-12)
    assert sign_test(0, 0) is None


def test_flip_rate_is_the_share_of_pairs_changed_by_order() -> None:
    orders = [("candidate", "candidate"), ("candidate", "baseline"), ("tie", "baseline"), ("baseline", "baseline")]
    assert flip_rate(orders) == {"pairs": 4, "flips": 2, "rate": 0.5}
    assert flip_rate([])["rate"] is None


def test_proportion_of_one_case_has_no_interval() -> None:
    assert proportion_of_cases([0.5], 2) | {} == {"estimate": 0.5, "low": None, "high": None,
                                                   "method": "single-case", "effectiveN": None}


# --- the comparison block ---------------------------------------------------------------------------


def test_compare_leaves_out_incomplete_and_unpaired_cases() -> None:
    cand, base = Columns(), Columns()
    for i in range(12):
        cand.add_case(f"c{i}", {PASS_RATE: None if i == 0 else 0.5 + 0.04 * i, "grader:d": float(i)})
        base.add_case(f"c{i}", {PASS_RATE: 0.5, "grader:d": 0.0})
    cand.add_case("only-cand", {PASS_RATE: 1.0})
    out = compare(cand, base, [PASS_RATE_METRIC, Metric("grader:d", "lower", (0.0, None))], min_cases=5)
    assert out["cases"] == 11 and out["excluded"] == {"incomplete": 1, "unpaired": 1}
    rate, duration = out["metrics"][PASS_RATE], out["metrics"]["grader:d"]
    assert rate["cases"] == duration["cases"] == 11  # c0's duration is left out with its case
    assert rate["decision"] == "better" and duration["decision"] == "worse"
    assert rate["difference"] == pytest.approx(sum(0.04 * i for i in range(1, 12)) / 11)
    assert rate["mde"] == pytest.approx(minimum_detectable_effect(rate["se"] * math.sqrt(11), 11))


# --- the gate --------------------------------------------------------------------------------------


def _stored(diffs: list[float], noise: list[float]) -> Any:
    from mst.runs.gate import StoredRun

    base, cand = Columns(), Columns()
    for i, (d, n) in enumerate(zip(diffs, noise, strict=True)):
        base.add_case(f"c{i}", {PASS_RATE: 2 / 3, "grader:a": 1.0, "grader:b": 1.0})
        cand.add_case(f"c{i}", {PASS_RATE: 2 / 3 + d, "grader:a": 1.0 + n, "grader:b": 1.0 - n})
    head = {"run": "r", "variants": [{"id": "base", "baseline": True}, {"id": "cand"}]}
    return StoredRun(Path("r"), head, {"base": base, "cand": cand})


def test_gate_fails_on_a_significant_regression_and_holm_guards_many_checks() -> None:
    from mst.runs.gate import gate

    diffs = [-1 / 3] * 7 + [1 / 3] + [0.0] * 6  # paired t: p = 0.0275
    noise = [0.1, -0.1, 0.2, -0.2, 0.05, -0.05, 0.1, -0.1, 0.3, -0.3, 0.0, 0.01, -0.01, 0.0]
    run = _stored(diffs, noise)
    alone = gate(run)
    assert alone.failed and alone.checks[0].regression
    assert alone.checks[0].adjusted_p == pytest.approx(sps.ttest_1samp(diffs, 0.0).pvalue, rel=1e-9)
    three = gate(run, metrics=[("grader:a", "higher"), ("grader:b", "lower")])
    adjusted = multipletests([c.row["p"] for c in three.checks], method="holm")[1]
    assert [c.adjusted_p for c in three.checks] == pytest.approx(list(adjusted))
    assert not three.failed and three.checks[0].decision == "inconclusive"  # 3 × 0.0275 > 0.05
    assert not gate(_stored([0.0] * 14, noise)).failed
    assert not gate(_stored([-0.5] * 14, noise)).failed  # no spread: insufficient, never a failure


def test_the_comparison_is_a_typed_field_of_the_summary_with_its_codec() -> None:
    from mst.runs.compare import Comparison, MetricComparison
    from mst.runs.summary import Summary

    cand, base = Columns(), Columns()
    for i in range(12):
        cand.add_case(f"c{i}", {PASS_RATE: 0.5 + 0.04 * i})
        base.add_case(f"c{i}", {PASS_RATE: 0.5})
    comparison = compare(cand, base, [PASS_RATE_METRIC], confidence=0.9)
    doc = {"schema": "mst.summary/v1", "run": "r", "eval": "e", "regradeOf": None,
           "phases": {"collect": "complete", "grade": "complete"}, "casePass": "all", "confidence": 0.9,
           "totals": {"attempts": 24, "trials": 24, "infrastructureFailures": 0, "cases": 12, "incompleteCases": 0},
           "variants": [{"id": "base", "baseline": True, "client": "agent", "model": None},
                        {"id": "cand", "baseline": False, "client": "agent", "model": None,
                         "comparison": orjson.loads(orjson.dumps(comparison.to_json()))}]}
    summary = Summary.from_json(doc)
    assert summary.confidence == 0.9 and summary.variants[0].comparison is None
    typed = summary.variants[1].comparison
    assert isinstance(typed, Comparison) and typed == comparison
    rate = typed.metrics[PASS_RATE]
    assert isinstance(rate, MetricComparison) and rate.bounds == (0.0, 1.0) and rate.decision == "better"
    assert summary.to_json() == doc and "comparison" not in summary["variants"][0]
    assert summary["variants"][1]["comparison"]["metrics"][PASS_RATE]["p"] == rate.p  # the file's shape
    with pytest.raises(TypeError):
        summary["variants"][1]["comparison"]["cases"] = 0
