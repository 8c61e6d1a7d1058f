"""The hidden worker commands' bodies: ``mst collect`` and ``mst grade-shard``.

A worker reads its bundle, says ``hello``, asks for its tokens, then runs the same code a local
run does — the :class:`~mst.collect.Collector` for a collect shard, :func:`grade_run` (so
``grade_trial``, ``compare_pairwise`` and the graders) for a grade shard — and sends each
result as it is made. It adds transport only.

The channel is the process's stdout, so fd 1 is moved aside first and everything else that
writes to stdout (a judge's print, a child process) lands on stderr instead of corrupting it.
Secrets live in this process only — a grade worker's environment (judges read them there), a
collect worker's memory (each client gets its variant's in its request) — and every line sent
back, on the channel or on stderr, is redacted.
"""

from __future__ import annotations

import asyncio
import os
import platform
import queue
import shutil
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from mst import __version__
from mst.config.errors import UserError
from mst.fileio import atomic_write_json
from mst.grading import GradingContext, LiveSource
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess
from mst.grading.phase import GradePlan, grade_run
from mst.grading.preflight import Keys, check, judges_of, require
from mst.grading.recorded import RecordingSource
from mst.runners.base import INLINE, Work
from mst.runners.bundle import (
    RUN_DIR,
    Bundle,
    file_data,
    grade_plan_keep,
    installed_dist,
    read_bundle,
    resolved_from,
    unpack,
)
from mst.runners.protocol import (
    BundleMessage,
    Cancel,
    CoordinatorMessage,
    Done,
    FileRef,
    Graded,
    Heartbeat,
    Hello,
    LeaseGranted,
    Machine,
    NeedTokens,
    PairKey,
    PluginVersion,
    Tokens,
    TrialDone,
    TrialKey,
    WorkerError,
    message_data,
    parse_coordinator,
)
from mst.runners.worker_access import WireLeases, pushed_token
from mst.runs.debris import owned_dir, sweep_work_dirs
from mst.runs.grading_records import CaseComparison, TrialGrading
from mst.runs.progress import Silent
from mst.runs.run import open_run
from mst.session.redact import NO_REDACTION, Redactor

if TYPE_CHECKING:
    from mst.collect import AttemptSpec
    from mst.config.resolved import ResolvedEval


class Wire:
    """The worker's end of the channel: redacted lines out, parsed messages in."""

    def __init__(self) -> None:
        self._out = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)  # stdout now reaches stderr: nothing but protocol lines enter the channel
        self._lock = threading.Lock()
        self.redactor = NO_REDACTION
        self.cancel = threading.Event()
        self._inbox: queue.Queue[CoordinatorMessage | None] = queue.Queue()
        # Messages answered as they arrive, not waited for in order: a lease's grant, a fresh token.
        self.handlers: dict[type[Any], Callable[[Any], None]] = {}
        self.on_close: list[Callable[[], None]] = []
        threading.Thread(target=self._read, name="mst-channel-in", daemon=True).start()

    def send(self, message: Any) -> None:
        line = orjson.dumps(self.redactor.value(message_data(message))).decode()
        data = self.redactor.text(line).encode() + b"\n"
        with self._lock:
            self._out.write(data)

    def _read(self) -> None:
        for raw in sys.stdin.buffer:
            try:
                message = parse_coordinator(raw.decode("utf-8", "replace"))
            except ValueError as exc:
                print(f"mst worker: ignoring a line that is not mst.shard/v1: {exc}", file=sys.stderr)
                continue
            if isinstance(message, Cancel):
                self.cancel.set()
            handler = self.handlers.get(type(message))
            if handler is not None:
                handler(message)
                continue
            self._inbox.put(message)
        self.cancel.set()  # the coordinator is gone: finish the case under way and stop
        for close in self.on_close:
            close()
        self._inbox.put(None)

    def expect(self, kind: type[BundleMessage] | type[Tokens]) -> Any:
        """The next message of ``kind``; None when the coordinator cancels or goes away first."""
        while True:
            message = self._inbox.get()
            if message is None or isinstance(message, Cancel):
                return None
            if isinstance(message, kind):
                return message


