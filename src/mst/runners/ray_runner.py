"""The ``ray`` runner: each shard a Ray actor that runs the worker command on a cluster node.

For users who outgrow one machine. The actor starts ``mst collect|grade-shard`` as a child
process on its node and relays the channel's lines; the nodes share no disk with the
coordinator, so the bundle and result files move through the channel, as for ``command``.
Options: ``address`` (a running cluster, e.g. ``ray://head:10001`` or ``auto``); without it a
small local cluster is started for the run (no dashboard, its own temp dir: ``temp_dir``) and
shut down after. ``cpus_per_shard`` (default 1) is what each shard's actor reserves.

Install with ``pip install 'mst[ray]'``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from mst.config.errors import Problem, UserError
from mst.runners.base import INLINE, Channel, Runner, ShardSpec, ShardWorker, worker_argv
from mst.runners.process import worker_env

READ_WAIT = 0.2  # seconds a read waits on the actor for lines; bounds a message's latency


class ShardProcess:
    """Runs on a Ray node (as an actor): the worker process and its channel, relayed line by line."""

    def __init__(self, argv_tail: list[str]) -> None:
        log_fd, self._log = tempfile.mkstemp(prefix="mst-ray-worker-", suffix=".log")
        self.process = subprocess.Popen([sys.executable, *argv_tail], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=log_fd, env=worker_env(), start_new_session=True)
        os.close(log_fd)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._ended = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._lines.put(None)

    def send(self, line: str) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line.encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close_input(self) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.close()
        except OSError:
            pass

    def read(self, wait: float) -> list[str] | None:
        """Lines available within ``wait`` seconds; None once the worker's output ended."""
        if self._ended:
            return None
        out: list[str] = []
        try:
            item = self._lines.get(timeout=wait)
            while item is not None:
                out.append(item)
                item = self._lines.get_nowait()
            self._ended = True
        except queue.Empty:
            pass
        return out if out or not self._ended else None

    def wait(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):
            os.unlink(self._log)


class RayChannel(Channel):
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def send(self, line: str) -> None:
        self.actor.send.remote(line)

    def lines(self) -> Iterator[str]:
        import ray

        while True:
            try:
                batch = ray.get(self.actor.read.remote(READ_WAIT))
            except ray.exceptions.RayError:
                return  # the actor (or its node) is gone: the shard ended
            if batch is None:
                return
            yield from batch

    def close(self) -> None:
        self.actor.close_input.remote()


class RayWorker(ShardWorker):
    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.channel = RayChannel(actor)

    def stop(self) -> None:
        import ray

        try:
            ray.get(self.actor.stop.remote(), timeout=10)
        except ray.exceptions.RayError:
            pass
        ray.kill(self.actor)

    def wait(self, timeout: float) -> int | None:
        import ray

        try:
            code: int | None = ray.get(self.actor.wait.remote(timeout), timeout=timeout + 10)
        except ray.exceptions.RayError:
            return None
        if code is not None:
            self.stop()
        return code


class RayRunner(Runner):
    name: ClassVar[str] = "ray"
    own_options: ClassVar[frozenset[str]] = frozenset({"address", "temp_dir", "cpus_per_shard"})
    shared_disk: ClassVar[bool] = False
    max_shards = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._actor_class: Any = None

    def open(self) -> None:
        try:
            import ray
        except ModuleNotFoundError:
            raise UserError(Problem("--runner", "the ray runner needs Ray: pip install 'mst[ray]'")) from None
        address = self.options.own.get("address")
        common: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        try:
            if address:
                ray.init(address=address, **common)
            else:  # a small local cluster for this run only
                temp = self.options.own.get("temp_dir") or tempfile.mkdtemp(prefix="mst-ray-")
                ray.init(num_cpus=max(1, self.options.shards), _temp_dir=str(Path(temp).resolve()), **common)
        except (OSError, ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(Problem("--runner", f"ray could not start or reach a cluster: {exc}")) from None
        cpus = float(self.options.own.get("cpus_per_shard", "1"))
        self._actor_class = ray.remote(num_cpus=cpus, max_concurrency=1)(ShardProcess)

    def start(self, spec: ShardSpec, workdir: Path) -> ShardWorker:
        argv = worker_argv(spec, bundle=INLINE, results=INLINE)[1:]  # the node's own interpreter runs it
        return RayWorker(self._actor_class.remote(argv))

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
