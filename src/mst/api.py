"""The commands' library side: run an eval, resume a run, regrade a run.

Each function composes the phases (collect → grade → summarize) over one run directory and
returns what the CLI prints. Nothing here prints or parses arguments.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mst import __version__, endings
from mst.collect import AttemptSpec, Collector, all_attempts
from mst.config.errors import Problem, UserError
from mst.config.models import EvalConfig
from mst.config.resolve import resolve_eval
from mst.config.resolved import ResolvedEval
from mst.config.secrets import check_named, judge_secret_names, load_secrets, only
from mst.errors import EXIT_INCOMPLETE, EXIT_OK
from mst.grading.context import GradingContext
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess, LocalLeases
from mst.grading.judge_auth import CommandToken, command_token
from mst.grading.phase import grade_run, plan_grading
from mst.grading.preflight import Keys, check, judges_of, needed_env, require
from mst.runs.attempts import AttemptRecord
from mst.runs.debris import run_lock, sweep_all
from mst.runs.files import Journal
from mst.runs.layout import RUN_SCHEMA, Key, RunPaths, create_run_dir, link_attempt_files, write_latest
from mst.runs.meta import GradingMeta, RunMeta
from mst.runs.progress import Progress, Silent
from mst.runs.run import Run, open_run
from mst.runs.summary import Summary, finalize
from mst.session.redact import Redactor
from mst.statistics import CONFIDENCE

if TYPE_CHECKING:
    from mst.report.trials import ChunkStream
    from mst.runners.base import Runner, Work
    from mst.runners.sharded import Sharded

@dataclass
class Outcome:
    run: Run
    summary: Summary  # summary.json without its per-case rows (read the file for those)
    config: EvalConfig  # the eval as it was run: what the CLI reads after the run (results.store)
    notes: list[str] = dataclasses.field(default_factory=list)  # what went wrong in shards, for the CLI to show
    notices: list[str] = dataclasses.field(default_factory=list)  # what resume did beyond the usual, to show

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.summary.complete else EXIT_INCOMPLETE


def run_eval(
    eval_path: Path,
    *,
    runs_dir: Path | None = None,
    no_grade: bool = False,
    concurrency: int | None = None,
    secrets_file: Path | None = None,
    progress: Progress | None = None,
    runner: str | None = None,
    runner_options: Sequence[str] = (),
    confidence: float = CONFIDENCE,
) -> Outcome:
    """Collect (locally, or in shards on ``runner``) and grade (on the coordinator) an eval."""
    resolved = resolve_eval(eval_path)
    secrets = load_secrets(secrets_file)
    check_named(resolved, secrets, secrets_file, judges=not no_grade)
    if not no_grade:  # before anything is collected: grading would fail after the expensive part
        _preflight(resolved, secrets, sharded=False)
    with _opened(runner, runner_options, "collect") as opened, ExitStack() as held:
        target = runs_dir or _default_runs_dir(resolved)
        sweep_all(None, target)
        held.callback(sweep_all, None, target, closing=True)  # again at the end: a killed run's workers end
        made: list[RunMeta] = []

        def populate(staging: RunPaths, run_id: str) -> None:
            made.append(RunMeta.from_json(_meta(run_id, resolved, no_grade=no_grade)))
            Run(staging, made[0]).write()

        paths, lock = create_run_dir(target, resolved.config.name, populate)
        held.callback(lock.release)
        run = Run(paths, made[0])
        write_latest(paths)
        count = len(resolved.variants) * sum(resolved.cases.trials)
        return _collect_and_grade(run, resolved, all_attempts(resolved), count, secrets, concurrency, progress,
                                  opened, confidence=confidence)


def resume_run(
    run_dir: Path,
    *,
    concurrency: int | None = None,
    secrets_file: Path | None = None,
    progress: Progress | None = None,
    runner: str | None = None,
    runner_options: Sequence[str] = (),
    confidence: float = CONFIDENCE,
) -> Outcome:
    """Collect what is missing and what a retry can help, then grade what is ungraded."""
    with run_lock(run_dir):
        run = open_run(run_dir, repair=True)
        resolved = _resolve_for(run)
        secrets = load_secrets(secrets_file)
        check_named(resolved, secrets, secrets_file, judges=not run.meta.no_grade)
        if not run.meta.no_grade:
            _preflight(resolved, secrets, sharded=False)
        return _resume(run, resolved, secrets, concurrency, progress, runner, runner_options, confidence)


def _resume(run: Run, resolved: ResolvedEval, secrets: dict[str, str], concurrency: int | None,
            progress: Progress | None, runner: str | None, runner_options: Sequence[str],
            confidence: float) -> Outcome:
    with _opened(runner, runner_options, "collect") as opened:
        lost: list[str] = []
        specs = list(_to_resume(run, resolved, lost))
        outcome = _collect_and_grade(run, resolved, specs, len(specs), secrets, concurrency, progress, opened,
                                     confidence=confidence)
        outcome.notices += _lost_note(lost)
        return outcome


def grade(
    run_dir: Path,
    *,
    eval_path: Path | None = None,
    resume: bool = False,
    runs_dir: Path | None = None,
    secrets_file: Path | None = None,
    progress: Progress | None = None,
    runner: str | None = None,
    runner_options: Sequence[str] = (),
    confidence: float = CONFIDENCE,
) -> Outcome:
    """Regrade a run into a new run (``regradeOf``), or with ``resume`` finish one in place.

    With ``runner``, judges run in shards and the coordinator then grades with their records
    (a recorded source), so every file is written by the same code as a local regrade.
    """
    with ExitStack() as held:
        if resume:
            held.enter_context(run_lock(run_dir))  # in place: this command writes the run
        source = open_run(run_dir, repair=resume, grading=resume)  # a regrade grades afresh
        resolved = resolve_eval(eval_path) if eval_path else _resolve_for(source, check_digest=False)
        secrets = load_secrets(secrets_file)
        check_named(resolved, secrets, secrets_file, clients=False)
        _preflight(resolved, secrets, sharded=runner is not None)
        return _grade(source, resolved, secrets, resume=resume, runs_dir=runs_dir, progress=progress or Silent(),
                      runner=runner, runner_options=runner_options, held=held, confidence=confidence)


def _grade(source: Run, resolved: ResolvedEval, secrets: dict[str, str], *, resume: bool, runs_dir: Path | None,
           progress: Progress, runner: str | None, runner_options: Sequence[str], held: ExitStack,
           confidence: float) -> Outcome:
    context = _context(resolved, secrets)
    lost: list[str] | None = None  # the attempts whose transcript is gone, when linking found them
    with _opened(runner, runner_options, "grade") as opened:
        if resume:
            plan = plan_grading(source, resolved, context, resume=True)
            run = source
            run.meta = run.meta.with_phases(grade="partial").with_grading(_grading_meta(resolved, context))
            run.write()
        else:
            lost = []
            run = _new_regrade(source, resolved, runs_dir, context, held, lost)  # written with its grading metadata
            plan = plan_grading(run, resolved, context, resume=False)
        sharded = None
        if opened is not None:
            from mst.runners.sharded import grade_in_shards

            auth = context.access.token if isinstance(context.access.token, CommandToken) else None
            sharded = grade_in_shards(opened, run, resolved, plan, secrets, progress, auth)
            run.meta = run.meta.with_grading_runner(sharded.runner)
        # Sharded, the coordinator replays the shards' records: it runs no judge and no grader.
        chunks = _report_chunks(run, resolved)
        grade_run(run, resolved, plan, context, secrets=secrets, progress=progress,
                  source=sharded.source if sharded else None, chunks=chunks)
        outcome = _finish(run, resolved, sharded, confidence, chunks)
        if lost is None:
            lost = [_label(k) for k in source.attempts if _transcript_lost(source, k)]
        outcome.notices += _lost_note(lost, collected=False)
        return outcome


def _context(resolved: ResolvedEval, secrets: dict[str, str]) -> GradingContext:
    """The run's grading context, made once per command: its redactor, and the judges' access
    (the eval's ``judgeLimits``, their keys, ``MST_LLM_AUTH_COMMAND``'s token, which the
    redactor learns as each one is made)."""
    redactor = Redactor(secrets.values(), resolved.config.redact)
    token = command_token()
    if token is not None:
        token.on_new(lambda made: redactor.add([made.value]))
    names = [*judge_secret_names(resolved), *needed_env(resolved)]
    access = JudgeAccess(LocalLeases(resolved.config.judgeLimits), only(secrets, names), token)
    return GradingContext.of(resolved, redactor, access)


def _preflight(resolved: ResolvedEval, secrets: dict[str, str], *, sharded: bool) -> None:
    """The judge preflight (docs/grading.md): stop before anything runs when a judge cannot.

    Sharded, only the keys are checked here, against the secrets file (what a worker is given);
    each worker checks programs and modules on its own machine before it grades. The auth
    command, when one is set, is run once: a broken one stops here, not at the first judge."""
    command = command_token()
    if command is not None:
        command.fresh()
    token = command is not None
    if sharded:
        keys = Keys(lambda name: name in secrets or (name == AUTH_TOKEN and token), "the secrets file")
    else:
        keys = Keys(lambda name: name in secrets or name in os.environ or (name == AUTH_TOKEN and token),
                    "the environment or the secrets file")
    require(check(judges_of(resolved), keys, resolved.base_dir, keys_only=sharded), str(resolved.path))


# ---------------------------------------------------------------------------------------------


def _collect_and_grade(
    run: Run, resolved: ResolvedEval, specs: Iterable[AttemptSpec], count: int, secrets: dict[str, str],
    concurrency: int | None, progress: Progress | None, runner: Runner | None = None, *,
    confidence: float = CONFIDENCE,
) -> Outcome:
    """``specs`` is consumed once, lazily where it can be: a plan is not held in memory."""
    progress = progress or Silent()
    redactor = Redactor(secrets.values(), resolved.config.redact)
    progress.start("collect", count)
    sharded = None
    with Journal(run.paths.attempts) as journal:
        def on_attempt(record: dict[str, Any]) -> None:
            attempt = AttemptRecord.from_json(record)  # checks the key's types: its key is read as it is
            run.attempts.put(attempt.key, attempt, journal.append(record))
            progress.advance()

        if runner is None:
            collector = Collector(resolved, run.paths.root, secrets=secrets, redactor=redactor,
                                  on_attempt=on_attempt, concurrency=concurrency)
            asyncio.run(collector.run(specs))
        else:
            from mst.runners.sharded import collect_in_shards

            sharded = collect_in_shards(runner, resolved, run, specs, secrets, on_attempt, concurrency)
            run.meta = run.meta.with_runner(sharded.runner)
    progress.finish()
    if sharded is not None and sharded.interrupted:
        run.meta = run.meta.with_phases(collect="partial")
        return _finish(run, resolved, sharded, confidence)
    run.meta = run.meta.with_phases(collect="complete" if _all_collected(run, resolved) else "partial")
    if run.meta.no_grade:
        run.meta = run.meta.with_phases(grade="skipped")
    else:
        context = _context(resolved, secrets)
        run.meta = run.meta.with_grading(_grading_meta(resolved, context))
        run.write()
        plan = plan_grading(run, resolved, context, resume=True)
        chunks = _report_chunks(run, resolved)
        grade_run(run, resolved, plan, context, secrets=secrets, progress=progress, chunks=chunks)
        return _finish(run, resolved, sharded, confidence, chunks)
    return _finish(run, resolved, sharded, confidence)


def _report_chunks(run: Run, resolved: ResolvedEval) -> ChunkStream:
    """The report's trial chunks, written as grading goes case by case: the report then reads
    no transcript again (docs/report.md). The cases' (id, trials) are read from the resolved
    columns: a list of tuples of them was ~70 bytes a case more at once (issue 16)."""
    from mst.report.html import stream_chunks

    return stream_chunks(run, resolved.cases.id_trials(), [v.id for v in resolved.variants])


def _finish(run: Run, resolved: ResolvedEval, sharded: Sharded | None = None,
            confidence: float = CONFIDENCE, chunks: ChunkStream | None = None) -> Outcome:
    from mst.report.html import Matrix, write_report

    # The page's case matrix made from summary.json's rows as they are written, not read back.
    matrix = Matrix.start([v.id for v in resolved.variants],
                          (case for case, _ in chunks.cases) if chunks is not None else None)
    summary = finalize(run, resolved, confidence, on_row=matrix.add_row)
    run.meta = run.meta.updated(_now())
    run.write()
    # after summary.json: the page shows what the terminal prints (docs/report.md)
    write_report(run, chunks, matrix.done())
    write_latest(run.paths)
    if sharded is not None and sharded.interrupted:
        raise KeyboardInterrupt  # after the run is written: it is resumable
    return Outcome(run, summary, resolved.config, sharded.notes if sharded else [])


@contextmanager
def _opened(name: str | None, options: Sequence[str], work: Work) -> Iterator[Runner | None]:
    """The runner ``name``, opened (and refused when it cannot do ``work``), closed after."""
    if name is None:
        yield None
        return
    from mst.runners.registry import open_runner

    runner = open_runner(name, options, work)
    try:
        yield runner
    finally:
        runner.close()


def _to_resume(run: Run, resolved: ResolvedEval, lost: list[str]) -> Iterable[AttemptSpec]:
    """Missing attempts, retryable infrastructure failures, and attempts whose transcript is no
    longer on disk (their keys go to ``lost``); never a trial that still has its evidence.

    An attempt collected again is a new try of the same attempt: its record replaces the
    earlier one (run.json holds each attempt once) and its grading is redone.
    """
    for spec in all_attempts(resolved):
        key = (spec.variant.id, spec.case.id, spec.trial)
        if key not in run.attempts:
            yield spec
            continue
        retry = endings.is_retryable(run.ending(key))
        if not retry and _transcript_lost(run, key):
            retry = True
            lost.append(_label(key))
        if retry:
            yield AttemptSpec(spec.variant, spec.case, spec.trial, run.attempts[key].try_number + 1)


def _transcript_lost(run: Run, key: Key) -> bool:
    """The attempt's record names a transcript that is no longer on disk: its evidence is gone."""
    transcript = run.attempts[key].transcript
    return bool(transcript) and not os.path.exists(f"{run.root}/{transcript}")


