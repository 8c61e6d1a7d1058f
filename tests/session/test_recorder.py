"""``TranscriptRecorder.emit`` builds its events itself: they must stay what ``make_event`` builds."""

from __future__ import annotations

import pytest

from mst.session import recorder as recorder_module
from mst.session.events import PHASE_AGENT, format_header, make_event
from mst.session.recorder import TranscriptRecorder


@pytest.mark.parametrize("phase", [None, "judge"])
def test_emit_builds_what_make_event_builds(monkeypatch: pytest.MonkeyPatch, phase: str | None) -> None:
    now = [100.0]
    monkeypatch.setattr(recorder_module.time, "monotonic", lambda: now[0])
    rec = TranscriptRecorder("agent", phase=PHASE_AGENT)
    now[0] = 100.25
    first = rec.emit("user.message", {"content": "hi"})
    now[0] = 101.5
    second = rec.emit("assistant.message", {"content": "yo"}, phase=phase)
    assert first == make_event(
        "user.message", {"content": "hi"}, component="agent", phase=PHASE_AGENT, index=1, timestamp_ms=250
    )
    assert second == make_event(
        "assistant.message",
        {"content": "yo"},
        component="agent",
        phase=phase or PHASE_AGENT,
        index=2,
        timestamp_ms=1500,
    )
    assert rec.events[1:] == [first, second]
    assert list(second) == list(make_event("x.y", {}, component="c", index=0, timestamp_ms=0))  # key order
    assert list(second["provenance"]) == ["component", "phase", "index", "timestampMs"]


@pytest.mark.parametrize("phase", [PHASE_AGENT, "judge"])
def test_the_header_is_the_format_header_with_the_recorders_phase(phase: str) -> None:
    header = format_header("codex")
    header["provenance"]["phase"] = phase
    assert TranscriptRecorder("codex", phase=phase).events == [header]
