"""The grading phase over a run directory: decide what to grade, grade it, journal it.

Used by `mst run` (after collecting), `mst run --resume`, `mst grade` (a regrade into a new run),
`mst grade --resume` (in place), a grade shard's worker and the coordinator's assembly of its
records. All of them call :func:`grade_trial` (assertions, judges and graders) and
:func:`compare_pairwise` in the same way, through one :class:`GradingSource` (docs/grading.md).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mst import endings
from mst.config.errors import Problem, UserError
from mst.config.resolved import ResolvedCase, ResolvedEval
from mst.config.secrets import in_environment, judge_secret_names, only
from mst.fileio import atomic_write_bytes, write_trial_file
from mst.grading.context import GradingContext
from mst.grading.grade import compare_pairwise, grade_trial
from mst.grading.judge_access import using
from mst.grading.judges import TrialView
from mst.grading.preflight import judges_of, needed_env
from mst.grading.sources import GradingSource, LiveSource
from mst.runs.files import Journal
from mst.runs.grading_records import CaseComparison, TrialGrading, VerdictRecord
from mst.runs.layout import Key, RunPaths
from mst.runs.progress import Progress
from mst.runs.records import KeyList
from mst.runs.run import Run

K = TypeVar("K")
R = TypeVar("R")


class CaseSink(Protocol):
    """Sees the grading go case by case (the report's :class:`~mst.report.trials.ChunkStream`):
    each record as stored (a trial's with the transcript grading read, when plain JSONL), then
    each case once all its records are stored."""

    def graded(self, key: Key, grade: bytes, transcript: bytes | None) -> None: ...

    def compared(self, key: tuple[str, str], comparison: bytes) -> None: ...

    def case_done(self, case_id: str) -> None: ...


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
    # A run not graded yet (`mst run` plans with resume=True) has nothing to keep: no look-up
    # per trial for an earlier grading that cannot be there.
    resume_trials, resume_pairs = resume and len(run.trial_grades) > 0, resume and len(run.comparisons) > 0
    trials: KeyList[Key] = KeyList(index)  # slots, not key tuples: 8 bytes a trial
    plan = GradePlan(trials=trials)
    for slot in run.attempts.slots_in_key_order():
        key = index.key(slot)
        if not endings.is_trial(run.ending(key)):
            continue
        earlier = run.trial_grades.get(key) if resume_trials else None
        if earlier is not None and earlier.try_number not in (None, _attempt_try(run, key)):
            earlier = None  # graded before the attempt was collected again: grade the new one afresh
        if earlier is not None and earlier.status == "graded" and _still_valid(earlier, context,
                                                                                resolved.case(key[1])):
            continue
        trials.append_slot(slot)  # the slot in hand: no second look-up of the key
        if earlier is not None:
            plan.keep[key] = {v.judge: v for v in earlier.verdicts}
    baseline = resolved.baseline
    if resolved.pairwise is not None and baseline is not None:
        for case in resolved.cases:
            for variant in resolved.variants:
                if variant.id == baseline.id:
                    continue
                earlier_pair = run.comparisons.get((variant.id, case.id)) if resume_pairs else None
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


def _pair_indexes(run: Run, candidate: str, baseline: str, case: ResolvedCase,
                  known: Mapping[Key, object] | None = None) -> list[int]:
    """The trial numbers both sides have a trial of. ``known`` are keys already seen to be
    trials (the case's trials just graded): not looked up again."""
    known = known or {}

    def trial(key: Key) -> bool:
        return key in known or _is_trial(run, key)

    return [t for t in range(case.trials) if trial((candidate, case.id, t)) and trial((baseline, case.id, t))]


def _is_trial(run: Run, key: Key) -> bool:
    """An attempt of ``key`` is stored and is a trial: one look-up of the key (its ending is kept
    in memory; an absent key raises KeyError)."""
    try:
        return endings.is_trial(run.ending(key))
    except KeyError:
        return False


def same_ids(a: Iterable[str], b: Iterable[str]) -> bool:
    """Whether ``a`` and ``b`` hold the same set of ids, compared as two sorted lists (8 bytes an
    id; the strings are the ones given) where two sets cost ~85 bytes an id, at 100,000 cases
    beside the rest of the run before grading (issue 16, bench/perf16_memory.md). Repeats
    count once, as in a set."""
    mine, theirs = sorted(a), sorted(b)
    end = object()
    distinct = (k for k, _ in itertools.groupby(mine))
    return all(x == y for x, y in itertools.zip_longest(distinct, (k for k, _ in itertools.groupby(theirs)),
                                                         fillvalue=end))


def _refuse_changed_judges(run: Run, resolved: ResolvedEval, context: GradingContext) -> None:
    """Resume refuses when the cases or the set of judges changed since the grading began."""
    recorded = run.meta.grading
    if recorded is None:
        return
    if not same_ids(run.meta.iter_case_ids(), resolved.cases.ids):
        raise UserError(Problem(str(run.paths.run_json), "the eval's cases changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))
    pairwise = resolved.pairwise.id if resolved.pairwise else None
    if recorded.judges != context.judges or recorded.pairwise != pairwise:
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
              on_record: Callable[[TrialGrading | CaseComparison], None] | None = None,
              chunks: CaseSink | None = None) -> None:
    """Grade what ``plan`` lists, journaling each record as it is made.

    ``source`` is where every verdict and grader result comes from: computed here by default, or
    recorded by a grade worker, or replayed from a shard's records (the coordinator's assembly),
    so all three run this same code. ``on_record`` sees each journaled record, as a grade worker
    ships them. ``context`` carries the run's redactor: records are redacted.
    ``chunks`` is given each record as stored and each transcript as grading read it (plain JSONL
    only), and told when a case is done: the report's chunks are written then, from bytes in hand
    (docs/report.md).
    """
    source = source if source is not None else LiveSource(resolved.base_dir, context.access)
    progress.start("grade", len(plan.trials) + len(plan.pairs))

    keep = plan.keep
    manifest_rel = _write_grader_manifest(run.root, context) if len(plan.trials) else None

    def grade_one(key: Key, case: ResolvedCase, view: TrialView,
                  attempt_try: int) -> tuple[TrialGrading, dict[str, Any], bytes | None]:
        # The record is made with its final fields: the grader manifest's path (written above,
        # before any record names it) and the attempt's try, since one collected again later is
        # graded again (docs/run-directory.md).
        grading = grade_trial(view, case, source, keep=keep.get(key) if keep else None, context=context,
                              graders_path=manifest_rel, try_number=attempt_try)
        for judge, stream in grading.streams:
            _write_stream(run, RunPaths.judge_stream_rel(judge, key[0], key[1], str(key[2])), stream, context)
        return (*_redacted(grading, context), view.take_plain() if chunks is not None else None)

    def jobs() -> Iterator[tuple[Key | tuple[str, str], Callable[[], tuple[Any, dict[str, Any], bytes | None]]]]:
        # Case by case: its trials, then its comparisons, which reuse the views just read, so
        # each attempt record is read once. Views are read here, in this thread; only the
        # judging runs in the pool. One view of the case serves all its trials (and its plan).
        for case, keys, pairs in _by_case(run, resolved, plan):
            case_id = case.id
            views: dict[Key, tuple[TrialView, int]] = {}
            for key in keys:
                view, attempt_try = attempt_view(run, key, case)
                if pairs:  # the comparison's own view: it must not keep the graded one's events alive
                    views[key] = (view.unread(), attempt_try)
                yield key, functools.partial(grade_one, key, case, view, attempt_try)
            for candidate in pairs:
                yield (candidate, case_id), _pairwise_job(run, resolved, candidate, case, source, context, views)

    cfg = resolved.config
    # Judges may wait on a network or a CLI; assertions and graders are CPU work a pool slows.
    judges = judges_of(resolved)  # the pairwise judge too: none means no judge at all
    workers = (cfg.gradingConcurrency or cfg.concurrency) if judges else 1
    judge_env = only(secrets, [*judge_secret_names(resolved), *needed_env(resolved, judges)])  # only what they name
    compared: dict[tuple[str, str], bool] = {}  # the comparisons made here: complete or not
    # The grading's judge access is this thread's for the whole loop, so a code judge called here
    # finds it set already (LiveSource sets it per call only where it is not: a pool's thread).
    case: str | None = None  # the case of the last record: when the next one's differs, it is done
    with in_environment(judge_env), using(context.access), Journal(run.paths.grading_journal) as journal:
        for key, (record, data, plain) in _in_order(jobs(), workers):
            if chunks is not None and case != key[1]:
                if case is not None:
                    chunks.case_done(case)
                case = key[1]
            stored = journal.append(data)
            if len(key) == 3:
                run.trial_grades.put(key, record, stored)  # type: ignore[arg-type]
                if chunks is not None:
                    chunks.graded(key, stored, plain)  # type: ignore[arg-type]
            else:
                run.comparisons.put(key, record, stored)  # type: ignore[arg-type]
                compared[key] = not record.errors  # type: ignore[index]
                if chunks is not None:
                    chunks.compared(key, stored)  # type: ignore[arg-type]
            if on_record is not None:
                on_record(record)
            progress.advance()
        if chunks is not None and case is not None:
            chunks.case_done(case)
    progress.finish()
    complete = grading_complete(run, resolved, compared)
    run.meta = run.meta.with_phases(grade="complete" if complete else "partial")


def _by_case(run: Run, resolved: ResolvedEval,
             plan: GradePlan) -> Iterator[tuple[ResolvedCase, list[Key], list[str]]]:
    """The plan case by case, in the eval's case order: ``(case, trials to grade, candidates to
    compare)``, the trials in key order within the case. The plan's trials are marked in one
    byte per record slot, not copied into per-case lists of keys (a plan of 100,000 trials).
    The case is the one read of it here, for its trials and comparisons to share: grading
    keeps no map of every case (each read of ``resolved.cases`` makes a view, ~130 bytes a
    case held while a 100,000-case run grades; issue 16)."""
    index = run.attempts.key_index
    wanted = bytearray(len(index))
    left = 0
    for key in plan.trials:
        slot = index.find(key)
        if slot is not None and not wanted[slot]:
            wanted[slot] = 1
            left += 1
    pairs: dict[str, list[str]] = {}
    for candidate, case_id in plan.pairs:
        pairs.setdefault(case_id, []).append(candidate)
    variants = sorted(v.id for v in resolved.variants)
    for case in resolved.cases:
        keys: list[Key] = []
        for variant in variants:
            for trial in range(case.trials):
                slot = index.find((variant, case.id, trial))
                if slot is not None and wanted[slot]:
                    wanted[slot] = 0
                    keys.append((variant, case.id, trial))
        left -= len(keys)
        candidates = pairs.pop(case.id, [])
        if keys or candidates:
            yield case, keys, candidates
    if left:  # trials the eval's cases do not list as such (more trials than it has now): as planned
        for key in plan.trials:
            slot = index.find(key)
            if slot is not None and wanted[slot]:
                wanted[slot] = 0
                yield resolved.case(key[1]), [key], []
    for case_id, candidates in pairs.items():
        yield resolved.case(case_id), [], candidates


Graded = TypeVar("Graded", TrialGrading, CaseComparison)


def _redacted(record: Graded, context: GradingContext) -> tuple[Graded, dict[str, Any]]:
    """The record as it is stored: redacted of the run's secrets, with the JSON it is journaled as."""
    if not context.redactor.active:  # only encoded: a trial's grader entries as their bytes
        return record, record.journal_json() if isinstance(record, TrialGrading) else record.to_json()
    redacted: dict[str, Any] = context.redactor.value(record.to_json())
    return type(record).from_json(redacted), redacted  # type: ignore[return-value]


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
                  source: GradingSource, context: GradingContext,
                  views: Mapping[Key, tuple[TrialView, int]] | None = None,
                  ) -> Callable[[], tuple[CaseComparison, dict[str, Any], None]]:
    """Read both sides' trials and the earlier comparison now; judge them when the job runs.
    ``views`` are trials' views already read (the case's trials just graded), used as they are."""
    assert resolved.pairwise is not None and resolved.baseline is not None
    judge, baseline = resolved.pairwise, resolved.baseline.id
    known = views or {}
    indexes = _pair_indexes(run, candidate, baseline, case, known)

    def view(key: Key) -> tuple[TrialView, int]:
        found = known.get(key)
        return found if found is not None else attempt_view(run, key, case)

    cand_views = [view((candidate, case.id, t)) for t in indexes]
    base_views = [view((baseline, case.id, t)) for t in indexes]
    cand, base = [v for v, _ in cand_views], [v for v, _ in base_views]
    earlier = run.comparisons.get((candidate, case.id)) if len(run.comparisons) else None
    tries = {str(t): (c, b) for t, (_, c), (_, b) in zip(indexes, cand_views, base_views, strict=True)}
    if earlier is not None and earlier.tries not in (None, tries):
        earlier = None  # a side was collected again: its earlier preferences do not apply

    def job() -> tuple[CaseComparison, dict[str, Any], None]:
        result = compare_pairwise(case, cand, base, judge, source, keep=earlier, candidate=candidate,
                                  baseline=baseline, context=context)
        for name, stream in result.streams:
            _write_stream(run, RunPaths.judge_stream_rel(judge.id, candidate, case.id, name), stream, context)
        return (*_redacted(result.with_tries(tries), context), None)

    return job


def _write_stream(run: Run, rel: str, stream: bytes, context: GradingContext) -> None:
    """A judge's own event stream, kept for audit; like the transcript, written before its record."""
    path = f"{run.root}/{rel}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if context.redactor.active:
        stream = context.redactor.text(stream.decode("utf-8", errors="replace")).encode()
    write_trial_file(path, stream)


def _write_grader_manifest(root: str, context: GradingContext) -> str | None:
    """The run's grader manifest, ``graders/manifest-<digest>.json`` (its path relative to
    ``root``), or None when no grader runs. Written once per configuration, atomically, before
    any trial's record names it: a record keeps only what the manifest does not imply, and the
    graded session is rebuilt from both (docs/run-directory.md). Content-addressed, so a resumed
    grading under other thresholds adds its own and the earlier trials keep theirs."""
    if context.manifest is None:
        return None
    from mst.graders.results import manifest_digest, manifest_file_bytes

    rel = RunPaths.grader_manifest_rel(manifest_digest(context.manifest_json))
    path = f"{root}/{rel}"
    if not os.path.exists(path):  # same name, same bytes: never rewritten
        atomic_write_bytes(path, manifest_file_bytes(context.manifest), fsync=False)
    return rel


def grading_complete(run: Run, resolved: ResolvedEval, compared: Mapping[tuple[str, str], bool] | None = None) -> bool:
    """Every trial graded (and every comparison made). A graded trial costs one look-up of its
    key (its status is kept in memory); only an ungraded one has its ending looked up too.
    ``compared`` says of the comparisons just stored whether each is complete, so they are not
    read back and decoded (a comparison record holds every pair of its case)."""
    compared = compared or {}
    grades = run.trial_grades
    for key in run.attempts:
        try:
            graded = grades.summary(key) == "graded"
        except KeyError:
            graded = False
        if not graded and endings.is_trial(run.ending(key)):
            return False
    if resolved.pairwise is not None and resolved.baseline is not None:
        for case_id in resolved.cases.ids:  # the column: no case made per row
            for variant in resolved.variants:
                if variant.baseline:
                    continue
                pair = (variant.id, case_id)
                complete = compared.get(pair)
                if complete is None:
                    comp = run.comparisons.get(pair)
                    complete = comp is not None and not comp.errors
                if not complete:
                    return False
    return True
