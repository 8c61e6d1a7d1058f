"""The end of every phase: results.json, comparisons.json, summary.json from the run's records.

One function writes them for `mst run`, `--resume` and `mst grade`, so the files cannot differ
by the path that produced them. Linear in the number of attempts.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mst import endings
from mst.config.resolved import ResolvedEval
from mst.runs.attempts import duration_of, usage_of
from mst.runs.compare import PASS_RATE, PASS_RATE_METRIC, Columns, Comparison, Metric, compare, metric_mean
from mst.runs.frozen import JsonView, freeze
from mst.runs.grading_records import MEASURED, VerdictRecord, trial_passed
from mst.runs.judge_summary import JudgeTally, total
from mst.runs.layout import COMPARISONS_SCHEMA, RESULTS_SCHEMA, SUMMARY_SCHEMA
from mst.runs.record_files import write_record_file
from mst.runs.run import Run
from mst.statistics import CONFIDENCE, NO_BOUNDS, case_sum
from mst.statistics.intervals import finite
from mst.statistics.rates import (
    CasePassRule,
    CaseTrials,
    case_row,
    case_status,
    flip_rate,
    preference_counts,
    variant_stats,
)


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
    pass@k, trials, infrastructure failures, usage, graders, pairwise) as read-only JSON;
    ``comparison`` the candidate against the baseline, paired by case (None, and no key in the
    file, for the baseline and in a run without one; docs/statistics.md)."""

    id: str
    baseline: bool
    client: str
    model: str | None
    figures: Mapping[str, Any]
    comparison: Comparison | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, "baseline": self.baseline, "client": self.client, "model": self.model,
               **_thaw(self.figures)}
        if self.comparison is not None:
            out["comparison"] = self.comparison.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantSummary:
        figures = {k: v for k, v in data.items() if k not in ("id", "baseline", "client", "model", "comparison")}
        comparison = Comparison.from_json(data["comparison"]) if data.get("comparison") else None
        return cls(str(data["id"]), bool(data.get("baseline")), str(data.get("client", "")), data.get("model"),
                   freeze(figures), comparison)


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
    confidence: float | None = None  # the level of every interval and test in it (None: not recorded, 0.95)
    schema: str = SUMMARY_SCHEMA
    judge_usage: Mapping[str, Any] | None = None  # every judge call's tokens and cost (None: not recorded)

    def to_json(self) -> dict[str, Any]:
        out = {"schema": self.schema, "run": self.run, "eval": self.eval, "regradeOf": self.regrade_of,
               "phases": dict(self.phases), "casePass": _thaw(self.case_pass)}
        if self.confidence is not None:
            out["confidence"] = self.confidence
        out = {**out, "totals": self.totals.to_json(), "variants": [v.to_json() for v in self.variants]}
        if self.judge_usage is not None:
            out["judgeUsage"] = dict(self.judge_usage)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        return cls(str(data["run"]), str(data["eval"]), data.get("regradeOf"), freeze(dict(data["phases"])),
                   freeze(data.get("casePass")), Totals.from_json(data["totals"]),
                   tuple(VariantSummary.from_json(v) for v in data["variants"]),
                   _optional_float(data.get("confidence")), str(data.get("schema", SUMMARY_SCHEMA)),
                   freeze(data["judgeUsage"]) if data.get("judgeUsage") is not None else None)

    @property
    def complete(self) -> bool:
        """No case is incomplete (short of a trial, or with an ungraded one)."""
        return self.totals.incomplete_cases == 0


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _thaw(value: Any) -> Any:
    """Frozen JSON (see :func:`mst.runs.frozen.freeze`) as plain JSON again, for writing."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


_NUMBER = (int, float)  # isinstance's types, made once (``int | float`` makes a union per test)

# Distinct per-case trial outcomes shared (a run of five trials a case has at most 3**5 of
# ``True``/``False``/``None`` per trial count): past this many, cases keep their own.
_SHARED_TRIALS = 4096


def finalize(run: Run, resolved: ResolvedEval, confidence: float = CONFIDENCE,
             on_row: Callable[[dict[str, Any]], None] | None = None) -> Summary:
    """Write results.json, comparisons.json and summary.json; summary.json's head as read. Each
    case row written is also given to ``on_row`` (the report's matrix: it then reads no row back)."""
    # The records as stored, one per line: never the whole list in memory, never encoded again.
    write_record_file(run.paths.results, {"schema": RESULTS_SCHEMA, "run": run.id}, "trials",
                      run.trial_grades.raw_in_key_order())
    comparisons_head = {"schema": COMPARISONS_SCHEMA, "run": run.id,
                        "baseline": resolved.baseline.id if resolved.baseline else None}
    write_record_file(run.paths.comparisons, comparisons_head, "comparisons", run.comparisons.raw_in_key_order())
    summary, rows = summarize(run, resolved, confidence)
    write_record_file(run.paths.summary, summary, "cases", (orjson.dumps(row) for row in _seen(rows, on_row)))
    return Summary.from_json(summary)  # decoded once, here


def _seen(rows: Iterator[dict[str, Any]], on_row: Callable[[dict[str, Any]], None] | None
          ) -> Iterator[dict[str, Any]]:
    """``rows``, each given to ``on_row`` (when there is one) on its way to the file."""
    for row in rows:
        if on_row is not None:
            on_row(row)
        yield row


def summarize(run: Run, resolved: ResolvedEval, confidence: float = CONFIDENCE
              ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """summary.json without its ``cases`` list, and that list's rows, made one at a time as they
    are written: a run of 10,000 cases never holds 10,000 rows."""
    rule = resolved.config.casePass
    rule_json: Any = rule if isinstance(rule, str) else rule.model_dump()
    by_variant: dict[str, list[CaseTrials]] = {}  # aligned with resolved.cases
    columns: dict[str, Columns] = {}
    variants = []
    for variant in resolved.variants:
        tally = JudgeTally()
        cases, extra, columns[variant.id] = _variant_cases(run, resolved, variant.id, confidence, tally)
        by_variant[variant.id] = cases
        variants.append({"id": variant.id, "baseline": variant.baseline, "client": variant.client,
                         "model": variant.model, **variant_stats(cases, rule_json, confidence), **extra,
                         "pairwise": _pairwise(run, variant.id, resolved, columns, confidence, tally),
                         "judges": tally.to_json(confidence), "judgeUsage": tally.usage.to_json()})
    base = resolved.baseline
    for v in variants:
        if base is not None and v["id"] != base.id:
            v["comparison"] = compare(columns[v["id"]], columns[base.id], metrics_of(columns[v["id"]], resolved),
                                      confidence=confidence).to_json()
    summary = {
        "schema": SUMMARY_SCHEMA,
        "run": run.id,
        "eval": resolved.config.name,
        "regradeOf": run.meta.regrade_of,
        "phases": run.meta.head("phases"),  # not to_json(): that decodes every case's part
        "casePass": rule_json,
        "confidence": confidence,
        "totals": {
            "attempts": len(run.attempts),
            "trials": sum(1 for ending in run.attempts.summaries() if endings.is_trial(ending)),
            "infrastructureFailures": sum(v["infrastructure"]["total"] for v in variants),
            "cases": len(resolved.cases),
            "incompleteCases": sum(v["cases"]["incomplete"] for v in variants),
        },
        "variants": variants,
        "judgeUsage": total(v["judgeUsage"] for v in variants),
    }

    def rows() -> Iterator[dict[str, Any]]:
        # A shared CaseTrials' figures made once, by identity (the objects are held in by_variant
        # while the rows are made; hashing a dataclass is a Python call per case and variant).
        made: dict[int, dict[str, Any]] = {}

        def counts(trials: CaseTrials) -> dict[str, Any]:
            row = made.get(id(trials))
            if row is None:
                row = case_row(trials, rule_json)
                if len(made) < _SHARED_TRIALS:
                    made[id(trials)] = row
            return row

        for i, (case_id, expected) in enumerate(resolved.cases.id_trials()):  # no case made per row
            yield {"id": case_id, "trials": expected,
                   "variants": {v: {**counts(cases[i]), **columns[v].row_values(i)} for v, cases in by_variant.items()}}

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


def _variant_cases(run: Run, resolved: ResolvedEval, variant: str, confidence: float, tally: JudgeTally
                   ) -> tuple[list[CaseTrials], dict[str, Any], Columns]:
    """The variant's trials per case (aligned with ``resolved.cases``; equal ones share one
    object: most cases of a big run have the same few), its totals, and its per-case columns."""
    cases: list[CaseTrials] = []
    # Equal trials, one shared object and its pass rate, worked out once (case_status per case
    # cost more than the look-up).
    alike: dict[tuple[int, tuple[bool | None, ...]], tuple[CaseTrials, float | None]] = {}  # by (expected,
    # passes): a tuple's hash and equality are C's, a dataclass's are Python calls
    columns = Columns.over(resolved.cases.ids)  # the eval's ids, held once for every variant
    used: dict[str, int] = {}  # per metric, the trial values of complete cases (a dict: a Counter's += is slower)
    infra: Counter[str] = Counter()
    retryable = 0
    needs_fix: list[dict[str, Any]] = []
    outcomes: dict[str, int] = {}  # plain dicts, not Counter / defaultdict: their += per trial is slower
    ungraded = 0
    usage: dict[str, float] = {}
    durations = array("d")  # 8 bytes per attempt, summed as a list would be
    rule = resolved.config.casePass
    attempts, grades = run.attempts, run.trial_grades
    # One key look-up per trial for both stores when they share their keys (a run's do).
    shared = grades.key_index is attempts.key_index
    verdict_of = VerdictRecord.from_json
    grader_refs: dict[str, str] = {}  # id -> its column's name, made once, not once per trial
    judge_refs: dict[str, str] = {}
    for case_id, expected in resolved.cases.id_trials():  # ids and trials read, no case made per row
        passes: list[bool | None] = []
        case_values: dict[str, list[float | None]] = {}  # column -> the case's trial values
        for trial in range(expected):
            key = (variant, case_id, trial)
            slot = attempts.slot_of(key)
            if not attempts.holds(slot):
                continue
            ending = attempts.summary_at(slot)
            if isinstance(ending, endings.Infrastructure):
                infra[ending.what] += 1
                retryable += ending.retryable
                if not ending.retryable:
                    needs_fix.append({"case": case_id, "trial": trial, "what": ending.what, "why": ending.why})
                continue
            outcomes[ending.outcome] = outcomes.get(ending.outcome, 0) + 1
            # The grading's stored JSON, not a TrialGrading: its verdicts are decoded (as the
            # record's are), its grader values read as they are.
            grade = grades.json_at(slot if shared else grades.slot_of(key))
            verdicts = [verdict_of(v) for v in grade.get("verdicts") or ()] if grade is not None else []
            passed = None if grade is None else trial_passed(bool(grade.get("errors")), verdicts)
            ungraded += passed is None
            passes.append(passed)
            # Its stored JSON too, not an AttemptRecord: two fields are read (its key and
            # ending were checked when it was stored).
            record = attempts.json_at(slot)
            assert record is not None
            for name, value in usage_of(record).items():
                if isinstance(value, _NUMBER):
                    usage[name] = usage.get(name, 0.0) + value
            duration = duration_of(record)
            if duration is not None:
                durations.append(float(duration))
            for g in (grade.get("graders") or ()) if grade is not None else ():
                gid = g["id"]
                ref = grader_refs.get(gid) or grader_refs.setdefault(gid, "grader:" + gid)
                value = g.get("value") if g["status"] in MEASURED else None
                held = case_values.get(ref)
                if held is None:
                    case_values[ref] = [value]
                else:
                    held.append(value)
            for verdict in verdicts:
                tally.add(verdict)
                if verdict.score is not None:
                    name = verdict.judge
                    ref = judge_refs.get(name) or judge_refs.setdefault(name, "judge:" + name)
                    case_values.setdefault(ref, []).append(verdict.score)
        outcome = (expected, tuple(passes))
        seen = alike.get(outcome)
        if seen is None:
            trials = CaseTrials(*outcome)
            seen = (trials, _complete_rate(trials, rule))
            if len(alike) < _SHARED_TRIALS:
                alike[outcome] = seen
        trials, rate = seen
        cases.append(trials)
        row: dict[str, float | None] = {PASS_RATE: rate}
        for ref, values in case_values.items():
            if len(values) == 1:  # one trial: the value itself, finite (no call: most runs have one trial)
                value = values[0]
                if value is not None and not (value.__class__ is float and value - value == 0.0):
                    value = finite(value, case_id)  # not a finite float: made one, or the error
                row[ref] = value
                if rate is not None and value is not None:
                    used[ref] = used.get(ref, 0) + 1
            else:
                row[ref] = _case_mean(values, case_id)
                if rate is not None:
                    used[ref] = used.get(ref, 0) + len(values) - values.count(None)
        columns.add_values(row)
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
    """The mean of a case's trial values (a case of one trial takes its value as it is, in
    ``_variant_cases``: the fsum of one float is that float)."""
    summed = case_sum(values, case_id)
    return None if summed is None else summed[0] / summed[1]


def _grader_means(columns: Columns, used: Mapping[str, int], resolved: ResolvedEval,
                  confidence: float) -> dict[str, Any]:
    """Each grader's mean over the complete cases (equal weight per case), inside its declared
    range; ``n``, the trial values it rests on; how many incomplete cases were left out."""
    left_out = columns.incomplete()
    return {m.ref[len("grader:"):]: {**metric_mean(columns, m, confidence), "n": used.get(m.ref, 0),
                                     "excludedIncomplete": left_out}
            for m in sorted(metrics_of(columns, resolved), key=lambda m: m.ref) if m.ref.startswith("grader:")}


def _pairwise(run: Run, variant: str, resolved: ResolvedEval, columns: Mapping[str, Columns],
              confidence: float, tally: JudgeTally) -> dict[str, Any] | None:
    """Preferences of the cases complete on both sides (the others are counted, not compared),
    the win rate, and the judge's flip rate over the pairs it judged in both orders."""
    if resolved.pairwise is None or resolved.baseline is None or variant == resolved.baseline.id:
        return None
    mine, base = columns[variant], columns[resolved.baseline.id]
    # Held for every compared case at once (a run's peak was here): the two orders as two lists
    # of the shared side strings (PairRecord.from_json), not a tuple a pair.
    prefs: list[str | None] = []
    ab: list[str] = []
    ba: list[str] = []
    left_out = 0
    for i, case_id in enumerate(resolved.cases.ids):
        record = run.comparisons.get((variant, case_id))
        if record is None:
            continue
        tally.add_comparison(record)
        if not (mine.complete(i) and base.complete(i)):
            left_out += 1
            continue
        prefs.append(record.preference)
        for pair in record.pairs:
            ab.append(pair.ab)
            ba.append(pair.ba)
    return {**preference_counts(prefs, confidence), "excludedIncomplete": left_out,
            "flips": flip_rate(zip(ab, ba, strict=True))}

