"""A grade worker's judge access: slots leased from the coordinator, tokens it pushes.

The worker's judges use the same :class:`~mst.grading.judge_access.JudgeAccess` as a local
grading; only where its slots and its gateway token come from differs. A slot is a ``lease``
line answered by ``granted`` (the coordinator's one broker holds the caps for every shard), a
429 is a ``hold`` line, and a fresh token arrives in a ``tokens`` line, unasked, or when the
worker asks with ``need-tokens`` (docs/wire-protocol.md).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from mst.grading.judge_access import Lease
from mst.grading.judge_auth import PushedToken, Token
from mst.runners.protocol import AuthToken, Hold, LeaseGranted, LeaseRelease, LeaseRequest, NeedTokens, Tokens
from mst.session.redact import Redactor


class CoordinatorGone(RuntimeError):
    """The channel closed while a judge waited for its slot: the judge fails, the shard ends."""


class WireLeases:
    """:class:`~mst.grading.judge_access.Leases` over the channel; ``send`` writes one message."""

    def __init__(self, send: Callable[[Any], None]) -> None:
        self._send = send
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[str, Future[Lease]]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def request(self, provider: str) -> Future[Lease]:
        future: Future[Lease] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(CoordinatorGone("the coordinator went away before this judge got its slot"))
                return future
            lease_id = next(self._ids)
            self._waiting[lease_id] = (provider, future)
        self._send(LeaseRequest(id=lease_id, provider=provider))
        return future

    def granted(self, message: LeaseGranted) -> None:
        with self._lock:
            waiting = self._waiting.pop(message.id, None)
        if waiting is None:
            return
        provider, future = waiting
        if future.set_running_or_notify_cancel():
            future.set_result(Lease(message.id, provider))
        else:  # its judge gave up while the lease was on its way
            self._send(LeaseRelease(id=message.id))

    def release(self, lease: Lease) -> None:
        self._send(LeaseRelease(id=lease.id))

    def hold(self, provider: str, seconds: float) -> None:
        self._send(Hold(provider=provider, seconds=max(0.0, min(seconds, 86_400.0))))

    def close(self) -> None:
        """The channel ended: every judge still waiting fails instead of waiting for ever."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = list(self._waiting.values()), {}
        for _, future in waiting:
            if future.set_running_or_notify_cancel():
                future.set_exception(CoordinatorGone("the coordinator went away before this judge got its slot"))


def _token(auth: AuthToken) -> Token:
    return Token(auth.token, auth.expires_at, auth.refresh_at)


def pushed_token(tokens: Tokens, send: Callable[[Any], None], redactor: Redactor
                 ) -> tuple[PushedToken | None, Callable[[Tokens], None]]:
    """The worker's gateway token (None without one) and the handler of later ``tokens`` lines,
    which redacts each new token before any judge can use it."""
    if tokens.auth is None:
        return None, lambda message: None
    token = PushedToken(_token(tokens.auth), lambda: send(NeedTokens()))

    def on_tokens(message: Tokens) -> None:
        if message.auth is not None:
            redactor.add([message.auth.token])
            token.update(_token(message.auth))

    return token, on_tokens


__all__ = ["CoordinatorGone", "WireLeases", "pushed_token"]
