"""The ``openai:`` provider: chat completions with tool calling, through the official ``openai`` SDK.

``model: openai:gpt-4o-mini`` talks to OpenAI; with ``settings.provider.baseUrl`` (or
``OPENAI_BASE_URL``) it talks to any OpenAI-compatible server (a gateway, vLLM, llama.cpp, Ollama).
Responses come as one JSON body or, with ``stream: true``, as server-sent events whose deltas
are put back together here (text, and tool calls by their ``index``).

The API key is read per attempt from the attempt's secrets (``--secrets-file``), else the
process environment, under ``OPENAI_API_KEY`` (or ``apiKeySecret``). It goes to the SDK as an
argument only: never argv, never a transcript, never an ending (messages are scrubbed of it).

Endings are decided here, from the SDK's typed exceptions (see :mod:`mst.providers._errors`),
or, for an ``error`` event in the middle of a stream, from its ``code`` / ``type``. Streams are
requested through the SDK (auth, retries, status errors) but decoded here with ``orjson``: the
SDK's own stream builds a pydantic object per event, which costs more than the 2 ms budget of a
turn. A connection that drops mid-stream is a ``network`` ending. The only text read is OpenAI's
own context-length signal: the error ``code`` ``context_length_exceeded``, or, for compatible
servers that lack codes, the phrases they use for it in a 400's message (or error event). The
SDK is imported when the first request is made, so ``mst --help`` and mock-only evals never pay
for it.
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
from mst.providers._sse import json_event, read_stream
from mst.providers.base import (
    AssistantMessage,
    AttemptContext,
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
    from openai import AsyncOpenAI

PROVIDER: Final = "openai"
DEFAULT_KEY: Final = "OPENAI_API_KEY"
# A compatible local server usually needs no key; the SDK insists on one, so it gets this.
_NO_KEY: Final = "mst-no-key"
# How OpenAI and compatible servers (vLLM, llama.cpp, LiteLLM, Azure) word a context overflow
# when they give no `context_length_exceeded` code. Read only here, only on a 400/413.
_CONTEXT_TEXT: Final = re.compile(
    r"context[ _]length|maximum context|context window|too many tokens|prompt is too long|"
    r"reduce the length of the messages",
    re.IGNORECASE,
)


def _tool_payload(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        schema = dict(t.input_schema) or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": {"name": t.name, "description": t.description,
                                                      "parameters": schema}})
    return out


def _images_message(results: Sequence[ToolResult]) -> dict[str, Any] | None:
    """The user message that carries a turn's tool-result images.

    A `tool` message's content is text only in chat completions, so images go in a user message
    right after the turn's tool messages (those must directly follow the assistant's tool calls),
    each introduced by the call it came from.
    """
    parts: list[dict[str, Any]] = []
    for r in results:
        images = r.model_images()
        if images:
            parts.append({"type": "text", "text": f"Images returned by the tool call {r.call_id} ({r.name}):"})
            parts.extend({"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                         for i in images)
    return {"role": "user", "content": parts} if parts else None


def _messages(system: str | None, messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    turn: list[ToolResult] = []  # the tool results since the last assistant message
    for m in messages:
        if not isinstance(m, ToolResult) and turn:
            images = _images_message(turn)
            if images is not None:
                out.append(images)
            turn = []
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.content})
        elif isinstance(m, AssistantMessage):
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": orjson.dumps(dict(c.arguments)).decode()}}
                    for c in m.tool_calls
                ]
            out.append(msg)
        elif isinstance(m, ToolResult):
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.content})
            turn.append(m)
    images = _images_message(turn)
    if images is not None:
        out.append(images)
    return out


class OpenAIProvider(SdkProvider["AsyncOpenAI"]):
    """One per variant; SDK clients are made per API key (the key may differ per secrets file)."""

    name = PROVIDER
    default_key = DEFAULT_KEY

    def session(self, context: AttemptContext) -> OpenAISession:
        return OpenAISession(self, context.secrets)

    def client(self, secrets: Mapping[str, str]) -> tuple[AsyncOpenAI, str]:
        s = self.settings
        secret, key = self.api_key(secrets)
        base_url = s.baseUrl or os.environ.get("OPENAI_BASE_URL")
        if not key:
            if base_url is None:
                raise _errors.no_key(PROVIDER, secret)
            key = _NO_KEY

        def make() -> AsyncOpenAI:
            from openai import AsyncOpenAI

            return AsyncOpenAI(api_key=key, base_url=base_url, max_retries=s.maxRetries, timeout=s.timeoutSeconds)

        return self.cached_client(key, make), key


class OpenAISession(SdkSession[OpenAIProvider]):
    __slots__ = ()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        # `client.post` rather than `chat.completions.create`: the latter re-walks every message
        # against the request's TypedDicts on each call and builds pydantic models of the reply
        # (milliseconds a turn). Status handling and retries are the SDK's all the same; the
        # reply's JSON is read here with orjson (see `_read_completion`).
        import openai

        provider = self._provider
        client, key = provider.client(self._secrets)
        s = provider.settings
        params: dict[str, Any] = {"model": provider.model, "messages": _messages(request.system, request.messages)}
        if request.tools:
            params["tools"] = _tool_payload(request.tools)
        if request.tool_choice:
            params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        if s.maxOutputTokens is not None:
            params["max_completion_tokens"] = s.maxOutputTokens
        if s.temperature is not None:
            params["temperature"] = s.temperature
        hide = (key, *self._secrets.values())
        try:
            if s.stream:
                return await self._streamed(client, params, hide)
            completion = await _json_completion(client, params)
        except openai.APIStatusError as exc:
            message = _errors.clean(str(exc.message), hide)
            overflow = exc.code == "context_length_exceeded" or (
                exc.status_code in (400, 413) and _CONTEXT_TEXT.search(str(exc.message)) is not None)
            _errors.raise_for_status(PROVIDER, provider.model, exc.status_code, message, context_overflow=overflow)
        except openai.APITimeoutError:
            raise _errors.network(PROVIDER, "read timeout", f"no response within {s.timeoutSeconds:g} s") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            detail = _errors.clean(f"{type(cause).__name__}: {cause}", hide)
            raise _errors.network(PROVIDER, "connection failed", detail) from None
        except openai.APIResponseValidationError as exc:
            raise EndingException(Infrastructure(
                "provider-api", f"{PROVIDER}: the response could not be read: {_errors.clean(str(exc), hide)}",
                True)) from None
        except openai.APIError as exc:
            # An error event inside a stream: the provider failed mid-response.
            raise EndingException(Infrastructure(
                "provider-api", f"{PROVIDER}: error in the response: {_errors.clean(str(exc), hide)}", True)) from None
        return _read_completion(completion, hide)

    async def _streamed(self, client: AsyncOpenAI, params: dict[str, Any], hide: Sequence[str]) -> ModelResponse:
        """One streamed completion: the SDK sends the request, the events are decoded here.

        The SDK's own stream builds a pydantic ``ChatCompletionChunk`` per event (several ms a turn
        at a token or two per event), so the SDK returns the raw ``httpx2`` response instead (its
        retries and status errors have run by then) and each ``data:`` line is read with ``orjson``
        by :class:`_CompletionStream`.
        """
        import httpx2

        response = await client.post(
            "/chat/completions", cast_to=httpx2.Response, stream=True,
            body={**params, "stream": True, "stream_options": {"include_usage": True}})
        stream = _CompletionStream(self, hide)
        await read_stream(response, stream, PROVIDER, self._provider.settings.timeoutSeconds)
        return stream.response()

    def _stream_error(self, error: Any, hide: Sequence[str]) -> NoReturn:
        """An error event in the middle of the stream: the same endings as the HTTP status it stands for."""
        if not isinstance(error, dict):
            error = {"message": str(error)}
        raw = str(error.get("message") or "an error event without a message")
        message = _errors.clean(raw, hide)
        status = _errors.stream_error_status(error)
        overflow = error.get("code") == "context_length_exceeded" or (
            status in (400, 413) and _CONTEXT_TEXT.search(raw) is not None)
        _errors.raise_for_stream_error(PROVIDER, self._provider.model, status, message, context_overflow=overflow)


class _CompletionStream:
    """One streamed chat completion, built chunk by chunk.

    Chunks carry no event type; what a chunk says is in its fields, so each field has its small
    handler, applied in this order: ``error`` (the stream failed), ``usage`` (the last chunk, with
    ``include_usage``), ``choices`` (deltas of the first choice: content, tool calls, finish
    reason). ``data: [DONE]`` ends the completion; what follows is read, not fed.
    """

    def __init__(self, session: OpenAISession, hide: Sequence[str]) -> None:
        self._session, self._hide = session, hide
        self.text: list[str] = []
        self.calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self.usage = Usage()
        self.finish: str | None = None
        self.done = False
        self._handlers: dict[str, Callable[[Any], None]] = {
            "error": self._error,
            "usage": self._usage,
            "choices": self._choices,
        }

    def feed(self, event: str, data: bytes) -> None:
        if data.startswith(b"[DONE]"):
            self.done = True
            return
        chunk = json_event(PROVIDER, data)
        for field, handler in self._handlers.items():
            value = chunk.get(field)
            if value:
                handler(value)

    def _error(self, error: Any) -> None:
        self._session._stream_error(error, self._hide)

    def _usage(self, u: Any) -> None:
        self.usage = Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0)

    def _choices(self, choices: Any) -> None:
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                self.text.append(content)
            for tc in delta.get("tool_calls") or ():
                self._tool_call_delta(tc)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def _tool_call_delta(self, tc: Any) -> None:
        index = tc.get("index")
        if not isinstance(index, int):  # some compatible servers leave it out
            last = max(self.calls, default=-1)
            index = last + 1 if tc.get("id") or last < 0 else last
        slot = self.calls.get(index)
        if slot is None:
            slot = self.calls[index] = ["", "", ""]
        if tc.get("id"):
            slot[0] = tc["id"]
        function = tc.get("function")
        if function:
            slot[1] += function.get("name") or ""
            slot[2] += function.get("arguments") or ""

    def response(self) -> ModelResponse:
        """The completion the chunks described, once the body has ended."""
        if not self.done and self.finish is None:
            raise _errors.network(PROVIDER, "the stream broke", "the response ended before its last event")
        tool_calls = tuple(
            ToolCall(slot[0] or f"call_{index}", slot[1], _errors.tool_arguments(slot[1], slot[2]))
            for index, slot in sorted(self.calls.items())
        )
        return ModelResponse("".join(self.text), tool_calls, self.usage, self.finish)


async def _json_completion(client: AsyncOpenAI, params: dict[str, Any]) -> Any:
    """A non-streamed completion's JSON body; the SDK has raised for any error status by then."""
    import httpx2

    response = await client.post("/chat/completions", cast_to=httpx2.Response, body=params)
    try:
        return orjson.loads(await response.aread())
    except orjson.JSONDecodeError as exc:
        raise EndingException(Infrastructure(
            "provider-api", f"{PROVIDER}: the response is not JSON ({exc.msg})", True)) from None


def _read_completion(completion: Any, hide: Sequence[str]) -> ModelResponse:
    """The answer, tool calls, usage and finish reason of a chat completion's JSON."""
    try:
        choice = completion["choices"][0]
        answer = choice["message"]
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"],
                     _errors.tool_arguments(c["function"]["name"], c["function"].get("arguments")))
            for c in (answer.get("tool_calls") or ()) if c.get("type", "function") == "function"
        )
        usage = completion.get("usage") or {}
        return ModelResponse(
            answer.get("content") or "", calls,
            Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        what = "has no choices" if isinstance(exc, IndexError) else f"could not be read ({type(exc).__name__})"
        raise EndingException(Infrastructure(
            "provider-api", f"{PROVIDER}: the response {_errors.clean(what, hide)}", True)) from None
