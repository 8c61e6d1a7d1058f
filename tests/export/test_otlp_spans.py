"""The spans of one attempt (mst.export.otlp_spans): ids, parents, times from the transcript,
the ending, verdicts, GenAI attributes — and their wire encoding against the SDK's encoder."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mst.export.otlp import sdk_converter, traces_endpoint
from mst.export.otlp_spans import AttemptView, SpanRecord, attempt_spans, trace_ids
from mst.export.otlp_wire import Encoder

MS = 1_000_000
START_MS = 1_796_000_000_000


def ev(type_: str, at: int | None, **data: Any) -> dict[str, Any]:
    prov: dict[str, Any] = {"component": "agent", "phase": "agent"}
    if at is not None:
        prov["timestampMs"] = at
    return {"type": type_, "data": data, "provenance": prov}


EVENTS = [
    ev("session.format", 0, version=1),
    ev("user.message", 1, content="hi"),
    ev("model.request", 40, model="m-1", requestIndex=0, inputTokens=100, outputTokens=7, durationMs=30),
    ev("tool.execution_start", 41, toolCallId="c0", toolName="search", input={}, mcpServerName="store"),
    ev("tool.execution_complete", 90, toolCallId="c0", toolName="search", success=True, output="x"),
    ev("tool.execution_start", 91, toolCallId="c1", toolName="boom", input={}, mcpServerName="store"),
    ev("tool.execution_complete", 95, toolCallId="c1", toolName="boom", success=False, error="it broke"),
    ev("model.request", 120, model="m-1", requestIndex=1, inputTokens=150, outputTokens=9),
    ev("tool.execution_start", 121, toolCallId="c2", toolName="nope", input={}, mcpServerName=None,
       rejected=True),
    ev("session.result", 130, answer="ok"),
]


def view(record: dict[str, Any] | None = None, grading: dict[str, Any] | None = None,
         events: list[dict[str, Any]] | None = None) -> AttemptView:
    rec = {"variant": "cand", "case": "c1", "trial": 2, "try": 1, "startedAt": START_MS, "durationMs": 130,
           "ending": {"kind": "trial", "outcome": "completed"}, "usage": {"inputTokens": 250, "outputTokens": 16},
           **(record or {})}
    return AttemptView("run-1", "my-eval", {"id": "cand", "client": "agent", "model": "m-1"}, rec, grading,
                       EVENTS if events is None else events, fallback_start_ms=0)


GRADING = {"status": "failed", "passed": False, "verdicts": [
    {"judge": "contains", "kind": "assertion", "passed": True},
    {"judge": "rubric", "kind": "llm", "passed": False, "score": 0.25, "reason": "vague", "model": "judge-9",
     "inputTokens": 800, "outputTokens": 40, "latencyMs": 1200, "costUsd": 0.002},
    {"judge": "code-check", "kind": "code", "passed": True, "durationMs": 3},
]}


def test_one_root_and_its_children_share_a_trace() -> None:
    spans = attempt_spans(view(grading=GRADING))
    root, children = spans[0], spans[1:]
    assert root.parent is None and root.name == "invoke_agent cand/c1/2"
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent == root.span_id for s in children)
    assert len({s.span_id for s in spans}) == len(spans)
    assert [s.name for s in children] == [
        "chat m-1", "execute_tool search", "execute_tool boom", "chat m-1", "execute_tool nope",
        "mst.judge rubric", "mst.judge code-check"]


def test_the_root_covers_an_event_stamped_after_the_measured_duration() -> None:
    # The duration and the event times come from different clocks: on a loaded machine the last
    # event can be stamped a few milliseconds after the attempt's measured end.
    spans = attempt_spans(view(record={"durationMs": 126}))
    root, children = spans[0], spans[1:]
    assert root.end_ns == (START_MS + 130) * MS
    assert all(root.start_ns <= c.start_ns <= c.end_ns <= root.end_ns for c in children)
    assert attempt_spans(view(record={"durationMs": 200}))[0].end_ns == (START_MS + 200) * MS


def test_ids_are_stable_per_attempt_and_differ_between_tries() -> None:
    a = trace_ids("run-1", {"variant": "v", "case": "c", "trial": 0})
    assert a == trace_ids("run-1", {"variant": "v", "case": "c", "trial": 0, "try": 1})
    assert a != trace_ids("run-1", {"variant": "v", "case": "c", "trial": 0, "try": 2})
    assert a != trace_ids("run-2", {"variant": "v", "case": "c", "trial": 0})


def test_root_attributes_name_the_attempt_its_ending_and_its_grading() -> None:
    root = attempt_spans(view(grading=GRADING))[0]
    a = root.attributes
    assert a["mst.eval"] == "my-eval" and a["mst.run.id"] == "run-1"
    assert (a["mst.variant"], a["mst.case"], a["mst.trial"], a["mst.try"]) == ("cand", "c1", 2, 1)
    assert (a["mst.ending.kind"], a["mst.ending.outcome"], a["mst.ending.retryable"]) == ("trial", "completed", False)
    assert a["mst.passed"] is False and a["mst.status"] == "failed"
    assert a["mst.verdicts"] == ["contains=pass", "rubric=fail", "code-check=pass"]
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.request.model"] == "m-1"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (250, 16)
    assert root.error is None
    assert (root.start_ns, root.end_ns) == (START_MS * MS, (START_MS + 130) * MS)


def test_an_infrastructure_ending_is_the_root_span_error() -> None:
    ending = {"kind": "infrastructure", "what": "network", "why": "refused", "retryable": True}
    root = attempt_spans(view({"ending": ending}))[0]
    a = root.attributes
    ending_attrs = (a["mst.ending.kind"], a["mst.ending.what"], a["mst.ending.retryable"])
    assert ending_attrs == ("infrastructure", "network", True)
    assert a["mst.status"] == "ungraded" and "mst.passed" not in a
    assert root.error == "network: refused" and a["error.type"] == "network"


def test_model_and_tool_spans_follow_the_genai_conventions_and_the_transcript_times() -> None:
    chat, search, boom, chat2, nope = attempt_spans(view())[1:6]
    assert chat.kind == "client"
    assert chat.attributes == {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
                               "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 7,
                               "mst.request_index": 0}
    base = START_MS * MS
    assert (chat.start_ns, chat.end_ns) == (base + 10 * MS, base + 40 * MS)  # ends at its event, lasts durationMs
    assert (chat2.start_ns, chat2.end_ns) == (base + 95 * MS, base + 120 * MS)  # no duration: from the event before
    assert search.attributes["gen_ai.tool.name"] == "search" and search.attributes["gen_ai.tool.call.id"] == "c0"
    assert search.attributes["mst.mcp.server"] == "store" and search.error is None
    assert (search.start_ns, search.end_ns) == (base + 41 * MS, base + 90 * MS)
    assert boom.error == "it broke" and boom.attributes["error.type"] == "tool_error"
    assert nope.attributes["mst.tool.rejected"] is True
    assert nope.error == "the transcript records no result for this call" and nope.end_ns == base + 130 * MS


def test_judge_spans_carry_llm_usage_and_follow_the_attempt() -> None:
    rubric, code = attempt_spans(view(grading=GRADING))[-2:]
    end = (START_MS + 130) * MS
    assert rubric.attributes["gen_ai.request.model"] == "judge-9" and rubric.kind == "client"
    usage = (rubric.attributes["gen_ai.usage.input_tokens"], rubric.attributes["gen_ai.usage.output_tokens"])
    assert usage == (800, 40)
    assert rubric.attributes["mst.judge.passed"] is False and rubric.attributes["mst.judge.score"] == 0.25
    assert rubric.attributes["mst.judge.cost_usd"] == 0.002
    assert (rubric.start_ns, rubric.end_ns) == (end, end + 1200 * MS)
    assert code.kind == "internal" and "gen_ai.request.model" not in code.attributes
    assert (code.start_ns, code.end_ns) == (end + 1200 * MS, end + 1203 * MS)


def test_a_record_without_start_time_uses_the_fallback() -> None:
    v = view()
    record = {k: x for k, x in v.record.items() if k != "startedAt"}
    root = attempt_spans(AttemptView(v.run_id, v.eval_name, v.variant, record, None, v.events, 5_000.0))[0]
    assert root.start_ns == 5_000 * MS


def _decoded(data: bytes) -> dict[str, Any]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(data)
    return MessageToDict(request)


@pytest.mark.parametrize("extra", [
    {}, {"neg": -5, "big": 2**62, "pi": 3.25, "empty": "", "uni": "é✓", "list": ["a", "", "ü"], "t": True,
         "f": False, "zero": 0, "long": "x" * 300},
])
def test_the_wire_encoding_equals_the_sdk_encoders(extra: dict[str, Any]) -> None:
    records = attempt_spans(view(grading=GRADING))
    records.append(SpanRecord("odd", 2**127 + 5, 2**63 + 1, 7, "client", 1, 2**63, dict(extra), error="bad ✗"))
    resource = {"service.name": "mst", "service.version": "0.1.0", "n": 3}
    encoder = Encoder(resource, "mst", "0.1.0")
    ours = encoder.request([encoder.span(r) for r in records])
    again = encoder.request([encoder.span(r) for r in records])  # the attribute cache changes nothing
    sdk = encode_spans(sdk_converter(resource)(records)).SerializeToString()
    assert _decoded(ours) == _decoded(sdk)
    assert ours == again


def test_the_endpoint_comes_from_the_option_then_the_standard_variables() -> None:
    assert traces_endpoint("http://h:1", {}) == "http://h:1/v1/traces"
    assert traces_endpoint("http://h:1/v1/traces/", {}) == "http://h:1/v1/traces"
    assert traces_endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318/"}) == "https://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}
    assert traces_endpoint(None, env) == "http://t/x"
    assert traces_endpoint("http://h:1", env) == "http://h:1/v1/traces"
    assert traces_endpoint(None, {}) == "http://localhost:4318/v1/traces"
    from mst.errors import UserError

    with pytest.raises(UserError, match="not an http"):
        traces_endpoint("localhost:4318", {})


def test_llm_usage_kept_under_the_verdicts_usage_is_read_too() -> None:
    verdict = {"judge": "rubric", "kind": "llm", "passed": True,
               "usage": {"model": "judge-9", "inputTokens": 5, "outputTokens": 2, "latencyMs": 10}}
    [judge] = attempt_spans(view(grading={"status": "passed", "passed": True, "verdicts": [verdict]}))[-1:]
    assert judge.attributes["gen_ai.request.model"] == "judge-9"
    assert (judge.attributes["gen_ai.usage.input_tokens"], judge.attributes["gen_ai.usage.output_tokens"]) == (5, 2)
    assert judge.end_ns - judge.start_ns == 10 * MS
