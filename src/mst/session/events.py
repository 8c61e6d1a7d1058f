"""Canonical transcript events: the unified session graders read (docs/graders.md).

Events stay plain dicts end to end: a transcript of a million events must not pay for a model
object per event. This module names the fields and builds the events mst's own clients write.
"""

from __future__ import annotations

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
TOOL_START: Final = "tool.execution_start"
TOOL_COMPLETE: Final = "tool.execution_complete"
SESSION_RESULT: Final = "session.result"


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
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and "." in value["type"]
        and isinstance(value.get("data"), dict)
        and isinstance(value.get("provenance"), dict)
    )
