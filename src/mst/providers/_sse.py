"""Server-sent events, read straight from the response body.

The SDK sends a streamed request (auth, retries, typed status errors); the adapter reads the
body with :func:`sse_events` and decodes each event's JSON itself with orjson, because the SDKs
build a model object per chunk, which costs milliseconds per turn.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable


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
