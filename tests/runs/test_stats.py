"""Statistics against hand-computed values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mst.statistics import (
    betainc,
    case_sum,
    clustered_mean,
    mean_of_cases,
    paired_difference,
    t_cdf,
    t_quantile,
    wilson_interval,
)
from mst.statistics.rates import (
    CaseTrials,
    case_passes,
    case_row,
    case_status,
    pass_at_k,
    pass_at_k_curve,
    pass_hat_k,
    pass_rate,
    preference_counts,
    variant_stats,
)

# --- the t distribution ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [-7.0, -1.0, 0.0, 0.3, 2.5, 40.0])
def test_t_cdf_matches_closed_forms(t: float) -> None:
    assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)  # Cauchy
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


def test_t_quantiles_match_tables() -> None:
    # Standard table values of t(0.975, df).
    for df, value in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)):
        assert t_quantile(0.975, df) == pytest.approx(value, abs=1e-4)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.025, 5) == pytest.approx(-t_quantile(0.975, 5))


def test_betainc_symmetry_and_known_value() -> None:
    assert betainc(2, 3, 0.4) == pytest.approx(1 - betainc(3, 2, 0.6), abs=1e-12)
    # I_x(1, b) = 1 - (1 - x)^b
    assert betainc(1, 3, 0.2) == pytest.approx(1 - 0.8**3, abs=1e-12)


def test_wilson_interval() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(1 - 0.2775, abs=1e-4)
    low, high = wilson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_z95_is_the_normal_quantile() -> None:
    """Z95 is written out (so importing mst.statistics does not import the stdlib's statistics):
    it must be exactly the 97.5% quantile of the standard normal."""
    from statistics import NormalDist

    from mst.statistics import Z95

    assert NormalDist().inv_cdf(0.975) == Z95


# --- case status ----------------------------------------------------------------------------------


def test_case_pass_rules() -> None:
    assert case_passes(3, 3, "all") and not case_passes(2, 3, "all")
    assert case_passes(1, 3, "any") and not case_passes(0, 3, "any")
    assert case_passes(2, 3, "majority") and not case_passes(2, 4, "majority")  # a split is no majority
    assert case_passes(3, 4, {"atLeast": 0.75}) and not case_passes(2, 4, {"atLeast": 0.75})
    assert case_passes(1, 3, {"atLeast": 1 / 3})  # no float trouble at the boundary
    assert case_passes(0, 3, {"atLeast": 0})

    class Model:
        atLeast = 0.5

    assert case_passes(2, 4, Model())
    with pytest.raises(ValueError, match="unknown casePass rule"):
        case_passes(1, 1, "most")
    with pytest.raises(ValueError, match="atLeast"):
        case_passes(1, 1, {"atLeast": 2})


def test_case_status_incomplete_when_short_or_ungraded() -> None:
    assert case_status([True, True], 3) == "incomplete"  # short of a trial
    assert case_status([True, None, True], 3) == "incomplete"  # an ungraded trial
    assert case_status([], 1) == "incomplete"
    assert case_status([True, True, True], 3) == "passed"
    assert case_status([True, False, True], 3) == "failed"
    assert case_status([True, False, True], 3, "majority") == "passed"


# --- pass@k, pass^k -------------------------------------------------------------------------------


def test_pass_at_k_and_pass_hat_k_by_hand() -> None:
    # n = 5 trials, c = 2 passes.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(5, 2, 4) == 1.0  # C(3,4) = 0
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)  # C(2,2)/C(5,2)
    assert pass_hat_k(5, 2, 3) == 0.0
    at, hat = pass_at_k_curve(4, 4, 4)
    assert at == [1.0] * 4 and hat == [1.0] * 4
    at, hat = pass_at_k_curve(4, 0, 4)
    assert at == [0.0] * 4 and hat == [0.0] * 4
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_at_k_agrees_with_binomials() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))
                assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))


# --- pass rate and its interval ------------------------------------------------------------------


def _wilson_effective_by_hand(counts: list[tuple[int, int]], t: float) -> tuple[float, float, float]:
    """Equal weight per case; Wilson on n* = p(1−p)/V, V = s²/G of the case fractions."""
    g = len(counts)
    fractions = [c / n for c, n in counts]
    p = sum(fractions) / g
    var = sum((f - p) ** 2 for f in fractions) / (g - 1) / g
    n_eff = min(sum(n for _, n in counts), p * (1 - p) / var)
    centre = (p + t * t / (2 * n_eff)) / (1 + t * t / n_eff)
    half = t / (1 + t * t / n_eff) * math.sqrt(p * (1 - p) / n_eff + t * t / (4 * n_eff**2))
    return p, centre - half, centre + half


def test_pass_rate_cluster_interval_by_hand() -> None:
    # Deliberate change (issue 15): a Wilson interval on the effective sample size replaces p ± t·SE.
    counts = [(3, 3), (0, 3), (2, 3), (1, 3), (3, 3), (2, 3), (3, 3), (1, 3)]
    result = pass_rate(counts)
    p, low, high = _wilson_effective_by_hand(counts, 2.3646)  # t(0.975, 7)
    assert result["estimate"] == pytest.approx(15 / 24) == pytest.approx(p)
    assert result["method"] == "wilson-effective" and (result["cases"], result["trials"]) == (8, 24)
    assert result["low"] == pytest.approx(low, abs=1e-4)
    assert result["high"] == pytest.approx(high, abs=1e-4)


def test_clustered_interval_is_wider_than_treating_trials_as_independent() -> None:
    # Cases are all-or-nothing: 20 cases × 5 trials look like 100 draws but are 20.
    counts = [(5, 5)] * 12 + [(0, 5)] * 8
    result = pass_rate(counts)
    naive_low, naive_high = wilson_interval(60, 100)
    assert result["high"] - result["low"] > 1.8 * (naive_high - naive_low)


def test_pass_rate_fallback_when_every_case_agrees() -> None:
    result = pass_rate([(3, 3)] * 10)
    assert result["estimate"] == 1.0 and result["method"] == "wilson-cases" and result["high"] == 1.0
    # n = cases, not 30 trials; the quantile is t on G−1 df (deliberate change, issue 15)
    assert result["low"] == pytest.approx(wilson_interval(10, 10, t_quantile(0.975, 9))[0])
    # One case: its trials say nothing about how cases vary, so no interval (issue 15).
    single = pass_rate([(1, 2)])
    assert single["method"] == "single-case" and single["estimate"] == 0.5
    assert single["low"] is None and single["high"] is None
    assert pass_rate([])["estimate"] is None


# --- variant stats --------------------------------------------------------------------------------


def test_variant_stats_excludes_incomplete_cases() -> None:
    cases = {
        "a": CaseTrials(3, [True, True, True]),
        "b": CaseTrials(3, [True, False, False]),
        "c": CaseTrials(3, [True, True]),  # short: incomplete
        "d": CaseTrials(3, [True, None, True]),  # ungraded: incomplete
        "e": CaseTrials(2, [False, False]),
    }
    stats: dict[str, Any] = variant_stats(cases)
    assert stats["cases"] == {"total": 5, "passed": 1, "failed": 2, "incomplete": 2}
    # Equal weight per case (issue 15): the pass rate is pass@1, (1 + 1/3 + 0) / 3, not 4/8 trials.
    assert stats["passRate"]["estimate"] == pytest.approx((1 + 1 / 3 + 0) / 3) == stats["passAtK"]["1"]
    assert (stats["passRate"]["cases"], stats["passRate"]["trials"]) == (3, 8)
    # k goes up to the fewest trials of a complete case (2); averages over a, b, e.
    assert set(stats["passAtK"]) == {"1", "2"}
    assert stats["passAtK"]["1"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert stats["passAtK"]["2"] == pytest.approx((1 + (1 - 1 / 3) + 0) / 3)  # b: 1 - C(2,2)/C(3,2)
    assert stats["passHatK"]["2"] == pytest.approx((1 + 0 + 0) / 3)
    assert case_row(cases["c"]) == {
        "status": "incomplete",
        "expected": 3,
        "trials": 2,
        "graded": 2,
        "passed": 2,
        "passRate": 1.0,
    }
    assert case_row(cases["d"])["passRate"] == 1.0 and case_row(cases["d"])["graded"] == 2
    assert stats["casePassRate"]["estimate"] == pytest.approx(1 / 3) and stats["casePassRate"]["cases"] == 3


def test_variant_stats_rule_and_empty() -> None:
    cases = {"a": CaseTrials(2, [True, False]), "b": CaseTrials(2, [False, False])}
    assert variant_stats(cases, "any")["cases"]["passed"] == 1
    assert variant_stats(cases, {"atLeast": 0.5})["cases"]["passed"] == 1
    assert variant_stats(cases, "all")["cases"]["passed"] == 0
    only_incomplete = variant_stats({"a": CaseTrials(2, [True])})
    assert only_incomplete["passRate"]["estimate"] is None and only_incomplete["passAtK"] == {}


# --- clustered means and paired differences --------------------------------------------------------


def test_clustered_mean_by_hand_and_missing_values() -> None:
    values = {"a": [1.0, 3.0], "b": [2.0, None], "c": [6.0], "d": [None]}
    result = clustered_mean(values)
    # Equal weight per case (issue 15): case means 2, 2, 6 → mean 10/3; sd of the case means.
    means = [2.0, 2.0, 6.0]
    sd = math.sqrt(sum((m - 10 / 3) ** 2 for m in means) / 2)
    assert result["mean"] == pytest.approx(10 / 3) and (result["cases"], result["n"]) == (3, 4)
    assert result["high"] - result["mean"] == pytest.approx(4.3027 * sd / math.sqrt(3), abs=1e-3)
    assert clustered_mean({"a": [1.0, 2.0]})["low"] is None
    assert clustered_mean({})["mean"] is None
    with pytest.raises(ValueError, match="finite"):
        clustered_mean({"a": [float("inf")]})


def test_clustered_mean_is_the_mean_of_case_means() -> None:
    """The summary keeps each case's mean, not the trial values: same numbers."""
    values = {"a": [1.0, 3.0], "b": [2.0, None], "c": [6.0], "d": [None], "e": [0.5, 0.25, 8.0]}
    sums = [s for s in (case_sum(v, k) for k, v in values.items()) if s is not None]
    assert case_sum([None], "d") is None
    by_means = mean_of_cases([s / n for s, n in sums])
    assert {**by_means, "n": sum(n for _, n in sums)} == clustered_mean(values)


def test_paired_difference_by_hand() -> None:
    a = {"x": 3.0, "y": [4.0, 6.0], "z": 7.0, "only-a": 100.0}
    b = {"x": 2.0, "y": 3.0, "z": 4.0, "only-b": 0.0}
    result = paired_difference(a, b)
    # diffs 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t = 2·sqrt(3), df 2.
    t = 2 * math.sqrt(3)
    assert result["mean"] == pytest.approx(2.0) and (result["cases"], result["df"]) == (3, 2)
    assert result["p"] == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-9)
    assert result["high"] - 2.0 == pytest.approx(4.3027 / math.sqrt(3), abs=1e-3)


def test_paired_difference_degenerate_cases() -> None:
    assert paired_difference({"x": 1.0}, {"y": 1.0})["mean"] is None
    one = paired_difference({"x": 2.0}, {"x": 1.0})
    assert one["mean"] == 1.0 and one["p"] is None
    same = paired_difference({"x": 1.0, "y": 2.0}, {"x": 1.0, "y": 2.0})
    assert (same["mean"], same["p"]) == (0.0, 1.0)
    assert paired_difference({"x": [None]}, {"x": 1.0})["cases"] == 0  # missing evidence is not zero


def test_preference_counts_sign_test() -> None:
    result = preference_counts(["candidate"] * 5 + ["tie", None])
    assert (result["wins"], result["ties"], result["losses"], result["notCompared"]) == (5, 1, 0, 1)
    assert result["p"] == pytest.approx(2 / 32)
    assert preference_counts(["candidate", "baseline"])["p"] == pytest.approx(1.0)
    assert preference_counts([])["p"] is None
