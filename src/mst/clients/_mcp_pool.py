"""Where an attempt's MCP servers come from, by each server's ``lifetime`` (docs/mcp-servers.md).

- ``lifetime: attempt`` (the default, safe for servers with state): every attempt gets a fresh
  instance, closed after it. The attempt that takes an instance starts a *spare* for the next
  attempt at once, so the next attempt finds its server started (Node servers take about 0.6 s
  of CPU to start, Python ones 1.7 s) and start-up latency is hidden. Spares nobody took are
  closed when the client closes: a run starts at most ``concurrency`` servers more than it uses.
- ``lifetime: variant`` (for stateless servers): ONE instance per server serves every attempt of
  the variant, those running at once included — MCP multiplexes concurrent requests on one
  session, and each call's result and progress go to the attempt that made it. Starting a server
  costs hundreds of times what an attempt costs (docs/mcp-servers.md), so ``concurrency`` starts
  would dwarf the attempts. An instance is *retired* when an attempt using it was cut short or
  abandoned a call (its state is unknown) or when it died: attempts already using it finish with
  it, the next attempt starts a fresh one, and the retired one closes when its last attempt ends.

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


@dataclass(slots=True)
class _Shared:
    """A ``variant`` server's one instance, and the attempts using it right now."""

    start: _Starting
    holders: int = 0
    retired: bool = False
    closed: bool = False


@dataclass(frozen=True, slots=True)
class _Taken:
    name: str
    future: _Pending
    ahead: bool  # started before this attempt asked (a spare, or a shared instance already up)
    shared: _Shared | None


@dataclass(frozen=True, slots=True)
class Lease:
    """The servers one attempt uses; give it back with :meth:`ServerPool.release`."""

    instances: tuple[ServerInstance, ...]
    prestarted: frozenset[str]
    toolbox: Toolbox
    sharing: Mapping[str, int]  # instance id -> attempts using it at once, this one included (``variant``)


class ServerPool:
    """A variant's MCP servers across its attempts (one pool per agent client)."""

    def __init__(self, servers: Mapping[str, McpServer], *, base_dir: Path, startup_timeout_s: float) -> None:
        self.servers = dict(servers)
        self.base_dir = base_dir
        self.startup_timeout_s = startup_timeout_s
        self._shared: dict[str, _Shared] = {}  # the current instance of each ``variant`` server
        self._holding: dict[str, _Shared] = {}  # instance id -> its entry, while attempts use it
        self._toolbox: tuple[tuple[ServerInstance, ...], Toolbox] | None = None
        self._spares: dict[str, list[_Starting]] = {name: [] for name in servers}
        self._starting: set[asyncio.Task[ServerInstance]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- taking and giving back ---------------------------------------------------------------

    async def acquire(self, secrets: Mapping[str, str]) -> Lease:
        """Every server of the variant, started (all at once), shared or reused.

        Raises ``EndingException`` with the first server's start failure, in the eval's order;
        the other servers go back to closing (a shared one stays for the attempts using it).
        """
        taken = [self._take(name, cfg, secrets) for name, cfg in self.servers.items()]
        try:
            if not all(t.future.done() for t in taken):  # running servers are ready at once
                await asyncio.wait([t.future for t in taken])
        except BaseException:  # cancelled (mst's deadline): these servers will serve no one
            for t in taken:
                t.future.cancel()  # a shared start is shielded: it goes on for the others
                if t.shared is None:
                    self._discard(t.future)
            raise
        failures = [exc for t in taken if (exc := t.future.exception()) is not None]
        started = [t for t in taken if t.future.exception() is None]
        if failures:
            for t in started:
                if t.shared is None:  # a shared instance stays for the attempts that can use it
                    self._close_later(t.future.result())
            raise failures[0]
        sharing: dict[str, int] = {}
        for t in started:
            instance = t.future.result()
            instance.served += 1
            if t.shared is not None:
                t.shared.holders += 1
                self._holding[instance.instance_id] = t.shared
                sharing[instance.instance_id] = t.shared.holders
        instances = tuple(t.future.result() for t in started)
        prestarted = frozenset(t.name for t in taken if t.ahead)
        return Lease(instances, prestarted, self._toolbox_for(instances), sharing)

    def _toolbox_for(self, instances: tuple[ServerInstance, ...]) -> Toolbox:
        """The same toolbox while the same instances serve (the shared case): its tool specs are
        built once per instance set, not per attempt."""
        kept = self._toolbox
        if kept is not None and kept[0] == instances:
            return kept[1]
        toolbox = Toolbox(list(instances))
        if all(i.cfg.lifetime == "variant" for i in instances):
            self._toolbox = (instances, toolbox)
        return toolbox

    def release(self, lease: Lease, *, reusable: bool) -> None:
        """Give the attempt's servers back: a ``variant`` server stays for the others (retired
        when this attempt leaves it in an unknown state), an ``attempt`` one is closed."""
        for instance in lease.instances:
            shared = self._holding.get(instance.instance_id)
            if shared is None:
                self._close_later(instance)
                continue
            shared.holders -= 1
            if reusable and instance.alive and not instance.tainted:
                self._close_if_unused(shared)
            else:
                self._retire(shared)

    def _retire(self, shared: _Shared) -> None:
        """No new attempt gets this instance; it closes when the attempts using it are done."""
        shared.retired = True
        name = shared.start.instance.name
        if self._shared.get(name) is shared:
            del self._shared[name]
        self._close_if_unused(shared)

    def _close_if_unused(self, shared: _Shared) -> None:
        if shared.retired and shared.holders == 0 and not shared.closed:
            shared.closed = True
            self._holding.pop(shared.start.instance.instance_id, None)
            self._discard(shared.start.task)

    def _take(self, name: str, cfg: McpServer, secrets: Mapping[str, str]) -> _Taken:
        """A future of a started instance for one server, whether it was started ahead of this
        attempt, and its shared entry (``variant`` servers)."""
        if cfg.lifetime == "variant":
            shared = self._shared.get(name)
            if shared is not None:
                task, instance = shared.start.task, shared.start.instance
                failed = task.done() and (task.cancelled() or task.exception() is not None)
                if not failed and instance.secrets == secrets and not instance.tainted and (
                        not task.done() or instance.alive):
                    # Waiting on a shared start must not cancel it for the others.
                    waiting = task if task.done() else asyncio.ensure_future(asyncio.shield(task))
                    return _Taken(name, waiting, task.done(), shared)
                self._retire(shared)
            shared = _Shared(self._start(name, cfg, secrets))
            self._shared[name] = shared
            return _Taken(name, asyncio.ensure_future(asyncio.shield(shared.start.task)), False, shared)
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
            return _Taken(name, taken, True, None)
        own = self._start(name, cfg, secrets).task
        # The next attempt's server starts once this one is up, so the two do not compete for the CPU
        # (and a server that fails to start is not started twice per attempt).
        own.add_done_callback(lambda done: self._add_spare(done, name, cfg, secrets))
        return _Taken(name, own, False, None)

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
        """Close every server: shared ones, spares, those still starting or closing. Returns when all are gone."""
        self._closed = True
        for shared in [*self._shared.values(), *self._holding.values()]:
            shared.holders = 0  # the attempts are over: nothing holds a server any more
            self._retire(shared)
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