def _label(key: Key) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


def _lost_note(lost: list[str], *, collected: bool = True) -> list[str]:
    if not lost:
        return []
    shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    if collected:
        return [f"{len(lost)} attempt(s) had lost their transcript and were collected again as a new try: {shown}"]
    return [f"{len(lost)} attempt(s) have lost their transcript (their evidence is unavailable): {shown}; "
            "`mst run --resume RUN` collects them again"]


def _all_collected(run: Run, resolved: ResolvedEval) -> bool:
    """Every attempt of the eval has a record: its keys checked from the cases' id and trials
    columns, with no :class:`AttemptSpec` per attempt and no case made per row."""
    variants = [v.id for v in resolved.variants]
    return run.attempts.holds_all((variant, case_id, trial) for case_id, trials in resolved.cases.id_trials()
                                  for trial in range(trials) for variant in variants)


def _resolve_for(run: Run, *, check_digest: bool = True) -> ResolvedEval:
    eval_path = Path(run.meta.eval.path)
    if not eval_path.is_file():
        raise UserError(Problem(str(run.paths.run_json), f"the run's eval file {eval_path} no longer exists; "
                                "pass --eval FILE", "eval.path"))
    resolved = resolve_eval(eval_path)
    if check_digest and resolved.digest != run.meta.eval.digest:
        raise UserError(Problem(str(eval_path), "the eval file changed since this run started; resuming would "
                                "mix two evals. Start a new run, or regrade with `mst grade`"))
    return resolved


