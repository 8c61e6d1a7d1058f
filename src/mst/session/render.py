"""A transcript as readable Markdown: what LLM and agentic judges read (docs/grading.md, "Judges").

Each event becomes one short block: the user's and the assistant's messages, each tool call with
its input and its output (or error), each model request with its tokens, retries, and the
session's result. A transcript longer than the judge's budget is cut in the *middle* (the task
and the end, where the answer is, matter most), and the cut is a visible marker line naming how
many events were left out, never a silent truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from mst.session.events import (
    ASSISTANT_MESSAGE,
    MODEL_REQUEST,
    MODEL_RETRY,
    SESSION_FORMAT,
    SESSION_RESULT,
    TOOL_COMPLETE,
    TOOL_START,
    USER_MESSAGE,
    Event,
)

CUT_MARKER: Final = "[… {n} events cut: transcript over the judge's budget …]"
_VALUE_CHARS: Final = 4000  # one tool input or output; longer ones are cut where they are shown


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(b.get("text", "")) if isinstance(b, dict) and b.get("type", "text") == "text"
                 else f"[{b.get('type', 'content')}]" if isinstance(b, dict) else str(b) for b in content]
        return "\n".join(p for p in parts if p)
    return _json(content)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)


def _clip(text: str) -> str:
    if len(text) <= _VALUE_CHARS:
        return text
    return f"{text[:_VALUE_CHARS]}… [{len(text) - _VALUE_CHARS} more characters]"


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{_clip(text)}\n{fence}"


def _phase(event: Event) -> str:
    phase = (event.get("provenance") or {}).get("phase")
    return f" ({phase})" if isinstance(phase, str) and phase not in ("agent", "") else ""


def _user(d: Mapping[str, Any], e: Event) -> str:
    return f"**User{_phase(e)}:** {_text(d.get('content'))}"


def _assistant(d: Mapping[str, Any], e: Event) -> str:
    return f"**Assistant{_phase(e)}:** {_text(d.get('content'))}"


def _tool_name(d: Mapping[str, Any]) -> str:
    name, server = str(d.get("toolName") or "?"), d.get("mcpServerName")
    return f"{server}/{name}" if server else name


def _tool_start(d: Mapping[str, Any], e: Event) -> str:
    head = f"### Tool call `{_tool_name(d)}` (id {d.get('toolCallId')}){_phase(e)}"
    return f"{head}\n\nInput:\n{_fence(_json(d.get('input')))}"


def _tool_done(d: Mapping[str, Any], e: Event) -> str:
    ok = d.get("success")
    what = "Output" if ok else "Error"
    body = d.get("output") if ok else d.get("error")
    took = f", {d['durationMs']} ms" if isinstance(d.get("durationMs"), int | float) else ""
    head = f"### Tool result `{_tool_name(d)}` (id {d.get('toolCallId')}, {'ok' if ok else 'failed'}{took})"
    return f"{head}{_phase(e)}\n\n{what}:\n{_fence(_text(body))}"


def _request(d: Mapping[str, Any], e: Event) -> str:
    return (f"_Model request: {d.get('model') or '?'}, {d.get('inputTokens', '?')} input tokens, "
            f"{d.get('outputTokens', '?')} output tokens_{_phase(e)}")


def _retry(d: Mapping[str, Any], e: Event) -> str:
    return f"_Model request retried: {_json(d)}_"


def _result(d: Mapping[str, Any], e: Event) -> str:
    ending = d.get("ending") or {}
    how = ending.get("outcome") or ending.get("what") or d.get("outcome") or "?"
    answer = d.get("answer")
    return f"### Result: {how}\n\nFinal answer:\n{_fence(answer if isinstance(answer, str) else '(none)')}"


def _other(e: Event) -> str:
    return f"_{e.get('type')}: {_clip(_json(e.get('data')))}_"


_RENDER: Final[dict[str, Callable[[Mapping[str, Any], Event], str]]] = {
    USER_MESSAGE: _user, ASSISTANT_MESSAGE: _assistant, TOOL_START: _tool_start, TOOL_COMPLETE: _tool_done,
    MODEL_REQUEST: _request, MODEL_RETRY: _retry, SESSION_RESULT: _result,
}


def render_event(event: Event) -> str | None:
    """One event's Markdown block; ``None`` for the format header, which says nothing to a reader."""
    kind = event.get("type")
    if kind == SESSION_FORMAT:
        return None
    render = _RENDER.get(str(kind))
    data = event.get("data")
    return render(data if isinstance(data, dict) else {}, event) if render is not None else _other(event)


def render_transcript(events: Sequence[Event], *, budget_chars: int | None = None) -> str:
    """The transcript as Markdown; over ``budget_chars``, its middle events are cut behind a marker.

    The cut keeps whole events: as many from the start and from the end as fit (alternating, so
    both the task and the final answer survive), and one marker line in between.
    """
    blocks = [b for b in (render_event(e) for e in events) if b is not None]
    text = "\n\n".join(blocks) + "\n"
    if budget_chars is None or len(text) <= budget_chars:
        return text
    return _cut(blocks, budget_chars)


def _cut(blocks: list[str], budget: int) -> str:
    head: list[str] = []
    tail: list[str] = []
    marker_room = len(CUT_MARKER.format(n=len(blocks))) + 4
    used, lo, hi = marker_room, 0, len(blocks) - 1
    take_head = True
    while lo <= hi:
        block = blocks[lo] if take_head else blocks[hi]
        if used + len(block) + 2 > budget:
            break
        used += len(block) + 2
        if take_head:
            head.append(block)
            lo += 1
        else:
            tail.append(block)
            hi -= 1
        take_head = not take_head
    cut = hi - lo + 1
    return "\n\n".join([*head, CUT_MARKER.format(n=cut), *reversed(tail)]) + "\n"


__all__ = ["CUT_MARKER", "render_event", "render_transcript"]
