"""The fake model provider's OpenAI Responses API (``POST /v1/responses``, SSE), for the real ``codex`` CLI.

Codex talks the Responses API to a custom model provider (``wire_api = "responses"`` in
``model_providers.<id>``). This is the same fake as :mod:`fake_provider` — the same
:class:`~fake_provider.Step` scripts picked by the request's model, the same recording — answering
in the Responses wire format instead. The turn is the number of model responses already in the
request's ``input`` (a run of consecutive model output items — messages, function calls,
reasoning — is one response), so Codex's own retries of a request see the same step again.

What a step becomes:

- ``text``: a streamed assistant message; ``tool``: a ``function_call`` item. Codex 0.17x offers an
  MCP server's tools as a ``namespace`` tool named ``mcp__<server>`` holding the bare tool names,
  and expects a call to carry ``namespace``; a step's ``mcp__<server>__<tool>`` is sent that way
  when the request offers that namespace, and as a flat name otherwise (a name Codex has no tool
  for, as a model calling a tool too early would).
- ``status``: that HTTP status with an OpenAI-style JSON error body; ``context``: a 400 with
  ``code: context_length_exceeded``; ``drop``, ``slow``, ``raw``: as in :mod:`fake_provider`, whose
  handler this one extends (its error bodies and its SSE writing).
- every response ends with ``response.completed`` carrying its own usage: input tokens grow with
  the request, output tokens are ``5 + turn``, so each response's count can be told apart.

An unreachable provider is not a step: point Codex at :func:`dead_url` (a closed port).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fake_provider import FakeProvider, Recorded, Step, _pieces
from fake_provider import _handler as provider_handler

_MODEL_ITEMS = {"function_call", "reasoning", "custom_tool_call", "local_shell_call", "web_search_call"}


def output_tokens(turn: int) -> int:
    """The output token count the fake reports for the response to ``turn`` (0-based)."""
    return 5 + turn


def responses_turn(items: list[Any]) -> int:
    """How many model responses the conversation in ``input`` already holds."""
    turns, inside = 0, False
    for item in items:
        if not isinstance(item, dict):
            continue
        model_made = item.get("type") in _MODEL_ITEMS or (
            item.get("type", "message") == "message" and item.get("role") == "assistant")
        if model_made and not inside:
            turns += 1
        inside = model_made
    return turns


def sse_event(event: dict[str, Any]) -> bytes:
    """One Responses API server-sent event, for a ``raw`` step (``event:`` line named by its type)."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def namespaces(body: dict[str, Any]) -> set[str]:
    """The tool namespaces a request offers (Codex: one ``mcp__<server>`` per connected MCP server)."""
    return {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "namespace"}


class FakeResponses(FakeProvider):
    """:class:`FakeProvider` answering ``/v1/responses`` in the Responses wire format."""

    def __init__(self) -> None:
        super().__init__()
        # The server looks its handler class up per connection, so swapping it keeps every other part.
        self._server.RequestHandlerClass = _handler(self)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def responses(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/responses")]


@contextmanager
def serve_responses() -> Iterator[FakeResponses]:
    fake = FakeResponses()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def dead_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (the port is bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write_codex_home(home: Path, providers: dict[str, str], *, retries: int = 1) -> Path:
    """A ``CODEX_HOME`` whose config points Codex at fake providers: ``{provider id: base URL}``.

    The first provider is the default (``model_provider``); the key is read from ``MST_FAKE_KEY``.
    Codex's own retries are cut to ``retries`` so a failing provider ends in seconds, not minutes.
    """
    home.mkdir(parents=True, exist_ok=True)
    lines = [f"model_provider = {json.dumps(next(iter(providers)))}", ""]
    for pid, url in providers.items():
        lines += [f"[model_providers.{pid}]", f'name = "fake {pid}"', f"base_url = {json.dumps(url)}",
                  'env_key = "MST_FAKE_KEY"', 'wire_api = "responses"', f"request_max_retries = {retries}",
                  f"stream_max_retries = {retries}", "supports_websockets = false", ""]
    (home / "config.toml").write_text("\n".join(lines))
    return home


def _handler(fake: FakeResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(provider_handler(fake)):  # type: ignore[misc]  # its JSON errors and raw SSE writing
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.record(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if not self.path.rstrip("/").endswith("/responses"):
                self._error(404, f"no route {self.path}", False, {})
                return
            items = body.get("input") if isinstance(body.get("input"), list) else []
            turn = responses_turn(items)
            step = fake.step_for(str(body.get("model", "")), turn)
            while step.kind == "slow":
                time.sleep(step.delay)
                assert step.then is not None
                step = step.then
            if step.kind == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif step.kind == "status":
                self._error(step.status, step.text, False, step.headers)
            elif step.kind == "context":
                self._error(400, "Your input exceeds the context window of this model. Please adjust your input "
                            "and try again.", False, {}, "context_length_exceeded")
            elif step.kind == "raw":
                self._raw(step.pieces, step.cut)
            else:
                self._raw(_events(step, body, turn, len(json.dumps(items))), False)

    return Handler


def _events(step: Step, body: dict[str, Any], turn: int, input_chars: int) -> list[bytes]:
    """The server-sent events of one answered request: text and / or a function call, then usage."""
    rid = f"resp_{turn}"
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid}}]
    output: list[dict[str, Any]] = []
    if step.text:
        msg = {"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": step.text, "annotations": []}]}
        events.append({"type": "response.output_item.added", "output_index": 0,
                       "item": {**msg, "content": [], "status": "in_progress"}})
        events += [{"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                    "item_id": msg["id"], "delta": piece} for piece in _pieces(step.text)]
        events.append({"type": "response.output_item.done", "output_index": 0, "item": msg})
        output.append(msg)
    if step.kind == "tool":
        call: dict[str, Any] = {"type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}",
                                "name": step.tool, "status": "completed",
                                "arguments": step.raw_args if step.raw_args is not None else json.dumps(step.args)}
        space, _, bare = step.tool.rpartition("__")
        if space in namespaces(body):
            call.update(namespace=space, name=bare)
        events.append({"type": "response.output_item.done", "output_index": len(output), "item": call})
        output.append(call)
    prompt = 10 + input_chars // 4
    usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": output_tokens(turn), "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": prompt + output_tokens(turn)}
    events.append({"type": "response.completed",
                   "response": {"id": rid, "status": "completed", "output": output, "usage": usage}})
    return [sse_event(e) for e in events]