def main(work: Work, bundle_arg: str, results_arg: str) -> NoReturn:
    """Run a worker, then leave at once: the channel reader may still be blocked on stdin, and an
    interpreter shutting down around a thread blocked in a read aborts instead of exiting."""
    code = run_worker(work, bundle_arg, results_arg)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_worker(work: Work, bundle_arg: str, results_arg: str) -> int:
    """The whole life of a worker; its exit code (0 once it said ``done``)."""
    wire = Wire()
    # Beside the results when they are on this disk, so a killed worker's leftovers go with its shard.
    near = None if results_arg == INLINE else Path(results_arg).parent
    if near is None:  # on a machine of its own: what killed workers left in its $TMPDIR goes first
        sweep_work_dirs()
    owned = owned_dir("mst-worker-", near)  # locked: a sweep takes it only once this worker is gone
    scratch = owned.path
    try:
        bundle_dir = _bundle_dir(wire, bundle_arg, scratch)
        if bundle_dir is None:
            return 1
        inline = results_arg == INLINE
        results = scratch / "results" if inline else Path(results_arg)
        results.mkdir(parents=True, exist_ok=True)
        bundle = read_bundle(bundle_dir)
        wire.send(_hello(bundle))
        wire.send(NeedTokens())
        tokens = wire.expect(Tokens)
        if tokens is None:  # cancelled before any work: a mismatch, or a Ctrl-C on the coordinator
            wire.send(Done())
            return 0
        secrets = dict(tokens.secrets)
        if work == "grade":  # judges read their keys from the environment; clients get theirs per
            os.environ.update(secrets)  # attempt, so no client sees another variant's keys here
        auth = [tokens.auth.token] if tokens.auth is not None else []
        wire.redactor = Redactor([*secrets.values(), *auth], bundle.config.get("redact") or [])
        restore = _redact_stderr(wire.redactor)
        stop_beats = _heartbeats(wire, bundle.heartbeat_seconds)
        try:
            if work == "collect":
                wire.send(_collect(wire, bundle, bundle_dir, results, secrets, inline))
            else:
                wire.send(_grade(wire, bundle, bundle_dir, results, tokens, inline))
        finally:
            stop_beats()
            restore()
        return 0
    except UserError as exc:  # a judge preflight: what is missing and how to fix it, as it was said
        wire.send(WorkerError(message=str(exc)))
        return 1
    except Exception as exc:
        sys.stderr.write(wire.redactor.text(traceback.format_exc()))  # stderr is no longer the redacting pipe
        wire.send(WorkerError(message=f"{type(exc).__name__}: {exc}"))
        return 1
    finally:
        owned.close()


def _bundle_dir(wire: Wire, bundle_arg: str, scratch: Path) -> Path | None:
    if bundle_arg != INLINE:
        return Path(bundle_arg)
    message = wire.expect(BundleMessage)
    if message is None:
        return None
    unpack(message.archive, scratch / "bundle")
    return scratch / "bundle"


def _hello(bundle: Bundle) -> Hello:
    plugins = [PluginVersion(group=p.group, name=p.name, dist=installed_dist(p.group, p.name))
               for p in bundle.plugins]
    machine = Machine(hostname=socket.gethostname(), platform=platform.platform(),
                      python=platform.python_version(), cpus=os.cpu_count() or 1)
    return Hello(mstVersion=__version__, plugins=plugins, machine=machine)


def _heartbeats(wire: Wire, every: float) -> Callable[[], None]:
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            wire.send(Heartbeat())

    threading.Thread(target=beat, name="mst-heartbeat", daemon=True).start()
    return stop.set


def _redact_stderr(redactor: Redactor) -> Callable[[], None]:
    """Route fds 1 and 2 through a redacting pipe, so no log line carries a secret."""
    if not redactor.active:
        return lambda: None
    real = os.dup(2)
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.dup2(write_end, 1)
    os.close(write_end)

    def pump() -> None:
        with os.fdopen(read_end, "rb") as src:
            for line in src:
                os.write(real, redactor.text(line.decode("utf-8", "replace")).encode())

    thread = threading.Thread(target=pump, name="mst-stderr", daemon=True)
    thread.start()

    def restore() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(real, 1)
        os.dup2(real, 2)
        thread.join(timeout=2)

    return restore


def _ref(results: Path, rel: str, inline: bool) -> FileRef:
    return FileRef(path=rel, data=file_data(results / rel) if inline else None)


# ---------------------------------------------------------------------------------------------
# Collect


