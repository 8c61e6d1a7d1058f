"""The status table every SDK-backed provider adapter applies (seed 001: decided at the point of failure).

Each adapter catches its SDK's typed exceptions and hands the HTTP status here; only the adapter
knows how its provider words a context-length error, so that check stays in the adapter and
arrives here as ``context_overflow``. Nothing outside ``mst.providers`` reads these texts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

from mst.endings import EndingException, Infrastructure
from mst.providers.base import ContextOverflow

_MESSAGE_CHARS = 400


def clean(text: str, secrets: Iterable[str]) -> str:
    """Shorten a provider's message and remove every secret from it (it may echo a header)."""
    for value in secrets:
        if value:
            text = text.replace(value, "[REDACTED]")
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "…"


def ending_for_status(where: str, status: int, message: str) -> Infrastructure:
    """The ending an HTTP error status from a model provider means (after its client's own retries).

    ========================  ==========================================================
    status                    ending
    ========================  ==========================================================
    408, 409, 429             ``provider-api``, retryable (busy, rate limited)
    5xx, 529 (overloaded)     ``provider-api``, retryable
    401, 403                  ``setup``, not retryable (the key or its permissions)
    404                       ``setup``, not retryable (unknown model or wrong base URL)
    other 4xx                 ``setup``, not retryable (the request the eval makes is refused)
    ========================  ==========================================================

    A context-length error is not in this table: it is a :class:`ContextOverflow`, whose ending
    depends on when it happens, and only the producer that saw it knows that.
    """
    if status in (408, 409, 429) or status >= 500:
        kind = "rate limited" if status == 429 else "overloaded" if status == 529 else "unavailable"
        return Infrastructure("provider-api", f"{where}: HTTP {status} ({kind}) after retries: {message}", True)
    if status in (401, 403):
        return Infrastructure("setup", f"{where}: HTTP {status}: the API key was refused: {message}", False)
    if status == 404:
        return Infrastructure("setup", f"{where}: HTTP 404: unknown model or wrong base URL: {message}", False)
    return Infrastructure("setup", f"{where}: HTTP {status}: request refused: {message}", False)


def raise_for_status(provider: str, model: str, status: int, message: str, *, context_overflow: bool) -> NoReturn:
    """Raise what a provider's HTTP error means: :class:`ContextOverflow`, or an ending (see above)."""
    if context_overflow:
        raise ContextOverflow(f"{provider} HTTP {status}: {message}")
    raise EndingException(ending_for_status(f"{provider} model {model!r}", status, message))


def network(provider: str, what: str, message: str) -> EndingException:
    return EndingException(Infrastructure("network", f"{provider}: {what}: {message}", True))


def no_key(provider: str, secret: str) -> EndingException:
    return EndingException(Infrastructure(
        "setup", f"{provider}: no API key: set {secret} in --secrets-file or the environment", False))
