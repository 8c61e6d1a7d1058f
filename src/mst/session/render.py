"""A transcript as readable Markdown, for judges that read it (docs/grading.md, "What a judge sees").

One rendering for every judge: messages, each tool call with its input and output, and model
requests. A transcript over the judge's budget loses its middle, never silently: a marker line
says how many events were cut, so the judge (and whoever reads its reasons) knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from mst.session.events import (
    ASSISTANT_MESSAGE,
    MODEL_REQUEST,
    SESSION_FORMAT,
    SESSION_RESULT,
    TOOL_COMPLETE,
    TOOL_START,
    USER_MESSAGE,
    Event,
)

CUT_MARKER: Final = "[… {n} events cut: transcript over the judge's budget …]"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content blocks
        return "".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in value)
    return orjson.dumps(value, default=str).decode()


def _json(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


def render_event(event: Event) -> str | None:
    """One event as a Markdown block, or None for events a reader needs not see."""
    kind, data = event.get("type"), event.get("data") or {}
    if kind == USER_MESSAGE:
        return f"**User:** {_text(data.get('content'))}"
    if kind == ASSISTANT_MESSAGE:
        text = _text(data.get("content"))
        return f"**Assistant:** {text}" if text else None
    if kind == TOOL_START:
        server = data.get("mcpServerName")
        where = f" ({server})" if server else ""
        return f"**Tool call** `{data.get('toolName')}`{where} input: `{_json(data.get('input'))}`"
    if kind == TOOL_COMPLETE:
        if data.get("success", True):
            return f"**Tool result** `{data.get('toolName')}`: {_text(data.get('output'))}"
        return f"**Tool error** `{data.get('toolName')}`: {_text(data.get('error'))}"
    if kind == MODEL_REQUEST:
        return (f"_model request {data.get('requestIndex')}: {data.get('model')}, "
                f"{data.get('inputTokens')} in / {data.get('outputTokens')} out_")
    if kind in (SESSION_FORMAT, SESSION_RESULT):
        return None
    return f"_{kind}_"


def render_transcript(events: Sequence[Event], *, budget_chars: int | None = None) -> str:
    """The transcript as Markdown; over ``budget_chars``, the middle events are replaced by a marker."""
    blocks = [b for b in (render_event(e) for e in events) if b is not None]
    text = "\n\n".join(blocks)
    if budget_chars is None or len(text) <= budget_chars:
        return text
    head: list[str] = []
    tail: list[str] = []
    room = budget_chars - len(CUT_MARKER) - 16
    i, j = 0, len(blocks) - 1
    while i <= j:  # alternately keep the next opening block and the next closing one
        take_head = len(head) <= len(tail)
        block = blocks[i] if take_head else blocks[j]
        if len(block) + 2 > room:
            break
        room -= len(block) + 2
        if take_head:
            head.append(block)
            i += 1
        else:
            tail.append(block)
            j -= 1
    cut = len(blocks) - len(head) - len(tail)
    return "\n\n".join([*head, CUT_MARKER.format(n=cut), *reversed(tail)])


__all__ = ["CUT_MARKER", "render_event", "render_transcript"]
