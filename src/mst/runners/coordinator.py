"""The coordinator's side of shards: start them over a runner, speak the protocol, watch them.

For each shard it starts a worker, sends the bundle when the runner has no shared disk, checks
the worker's ``hello`` (its mst and plugin versions must equal ours, or the shard fails before
it is given its tokens, so before any judge or client runs), answers ``need-tokens``, copies
result files back as each ``trial`` / ``graded`` arrives (through ``on_result``), and notices a
worker that ends early, never says hello, or stops heartbeating. For grade shards it also holds
the eval's ``judgeLimits`` across all of them — one :class:`~mst.grading.judge_access.LeaseBroker`
answers every worker's ``lease`` / ``release`` / ``hold`` — and keeps the gateway token of
``MST_LLM_AUTH_COMMAND`` fresh, pushing each new one to every worker (docs/shards.md). A Ctrl-C sends ``cancel`` to
every worker, which finishes the case under way and stops; a second one ends them at once.
"""

from __future__ import annotations

import functools
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mst import __version__
from mst.config.errors import UserError
from mst.grading.judge_access import Lease, LeaseBroker
from mst.runners.base import Runner, ShardSpec, ShardWorker
from mst.runners.bundle import pack
from mst.runners.protocol import (
    AuthToken,
    BundleMessage,
    Cancel,
    Done,
    Graded,
    Hello,
    Hold,
    LeaseGranted,
    LeaseRelease,
    LeaseRequest,
    NeedTokens,
    PluginVersion,
    Tokens,
    TrialDone,
    WorkerError,
    encode,
    parse_worker,
)
from mst.runs.debris import OwnedDir, owned_dir

if TYPE_CHECKING:
    from mst.config.judge_limits import JudgeLimit
    from mst.grading.judge_auth import CommandToken

HEARTBEATS_MISSED = 6
AUTH_RETRY_SECONDS = 5.0  # a failed refresh is tried again this much later; the old token still holds


@dataclass
class Shard:
    spec: ShardSpec
    plugins: list[PluginVersion]  # what the bundle needs, at the coordinator's versions
    worker: ShardWorker | None = None
    hello: Hello | None = None
    done: Done | None = None
    error: str | None = None
    ended: bool = False
    started: float = 0.0
    last_seen: float = 0.0
    noise: list[str] = field(default_factory=list)
    hello_ms: float | None = None

    @property
    def label(self) -> str:
        return f"{self.spec.work} shard {self.spec.index + 1}"

    def describe(self) -> dict[str, Any]:
        """The shard as run.json records it: its machine, and why it failed if it did."""
        out: dict[str, Any] = {"shard": self.spec.index + 1,
                               "machine": self.hello.machine.model_dump() if self.hello else None}
        if self.hello_ms is not None:
            out["helloMs"] = self.hello_ms  # start to hello: what a shard costs before it works
        if self.done is not None:
            out.update(self.done.model_dump(exclude={"type"}))
        if self.error is not None:
            out["error"] = self.error
        return out


OnResult = Callable[[Shard, TrialDone | Graded], None]


