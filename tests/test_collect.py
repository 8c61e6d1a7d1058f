"""The collector's record of an attempt's artifacts: looked for only where a client could have
written them (mst.collect, docs/run-directory.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.helpers import basic_eval, write_eval

import mst.collect
from mst.clients.base import AttemptOutcome, AttemptRequest
from mst.collect import AttemptSpec, Collector, all_attempts
from mst.config.resolve import resolve_eval
from mst.endings import COMPLETED
from mst.session.redact import Redactor


class _Client:
    """Writes a file under its artifacts folder when ``write``; never reads the folder otherwise."""

    def __init__(self, write: bool) -> None:
        self.write = write

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        if self.write:
            request.artifacts_dir.mkdir(parents=True)
            (request.artifacts_dir / "out.txt").write_text("x")
        return AttemptOutcome(COMPLETED, "42")

    async def aclose(self) -> None:
        return None


def _collect(tmp_path: Path, write: bool) -> dict[str, Any]:
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(trials=1)))
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=lambda r: None)
    variant = resolved.variants[0]
    collector._clients[variant.id] = _Client(write)  # type: ignore[assignment]
    return asyncio.run(collector.attempt(AttemptSpec(variant, resolved.cases[0], 0)))


def test_a_client_that_wrote_artifacts_has_them_recorded(tmp_path: Path) -> None:
    record = _collect(tmp_path, write=True)
    assert record["artifacts"] == "artifacts/base/c1/0"
    assert (tmp_path / "run" / record["artifacts"] / "out.txt").read_text() == "x"


def test_a_client_that_never_read_its_artifacts_folder_has_none(tmp_path: Path) -> None:
    record = _collect(tmp_path, write=False)
    assert record["artifacts"] is None and not (tmp_path / "run" / "artifacts").exists()
    assert (tmp_path / "run" / record["transcript"]).is_file()


# The deadline is armed only once an attempt waits (mst.collect._resumed): an attempt that
# waits past it still ends as mst's deadline, and one that never waits is never cut.


class _Waiting:
    """Waits ``seconds`` (``steps`` times), then answers; ``swallow`` catches the cancellation
    and raises its own error instead, as a client's cleanup might."""

    def __init__(self, seconds: float, steps: int = 1, swallow: bool = False) -> None:
        self.seconds, self.steps, self.swallow = seconds, steps, swallow
        self.cancelled = False

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        try:
            for _ in range(self.steps):
                await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            if self.swallow:
                raise RuntimeError("cleanup failed") from None
            raise
        return AttemptOutcome(COMPLETED, "42")

    async def aclose(self) -> None:
        return None


