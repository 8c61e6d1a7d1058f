"""Where an attempt's MCP servers come from, by each server's ``lifetime`` (docs/mcp-servers.md).

- ``lifetime: attempt`` (the default, safe for servers with state): every attempt gets a fresh
  instance, closed after it. The attempt that takes an instance starts a *spare* for the next
  attempt at once, so the next attempt finds its server started (Node servers take about 0.6 s
  of CPU to start, Python ones 1.7 s) and start-up latency is hidden. Spares nobody took are
  closed when the client closes: a run starts at most ``concurrency`` servers more than it uses.
- ``lifetime: variant`` (for stateless servers): instances are kept between attempts and reused.
  An instance serves one attempt at a time, so a variant holds at most one per attempt running
  at once — one per worker. An instance is not reused after its attempt was cut short mid-call
  (its state is unknown) or after it died; the next attempt gets a fresh one.

Closing happens in the background, after the attempt has its ending: an answer given before
the deadline is kept however long a busy server takes to stop. :meth:`ServerPool.aclose` waits
for every close, so no server outlives the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mst.clients._mcp import ServerInstance, Toolbox
from mst.config.models import McpServer

_Pending = asyncio.Future[ServerInstance]


@dataclass(frozen=True, slots=True)
class _Starting:
    instance: ServerInstance
    task: asyncio.Task[ServerInstance]


@dataclass(frozen=True, slots=True)
class Lease:
    """The servers one attempt uses; give it back with :meth:`ServerPool.release`."""

    instances: tuple[ServerInstance, ...]
    prestarted: frozenset[str]
    toolbox: Toolbox


class ServerPool:
    """A variant's MCP servers across its attempts (one pool per agent client)."""

    def __init__(self, servers: Mapping[str, McpServer], *, base_dir: Path, startup_timeout_s: float) -> None:
        self.servers = dict(servers)
        self.base_dir = base_dir
        self.startup_timeout_s = startup_timeout_s
        self._idle: dict[str, list[ServerInstance]] = {name: [] for name in servers}
        self._spares: dict[str, list[_Starting]] = {name: [] for name in servers}
        self._starting: set[asyncio.Task[ServerInstance]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- taking and giving back ---------------------------------------------------------------

    async def acquire(self, secrets: Mapping[str, str]) -> Lease:
        """Every server of the variant, started (all at once) or reused.

        Raises ``EndingException`` with the first server's start failure, in the eval's order;
        the other servers go back to closing.
        """
        pending: list[tuple[str, _Pending, bool]] = [
            (name, *self._take(name, cfg, secrets)) for name, cfg in self.servers.items()]
        try:
            if not all(future.done() for _, future, _ in pending):  # reused servers are ready at once
                await asyncio.wait([future for _, future, _ in pending])
        except BaseException:  # cancelled (mst's deadline): these servers will serve no one
            for _, future, _ in pending:
                future.cancel()
                self._discard(future)
            raise
        failures = [exc for _, future, _ in pending if (exc := future.exception()) is not None]
        instances = tuple(future.result() for _, future, _ in pending if future.exception() is None)
        if failures:
            for instance in instances:
                self._close_later(instance)
            raise failures[0]
        for instance in instances:
            instance.served += 1
        prestarted = frozenset(name for name, _, was_spare in pending if was_spare)
        return Lease(instances, prestarted, Toolbox(list(instances)))

    def release(self, lease: Lease, *, reusable: bool) -> None:
        """Give the attempt's servers back: kept for the next attempt (``variant``), else closed."""
        for instance in lease.instances:
            keep = (
                reusable and instance.cfg.lifetime == "variant" and instance.alive and not instance.tainted
            )
            if keep:
                self._idle[instance.name].append(instance)
            else:
                self._close_later(instance)

    def _take(self, name: str, cfg: McpServer, secrets: Mapping[str, str]) -> tuple[_Pending, bool]:
        """A future of a started instance for one server, and whether it was started ahead."""
        loop = asyncio.get_running_loop()
        if cfg.lifetime == "variant":
            idle = self._idle[name]
            while idle:
                instance = idle.pop()
                if instance.alive and instance.secrets == secrets:
                    ready: _Pending = loop.create_future()
                    ready.set_result(instance)
                    return ready, True
                self._close_later(instance)
            return self._start(name, cfg, secrets).task, False
        spares = self._spares[name]
        taken: _Pending | None = None
        while spares and taken is None:
            spare = spares.pop()
            died = spare.task.done() and spare.task.exception() is None and not spare.instance.alive
            if died or spare.instance.secrets != secrets:
                self._discard(spare.task)
            else:
                taken = spare.task
        if taken is not None:
            spares.append(self._start(name, cfg, secrets))  # the next attempt's server, starting now
            return taken, True
        own = self._start(name, cfg, secrets).task
        # The next attempt's server starts once this one is up, so the two do not compete for the CPU
        # (and a server that fails to start is not started twice per attempt).
        own.add_done_callback(lambda done: self._add_spare(done, name, cfg, secrets))
        return own, False

    def _add_spare(self, own: _Pending, name: str, cfg: McpServer, secrets: Mapping[str, str]) -> None:
        if not self._closed and not own.cancelled() and own.exception() is None:
            self._spares[name].append(self._start(name, cfg, secrets))

    def _start(self, name: str, cfg: McpServer, secrets: Mapping[str, str]) -> _Starting:
        instance = ServerInstance(
            name, cfg, base_dir=self.base_dir, secrets=secrets, startup_timeout_s=self.startup_timeout_s)

        async def started() -> ServerInstance:
            try:
                await instance.start()
            except BaseException:
                self._close_later(instance)
                raise
            return instance

        task = asyncio.create_task(started(), name=f"start {instance.instance_id}")
        task.add_done_callback(_retrieved)  # a spare nobody takes must not warn about its failure
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)
        return _Starting(instance, task)

    # --- closing ------------------------------------------------------------------------------

    def _close_later(self, instance: ServerInstance) -> None:
        task = asyncio.create_task(instance.aclose(), name=f"close {instance.instance_id}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _discard(self, future: _Pending) -> None:
        """Close the instance a future stands for, now or when its start finishes."""

        def close(done: _Pending) -> None:
            if not done.cancelled() and done.exception() is None:
                self._close_later(done.result())

        if future.done():
            close(future)
        else:
            future.add_done_callback(close)

    async def aclose(self) -> None:
        """Close every server: idle ones, spares, those still starting or closing. Returns when all are gone."""
        self._closed = True
        for idle in self._idle.values():
            while idle:
                self._close_later(idle.pop())
        for waiting in self._spares.values():
            while waiting:
                self._discard(waiting.pop().task)
        starting = set(self._starting)
        for task in starting:
            task.cancel()  # not waited for: a cancelled start closes its instance itself
            self._discard(task)
        if starting:
            await asyncio.wait(starting)
        while self._closing:
            await asyncio.wait(set(self._closing))

def _retrieved(task: asyncio.Task[ServerInstance]) -> None:
    if not task.cancelled():
        task.exception()
