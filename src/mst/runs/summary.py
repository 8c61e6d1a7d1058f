"""The end of every phase: results.json, comparisons.json, summary.json from the run's records.

One function writes them for `mst run`, `--resume` and `mst grade`, so the files cannot differ
by the path that produced them. Linear in the number of attempts.
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mst import endings
from mst.config.resolved import ResolvedEval
from mst.runs.frozen import JsonView, freeze
from mst.runs.layout import COMPARISONS_SCHEMA, RESULTS_SCHEMA, SUMMARY_SCHEMA
from mst.runs.record_files import write_record_file
from mst.runs.run import Run
from mst.statistics import case_sum, clustered_mean_of_sums
from mst.statistics.rates import CaseTrials, case_row, preference_counts, variant_stats


@dataclass(frozen=True, slots=True)
class Totals:
    attempts: int
    trials: int
    infrastructure_failures: int
    cases: int
    incomplete_cases: int

    def to_json(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "trials": self.trials,
                "infrastructureFailures": self.infrastructure_failures, "cases": self.cases,
                "incompleteCases": self.incomplete_cases}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Totals:
        return cls(int(data["attempts"]), int(data["trials"]), int(data["infrastructureFailures"]),
                   int(data["cases"]), int(data["incompleteCases"]))


@dataclass(frozen=True, slots=True)
class VariantSummary(JsonView):
    """One variant's figures; ``figures`` holds the statistics (pass rates with their intervals,
    pass@k, trials, infrastructure failures, usage, graders, pairwise) as read-only JSON."""

    id: str
    baseline: bool
    client: str
    model: str | None
    figures: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "baseline": self.baseline, "client": self.client, "model": self.model,
                **_thaw(self.figures)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantSummary:
        figures = {k: v for k, v in data.items() if k not in ("id", "baseline", "client", "model")}
        return cls(str(data["id"]), bool(data.get("baseline")), str(data.get("client", "")), data.get("model"),
                   freeze(figures))


@dataclass(frozen=True, slots=True)
class Summary(JsonView):
    """summary.json without its per-case rows (those are written one at a time, never held)."""

    run: str
    eval: str
    regrade_of: str | None
    phases: Mapping[str, str]
    case_pass: Any
    totals: Totals
    variants: tuple[VariantSummary, ...]
    schema: str = SUMMARY_SCHEMA

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, "run": self.run, "eval": self.eval, "regradeOf": self.regrade_of,
                "phases": dict(self.phases), "casePass": _thaw(self.case_pass), "totals": self.totals.to_json(),
                "variants": [v.to_json() for v in self.variants]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        return cls(str(data["run"]), str(data["eval"]), data.get("regradeOf"), freeze(dict(data["phases"])),
                   freeze(data.get("casePass")), Totals.from_json(data["totals"]),
                   tuple(VariantSummary.from_json(v) for v in data["variants"]),
                   str(data.get("schema", SUMMARY_SCHEMA)))

    @property
    def complete(self) -> bool:
        """No case is incomplete (short of a trial, or with an ungraded one)."""
        return self.totals.incomplete_cases == 0


def _thaw(value: Any) -> Any:
    """Frozen JSON (see :func:`mst.runs.frozen.freeze`) as plain JSON again, for writing."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def finalize(run: Run, resolved: ResolvedEval) -> Summary:
    # The records as stored, one per line: never the whole list in memory, never encoded again.
    write_record_file(run.paths.results, {"schema": RESULTS_SCHEMA, "run": run.id}, "trials",
                      run.trial_grades.raw_in_key_order())
    comparisons_head = {"schema": COMPARISONS_SCHEMA, "run": run.id,
                        "baseline": resolved.baseline.id if resolved.baseline else None}
    write_record_file(run.paths.comparisons, comparisons_head, "comparisons", run.comparisons.raw_in_key_order())
    summary, rows = summarize(run, resolved)
    write_record_file(run.paths.summary, summary, "cases", (orjson.dumps(row) for row in rows))
    return Summary.from_json(summary)  # decoded once, here


