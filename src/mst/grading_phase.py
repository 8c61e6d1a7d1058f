"""The grading phase over a run directory: decide what to grade, grade it, journal it.

Used by `mst run` (after collecting), `mst run --resume`, `mst grade` (a regrade into a new run)
and `mst grade --resume` (in place). All of them call :func:`grade_trial`,
:func:`compare_pairwise` and the graders in the same way, through one :class:`GradingSource`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, MutableSequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mst import endings
from mst.config.errors import Problem, UserError
from mst.config.resolved import ResolvedCase, ResolvedEval
from mst.config.secrets import in_environment, judge_secret_names, only
from mst.grading import GradingSource, LiveSource, TrialView, compare_pairwise, grade_trial
from mst.progress import Progress
from mst.runs.files import Journal, atomic_write_bytes, json_file_bytes, write_trial_file
from mst.runs.layout import Key, RunPaths
from mst.runs.records import KeyList
from mst.runs.run import Run
from mst.session.io import TranscriptError, dumps_jsonl
from mst.session.redact import Redactor

K = TypeVar("K")
R = TypeVar("R")


@dataclass
class GradePlan:
    trials: MutableSequence[Key] | KeyList[Key] = field(default_factory=list)
    keep: dict[Key, dict[str, dict[str, Any]]] = field(default_factory=dict)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (candidate, case)

    @staticmethod
    def grader_ids(resolved: ResolvedEval) -> list[str]:
        config = resolved.graders
        return sorted(config.enabled_ids) if config is not None else []


def plan_grading(run: Run, resolved: ResolvedEval, *, resume: bool) -> GradePlan:
    """What needs grading. With ``resume``, valid earlier verdicts are kept, not redone."""
    if resume:
        _refuse_changed_judges(run, resolved)
    index = run.attempts.key_index
    plan = GradePlan(trials=KeyList(index))  # slots, not key tuples: 8 bytes a trial
    cases = {c.id: c for c in resolved.cases}  # resolved.case() scans: quadratic over a big run
    for slot in run.attempts.slots_in_key_order():
        key = index.key(slot)
        if not endings.is_trial(run.ending(key)):
            continue
        earlier = run.trial_grades.get(key) if resume else None
        if earlier is not None and "try" in earlier and earlier["try"] != _attempt_try(run, key):
            earlier = None  # graded before the attempt was collected again: grade the new one afresh
        if earlier is not None and earlier.get("status") == "graded" and _still_valid(earlier, resolved, cases[key[1]]):
            continue
        plan.trials.append(key)
        if earlier is not None:
            plan.keep[key] = {v["judge"]: v for v in earlier.get("verdicts", [])}
    baseline = resolved.baseline
    if resolved.pairwise is not None and baseline is not None:
        for case in resolved.cases:
            for variant in resolved.variants:
                if variant.id == baseline.id:
                    continue
                earlier = run.comparisons.get((variant.id, case.id)) if resume else None
                if earlier is None or not _comparison_valid(earlier, run, resolved, variant.id, baseline.id, case):
                    plan.pairs.append((variant.id, case.id))
    return plan


def _still_valid(earlier: dict[str, Any], resolved: ResolvedEval, case: ResolvedCase) -> bool:
    """A graded trial stays graded when every judge that graded it is unchanged."""
    from mst.grading.grade import grader_names

    current = dict(grader_names(case))
    recorded = {v["judge"]: v.get("identity") for v in earlier.get("verdicts", [])}
    return current == recorded and _graders_done(earlier, resolved)


def _graders_done(earlier: dict[str, Any], resolved: ResolvedEval) -> bool:
    wanted = set(GradePlan.grader_ids(resolved))
    have = {g["id"] for g in earlier.get("graders", []) if g.get("status") != "error"}
    return wanted <= have


def _comparison_valid(earlier: dict[str, Any], run: Run, resolved: ResolvedEval, candidate: str,
                      baseline: str, case: ResolvedCase) -> bool:
    assert resolved.pairwise is not None
    if earlier.get("identity") != resolved.pairwise.identity or earlier.get("errors"):
        return False
    compared = {p["trial"] for p in earlier.get("pairs", [])}
    indexes = _pair_indexes(run, candidate, baseline, case)
    if compared != set(indexes):
        return False
    return "tries" not in earlier or earlier["tries"] == _pair_tries(run, candidate, baseline, case.id, indexes)


def _pair_tries(run: Run, candidate: str, baseline: str, case: str, indexes: list[int]) -> dict[str, list[int]]:
    """Per compared trial, the tries of both sides: a comparison is of those attempts."""
    return {str(t): [_attempt_try(run, (candidate, case, t)), _attempt_try(run, (baseline, case, t))]
            for t in indexes}


def _pair_indexes(run: Run, candidate: str, baseline: str, case: ResolvedCase) -> list[int]:
    return [t for t in range(case.trials)
            if _is_trial(run, (candidate, case.id, t)) and _is_trial(run, (baseline, case.id, t))]


def _is_trial(run: Run, key: Key) -> bool:
    return key in run.attempts and endings.is_trial(run.ending(key))


def _refuse_changed_judges(run: Run, resolved: ResolvedEval) -> None:
    """Resume refuses when the cases or the set of judges changed since the grading began."""
    recorded = run.meta.get("grading")
    if not recorded:
        return
    run_cases = {c["id"] for c in run.meta["cases"]}
    if run_cases != {c.id for c in resolved.cases}:
        raise UserError(Problem(str(run.paths.run_json), "the eval's cases changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))
    judges = {c.id: sorted(j.id for j in c.judges) for c in resolved.cases}
    pairwise = resolved.pairwise.id if resolved.pairwise else None
    if recorded.get("judges") != judges or recorded.get("pairwise") != pairwise:
        raise UserError(Problem(str(run.paths.run_json), "the set of judges changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))
    if recorded.get("graders", []) != GradePlan.grader_ids(resolved):
        raise UserError(Problem(str(run.paths.run_json), "the set of graders changed since this run was graded; "
                                "regrade it with `mst grade RUN` instead of --resume"))


# ---------------------------------------------------------------------------------------------


def attempt_view(run: Run, key: Key, case: ResolvedCase) -> tuple[TrialView, int]:
    """The trial's view for judges, and the attempt's try (which grading records carry)."""
    record = run.attempts[key]
    transcript = record.get("transcript")
    artifacts = record.get("artifacts")
    view = TrialView.of(
        case, variant=key[0], trial=key[2], answer=record.get("answer"), ending=record["ending"],
        transcript=f"{run.root}/{transcript}" if transcript else None, usage=record.get("usage"),
        artifacts_dir=run.paths.root / artifacts if artifacts else None,
    )
    return view, int(record.get("try", 1))


def _attempt_try(run: Run, key: Key) -> int:
    return int(run.attempts[key].get("try", 1))


def grade_run(run: Run, resolved: ResolvedEval, plan: GradePlan, *, secrets: dict[str, str],
              progress: Progress, source: GradingSource | None = None,
              on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Grade what ``plan`` lists, journaling each record as it is made.

    ``source`` is where judge verdicts come from: live calls by default, or a grade shard's
    recording (a worker) or its records (the coordinator's assembly), so all three run this
    same code. ``on_record`` sees each journaled record, as a grade worker ships them.
    """
    source = source if source is not None else LiveSource(resolved.base_dir)
    redactor = Redactor(secrets.values(), resolved.config.redact)
    progress.start("grade", len(plan.trials) + len(plan.pairs))
    cases = {c.id: c for c in resolved.cases}  # resolved.case() scans: quadratic over a big run
    def grade_one(key: Key, view: TrialView, attempt_try: int) -> dict[str, Any]:
        case = cases[key[1]]
        record = grade_trial(view, case, source, keep=plan.keep.get(key)).to_json()
        _run_graders(run, resolved, key, view, record, redactor)
        record["try"] = attempt_try  # the attempt graded: one collected again is graded again
        redacted: dict[str, Any] = redactor.value(record)
        return redacted

    # Views and earlier records are read here, in this thread; only the judging runs in the pool.
    trials = ((key, functools.partial(grade_one, key, *attempt_view(run, key, cases[key[1]])))
              for key in plan.trials)
    pairs = ((pair, _pairwise_job(run, resolved, pair[0], cases[pair[1]], source, redactor))
             for pair in plan.pairs)
    cfg = resolved.config
    workers = (cfg.gradingConcurrency or cfg.concurrency) if _calls_judges(resolved) else 1
    judge_env = only(secrets, judge_secret_names(resolved))  # judges get only what they name
    with in_environment(judge_env), Journal(run.paths.grading_journal) as journal:
        for key, record in _in_order(trials, workers):
            run.trial_grades.put(key, record, journal.append(record))
            if on_record is not None:
                on_record(record)
            progress.advance()
        for pair, record in _in_order(pairs, workers):
            run.comparisons.put(pair, record, journal.append(record))
            if on_record is not None:
                on_record(record)
            progress.advance()
    progress.finish()
    run.meta["phases"]["grade"] = "complete" if grading_complete(run, resolved) else "partial"


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
                  source: GradingSource, redactor: Redactor) -> Callable[[], dict[str, Any]]:
    """Read both sides' trials and the earlier comparison now; judge them when the job runs."""
    assert resolved.pairwise is not None and resolved.baseline is not None
    judge, baseline = resolved.pairwise, resolved.baseline.id
    indexes = _pair_indexes(run, candidate, baseline, case)
    cand_views = [attempt_view(run, (candidate, case.id, t), case) for t in indexes]
    base_views = [attempt_view(run, (baseline, case.id, t), case) for t in indexes]
    cand, base = [v for v, _ in cand_views], [v for v, _ in base_views]
    earlier = run.comparisons.get((candidate, case.id))
    tries = {str(t): [c, b] for t, (_, c), (_, b) in zip(indexes, cand_views, base_views, strict=True)}
    if earlier is not None and earlier.get("tries", tries) != tries:
        earlier = None  # a side was collected again: its earlier preferences do not apply

    def job() -> dict[str, Any]:
        result = compare_pairwise(case, cand, base, judge, source, keep=earlier,
                                  candidate=candidate, baseline=baseline)
        redacted: dict[str, Any] = redactor.value({"kind": "pairwise", **result.to_json(), "tries": tries})
        return redacted

    return job


