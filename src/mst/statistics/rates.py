"""Pass rates, pass@k and comparisons with honest intervals: pure functions, no I/O, O(n).

Why clustered: the trials of one case are not independent — a hard case fails in all its
trials — so treating N trials as N independent draws overstates precision by up to the number
of trials per case. Every interval here treats the *case* as the unit of sampling.

**Trial pass rate** (``pass_rate``): the ratio estimator p = Σcᵢ / Σnᵢ over complete cases
(cᵢ passes of nᵢ trials in case i) with the cluster-robust (CR1) variance

    V = G/(G−1) · Σ (cᵢ − p·nᵢ)² / (Σnᵢ)²

and a t interval with G−1 degrees of freedom (G = number of cases): the G/(G−1) factor and the
t quantile are the usual small-sample corrections. When V is 0 (every case has the same pass
fraction — typically all trials pass, or all fail) or G < 2, the sandwich interval collapses to
a point, which is never honest. Then we fall back to a **Wilson score interval with the number
of cases as the sample size**: treating each case as one observation is the worst case of
within-case correlation, so the interval is conservative, and Wilson behaves well at 0 and 1.
The method used is reported with the interval.

**Incomplete cases** (short of a trial, or with an ungraded trial) are neither passed nor
failed and are left out of every rate (docs/endings.md, "Incomplete cases").

The t distribution and the clustered and paired estimators live in :mod:`mst.statistics.intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mst.statistics.intervals import CONFIDENCE, t_quantile, wilson_interval

CaseStatus = Literal["passed", "failed", "incomplete"]


class _HasAtLeast(Protocol):
    @property
    def atLeast(self) -> float: ...  # the eval file's field name


CasePassRule = str | Mapping[str, float] | _HasAtLeast
"""``"all"`` (default), ``"any"``, ``"majority"``, or ``{"atLeast": f}`` (or the config model)."""


# ---------------------------------------------------------------------------------------------
# Case status


def _at_least(rule: CasePassRule) -> float | None:
    if isinstance(rule, str):
        return None
    value = rule.get("atLeast") if isinstance(rule, Mapping) else rule.atLeast
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"casePass atLeast must be a fraction in [0, 1], got {value!r}")
    return float(value)


def case_passes(passed: int, trials: int, rule: CasePassRule = "all") -> bool:
    """Whether a complete case with ``passed`` of ``trials`` trials passing passes under ``rule``.

    ``all``: every trial passes. ``any``: at least one. ``majority``: more than half (a split
    is not a majority). ``{atLeast: f}``: at least the fraction f of the trials.
    """
    if trials <= 0:
        raise ValueError("a complete case has at least one trial")
    fraction = _at_least(rule)
    if fraction is not None:
        return passed >= fraction * trials - 1e-9
    if rule == "all":
        return passed == trials
    if rule == "any":
        return passed >= 1
    if rule == "majority":
        return 2 * passed > trials
    raise ValueError(f"unknown casePass rule {rule!r}; expected all, any, majority or {{atLeast: f}}")


def case_status(
    passes: Sequence[bool | None], expected_trials: int, rule: CasePassRule = "all"
) -> CaseStatus:
    """``incomplete`` when short of a trial or a trial is ungraded (``None``); else by ``rule``.

    ``passes`` holds one entry per *trial* the case has (infrastructure failures are not trials
    and are not in it).
    """
    if len(passes) < expected_trials or len(passes) == 0 or any(p is None for p in passes):
        return "incomplete"
    return "passed" if case_passes(sum(1 for p in passes if p), len(passes), rule) else "failed"


# ---------------------------------------------------------------------------------------------
# Pass rate, pass@k, pass^k


def pass_rate(counts: Iterable[tuple[int, int]]) -> dict[str, Any]:
    """Trial pass rate over cases given as (passed, trials), with a case-clustered 95% interval.

    Returns ``{estimate, low, high, method, cases, trials}``; all ``None`` without a case.
    ``method`` is ``"cluster-t"`` or ``"wilson-cases"`` (see the module docstring).
    """
    pairs = [(c, n) for c, n in counts if n > 0]
    g = len(pairs)
    total = sum(n for _, n in pairs)
    if g == 0:
        return {"estimate": None, "low": None, "high": None, "method": None, "cases": 0, "trials": 0}
    successes = sum(c for c, _ in pairs)
    p = successes / total
    variance = 0.0
    if g >= 2:
        ss = math.fsum((c - p * n) ** 2 for c, n in pairs)
        variance = g / (g - 1) * ss / (total * total)
    if variance > 1e-18:
        half = t_quantile(0.5 + CONFIDENCE / 2, g - 1) * math.sqrt(variance)
        low, high, method = max(0.0, p - half), min(1.0, p + half), "cluster-t"
    else:
        low, high = wilson_interval(p * g, g)
        method = "wilson-cases"
    return {"estimate": p, "low": low, "high": high, "method": method, "cases": g, "trials": total}


def pass_at_k_curve(n: int, c: int, k_max: int) -> tuple[list[float], list[float]]:
    """Unbiased pass@k = 1 − C(n−c,k)/C(n,k) and pass^k = C(c,k)/C(n,k) for k = 1..k_max.

    Computed as running products (O(k_max), no big binomials): C(n−c,k)/C(n,k) =
    Π_{i<k} (n−c−i)/(n−i) and C(c,k)/C(n,k) = Π_{i<k} (c−i)/(n−i).
    """
    if not 0 <= c <= n or k_max > n:
        raise ValueError(f"need 0 ≤ c ≤ n and k ≤ n (n={n}, c={c}, k={k_max})")
    at, hat = [], []
    none_pass, all_pass = 1.0, 1.0
    for i in range(k_max):
        none_pass *= max(n - c - i, 0) / (n - i)
        all_pass *= max(c - i, 0) / (n - i)
        at.append(1.0 - none_pass)
        hat.append(all_pass)
    return at, hat


def pass_at_k(n: int, c: int, k: int) -> float:
    return pass_at_k_curve(n, c, k)[0][-1]


def pass_hat_k(n: int, c: int, k: int) -> float:
    return pass_at_k_curve(n, c, k)[1][-1]


@dataclass(frozen=True, slots=True)
class CaseTrials:
    """One case of one variant: the trials it declares and each trial's grading outcome.

    ``passes`` has one entry per trial the case has (not infrastructure failures): ``True``,
    ``False``, or ``None`` while the trial is ungraded.
    """

    expected: int
    passes: Sequence[bool | None]


def case_row(ct: CaseTrials, rule: CasePassRule = "all") -> dict[str, Any]:
    """One case of one variant as the summary lists it: ``{status, expected, trials, graded,
    passed, passRate}``."""
    graded = [p for p in ct.passes if p is not None]
    passed = sum(1 for p in graded if p)
    return {"status": case_status(ct.passes, ct.expected, rule), "expected": ct.expected, "trials": len(ct.passes),
            "graded": len(graded), "passed": passed, "passRate": passed / len(graded) if graded else None}


def variant_stats(cases: Mapping[str, CaseTrials], rule: CasePassRule = "all") -> dict[str, Any]:
    """Everything the summary reports for one variant, JSON-ready.

    ``{cases: {total, passed, failed, incomplete}, passRate: {…pass_rate}, casePassRate:
    {estimate, low, high, cases} (Wilson; cases are independent), passAtK: {"1": …},
    passHatK: {"1": …}}``. Each case's own row is :func:`case_row`, made when it is written.
    pass@k and pass^k average over complete cases for k = 1..(fewest trials of a complete case).
    """
    complete: list[tuple[int, int]] = []
    counts = {"passed": 0, "failed": 0, "incomplete": 0}
    for ct in cases.values():
        status = case_status(ct.passes, ct.expected, rule)
        counts[status] += 1
        if status != "incomplete":
            complete.append((sum(1 for p in ct.passes if p), len(ct.passes)))
    at_k: dict[str, float] = {}
    hat_k: dict[str, float] = {}
    if complete:
        k_max = min(n for _, n in complete)
        sum_at, sum_hat = [0.0] * k_max, [0.0] * k_max
        for c, n in complete:
            at, hat = pass_at_k_curve(n, c, k_max)
            for i in range(k_max):
                sum_at[i] += at[i]
                sum_hat[i] += hat[i]
        at_k = {str(k + 1): sum_at[k] / len(complete) for k in range(k_max)}
        hat_k = {str(k + 1): sum_hat[k] / len(complete) for k in range(k_max)}
    decided = counts["passed"] + counts["failed"]
    case_rate: dict[str, Any] = {"estimate": None, "low": None, "high": None, "cases": decided}
    if decided:
        low, high = wilson_interval(counts["passed"], decided)
        case_rate.update(estimate=counts["passed"] / decided, low=low, high=high)
    return {
        "cases": {"total": len(cases), **counts},
        "passRate": pass_rate(complete),
        "casePassRate": case_rate,
        "passAtK": at_k,
        "passHatK": hat_k,
    }


def preference_counts(preferences: Iterable[str | None]) -> dict[str, Any]:
    """Tally case preferences (``candidate``/``baseline``/``tie``; ``None`` = not compared).

    ``p`` is a two-sided exact sign test of wins against losses (ties left out), so a report
    can say whether the candidate's edge over the baseline is more than chance.
    """
    wins = ties = losses = missing = 0
    for pref in preferences:
        if pref == "candidate":
            wins += 1
        elif pref == "baseline":
            losses += 1
        elif pref == "tie":
            ties += 1
        else:
            missing += 1
    decided = wins + losses
    p: float | None = None
    if decided:
        k = min(wins, losses)
        # P(X ≤ k) for X ~ Binomial(decided, 1/2), in log space to stay O(decided) and exact enough.
        log_half = decided * math.log(0.5)
        tail = math.fsum(
            math.exp(math.lgamma(decided + 1) - math.lgamma(i + 1) - math.lgamma(decided - i + 1) + log_half)
            for i in range(k + 1)
        )
        p = min(1.0, 2.0 * tail)
    return {"wins": wins, "ties": ties, "losses": losses, "notCompared": missing, "p": p}
