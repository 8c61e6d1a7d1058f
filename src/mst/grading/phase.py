"""The grading phase over a run directory: decide what to grade, grade it, journal it.

Used by `mst run` (after collecting), `mst run --resume`, `mst grade` (a regrade into a new run),
`mst grade --resume` (in place), a grade shard's worker and the coordinator's assembly of its
records. All of them call :func:`grade_trial` (assertions, judges and graders) and
:func:`compare_pairwise` in the same way, through one :class:`GradingSource` (docs/grading.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterator, MutableSequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mst import endings
from mst.config.errors import Problem, UserError
from mst.config.resolved import ResolvedCase, ResolvedEval
from mst.config.secrets import in_environment, judge_secret_names, only
from mst.fileio import atomic_write_bytes, json_file_bytes, write_trial_file
from mst.grading.context import GradingContext
from mst.grading.grade import compare_pairwise, grade_trial
from mst.grading.judges import TrialView
from mst.grading.preflight import needed_env
from mst.grading.sources import GradingSource, LiveSource
from mst.runs.files import Journal
from mst.runs.grading_records import CaseComparison, GraderOutput, TrialGrading, VerdictRecord
from mst.runs.layout import Key, RunPaths
from mst.runs.progress import Progress
from mst.runs.records import KeyList
from mst.runs.run import Run
from mst.session.io import dumps_jsonl

K = TypeVar("K")
R = TypeVar("R")


@dataclass
class GradePlan:
    trials: MutableSequence[Key] | KeyList[Key] = field(default_factory=list)
    keep: dict[Key, dict[str, VerdictRecord]] = field(default_factory=dict)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (candidate, case)


def plan_grading(run: Run, resolved: ResolvedEval, context: GradingContext, *, resume: bool) -> GradePlan:
    """What needs grading. With ``resume``, valid earlier verdicts are kept, not redone."""
    if resume:
        _refuse_changed_judges(run, resolved, context)
    index = run.attempts.key_index
    plan = GradePlan(trials=KeyList(index))  # slots, not key tuples: 8 bytes a trial
    cases = {c.id: c for c in resolved.cases}  # resolved.case() scans: quadratic over a big run
    for slot in run.attempts.slots_in_key_order():
        key = index.key(slot)
        if not endings.is_trial(run.ending(key)):
            continue
        earlier = run.trial_grades.get(key) if resume else None
        if earlier is not None and earlier.try_number not in (None, _attempt_try(run, key)):
            earlier = None  # graded before the attempt was collected again: grade the new one afresh
        if earlier is not None and earlier.status == "graded" and _still_valid(earlier, context, cases[key[1]]):
            continue
        plan.trials.append(key)
        if earlier is not None:
            plan.keep[key] = {v.judge: v for v in earlier.verdicts}
    baseline = resolved.baseline
    if resolved.pairwise is not None and baseline is not None:
        for case in resolved.cases:
            for variant in resolved.variants:
                if variant.id == baseline.id:
                    continue
                earlier_pair = run.comparisons.get((variant.id, case.id)) if resume else None
                if earlier_pair is None or not _comparison_valid(earlier_pair, run, resolved, variant.id,
                                                                 baseline.id, case):
                    plan.pairs.append((variant.id, case.id))
    return plan


def _still_valid(earlier: TrialGrading, context: GradingContext, case: ResolvedCase) -> bool:
    """A graded trial stays graded when every judge that graded it is unchanged."""
    current = dict(context.plan(case).names())
    recorded = {v.judge: v.identity for v in earlier.verdicts}
    return current == recorded and _graders_done(earlier, context)


def _graders_done(earlier: TrialGrading, context: GradingContext) -> bool:
    wanted = set(context.grader_ids)
    have = {g.id for g in earlier.graders or () if g.status != "error"}
    return wanted <= have


def _comparison_valid(earlier: CaseComparison, run: Run, resolved: ResolvedEval, candidate: str,
                      baseline: str, case: ResolvedCase) -> bool:
    assert resolved.pairwise is not None
    if earlier.identity != resolved.pairwise.identity or earlier.errors:
        return False
    compared = {p.trial for p in earlier.pairs}
    indexes = _pair_indexes(run, candidate, baseline, case)
    if compared != set(indexes):
        return False
    return earlier.tries is None or earlier.tries == _pair_tries(run, candidate, baseline, case.id, indexes)


def _pair_tries(run: Run, candidate: str, baseline: str, case: str, indexes: list[int]) -> dict[str, tuple[int, int]]:
    """Per compared trial, the tries of both sides: a comparison is of those attempts."""
    return {str(t): (_attempt_try(run, (candidate, case, t)), _attempt_try(run, (baseline, case, t)))
            for t in indexes}


def _pair_indexes(run: Run, candidate: str, baseline: str, case: ResolvedCase) -> list[int]:
    return [t for t in range(case.trials)
            if _is_trial(run, (candidate, case.id, t)) and _is_trial(run, (baseline, case.id, t))]


def _is_trial(run: Run, key: Key) -> bool:
    return key in run.attempts and endings.is_trial(run.ending(key))


def _refuse_changed_judges(run: Run, resolved: ResolvedEval, context: GradingContext) -> None:
    """Resume refuses when the cases or the set of judges changed since the grading began."""
    recorded = run.meta.grading
    if recorded is None:
        return
    if run.meta.case_ids != {c.id for c in resolved.cases}:
        raise UserError(Problem(str(run.paths.run_json), "the eval's cases changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))
    pairwise = resolved.pairwise.id if resolved.pairwise else None
    if dict(recorded.judges) != dict(context.judges) or recorded.pairwise != pairwise:
        raise UserError(Problem(str(run.paths.run_json), "the set of judges changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))
    if list(recorded.graders) != context.grader_ids:
        raise UserError(Problem(str(run.paths.run_json), "the set of graders changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))


# ---------------------------------------------------------------------------------------------


def attempt_view(run: Run, key: Key, case: ResolvedCase) -> tuple[TrialView, int]:
    """The trial's view for judges, and the attempt's try (which grading records carry)."""
    record = run.attempts[key]
    transcript, artifacts = record.transcript, record.artifacts
    view = TrialView.of(
        case, variant=key[0], trial=key[2], answer=record.answer, ending=record.ending_json,
        transcript=f"{run.root}/{transcript}" if transcript else None, usage=record.usage,
        artifacts_dir=run.paths.root / artifacts if artifacts else None,
    )
    return view, record.try_number


def _attempt_try(run: Run, key: Key) -> int:
    return run.attempts[key].try_number


def grade_run(run: Run, resolved: ResolvedEval, plan: GradePlan, context: GradingContext, *,
              secrets: dict[str, str], progress: Progress, source: GradingSource | None = None,
              on_record: Callable[[TrialGrading | CaseComparison], None] | None = None) -> None:
    """Grade what ``plan`` lists, journaling each record as it is made.

    ``source`` is where every verdict and grader result comes from: computed here by default, or
    recorded by a grade worker, or replayed from a shard's records (the coordinator's assembly),
    so all three run this same code. ``on_record`` sees each journaled record, as a grade worker
    ships them. ``context`` carries the run's redactor: records and grader files are redacted.
    """
    source = source if source is not None else LiveSource(resolved.base_dir, context.access)
    progress.start("grade", len(plan.trials) + len(plan.pairs))
    cases = {c.id: c for c in resolved.cases}  # resolved.case() scans: quadratic over a big run

    def grade_one(key: Key, view: TrialView, attempt_try: int) -> tuple[TrialGrading, dict[str, Any]]:
        grading = grade_trial(view, cases[key[1]], source, keep=plan.keep.get(key), context=context)
        for judge, stream in grading.streams:
            _write_stream(run, RunPaths.judge_stream_rel(judge, key[0], key[1], str(key[2])), stream, context)
        if grading.output is not None:
            _write_grader_files(run, key, grading.output, context)
            grading = grading.with_graders_path(RunPaths.graders_rel(*key))
        # The attempt graded: one collected again later is graded again (docs/run-directory.md).
        return _redacted(grading.with_try(attempt_try), context)

    # Views and earlier records are read here, in this thread; only the judging runs in the pool.
    trials = ((key, functools.partial(grade_one, key, *attempt_view(run, key, cases[key[1]])))
              for key in plan.trials)
    pairs = ((pair, _pairwise_job(run, resolved, pair[0], cases[pair[1]], source, context))
             for pair in plan.pairs)
    cfg = resolved.config
    workers = (cfg.gradingConcurrency or cfg.concurrency) if _calls_judges(resolved) else 1
    judge_env = only(secrets, [*judge_secret_names(resolved), *needed_env(resolved)])  # only what they name
    with in_environment(judge_env), Journal(run.paths.grading_journal) as journal:
        for key, (record, data) in _in_order(trials, workers):
            run.trial_grades.put(key, record, journal.append(data))
            if on_record is not None:
                on_record(record)
            progress.advance()
        for pair, (comparison, data) in _in_order(pairs, workers):
            run.comparisons.put(pair, comparison, journal.append(data))
            if on_record is not None:
                on_record(comparison)
            progress.advance()
    progress.finish()
    run.meta = run.meta.with_phases(grade="complete" if grading_complete(run, resolved) else "partial")


Graded = TypeVar("Graded", TrialGrading, CaseComparison)


def _redacted(record: Graded, context: GradingContext) -> tuple[Graded, dict[str, Any]]:
    """The record as it is stored: redacted of the run's secrets, with the JSON it is journaled as."""
    data = record.to_json()
    if not context.redactor.active:
        return record, data
    redacted: dict[str, Any] = context.redactor.value(data)
    return type(record).from_json(redacted), redacted  # type: ignore[return-value]


