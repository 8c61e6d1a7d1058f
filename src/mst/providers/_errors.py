"""The status table every SDK-backed provider adapter applies (docs/endings.md: decided at the point of failure).

Each adapter catches its SDK's typed exceptions and hands the HTTP status here; only the adapter
knows how its provider words a context-length error, so that check stays in the adapter and
arrives here as ``context_overflow``. Nothing outside ``mst.providers`` reads these texts.

An ``error`` event in the middle of a stream goes through the same table
(:func:`stream_error_status`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import orjson

from mst.endings import EndingException, Infrastructure
from mst.providers.base import ContextOverflow, ModelOutputError
from mst.session.redact import Redactor

_MESSAGE_CHARS = 400


def clean(text: str, secrets: Iterable[str]) -> str:
    """Shorten a provider's message and remove every secret from it (it may echo a header)."""
    text = " ".join(Redactor(secrets).text(text).split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "…"


def ending_for_status(where: str, status: int, message: str, *, retried: bool = True) -> Infrastructure:
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
    depends on when it happens, and only the producer that saw it knows that. ``retried=False``
    is for an error event inside a stream, which no client retries.
    """
    if status in (408, 409, 429) or status >= 500:
        kind = "rate limited" if status == 429 else "overloaded" if status == 529 else "unavailable"
        after = " after retries" if retried else ""
        return Infrastructure("provider-api", f"{where}: HTTP {status} ({kind}){after}: {message}", True)
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


def raise_for_stream_error(provider: str, model: str, status: int, message: str, *,
                           context_overflow: bool) -> NoReturn:
    """Raise what an ``error`` event in the middle of a 200 stream means, by the table above."""
    if context_overflow:
        raise ContextOverflow(f"{provider} error event in the stream: {message}")
    raise EndingException(ending_for_status(f"{provider} model {model!r}, error event in the stream", status,
                                            message, retried=False))


# The HTTP status an error event in a stream stands for, by its `type` (Anthropic's, and OpenAI's
# and compatible servers'). Any other error in the middle of a response is the provider failing.
_STREAM_ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "rate_limit_exceeded": 429,
    "insufficient_quota": 429, "api_error": 500, "server_error": 500, "timeout_error": 504, "overloaded_error": 529,
}


def stream_error_status(error: Mapping[str, Any]) -> int:
    """The HTTP status an error object received mid-stream stands for (500 when it names none).

    A numeric ``code`` / ``status`` (vLLM, LiteLLM) wins over the ``type`` name (Anthropic, OpenAI),
    which wins over a ``code`` name (OpenAI's ``rate_limit_exceeded``).
    """
    for key in ("code", "status"):
        value = error.get(key)
        if isinstance(value, int | str) and str(value).isdigit() and 400 <= int(value) <= 599:
            return int(value)
    by_name = _STREAM_ERROR_STATUS.get(str(error.get("type"))) or _STREAM_ERROR_STATUS.get(str(error.get("code")))
    return by_name or 500


def tool_arguments(name: str, raw: str | None) -> dict[str, Any]:
    """A tool call's arguments (JSON text); text that is not a JSON object is the model's failure (client-error)."""
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ModelOutputError(f"the model called {name!r} with arguments that are not JSON: {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise ModelOutputError(f"the model called {name!r} with arguments that are not a JSON object: {raw[:200]!r}")
    return value


def network(provider: str, what: str, message: str) -> EndingException:
    return EndingException(Infrastructure("network", f"{provider}: {what}: {message}", True))


def no_key(provider: str, secret: str) -> EndingException:
    return EndingException(Infrastructure(
        "setup", f"{provider}: no API key: set {secret} in --secrets-file or the environment", False))
