"""The spans of one attempt, as plain records: what the OTLP export sends (docs/otlp.md).

One trace per attempt. The root span is the attempt (eval, variant, case, trial, its ending,
pass/fail and verdicts); its children are the model requests and tool calls of the transcript,
named and attributed after the OpenTelemetry GenAI semantic conventions, and one span per judge
verdict. This module knows nothing of OpenTelemetry's SDK: it turns a run's records into
:class:`SpanRecord` s, so the mapping is tested without the optional extra and the SDK glue
(:mod:`mst.export.otlp`) stays a thin loop.

Times come from the transcript: an event's ``provenance.timestampMs`` is milliseconds since the
attempt started, and the attempt record's ``startedAt`` (Unix milliseconds) anchors them. A
model request's span ends at its event and lasts its ``durationMs`` (else it starts at the
event before it); a tool call's span runs from its ``tool.execution_start`` to its
``tool.execution_complete``. Grading records no clock time, so judge spans follow the attempt's
end, one after the other, each as long as its recorded latency.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from mst.session.events import Event

AttrValue = str | bool | int | float | Sequence[str]
SpanKind = Literal["internal", "client"]

_MS: Final = 1_000_000  # nanoseconds in a millisecond

# Event types read here (docs/graders.md names them all).
_MODEL_REQUEST: Final = "model.request"
_TOOL_START: Final = "tool.execution_start"
_TOOL_COMPLETE: Final = "tool.execution_complete"
_SESSION_RESULT: Final = "session.result"


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span: ids are ints (trace 128 bits, span 64 bits); ``parent`` is None for the root."""

    name: str
    trace_id: int
    span_id: int
    parent: int | None
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    error: str | None = None  # the span's status is ERROR with this description; else unset


@dataclass(frozen=True, slots=True)
class AttemptView:
    """What the export reads of one attempt: its record, its grading (or None) and its transcript."""

    run_id: str
    eval_name: str
    variant: Mapping[str, Any]  # run.json's variant entry: id, client, model
    record: Mapping[str, Any]  # the attempt record as stored
    grading: Mapping[str, Any] | None  # the trial's grading record as stored
    events: Sequence[Event]
    fallback_start_ms: float  # when the record has no startedAt (runs written before it)
    transcript_error: str | None = None  # why ``events`` is empty: the transcript is missing or unreadable


def trace_ids(run_id: str, record: Mapping[str, Any]) -> tuple[int, int]:
    """A trace id and a first span id, derived from the attempt's identity: exporting a run
    twice sends the same ids, so a backend can tell a re-export from a new attempt."""
    key = f"{run_id}\0{record['variant']}\0{record['case']}\0{record['trial']}\0{record.get('try') or 1}"
    digest = hashlib.blake2b(key.encode(), digest_size=24).digest()
    trace = int.from_bytes(digest[:16], "big") or 1
    span = (int.from_bytes(digest[16:], "big") & 0x7FFF_FFFF_FFFF_0000) or 0x10000
    return trace, span


def attempt_spans(view: AttemptView) -> list[SpanRecord]:
    """The root span first, then its children in transcript order, then the judge spans."""
    record = view.record
    trace, first = trace_ids(view.run_id, record)
    start_ms = record.get("startedAt")
    base_ns = int((start_ms if isinstance(start_ms, int | float) else view.fallback_start_ms) * _MS)
    end_ms = _attempt_end_ms(record, view.events)
    root_end = base_ns + int(end_ms * _MS)
    children = _transcript_spans(view, trace, first, base_ns, root_end)
    children += _judge_spans(view.grading, trace, first, first + 1 + len(children), root_end)
    return [_root(view, trace, first, base_ns, root_end), *children]


def _attempt_end_ms(record: Mapping[str, Any], events: Sequence[Event]) -> float:
    """The attempt's measured duration, or its last event's time when that is later: the two
    are taken from different clocks a few milliseconds apart on a loaded machine, and a root
    span must cover its children."""
    stamps = [_stamp(e) for e in events]
    last = max((s for s in stamps if s is not None), default=0.0)
    duration = record.get("durationMs")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        return max(float(duration), last)
    return last


