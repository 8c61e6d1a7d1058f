"""Canonical transcript events, transcript I/O and redaction (docs/graders.md, "The contract")."""

from mst.session.events import (
    ASSISTANT_MESSAGE,
    MODEL_REQUEST,
    PHASE_AGENT,
    PHASE_GRADING,
    PHASE_JUDGE,
    SESSION_RESULT,
    TOOL_COMPLETE,
    TOOL_START,
    USER_MESSAGE,
    Event,
    Session,
    format_header,
    is_event,
    make_event,
)
from mst.session.io import TranscriptError, parse_transcript, read_transcript, write_transcript
from mst.session.redact import NO_REDACTION, Redactor

__all__ = [
    "ASSISTANT_MESSAGE",
    "MODEL_REQUEST",
    "NO_REDACTION",
    "PHASE_AGENT",
    "PHASE_GRADING",
    "PHASE_JUDGE",
    "SESSION_RESULT",
    "TOOL_COMPLETE",
    "TOOL_START",
    "USER_MESSAGE",
    "Event",
    "Redactor",
    "Session",
    "TranscriptError",
    "format_header",
    "is_event",
    "make_event",
    "parse_transcript",
    "read_transcript",
    "write_transcript",
]
