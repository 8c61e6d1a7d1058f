"""Canonical events recorded in memory as a program produces them: a client's attempt, a judge's run.

The claude-code and codex clients and agentic judges read their CLI's stream into one of these
(:mod:`mst.agentcli`); the collector (or the grading phase, for a judge) redacts and writes them.
"""

from __future__ import annotations

import time
from typing import Any

from mst.session.events import FORMAT_VERSION, PHASE_AGENT, SESSION_FORMAT, Event


class TranscriptRecorder:
    """Collects an attempt's canonical events in memory; the collector redacts and writes them."""

    __slots__ = ("_start", "component", "events", "phase")

    def __init__(self, component: str, phase: str = PHASE_AGENT) -> None:
        self.component = component
        self.phase = phase  # the events' provenance phase: the agent's, or a judge's own run
        # format_header(component) with this phase, built here like emit's events
        self.events: list[Event] = [{"type": SESSION_FORMAT, "data": {"version": FORMAT_VERSION},
                                     "provenance": {"component": component, "phase": phase}}]
        self._start = time.monotonic()

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)

    def emit(self, type_: str, data: dict[str, Any], *, phase: str | None = None) -> Event:
        """Append one event: what :func:`~mst.session.events.make_event` builds, built here (a
        client emits four or more per attempt, and the call with keyword arguments cost as much
        as the event; bench/perf16_percase.md). ``tests/session`` holds the two equal."""
        events = self.events
        event: Event = {"type": type_, "data": data, "provenance": {
            "component": self.component, "phase": phase or self.phase, "index": len(events),
            "timestampMs": int((time.monotonic() - self._start) * 1000),
        }}
        events.append(event)
        return event

    def extend(self, events: list[Event]) -> None:
        """Add events a client read from elsewhere (a command's own transcript), as they are."""
        self.events.extend(events)


__all__ = ["TranscriptRecorder"]