def _stamp(event: Event) -> float | None:
    value = event["provenance"].get("timestampMs")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _root(view: AttemptView, trace: int, span: int, start: int, end: int) -> SpanRecord:
    record, variant = view.record, view.variant
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": str(variant.get("client") or record["variant"]),
        "mst.run.id": view.run_id,
        "mst.eval": view.eval_name,
        "mst.variant": str(record["variant"]),
        "mst.case": str(record["case"]),
        "mst.trial": int(record["trial"]),
        "mst.try": int(record.get("try") or 1),
    }
    model = variant.get("model")
    if isinstance(model, str):
        attrs["gen_ai.request.model"] = model
    usage = record.get("usage")
    if isinstance(usage, dict):
        _tokens(attrs, usage.get("inputTokens"), usage.get("outputTokens"))
    error = _ending_attrs(attrs, record.get("ending"))
    _grading_attrs(attrs, view.grading)
    if view.transcript_error is not None:
        attrs["mst.transcript.error"] = view.transcript_error
    name = f"invoke_agent {record['variant']}/{record['case']}/{record['trial']}"
    return SpanRecord(name, trace, span, None, "internal", start, max(end, start), attrs, error)


def _ending_attrs(attrs: dict[str, AttrValue], ending: Any) -> str | None:
    """The ending's fields (docs/endings.md); an infrastructure failure is the span's error."""
    if not isinstance(ending, dict):
        return None
    kind = ending.get("kind")
    attrs["mst.ending.kind"] = str(kind)
    if kind == "trial":
        attrs["mst.ending.outcome"] = str(ending.get("outcome", "completed"))
        attrs["mst.ending.retryable"] = False
        if isinstance(ending.get("detail"), str):
            attrs["mst.ending.detail"] = ending["detail"]
        return None
    what, why = str(ending.get("what")), str(ending.get("why", ""))
    attrs["mst.ending.what"] = what
    attrs["mst.ending.why"] = why
    attrs["mst.ending.retryable"] = bool(ending.get("retryable"))
    attrs["error.type"] = what
    return f"{what}: {why}"


def _grading_attrs(attrs: dict[str, AttrValue], grading: Mapping[str, Any] | None) -> None:
    if grading is None:
        attrs["mst.status"] = "ungraded"
        return
    attrs["mst.status"] = str(grading.get("status"))
    passed = grading.get("passed")
    if isinstance(passed, bool):
        attrs["mst.passed"] = passed
    verdicts = grading.get("verdicts") or ()
    attrs["mst.verdicts"] = [f"{v.get('judge')}={'pass' if v.get('passed') else 'fail'}" for v in verdicts]
    errors = grading.get("errors") or ()
    if errors:
        attrs["mst.grading.errors"] = [f"{e.get('judge')}: {e.get('message')}" for e in errors]


def _tokens(attrs: dict[str, AttrValue], inputs: Any, outputs: Any) -> None:
    if isinstance(inputs, int) and not isinstance(inputs, bool):
        attrs["gen_ai.usage.input_tokens"] = inputs
    if isinstance(outputs, int) and not isinstance(outputs, bool):
        attrs["gen_ai.usage.output_tokens"] = outputs


def _transcript_spans(view: AttemptView, trace: int, first: int, base: int, root_end: int) -> list[SpanRecord]:
    """Model requests and tool calls of the client under test, in the order they happened."""
    spans: list[SpanRecord] = []
    open_tools: dict[str, tuple[int, Event]] = {}  # toolCallId -> (index in spans, start event)
    previous_ms = 0.0
    for event in view.events:
        type_ = event["type"]
        at = _stamp(event)
        if type_ == _MODEL_REQUEST:
            end = at if at is not None else previous_ms
            duration = event["data"].get("durationMs")
            begin = end - float(duration) if isinstance(duration, int | float) and duration >= 0 else previous_ms
            spans.append(_model_span(event["data"], trace, first + 1 + len(spans), first,
                                     base + int(max(begin, 0.0) * _MS), base + int(end * _MS)))
        elif type_ == _TOOL_START:
            begin = at if at is not None else previous_ms
            open_tools[str(event["data"].get("toolCallId"))] = (len(spans), event)
            spans.append(_tool_span(event["data"], None, trace, first + 1 + len(spans), first,
                                    base + int(begin * _MS), root_end))
        elif type_ == _TOOL_COMPLETE:
            opened = open_tools.pop(str(event["data"].get("toolCallId")), None)
            if opened is not None:
                index, _ = opened
                started = spans[index]
                end_ns = base + int((at if at is not None else previous_ms) * _MS)
                spans[index] = _tool_span(opened[1]["data"], event["data"], trace, started.span_id, first,
                                          started.start_ns, max(end_ns, started.start_ns))
        if at is not None:
            previous_ms = at
    return spans


