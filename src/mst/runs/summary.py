"""The end of every phase: results.json, comparisons.json, summary.json from the run's records.

One function writes them for `mst run`, `--resume` and `mst grade`, so the files cannot differ
by the path that produced them. Linear in the number of attempts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from mst import endings
from mst.config.resolved import ResolvedEval
from mst.runs.compare import PASS_RATE, PASS_RATE_METRIC, Columns, Metric, compare, metric_mean
from mst.runs.layout import COMPARISONS_SCHEMA, RESULTS_SCHEMA, SUMMARY_SCHEMA
from mst.runs.record_files import write_record_file
from mst.runs.run import Run
from mst.runs.stats import CasePassRule, CaseTrials, case_row, case_status, flip_rate, preference_counts, variant_stats
from mst.statistics import CONFIDENCE, NO_BOUNDS, case_sum


def finalize(run: Run, resolved: ResolvedEval, confidence: float = CONFIDENCE) -> dict[str, Any]:
    # The records as stored, one per line: never the whole list in memory, never encoded again.
    write_record_file(run.paths.results, {"schema": RESULTS_SCHEMA, "run": run.id}, "trials",
                      run.trial_grades.raw_in_key_order())
    comparisons_head = {"schema": COMPARISONS_SCHEMA, "run": run.id,
                        "baseline": resolved.baseline.id if resolved.baseline else None}
    write_record_file(run.paths.comparisons, comparisons_head, "comparisons", run.comparisons.raw_in_key_order())
    summary, rows = summarize(run, resolved, confidence)
    write_record_file(run.paths.summary, summary, "cases", (orjson.dumps(row) for row in rows))
    return summary


def summarize(run: Run, resolved: ResolvedEval, confidence: float = CONFIDENCE
              ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """summary.json without its ``cases`` list, and that list's rows, made one at a time as they
    are written: a run of 10,000 cases never holds 10,000 rows."""
    rule = resolved.config.casePass
    rule_json: Any = rule if isinstance(rule, str) else rule.model_dump()
    by_variant: dict[str, dict[str, CaseTrials]] = {}
    columns: dict[str, Columns] = {}
    variants = []
    for variant in resolved.variants:
        cases, extra, columns[variant.id] = _variant_cases(run, resolved, variant.id, confidence)
        by_variant[variant.id] = cases
        variants.append({"id": variant.id, "baseline": variant.baseline, "client": variant.client,
                         "model": variant.model, **variant_stats(cases, rule_json, confidence), **extra,
                         "pairwise": _pairwise(run, variant.id, resolved, columns, confidence)})
    base = resolved.baseline
    for v in variants:
        v["comparison"] = None if base is None or v["id"] == base.id else compare(
            columns[v["id"]], columns[base.id], metrics_of(columns[v["id"]], resolved), confidence=confidence)
    summary = {
        "schema": SUMMARY_SCHEMA,
        "run": run.id,
        "eval": resolved.config.name,
        "regradeOf": run.meta.get("regradeOf"),
        "phases": run.meta["phases"],
        "casePass": rule_json,
        "confidence": confidence,
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
        for i, case in enumerate(resolved.cases):
            yield {"id": case.id, "trials": case.trials,
                   "variants": {v: {**case_row(cases[case.id], rule_json), **columns[v].row_values(i)}
                                for v, cases in by_variant.items()}}

    return summary, rows()


def metrics_of(columns: Columns, resolved: ResolvedEval) -> list[Metric]:
    """The pass rate, then every grader metric and judge score the variant has, with the
    direction and range the graders declare (judge scores: higher is better, no range)."""
    out = [PASS_RATE_METRIC]
    for ref in columns.values:
        if ref.startswith("grader:"):
            spec = resolved.graders.get(ref[len("grader:"):]) if resolved.graders is not None else None
            out.append(Metric(ref, spec.direction, (spec.min, spec.max)) if spec is not None else Metric(ref))
        elif ref.startswith("judge:"):
            out.append(Metric(ref, "higher", NO_BOUNDS))
    return out


def _variant_cases(run: Run, resolved: ResolvedEval, variant: str, confidence: float
                   ) -> tuple[dict[str, CaseTrials], dict[str, Any], Columns]:
    cases: dict[str, CaseTrials] = {}
    columns = Columns()
    used: Counter[str] = Counter()  # per metric, the trial values of complete cases
    infra: Counter[str] = Counter()
    retryable = 0
    needs_fix: list[dict[str, Any]] = []
    outcomes: Counter[str] = Counter()
    ungraded = 0
    usage: dict[str, float] = defaultdict(float)
    durations: list[float] = []
    rule = resolved.config.casePass
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
            passed = grade.get("passed") if grade and grade.get("status") == "graded" else None
            ungraded += passed is None
            passes.append(passed)
            record = run.attempts[key]
            for name, value in (record.get("usage") or {}).items():
                if isinstance(value, int | float):
                    usage[name] += value
            if isinstance(record.get("durationMs"), int | float):
                durations.append(float(record["durationMs"]))
            for g in (grade or {}).get("graders", []):
                case_values["grader:" + g["id"]].append(g["value"] if g["status"] in ("pass", "fail") else None)
            for verdict in (grade or {}).get("verdicts", []):
                if isinstance(verdict.get("score"), int | float):
                    case_values["judge:" + verdict["judge"]].append(verdict["score"])
        cases[case.id] = trials = CaseTrials(case.trials, tuple(passes))
        rate = _complete_rate(trials, rule)
        columns.add_case(case.id, {PASS_RATE: rate,
                                   **{ref: _case_mean(values, case.id) for ref, values in case_values.items()}})
        for ref, values in case_values.items():
            used[ref] += 0 if rate is None else sum(1 for v in values if v is not None)
    extra = {
        "trials": {"total": sum(outcomes.values()), "ungraded": ungraded, "outcomes": dict(sorted(outcomes.items()))},
        "infrastructure": {"total": sum(infra.values()), "retryable": retryable, "byWhat": dict(sorted(infra.items()))},
        "needsFix": needs_fix,
        "usage": dict(sorted(usage.items())),
        "meanDurationMs": sum(durations) / len(durations) if durations else None,
        "graders": _grader_means(columns, used, resolved, confidence),
    }
    return cases, extra, columns


def _complete_rate(trials: CaseTrials, rule: CasePassRule) -> float | None:
    """The case's trial pass fraction, or None when the case is incomplete (left out of everything)."""
    if case_status(trials.passes, trials.expected, rule) == "incomplete":
        return None
    return sum(1 for p in trials.passes if p) / len(trials.passes)