def _new_regrade(source: Run, resolved: ResolvedEval, runs_dir: Path | None, context: GradingContext,
                 held: ExitStack, lost: list[str]) -> Run:
    """A new run of the source's attempts, their files hard-linked; ``lost`` gets the attempts
    whose transcript is no longer on disk (found while linking: no second pass over the run)."""
    if source.meta.phases.collect != "complete" and not source.attempts:
        raise UserError(Problem(str(source.paths.root), "the run has no collected attempts to grade"))
    run_case_ids = source.meta.case_ids
    eval_case_ids = set(resolved.cases.ids)
    if run_case_ids != eval_case_ids:
        raise UserError(Problem(str(resolved.path), "the eval's cases differ from the run's "
                                f"({_diff(run_case_ids, eval_case_ids)}); regrade with the eval the run used"))
    staged: list[Run] = []

    def populate(staging: RunPaths, run_id: str) -> None:
        collect = (source.meta.head("phases") or {}).get("collect", "complete")  # no decode of every case
        meta = {**_meta(run_id, resolved, no_grade=False), "regradeOf": source.id,
                "phases": {"collect": collect, "grade": "partial"},
                "runner": dict(source.meta.runner), "grading": _grading_meta(resolved, context).to_json()}
        meta["eval"]["collectedDigest"] = source.meta.eval.digest or None
        run = Run(staging, RunMeta.from_json(meta))
        run.adopt_attempts(source.attempts)  # the same records: shared, not copied
        for key, record in run.attempts.items():
            if not link_attempt_files(source.paths.root, staging.root, record.transcript, record.artifacts):
                lost.append(_label(key))
        run.write()
        staged.append(run)

    target = runs_dir or source.paths.root.parent
    sweep_all(None, target)
    held.callback(sweep_all, None, target, closing=True)
    paths, lock = create_run_dir(target, resolved.config.name, populate)
    held.callback(lock.release)
    run = staged[0]
    run.paths = paths
    return run