def _calls_judges(resolved: ResolvedEval) -> bool:
    """Judges may wait on a network or a CLI; assertions and graders are CPU work a pool slows."""
    return resolved.pairwise is not None or any(c.judges for c in resolved.cases)


def _in_order(jobs: Iterator[tuple[K, Callable[[], R]]], workers: int) -> Iterator[tuple[K, R]]:
    """Run each job with up to ``workers`` at once; results come back in input order.

    At most ``2 × workers`` jobs are in flight, so memory stays flat however many there are;
    the caller's thread alone journals the results.
    """
    if workers <= 1:
        for key, job in jobs:
            yield key, job()
        return
    window: deque[tuple[K, Future[R]]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mst-grade") as pool:
        for key, job in jobs:
            window.append((key, pool.submit(job)))
            if len(window) >= 2 * workers:
                done_key, future = window.popleft()
                yield done_key, future.result()
        while window:
            done_key, future = window.popleft()
            yield done_key, future.result()


def _pairwise_job(run: Run, resolved: ResolvedEval, candidate: str, case: ResolvedCase,
                  source: GradingSource, context: GradingContext
                  ) -> Callable[[], tuple[CaseComparison, dict[str, Any]]]:
    """Read both sides' trials and the earlier comparison now; judge them when the job runs."""
    assert resolved.pairwise is not None and resolved.baseline is not None
    judge, baseline = resolved.pairwise, resolved.baseline.id
    indexes = _pair_indexes(run, candidate, baseline, case)
    cand_views = [attempt_view(run, (candidate, case.id, t), case) for t in indexes]
    base_views = [attempt_view(run, (baseline, case.id, t), case) for t in indexes]
    cand, base = [v for v, _ in cand_views], [v for v, _ in base_views]
    earlier = run.comparisons.get((candidate, case.id))
    tries = {str(t): (c, b) for t, (_, c), (_, b) in zip(indexes, cand_views, base_views, strict=True)}
    if earlier is not None and earlier.tries not in (None, tries):
        earlier = None  # a side was collected again: its earlier preferences do not apply

    def job() -> tuple[CaseComparison, dict[str, Any]]:
        result = compare_pairwise(case, cand, base, judge, source, keep=earlier, candidate=candidate,
                                  baseline=baseline, context=context)
        for name, stream in result.streams:
            _write_stream(run, RunPaths.judge_stream_rel(judge.id, candidate, case.id, name), stream, context)
        return _redacted(result.with_tries(tries), context)

    return job


def _write_stream(run: Run, rel: str, stream: bytes, context: GradingContext) -> None:
    """A judge's own event stream, kept for audit; like grader files, written before its record."""
    path = f"{run.root}/{rel}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if context.redactor.active:
        stream = context.redactor.text(stream.decode("utf-8", errors="replace")).encode()
    write_trial_file(path, stream)


def _write_grader_files(run: Run, key: Key, output: GraderOutput, context: GradingContext) -> None:
    """The graders' files beside the trial, never in its record: results, the graded session, the manifest."""
    rel = RunPaths.graders_rel(*key)
    root = run.root
    folder = f"{root}/{rel}"  # strings: pathlib joins cost µs per trial
    _make_folder(folder)
    # Like the transcript, these files precede the trial's journal line (see write_trial_file).
    write_trial_file(f"{folder}/grader_results.json", json_file_bytes(output.run.results_document()))
    jsonl = output.jsonl
    write_trial_file(f"{folder}/session.jsonl",
                     (jsonl if jsonl is not None else dumps_jsonl(output.session)) + output.run.events_jsonl())
    _write_manifest(root, folder, context)


def _write_manifest(root: str, folder: str, context: GradingContext) -> None:
    """Every trial of a run has the same manifest: write it once per run and hard-link it in.

    A link is one system call where a file costs four; the shared copy is content-addressed and
    never modified. Where the trial already has a manifest (grading again in place), it is
    replaced whole, as any other write.
    """
    assert context.manifest is not None
    with context.lock:  # grading threads share the one copy
        shared = context.manifest_files.get(root)
        if shared is None:
            data = json_file_bytes(context.manifest)
            shared = f"{root}/graders/.grader_manifest.{hashlib.sha256(data).hexdigest()[:16]}.json"
            if not os.path.exists(shared):
                atomic_write_bytes(shared, data, fsync=False)
            context.manifest_files[root] = shared
    target = f"{folder}/grader_manifest.json"
    try:
        os.link(shared, target)
    except FileExistsError:
        atomic_write_bytes(target, json_file_bytes(context.manifest), fsync=False)


def _make_folder(folder: str) -> None:
    """One ``mkdir`` for a trial's folder; its parents are made only for a case's first trial."""
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)


def grading_complete(run: Run, resolved: ResolvedEval) -> bool:
    for key in run.attempts:
        graded = key in run.trial_grades and run.trial_grades.summary(key) == "graded"
        if not graded and endings.is_trial(run.ending(key)):
            return False
    if resolved.pairwise is not None and resolved.baseline is not None:
        for case in resolved.cases:
            for variant in resolved.variants:
                if variant.baseline:
                    continue
                comp = run.comparisons.get((variant.id, case.id))
                if comp is None or comp.errors:
                    return False
    return True
