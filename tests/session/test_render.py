"""The transcript renderer judges read (mst.session.render): readable, and cut visibly when over budget."""

from __future__ import annotations

import re

from mst.session.events import make_event
from mst.session.recorder import TranscriptRecorder
from mst.session.render import CUT_MARKER, render_transcript


def _session(turns: int = 1) -> list[dict[str, object]]:
    rec = TranscriptRecorder("agent")
    rec.emit("user.message", {"content": "How many claw hammers are in stock?"})
    for i in range(turns):
        rec.emit("model.request", {"model": "m1", "inputTokens": 100 + i, "outputTokens": 7})
        rec.emit("tool.execution_start", {"toolCallId": f"t{i}", "toolName": "check_stock", "mcpServerName": "store",
                                          "input": {"sku": f"HAM-{i:03d}"}})
        ok = i % 2 == 0
        said = {"output": '{"total": 42}'} if ok else {"error": "boom"}
        rec.emit("tool.execution_complete", {"toolCallId": f"t{i}", "toolName": "check_stock", "mcpServerName": "store",
                                             "success": ok, **said})
    rec.emit("assistant.message", {"content": [{"type": "text", "text": "42 claw hammers are in stock."}]})
    rec.emit("session.result", {"answer": "42 claw hammers are in stock.", "ending": {"kind": "trial",
                                                                                      "outcome": "completed"}})
    return rec.events  # type: ignore[return-value]


def test_messages_tool_calls_and_requests_are_shown() -> None:
    text = render_transcript(_session(2))  # type: ignore[arg-type]
    assert "session.format" not in text
    assert "**User:** How many claw hammers are in stock?" in text
    assert "### Tool call `store/check_stock` (id t0)" in text and '{"sku":"HAM-000"}' in text
    assert "### Tool result `store/check_stock` (id t0, ok)" in text and '{"total": 42}' in text
    assert "### Tool result `store/check_stock` (id t1, failed)" in text and "Error:\n```\nboom\n```" in text
    assert "_Model request: m1, 100 input tokens, 7 output tokens_" in text
    assert "**Assistant:** 42 claw hammers are in stock." in text
    assert "### Result: completed" in text
    assert "[…" not in text


def test_other_phases_are_named_and_unknown_events_still_shown() -> None:
    judge = make_event("assistant.message", {"content": "I judge"}, component="judge", phase="judge")
    odd = make_event("mcp.server", {"name": "store", "status": "connected"}, component="agent")
    text = render_transcript([judge, odd])  # type: ignore[list-item]
    assert "**Assistant (judge):** I judge" in text and '_mcp.server: {"name":"store","status":"connected"}_' in text


def test_a_fence_inside_a_value_cannot_end_its_block() -> None:
    event = make_event("tool.execution_complete", {"toolCallId": "x", "toolName": "t", "success": True,
                                                   "output": "```\nnot the end"}, component="agent")
    assert "````\n```\nnot the end\n````" in render_transcript([event])  # type: ignore[list-item]


def test_over_budget_the_middle_is_cut_behind_a_marker() -> None:
    events = _session(200)
    whole = render_transcript(events)  # type: ignore[arg-type]
    budget = len(whole) // 5
    cut = render_transcript(events, budget_chars=budget)  # type: ignore[arg-type]
    assert len(cut) <= budget
    assert cut.startswith("**User:** How many claw hammers are in stock?")  # the task survives
    assert cut.rstrip().endswith("```")  and "### Result: completed" in cut  # so does the end
    (line,) = [ln for ln in cut.splitlines() if ln.startswith("[…")]
    n = int(re.search(r"\[… (\d+) events cut", line).group(1))  # type: ignore[union-attr]
    assert line == CUT_MARKER.format(n=n)
    shown = cut.count("\n### ") + cut.count("\n_Model request") + cut.count("**User:**") + cut.count("\n**Assistant:**")
    assert shown + n == len(events) - 1  # every event but the format header: shown or counted as cut
    assert render_transcript(events, budget_chars=len(whole)) == whole  # at the budget: nothing cut
