"""The ``process`` runner: shard workers as local processes, the reference machine runner.

Each worker is ``python -m mst collect|grade-shard`` in its own session (so a terminal's Ctrl-C
reaches only the coordinator, which cancels the workers over the channel), with a small,
explicit environment: the coordinator's ambient environment is not passed on, and secrets
arrive only in the ``tokens`` message. Bundles and results stay on this disk.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, ClassVar

from mst.runners.base import Channel, Runner, ShardSpec, ShardWorker, worker_argv
from mst.runs.debris import locks_for_children

# What a Python worker needs to start and find its packages; nothing that may hold a key.
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class PipeChannel(Channel):
    """The channel over a child process's stdin and stdout pipes."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._stdin = stdin
        self._stdout = stdout

    def send(self, line: str) -> None:
        try:
            self._stdin.write(line.encode() + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the worker is gone: its end of file tells the coordinator

    def lines(self) -> Iterator[str]:
        for raw in self._stdout:
            yield raw.decode("utf-8", "replace").rstrip("\n")

    def close(self) -> None:
        try:
            self._stdin.close()
        except OSError:
            pass


class PipeWorker(ShardWorker):
    """A worker that is a child process of the coordinator (``process`` and ``command``)."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], log: Path, results: Path | None,
                 cwd: Path) -> None:
        self.log = log
        self.results = results
        with open(log, "ab") as err:
            # The worker keeps the coordinator's work-directory lock open: the directory is in
            # use until it has exited too, even if the coordinator dies first (mst.runs.debris).
            self.process = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=err, env=dict(env), cwd=cwd, start_new_session=True,
                                            pass_fds=locks_for_children())
        assert self.process.stdin is not None and self.process.stdout is not None
        self.channel = PipeChannel(self.process.stdin, self.process.stdout)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class ProcessRunner(Runner):
    """N local worker processes; ``python`` option: the workers' interpreter (default: this one)."""

    name: ClassVar[str] = "process"
    own_options: ClassVar[frozenset[str]] = frozenset({"python"})
    max_shards = 256

    def start(self, spec: ShardSpec, workdir: Path) -> ShardWorker:
        results = workdir / "results"
        results.mkdir(parents=True, exist_ok=True)
        argv = worker_argv(spec, bundle=str(spec.bundle), results=str(results), python=self.options.own.get("python"))
        return PipeWorker(argv, env=worker_env(), log=workdir / "worker.log", results=results, cwd=workdir)


