"""Case-paired differences and what is decided from them: the paired t test, the decision
rule, power (minimum detectable effect, cases needed), Holm's multiple-comparison adjustment and
the sign test (docs/statistics.md).

A difference between two variants is the mean of per-case differences over the cases both have
(equal weight per case), so a difference and the two means it is taken from never disagree in
sign. Stdlib only, no mst imports outside this package, pure functions.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from mst.statistics.intervals import (
    CONFIDENCE,
    MIN_CASES,
    NO_BOUNDS,
    POWER,
    Bounds,
    check_confidence,
    clip,
    difference_bounds,
    finite,
    sample_sd,
    t_cdf,
    t_quantile,
    two_sided_quantile,
)


def _case_value(value: float | Sequence[float | None] | None, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return finite(value, where)
    present = [finite(v, where) for v in value if v is not None]
    return math.fsum(present) / len(present) if present else None


def paired_difference(
    a_by_case: Mapping[str, float | Sequence[float | None] | None],
    b_by_case: Mapping[str, float | Sequence[float | None] | None],
    confidence: float = CONFIDENCE,
    bounds: Bounds = NO_BOUNDS,
) -> dict[str, Any]:
    """Mean of case-level differences a − b over the cases both sides have, with a paired t test.

    A case's value is the number given, or the mean of the trial values given. See
    :func:`difference_of_pairs` for what is returned.
    """
    pairs: list[tuple[float, float]] = []
    for case_id, a_raw in a_by_case.items():
        if case_id not in b_by_case:
            continue
        a, b = _case_value(a_raw, case_id), _case_value(b_by_case[case_id], case_id)
        if a is not None and b is not None:
            pairs.append((a, b))
    return difference_of_pairs(pairs, confidence, bounds)


def difference_of_pairs(pairs: Sequence[tuple[float, float]], confidence: float = CONFIDENCE,
                        bounds: Bounds = NO_BOUNDS) -> dict[str, Any]:
    """The paired t analysis of (a, b) case values: ``{mean, a, b, low, high, p, se, sd, cases, df}``.

    ``a``/``b`` are the two sides' means over these cases (equal weight per case), so
    ``mean == a − b`` exactly. ``low``/``high``/``p``/``se``/``sd`` are ``None`` with fewer than
    two cases; the p-value is two-sided; the interval is kept inside the range of a difference
    of values in ``bounds``. With zero spread the interval is the point and p is 1 for a zero
    mean and 0 otherwise (the t statistic is then 0 or infinite): :func:`decide` makes no
    decision from it.
    """
    n = len(pairs)
    out: dict[str, Any] = {"mean": None, "a": None, "b": None, "low": None, "high": None, "p": None,
                           "se": None, "sd": None, "cases": n, "df": None}
    if n == 0:
        return out
    # A float array, 8 bytes a case: a list of floats is 32, the comparison's peak at 100,000
    # cases (issue 16). fsum and the spread read it as they read a list: the same figures.
    diffs = array("d", (a - b for a, b in pairs))
    mean = math.fsum(diffs) / n
    out.update(mean=mean, a=math.fsum(a for a, _ in pairs) / n, b=math.fsum(b for _, b in pairs) / n)
    if n < 2:
        return out
    sd = sample_sd(diffs, mean)
    se = sd / math.sqrt(n)
    out.update(sd=sd, se=se, df=n - 1)
    if se == 0.0:
        return {**out, "low": mean, "high": mean, "p": 1.0 if mean == 0.0 else 0.0}
    p = min(1.0, 2.0 * t_cdf(-abs(mean / se), n - 1))
    half = two_sided_quantile(confidence, n - 1) * se
    low, high = clip(mean - half, mean + half, difference_bounds(bounds))
    return {**out, "low": low, "high": high, "p": p}


def decide(diff: Mapping[str, Any], direction: str, *, min_cases: int = MIN_CASES,
           alpha: float = 1.0 - CONFIDENCE, p: float | None = None) -> tuple[str, str | None]:
    """``(decision, reason)`` for a paired difference (a = candidate, b = baseline).

    ``insufficient`` with fewer than ``min_cases`` paired cases (at least 2: cases, not trials,
    are the independent units) or with a non-zero difference but no spread (a standard error of
    0 is not certainty: two cases that differ alike say nothing about the noise);
    ``inconclusive`` when no paired case differs at all; otherwise ``better``/``worse`` when
    the p-value (``p``, e.g. adjusted for multiple comparisons, or the difference's own) is
    below ``alpha`` in the metric's favourable/unfavourable ``direction``, else ``inconclusive``.
    """
    cases = int(diff.get("cases") or 0)
    needed = max(min_cases, 2)
    if cases < needed:
        return "insufficient", f"{cases} paired case(s); a decision needs at least {needed}"
    if not diff["mean"]:
        return "inconclusive", None  # no difference at all: nothing to decide, whatever the spread
    if not diff.get("se"):
        return "insufficient", "no spread: every paired case differs alike, so the noise cannot be estimated"
    p_value = diff["p"] if p is None else p
    if p_value >= alpha:
        return "inconclusive", None
    favourable = diff["mean"] > 0 if direction == "higher" else diff["mean"] < 0
    return ("better" if favourable else "worse"), None


def minimum_detectable_effect(sd: float | None, cases: int, confidence: float = CONFIDENCE,
                              power: float = POWER) -> float | None:
    """The smallest true mean difference a paired t test on ``cases`` cases, with per-case
    differences of standard deviation ``sd``, finds at ``power``: (t₁₋α/₂ + t_power)·sd/√G on
    G−1 degrees of freedom. ``None`` without two cases or a spread (a spread of 0 is no estimate
    of the noise)."""
    if not sd or cases < 2:
        return None
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    return (two_sided_quantile(confidence, cases - 1) + t_quantile(power, cases - 1)) * sd / math.sqrt(cases)


def cases_needed(difference: float, sd: float, confidence: float = CONFIDENCE, power: float = POWER) -> int:
    """The fewest cases whose :func:`minimum_detectable_effect` is at most ``difference``.

    Starts from the normal approximation (a lower bound, since t quantiles exceed normal ones)
    and steps up; never fewer than 2.
    """
    if not difference > 0 or not math.isfinite(difference):
        raise ValueError(f"the difference to detect must be a positive number, got {difference!r}")
    if not sd >= 0 or not math.isfinite(sd):
        raise ValueError(f"the standard deviation must be a non-negative number, got {sd!r}")
    from statistics import NormalDist  # imported here: see Z95 in mst.statistics.intervals

    normal = NormalDist()
    z = normal.inv_cdf(0.5 + check_confidence(confidence) / 2) + normal.inv_cdf(power)
    n = max(2, math.ceil((z * sd / difference) ** 2))
    while (mde := minimum_detectable_effect(sd, n, confidence, power)) is not None and mde > difference:
        n += 1
    return n


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (``None`` stays ``None`` and is not counted): a family
    of tests whose adjusted p is below α has a family-wise error rate of at most α."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (len(present) - rank) * p))
        out[i] = running
    return out


def sign_test(wins: int, losses: int) -> float | None:
    """Two-sided exact sign test of wins against losses (ties left out); None without either."""
    decided = wins + losses
    if not decided:
        return None
    k = min(wins, losses)
    # P(X ≤ k) for X ~ Binomial(decided, 1/2), in log space to stay O(decided) and exact enough.
    log_half = decided * math.log(0.5)
    tail = math.fsum(
        math.exp(math.lgamma(decided + 1) - math.lgamma(i + 1) - math.lgamma(decided - i + 1) + log_half)
        for i in range(k + 1)
    )
    return min(1.0, 2.0 * tail)
