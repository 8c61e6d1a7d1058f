"""Student's t, Wilson, and means clustered or paired by case, with honest intervals.

Used by the run summary (pass rates, grader means) and by experiment analysis (paired
differences between variants). Stdlib only, no mst imports, pure functions, so any layer may
use it — the graders package included — without depending on another engine module.

Why clustered: the trials of one case are not independent (a hard case fails in all its
trials), so every interval here treats the *case* as the unit of sampling: the cluster-robust
(CR1) variance with a t quantile on G−1 degrees of freedom. Missing values (``None``) are
missing evidence: left out, never counted as zero.

The t distribution's CDF comes from the regularized incomplete beta function (Lentz's continued
fraction) to avoid a scipy dependency for a few functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Final

CONFIDENCE: Final = 0.95
Z95: Final = NormalDist().inv_cdf(0.975)


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
# Means clustered by case, and case-paired differences


def _finite(value: float, where: str) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{where}: values must be finite numbers, got {value!r}")
    return v


def clustered_mean(
    values_by_case: Mapping[str, Sequence[float | None]], confidence: float = CONFIDENCE
) -> dict[str, Any]:
    """Mean of per-trial values with an interval clustered by case (CR1 + t with G−1 df).

    For grader metrics (durations, tool success rates). ``None`` values are missing evidence and
    are left out, never counted as zero. With fewer than two cases the interval is unavailable
    (``None``); when every case has the same mean it is the point itself, since no general
    fallback like Wilson's exists for unbounded values.
    """
    sums: list[float] = []
    counts: list[int] = []
    for case_id, values in values_by_case.items():
        case = case_sum(values, case_id)
        if case is not None:
            sums.append(case[0])
            counts.append(case[1])
    return clustered_mean_of_sums(sums, counts, confidence)


def case_sum(values: Iterable[float | None], where: str) -> tuple[float, int] | None:
    """One case's (sum, count) of its present values, None when it has none: all that
    :func:`clustered_mean_of_sums` needs of a case, so a caller may keep just that."""
    present = [_finite(v, where) for v in values if v is not None]
    return (math.fsum(present), len(present)) if present else None


def clustered_mean_of_sums(sums: Sequence[float], counts: Sequence[int],
                           confidence: float = CONFIDENCE) -> dict[str, Any]:
    """:func:`clustered_mean` from each case's (sum, count) of present values."""
    g = len(sums)
    total = int(sum(counts))
    if g == 0:
        return {"mean": None, "low": None, "high": None, "cases": 0, "n": 0}
    mean = math.fsum(sums) / total
    if g < 2:
        return {"mean": mean, "low": None, "high": None, "cases": g, "n": total}
    ss = math.fsum((s - mean * n) ** 2 for s, n in zip(sums, counts, strict=True))
    se = math.sqrt(g / (g - 1) * ss) / total
    half = t_quantile(0.5 + confidence / 2, g - 1) * se
    return {"mean": mean, "low": mean - half, "high": mean + half, "cases": g, "n": total}


def _case_value(value: float | Sequence[float | None] | None, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return _finite(value, where)
    present = [_finite(v, where) for v in value if v is not None]
    return math.fsum(present) / len(present) if present else None


def paired_difference(
    a_by_case: Mapping[str, float | Sequence[float | None] | None],
    b_by_case: Mapping[str, float | Sequence[float | None] | None],
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """Mean of case-level differences a − b over the cases both sides have, with a paired t test.

    A case's value is the number given, or the mean of the trial values given. Returns
    ``{mean, low, high, p, cases, df}``; ``low``/``high``/``p`` are ``None`` with fewer than two
    cases. The p-value is two-sided. With zero spread the interval is the point and p is 1 for
    a zero mean and 0 otherwise (the t statistic is then 0 or infinite).
    """
    diffs: list[float] = []
    for case_id, a_raw in a_by_case.items():
        if case_id not in b_by_case:
            continue
        a, b = _case_value(a_raw, case_id), _case_value(b_by_case[case_id], case_id)
        if a is not None and b is not None:
            diffs.append(a - b)
    n = len(diffs)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "p": None, "cases": 0, "df": None}
    mean = math.fsum(diffs) / n
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "p": None, "cases": 1, "df": None}
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    df = n - 1
    if se == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        return {"mean": mean, "low": mean, "high": mean, "p": p, "cases": n, "df": df}
    t = mean / se
    p = min(1.0, 2.0 * t_cdf(-abs(t), df))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return {"mean": mean, "low": mean - half, "high": mean + half, "p": p, "cases": n, "df": df}
