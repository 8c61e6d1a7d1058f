"""The streamed-response decoders, fed event by event without a server: one handler per event type."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mst.endings import EndingException
from mst.providers.anthropic import _MessageStream
from mst.providers.base import ToolCall
from mst.providers.openai import _CompletionStream


def _feed(stream: Any, events: list[tuple[str, Any]]) -> None:
    for event, data in events:
        stream.feed(event, data if isinstance(data, bytes) else orjson.dumps(data))


def test_anthropic_handlers_build_the_message_and_skip_unknown_events() -> None:
    stream = _MessageStream(None, ())  # type: ignore[arg-type]
    _feed(stream, [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 7}}}),
        ("ping", b"not json: never decoded"),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "tool_use", "id": "t1", "name": "add"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"a": 1'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "input_json_delta", "partial_json": "}"}}),
        ("", {"type": "something_new"}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip
    assert stream.done
    response = stream.response()
    assert response.text == "hi" and response.tool_calls == (ToolCall("t1", "add", {"a": 1}),)
    assert (response.usage.input_tokens, response.usage.output_tokens, response.stop_reason) == (7, 3, "tool_use")


def test_anthropic_stream_without_stop_is_a_network_ending() -> None:
    stream = _MessageStream(None, ())  # type: ignore[arg-type]
    _feed(stream, [("message_start", {"type": "message_start", "message": {}})])
    with pytest.raises(EndingException, match="message_stop") as info:
        stream.response()
    assert info.value.ending.what == "network"


def test_openai_handlers_build_the_completion_in_field_order() -> None:
    stream = _CompletionStream(None, ())  # type: ignore[arg-type]
    _feed(stream, [
        ("", {"choices": [{"index": 0, "delta": {"content": "he"}}]}),
        ("", {"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
        ("", {"choices": [{"index": 0, "delta": {"content": "llo", "tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "add", "arguments": '{"a":'}}]}}]}),
        ("", {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]},
                           "finish_reason": "tool_calls"}]}),
        ("", {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
        ("", b"[DONE]"),
    ])  # fmt: skip
    assert stream.done
    response = stream.response()
    assert response.text == "hello" and response.tool_calls == (ToolCall("c1", "add", {"a": 2}),)
    assert (response.usage.input_tokens, response.usage.output_tokens, response.stop_reason) == (5, 2, "tool_calls")


def test_a_chunk_that_is_not_an_object_is_unreadable() -> None:
    with pytest.raises(EndingException, match="not a JSON object") as info:
        _CompletionStream(None, ()).feed("", b"[1, 2]")  # type: ignore[arg-type]
    assert info.value.ending.what == "provider-api"
