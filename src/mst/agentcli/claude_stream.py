"""Claude Code's ``stream-json`` output turned into canonical events, and the ending it means.

Format facts relied on, checked against the real CLI (2.1.x) talking to a fake Anthropic provider
(see the ``claude-code`` client's docstring for the flags that produce this stream):

- Every line is a JSON object with ``type``. ``system/init`` comes first, with ``mcp_servers``
  ``[{"name", "status"}]``; ``status`` is ``connected``, ``pending``, ``failed``, ``needs-auth``
  or ``disabled``.
- ``stream_event`` lines (``--include-partial-messages``) carry the raw API stream:
  ``message_start`` (the message id, model and input usage), content deltas, ``message_delta``
  (the final ``output_tokens``) and ``message_stop``; ``api_message_id`` names the message.
- An ``assistant`` line per content block (same ``message.id``) is printed *before* that
  message's ``message_delta``, so its ``usage.output_tokens`` is the partial count of
  ``message_start`` (1): per-request usage is taken from the stream events, never from it.
- A tool runs as soon as its ``tool_use`` block is complete, so the ``user`` line with its result
  can come before its message's ``message_delta`` (now and then, with ``StructuredOutput``).
- An API failure the CLI gave up on is an ``assistant`` line with ``model: "<synthetic>"``,
  ``error`` (``rate_limit``, ``server_error``, ``authentication_failed``, ``billing_error``,
  ``invalid_request``, ``max_output_tokens``, ``unknown``) and the text shown to a user
  (``API Error: Request rejected (429) · …``, ``API Error: 500 …``, ``API Error: Connection
  refused … (ECONNREFUSED)``, ``Prompt is too long · …``).
- Each retry of a failed request is a ``system/api_retry`` line: ``attempt``, ``max_retries``,
  ``retry_delay_ms``, ``error_status`` (the HTTP status, ``null`` when no response came) and
  ``error`` (the same kinds).
- The last line is ``result``: ``subtype`` (``success`` even for an API failure, or
  ``error_max_turns`` / ``error_max_budget_usd`` / ``error_during_execution``), ``is_error``,
  ``terminal_reason`` (``completed``, ``max_turns``, ``api_error``, ``prompt_too_long``, …),
  ``api_error_status`` (the HTTP status or ``null``), ``stop_reason``, ``result`` (the text),
  ``num_turns``, ``total_cost_usd`` and the session's summed ``usage``.
- MCP tools are named ``mcp__<server>__<tool>``; tool results come in ``user`` lines as
  ``tool_result`` blocks.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

from mst.agentcli import process as _cli
from mst.endings import COMPLETED, Ending, Infrastructure, Trial
from mst.providers._errors import ending_for_status
from mst.session.events import ASSISTANT_MESSAGE, MODEL_REQUEST, MODEL_RETRY, TOOL_COMPLETE, TOOL_START
from mst.session.recorder import TranscriptRecorder

_SYNTHETIC: Final = "<synthetic>"
_CONTEXT_TEXT: Final = re.compile(r"prompt is too long|context (window|length)|input is too long", re.IGNORECASE)
_NETWORK_TEXT: Final = re.compile(
    r"unable to connect|connection (refused|reset|dropped|error|closed)|ConnectionRefused|ECONNREFUSED|ECONNRESET|"
    r"ETIMEDOUT|ENOTFOUND|EAI_AGAIN|fetch failed|socket hang up|timed? ?out", re.IGNORECASE)
# The HTTP status in the text shown for an API error: ``API Error: 500 …``, ``API Error: Request
# rejected (429) · …`` (for streams that carry no ``api_error_status``).
_TEXT_STATUS: Final = re.compile(r"API Error:\s*(?:[^\d(]*\()?(\d{3})\b")
_INPUT_KEYS: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
# The model's own failures: a trial, counted against the variant (not the infrastructure's).
_MODEL_FAILURES: Final = frozenset({"max_output_tokens"})
_QUIET: Final = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}

McpReason = Callable[[str], str | None]


def private_environment(home: Path) -> dict[str, str]:
    """The user's environment with a private, quiet Claude Code: ``HOME`` and ``CLAUDE_CONFIG_DIR``
    in ``home`` (so the user's settings, memory and plugins are never read, and nothing is left
    behind), no telemetry or auto-update, and npm's cache kept at the user's (``npx … claude-code``)."""
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), **_QUIET}
    user_home = os.environ.get("HOME")
    if user_home and "npm_config_cache" not in os.environ:
        env["npm_config_cache"] = str(Path(user_home) / ".npm")
    return env


def split_tool(name: str, servers: list[str]) -> tuple[str | None, str]:
    """``mcp__store__check_stock`` → (``store``, ``check_stock``); other tools keep their name."""
    if not name.startswith("mcp__"):
        return None, name
    rest = name[5:]
    for server in servers:  # longest first, so a server whose name contains "__" still matches
        if rest.startswith(server + "__"):
            return server, rest[len(server) + 2:]
    server, _, tool = rest.partition("__")
    return (server, tool) if tool else (None, name)


def _message_id(obj: dict[str, Any]) -> str | None:
    mid = (obj.get("message") or {}).get("id")
    return mid if isinstance(mid, str) else None


def _input_tokens(usage: dict[str, Any]) -> int:
    return sum(int(usage.get(k) or 0) for k in _INPUT_KEYS)


class ClaudeStream:
    """Turns Claude Code's stream-json lines into canonical events as they arrive.

    One ``model.request`` per API message, emitted when its usage is complete (its
    ``message_delta``) and placed before the message's own events, which wait for it. A message
    whose final count never came (a cut stream, a CLI without stream events) is recorded with
    its input tokens only: a count known to be partial is never written.
    """

    def __init__(self, rec: TranscriptRecorder, model: str, servers: list[str], *,
                 mcp_reason: McpReason, startup_s: float) -> None:
        self.rec = rec
        self.model = model
        self.servers = sorted(servers, key=len, reverse=True)
        self.mcp_reason = mcp_reason
        self.startup_s = startup_s
        self.pending: dict[str, tuple[str | None, str, float]] = {}
        self.started: dict[str, dict[str, Any]] = {}  # message id -> its message_start message
        self.held: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # message id -> events waiting
        self.recorded: set[str] = set()
        self.requests = 0
        self.tool_calls = 0
        self.result: dict[str, Any] | None = None
        self.api_error: tuple[str, str] | None = None
        self.retry: dict[str, Any] | None = None  # the last api_retry line, until a response came
        self.session_id: str | None = None
        self.mcp_failure: tuple[str, str] | None = None  # (server, what the init line said)

    def __call__(self, obj: dict[str, Any]) -> Ending | None:
        kind = obj.get("type")
        if kind == "stream_event":
            self._stream_event(obj)
            return None
        # Progress notes end no message; nor does a tool's result: Claude Code runs a tool as soon
        # as its block is complete, so the result can come before the message's final count
        # (seen with StructuredOutput), and it waits behind the message instead.
        if not (kind == "system" and obj.get("subtype") == "status") and kind != "user":
            self.flush(keep=_message_id(obj) if kind == "assistant" else None)
        if kind == "system":
            return self._system(obj)
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "user":
            self._user(obj)
        elif kind == "result":
            self.result = obj
        return None

    # -- lines -------------------------------------------------------------------------------

    def _system(self, obj: dict[str, Any]) -> Ending | None:
        subtype = obj.get("subtype")
        if subtype == "init":
            self.session_id = obj.get("session_id")
            return self._init(obj)
        if subtype == "api_retry":
            self.retry = obj
            self.rec.emit(MODEL_RETRY, {
                "attempt": obj.get("attempt"), "maxRetries": obj.get("max_retries"),
                "delayMs": obj.get("retry_delay_ms"), "status": obj.get("error_status"), "error": obj.get("error"),
            })
        return None

    def _init(self, obj: dict[str, Any]) -> Ending | None:
        for server in obj.get("mcp_servers") or ():
            if not isinstance(server, dict) or server.get("name") not in self.servers:
                continue
            name, status = str(server.get("name")), server.get("status")
            if status == "connected":
                continue
            if status == "pending":
                why = f"it did not connect within {self.startup_s:g} s (mcpStartupSeconds)"
            else:
                why = f"Claude Code reports its status {status!r}"
            self.mcp_failure = (name, why)
            return self._mcp_ending()
        return None

    def _mcp_ending(self) -> Infrastructure:
        assert self.mcp_failure is not None
        name, why = self.mcp_failure
        reason = self.mcp_reason(name)
        return Infrastructure(
            "setup", f"MCP server {name!r} did not start: {why}" + (f": {reason}" if reason else ""), False)

    def _stream_event(self, obj: dict[str, Any]) -> None:
        event = obj.get("event") or {}
        etype = event.get("type")
        if etype == "message_start":
            message = event.get("message") or {}
            if isinstance(message.get("id"), str):
                self.started[message["id"]] = message
            self.retry = None  # a response came: whatever failed before was retried successfully
        elif etype == "message_delta":
            mid = obj.get("api_message_id")
            if isinstance(mid, str) and mid in self.started:
                usage = {**(self.started[mid].get("usage") or {}), **(event.get("usage") or {})}
                self._request(mid, usage, complete=True)

    def _assistant(self, obj: dict[str, Any]) -> None:
        message = obj.get("message") or {}
        content = message.get("content") or []
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        error = obj.get("error")
        if isinstance(error, str) and error:
            self.api_error = (error, "".join(texts))
            return
        mid = message.get("id")
        if message.get("model") == _SYNTHETIC or not isinstance(mid, str):
            return
        held = self.held.setdefault(mid, []) if mid not in self.recorded else None
        if held is not None and mid not in self.started:
            self.started[mid] = message  # no stream events: the line's own (input) usage
        calls = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        data: dict[str, Any] = {"content": "".join(texts)}
        if calls:
            data["toolCalls"] = [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("input") or {}}
                                 for c in calls]
        out: list[tuple[str, dict[str, Any]]] = []
        if texts or calls:
            out.append((ASSISTANT_MESSAGE, data))
        for c in calls:
            call_id, name = str(c.get("id")), str(c.get("name"))
            server, tool = split_tool(name, self.servers)
            self.pending[call_id] = (server, tool, time.monotonic())
            self.tool_calls += 1
            out.append((TOOL_START, {"toolCallId": call_id, "toolName": tool, "input": c.get("input") or {},
                                     "mcpServerName": server}))
        if held is not None:
            held.extend(out)
        else:
            for type_, payload in out:
                self.rec.emit(type_, payload)

    def _user(self, obj: dict[str, Any]) -> None:
        content = (obj.get("message") or {}).get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id"))
            server, tool, t0 = self.pending.pop(call_id, (None, "unknown", time.monotonic()))
            success = not block.get("is_error")
            data: dict[str, Any] = {"toolCallId": call_id, "toolName": tool, "success": success,
                                    "durationMs": int((time.monotonic() - t0) * 1000), "mcpServerName": server}
            data["output" if success else "error"] = _cli.tool_text(block.get("content"))
            self._emit(TOOL_COMPLETE, data)

    def _emit(self, type_: str, data: dict[str, Any]) -> None:
        """Emit now, or behind the newest message still waiting for its final count."""
        if self.held:
            next(reversed(self.held.values())).append((type_, data))
        else:
            self.rec.emit(type_, data)

    # -- model requests ----------------------------------------------------------------------

    def _request(self, mid: str, usage: dict[str, Any], *, complete: bool) -> None:
        """Record message ``mid``'s request, then the events that waited for it."""
        if mid in self.recorded:
            return
        self.recorded.add(mid)
        message = self.started.get(mid) or {}
        inp = _input_tokens(usage)
        data: dict[str, Any] = {"model": message.get("model") or self.model, "requestIndex": self.requests,
                                "inputTokens": inp}
        if complete:
            out = int(usage.get("output_tokens") or 0)
            data.update(outputTokens=out, totalTokens=inp + out)
        self.requests += 1
        self.rec.emit(MODEL_REQUEST, data)
        for type_, payload in self.held.pop(mid, []):
            self.rec.emit(type_, payload)

    def flush(self, keep: str | None = None) -> None:
        """Record the messages still waiting for their final count, without it (it never came);
        ``keep`` is the message whose next content block is arriving (it is not over yet)."""
        for mid in [m for m in self.held if m != keep]:
            self._request(mid, (self.started.get(mid) or {}).get("usage") or {}, complete=False)

    # -- endings -----------------------------------------------------------------------------

    def _overflow(self, text: str) -> Ending:
        if self.requests == 0:
            return Infrastructure(
                "setup", f"the case's prompt does not fit the model's context on the first request: {text}", False)
        return Trial("context-limit", f"the context filled up after {self.requests} model responses: {text}")

    def _api_failure(self, kind: str, status: int | None, text: str, retries: str) -> Ending:
        """What a failed API request means; ``status`` is the HTTP status, ``None`` if none came."""
        if status is not None:
            return ending_for_status("Claude Code", status, text + retries)
        if kind in ("authentication_failed", "billing_error"):
            return Infrastructure("setup", f"Claude Code: {kind}: {text}", False)
        if kind == "server_error" or _NETWORK_TEXT.search(text):
            # A server error without an HTTP status: no response ever came (refused, reset, timed out).
            return Infrastructure("network", f"Claude Code could not reach the API{retries}: {text}", True)
        if kind == "invalid_request":
            return Infrastructure("setup", f"Claude Code: the API refused the request: {text}", False)
        return Infrastructure("provider-api", f"Claude Code: the API failed ({kind}){retries}: {text}", True)

    def _retries(self) -> str:
        retry = self.retry
        return "" if retry is None else f" (after {retry.get('attempt')} of {retry.get('max_retries')} retries)"

    def _while_retrying(self, limit: Trial) -> Ending:
        """The time limit passed while the CLI was retrying a failed request: that failure is the ending."""
        retry = self.retry or {}
        status = retry.get("error_status")
        text = f"still retrying when {limit.detail}"
        return self._api_failure(str(retry.get("error") or "unknown"), status if isinstance(status, int) else None,
                                 text, self._retries())

    def ending(self, run: _cli.RunResult) -> tuple[Ending, str | None]:
        self.flush()
        if self.mcp_failure is not None:
            # Read again now that the CLI has stopped: it writes its MCP log a moment after the init line.
            return self._mcp_ending(), None
        if run.ending is not None:
            limit = run.ending
            if isinstance(limit, Trial) and limit.outcome == "time-limit" and self.retry is not None:
                return self._while_retrying(limit), None
            return limit, None
        result = self.result
        if result is None:
            if self.api_error is not None:
                kind, text = self.api_error
                if _CONTEXT_TEXT.search(text):
                    return self._overflow(text), None
                return self._api_failure(kind, self._status(None, text), text, self._retries()), None
            tail = f"; its stderr ends with: {run.stderr}" if run.stderr else ""
            return Infrastructure(
                "client-app", f"claude exited with status {run.returncode} without a result line{tail}", True), None
        return self._result_ending(result)

    def _status(self, result: dict[str, Any] | None, text: str) -> int | None:
        """The failed request's HTTP status: the result's, else the last retry's, else the text's."""
        status = (result or {}).get("api_error_status")
        if status is None and self.retry is not None:
            status = self.retry.get("error_status")
        if isinstance(status, int):
            return status
        m = _TEXT_STATUS.search(text)
        return int(m.group(1)) if m else None

    def _result_ending(self, result: dict[str, Any]) -> tuple[Ending, str | None]:
        subtype = str(result.get("subtype") or "")
        terminal = str(result.get("terminal_reason") or "")
        text = str(result.get("result") or "")
        if subtype == "error_max_turns" or terminal == "max_turns":
            return Trial("turn-limit", f"Claude Code reached its turn limit ({result.get('num_turns')} turns)"), None
        if subtype == "error_max_budget_usd":
            return Trial("turn-limit", "Claude Code reached its budget (--max-budget-usd)"), None
        if subtype == "success" and not result.get("is_error"):
            return COMPLETED, text
        kind, error_text = self.api_error or ("unknown", text)
        if terminal == "prompt_too_long" or _CONTEXT_TEXT.search(error_text):
            return self._overflow(error_text), None
        if result.get("stop_reason") == "refusal" or kind in _MODEL_FAILURES:
            return Trial("client-error", f"Claude Code ended with the model's own failure ({kind}): {error_text}"), None
        if terminal == "api_error" or self.api_error is not None:
            return self._api_failure(kind, self._status(result, error_text), error_text, self._retries()), None
        errors = result.get("errors")
        detail = text or (orjson.dumps(errors).decode() if errors else subtype)
        return Trial("client-error", f"Claude Code ended with {subtype or 'an error'}: {detail}"), None
