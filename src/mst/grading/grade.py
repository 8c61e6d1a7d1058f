"""Grading a trial and comparing a case's trials pairwise: the same code everywhere.

Local grading, a grade shard and the coordinator's assembly of shard results all run
:func:`grade_trial` and :func:`compare_pairwise` (docs/grading.md). :func:`grade_trial` is the
whole grading of a trial — its assertions, its judges and the deterministic graders — and every
one of them goes through the :class:`~mst.grading.sources.GradingSource`: a live source computes
them, a recorded source replays what a shard computed, so the coordinator recomputes nothing
and the records come from one code path either way.

Every assertion, judge and grader yields a verdict (or a value) or a grading error. A grading
error leaves the trial *ungraded*; grading never turns a trial into an infrastructure failure,
and ``mst grade --resume`` grades it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mst.config.resolved import ResolvedCase, ResolvedJudge
from mst.grading.context import CasePlan, GradingContext
from mst.grading.judges import JUDGE_KINDS, CaseView, Preference, TrialView
from mst.grading.sources import GradingSource, JudgeOutcome, PairOutcome
from mst.runs.grading_records import (
    CaseComparison,
    GraderValue,
    GradingError,
    PairError,
    PairRecord,
    Side,
    TrialGrading,
    VerdictRecord,
)
from mst.session.io import TranscriptError

if TYPE_CHECKING:
    from mst.graders.results import Entry

Keep = Mapping[str, VerdictRecord | Mapping[str, Any]]

# The records' named tuples built from all their fields at once: a trial makes a few verdicts and
# ten grader values, and the generated ``__new__`` (keywords, defaults) costs as much again.
_new = tuple.__new__


def case_plan(case: ResolvedCase, context: GradingContext | None = None) -> CasePlan:
    return (context or GradingContext()).plan(case)


def grader_names(case: ResolvedCase, context: GradingContext | None = None) -> list[tuple[str, str]]:
    """(name, identity) of every assertion and judge of ``case``, in grading order.

    Resume compares this set with the stored verdicts to refuse when the judges changed.
    """
    return case_plan(case, context).names()


# ---------------------------------------------------------------------------------------------
# Trial grading


def _check_trial(trial: TrialView, case: ResolvedCase) -> None:
    if not trial.is_trial:
        raise ValueError(
            f"{trial.variant}/{trial.case_id}/{trial.trial} is an infrastructure failure; "
            "only trials are graded"
        )
    if trial.case_id != case.id:
        raise ValueError(f"trial of case {trial.case_id!r} graded against case {case.id!r}")


def _kept(keep: Keep | None, name: str, identity: str) -> VerdictRecord | None:
    """An earlier verdict of an unchanged grader (same identity); earlier *errors* are never kept."""
    if not keep:
        return None
    earlier = keep.get(name)
    if earlier is None:
        return None
    if not isinstance(earlier, VerdictRecord):
        if earlier.get("identity") != identity or not isinstance(earlier.get("passed"), bool):
            return None
        earlier = VerdictRecord.from_json(earlier)
    return earlier if earlier.identity == identity else None


def _judge_record(name: str, judge: ResolvedJudge, outcome: JudgeOutcome,
                  verdicts: list[VerdictRecord], errors: list[GradingError]) -> None:
    v = outcome.verdict
    kind = judge.source if judge.source in JUDGE_KINDS else "code"
    if v is None:
        errors.append(GradingError(name, kind, judge.identity, outcome.error or "the judge gave no verdict"))
        return
    usage = dict(outcome.usage) if outcome.usage else None
    code = kind == "code"  # a model judge's usage is its calls, recorded at the verdict's top level
    verdicts.append(_new(VerdictRecord, (name, kind, judge.identity, v.passed, v.score, v.reason,
                                         usage if code else None, outcome.duration_ms, None if code else usage)))


def _graders(trial: TrialView, source: GradingSource, context: GradingContext,
             errors: list[GradingError]) -> tuple[GraderValue, ...] | None:
    """The deterministic graders over the (redacted) session, through the source: each result
    as the trial's record keeps it, against the run's manifest (docs/graders.md, "Results")."""
    config, manifest = context.graders, context.manifest
    if config is None or manifest is None:
        return None
    try:
        session = context.session(trial)
    except TranscriptError as exc:
        errors.append(GradingError("graders", "grader", None, str(exc)))
        return None
    outcome = source.graders(trial, config, session, manifest)
    entries: Sequence[Entry] | None = outcome.entries
    if entries is None:
        results = outcome.results
        if results is None:
            errors.append(GradingError("graders", "grader", None, outcome.error or "the graders gave no results"))
            return None
        from mst.graders.results import record_entries

        entries = record_entries(manifest, results)
    for entry in entries:
        if entry[2] == "error":
            errors.append(GradingError(f"grader:{entry[0]}", "grader", None, _error_message(entry)))
    # The live source's entries are the record's values already (shared between trials when
    # their measurement is: graders/results.py ``_entries``); a recorded source's are tuples.
    return tuple([e if e.__class__ is GraderValue else _new(GraderValue, e) for e in entries])


def _error_message(entry: Entry) -> str:
    """An error entry's message, from the whole result when the entry keeps one."""
    whole = entry[4].get("result") if entry[4] else None
    message = whole.get("message") if whole is not None else entry[3]
    return message or "grader error"  # type: ignore[no-any-return]