def _run_graders(run: Run, resolved: ResolvedEval, key: Key, view: TrialView, record: dict[str, Any],
                 redactor: Redactor) -> None:
    """Deterministic graders over the redacted session; results beside the trial, never in it."""
    config = resolved.graders
    if config is None or not config.enabled_ids:
        return
    from mst.graders import run_graders

    try:
        session = [redactor.value(e) for e in view.events] if redactor.active else view.events
    except TranscriptError as exc:
        record["errors"].append({"judge": "graders", "kind": "grader", "identity": None, "message": str(exc)})
        record["status"], record["passed"] = "ungraded", None
        return
    result = run_graders(session, config, expected=view.expected)
    rel = RunPaths.graders_rel(*key)
    root = run.root
    folder = f"{root}/{rel}"  # strings: pathlib joins cost µs per trial
    _make_folder(folder)
    # Like the transcript, these files precede the trial's journal line (see write_trial_file).
    write_trial_file(f"{folder}/grader_results.json", json_file_bytes(result.results_document()))
    jsonl = None if redactor.active else view.jsonl  # unredacted: the file's bytes are the session's
    write_trial_file(f"{folder}/session.jsonl",
                     (jsonl if jsonl is not None else dumps_jsonl(session)) + result.events_jsonl())
    _write_manifest(root, folder, result.manifest)
    record["graders"] = [{"id": r["id"], "value": r["value"], "status": r["status"]} for r in result.results]
    record["gradersPath"] = rel
    failed = [r for r in result.results if r["status"] == "error"]
    for r in failed:
        record["errors"].append({"judge": f"grader:{r['id']}", "kind": "grader", "identity": None,
                                 "message": r.get("message") or "grader error"})
    if failed:
        record["status"], record["passed"] = "ungraded", None


