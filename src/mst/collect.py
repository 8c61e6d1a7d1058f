"""Collecting: run attempts with bounded concurrency, decide each ending once, journal it.

This is the one place a producer's ending becomes the stored one (via
:func:`mst.endings.stored_ending`). Each finished attempt's transcript is written (redacted)
before its journal line, so a crash between the two only loses an attempt resume redoes.
"""

from __future__ import annotations

import asyncio
import os
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mst import endings
from mst.clients.base import AttemptOutcome, AttemptRequest, Client, TranscriptRecorder
from mst.clients.registry import client_class
from mst.config.models import VariantConfig
from mst.config.resolved import ResolvedCase, ResolvedEval
from mst.config.secrets import only, variant_secret_names
from mst.runs.layout import RunPaths
from mst.session.events import SESSION_RESULT
from mst.session.io import write_transcript
from mst.session.redact import Redactor

OnAttempt = Callable[[dict[str, Any]], None]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class AttemptSpec:
    variant: VariantConfig
    case: ResolvedCase
    trial: int
    try_number: int = 1


def all_attempts(resolved: ResolvedEval) -> Iterator[AttemptSpec]:
    """Every attempt of an eval, case-major so a case's variants finish close together."""
    variants = resolved.variants  # a property: read once, not once a case
    for case in resolved.cases:
        for trial in range(case.trials):
            for variant in variants:
                yield AttemptSpec(variant, case, trial)


class Collector:
    """Runs attempts for one eval into one run directory."""

    def __init__(
        self,
        resolved: ResolvedEval,
        run_root: Path,
        *,
        secrets: Mapping[str, str],
        redactor: Redactor,
        on_attempt: OnAttempt,
        concurrency: int | None = None,
    ) -> None:
        self.resolved = resolved
        self.root = run_root
        # Each client gets only the secrets its variant names (mst.config.secrets).
        self._secrets = {v.id: only(secrets, variant_secret_names(v)) for v in resolved.variants}
        self.redactor = redactor
        self.on_attempt = on_attempt
        self.concurrency = concurrency or resolved.config.concurrency
        self._clients: dict[str, Client] = {}
        self._root = os.fspath(run_root)  # per-attempt paths as strings: pathlib costs µs per join
        self._deadline = resolved.config.deadlineSeconds
        self._seed = resolved.config.seed

    def _client(self, variant: VariantConfig) -> Client:
        client = self._clients.get(variant.id)
        if client is None:
            cls = client_class(variant.client)
            settings = self.resolved.client_settings.get(variant.id)
            client = cls(variant, settings, self.resolved.base_dir)
            self._clients[variant.id] = client
        return client

    async def run(self, specs: Iterable[AttemptSpec]) -> None:
        """Pull attempts from ``specs`` with a fixed pool of workers: memory stays flat."""
        iterator = iter(specs)
        turn_due = _clock() + _TURN_EVERY_S  # shared: the loop's turns, whichever worker gives them

        async def worker() -> None:
            nonlocal turn_due
            for spec in iterator:
                self.on_attempt(await self.attempt(spec))
                # An attempt that never waited (an offline model) never gave the loop a turn:
                # without one, a Ctrl-C (asyncio.run cancels the main task) would wait for the
                # last attempt, and another worker's answered request for its turn. One turn
                # every _TURN_EVERY_S serves both, and costs less than one per attempt did.
                now = _clock()
                if now >= turn_due:
                    turn_due = now + _TURN_EVERY_S
                    await asyncio.sleep(0)

        try:
            await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        finally:
            for client in self._clients.values():
                await client.aclose()
            self._clients.clear()

    async def attempt(self, spec: AttemptSpec) -> dict[str, Any]:
        variant, case, trial = spec.variant, spec.case, spec.trial
        recorder = TranscriptRecorder(variant.client)
        deadline = self._deadline
        artifacts_rel = RunPaths.artifacts_rel(variant.id, case.id, trial)
        prompt, expected, metadata = case.task()
        request = AttemptRequest(
            case.id, prompt, expected, metadata, variant, trial, spec.try_number, self._seed,
            deadline, f"{self._root}/{artifacts_rel}", recorder, self._secrets.get(variant.id, _NO_SECRETS),
            case.mock,
        )
        started, started_at = time.monotonic(), time.time()
        produced: endings.Ending | BaseException
        outcome: AttemptOutcome | None = None
        deadline_passed = False
        timer: asyncio.Timeout | None = None
        try:
            running = self._client(variant).attempt(request)
            if not isinstance(running, types.CoroutineType):  # another awaitable, from a plugin
                running = _awaited(running)
            try:
                waiting = running.send(None)
            except StopIteration as done:  # it never waited: no timer could have fired (see _resumed)
                finished: AttemptOutcome = done.value
            else:
                # The deadline counts from ``started``, on the loop's clock; the loop is looked up
                # only here (each look-up is a getpid system call, per attempt).
                loop_now = asyncio.get_running_loop().time()
                when = loop_now + deadline - (time.monotonic() - started)
                async with asyncio.timeout_at(when) as timer:
                    finished = await _resumed(running, waiting)
            outcome = finished
            produced = outcome.ending
        except TimeoutError as exc:
            deadline_passed = timer is not None and timer.expired()
            produced = exc
        except Exception as exc:
            produced = exc
        ending = endings.stored_ending(produced, deadline_passed=deadline_passed)
        artifacts = artifacts_rel if request.artifacts_read else None
        record = self._record(spec, recorder, ending, outcome, time.monotonic() - started, artifacts)
        record["startedAt"] = round(started_at * 1000, 3)  # Unix ms: anchors the transcript's times (docs/otlp.md)
        return record

    def _record(
        self, spec: AttemptSpec, recorder: TranscriptRecorder, ending: endings.Ending,
        outcome: AttemptOutcome | None, seconds: float, artifacts_rel: str | None,
    ) -> dict[str, Any]:
        """The attempt's record, its transcript written first; ``artifacts_rel`` is None when the
        client never read its artifacts folder (then it wrote none: no directory is looked at)."""
        variant_id, case_id, trial = spec.variant.id, spec.case.id, spec.trial
        events = recorder.events
        answer = outcome.answer if outcome else None
        ending_json = endings.to_json(ending)
        if events[-1]["type"] != SESSION_RESULT:
            recorder.emit(SESSION_RESULT, {"answer": answer, "ending": endings.to_json(ending),
                                           "durationMs": int(seconds * 1000)})
        redactor = self.redactor
        active = redactor.active
        if active:
            events = [redactor.value(e) for e in events]
        transcript_rel = RunPaths.transcript_rel(variant_id, case_id, trial)
        write_transcript(f"{self._root}/{transcript_rel}", events)
        has_artifacts = artifacts_rel is not None and _non_empty(f"{self._root}/{artifacts_rel}")
        if has_artifacts and active:
            redactor.tree(Path(f"{self._root}/{artifacts_rel}"))
        record: dict[str, Any] = {
            "variant": variant_id, "case": case_id, "trial": trial, "try": spec.try_number,
            "ending": ending_json,
            "infrastructureError": endings.infrastructure_error(ending),
            "answer": redactor.text(answer) if active and isinstance(answer, str) else answer,
            "transcript": transcript_rel,
            "artifacts": artifacts_rel if has_artifacts else None,
            "durationMs": round(seconds * 1000, 3),
            "usage": outcome.usage if outcome else {},
        }
        if outcome and outcome.diagnostics:
            record["diagnostics"] = redactor.value(outcome.diagnostics) if active else outcome.diagnostics
        if active and isinstance(ending, endings.Infrastructure):
            record["ending"]["why"] = redactor.text(ending.why)
            record["infrastructureError"] = redactor.text(record["infrastructureError"])
        return record


