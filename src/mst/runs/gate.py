"""The CI gate: fail when a candidate is significantly worse than the baseline.

``mst gate RUN`` (and ``mst run … --fail-on-regression``) compares every candidate with the
baseline variant — or, with ``--against``, every variant of RUN with a stored run's baseline —
on the pass rate and any listed metric, paired by case (:func:`mst.runs.compare.compare`). The
p-values of all variants × metrics are adjusted together with Holm's method, so adding metrics
or variants does not raise the chance of a false alarm; a check fails only when its adjusted
p-value is below 1 − confidence in the metric's unfavourable direction, and no check decides
without enough cases and a non-zero spread. See docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mst.errors import Problem, UserError
from mst.runs.compare import PASS_RATE, PASS_RATE_METRIC, Columns, Comparison, Metric, MetricComparison, compare
from mst.runs.record_files import read_record_file
from mst.statistics import CONFIDENCE, MIN_CASES, NO_BOUNDS, decide, holm


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run's summary head and each variant's per-case values, read from its summary.json."""

    root: Path
    head: dict[str, Any]
    columns: dict[str, Columns]

    @property
    def baseline(self) -> str | None:
        variants = self.head.get("variants") or []
        marked = [v["id"] for v in variants if v.get("baseline")]
        if marked:
            return str(marked[0])
        return str(variants[0]["id"]) if len(variants) == 1 else None

    def comparisons(self) -> dict[str, Comparison]:
        """Each candidate's recorded comparison with the baseline (summary.json's ``comparison``)."""
        return {str(v["id"]): Comparison.from_json(v["comparison"])
                for v in self.head.get("variants") or [] if v.get("comparison")}

    def metric(self, ref: str, direction: str | None) -> Metric:
        """The metric ``ref`` with the direction and range the run's comparisons recorded."""
        if ref == PASS_RATE:
            return PASS_RATE_METRIC
        for comparison in self.comparisons().values():
            row = comparison.metrics.get(ref)
            if row is not None:
                return Metric(ref, direction or row.direction, row.bounds)
        return Metric(ref, direction or "higher", NO_BOUNDS)

    def spreads(self, ref: str) -> dict[str, tuple[float, int]]:
        """Per candidate, the standard deviation of its per-case differences from the baseline on
        ``ref`` and the cases it rests on: what ``mst plan --from`` plans with. Candidates whose
        comparison has no spread are left out."""
        out: dict[str, tuple[float, int]] = {}
        for variant, comparison in self.comparisons().items():
            row = comparison.metrics.get(ref)
            if row is not None and row.se:
                out[variant] = (row.se * math.sqrt(row.cases), row.cases)
        return out


def read_run(root: Path) -> StoredRun:
    """``root``'s summary.json: its head and every variant's :class:`Columns` (one pass over the rows)."""
    summary = read_record_file(root / "summary.json", "summary.json", "cases")
    variants = [str(v["id"]) for v in summary.head.get("variants") or []]
    columns = {v: Columns() for v in variants}
    for row, _ in summary.records():
        for v in variants:
            columns[v].add_rows_entry(row, v)
    return StoredRun(root, summary.head, columns)


def parse_metric(spec: str) -> tuple[str, str | None]:
    """``REF`` or ``REF:higher`` / ``REF:lower`` (REF: ``passRate``, ``grader:<id>``, ``judge:<id>``)."""
    ref, _, direction = spec.rpartition(":") if spec.endswith((":higher", ":lower")) else (spec, "", "")
    if ref != PASS_RATE and not ref.startswith(("grader:", "judge:")):
        raise UserError(Problem("--metric", f"{spec!r} is not passRate, grader:<id> or judge:<id> "
                                            "(optionally :higher or :lower)"))
    return ref, direction or None


@dataclass(frozen=True, slots=True)
class Check:
    """One variant × metric of the gate."""

    variant: str
    baseline: str
    metric: str
    row: MetricComparison  # the comparison's figures for this metric
    adjusted_p: float | None
    decision: str
    reason: str | None

    @property
    def regression(self) -> bool:
        return self.decision == "worse"


@dataclass(frozen=True, slots=True)
class GateResult:
    run: str
    against: str | None
    confidence: float
    checks: list[Check]

    @property
    def failed(self) -> bool:
        return any(c.regression for c in self.checks)


def gate(run: StoredRun, *, against: StoredRun | None = None, metrics: Sequence[tuple[str, str | None]] = (),
         confidence: float = CONFIDENCE, min_cases: int = MIN_CASES) -> GateResult:
    """Every candidate against the baseline on the pass rate and ``metrics``, Holm-adjusted."""
    base_run = against or run
    baseline = base_run.baseline
    if baseline is None:
        raise UserError(Problem(str(base_run.root / "summary.json"),
                                "no baseline variant to compare with: mark one `baseline: true`, or use --against RUN"))
    candidates = list(run.columns) if against is not None else [v for v in run.columns if v != baseline]
    wanted = [PASS_RATE_METRIC] + [run.metric(ref, d) for ref, d in metrics if ref != PASS_RATE]
    rows: list[tuple[str, str, MetricComparison]] = []
    for variant in candidates:
        result = compare(run.columns[variant], base_run.columns[baseline], wanted, confidence=confidence,
                         min_cases=min_cases)
        for metric in wanted:
            if metric.ref not in result.metrics:
                raise UserError(Problem("--metric", f"{metric.ref} has no values in {variant} and {baseline}"))
            rows.append((variant, metric.ref, result.metrics[metric.ref]))
    adjusted = holm([row.p for _, _, row in rows])
    checks = []
    for (variant, ref, row), p in zip(rows, adjusted, strict=True):
        diff = {"cases": row.cases, "se": row.se, "p": row.p, "mean": row.difference}
        decision, reason = decide(diff, row.direction, min_cases=min_cases, alpha=1.0 - confidence, p=p)
        checks.append(Check(variant, baseline, ref, row, p, decision, reason))
    return GateResult(str(run.head.get("run")), str(against.head.get("run")) if against else None, confidence, checks)
