"""Canonical transcript events: the unified session graders read (docs/graders.md).

Events stay plain dicts end to end: a transcript of a million events must not pay for a model
object per event. This module names the fields and builds the events mst's own clients write:

- ``session.format`` (``version``): the first line of every transcript mst writes.
- ``user.message`` (``content``) and ``assistant.message`` (``content``, ``toolCalls``).
- ``model.request`` (``model``, ``requestIndex``, ``inputTokens``, ``outputTokens``,
  ``totalTokens``): one per model response, with its final token counts, never a partial one.
- ``model.retry`` (``attempt``, ``maxRetries``, ``delayMs``, ``status``, ``error``): the client
  program retried a failed model request on its own (Claude Code's ``system/api_retry`` lines).
  It is a provider retry, not an MCP one: the ``retries`` grader counts only ``mcp.*`` events.
- ``tool.execution_start`` (``toolCallId``, ``toolName``, ``input``, ``mcpServerName``) and
  ``tool.execution_complete`` (the same ids, ``success``, ``output`` or ``error``, ``durationMs``).
- ``session.result`` (``answer``, ``outcome``, ``ending``, ``usage``, ``durationMs``, ``turns``):
  the last line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

Event = dict[str, Any]
Session = list[Event]

FORMAT_VERSION: Final = 1

# Provenance phases. ``agent`` is the client under test; everything else is mst's own work.
PHASE_AGENT: Final = "agent"
PHASE_JUDGE: Final = "judge"
PHASE_DETECTION: Final = "detection"
PHASE_EVAL: Final = "eval"
PHASE_GRADING: Final = "grading"

# Event types mst writes.
SESSION_FORMAT: Final = "session.format"
USER_MESSAGE: Final = "user.message"
ASSISTANT_MESSAGE: Final = "assistant.message"
MODEL_REQUEST: Final = "model.request"
MODEL_RETRY: Final = "model.retry"
TOOL_START: Final = "tool.execution_start"
TOOL_COMPLETE: Final = "tool.execution_complete"
SESSION_RESULT: Final = "session.result"
# MCP servers of the agent client: which server instance an attempt used, tools it withheld from
# the model, and progress notifications of a tool call (docs/mcp-servers.md).
MCP_SERVER: Final = "mcp.server"
MCP_TOOLS_WITHHELD: Final = "mcp.tools_withheld"
TOOL_PROGRESS: Final = "tool.progress"


def make_event(
    type_: str,
    data: dict[str, Any],
    *,
    component: str,
    phase: str = PHASE_AGENT,
    index: int | None = None,
    timestamp_ms: int | None = None,
    agent_id: str | None = None,
) -> Event:
    provenance: dict[str, Any] = {"component": component, "phase": phase}
    if index is not None:
        provenance["index"] = index
    if timestamp_ms is not None:
        provenance["timestampMs"] = timestamp_ms
    event: Event = {"type": type_, "data": data, "provenance": provenance}
    if agent_id is not None:
        event["agentId"] = agent_id
    return event


def format_header(component: str) -> Event:
    return make_event(SESSION_FORMAT, {"version": FORMAT_VERSION}, component=component, phase=PHASE_AGENT)


def is_event(value: Any) -> bool:
    """The canonical shape: a dotted string type, an object data, a provenance object."""
    return all_events((value,))


def all_events(values: Iterable[Any]) -> bool:
    """:func:`is_event` of every item, in one loop: a transcript is checked whole each time a
    trial is graded, and a call per line cost more than the test itself (exact-class tests
    first, ``isinstance`` only for subclasses)."""
    for value in values:
        if value.__class__ is not dict and not isinstance(value, dict):
            return False
        etype, data, prov = value.get("type"), value.get("data"), value.get("provenance")
        if not ((etype.__class__ is str or isinstance(etype, str)) and "." in etype
                and (data.__class__ is dict or isinstance(data, dict))
                and (prov.__class__ is dict or isinstance(prov, dict))):
            return False
    return True
