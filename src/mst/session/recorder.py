"""Canonical events recorded in memory as a program produces them: a client's attempt, a judge's run.

The claude-code and codex clients and agentic judges read their CLI's stream into one of these
(:mod:`mst.agentcli`); the collector (or the grading phase, for a judge) redacts and writes them.
"""

from __future__ import annotations

import time
from typing import Any

from mst.session.events import PHASE_AGENT, Event, format_header, make_event


class TranscriptRecorder:
    """Collects an attempt's canonical events in memory; the collector redacts and writes them."""

    __slots__ = ("_start", "component", "events", "phase")

    def __init__(self, component: str, phase: str = PHASE_AGENT) -> None:
        self.component = component
        self.phase = phase  # the events' provenance phase: the agent's, or a judge's own run
        header = format_header(component)
        header["provenance"]["phase"] = phase
        self.events: list[Event] = [header]
        self._start = time.monotonic()

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)

    def emit(self, type_: str, data: dict[str, Any], *, phase: str | None = None) -> Event:
        event = make_event(
            type_, data, component=self.component, phase=phase or self.phase,
            index=len(self.events), timestamp_ms=self.elapsed_ms(),
        )
        self.events.append(event)
        return event

    def extend(self, events: list[Event]) -> None:
        """Add events a client read from elsewhere (a command's own transcript), as they are."""
        self.events.extend(events)


__all__ = ["TranscriptRecorder"]
