"""Grader-backed experiment metrics (docs/graders.md, "Replay"): reference validation and analysis.

Variants are the experiment's arms and the baseline variant is the control. Only valid numeric
results count: a missing, unavailable or errored result is excluded (and counted as excluded),
never treated as zero, because a zero would claim a measurement that was never made.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mst.graders.config import ID_PATTERN, GradersConfig
from mst.statistics import clustered_mean, paired_difference

DEFAULT_MIN_SAMPLES: Final = 20
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


def _collect(observations: Sequence[Observation], metric: str, variants: Sequence[str]) -> dict[str, _Arm]:
    arms = {v: _Arm({}) for v in variants}
    for obs in observations:
        arm = arms.get(obs.variant)
        if arm is None:
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


def _decide(diff: Mapping[str, Any] | None, direction: str, enough: bool, alpha: float) -> str:
    if not enough:
        return "insufficient"
    if diff is None or diff.get("p") is None or diff["p"] >= alpha or not diff["mean"]:
        return "inconclusive"
    favourable = diff["mean"] > 0 if direction == "higher" else diff["mean"] < 0
    return "better" if favourable else "worse"


def _arm_row(
    variant: str, arms: Mapping[str, _Arm], baseline: str, direction: str, opts: tuple[int, float]
) -> dict[str, Any]:
    min_samples, confidence = opts
    arm, base = arms[variant], arms[baseline]
    n = sum(len(v) for v in arm.by_case.values())
    mean = clustered_mean(arm.by_case, confidence) if n else None
    row: dict[str, Any] = {
        "variant": variant,
        "baseline": variant == baseline,
        "n": n,
        "cases": len(arm.by_case),
        "excluded": arm.excluded,
        "mean": mean["mean"] if mean else None,
        "interval": _interval(mean),
        "difference": None,
        "decision": "baseline" if variant == baseline else "insufficient",
    }
    if variant == baseline:
        return row
    paired = sorted(set(arm.by_case) & set(base.by_case))
    diff = paired_difference(arm.by_case, base.by_case, confidence) if paired else None
    if diff is not None:
        row["difference"] = {
            "value": diff["mean"],
            "interval": _interval(diff),
            "pValue": diff["p"],
            "pairedCases": diff["cases"],
        }
    base_n = sum(len(v) for v in base.by_case.values())
    row["decision"] = _decide(diff, direction, min(n, base_n) >= min_samples, 1.0 - confidence)
    return row


def analyze_experiment(
    observations: Iterable[Observation],
    *,
    variants: Sequence[str],
    baseline: str,
    metrics: Sequence[str],
    min_samples: int = DEFAULT_MIN_SAMPLES,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per metric and arm: valid observations, the mean with a case-clustered interval, and —
    against the baseline — the case-paired difference with interval and p-value, and a decision.

    The decision is ``insufficient`` while either arm has fewer than ``min_samples`` valid
    observations; otherwise ``better``/``worse`` when the paired difference is significant at
    ``1 - confidence`` in the favourable/unfavourable direction of the metric, else
    ``inconclusive``. Pure: the same observations always give the same analysis.
    """
    if baseline not in variants:
        raise ValueError(f"baseline variant {baseline!r} is not one of the variants")
    obs = list(observations)
    out: list[dict[str, Any]] = []
    for metric in metrics:
        direction, unit = _metric_info(obs, metric)
        arms = _collect(obs, metric, variants)
        rows = [_arm_row(v, arms, baseline, direction, (min_samples, confidence)) for v in variants]
        out.append({"id": metric, "ref": f"grader:{metric}", "unit": unit, "direction": direction, "arms": rows})
    return {"baseline": baseline, "minSamples": min_samples, "confidence": confidence, "metrics": out}
