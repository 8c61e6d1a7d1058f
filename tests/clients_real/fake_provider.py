"""A fake model provider over real HTTP on 127.0.0.1, for driving the real ``openai`` / ``anthropic`` SDKs.

It speaks OpenAI chat completions (``POST /v1/chat/completions``, JSON and SSE, tool calls) and
Anthropic messages (``POST /v1/messages``, JSON and SSE, ``tool_use``). A test scripts it per
model name: the request's model picks the script, and the number of assistant turns already in
the conversation picks the step, so concurrent attempts and SDK retries see the same step for
the same turn. A step answers, calls a tool, fails with a status (429, 500, 529, 401, ...),
reports a context-length error, drops the connection, answers slowly, or sends an SSE body
given byte for byte (split wherever the test likes, ending cleanly or dropping the connection). Every request is
recorded (path, headers, body) so tests can check what the SDK sent.

Standard library only (``http.server`` in a thread, Nagle off), so the SDK under test is the only
HTTP client code involved.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Step:
    """What the fake model does on one turn."""

    kind: str  # text | tool | status | context | drop | slow | raw
    text: str = ""
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    body: dict[str, Any] | None = None
    delay: float = 0.0
    then: Step | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw_args: str | None = None  # a tool call's arguments sent as this exact text (e.g. not JSON)
    pieces: tuple[bytes, ...] = ()  # raw: the SSE body, one HTTP chunk (and one write) per piece
    cut: bool = False  # raw: drop the connection after the pieces instead of ending the body


def text(answer: str) -> Step:
    return Step("text", text=answer)


def tool(name: str, args: dict[str, Any] | None = None, say: str = "") -> Step:
    return Step("tool", tool=name, args=dict(args or {}), text=say)


def bad_tool_args(name: str, raw: str) -> Step:
    return Step("tool", tool=name, raw_args=raw)


def status(code: int, message: str = "injected", **headers: str) -> Step:
    return Step("status", status=code, text=message, headers=headers)


def context_length() -> Step:
    return Step("context")


def drop() -> Step:
    return Step("drop")


def slow(seconds: float, then: Step) -> Step:
    return Step("slow", delay=seconds, then=then)


def raw_sse(pieces: Sequence[bytes], *, cut: bool = False) -> Step:
    """A streamed 200 whose body is exactly ``pieces`` (each written and flushed on its own)."""
    return Step("raw", pieces=tuple(pieces), cut=cut)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


class FakeProvider:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Step]] = {}
        self.queued: dict[str, list[Step]] = {}
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, model: str, steps: Sequence[Step]) -> None:
        self.scripts[model] = list(steps)

    def queue(self, model: str, steps: Sequence[Step]) -> None:
        """Steps answered one per request, in order, before the model's script (by turn) applies:
        for calls that are all turn 0 (a judge's), with retries that must see the next step."""
        with self._lock:
            self.queued.setdefault(model, []).extend(steps)

    def step_for(self, model: str, turn: int) -> Step:
        with self._lock:
            queued = self.queued.get(model)
            if queued:
                return queued.pop(0)
        steps = self.scripts.get(model)
        if not steps:
            return status(404, f"The model `{model}` does not exist")
        return steps[min(turn, len(steps) - 1)]

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serve() -> Iterator[FakeProvider]:
    fake = FakeProvider().start()
    try:
        yield fake
    finally:
        fake.stop()


def _handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def handle(self) -> None:
            # A client that gave up (its read timeout) closes first: not the fake's failure.
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.record(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            anthropic = self.path.partition("?")[0].rstrip("/").endswith("/messages")
            model = str(body.get("model", ""))
            turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            step = fake.step_for(model, turn)
            while step.kind == "slow":
                time.sleep(step.delay)
                assert step.then is not None
                step = step.then
            if step.kind == "drop":
                # Close without a byte of response: the SDK sees the connection reset / disconnected.
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if step.kind == "status":
                self._error(step.status, step.text, anthropic, step.headers)
                return
            if step.kind == "raw":
                self._raw(step.pieces, step.cut)
                return
            if step.kind == "context":
                if anthropic:
                    self._error(400, "prompt is too long: 250123 tokens > 200000 maximum", True, {})
                else:
                    self._error(400, "This model's maximum context length is 128000 tokens. However, your "
                                "messages resulted in 130512 tokens.", False, {}, "context_length_exceeded")
                return
            prompt_tokens = 10 + len(json.dumps(body.get("messages", []))) // 4
            if anthropic:
                self._anthropic(step, model, prompt_tokens, bool(body.get("stream")), turn)
            else:
                self._openai(step, model, prompt_tokens, bool(body.get("stream")), turn)

        # -- responses -------------------------------------------------------------------------

        def _send(self, code: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k.replace("_", "-"), v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str, anthropic: bool, headers: dict[str, str],
                   code_name: str | None = None) -> None:
            if anthropic:
                payload = {"type": "error", "error": {"type": _ERROR_TYPES.get(code, "api_error"), "message": message}}
            else:
                payload = {"error": {"message": message, "type": _ERROR_TYPES.get(code, "server_error"),
                                     "param": None, "code": code_name}}
            # Tiny retry-after so SDK retries in tests take milliseconds, not seconds.
            self._send(code, payload, {"retry-after-ms": "5", **headers})

        def _sse(self, events: list[tuple[str | None, dict[str, Any] | str]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for name, data in events:
                chunk = (f"event: {name}\n" if name else "") + "data: " + (
                    data if isinstance(data, str) else json.dumps(data)) + "\n\n"
                raw = chunk.encode()
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def _raw(self, pieces: Sequence[bytes], cut: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for piece in pieces:
                if not piece:
                    continue  # an empty HTTP chunk would end the body
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
                time.sleep(0.002)  # so the client most likely reads the pieces one by one
            if cut:
                # Mid-body, without the chunked terminator: the client sees the connection drop.
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")

        def _openai(self, step: Step, model: str, prompt_tokens: int, stream: bool, turn: int) -> None:
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7}
            call_id = f"call_{turn}"
            args = step.raw_args if step.raw_args is not None else json.dumps(step.args)
            if not stream:
                message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
                if step.kind == "tool":
                    message["tool_calls"] = [{"id": call_id, "type": "function",
                                              "function": {"name": step.tool, "arguments": args}}]
                self._send(200, {
                    "id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "logprobs": None,
                                 "finish_reason": "tool_calls" if step.kind == "tool" else "stop"}],
                    "usage": usage,
                }, {})
                return
            base = {"id": f"chatcmpl-{turn}", "object": "chat.completion.chunk", "created": 0, "model": model}
            events: list[tuple[str | None, dict[str, Any] | str]] = [
                (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
            for piece in _pieces(step.text):
                events.append((None, {**base, "choices": [{"index": 0, "delta": {"content": piece}}]}))
            if step.kind == "tool":
                events.append((None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "id": call_id, "type": "function",
                     "function": {"name": step.tool, "arguments": ""}}]}}]}))
                for piece in _pieces(args):
                    events.append((None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                        {"index": 0, "function": {"arguments": piece}}]}}]}))
            events.append((None, {**base, "choices": [
                {"index": 0, "delta": {}, "finish_reason": "tool_calls" if step.kind == "tool" else "stop"}]}))
            events.append((None, {**base, "choices": [], "usage": usage}))
            events.append((None, "[DONE]"))
            self._sse(events)

        def _anthropic(self, step: Step, model: str, prompt_tokens: int, stream: bool, turn: int) -> None:
            blocks: list[dict[str, Any]] = []
            if step.text:
                blocks.append({"type": "text", "text": step.text})
            if step.kind == "tool":
                blocks.append({"type": "tool_use", "id": f"toolu_{turn}", "name": step.tool, "input": step.args})
            stop = "tool_use" if step.kind == "tool" else "end_turn"
            msg = {"id": f"msg_{turn}", "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": prompt_tokens, "output_tokens": 9}}
            if not stream:
                self._send(200, msg, {})
                return
            start = {**msg, "content": [], "stop_reason": None, "usage": {"input_tokens": prompt_tokens,
                                                                          "output_tokens": 1}}
            events: list[tuple[str | None, dict[str, Any] | str]] = [
                ("message_start", {"type": "message_start", "message": start})]
            for i, block in enumerate(blocks):
                if block["type"] == "text":
                    events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                           "content_block": {"type": "text", "text": ""}}))
                    for piece in _pieces(block["text"]):
                        events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                               "delta": {"type": "text_delta", "text": piece}}))
                else:
                    events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                           "content_block": {**block, "input": {}}}))
                    for piece in _pieces(json.dumps(block["input"])):
                        events.append(("content_block_delta", {
                            "type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}))
                events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
            events.append(("message_delta", {"type": "message_delta",
                                             "delta": {"stop_reason": stop, "stop_sequence": None},
                                             "usage": {"output_tokens": 9}}))
            events.append(("message_stop", {"type": "message_stop"}))
            self._sse(events)

    return Handler


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]
