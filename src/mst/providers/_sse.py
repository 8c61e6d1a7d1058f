"""Server-sent events, read straight from the response body.

The SDK sends a streamed request (auth, retries, typed status errors); the adapter reads the
body with :func:`sse_events` and decodes each event's JSON itself with orjson, because the SDKs
build a model object per chunk, which costs milliseconds per turn. :func:`read_stream` feeds the
events to a provider's :class:`StreamState`, whose handlers (one small function per event type)
build the response.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any, Protocol

import orjson

from mst.endings import EndingException, Infrastructure
from mst.providers import _errors


async def sse_events(chunks: AsyncIterable[bytes]) -> AsyncGenerator[tuple[str, bytes], None]:
    """``(event, data)`` for each server-sent event in a byte stream; ``event`` is ``""`` when unnamed.

    Lines may end in LF, CRLF or CR, and a chunk may end anywhere (inside a line, between CR and
    LF). Several ``data:`` lines of one event are joined with LF, as the SSE spec says; ``id:``,
    ``retry:`` and comment lines are skipped. An event the body ends in before its blank line is
    dropped, as the SSE spec and the SDKs' decoders do: it may be cut short. The JSON is left to
    the caller.
    """
    rest = b""
    event = ""
    data: list[bytes] = []
    async for chunk in chunks:
        if rest:
            chunk = rest + chunk
        hold = b""
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):  # maybe the first half of a CRLF: decide with the next chunk
                chunk, hold = chunk[:-1], b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop() + hold
        for line in lines:
            if not line:
                if data:
                    yield event, data[0] if len(data) == 1 else b"\n".join(data)
                event, data = "", []
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            elif line.startswith(b"event:"):
                event = line[6:].strip().decode()


class StreamState(Protocol):
    """What a provider's decoder of one streamed response is: fed each event until ``done``."""

    done: bool

    def feed(self, event: str, data: bytes) -> None: ...


async def read_stream(response: Any, state: StreamState, provider: str, timeout_seconds: float) -> None:
    """Feed ``state`` every event of a streamed ``httpx2`` response, and map what can go wrong.

    Events after ``state.done`` are read but not fed: the body is read to its end so the
    connection can be reused. An event of the wrong shape (a list for an object, ...) is a
    ``provider-api`` ending; a stalled or dropped stream is a ``network`` one (the SDK's retries
    only cover the request). The response is closed in every case.
    """
    import httpx2

    try:
        async with contextlib.aclosing(response.aiter_bytes()) as chunks, \
                contextlib.aclosing(sse_events(chunks)) as events:
            async for event, data in events:
                if not state.done:
                    state.feed(event, data)
    except (AttributeError, TypeError) as exc:
        raise unreadable(provider, f"an event has an unexpected shape: {exc}") from None
    except httpx2.TimeoutException:
        raise _errors.network(provider, "read timeout", f"the stream stalled for {timeout_seconds:g} s") from None
    except (httpx2.TransportError, httpx2.StreamError) as exc:
        raise _errors.network(provider, "the stream broke", f"{type(exc).__name__}: {exc}") from None
    finally:
        await response.aclose()


def json_event(provider: str, data: bytes) -> dict[str, Any]:
    """One event's data as a JSON object, or a ``provider-api`` ending saying why it is not one."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise unreadable(provider, f"an event is not JSON: {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise unreadable(provider, f"an event is not a JSON object: {data[:200]!r}")
    return value


def unreadable(provider: str, detail: str) -> EndingException:
    return EndingException(Infrastructure("provider-api", f"{provider}: the response could not be read: {detail}",
                                          True))
