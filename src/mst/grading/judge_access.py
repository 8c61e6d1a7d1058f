"""Judges' access to providers: rate caps, 429 holds and credentials (docs/grading.md, "Judge access").

Every judge call to a provider goes through one :class:`JudgeAccess`, made once per grading
(``context.access``). It answers three things:

* ``async with access.slot(provider)`` (or ``with access.slot_sync(provider)`` in a sync judge)
  waits until the eval's ``judgeLimits`` allow one more call: at most ``concurrency`` in flight
  and starts spaced ``60 / requestsPerMinute`` seconds apart, so no minute holds more than
  ``requestsPerMinute``. A provider without limits is granted at once.
* ``access.hold(provider, seconds)``: a 429's ``retry-after`` holds the provider for every judge
  of the grading (in shards: of every shard), not only the one that was told.
* ``access.credential(name)``: a key from the secrets file or the environment, or the gateway
  token that ``MST_LLM_AUTH_COMMAND`` makes, as fresh as it is (:mod:`mst.grading.judge_auth`).

Locally the caps are held by a :class:`LeaseBroker` in this process; in a grade shard the same
broker runs on the coordinator and the worker leases its slots over ``mst.shard/v1`` (the
runners' :class:`Leases`), so one cap holds across all shards. Code judges, which are called with
a trial only, reach the grading's access through :func:`current`.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from mst.config.judge_limits import JudgeLimit

AUTH_TOKEN: Final = "MST_LLM_AUTH_TOKEN"  # the credential name of the gateway token (docs/grading.md)


@dataclass(frozen=True, slots=True)
class Lease:
    """One granted slot of ``provider``; ``id`` is unique among its holder's leases."""

    id: int
    provider: str


# ---------------------------------------------------------------------------------------------
# The caps' arithmetic and the broker that grants slots in order


@dataclass
class _Provider:
    concurrency: int | None
    spacing: float  # seconds between starts (60 / requestsPerMinute), 0 without a rate cap
    active: int = 0
    last_start: float = float("-inf")
    held_until: float = float("-inf")

    def free_at(self, now: float) -> float:
        """When the next start may happen, concurrency aside (now, or a later monotonic time)."""
        return max(now, self.held_until, self.last_start + self.spacing)

    def full(self) -> bool:
        return self.concurrency is not None and self.active >= self.concurrency


@dataclass
class _Request:
    owner: Hashable
    lease: Lease
    grant: Callable[[Lease], bool]  # False: the requester no longer wants it (cancelled, gone)


class LeaseBroker:
    """Grants provider slots in request order as the caps allow; the one place they are counted.

    Thread-safe. ``grant`` callbacks run while the broker's (reentrant) lock is held, so they
    must only hand the lease on (complete a future, send a line) or give it straight back.
    Callers call :meth:`pump` after anything that may free a slot, and again when
    :meth:`pump`'s returned delay has passed (a rate cap or a hold ends by time, not by a release).
    """

    def __init__(self, limits: Mapping[str, JudgeLimit] | None = None) -> None:
        self._limits = dict(limits or {})
        self._providers: dict[str, _Provider] = {}
        self._pending: deque[_Request] = deque()
        self._held: dict[tuple[Hashable, int], str] = {}  # (owner, lease id) -> provider
        self._lock = threading.RLock()  # a grant's callbacks may release at once, in this thread

    def _provider(self, name: str) -> _Provider:
        state = self._providers.get(name)
        if state is None:
            limit = self._limits.get(name)
            rpm = limit.requestsPerMinute if limit is not None else None
            state = self._providers[name] = _Provider(limit.concurrency if limit is not None else None,
                                                      60.0 / rpm if rpm else 0.0)
        return state

    def request(self, owner: Hashable, lease: Lease, grant: Callable[[Lease], bool]) -> None:
        with self._lock:
            self._pending.append(_Request(owner, lease, grant))

    def release(self, owner: Hashable, lease_id: int) -> None:
        """Give a granted slot back; an unknown one (already dropped) is ignored."""
        with self._lock:
            provider = self._held.pop((owner, lease_id), None)
            if provider is not None:
                self._provider(provider).active -= 1

    def hold(self, provider: str, seconds: float) -> None:
        """No new slot of ``provider`` for anyone for ``seconds`` (a 429's retry-after)."""
        with self._lock:
            state = self._provider(provider)
            state.held_until = max(state.held_until, time.monotonic() + max(0.0, seconds))

    def drop(self, owner: Hashable) -> None:
        """Forget ``owner`` (a shard that ended): its slots are free and its requests gone."""
        with self._lock:
            self._pending = deque(r for r in self._pending if r.owner != owner)
            for key in [k for k in self._held if k[0] == owner]:
                self._provider(self._held.pop(key)).active -= 1

    def pump(self) -> float | None:
        """Grant every request the caps allow now, oldest first per provider; the seconds until
        one more may be granted by time alone, or None when only a release can help."""
        with self._lock:
            now = time.monotonic()
            wait: float | None = None
            blocked: set[str] = set()  # a provider's older request waits: younger ones wait behind it
            kept: deque[_Request] = deque()
            for request in self._pending:
                name = request.lease.provider
                state = self._provider(name)
                if name in blocked or state.full():
                    blocked.add(name)
                    kept.append(request)
                    continue
                free = state.free_at(now)
                if free > now:
                    blocked.add(name)
                    kept.append(request)
                    wait = free - now if wait is None else min(wait, free - now)
                    continue
                key = (request.owner, request.lease.id)
                state.active += 1  # counted before the grant: a waiter that gave up releases it at once
                self._held[key] = name
                if request.grant(request.lease):
                    state.last_start = now
                elif self._held.pop(key, None) is not None:
                    state.active -= 1
            self._pending = kept
            return wait


