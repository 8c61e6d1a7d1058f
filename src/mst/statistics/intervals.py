"""Student's t, Wilson, and means over cases with honest intervals (docs/statistics.md).

Used by the run summary (pass rates, grader means), by :mod:`mst.statistics.paired` (paired
differences and decisions) and by experiment analysis. Stdlib only, no mst imports, pure
functions, so any layer may use it — the graders package included — without depending on
another engine module.

Why by case: the trials of one case are not independent (a hard case fails in all its trials),
so every interval here treats the *case* as the unit of sampling — equal weight per case, a t
quantile on G−1 degrees of freedom — and every minimum counts cases. Missing values (``None``)
are missing evidence: left out, never counted as zero.

The t distribution's CDF comes from the regularized incomplete beta function (Lentz's continued
fraction) to avoid a scipy dependency for a few functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

CONFIDENCE: Final = 0.95
# NormalDist().inv_cdf(0.975), written out: the stdlib's statistics module (which imports random,
# fractions and decimal) is imported only by the functions that need a normal quantile, so that
# `mst --version` and the CLI's option defaults do not pay for it (tests hold the value).
Z95: Final = 1.9599639845400536


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=256)
def t_quantile(q: float, df: float) -> float:
    """The t distribution's ``q`` quantile (bisection on :func:`t_cdf`; cached per df)."""
    if not 0.0 < q < 1.0:
        raise ValueError("q must be in (0, 1)")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    if q == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def wilson_interval(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion (well behaved at 0 and 1)."""
    if n <= 0:
        raise ValueError("n must be positive")
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1.0 - p) / n + z * z / (4.0 * n * n), 0.0))
    # At p = 0 (or 1) the bound is exactly 0 (or 1); say so rather than leave rounding noise.
    low = 0.0 if successes <= 0 else max(0.0, center - half)
    high = 1.0 if successes >= n else min(1.0, center + half)
    return low, high


# ---------------------------------------------------------------------------------------------
# One weighting: every case counts once
#
# A mean here is the mean of the cases' own means (each case the mean of its trials), so a case
# with five trials weighs what a case with one does. The case is the unit of sampling, its
# spread is the spread of case means (the cluster-robust variance with equal case weights), and
# the intervals use a t quantile on G−1 degrees of freedom. Differences between variants are
# means of per-case differences over the cases both have, so a difference and the two means it
# is taken from never disagree in sign. See docs/statistics.md.

Bounds = tuple[float | None, float | None]
NO_BOUNDS: Final[Bounds] = (None, None)
MIN_CASES: Final = 10
"""The fewest cases (paired cases for a difference) on which any better/worse decision is made."""
POWER: Final = 0.8


def check_confidence(confidence: float) -> float:
    """``confidence`` itself when it is a usable level: in [0.5, 1)."""
    if isinstance(confidence, bool) or not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    return float(confidence)


def two_sided_quantile(confidence: float, df: float) -> float:
    """The t quantile of a two-sided interval at ``confidence`` with ``df`` degrees of freedom."""
    return t_quantile(0.5 + check_confidence(confidence) / 2.0, df)


def clip(low: float, high: float, bounds: Bounds) -> tuple[float, float]:
    """An interval cut to the range the quantity can take: the true value lies inside the range,
    so cutting off what lies outside it never loses coverage."""
    lo, hi = bounds
    if lo is not None:
        low, high = max(low, lo), max(high, lo)
    if hi is not None:
        low, high = min(low, hi), min(high, hi)
    return low, high


def difference_bounds(bounds: Bounds) -> Bounds:
    """The range of a difference of two values in ``bounds``: [min − max, max − min]."""
    lo, hi = bounds
    if lo is None or hi is None:
        return NO_BOUNDS
    return lo - hi, hi - lo


def finite(value: float, where: str) -> float:
    """``value`` as a float; a ValueError naming ``where`` when it is NaN or infinite."""
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{where}: values must be finite numbers, got {value!r}")
    return v


def sample_sd(values: Sequence[float], mean: float) -> float:
    """The sample standard deviation (n − 1)."""
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def case_sum(values: Iterable[float | None], where: str) -> tuple[float, int] | None:
    """One case's (sum, count) of its present values, None when it has none."""
    present = [finite(v, where) for v in values if v is not None]
    return (math.fsum(present), len(present)) if present else None


def mean_of_cases(means: Sequence[float], confidence: float = CONFIDENCE,
                  bounds: Bounds = NO_BOUNDS) -> dict[str, Any]:
    """The mean of case means, equal weight per case, with a t interval kept inside ``bounds``.

    ``{mean, low, high, cases}``; the interval is ``None`` with fewer than two cases (one case says
    nothing about how cases vary), and the point itself when every case has the same mean.
    """
    g = len(means)
    if g == 0:
        return {"mean": None, "low": None, "high": None, "cases": 0}
    mean = math.fsum(means) / g
    if g < 2:
        return {"mean": mean, "low": None, "high": None, "cases": g}
    half = two_sided_quantile(confidence, g - 1) * sample_sd(means, mean) / math.sqrt(g)
    low, high = clip(mean - half, mean + half, bounds)
    return {"mean": mean, "low": low, "high": high, "cases": g}


def clustered_mean(values_by_case: Mapping[str, Sequence[float | None]], confidence: float = CONFIDENCE,
                   bounds: Bounds = NO_BOUNDS) -> dict[str, Any]:
    """:func:`mean_of_cases` of per-trial values given by case, plus ``n``, the values used.

    ``None`` values are missing evidence and are left out, never counted as zero; a case with
    no value is left out.
    """
    means: list[float] = []
    n = 0
    for case_id, values in values_by_case.items():
        summed = case_sum(values, case_id)
        if summed is not None:
            means.append(summed[0] / summed[1])
            n += summed[1]
    return {**mean_of_cases(means, confidence, bounds), "n": n}


def proportion_of_cases(fractions: Sequence[float], max_n: float,
                        confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The mean of per-case fractions in [0, 1] with an interval that holds near 0 and 1.

    A Wilson score interval on the *effective sample size* n* = p(1−p)/V, where V is the
    variance of the mean over cases (the design effect turns trials that move together into
    fewer independent ones), capped at ``max_n`` (the trials), with the t quantile on G−1
    degrees of freedom. Unlike p ± t·√V it does not shrink to a point when one trial in 150
    fails, and it stays inside [0, 1]. Methods: ``wilson-effective``; ``wilson-cases`` when V is
    0 (every case has the same fraction: each case counts as one observation, the worst case of
    within-case correlation); ``single-case``, with no interval, for one case, whose trials say
    nothing about how cases vary. See docs/statistics.md for the coverage simulation.
    """
    g = len(fractions)
    out: dict[str, Any] = {"estimate": None, "low": None, "high": None, "method": None, "effectiveN": None}
    if g == 0:
        return out
    p = math.fsum(fractions) / g
    out["estimate"] = p
    if g == 1:
        return {**out, "method": "single-case"}
    variance = sample_sd(fractions, p) ** 2 / g
    if variance > 1e-18:
        n_eff, method = min(float(max_n), p * (1.0 - p) / variance), "wilson-effective"
    else:
        n_eff, method = float(g), "wilson-cases"
    low, high = wilson_interval(p * n_eff, n_eff, two_sided_quantile(confidence, g - 1))
    return {**out, "low": low, "high": high, "method": method, "effectiveN": n_eff}
