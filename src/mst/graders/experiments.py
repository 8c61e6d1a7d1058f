"""Grader-backed experiment metrics (docs/graders.md, "Replay"): reference validation and analysis.

Variants are the experiment's arms and the baseline variant is the control. Only valid numeric
results count: a missing, unavailable or errored result is excluded (and counted as excluded),
never treated as zero, because a zero would claim a measurement that was never made. Trials of
an incomplete case are left out too (and counted), as they are from pass rates.

Every mean weighs each case once (the mean of its trials), and the difference is the mean of
per-case differences over the cases both arms have, so the paired means and their difference
never disagree in sign. The minimum sample counts cases, the unit of independence
(docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mst.graders.config import ID_PATTERN, GradersConfig
from mst.statistics import MIN_CASES, NO_BOUNDS, Bounds, clustered_mean, decide, paired_difference

DEFAULT_MIN_SAMPLES: Final = MIN_CASES  # cases, not trials
_VALID_STATUSES: Final = frozenset({"pass", "fail"})


def parse_metric_ref(ref: Any) -> str | None:
    """The grader id in ``grader:<id>`` or ``graders.<id>.value``; None when not a grader ref."""
    if not isinstance(ref, str):
        return None
    if ref.startswith("grader:"):
        gid = ref[len("grader:") :]
    elif ref.startswith("graders.") and ref.endswith(".value"):
        gid = ref[len("graders.") : -len(".value")]
    else:
        return None
    return gid if ID_PATTERN.match(gid) else None


def validate_metric_refs(refs: Iterable[Any], config: GradersConfig) -> list[str]:
    """Errors for references that are empty, malformed, unknown or disabled (defaults that were
    enabled automatically count as enabled)."""
    errors: list[str] = []
    for i, ref in enumerate(refs):
        if not isinstance(ref, str) or not ref.strip():
            errors.append(f"metrics[{i}]: empty metric reference")
            continue
        gid = parse_metric_ref(ref)
        if gid is None:
            errors.append(f"metrics[{i}]: {ref!r} is not 'grader:<id>' or 'graders.<id>.value'")
        elif gid in config.enabled_ids:
            continue
        elif config.get(gid) is not None:
            errors.append(f"metrics[{i}]: grader '{gid}' is disabled")
        else:
            errors.append(f"metrics[{i}]: unknown grader '{gid}'")
    return errors


@dataclass(frozen=True, slots=True)
class Observation:
    """One trial's grader results (the ``results`` list of a ``grader_results.json``)."""

    variant: str
    case: str
    trial: str
    results: Sequence[Mapping[str, Any]]


def valid_value(result: Mapping[str, Any]) -> float | None:
    """A result's value when it is a real measurement (status pass/fail, finite number)."""
    value = result.get("value")
    if result.get("status") not in _VALID_STATUSES or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _interval(est: Mapping[str, Any] | None) -> list[float] | None:
    if est is None or est.get("low") is None or est.get("high") is None:
        return None
    return [est["low"], est["high"]]


@dataclass
class _Arm:
    by_case: dict[str, list[float]]
    excluded: int = 0
    incomplete: int = 0


def _collect(observations: Sequence[Observation], metric: str, variants: Sequence[str],
             incomplete: Collection[tuple[str, str]]) -> dict[str, _Arm]:
    arms = {v: _Arm({}) for v in variants}
    for obs in observations:
        arm = arms.get(obs.variant)
        if arm is None:
            continue
        if (obs.variant, obs.case) in incomplete:
            arm.incomplete += 1
            continue
        value = next((valid_value(r) for r in obs.results if r.get("id") == metric), None)
        if value is None:
            arm.excluded += 1
        else:
            arm.by_case.setdefault(obs.case, []).append(value)
    return arms


def _metric_info(observations: Sequence[Observation], metric: str) -> tuple[str, str]:
    """(direction, unit) from the first result of the metric; default higher / ''."""
    for obs in observations:
        for r in obs.results:
            if r.get("id") == metric:
                direction = r.get("direction")
                return (
                    "lower" if direction in ("lower", "lower_is_better") else "higher",
                    str(r.get("unit", "")),
                )
    return "higher", ""


@dataclass(frozen=True, slots=True)
class _Options:
    min_cases: int
    confidence: float
    bounds: Bounds


def _arm_row(variant: str, arms: Mapping[str, _Arm], baseline: str, direction: str, opts: _Options) -> dict[str, Any]:
    arm, base = arms[variant], arms[baseline]
    n = sum(len(v) for v in arm.by_case.values())
    mean = clustered_mean(arm.by_case, opts.confidence, opts.bounds) if n else None
    row: dict[str, Any] = {
        "variant": variant,
        "baseline": variant == baseline,
        "n": n,
        "cases": len(arm.by_case),
        "excluded": arm.excluded,
        "excludedIncomplete": arm.incomplete,
        "mean": mean["mean"] if mean else None,
        "interval": _interval(mean),
        "difference": None,
        "decision": "baseline" if variant == baseline else "insufficient",
    }
    if variant == baseline:
        return row
    diff = paired_difference(arm.by_case, base.by_case, opts.confidence, opts.bounds)
    if diff["cases"]:
        row["difference"] = {
            "value": diff["mean"],
            "interval": _interval(diff),
            "pValue": diff["p"],
            "pairedCases": diff["cases"],
            "candidateMean": diff["a"],
            "baselineMean": diff["b"],
        }
    row["decision"], row["reason"] = decide(diff, direction, min_cases=opts.min_cases, alpha=1.0 - opts.confidence)
    return row


def analyze_experiment(
    observations: Iterable[Observation],
    *,
    variants: Sequence[str],
    baseline: str,
    metrics: Sequence[str],
    min_samples: int = DEFAULT_MIN_SAMPLES,
    confidence: float = 0.95,
    incomplete: Collection[tuple[str, str]] = (),
    bounds: Mapping[str, Bounds] | None = None,
) -> dict[str, Any]:
    """Per metric and arm: valid observations, the mean over cases (equal weight per case) with
    its interval, and — against the baseline — the case-paired difference with interval and
    p-value, the paired means it is the difference of, and a decision.

    ``incomplete`` holds the (variant, case) pairs whose case is incomplete: left out and
    counted (``excludedIncomplete``). ``bounds`` gives a metric's declared (min, max): intervals
    stay inside them. The decision (:func:`mst.statistics.decide`) is ``insufficient`` with
    fewer than ``min_samples`` paired *cases* or no spread in the differences; otherwise
    ``better``/``worse`` when the paired difference is significant at ``1 - confidence`` in the
    favourable/unfavourable direction of the metric, else ``inconclusive``. Pure: the same
    observations always give the same analysis.
    """
    if baseline not in variants:
        raise ValueError(f"baseline variant {baseline!r} is not one of the variants")
    obs = list(observations)
    out: list[dict[str, Any]] = []
    for metric in metrics:
        direction, unit = _metric_info(obs, metric)
        arms = _collect(obs, metric, variants, incomplete)
        opts = _Options(min_samples, confidence, (bounds or {}).get(metric, NO_BOUNDS))
        rows = [_arm_row(v, arms, baseline, direction, opts) for v in variants]
        out.append({"id": metric, "ref": f"grader:{metric}", "unit": unit, "direction": direction, "arms": rows})
    return {"baseline": baseline, "minSamples": min_samples, "minSamplesCounts": "cases", "weighting": "case",
            "confidence": confidence, "metrics": out}
