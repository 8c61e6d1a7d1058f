"""Streamed responses decoded by the adapters themselves (``orjson`` over the SDK's raw response).

The SSE reader is checked on every way a body can be cut into reads; the OpenAI and Anthropic
adapters are checked against the fake provider sending exact bytes: lines split across HTTP
chunks, ``[DONE]``, tool-call arguments spread over many deltas, an ``error`` event in the middle
of the stream, and a connection dropped mid-stream, each ending as the status table says.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Step, raw_sse, serve
from real_helpers import SERVER
from tests.clients.clients_helpers import run, variant

from mst.clients.agent import AgentClient, AgentSettings
from mst.endings import EndingException, Infrastructure, Trial
from mst.providers._errors import stream_error_status
from mst.providers._sse import sse_events
from mst.providers.anthropic import AnthropicProvider
from mst.providers.base import AttemptContext, ContextOverflow, ModelRequest, ModelResponse, UserMessage
from mst.providers.openai import OpenAIProvider
from mst.providers.settings import ProviderSettings

KEY = "sk-stream-test-4242"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


# -- the SSE reader --------------------------------------------------------------------------------


async def _events(pieces: Sequence[bytes]) -> list[tuple[str, bytes]]:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return [event async for event in sse_events(chunks())]


MIXED = (b": keep-alive comment\n"
         b"data: {\"a\": 1}\n\n"
         b"event: content_block_delta\r\ndata: {\"b\": 2}\r\n\r\n"
         b"id: 7\rretry: 100\rdata:{\"c\": 3}\r\r"
         b"data: first line\ndata: second line\n\n"
         b"event: ping\ndata: {}\n\n"
         b"\n\n"
         b"data: [DONE]\n\n")
MIXED_EVENTS = [("", b'{"a": 1}'), ("content_block_delta", b'{"b": 2}'), ("", b'{"c": 3}'),
                ("", b"first line\nsecond line"), ("ping", b"{}"), ("", b"[DONE]")]


async def test_sse_reader_whole_body() -> None:
    assert await _events([MIXED]) == MIXED_EVENTS


async def test_sse_reader_every_split_in_two_and_in_three() -> None:
    for i in range(len(MIXED) + 1):
        assert await _events([MIXED[:i], MIXED[i:]]) == MIXED_EVENTS, i
    for i in range(0, len(MIXED), 3):
        for j in range(i, len(MIXED), 5):
            assert await _events([MIXED[:i], MIXED[i:j], MIXED[j:]]) == MIXED_EVENTS, (i, j)


async def test_sse_reader_byte_by_byte() -> None:
    assert await _events([MIXED[i:i + 1] for i in range(len(MIXED))]) == MIXED_EVENTS


async def test_sse_reader_drops_an_event_the_body_ends_in() -> None:
    # As the SSE spec and the SDKs' decoders: without its blank line an event may be cut short.
    assert await _events([b"data: {\"a\": 1}\n\ndata: {\"b\""]) == [("", b'{"a": 1}')]
    assert await _events([b"data: {\"a\": 1}\r\n\r\n", b"data: [DONE]\r\n"]) == [("", b'{"a": 1}')]
    assert await _events([]) == []


def test_error_event_status() -> None:
    assert stream_error_status({"type": "overloaded_error", "message": "Overloaded"}) == 529
    assert stream_error_status({"type": "rate_limit_error"}) == 429
    assert stream_error_status({"type": "invalid_request_error"}) == 400
    assert stream_error_status({"type": "BadRequestError", "code": 400}) == 400  # vLLM
    assert stream_error_status({"type": "server_error", "code": None}) == 500
    assert stream_error_status({"type": "requests", "code": "rate_limit_exceeded"}) == 429
    assert stream_error_status({"message": "something broke", "code": "weird"}) == 500
    assert stream_error_status({}) == 500


# -- bodies ----------------------------------------------------------------------------------------


def sse(events: Sequence[object], *, named: bool = False, crlf: bool = False) -> bytes:
    nl = "\r\n" if crlf else "\n"
    out = []
    for e in events:
        head = f"event: {e['type']}{nl}" if named and isinstance(e, dict) else ""
        out.append(f"{head}data: {e if isinstance(e, str) else json.dumps(e)}{nl}{nl}")
    return "".join(out).encode()


def split(body: bytes, size: int) -> list[bytes]:
    return [body[i:i + size] for i in range(0, len(body), size)]


def oa(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": choices, **extra}


def oa_call(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    return oa({"tool_calls": [call]})


OPENAI_TOOLS = [
    oa({"role": "assistant", "content": "Let "}),
    oa({"content": "me look."}),
    oa_call(0, "", "call_a", "lookup"),
    oa_call(1, '{"sk', "call_b", "stock"),  # two parallel calls, their deltas interleaved
    oa_call(0, '{"sku": "HAM'),
    oa_call(1, 'u": "SAW"}'),
    oa_call(0, '-001", "n": 2}'),
    oa({}, "tool_calls"),
    oa(None, usage={"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}),
    "[DONE]",
]


def anth(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return anth("content_block_delta", index=index, delta=d)


ANTHROPIC_TOOLS = [
    anth("message_start", message={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": [], "stop_reason": None,
        "usage": {"input_tokens": 20, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100,
                  "output_tokens": 1}}),
    anth("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
    delta(0, type="thinking_delta", thinking="hmm"),
    anth("content_block_stop", index=0),
    anth("ping"),
    anth("content_block_start", index=1, content_block={"type": "text", "text": ""}),
    delta(1, type="text_delta", text="Looking "),
    delta(1, type="text_delta", text="it up."),
    anth("content_block_stop", index=1),
    anth("content_block_start", index=2, content_block={"type": "tool_use", "id": "toolu_a", "name": "get_item",
                                                        "input": {}}),
    delta(2, type="input_json_delta", partial_json=""),
    delta(2, type="input_json_delta", partial_json='{"sku": "SA'),
    delta(2, type="input_json_delta", partial_json='W-050", "n"'),
    delta(2, type="input_json_delta", partial_json=": [1, 2]}"),
    anth("content_block_stop", index=2),
    anth("content_block_start", index=3, content_block={"type": "tool_use", "id": "toolu_b", "name": "ping",
                                                        "input": {}}),
    anth("content_block_stop", index=3),
    anth("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None}, usage={"output_tokens": 42}),
    anth("message_stop"),
]


# -- driving one adapter request -------------------------------------------------------------------


def _context() -> AttemptContext:
    return AttemptContext(case_id="c", variant_id="v", trial=0, try_number=1, seed=0, prompt="p", expected=None,
                          metadata={}, deadline_s=30,
                          secrets={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY})


async def complete(fake: FakeProvider, provider: str, model: str, step: Step) -> ModelResponse:
    fake.script(model, [step])
    p: OpenAIProvider | AnthropicProvider
    if provider == "openai":
        p = OpenAIProvider(model, ProviderSettings(baseUrl=fake.openai_url, stream=True, maxRetries=0))
    else:
        p = AnthropicProvider(model, ProviderSettings(baseUrl=fake.anthropic_url, stream=True, maxRetries=0))
    try:
        return await p.session(_context()).complete(
            ModelRequest(messages=[UserMessage("hi")], tools=[], request_index=0))
    finally:
        await p.aclose()


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
@pytest.mark.parametrize("crlf", [False, True])
async def test_openai_parallel_tool_calls_across_split_chunks(fake: FakeProvider, size: int, crlf: bool) -> None:
    body = b": PROCESSING\n\n" + sse(OPENAI_TOOLS, crlf=crlf)
    response = await complete(fake, "openai", f"oa-split-{size}-{crlf}", raw_sse(split(body, size)))
    assert response.text == "Let me look."
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("call_a", "lookup", {"sku": "HAM-001", "n": 2}), ("call_b", "stock", {"sku": "SAW"})]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (31, 12)
    assert response.stop_reason == "tool_calls"


async def test_openai_done_ends_the_answer_and_the_body_is_read_to_its_end(fake: FakeProvider) -> None:
    # Anything after [DONE] is not part of the answer; the connection is then reused.
    body = sse([oa({"content": "42"}), oa({}, "stop"), "[DONE]", oa({"content": " and more"})])
    response = await complete(fake, "openai", "oa-done", raw_sse(split(body, 9)))
    assert (response.text, response.tool_calls, response.stop_reason) == ("42", (), "stop")
    # No [DONE] and no usage event (some compatible servers): the finish reason is enough.
    response = await complete(fake, "openai", "oa-no-done", raw_sse([sse([oa({"content": "ok"}), oa({}, "stop")])]))
    assert (response.text, response.stop_reason) == ("ok", "stop")


async def test_openai_tool_call_without_index(fake: FakeProvider) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": '{"x"'}}]
    more = [{"function": {"arguments": ": 1}"}}]
    body = sse([oa({"tool_calls": calls}), oa({"tool_calls": more}), oa({}, "tool_calls"), "[DONE]"])
    response = await complete(fake, "openai", "oa-noindex", raw_sse([body]))
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [("c1", "a", {"x": 1})]


@pytest.mark.parametrize("size", [1, 11, 100_000])
async def test_anthropic_blocks_across_split_chunks(fake: FakeProvider, size: int) -> None:
    body = sse(ANTHROPIC_TOOLS, named=True)
    response = await complete(fake, "anthropic", f"an-split-{size}", raw_sse(split(body, size)))
    assert response.text == "Looking it up."
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("toolu_a", "get_item", {"sku": "SAW-050", "n": [1, 2]}), ("toolu_b", "ping", {})]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (125, 42)
    assert response.stop_reason == "tool_use"


async def test_anthropic_context_window_stop_reason_is_an_overflow(fake: FakeProvider) -> None:
    events = [*ANTHROPIC_TOOLS[:1],
              anth("message_delta", delta={"stop_reason": "model_context_window_exceeded"}, usage={"output_tokens": 3}),
              anth("message_stop")]
    with pytest.raises(ContextOverflow):
        await complete(fake, "anthropic", "an-ctx-stop", raw_sse([sse(events, named=True)]))


# -- endings ---------------------------------------------------------------------------------------


def _error_event(provider: str, error: dict[str, Any]) -> bytes:
    if provider == "openai":
        return sse([oa({"role": "assistant", "content": "Half an ans"})]) + sse([{"error": error}])
    start = ANTHROPIC_TOOLS[0]
    return sse([start, *ANTHROPIC_TOOLS[5:7]], named=True) + sse([{"type": "error", "error": error}], named=True)


@pytest.mark.parametrize(
    ("provider", "error", "expected"),
    [
        ("openai", {"message": "The server had an error", "type": "server_error", "code": None},
         Infrastructure("provider-api", "HTTP 500 (unavailable)", True)),
        ("openai", {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"},
         Infrastructure("provider-api", "HTTP 429 (rate limited)", True)),
        ("openai", {"message": "Rate limit reached", "type": "rate_limit_error"},
         Infrastructure("provider-api", "HTTP 429 (rate limited)", True)),
        ("openai", {"message": f"Incorrect API key {KEY}", "type": "authentication_error"},
         Infrastructure("setup", "HTTP 401", False)),
        ("openai", {"message": "This model's maximum context length is 4096 tokens", "type": "BadRequestError",
                    "code": 400}, Infrastructure("setup", "context", False)),
        ("openai", {"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"},
         Infrastructure("setup", "context", False)),
        ("anthropic", {"type": "overloaded_error", "message": "Overloaded"},
         Infrastructure("provider-api", "HTTP 529 (overloaded)", True)),
        ("anthropic", {"type": "api_error", "message": "Internal server error"},
         Infrastructure("provider-api", "HTTP 500 (unavailable)", True)),
        ("anthropic", {"type": "rate_limit_error", "message": "Rate limited"},
         Infrastructure("provider-api", "HTTP 429 (rate limited)", True)),
        ("anthropic", {"type": "invalid_request_error", "message": "prompt is too long: 250123 tokens"},
         Infrastructure("setup", "context", False)),
        ("anthropic", {"type": "permission_error", "message": "not allowed"},
         Infrastructure("setup", "HTTP 403", False)),
    ],
    ids=["oa-server", "oa-rate-code", "oa-rate-type", "oa-401", "oa-vllm-context", "oa-context",
         "an-529", "an-500", "an-429", "an-context", "an-403"],
)
async def test_error_event_mid_stream_is_the_typed_ending(
    tmp_path: Path, fake: FakeProvider, provider: str, error: dict[str, Any], expected: Infrastructure,
    request: Any
) -> None:
    model = f"errev-{request.node.callspec.id}"
    fake.script(model, [raw_sse(split(_error_event(provider, error), 13))])
    url = fake.openai_url if provider == "openai" else fake.anthropic_url
    c = AgentClient(variant(f"{provider}:{model}"), AgentSettings.model_validate(
        {"provider": {"baseUrl": url, "maxRetries": 0, "stream": True}}), Path(SERVER).parent)
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY})
    await c.aclose()
    ending = outcome.ending
    assert isinstance(ending, Infrastructure), ending
    assert (ending.what, ending.retryable) == (expected.what, expected.retryable), ending
    assert expected.why in ending.why, ending
    assert KEY not in ending.why
    # An overflow on a later turn is the trial's, as for a 400 response.
    if expected.why == "context":
        fake.script(model, [raw_sse([sse([oa({"tool_calls": [{"index": 0, "id": "c0", "type": "function",
                                                              "function": {"name": "nope", "arguments": "{}"}}]}),
                                          oa({}, "tool_calls"), "[DONE]"])])
                            if provider == "openai" else raw_sse([sse([ANTHROPIC_TOOLS[0], *ANTHROPIC_TOOLS[15:]],
                                                                      named=True)]),
                            raw_sse([_error_event(provider, error)])])
        c = AgentClient(variant(f"{provider}:{model}"), AgentSettings.model_validate(
            {"provider": {"baseUrl": url, "maxRetries": 0, "stream": True}}), Path(SERVER).parent)
        outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY})
        await c.aclose()
        assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "context-limit", outcome.ending


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("how", ["cut", "short"])
async def test_stream_that_stops_mid_response_is_network(fake: FakeProvider, provider: str, how: str) -> None:
    # `cut`: the connection drops inside the body; `short`: the body ends cleanly but before the
    # stream's last event ([DONE] / a finish reason, message_stop), which a proxy dropping does.
    body = sse(OPENAI_TOOLS) if provider == "openai" else sse(ANTHROPIC_TOOLS, named=True)
    pieces = split(body[:len(body) // 2], 10)
    with pytest.raises(EndingException) as raised:
        await complete(fake, provider, f"broken-{provider}-{how}", raw_sse(pieces, cut=how == "cut"))
    ending = raised.value.ending
    assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == ("network", True), ending
    assert "the stream broke" in ending.why


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("openai", b"data: {\"choices\": [\n\n"),
        ("openai", b"data: [1, 2]\n\n"),
        ("openai", b"data: {\"choices\": [\"a string\"]}\n\n"),
        ("anthropic", b"event: message_start\ndata: {oops\n\n"),
        ("anthropic", b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"delta\": \"x\"}\n\n"),
    ],
    ids=["oa-not-json", "oa-not-object", "oa-wrong-shape", "an-not-json", "an-wrong-shape"],
)
async def test_event_that_cannot_be_read_is_provider_api(
    fake: FakeProvider, provider: str, body: bytes, request: Any
) -> None:
    with pytest.raises(EndingException) as raised:
        await complete(fake, provider, f"unreadable-{request.node.callspec.id}", raw_sse([body]))
    ending = raised.value.ending
    assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == ("provider-api", True), ending
    assert "could not be read" in ending.why


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_unusable_streamed_tool_arguments_are_a_client_error(
    tmp_path: Path, fake: FakeProvider, provider: str
) -> None:
    model = f"badjson-{provider}"
    if provider == "openai":
        body = sse([oa_call(0, '{"sku": ', "call_x", "echo"), oa_call(0, "HAM}"), oa({}, "tool_calls"), "[DONE]"])
    else:
        body = sse([*ANTHROPIC_TOOLS[:1],
                    anth("content_block_start", index=0, content_block={"type": "tool_use", "id": "t", "name": "echo",
                                                                        "input": {}}),
                    delta(0, type="input_json_delta", partial_json='{"sku": '),
                    delta(0, type="input_json_delta", partial_json="HAM}"),
                    *ANTHROPIC_TOOLS[-2:]], named=True)
    fake.script(model, [raw_sse([body])])
    url = fake.openai_url if provider == "openai" else fake.anthropic_url
    c = AgentClient(variant(f"{provider}:{model}"), AgentSettings.model_validate(
        {"provider": {"baseUrl": url, "maxRetries": 0, "stream": True}}), Path(SERVER).parent)
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "client-error", outcome.ending
    assert "'echo'" in (outcome.ending.detail or "")