def _case_mean(values: list[float | None], case_id: str) -> float | None:
    summed = case_sum(values, case_id)
    return None if summed is None else summed[0] / summed[1]


def _grader_means(columns: Columns, used: Mapping[str, int], resolved: ResolvedEval,
                  confidence: float) -> dict[str, Any]:
    """Each grader's mean over the complete cases (equal weight per case), inside its declared
    range; ``n``, the trial values it rests on; how many incomplete cases were left out."""
    left_out = sum(1 for i in range(len(columns.case_ids)) if not columns.complete(i))
    return {m.ref[len("grader:"):]: {**metric_mean(columns, m, confidence), "n": used[m.ref],
                                     "excludedIncomplete": left_out}
            for m in sorted(metrics_of(columns, resolved), key=lambda m: m.ref) if m.ref.startswith("grader:")}


def _pairwise(run: Run, variant: str, resolved: ResolvedEval, columns: Mapping[str, Columns],
              confidence: float) -> dict[str, Any] | None:
    """Preferences of the cases complete on both sides (the others are counted, not compared),
    the win rate, and the judge's flip rate over the pairs it judged in both orders."""
    if resolved.pairwise is None or resolved.baseline is None or variant == resolved.baseline.id:
        return None
    mine, base = columns[variant], columns[resolved.baseline.id]
    prefs: list[str | None] = []
    orders: list[tuple[str, str]] = []
    left_out = 0
    for i, case in enumerate(resolved.cases):
        if (variant, case.id) not in run.comparisons:
            continue
        if not (mine.complete(i) and base.complete(i)):
            left_out += 1
            continue
        record = run.comparisons[(variant, case.id)]
        prefs.append(record.get("preference"))
        orders.extend((p["ab"], p["ba"]) for p in record.get("pairs", ()) if "ab" in p and "ba" in p)
    return {**preference_counts(prefs, confidence), "excludedIncomplete": left_out, "flips": flip_rate(orders)}
