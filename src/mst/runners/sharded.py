"""Collecting and grading in shards: bundles out, results back, then the local code path.

These compose ``collect`` and ``grading`` with the runner's transport and add no logic of their
own: a collect shard's attempt records reach the run through the same ``on_attempt`` (journal)
callback as local collecting, and what a grade shard computed — assertions, judge and pairwise
calls, the deterministic graders' results — becomes a :class:`~mst.grading.recorded.RecordedSource`
that the coordinator's ordinary ``grade_run`` replays, running no judge and no grader itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mst import endings
from mst.collect import AttemptSpec
from mst.config.resolved import ResolvedEval
from mst.config.secrets import judge_secret_names, only, variant_secret_names
from mst.fileio import read_json
from mst.grading.phase import GradePlan
from mst.grading.preflight import needed_env
from mst.grading.recorded import RecordedSource
from mst.runners.base import Runner, ShardSpec
from mst.runners.bundle import GradeWork, write_collect_bundle, write_grade_bundle
from mst.runners.coordinator import Coordinator, Shard, make_workdir
from mst.runners.protocol import Graded, TrialDone
from mst.runners.sharding import shard_of, split_cases
from mst.runs.progress import Progress
from mst.runs.run import Run, attempt_record
from mst.session.redact import Redactor

if TYPE_CHECKING:
    from mst.grading.judge_auth import CommandToken


@dataclass
class Sharded:
    """What a sharded phase leaves for the caller: the runner's record, and how it ended."""

    runner: dict[str, Any]
    interrupted: bool
    notes: list[str] = field(default_factory=list)
    source: RecordedSource | None = None


def grade_in_shards(runner: Runner, run: Run, resolved: ResolvedEval, plan: GradePlan,
                    secrets: dict[str, str], progress: Progress, auth: CommandToken | None = None) -> Sharded:
    """Grade ``plan`` in shards of whole cases; only cases with something to grade are sent.

    The eval's ``judgeLimits`` hold across the shards, and ``auth`` (``MST_LLM_AUTH_COMMAND``'s
    token) is made before any shard starts and kept fresh while they run (docs/shards.md)."""
    if auth is not None:
        auth.fresh()  # a failing command stops here (exit 2), before any shard starts
    count = runner.shard_count()
    wanted = dict.fromkeys([k[1] for k in plan.trials] + [case for _, case in plan.pairs])
    groups = split_cases(wanted, count)
    owned = make_workdir("grade")
    workdir = owned.path
    shards: list[Shard] = []
    for index, ids in enumerate(groups):
        if ids:
            chosen = set(ids)
            work = GradeWork(trials=[k for k in plan.trials if k[1] in chosen],
                             keep=[(k, {n: v.to_json() for n, v in kept.items()})
                                   for k, kept in plan.keep.items() if k[1] in chosen],
                             pairs=[p for p in plan.pairs if p[1] in chosen])
            folder = workdir / f"shard-{index + 1}" / "bundle"
            bundle = write_grade_bundle(folder, run, resolved, index, count, work, heartbeat=runner.options.heartbeat)
            shards.append(Shard(ShardSpec("grade", index, count, folder), bundle.plugins))
    by_index = {s.spec.index: s for s in shards}
    source = RecordedSource(lambda case: _missing(by_index[shard_of(case, count)]))
    staging = workdir / "results"

    def on_result(shard: Shard, message: TrialDone | Graded) -> None:
        if not isinstance(message, Graded) or shard.worker is None:
            raise ValueError(f"a grade shard sent a {message.type!r} message")
        shard.worker.copy_back(message.files, staging)
        for ref in message.files:
            source.add(read_json(staging / ref.path, "a grade shard's record")["calls"])
        progress.advance()

    progress.start("grade", len(plan.trials) + len(plan.pairs))
    try:
        names = [*judge_secret_names(resolved), *needed_env(resolved)]
        coordinator = Coordinator(runner, only(secrets, names), workdir, limits=resolved.config.judgeLimits, auth=auth)
        interrupted = coordinator.run(shards, on_result)
    finally:
        progress.finish()
        owned.close(keep=runner.options.keep)
    secret = {**secrets, **{f"auth {i}": t for i, t in enumerate(auth.issued if auth else [])}}
    meta = _runner_meta(runner, count, shards, owned.path, secret)
    return Sharded(meta, interrupted, _notes(shards, secret) + coordinator.auth_errors, source)


def _missing(shard: Shard) -> str:
    if shard.done is None:
        return f"Missing: grade shard {shard.spec.index + 1} ended before this case was graded"
    return f"Missing: grade shard {shard.spec.index + 1} sent no record of this grading"


def collect_in_shards(runner: Runner, resolved: ResolvedEval, run: Run, specs: Iterable[AttemptSpec],
                      secrets: dict[str, str], on_attempt: Callable[[dict[str, Any]], None],
                      concurrency: int | None) -> Sharded:
    """Collect ``specs`` in shards of whole cases; each record goes to ``on_attempt`` as it arrives."""
    count = runner.shard_count()
    groups: list[list[AttemptSpec]] = [[] for _ in range(count)]
    for spec in specs:
        groups[shard_of(spec.case.id, count)].append(spec)
    owned = make_workdir("collect")
    workdir = owned.path
    shards: list[Shard] = []
    expected: dict[int, set[tuple[str, str, int]]] = {}
    for index, group in enumerate(groups):
        if group:
            folder = workdir / f"shard-{index + 1}" / "bundle"
            bundle = write_collect_bundle(folder, resolved, index, count, group, heartbeat=runner.options.heartbeat,
                                          concurrency=concurrency)
            shards.append(Shard(ShardSpec("collect", index, count, folder), bundle.plugins))
            expected[index] = {(s.variant.id, s.case.id, s.trial) for s in group}

    def on_result(shard: Shard, message: TrialDone | Graded) -> None:
        if not isinstance(message, TrialDone) or shard.worker is None:
            raise ValueError(f"a collect shard sent a {message.type!r} message")
        record = message.record
        key = (message.key.variant, message.key.case, message.key.trial)
        if key not in expected[shard.spec.index] or (record["variant"], record["case"], record["trial"]) != key:
            raise ValueError(f"attempt {key} is not one of this shard's")
        shard.worker.copy_back(message.files, run.paths.root)
        on_attempt(attempt_record(record, endings.from_record(record)))

    names = [n for v in resolved.variants for n in variant_secret_names(v)]
    try:
        interrupted = Coordinator(runner, only(secrets, names), workdir).run(shards, on_result)
    finally:
        owned.close(keep=runner.options.keep)
    return Sharded(_runner_meta(runner, count, shards, owned.path, secrets), interrupted, _notes(shards, secrets))


def _runner_meta(runner: Runner, count: int, shards: list[Shard], workdir: Any, secrets: dict[str, str]
                 ) -> dict[str, Any]:
    meta: dict[str, Any] = {**runner.describe(), "shardCount": count, "shards": [s.describe() for s in shards]}
    if runner.options.keep:
        meta["workDir"] = str(workdir)
    redacted: dict[str, Any] = Redactor(secrets.values()).value(meta)
    return redacted


def _notes(shards: list[Shard], secrets: dict[str, str]) -> list[str]:
    redactor = Redactor(secrets.values())
    return [redactor.text(s.error) for s in shards if s.error is not None]
