"""Pass rates, pass@k and comparisons with honest intervals: pure functions, no I/O, O(n).

Why clustered: the trials of one case are not independent — a hard case fails in all its
trials — so treating N trials as N independent draws overstates precision by up to the number
of trials per case. Every interval here treats the *case* as the unit of sampling.

**Trial pass rate** (``pass_rate``): the mean over complete cases of each case's fraction of
passing trials, every case weighing the same (so it equals pass@1, and a paired difference of
pass rates is the difference of these means). Its interval is a Wilson score interval on the
effective sample size from the design effect (:func:`mst.statistics.intervals.proportion_of_cases`): it
holds its coverage near 0% and 100%, where p ± t·SE does not. With one case there is no
interval (``method: single-case``). See docs/statistics.md.

**Incomplete cases** (short of a trial, or with an ungraded trial) are neither passed nor
failed and are left out of every rate and mean (docs/endings.md, "Incomplete cases";
docs/statistics.md).

The t distribution and the case means live in :mod:`mst.statistics.intervals`, the paired
estimators and the sign test in :mod:`mst.statistics.paired`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import truediv
from typing import Any, Literal, Protocol

from mst.statistics.intervals import CONFIDENCE, proportion_of_cases, wilson_interval
from mst.statistics.paired import sign_test

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


def pass_rate(counts: Iterable[tuple[int, int]], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Trial pass rate over cases given as (passed, trials), equal weight per case, with an
    interval that holds near the bounds.

    Returns ``{estimate, low, high, method, effectiveN, weighting, cases, trials}``; the
    figures are ``None`` without a case. ``method`` is ``wilson-effective``, ``wilson-cases`` or
    ``single-case`` (see :func:`mst.statistics.intervals.proportion_of_cases`).
    """
    passed, trials = array("q"), array("q")
    for c, n in counts:
        if n > 0:
            passed.append(c)
            trials.append(n)
    return _pass_rate(passed, trials, confidence)


def _pass_rate(passed: array[int], trials: array[int], confidence: float) -> dict[str, Any]:
    """:func:`pass_rate` of cases given as two aligned arrays (no trial count 0): 16 bytes a
    case, and 8 for its fraction, where tuples and a list of floats cost ~100 (issue 16)."""
    total = sum(trials)
    rate = proportion_of_cases(array("d", map(truediv, passed, trials)), total, confidence)
    return {**rate, "weighting": "case", "cases": len(trials), "trials": total}


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


_SEEN = 4096  # distinct CaseTrials whose figures variant_stats keeps while it walks the cases


def variant_stats(cases: Mapping[str, CaseTrials] | Sequence[CaseTrials], rule: CasePassRule = "all",
                  confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Everything the summary reports for one variant, JSON-ready.

    ``{cases: {total, passed, failed, incomplete}, passRate: {…pass_rate}, casePassRate:
    {estimate, low, high, cases} (Wilson; cases are independent), passAtK: {"1": …},
    passHatK: {"1": …}}``. Each case's own row is :func:`case_row`, made when it is written.
    pass@k and pass^k average over complete cases for k = 1..(fewest trials of a complete case).
    """
    passed, trials = array("q"), array("q")  # of the complete cases, in case order
    counts = {"passed": 0, "failed": 0, "incomplete": 0}
    # Most cases of a run share one of a few CaseTrials objects (the summary's): each one's
    # status and counts are worked out once, by identity (the objects outlive the loop), for at
    # most _SEEN of them, so the loop holds no more per case.
    seen: dict[int, tuple[CaseStatus, int, int]] = {}
    for ct in cases.values() if isinstance(cases, Mapping) else cases:  # by case id, or in case order
        known = seen.get(id(ct))
        if known is None:
            known = (case_status(ct.passes, ct.expected, rule), sum(1 for p in ct.passes if p), len(ct.passes))
            if len(seen) < _SEEN:
                seen[id(ct)] = known
        status = known[0]
        counts[status] += 1
        if status != "incomplete":
            passed.append(known[1])
            trials.append(known[2])
    at_k, hat_k = _pass_at_k_means(passed, trials)
    decided = counts["passed"] + counts["failed"]
    case_rate: dict[str, Any] = {"estimate": None, "low": None, "high": None, "cases": decided}
    if decided:
        from statistics import NormalDist  # imported here: see Z95 in mst.statistics.intervals

        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        low, high = wilson_interval(counts["passed"], decided, z)
        case_rate.update(estimate=counts["passed"] / decided, low=low, high=high)
    return {
        "cases": {"total": len(cases), **counts},
        "passRate": _pass_rate(passed, trials, confidence),
        "casePassRate": case_rate,
        "passAtK": at_k,
        "passHatK": hat_k,
    }


def _pass_at_k_means(passed: array[int], trials: array[int]) -> tuple[dict[str, float], dict[str, float]]:
    """pass@k and pass^k averaged over the complete cases, for k = 1..(fewest trials of one).
    The sums go in case order (as they always have, so the figures do not move); each distinct
    (trials, passed) curve is computed once."""
    if not trials:
        return {}, {}
    k_max = min(trials)
    sum_at, sum_hat = [0.0] * k_max, [0.0] * k_max
    curves: dict[tuple[int, int], tuple[list[float], list[float]]] = {}
    for c, n in zip(passed, trials, strict=True):
        curve = curves.get((n, c))
        if curve is None:
            curve = curves[(n, c)] = pass_at_k_curve(n, c, k_max)
        at, hat = curve
        for i in range(k_max):
            sum_at[i] += at[i]
            sum_hat[i] += hat[i]
    cases = len(trials)
    return ({str(k + 1): sum_at[k] / cases for k in range(k_max)},
            {str(k + 1): sum_hat[k] / cases for k in range(k_max)})


_SCORE: dict[str | None, float] = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}


def preference_counts(preferences: Iterable[str | None], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Tally case preferences (``candidate``/``baseline``/``tie``; ``None`` = not compared).

    ``p`` is a two-sided exact sign test of wins against losses (ties left out), so a report
    can say whether the candidate's edge over the baseline is more than chance. ``winRate`` is
    the share of compared cases the candidate won, a tie counting half, with an interval on the
    cases (:func:`mst.statistics.intervals.proportion_of_cases`, each case one unit).
    """
    given = list(preferences)
    scores = [_SCORE[p] for p in given if p in _SCORE]
    wins = sum(1 for s in scores if s == 1.0)
    losses = sum(1 for s in scores if s == 0.0)
    ties = len(scores) - wins - losses
    missing = len(given) - len(scores)
    rate = proportion_of_cases(scores, len(scores), confidence)
    return {"wins": wins, "ties": ties, "losses": losses, "notCompared": missing, "p": sign_test(wins, losses),
            "winRate": {k: rate[k] for k in ("estimate", "low", "high", "method")}}


def flip_rate(orders: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """How often a pair's preference changed with the order it was shown in: a judge's
    position bias. ``orders`` holds each judged pair's (A/B, B/A) preference, both expressed as
    the side preferred (``candidate``/``baseline``/``tie``); a pair flips when they differ."""
    pairs = flips = 0
    for ab, ba in orders:
        pairs += 1
        flips += ab != ba
    return {"pairs": pairs, "flips": flips, "rate": flips / pairs if pairs else None}