class _Raising:
    """Raises ``exc`` without ever waiting."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        raise self.exc

    async def aclose(self) -> None:
        return None


class _FutureClient:
    """A plugin whose ``attempt`` is a plain function handing back a future, not a coroutine."""

    def attempt(self, request: AttemptRequest) -> asyncio.Future[AttemptOutcome]:
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, future.set_result, AttemptOutcome(COMPLETED, "7"))
        return future

    async def aclose(self) -> None:
        return None


def _collect_with(tmp_path: Path, client: Any, deadline: float) -> dict[str, Any]:
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(trials=1)))
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=lambda r: None)
    collector._deadline = deadline
    variant = resolved.variants[0]
    collector._clients[variant.id] = client
    return asyncio.run(collector.attempt(AttemptSpec(variant, resolved.cases[0], 0)))


def test_an_attempt_that_waits_past_the_deadline_ends_as_the_deadline(tmp_path: Path) -> None:
    client = _Waiting(0.02, steps=50)  # its first wait starts the timer; a later one passes it
    record = _collect_with(tmp_path, client, deadline=0.1)
    assert client.cancelled
    assert record["ending"] == {"kind": "infrastructure", "what": "deadline", "retryable": True,
                                "why": "the attempt passed mst's per-attempt deadline"}


def test_the_deadline_counts_from_before_the_first_step(tmp_path: Path) -> None:
    client = _Waiting(5.0)
    record = _collect_with(tmp_path, client, deadline=0.05)
    assert client.cancelled and record["ending"]["what"] == "deadline"
    assert record["durationMs"] < 2000


def test_a_client_failing_on_its_cancellation_ends_with_its_own_error(tmp_path: Path) -> None:
    # As under asyncio.timeout: the timer's cancellation never came back, so it is the client's error.
    client = _Waiting(5.0, swallow=True)
    record = _collect_with(tmp_path, client, deadline=0.05)
    assert client.cancelled
    assert record["ending"]["what"] == "client-app"
    assert record["ending"]["why"] == "client raised RuntimeError: cleanup failed"


def test_an_attempt_that_waits_and_answers_in_time_is_completed(tmp_path: Path) -> None:
    record = _collect_with(tmp_path, _Waiting(0.001, steps=3), deadline=5.0)
    assert record["ending"] == {"kind": "trial", "outcome": "completed"} and record["answer"] == "42"


def test_a_client_raising_timeout_itself_is_not_the_deadline(tmp_path: Path) -> None:
    record = _collect_with(tmp_path, _Raising(TimeoutError("its own")), deadline=5.0)
    assert record["ending"]["what"] == "network"  # socket.timeout is TimeoutError (mst.endings)
    assert record["ending"]["why"] == "TimeoutError: its own"


def test_an_awaitable_that_is_not_a_coroutine_is_awaited_under_the_deadline(tmp_path: Path) -> None:
    record = _collect_with(tmp_path, _FutureClient(), deadline=5.0)
    assert record["ending"]["outcome"] == "completed" and record["answer"] == "7"


def test_a_cancelled_run_cancels_a_waiting_attempt(tmp_path: Path) -> None:
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(trials=1)))
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=lambda r: None)
    variant = resolved.variants[0]
    client = _Waiting(5.0)
    collector._clients[variant.id] = client  # type: ignore[assignment]

    async def main() -> None:
        task = asyncio.ensure_future(collector.attempt(AttemptSpec(variant, resolved.cases[0], 0)))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the attempt was not cancelled")

    asyncio.run(main())
    assert client.cancelled


# Workers running attempts that never wait give the event loop a turn every few milliseconds
# (mst.collect._TURN_EVERY_S), not after every attempt: a Ctrl-C still stops such a run at once.


def _never_waiting_run(tmp_path: Path, trials: int) -> tuple[Collector, list[AttemptSpec]]:
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(trials=trials)))
    collector = Collector(resolved, tmp_path / "run", secrets={}, redactor=Redactor(), on_attempt=lambda r: None)
    for variant in resolved.variants:
        collector._clients[variant.id] = _Client(write=False)  # type: ignore[assignment]
    return collector, list(all_attempts(resolved))


def test_attempts_that_never_wait_do_not_each_give_the_loop_a_turn(tmp_path: Path, monkeypatch: Any) -> None:
    collector, specs = _never_waiting_run(tmp_path, trials=100)  # 400 attempts
    turns = []
    sleep = asyncio.sleep
    ticks = iter(range(10**6))
    # The workers' clock steps a tenth of the turn interval per reading (one reading an attempt).
    monkeypatch.setattr("mst.collect._clock", lambda: next(ticks) * mst.collect._TURN_EVERY_S / 10)

    async def counted(delay: float) -> None:
        turns.append(delay)
        await sleep(delay)

    monkeypatch.setattr("mst.collect.asyncio.sleep", counted)
    asyncio.run(collector.run(specs))
    assert len(turns) <= len(specs) // 5, len(turns)  # one a turn interval, not one an attempt


def test_a_cancelled_run_of_attempts_that_never_wait_stops_before_the_end(tmp_path: Path) -> None:
    collector, specs = _never_waiting_run(tmp_path, trials=2000)  # 8,000 attempts: ~0.5 s or more
    done: list[dict[str, Any]] = []
    collector.on_attempt = done.append

    async def main() -> None:
        task = asyncio.ensure_future(collector.run(specs))
        await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the run was not cancelled")

    asyncio.run(main())
    assert 0 < len(done) < len(specs) // 2, len(done)
