"""What the real Claude Code CLI needs from the fake provider beyond :mod:`fake_provider`'s steps.

Claude Code streams every request (``POST /v1/messages?beta=true``, SSE) and falls back to a
non-streaming request when a stream carries no events. These steps send answers the stock steps
cannot: a refusal (``stop_reason: refusal``), and a 200 whose body is no message at all.
"""

from __future__ import annotations

import json
from typing import Any

from fake_provider import Step, raw_sse


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def refusal(model: str, text: str = "I can't help with that.") -> Step:
    """A streamed answer the model's safeguards stopped (``stop_reason: refusal``)."""
    message = {"id": "msg_refused", "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    return raw_sse([
        _event("message_start", {"type": "message_start", "message": message}),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
        _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": text}}),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": None},
                                 "usage": {"output_tokens": 3}}),
        _event("message_stop", {"type": "message_stop"}),
    ])


def no_message() -> Step:
    """A 200 whose event stream holds no message (a gateway answering something else)."""
    return raw_sse([b": keep-alive\n\n"])