def grade_trial(
    trial: TrialView,
    case: ResolvedCase,
    source: GradingSource,
    *,
    keep: Keep | None = None,
    context: GradingContext | None = None,
    graders_path: str | None = None,
    try_number: int | None = None,
) -> TrialGrading:
    """Grade one trial — every assertion, every case judge, the deterministic graders — through
    ``source``; the result's verdicts and errors decide its status.

    ``keep`` maps a judge's name to an earlier verdict; it is reused when its identity equals the
    judge's current one (``mst grade --resume``), so only judges without a valid verdict run.
    ``context`` is the run's grading context (its graders, its redactor); without one, no
    deterministic grader runs. ``graders_path`` (the run's grader manifest, which the caller
    writes before any record names it; recorded only when graders ran) and ``try_number`` (the
    attempt's try) go into the record as it is made: a run grades every trial once, and a copy
    per field costs as much as the record.
    """
    _check_trial(trial, case)
    context = context or GradingContext()
    plan = context.plan(case)
    verdicts: list[VerdictRecord] = []
    errors: list[GradingError] = []
    for name, identity, assertion in plan.assertions:
        kept = _kept(keep, name, identity) if keep else None
        if kept is not None:
            verdicts.append(kept)
            continue
        result = source.assertion(name, identity, assertion, trial)
        if result.passed is None:
            errors.append(GradingError(name, "assertion", identity, result.error or "the assertion gave no verdict"))
        else:
            verdicts.append(_new(VerdictRecord, (name, "assertion", identity, result.passed, None, result.reason,
                                                 None, None, None)))
    streams: list[tuple[str, bytes]] = []
    for name, judge in plan.judges:
        kept = _kept(keep, name, judge.identity) if keep else None
        if kept is not None:
            verdicts.append(kept)
            continue
        outcome = source.judge(judge, trial, plan.view)
        _judge_record(name, judge, outcome, verdicts, errors)
        if outcome.stream is not None:
            streams.append((name, outcome.stream))
    values = _graders(trial, source, context, errors)
    return TrialGrading(trial.variant, case.id, trial.trial, tuple(verdicts), tuple(errors), values,
                        graders_path if values is not None else None, try_number, tuple(streams))


# ---------------------------------------------------------------------------------------------
# Pairwise comparison


def _side(position: Preference, a_is_candidate: bool) -> Side:
    if position == "tie":
        return "tie"
    return "candidate" if (position == "A") == a_is_candidate else "baseline"


def combine_orders(ab: Side, ba: Side) -> Side:
    """A preference counts only when both orders agree; a flip (or one tie) is a tie.

    Position bias is the best-known failure of pairwise judges; requiring agreement across
    both orders is the standard guard (as in MT-Bench's consistency rule).
    """
    return ab if ab == ba else "tie"


