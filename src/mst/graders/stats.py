"""Small exact statistics for experiment analysis, stdlib only.

Student's t is used rather than the normal approximation because experiments often have few
cases (clusters); its distribution function comes from the regularised incomplete beta function
(continued fraction, Numerical Recipes §6.4), and quantiles from bisection on it, which is
plenty fast for a handful of metrics and deterministic to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_EPS = 1e-15
_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) for a, b > 0 and 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| ≥ |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def t_quantile(p: float, df: float) -> float:
    """The two-sided critical value: t with P(|T| ≥ t) = 1 - p (e.g. p = 0.95)."""
    alpha = 1.0 - p
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > alpha:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its interval (None when it cannot be estimated) and p-value."""

    value: float
    low: float | None
    high: float | None
    p_value: float | None = None


def clustered_mean(by_cluster: Mapping[str, Sequence[float]], confidence: float) -> Estimate:
    """Mean of all observations with a cluster-robust (CR1) standard error.

    Trials of one case are correlated (same task, same difficulty), so treating them as
    independent would overstate precision; the sandwich estimator sums residuals per case and
    uses G - 1 degrees of freedom. Fewer than two cases give no interval.
    """
    values = [v for vs in by_cluster.values() for v in vs]
    n, groups = len(values), len(by_cluster)
    mean = math.fsum(values) / n
    if groups < 2:
        return Estimate(mean, None, None)
    scores = [math.fsum(v - mean for v in vs) for vs in by_cluster.values()]
    variance = groups / (groups - 1) * math.fsum(s * s for s in scores) / (n * n)
    half = t_quantile(confidence, groups - 1) * math.sqrt(variance)
    return Estimate(mean, mean - half, mean + half)


def paired_difference(diffs: Sequence[float], confidence: float) -> Estimate:
    """Mean of per-case differences with a paired t interval and two-sided p-value.

    Identical differences (zero spread) make the test degenerate: the difference is then exact,
    so p is 1 when it is 0 and 0 otherwise. Fewer than two pairs give no interval or p-value.
    """
    m = len(diffs)
    mean = math.fsum(diffs) / m
    if m < 2:
        return Estimate(mean, None, None, None)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (m - 1))
    if sd == 0.0:
        return Estimate(mean, mean, mean, 1.0 if mean == 0.0 else 0.0)
    se = sd / math.sqrt(m)
    half = t_quantile(confidence, m - 1) * se
    return Estimate(mean, mean - half, mean + half, t_two_sided_p(mean / se, m - 1))