def summarize(run: Run, resolved: ResolvedEval) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """summary.json without its ``cases`` list, and that list's rows, made one at a time as they
    are written: a run of 10,000 cases never holds 10,000 rows."""
    rule = resolved.config.casePass
    rule_json: Any = rule if isinstance(rule, str) else rule.model_dump()
    by_variant: dict[str, dict[str, CaseTrials]] = {}
    variants = []
    for variant in resolved.variants:
        cases, extra = _variant_cases(run, resolved, variant.id)
        by_variant[variant.id] = cases
        variants.append({"id": variant.id, "baseline": variant.baseline, "client": variant.client,
                         "model": variant.model, **variant_stats(cases, rule_json), **extra,
                         "pairwise": _pairwise(run, variant.id, resolved)})
    summary = {
        "schema": SUMMARY_SCHEMA,
        "run": run.id,
        "eval": resolved.config.name,
        "regradeOf": run.meta.regrade_of,
        "phases": run.meta.to_json()["phases"],
        "casePass": rule_json,
        "totals": {
            "attempts": len(run.attempts),
            "trials": sum(1 for k in run.attempts if endings.is_trial(run.ending(k))),
            "infrastructureFailures": sum(v["infrastructure"]["total"] for v in variants),
            "cases": len(resolved.cases),
            "incompleteCases": sum(v["cases"]["incomplete"] for v in variants),
        },
        "variants": variants,
    }

    def rows() -> Iterator[dict[str, Any]]:
        for case in resolved.cases:
            yield {"id": case.id, "trials": case.trials,
                   "variants": {v: case_row(cases[case.id], rule_json) for v, cases in by_variant.items()}}

    return summary, rows()


def _variant_cases(run: Run, resolved: ResolvedEval, variant: str) -> tuple[dict[str, CaseTrials], dict[str, Any]]:
    cases: dict[str, CaseTrials] = {}
    infra: Counter[str] = Counter()
    retryable = 0
    needs_fix: list[dict[str, Any]] = []
    outcomes: Counter[str] = Counter()
    ungraded = 0
    usage: dict[str, float] = defaultdict(float)
    durations: list[float] = []
    # Per grader, each case's (sum, count) in two arrays: memory of 16 bytes a case, not a list of trial values.
    graders: dict[str, tuple[array[float], array[int]]] = defaultdict(lambda: (array("d"), array("q")))
    for case in resolved.cases:
        passes: list[bool | None] = []
        case_values: dict[str, list[float | None]] = defaultdict(list)
        for trial in range(case.trials):
            key = (variant, case.id, trial)
            if key not in run.attempts:
                continue
            ending = run.ending(key)
            if isinstance(ending, endings.Infrastructure):
                infra[ending.what] += 1
                retryable += ending.retryable
                if not ending.retryable:
                    needs_fix.append({"case": case.id, "trial": trial, "what": ending.what, "why": ending.why})
                continue
            outcomes[ending.outcome] += 1
            grade = run.trial_grades.get(key)
            passed = grade.passed if grade is not None else None
            ungraded += passed is None
            passes.append(passed)
            record = run.attempts[key]
            for name, value in record.usage.items():
                if isinstance(value, int | float):
                    usage[name] += value
            if isinstance(record.duration_ms, int | float):
                durations.append(float(record.duration_ms))
            for g in (grade.graders or ()) if grade is not None else ():
                case_values[g.id].append(g.value if g.measured else None)
        for grader_id, values in case_values.items():
            sums, counts = graders[grader_id]  # listed even when no case has a value
            summed = case_sum(values, case.id)
            if summed is not None:
                sums.append(summed[0])
                counts.append(summed[1])
        cases[case.id] = CaseTrials(case.trials, tuple(passes))
    extra = {
        "trials": {"total": sum(outcomes.values()), "ungraded": ungraded, "outcomes": dict(sorted(outcomes.items()))},
        "infrastructure": {"total": sum(infra.values()), "retryable": retryable, "byWhat": dict(sorted(infra.items()))},
        "needsFix": needs_fix,
        "usage": dict(sorted(usage.items())),
        "meanDurationMs": sum(durations) / len(durations) if durations else None,
        "graders": {gid: clustered_mean_of_sums(*by_case) for gid, by_case in sorted(graders.items())},
    }
    return cases, extra


def _pairwise(run: Run, variant: str, resolved: ResolvedEval) -> dict[str, Any] | None:
    if resolved.pairwise is None or resolved.baseline is None or variant == resolved.baseline.id:
        return None
    prefs = [run.comparisons[(variant, c.id)].preference
             for c in resolved.cases if (variant, c.id) in run.comparisons]
    return preference_counts(prefs)