def _diff(a: set[str], b: set[str]) -> str:
    parts = []
    if a - b:
        parts.append("only in the run: " + ", ".join(sorted(a - b)[:5]))
    if b - a:
        parts.append("only in the eval: " + ", ".join(sorted(b - a)[:5]))
    return "; ".join(parts)


def _default_runs_dir(resolved: ResolvedEval) -> Path:
    if resolved.config.runsDir:
        return (resolved.base_dir / resolved.config.runsDir).resolve()
    return Path("runs")


def _meta(run_id: str, resolved: ResolvedEval, *, no_grade: bool) -> dict[str, Any]:
    """A new run's head, for :meth:`RunMeta.from_json` only: its ``cases`` an iterator."""
    cfg = resolved.config
    return {
        "schema": RUN_SCHEMA,
        "id": run_id,
        "mst": __version__,
        "createdAt": _now(),
        "eval": {"name": cfg.name, "path": str(resolved.path.resolve()), "digest": resolved.digest},
        "seed": cfg.seed,
        "variants": [{"id": v.id, "client": v.client, "model": v.model, "baseline": v.baseline}
                     for v in cfg.variants],
        "cases": ({"id": i, "trials": t} for i, t in resolved.cases.id_trials()),  # packed as made: see RunMeta
        "phases": {"collect": "partial", "grade": "skipped" if no_grade else "partial"},
        "noGrade": no_grade,
        "metrics": list(cfg.metrics),
        "runner": {"name": "local"},
        "regradeOf": None,
    }


def _grading_meta(resolved: ResolvedEval, context: GradingContext) -> GradingMeta:
    """What the grading was done with: resume refuses when this set changes."""
    return GradingMeta({"name": "local"}, "live", context.judges, resolved.pairwise.id if resolved.pairwise else None,
                       tuple(context.grader_ids))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
