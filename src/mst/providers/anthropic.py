"""The ``anthropic:`` provider: the Messages API with ``tool_use`` / ``tool_result``, through the official SDK.

``model: anthropic:claude-sonnet-4-5`` talks to Anthropic (or ``settings.provider.baseUrl`` /
``ANTHROPIC_BASE_URL``). Tool results go back as ``tool_result`` blocks in one user message per
model turn, errors flagged with ``is_error``, which is how the Messages API expects them.

The key comes from the attempt's secrets, else the environment, under ``ANTHROPIC_API_KEY`` (or
``apiKeySecret``), and goes to the SDK as an argument only.

Endings come from the SDK's typed exceptions (529 is its ``OverloadedError``, an
``InternalServerError``), through :mod:`mst.providers._errors`. The only text read is Anthropic's
context-length wording (``prompt is too long``) in a 400's message, and the typed stop reason
``model_context_window_exceeded``; both become :class:`ContextOverflow`. An ``error`` event in
the middle of a stream (``overloaded_error``, ...) ends the attempt as its HTTP status would; a
connection that drops mid-stream is a ``network`` ending. Streams are requested through the SDK
(auth, retries, status errors) and decoded here with ``orjson`` (see
:class:`_MessageStream`). The SDK is imported at the first request (importing it
costs about two seconds of CPU).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

import orjson

from mst.endings import EndingException, Infrastructure
from mst.providers import _errors
from mst.providers._sdk import SdkProvider, SdkSession
from mst.providers._sse import json_event, read_stream, unreadable
from mst.providers.base import (
    AssistantMessage,
    AttemptContext,
    ContextOverflow,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

PROVIDER: Final = "anthropic"
DEFAULT_KEY: Final = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS: Final = 4096
_CONTEXT_TEXT: Final = re.compile(r"prompt is too long|context window|too many (input )?tokens", re.IGNORECASE)


def _tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        schema = dict(t.input_schema)
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}, **schema, **{"type": "object"}}
        out.append({"name": t.name, "description": t.description, "input_schema": schema})
    return out


def _result_content(m: ToolResult) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, plus its images as image blocks (tool_result accepts them)."""
    images = m.model_images()
    if not images:
        return m.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    blocks.extend({"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
                  for i in images)
    return blocks


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages API turns: consecutive tool results share one user message, as the API requires."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.content})
        elif isinstance(m, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                          for c in m.tool_calls)
            out.append({"role": "assistant", "content": blocks})
        elif isinstance(m, ToolResult):
            block = {"type": "tool_result", "tool_use_id": m.call_id, "content": _result_content(m),
                     "is_error": m.is_error}
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out


class AnthropicProvider(SdkProvider["AsyncAnthropic"]):
    """One per variant; SDK clients are made per API key."""

    name = PROVIDER
    default_key = DEFAULT_KEY

    def session(self, context: AttemptContext) -> AnthropicSession:
        return AnthropicSession(self, context.secrets)

    def client(self, secrets: Mapping[str, str]) -> tuple[AsyncAnthropic, str]:
        s = self.settings
        secret, key = self.api_key(secrets)
        if not key:
            raise _errors.no_key(PROVIDER, secret)

        def make() -> AsyncAnthropic:
            from anthropic import AsyncAnthropic

            base_url = s.baseUrl or os.environ.get("ANTHROPIC_BASE_URL")
            return AsyncAnthropic(api_key=key, base_url=base_url, max_retries=s.maxRetries, timeout=s.timeoutSeconds)

        return self.cached_client(key, make), key


class AnthropicSession(SdkSession[AnthropicProvider]):
    __slots__ = ()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        import anthropic

        provider = self._provider
        client, key = provider.client(self._secrets)
        s = provider.settings
        params: dict[str, Any] = {
            "model": provider.model,
            "max_tokens": s.maxOutputTokens or DEFAULT_MAX_TOKENS,
            "messages": _messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = _tools(request.tools)
        if request.tool_choice:
            params["tool_choice"] = {"type": "tool", "name": request.tool_choice}
        if s.temperature is not None:
            params["temperature"] = min(s.temperature, 1.0)
        hide = (key, *self._secrets.values())
        try:
            if s.stream:
                return await self._streamed(client, params, hide)
            message = await _json_message(client, params)
        except anthropic.APIStatusError as exc:
            text = _errors.clean(str(exc.message), hide)
            overflow = exc.status_code == 413 or (
                exc.status_code == 400 and _CONTEXT_TEXT.search(str(exc.message)) is not None)
            _errors.raise_for_status(PROVIDER, provider.model, exc.status_code, text, context_overflow=overflow)
        except anthropic.APITimeoutError:
            raise _errors.network(PROVIDER, "read timeout", f"no response within {s.timeoutSeconds:g} s") from None
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise _errors.network(
                PROVIDER, "connection failed", _errors.clean(f"{type(cause).__name__}: {cause}", hide)) from None
        except anthropic.APIError as exc:
            raise EndingException(Infrastructure(
                "provider-api", f"{PROVIDER}: error in the response: {_errors.clean(str(exc), hide)}", True)) from None
        return _read_message(message, hide)

    async def _streamed(self, client: AsyncAnthropic, params: dict[str, Any], hide: Sequence[str]) -> ModelResponse:
        """One streamed message: the SDK sends the request, the events are decoded here.

        The SDK's ``messages.stream`` builds a pydantic event per SSE event and re-validates the
        message snapshot as it grows, so the SDK returns the raw ``httpx2`` response instead (its
        retries and status errors have run by then) and each event is read with ``orjson`` by
        :class:`_MessageStream`. Only ``text`` and ``tool_use`` blocks are kept, as in a JSON
        response (thinking is not).
        """
        import httpx2

        response = await client.post("/v1/messages", cast_to=httpx2.Response, stream=True,
                                      body={**params, "stream": True})
        stream = _MessageStream(self, hide)
        await read_stream(response, stream, PROVIDER, self._provider.settings.timeoutSeconds)
        return stream.response()

    def _stream_error(self, error: Any, hide: Sequence[str]) -> NoReturn:
        """An ``error`` event in the middle of the stream: the same endings as the HTTP status it stands for."""
        if not isinstance(error, dict):
            error = {"message": str(error)}
        raw = str(error.get("message") or "an error event without a message")
        status = _errors.stream_error_status(error)
        overflow = status == 413 or (status == 400 and _CONTEXT_TEXT.search(raw) is not None)
        _errors.raise_for_stream_error(PROVIDER, self._provider.model, status, _errors.clean(raw, hide),
                                       context_overflow=overflow)


class _MessageStream:
    """One streamed message, built event by event: one small handler per event type.

    ``ping`` and event types without a handler are skipped; ``message_stop`` ends the message
    (what follows is read, not fed). Block indexes key the text and tool-use blocks, so deltas of
    interleaved blocks land in their own block.
    """

    def __init__(self, session: AnthropicSession, hide: Sequence[str]) -> None:
        self._session, self._hide = session, hide
        self.texts: dict[int, list[str]] = {}  # block index -> text deltas
        self.tools: dict[int, tuple[str, str, list[str], Any]] = {}  # index -> (id, name, json deltas, start input)
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None
        self.started = self.done = False
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "content_block_delta": self._block_delta,
            "content_block_start": self._block_start,
            "message_start": self._message_start,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
            "error": self._error,
        }

    def feed(self, event: str, data: bytes) -> None:
        if event == "ping":
            return
        ev = json_event(PROVIDER, data)
        handler = self._handlers.get(ev.get("type") or event)
        if handler is not None:
            handler(ev)

    def _block_delta(self, ev: dict[str, Any]) -> None:
        delta = ev.get("delta") or {}
        index = ev.get("index", 0)
        if delta.get("type") == "text_delta" and index in self.texts:
            self.texts[index].append(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta" and index in self.tools:
            self.tools[index][2].append(delta.get("partial_json") or "")

    def _block_start(self, ev: dict[str, Any]) -> None:
        block = ev.get("content_block") or {}
        index = ev.get("index", 0)
        if block.get("type") == "text":
            self.texts[index] = [block.get("text") or ""]
        elif block.get("type") == "tool_use":
            self.tools[index] = (block.get("id") or "", block.get("name") or "", [], block.get("input"))

    def _message_start(self, ev: dict[str, Any]) -> None:
        self.started = True
        message = ev.get("message") or {}
        self.usage.update((k, v) for k, v in (message.get("usage") or {}).items() if v is not None)
        self.stop = message.get("stop_reason") or self.stop

    def _message_delta(self, ev: dict[str, Any]) -> None:
        self.stop = (ev.get("delta") or {}).get("stop_reason") or self.stop
        self.usage.update((k, v) for k, v in (ev.get("usage") or {}).items() if v is not None)

    def _message_stop(self, ev: dict[str, Any]) -> None:
        self.done = True

    def _error(self, ev: dict[str, Any]) -> None:
        self._session._stream_error(ev.get("error"), self._hide)

    def response(self) -> ModelResponse:
        """The message the events described, once the body has ended."""
        if not self.done:
            raise _errors.network(PROVIDER, "the stream broke", "the response ended before message_stop")
        if not self.started:
            raise unreadable(PROVIDER, "the stream has no message_start event")
        if self.stop == "model_context_window_exceeded":
            raise ContextOverflow(f"{PROVIDER}: stop reason model_context_window_exceeded")
        calls = []
        for index in sorted(self.tools):
            call_id, name, parts, start = self.tools[index]
            if parts:
                arguments = _errors.tool_arguments(name, "".join(parts))
            else:
                arguments = start if isinstance(start, dict) else {}
            calls.append(ToolCall(call_id, name, arguments))
        text = "".join("".join(self.texts[index]) for index in sorted(self.texts))
        usage = self.usage
        input_tokens = sum(_int(usage.get(k)) for k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return ModelResponse(text, tuple(calls), Usage(input_tokens, _int(usage.get("output_tokens"))), self.stop)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


async def _json_message(client: AsyncAnthropic, params: dict[str, Any]) -> Any:
    """A non-streamed message's JSON body, read with orjson rather than the SDK's pydantic models
    (milliseconds a turn); the SDK has sent the request and raised for any error status."""
    import httpx2

    response = await client.post("/v1/messages", cast_to=httpx2.Response, body=params)
    try:
        return orjson.loads(await response.aread())
    except orjson.JSONDecodeError as exc:
        raise EndingException(Infrastructure(
            "provider-api", f"{PROVIDER}: the response is not JSON ({exc.msg})", True)) from None


def _read_message(message: Any, hide: Sequence[str]) -> ModelResponse:
    """Text, tool uses, usage (cache tokens included) and stop reason of a message's JSON."""
    try:
        stop = message.get("stop_reason")
        if stop == "model_context_window_exceeded":
            raise ContextOverflow(f"{PROVIDER}: stop reason model_context_window_exceeded")
        text_parts: list[str] = []
        calls: list[ToolCall] = []
        for block in message["content"]:
            if block.get("type") == "text":
                text_parts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                arguments = block.get("input")
                calls.append(ToolCall(block["id"], block["name"], arguments if isinstance(arguments, dict) else {}))
        u = message.get("usage") or {}
        input_tokens = sum(int(u.get(k) or 0) for k in
                           ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return ModelResponse("".join(text_parts), tuple(calls), Usage(input_tokens, int(u.get("output_tokens") or 0)),
                             stop)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EndingException(Infrastructure(
            "provider-api", f"{PROVIDER}: the response could not be read ({_errors.clean(type(exc).__name__, hide)})",
            True)) from None