def _model_span(data: Mapping[str, Any], trace: int, span: int, parent: int, start: int, end: int) -> SpanRecord:
    model = str(data.get("model") or "unknown")
    attrs: dict[str, AttrValue] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    _tokens(attrs, data.get("inputTokens"), data.get("outputTokens"))
    index = data.get("requestIndex")
    if isinstance(index, int):
        attrs["mst.request_index"] = index
    return SpanRecord(f"chat {model}", trace, span, parent, "client", start, max(end, start), attrs)


def _tool_span(start: Mapping[str, Any], done: Mapping[str, Any] | None, trace: int, span: int, parent: int,
               start_ns: int, end_ns: int) -> SpanRecord:
    name = str(start.get("toolName") or "unknown")
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function"}
    if start.get("toolCallId") is not None:
        attrs["gen_ai.tool.call.id"] = str(start["toolCallId"])
    if isinstance(start.get("mcpServerName"), str):
        attrs["mst.mcp.server"] = start["mcpServerName"]
    if start.get("rejected") or (done is not None and done.get("rejected")):
        attrs["mst.tool.rejected"] = True  # mst refused the call: it reached no server
    error: str | None
    if done is None:
        error = "the transcript records no result for this call"
    elif done.get("success") is False:
        error = str(done.get("error") or "the tool call failed")
        attrs["error.type"] = "tool_error"
    else:
        error = None
    return SpanRecord(f"execute_tool {name}", trace, span, parent, "internal", start_ns, end_ns, attrs, error)


def _judge_spans(grading: Mapping[str, Any] | None, trace: int, parent: int, first: int, at: int
                 ) -> list[SpanRecord]:
    """One span per judge verdict (assertions are in the root's ``mst.verdicts``). LLM judges'
    verdicts carry ``model``, ``inputTokens``, ``outputTokens`` and ``latencyMs``: they become a
    GenAI ``chat`` span's attributes."""
    spans: list[SpanRecord] = []
    for verdict in (grading or {}).get("verdicts") or ():
        if verdict.get("kind") == "assertion":
            continue
        judge = str(verdict.get("judge"))
        attrs: dict[str, AttrValue] = {"mst.judge.id": judge, "mst.judge.kind": str(verdict.get("kind")),
                                       "mst.judge.passed": bool(verdict.get("passed"))}
        if isinstance(verdict.get("score"), int | float):
            attrs["mst.judge.score"] = float(verdict["score"])
        if isinstance(verdict.get("reason"), str):
            attrs["mst.judge.reason"] = verdict["reason"]
        usage = verdict.get("usage") if isinstance(verdict.get("usage"), dict) else {}
        model = _field(verdict, usage, "model")
        if isinstance(model, str):
            attrs["gen_ai.operation.name"] = "chat"
            attrs["gen_ai.request.model"] = model
            _tokens(attrs, _field(verdict, usage, "inputTokens"), _field(verdict, usage, "outputTokens"))
        cost = _field(verdict, usage, "costUsd")
        if isinstance(cost, int | float):
            attrs["mst.judge.cost_usd"] = float(cost)
        took = _field(verdict, usage, "latencyMs")
        took = verdict.get("durationMs") if took is None else took
        length = int(took * _MS) if isinstance(took, int | float) and took >= 0 else 0
        spans.append(SpanRecord(f"mst.judge {judge}", trace, first + len(spans), parent,
                                "client" if model else "internal", at, at + length, attrs))
        at += length
    return spans


def _field(verdict: Mapping[str, Any], usage: Mapping[str, Any], name: str) -> Any:
    """A judge's usage field: on the verdict record (docs/otlp.md), else inside its ``usage``."""
    value = verdict.get(name)
    return usage.get(name) if value is None else value