_MANIFEST_FILES: dict[tuple[str, int], tuple[dict[str, Any], bytes, str]] = {}
_MANIFEST_LOCK = threading.Lock()


def _write_manifest(root: str, folder: str, manifest: dict[str, Any]) -> None:
    """Every trial of a run has the same manifest: write it once per run and hard-link it in.

    A link is one system call where a file costs four; the shared copy is content-addressed and
    never modified. Where the trial already has a manifest (grading again in place), it is
    replaced whole, as any other write.
    """
    with _MANIFEST_LOCK:  # grading threads share the one copy
        cached = _MANIFEST_FILES.get((root, id(manifest)))
        if cached is None or cached[0] is not manifest:
            data = json_file_bytes(manifest)
            shared = f"{root}/graders/.grader_manifest.{hashlib.sha256(data).hexdigest()[:16]}.json"
            if not os.path.exists(shared):
                atomic_write_bytes(shared, data, fsync=False)
            _MANIFEST_FILES.clear()
            cached = _MANIFEST_FILES[(root, id(manifest))] = (manifest, data, shared)
    _, data, shared = cached
    target = f"{folder}/grader_manifest.json"
    try:
        os.link(shared, target)
    except FileExistsError:
        atomic_write_bytes(target, data, fsync=False)


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
        if endings.is_trial(run.ending(key)):
            grade = run.trial_grades.get(key)
            if grade is None or grade.get("status") != "graded":
                return False
    if resolved.pairwise is not None and resolved.baseline is not None:
        for case in resolved.cases:
            for variant in resolved.variants:
                if variant.baseline:
                    continue
                comp = run.comparisons.get((variant.id, case.id))
                if comp is None or comp.get("errors"):
                    return False
    return True