# ---------------------------------------------------------------------------------------------
# Where a grading gets its slots: this process, or the coordinator over the channel


class Leases(Protocol):
    """Slots for one process's judges: :class:`LocalLeases`, or a grade worker's lease over the wire."""

    def request(self, provider: str) -> Future[Lease]: ...

    def release(self, lease: Lease) -> None: ...

    def hold(self, provider: str, seconds: float) -> None: ...


def grant_future(future: Future[Lease]) -> Callable[[Lease], bool]:
    """A grant that completes ``future``, refused when its waiter gave up (cancelled it)."""
    def grant(lease: Lease) -> bool:
        if not future.set_running_or_notify_cancel():
            return False
        future.set_result(lease)
        return True

    return grant


class LocalLeases:
    """The broker in this process, with a thread that grants what a rate cap or a hold delayed."""

    def __init__(self, limits: Mapping[str, JudgeLimit] | None = None) -> None:
        self.broker = LeaseBroker(limits)
        self._ids = itertools.count(1)
        self._wake = threading.Condition()
        self._timer: threading.Thread | None = None

    def request(self, provider: str) -> Future[Lease]:
        future: Future[Lease] = Future()
        self.broker.request(None, Lease(next(self._ids), provider), grant_future(future))
        self._pump()
        return future

    def release(self, lease: Lease) -> None:
        self.broker.release(None, lease.id)
        self._pump()

    def hold(self, provider: str, seconds: float) -> None:
        self.broker.hold(provider, seconds)
        self._pump()

    def _pump(self) -> None:
        if self.broker.pump() is not None:
            with self._wake:
                if self._timer is None:
                    self._timer = threading.Thread(target=self._tick, name="mst-judge-limits", daemon=True)
                    self._timer.start()
                self._wake.notify()

    def _tick(self) -> None:
        while True:
            with self._wake:
                wait = self.broker.pump()
                if wait is None:
                    self._timer = None
                    return
                self._wake.wait(wait)


# ---------------------------------------------------------------------------------------------
# Credentials


class TokenSource(Protocol):
    """The gateway token as fresh as it is: made by a command, or pushed by the coordinator."""

    def current(self) -> str: ...


@dataclass
class JudgeAccess:
    """One grading's provider access; ``JudgeAccess()`` has no caps, no token and reads the
    environment for keys (a trial graded by hand, a test)."""

    leases: Leases = field(default_factory=LocalLeases)
    secrets: Mapping[str, str] = field(default_factory=dict)
    token: TokenSource | None = None

    @asynccontextmanager
    async def slot(self, provider: str) -> AsyncIterator[None]:
        """Hold one slot of ``provider`` for the call inside the block."""
        future = self.leases.request(provider)
        with self._waiting(future):
            lease = await asyncio.wrap_future(future)
        with self._holding(lease):
            yield

    @contextmanager
    def slot_sync(self, provider: str) -> Iterator[None]:
        """:meth:`slot` for a sync judge (a code judge, a judge's thread)."""
        future = self.leases.request(provider)
        with self._waiting(future):
            lease = future.result()
        with self._holding(lease):
            yield

    @contextmanager
    def _waiting(self, future: Future[Lease]) -> Iterator[None]:
        """While a slot is awaited: a waiter that gives up (cancelled, interrupted) gives back
        the slot if it is granted after all."""
        try:
            yield
        except BaseException:
            if not future.cancel():
                future.add_done_callback(
                    lambda f: None if f.cancelled() or f.exception() else self.leases.release(f.result()))
            raise

    @contextmanager
    def _holding(self, lease: Lease) -> Iterator[None]:
        try:
            yield
        finally:
            self.leases.release(lease)

    def hold(self, provider: str, seconds: float) -> None:
        """A 429 said ``retry-after: seconds``: nobody starts a call to ``provider`` until then."""
        self.leases.hold(provider, seconds)

    def credential(self, name: str) -> str | None:
        """A key by name (the secrets the judges get, then the environment), or for
        ``MST_LLM_AUTH_TOKEN`` the gateway token, refreshed as it nears its expiry."""
        if name == AUTH_TOKEN and self.token is not None:
            return self.token.current()
        value = self.secrets.get(name)
        return value if value is not None else os.environ.get(name)


_CURRENT: contextvars.ContextVar[JudgeAccess] = contextvars.ContextVar("mst_judge_access")
_UNLIMITED = JudgeAccess()


def current() -> JudgeAccess:
    """The access of the grading that is calling this judge (for code judges, which are called
    with a trial only); outside a grading, one with no caps."""
    return _CURRENT.get(_UNLIMITED)


@contextmanager
def using(access: JudgeAccess) -> Iterator[None]:
    """Make ``access`` what :func:`current` returns inside the block (this thread's context)."""
    token = _CURRENT.set(access)
    try:
        yield
    finally:
        _CURRENT.reset(token)


__all__ = ["AUTH_TOKEN", "JudgeAccess", "Lease", "LeaseBroker", "Leases", "LocalLeases", "TokenSource", "current",
           "grant_future", "using"]