class Coordinator:
    """Runs shards over one opened runner; ``workdir`` holds each shard's bundle and results."""

    def __init__(self, runner: Runner, secrets: dict[str, str], workdir: Path, *,
                 limits: Mapping[str, JudgeLimit] | None = None, auth: CommandToken | None = None) -> None:
        self.runner = runner
        self.secrets = secrets
        self.workdir = workdir
        self.broker = LeaseBroker(limits)
        self.auth = auth
        self.auth_errors: list[str] = []
        self._events: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self._next_grant: float | None = None  # monotonic time a rate cap or a hold next allows a grant
        self._auth_retry = 0.0

    def run(self, shards: list[Shard], on_result: OnResult) -> bool:
        """Run every shard to its end; True when a Ctrl-C cancelled them."""
        with _interrupts() as interrupts:
            for i, shard in enumerate(shards):
                if not interrupts:
                    self._start(i, shard)
                else:
                    shard.ended, shard.error = True, f"{shard.label}: not started (interrupted)"
            cancelled = 0
            while not all(s.ended for s in shards):
                self._step(shards, on_result)
                if len(interrupts) > cancelled:  # checked between messages: never mid-copy
                    cancelled = len(interrupts)
                    self._cancel_all(shards)
                    if cancelled > 1:
                        for shard in shards:
                            self._fail(shard, f"{shard.label}: stopped by a second Ctrl-C")
        for shard in shards:  # reap: each has said done or failed, so it is exiting
            if shard.worker is not None and shard.worker.wait(10) is None:
                shard.worker.stop()
        return bool(interrupts)

    def _start(self, i: int, shard: Shard) -> None:
        shard.started = shard.last_seen = time.monotonic()
        folder = self.workdir / f"shard-{shard.spec.index + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        try:
            worker = self.runner.start(shard.spec, folder)
        except Exception as exc:
            shard.error = f"{shard.label}: the runner could not start it: {type(exc).__name__}: {exc}"
            shard.ended = True
            return
        shard.worker = worker
        threading.Thread(target=self._read, args=(i, worker), name=f"mst-shard-{i + 1}", daemon=True).start()
        if not self.runner.shared_disk:
            worker.channel.send(encode(BundleMessage(archive=pack(shard.spec.bundle))))

    def _read(self, i: int, worker: ShardWorker) -> None:
        try:
            for line in worker.channel.lines():
                self._events.put((i, line))
        finally:
            self._events.put((i, None))

    def _step(self, shards: list[Shard], on_result: OnResult) -> None:
        timeout = 0.2 if self._next_grant is None else min(0.2, max(0.0, self._next_grant - time.monotonic()))
        try:
            i, line = self._events.get(timeout=timeout)
        except queue.Empty:
            pass
        else:
            shard = shards[i]
            shard.last_seen = time.monotonic()
            if line is None:
                self._ended(shard)
            else:
                self._handle(shard, line, on_result)
        self._pump()
        self._refresh(shards)
        self._check_time(shards)

    def _pump(self) -> None:
        wait = self.broker.pump()
        self._next_grant = None if wait is None else time.monotonic() + wait

    def _grant(self, shard: Shard, lease: Lease) -> bool:
        if shard.ended or shard.error is not None or shard.worker is None:
            return False
        shard.worker.channel.send(encode(LeaseGranted(id=lease.id)))
        return True

    def _tokens(self) -> Tokens:
        """The secrets, and the gateway token as fresh as it is (made again when due)."""
        if self.auth is None:
            return Tokens(secrets=self.secrets)
        token = self.auth.fresh()
        return Tokens(secrets=self.secrets, auth=AuthToken(token=token.value, expiresAt=token.expires_at,
                                                           refreshAt=token.refresh_at))

    def _refresh(self, shards: list[Shard]) -> None:
        """A gateway token due for refresh is made again and pushed to every worker, unasked."""
        if self.auth is None or not self.auth.due() or time.monotonic() < self._auth_retry:
            return
        try:
            message = encode(self._tokens())
        except UserError as exc:
            self._auth_retry = time.monotonic() + AUTH_RETRY_SECONDS
            self.auth_errors = [*self.auth_errors[-4:], f"refreshing the judges' gateway token: {exc}"]
            return
        now = time.monotonic()
        for shard in shards:
            if shard.hello is not None and shard.worker is not None and not shard.ended and shard.error is None:
                shard.worker.channel.send(message)
                shard.last_seen = max(shard.last_seen, now)  # this side was busy, not the workers

    def _handle(self, shard: Shard, line: str, on_result: OnResult) -> None:
        try:
            message = parse_worker(line)
        except ValueError:
            shard.noise = [*shard.noise[-19:], line[:500]]  # a launcher's banner, say: not ours
            return
        if shard.error is not None or shard.worker is None:
            return
        if isinstance(message, Hello):
            shard.hello = message
            shard.hello_ms = round((time.monotonic() - shard.started) * 1000, 1)
            mismatch = _mismatch(message, shard.plugins)
            if mismatch:
                self._fail(shard, f"{shard.label}: {mismatch}; it was stopped before any judge or client ran")
        elif isinstance(message, NeedTokens):
            if shard.hello is not None:
                try:
                    shard.worker.channel.send(encode(self._tokens()))
                except UserError as exc:
                    self._fail(shard, f"{shard.label}: the judges' gateway token could not be made: {exc}")
        elif isinstance(message, LeaseRequest):
            self.broker.request(shard.spec.index, Lease(message.id, message.provider),
                                functools.partial(self._grant, shard))
        elif isinstance(message, LeaseRelease):
            self.broker.release(shard.spec.index, message.id)
        elif isinstance(message, Hold):
            self.broker.hold(message.provider, message.seconds)
        elif isinstance(message, TrialDone | Graded):
            try:
                on_result(shard, message)
            except Exception as exc:  # a result this side cannot take fails its shard, not the run
                self._fail(shard, f"{shard.label}: a result could not be taken back: {type(exc).__name__}: {exc}")
        elif isinstance(message, WorkerError):
            self._fail(shard, f"{shard.label}: the worker failed: {message.message}")
        elif isinstance(message, Done):
            shard.done = message
            shard.worker.channel.close()

    def _ended(self, shard: Shard) -> None:
        shard.ended = True
        self.broker.drop(shard.spec.index)  # its slots are free for the other shards
        if shard.done is None and shard.error is None:
            code = shard.worker.wait(5) if shard.worker else None
            shard.error = f"{shard.label}: the worker ended before it was done (exit code {code}){_tail(shard)}"

    def _check_time(self, shards: list[Shard]) -> None:
        now = time.monotonic()
        options = self.runner.options
        for shard in shards:
            if shard.ended or shard.error is not None:
                continue
            if shard.hello is None and now - shard.started > options.hello_timeout:
                self._fail(shard, f"{shard.label}: the worker did not say hello within {options.hello_timeout:g}s "
                                  f"(is mst installed where runner {self.runner.name!r} starts it?){_tail(shard)}")
            elif shard.hello is not None and now - shard.last_seen > HEARTBEATS_MISSED * options.heartbeat:
                self._fail(shard, f"{shard.label}: lost: no heartbeat for {now - shard.last_seen:.0f}s")

    def _fail(self, shard: Shard, why: str) -> None:
        if shard.error is None:
            shard.error = why
        self.broker.drop(shard.spec.index)
        if shard.worker is not None and not shard.ended:
            shard.worker.channel.send(encode(Cancel()))
            if shard.worker.wait(1) is None:  # a worker not yet working stops on cancel; others are ended
                shard.worker.stop()

    def _cancel_all(self, shards: list[Shard]) -> None:
        for shard in shards:
            if shard.worker is not None and not shard.ended:
                shard.worker.channel.send(encode(Cancel()))