def _pairs(
    case: ResolvedCase, candidate_trials: Sequence[TrialView], baseline_trials: Sequence[TrialView]
) -> list[tuple[int, TrialView, TrialView]]:
    """Trial i with trial i, only where both sides have a trial (not an infrastructure failure)."""
    baseline = {t.trial: t for t in baseline_trials if t.is_trial and t.case_id == case.id}
    pairs = [(t.trial, t, baseline[t.trial]) for t in candidate_trials
             if t.is_trial and t.case_id == case.id and t.trial in baseline]
    pairs.sort(key=lambda p: p[0])
    return pairs


def _kept_pairs(keep: CaseComparison | Mapping[str, Any] | None, identity: str) -> dict[int, PairRecord]:
    if keep is None:
        return {}
    if not isinstance(keep, CaseComparison):
        if not keep or keep.get("identity") != identity:
            return {}
        pairs = [p for p in keep.get("pairs", ()) if isinstance(p, dict) and "trial" in p]
        return {p["trial"]: PairRecord.from_json(p) for p in pairs}
    return {p.trial: p for p in keep.pairs} if keep.identity == identity else {}


def _pair_record(trial: int, ab: PairOutcome, ba: PairOutcome) -> PairRecord | PairError:
    failed = [o.error or "the judge gave no preference" for o in (ab, ba) if o.preference is None]
    if failed:
        return PairError(trial, "; ".join(failed))
    assert ab.preference is not None and ba.preference is not None
    ab_side, ba_side = _side(ab.preference, True), _side(ba.preference, False)
    reasons = {"ab": ab.reason, "ba": ba.reason} if ab.reason is not None or ba.reason is not None else None
    durations = [o.duration_ms for o in (ab, ba) if o.duration_ms is not None]
    return PairRecord(trial, ab_side, ba_side, combine_orders(ab_side, ba_side), reasons,
                      tuple(dict(o.usage) for o in (ab, ba) if o.usage),
                      round(sum(durations), 3) if durations else None)


def compare_pairwise(
    case: ResolvedCase,
    candidate_trials: Sequence[TrialView],
    baseline_trials: Sequence[TrialView],
    judge: ResolvedJudge,
    source: GradingSource,
    *,
    keep: CaseComparison | Mapping[str, Any] | None = None,
    candidate: str | None = None,
    baseline: str | None = None,
    context: GradingContext | None = None,
) -> CaseComparison:
    """Judge each pair in both orders: A=candidate/B=baseline, then swapped.

    ``keep`` is the earlier comparison of this case; its pairs are reused when its judge identity
    is unchanged, so a resumed grading judges only the pairs without a preference.
    ``candidate``/``baseline`` name the variants when a side has no trials to take them from.
    """
    if candidate is None:
        candidate = candidate_trials[0].variant if candidate_trials else ""
    if baseline is None:
        baseline = baseline_trials[0].variant if baseline_trials else ""
    view = (context or GradingContext()).plan(case).view
    kept = _kept_pairs(keep, judge.identity)
    pairs: list[PairRecord] = []
    errors: list[PairError] = []
    streams: list[tuple[str, bytes]] = []
    for index, cand, base in _pairs(case, candidate_trials, baseline_trials):
        if index in kept:
            pairs.append(kept[index])
            continue
        ab, ba = source.pairwise(judge, view, cand, base), source.pairwise(judge, view, base, cand)
        streams += [(f"{index}.{order}", o.stream) for order, o in (("ab", ab), ("ba", ba)) if o.stream is not None]
        record = _pair_record(index, ab, ba)
        (pairs if isinstance(record, PairRecord) else errors).append(record)  # type: ignore[arg-type]
    return CaseComparison(case.id, candidate, baseline, judge.id, judge.identity, tuple(pairs), tuple(errors),
                          streams=tuple(streams))


def case_view(case: ResolvedCase, context: GradingContext | None = None) -> CaseView:
    """The :class:`~mst.grading.judges.CaseView` of a resolved case."""
    return case_plan(case, context).view