_NO_SECRETS: Mapping[str, str] = {}
# How long a worker runs attempts that never wait before it gives the event loop a turn anyway.
_TURN_EVERY_S = 0.002
_clock = time.monotonic  # the workers' clock for their turns (a test steps it)


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


@types.coroutine
def _resumed(running: Coroutine[Any, Any, _T], waiting: Any) -> Generator[Any, Any, _T]:
    """Await the rest of ``running``, which has taken its first step and is ``waiting`` on a
    future: what ``await running`` would have done from there (PEP 380's delegation: values
    sent and exceptions thrown in, a cancellation included, reach ``running`` as they are).

    Why the first step is taken outside the attempt's deadline: the deadline's timer can only
    fire when the event loop runs, and the loop runs only once the attempt waits. An attempt
    that finishes without ever waiting (an offline model: most of a bench run) ends exactly
    as it would under the timer, and arming and cancelling one per attempt cost ~10 µs (about
    7% of collecting, bench/perf16_collect.md). An attempt that waits is put under the same
    deadline (:func:`asyncio.timeout_at`, with the time taken before its first step), so what
    ``mst.endings.stored_ending`` is told when the deadline passes is unchanged.
    """
    while True:
        thrown: BaseException | None = None
        try:
            sent = yield waiting
        except GeneratorExit:
            running.close()
            raise
        except BaseException as exc:
            thrown = exc
        # Outside the except block: an exception ``running`` raises gets no implicit context
        # from this frame (``endings.from_exception`` follows ``__context__``).
        try:
            waiting = running.send(sent) if thrown is None else running.throw(thrown)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            thrown = None


def _non_empty(path: str | Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False