@contextmanager
def _interrupts() -> Iterator[list[int]]:
    """Ctrl-C while shards run is noted (the list grows), not raised, so no copy is cut short."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def _mismatch(hello: Hello, wanted: list[PluginVersion]) -> str | None:
    if hello.mst_version != __version__:
        return f"the worker runs mst {hello.mst_version}, the coordinator mst {__version__}"
    have = {(p.group, p.name): p.dist for p in hello.plugins}
    for plugin in wanted:
        got = have.get((plugin.group, plugin.name))
        if got != plugin.dist:
            return (f"plugin {plugin.group}:{plugin.name} is {got or 'not installed'} on the worker, "
                    f"{plugin.dist} on the coordinator")
    return None


def _tail(shard: Shard) -> str:
    lines: list[str] = []
    log = shard.worker.log if shard.worker else None
    if log is not None and log.is_file():
        lines = log.read_text(errors="replace").strip().splitlines()[-3:]
    lines += shard.noise[-2:]
    return ("; last output: " + " | ".join(lines)) if lines else ""


def make_workdir(work: str) -> OwnedDir:
    """The coordinator's work directory in $TMPDIR, locked and shared with its local workers, so
    the next run's sweep removes it if this process dies (see :mod:`mst.runs.debris`)."""
    return owned_dir(f"mst-{work}-shards-", share=True)