def _collect(wire: Wire, bundle: Bundle, bundle_dir: Path, results: Path, secrets: dict[str, str],
             inline: bool) -> Done:
    from mst.collect import AttemptSpec, Collector  # a grade worker never imports a client

    resolved = resolved_from(bundle, bundle_dir)
    variants = {v.id: v for v in resolved.variants}
    cases = {c.id: c for c in resolved.cases}
    specs = [AttemptSpec(variants[v], cases[c], t, attempt) for v, c, t, attempt in bundle.attempts]
    collected = 0

    def on_attempt(record: dict[str, Any]) -> None:
        nonlocal collected
        files = [record["transcript"]]
        if record.get("artifacts"):
            folder = results / record["artifacts"]
            files += [str(f.relative_to(results)) for f in sorted(folder.rglob("*")) if f.is_file()]
        key = TrialKey(variant=record["variant"], case=record["case"], trial=record["trial"])
        wire.send(TrialDone(key=key, record=record, files=[_ref(results, f, inline) for f in files]))
        collected += 1

    collector = Collector(resolved, results, secrets=secrets, redactor=wire.redactor, on_attempt=on_attempt,
                          concurrency=bundle.concurrency)
    asyncio.run(collector.run(_until_cancelled(wire, specs)))
    return Done(collected=collected)


def _until_cancelled(wire: Wire, specs: list[AttemptSpec]) -> Iterator[AttemptSpec]:
    """Specs in order; after a cancel, the case under way is finished and no other started."""
    current: str | None = None
    for spec in specs:
        if spec.case.id != current:
            if wire.cancel.is_set():
                return
            current = spec.case.id
        yield spec


# ---------------------------------------------------------------------------------------------
# Grade


def _grade_access(wire: Wire, tokens: Tokens) -> JudgeAccess:
    """Slots leased from the coordinator, the secrets it sent, the token it keeps fresh."""
    leases = WireLeases(wire.send)
    wire.handlers[LeaseGranted] = leases.granted
    wire.on_close.append(leases.close)
    token, on_tokens = pushed_token(tokens, wire.send, wire.redactor)
    wire.handlers[Tokens] = on_tokens
    return JudgeAccess(leases, dict(tokens.secrets), token)


def _preflight(resolved: ResolvedEval, access: JudgeAccess) -> None:
    """Every judge can run here, before any is called: else the shard fails, naming what is missing."""
    secrets = access.secrets
    keys = Keys(lambda name: name in secrets or (name == AUTH_TOKEN and access.token is not None),
                "the secrets file")
    require(check(judges_of(resolved), keys, resolved.base_dir), "")  # the coordinator names the shard


def _grade(wire: Wire, bundle: Bundle, bundle_dir: Path, results: Path, tokens: Tokens, inline: bool) -> Done:
    assert bundle.grade is not None
    secrets = dict(tokens.secrets)
    resolved = resolved_from(bundle, bundle_dir)
    access = _grade_access(wire, tokens)
    _preflight(resolved, access)
    root = results / RUN_DIR
    shutil.copytree(bundle_dir / RUN_DIR, root, copy_function=_link, dirs_exist_ok=True)
    run = open_run(root)
    keep = grade_plan_keep(bundle.grade)
    source = RecordingSource(LiveSource(resolved.base_dir, access))
    context = GradingContext.of(resolved, wire.redactor, access)
    counts = {"graded": 0, "failed": 0}

    def on_record(record: TrialGrading | CaseComparison) -> None:
        if isinstance(record, CaseComparison):
            assert resolved.baseline is not None
            calls = source.take_pair(record.case, record.candidate, resolved.baseline.id)
            pair = PairKey(candidate=record.candidate, case=record.case)
            key: TrialKey | PairKey = pair
            rel, ok = f"records/pairwise/{pair.candidate}/{pair.case}.json", record.complete
        else:
            calls = source.take_trial(record.key)
            trial = TrialKey(variant=record.variant, case=record.case, trial=record.trial)
            key = trial
            rel, ok = f"records/trial/{trial.variant}/{trial.case}/{trial.trial}.json", record.status == "graded"
        document = {"record": record.to_json(), "calls": calls}
        atomic_write_json(results / rel, wire.redactor.value(document), fsync=False)
        counts["graded" if ok else "failed"] += 1
        wire.send(Graded(key=key, status="graded" if ok else "failed", files=[_ref(results, rel, inline)]))

    for case in bundle.cases:  # case by case, so a cancel lets the case under way finish
        if wire.cancel.is_set():
            break
        plan = GradePlan(trials=[k for k in bundle.grade.trials if k[1] == case.id],
                         keep={k: v for k, v in keep.items() if k[1] == case.id},
                         pairs=[p for p in bundle.grade.pairs if p[1] == case.id])
        if plan.trials or plan.pairs:
            grade_run(run, resolved, plan, context, secrets=secrets, progress=Silent(), source=source,
                      on_record=on_record)
    return Done(graded=counts["graded"], failed=counts["failed"])


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
