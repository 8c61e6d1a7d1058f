"""The ``claude-code`` client: Claude Code run headless, its stream turned into canonical events.

One attempt runs ``claude -p --output-format stream-json --verbose`` with the prompt on stdin,
``--mcp-config`` pointing at a JSON file (in the attempt's artifacts directory) that holds the
variant's MCP servers, ``--strict-mcp-config`` so only those servers are used, ``--model`` and
``--max-turns`` from the variant, and ``--allowedTools mcp__<server>`` for each server so the
servers' tools run without a permission prompt.

Format facts relied on (Claude Code's headless-mode / CLI reference docs, "Output formats" and
the Agent SDK's message types; cross-checked with public stream-json parsers):

- stdout is JSON Lines; every line has ``type``. ``stream-json`` needs ``--verbose`` with ``-p``.
- ``{"type":"system","subtype":"init","session_id","model","tools":[...],"mcp_servers":[{"name",
  "status"}]}`` comes first; ``status`` is ``connected`` or e.g. ``failed`` for a server that did
  not start.
- ``{"type":"assistant","message":{"id","model","content":[{"type":"text","text"} |
  {"type":"tool_use","id","name","input"} | {"type":"thinking",...}],"usage":{"input_tokens",
  "output_tokens","cache_creation_input_tokens","cache_read_input_tokens"}}}``. One API response
  may arrive as several lines with the same ``message.id`` (one content block each) and the same
  usage, so usage is counted once per id. An API failure is reported as an assistant line with a
  typed ``error`` (``rate_limit``, ``server_error``, ``authentication_failed``, ``billing_error``,
  ``invalid_request``, ``unknown``) and the API's message as its text.
- MCP tools are named ``mcp__<server>__<tool>``.
- ``{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id","content": str |
  [{"type":"text","text"}],"is_error"}]}}`` carries tool results.
- The last line is ``{"type":"result","subtype":"success" | "error_max_turns" |
  "error_during_execution" | "error_max_budget_usd","is_error","result","num_turns",
  "total_cost_usd","usage":{...},"duration_ms"}``.
- ``--mcp-config`` files take the ``.mcp.json`` shape (``{"mcpServers": {name: {"type": "stdio",
  "command", "args", "env"} | {"type": "http", "url", "headers"}}}``) and expand ``${VAR}`` from
  Claude Code's environment, so secrets stay out of the file: they reach Claude Code through its
  environment only.

Endings (docs/endings.md), decided here:

======================================================  ===========================================
what happened                                           ending
======================================================  ===========================================
``result`` success                                      trial ``completed``
``error_max_turns`` / ``error_max_budget_usd``          trial ``turn-limit`` (its own budget)
``timeLimitSeconds`` passed                             trial ``time-limit``
context overflow before any model response              ``setup``, not retryable
context overflow after one                              trial ``context-limit``
typed API error ``rate_limit`` / ``server_error``       ``provider-api``, retryable
``authentication_failed`` / ``billing_error``           ``setup``, not retryable
an MCP server of the variant reported ``failed``        ``setup``, not retryable (stopped at once)
other errors it reports in its result                   trial ``client-error``
binary missing                                          ``client-app``, not retryable
crash (signal, or exit without a result)                ``client-app``, retryable
a line that is not JSON                                 ``client-app``, retryable
======================================================  ===========================================

Reading the API error's text (for ``prompt is too long`` and an ``API Error: NNN`` status) is
the one place this client reads text, and it is text from a program mst does not control.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from mst.clients import _cli
from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import HttpServer, StdioServer, VariantConfig
from mst.endings import COMPLETED, Ending, EndingException, Infrastructure, Trial, to_json
from mst.providers._errors import ending_for_status
from mst.session.events import (
    ASSISTANT_MESSAGE,
    MODEL_REQUEST,
    SESSION_RESULT,
    TOOL_COMPLETE,
    TOOL_START,
    USER_MESSAGE,
)
from mst.session.redact import Redactor

NAME: Final = "claude-code"
CONFIG_FILE: Final = "claude-mcp-config.json"
_SAME_PYTHON: Final = frozenset({"python", "python3"})
_CONTEXT_TEXT: Final = re.compile(r"prompt is too long|context (window|length)|input is too long", re.IGNORECASE)
_API_STATUS: Final = re.compile(r"API Error:\s*(\d{3})")
_NETWORK_TEXT: Final = re.compile(r"connection error|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|fetch failed",
                                  re.IGNORECASE)
_STRICT = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)


class ClaudeCodeSettings(BaseModel):
    """Settings of the ``claude-code`` client (a variant's ``settings``)."""

    model_config = _STRICT

    command: list[str] = Field(
        default_factory=lambda: ["claude"], min_length=1,
        description="How to run Claude Code (argv prefix); e.g. [npx, -y, '@anthropic-ai/claude-code'].",
    )
    maxTurns: int | None = Field(
        default=10, ge=1, description="--max-turns; reaching it ends the trial as turn-limit."
    )
    timeLimitSeconds: float | None = Field(
        default=None, gt=0, description="The client's own time budget; passing it is a time-limit trial."
    )
    allowedTools: list[str] | None = Field(
        default=None,
        description="--allowedTools; default: every tool of the variant's MCP servers (mcp__<server>).",
    )
    permissionMode: str | None = Field(default=None, description="--permission-mode, e.g. bypassPermissions.")
    appendSystemPrompt: str | None = Field(default=None, description="--append-system-prompt.")
    extraArgs: list[str] = Field(default_factory=list, description="More arguments, added last.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables (no secrets here: "
                                "secrets from --secrets-file are passed to the environment already).")


def mcp_config(
    servers: Mapping[str, StdioServer | HttpServer], base_dir: Path, secrets: Mapping[str, str]
) -> dict[str, Any]:
    """The ``--mcp-config`` document; ``${NAME}`` references stay unexpanded (Claude Code expands them)."""
    out: dict[str, Any] = {}
    for name, cfg in servers.items():
        where = f"mcpServers.{name}"
        if isinstance(cfg, StdioServer):
            command = sys.executable if cfg.command in _SAME_PYTHON else cfg.command
            cwd = base_dir if cfg.cwd is None else base_dir / cfg.cwd
            if not cwd.is_dir():
                raise EndingException(Infrastructure(
                    "setup", f"MCP server {name!r}: its working directory {str(cwd)!r} does not exist", False))
            for key, value in cfg.env.items():
                _cli.secret_refs(value, secrets, f"{where}.env.{key}")
            # The .mcp.json shape has no working directory: a tiny sh wrapper gives the server the
            # one mst's own agent client gives it (relative paths in args resolve the same way).
            out[name] = {"type": "stdio", "command": "/bin/sh",
                         "args": ["-c", 'cd "$0" && exec "$@"', str(cwd), command, *cfg.args],
                         "env": dict(cfg.env)}
        else:
            for key, value in cfg.headers.items():
                _cli.secret_refs(value, secrets, f"{where}.headers.{key}")
            out[name] = {"type": "http", "url": cfg.url, "headers": dict(cfg.headers)}
    return {"mcpServers": out}


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


class ClaudeStream:
    """Turns Claude Code's stream-json lines into canonical events as they arrive."""

    def __init__(self, rec: TranscriptRecorder, model: str, servers: list[str]) -> None:
        self.rec = rec
        self.model = model
        self.servers = sorted(servers, key=len, reverse=True)
        self.pending: dict[str, tuple[str | None, str, float]] = {}
        self.message_ids: set[str] = set()
        self.requests = 0
        self.tool_calls = 0
        self.result: dict[str, Any] | None = None
        self.api_error: tuple[str, str] | None = None
        self.session_id: str | None = None

    def __call__(self, obj: dict[str, Any]) -> Ending | None:
        kind = obj.get("type")
        if kind == "system" and obj.get("subtype") == "init":
            self.session_id = obj.get("session_id")
            return self._init(obj)
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "user":
            self._user(obj)
        elif kind == "result":
            self.result = obj
        return None

    def _init(self, obj: dict[str, Any]) -> Ending | None:
        for server in obj.get("mcp_servers") or ():
            if not isinstance(server, dict):
                continue
            name, status = server.get("name"), server.get("status")
            if name in self.servers and status not in ("connected", "pending", None):
                return Infrastructure(
                    "setup", f"MCP server {name!r} did not start: Claude Code reports its status {status!r}", False)
        return None

    def _assistant(self, obj: dict[str, Any]) -> None:
        message = obj.get("message") or {}
        content = message.get("content") or []
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        error = obj.get("error")
        if isinstance(error, str) and error:
            self.api_error = (error, "".join(texts))
            return
        mid = message.get("id")
        usage = message.get("usage")
        if isinstance(mid, str) and mid not in self.message_ids and isinstance(usage, dict):
            self.message_ids.add(mid)
            inp = sum(int(usage.get(k) or 0) for k in
                      ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            out = int(usage.get("output_tokens") or 0)
            self.rec.emit(MODEL_REQUEST, {
                "model": message.get("model") or self.model, "requestIndex": self.requests,
                "inputTokens": inp, "outputTokens": out, "totalTokens": inp + out,
            })
            self.requests += 1
        calls = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        data: dict[str, Any] = {"content": "".join(texts)}
        if calls:
            data["toolCalls"] = [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("input") or {}}
                                 for c in calls]
        if texts or calls:
            self.rec.emit(ASSISTANT_MESSAGE, data)
        now = time.monotonic()
        for c in calls:
            call_id, name = str(c.get("id")), str(c.get("name"))
            server, tool = split_tool(name, self.servers)
            self.pending[call_id] = (server, tool, now)
            self.tool_calls += 1
            self.rec.emit(TOOL_START, {"toolCallId": call_id, "toolName": tool, "input": c.get("input") or {},
                                       "mcpServerName": server})

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
            self.rec.emit(TOOL_COMPLETE, data)

    # -----------------------------------------------------------------------------------------

    def _overflow(self, text: str) -> Ending:
        if self.requests == 0:
            return Infrastructure(
                "setup", f"the case's prompt does not fit the model's context on the first request: {text}", False)
        return Trial("context-limit", f"the context filled up after {self.requests} model responses: {text}")

    def _api_ending(self, kind: str, text: str) -> Ending | None:
        if _CONTEXT_TEXT.search(text):
            return self._overflow(text)
        if kind in ("rate_limit", "server_error"):
            return Infrastructure("provider-api", f"Claude Code: the API failed ({kind}): {text}", True)
        if kind in ("authentication_failed", "billing_error"):
            return Infrastructure("setup", f"Claude Code: {kind}: {text}", False)
        m = _API_STATUS.search(text)
        if m is not None:
            return ending_for_status("Claude Code", int(m.group(1)), text)
        if _NETWORK_TEXT.search(text):
            return Infrastructure("network", f"Claude Code could not reach the API: {text}", True)
        if kind == "invalid_request":
            return Infrastructure("setup", f"Claude Code: the API refused the request: {text}", False)
        return None

    def ending(self, run: _cli.RunResult) -> tuple[Ending, str | None]:
        if run.ending is not None:
            return run.ending, None
        result = self.result
        if result is None:
            tail = f"; its stderr ends with: {run.stderr}" if run.stderr else ""
            if self.api_error is not None:
                decided = self._api_ending(*self.api_error)
                if decided is not None:
                    return decided, None
            return Infrastructure(
                "client-app", f"claude exited with status {run.returncode} without a result line{tail}", True), None
        subtype = str(result.get("subtype") or "")
        text = str(result.get("result") or "")
        if subtype == "error_max_turns":
            return Trial("turn-limit", f"Claude Code reached its turn limit ({result.get('num_turns')} turns)"), None
        if subtype == "error_max_budget_usd":
            return Trial("turn-limit", "Claude Code reached its budget (--max-budget-usd)"), None
        if subtype == "success" and not result.get("is_error"):
            return COMPLETED, text
        if self.api_error is not None:
            decided = self._api_ending(*self.api_error)
            if decided is not None:
                return decided, None
        decided = self._api_ending("unknown", text) if result.get("is_error") else None
        if decided is not None:
            return decided, None
        errors = result.get("errors")
        detail = text or (orjson.dumps(errors).decode() if errors else subtype)
        return Trial("client-error", f"Claude Code ended with {subtype or 'an error'}: {detail}"), None


def _scrub(ending: Ending, secrets: Mapping[str, str]) -> Ending:
    return Redactor.of(secrets).ending(ending)


class ClaudeCodeClient:
    """The ``claude-code`` client kind (entry point ``claude-code`` in group ``mst.clients``)."""

    settings_model: ClassVar[type[BaseModel]] = ClaudeCodeSettings

    def __init__(self, variant: VariantConfig, settings: Any, base_dir: Path) -> None:
        if not isinstance(settings, ClaudeCodeSettings):
            settings = ClaudeCodeSettings.model_validate(settings or {})
        self.settings: ClaudeCodeSettings = settings
        self.variant = variant
        self.base_dir = base_dir
        model = variant.model or ""
        self.model = model.split(":", 1)[1] if ":" in model else model

    async def aclose(self) -> None:
        return None

    def argv(self, config_path: Path) -> list[str]:
        s = self.settings
        argv = [*s.command, "-p", "--output-format", "stream-json", "--verbose",
                "--mcp-config", str(config_path), "--strict-mcp-config"]
        if self.model:
            argv += ["--model", self.model]
        if s.maxTurns is not None:
            argv += ["--max-turns", str(s.maxTurns)]
        tools = s.allowedTools if s.allowedTools is not None else [f"mcp__{n}" for n in self.variant.mcpServers]
        if tools:
            argv += ["--allowedTools", ",".join(tools)]
        if s.permissionMode:
            argv += ["--permission-mode", s.permissionMode]
        if s.appendSystemPrompt:
            argv += ["--append-system-prompt", s.appendSystemPrompt]
        return argv + list(s.extraArgs)

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        rec = request.transcript
        rec.emit(USER_MESSAGE, {"content": request.prompt})
        stream = ClaudeStream(rec, self.model, list(self.variant.mcpServers))
        answer: str | None = None
        try:
            artifacts = request.artifacts_dir.absolute()  # the CLI runs there: relative paths would break
            artifacts.mkdir(parents=True, exist_ok=True)
            config = mcp_config(self.variant.mcpServers, self.base_dir, request.secrets)
            config_path = artifacts / CONFIG_FILE
            config_path.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
            env = {**os.environ, **self.settings.env, **request.secrets}
            run = await _cli.run_json_lines(
                self.argv(config_path), cwd=artifacts, env=env, stdin=request.prompt.encode(),
                time_limit_s=self.settings.timeLimitSeconds, on_line=stream, secrets=request.secrets, name="claude",
            )
            ending, answer = stream.ending(run)
        except EndingException as exc:
            ending = exc.ending
        if request.secrets and ending is not COMPLETED:
            ending = _scrub(ending, request.secrets)
        return _finish(rec, ending, answer, stream.result, stream, started)


def _finish(
    rec: TranscriptRecorder, ending: Ending, answer: str | None, result: dict[str, Any] | None,
    stream: ClaudeStream, started: float,
) -> AttemptOutcome:
    usage: dict[str, int] = {}
    raw = (result or {}).get("usage")
    if isinstance(raw, dict):
        inp = sum(int(raw.get(k) or 0) for k in
                  ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        out = int(raw.get("output_tokens") or 0)
        usage = {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out}
    diagnostics: dict[str, Any] = {"turns": (result or {}).get("num_turns", stream.requests),
                                   "toolCalls": stream.tool_calls, "sessionId": stream.session_id}
    cost = (result or {}).get("total_cost_usd")
    if isinstance(cost, int | float):
        diagnostics["costUsd"] = cost
    data: dict[str, Any] = {
        "answer": answer,
        "outcome": ending.outcome if isinstance(ending, Trial) else "infrastructure",
        "ending": to_json(ending), "usage": usage, "durationMs": int((time.monotonic() - started) * 1000),
        "turns": diagnostics["turns"],
    }
    if "costUsd" in diagnostics:
        data["costUsd"] = diagnostics["costUsd"]
    rec.emit(SESSION_RESULT, data)
    return AttemptOutcome(ending, answer, usage, diagnostics)
