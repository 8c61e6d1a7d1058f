"""The ``codex`` client: OpenAI's Codex CLI run with ``codex exec --json``, its events made canonical.

One attempt runs ``codex exec --json --skip-git-repo-check --cd <artifacts> [--model M] -c ... -``
with the prompt on stdin (``-``). The variant's MCP servers go in as ``-c mcp_servers.<name>.<key>=
<TOML value>`` overrides, which layer over the user's own configuration for this run only (nothing
is written to ``CODEX_HOME``, the user's login keeps working, concurrent attempts cannot collide).
Secrets never go in argv: a stdio server's env value that names a secret is set in Codex's
environment under the server's variable name and forwarded with ``env_vars``; an HTTP header that
names one is set in a generated variable and sent with ``env_http_headers``.

Format facts relied on (``codex-rs/exec/src/exec_events.rs`` in openai/codex, the documented
``codex exec --json`` JSONL; config keys from Codex's config reference):

- one JSON object per stdout line, tagged by ``type``: ``thread.started`` {thread_id},
  ``turn.started``, ``turn.completed`` {usage: {input_tokens, cached_input_tokens, output_tokens}},
  ``turn.failed`` {error: {message}}, ``item.started`` / ``item.updated`` / ``item.completed``
  {item}, and ``error`` {message} (also used for transient notices such as reconnect attempts).
- ``item`` = {id, type, ...}: ``agent_message`` {text}; ``reasoning`` {text};
  ``command_execution`` {command, aggregated_output, exit_code, status}; ``mcp_tool_call``
  {server, tool, arguments, result: {content: [MCP content blocks], structured_content} | null,
  error: {message} | null, status: in_progress | completed | failed}; ``error`` {message}.
- config: ``mcp_servers.<name>.command`` / ``args`` / ``env`` / ``env_vars`` / ``cwd`` /
  ``url`` / ``http_headers`` / ``env_http_headers`` / ``startup_timeout_sec`` / ``tool_timeout_sec``.

Endings: ``turn.completed`` → trial ``completed``; ``timeLimitSeconds`` → ``time-limit``;
``maxToolCalls`` (a budget mst enforces: Codex has no turn limit of its own) → ``turn-limit``;
a failed turn is classified from Codex's message (text from a program mst does not control:
context window → first-request/mid-trial rule, an HTTP status → the provider status table,
a dropped stream → ``network``, anything else → trial ``client-error``); an MCP server of the
variant that fails to start → ``setup``; binary missing → ``client-app`` not retryable; a crash,
an exit without a turn result or a line that is not JSON → ``client-app`` retryable.
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

NAME: Final = "codex"
_SAME_PYTHON: Final = frozenset({"python", "python3"})
_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")
_CONTEXT_TEXT: Final = re.compile(
    r"context window|context_length_exceeded|context length|maximum context|prompt is too long", re.IGNORECASE)
_STATUS_TEXT: Final = re.compile(r"(?:status|HTTP)[: ]*(\d{3})\b|\b(\d{3}) (?:Too Many Requests|Unauthorized|"
                                 r"Forbidden|Not Found|Internal Server Error|Bad Gateway|Service Unavailable)")
_RATE_TEXT: Final = re.compile(r"rate limit|too many requests|usage limit|overloaded", re.IGNORECASE)
_NETWORK_TEXT: Final = re.compile(r"stream disconnected|error sending request|connection (refused|reset)|"
                                  r"timed out|dns error", re.IGNORECASE)
_MCP_START: Final = re.compile(r"MCP (?:client|server) for [`'\"]?([A-Za-z0-9_-]+)[`'\"]? failed to start")
_STRICT = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)


class CodexSettings(BaseModel):
    """Settings of the ``codex`` client (a variant's ``settings``)."""

    model_config = _STRICT

    command: list[str] = Field(
        default_factory=lambda: ["codex"], min_length=1,
        description="How to run Codex (argv prefix); e.g. [npx, -y, '@openai/codex'].",
    )
    maxToolCalls: int | None = Field(
        default=None, ge=1,
        description="Most tool calls mst lets one attempt make; one more ends the trial as turn-limit "
        "(Codex has no turn limit of its own).",
    )
    timeLimitSeconds: float | None = Field(
        default=None, gt=0, description="The client's own time budget; passing it is a time-limit trial."
    )
    sandbox: str | None = Field(default="read-only", description="--sandbox (read-only, workspace-write, ...).")
    startupTimeoutSeconds: float | None = Field(
        default=None, gt=0, description="mcp_servers.<name>.startup_timeout_sec for every server."
    )
    toolTimeoutSeconds: float | None = Field(
        default=None, gt=0, description="mcp_servers.<name>.tool_timeout_sec for every server."
    )
    extraArgs: list[str] = Field(default_factory=list, description="More arguments, before the prompt's `-`.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables (no secrets).")


def toml_value(value: Any) -> str:
    """A TOML value for a ``-c key=value`` override (JSON strings are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{orjson.dumps(str(k)).decode()} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def mcp_overrides(
    servers: Mapping[str, StdioServer | HttpServer], base_dir: Path, secrets: Mapping[str, str],
    settings: CodexSettings,
) -> tuple[list[str], dict[str, str]]:
    """``-c`` arguments for the variant's servers, and the environment entries that carry their secrets."""
    args: list[str] = []
    env: dict[str, str] = {}

    def put(name: str, key: str, value: Any) -> None:
        args.extend(["-c", f"mcp_servers.{name}.{key}={toml_value(value)}"])

    for i, (name, cfg) in enumerate(servers.items()):
        where = f"mcpServers.{name}"
        if not _BARE_KEY.match(name):
            raise EndingException(Infrastructure(
                "setup", f"MCP server name {name!r}: Codex needs letters, digits, '_' or '-'", False))
        if isinstance(cfg, StdioServer):
            cwd = base_dir if cfg.cwd is None else base_dir / cfg.cwd
            if not cwd.is_dir():
                raise EndingException(Infrastructure(
                    "setup", f"MCP server {name!r}: its working directory {str(cwd)!r} does not exist", False))
            put(name, "command", sys.executable if cfg.command in _SAME_PYTHON else cfg.command)
            put(name, "args", list(cfg.args))
            put(name, "cwd", str(cwd))
            literal: dict[str, str] = {}
            forwarded: list[str] = []
            for key, value in cfg.env.items():
                if _cli.secret_refs(value, secrets, f"{where}.env.{key}"):
                    expanded = _cli.expand(value, secrets, f"{where}.env.{key}")
                    if env.get(key, expanded) != expanded:
                        raise EndingException(Infrastructure(
                            "setup", f"{where}.env.{key}: another server sets {key} to a different secret; Codex "
                            "forwards secrets by variable name, so they must agree", False))
                    env[key] = expanded
                    forwarded.append(key)
                else:
                    literal[key] = value
            if literal:
                put(name, "env", literal)
            if forwarded:
                put(name, "env_vars", forwarded)
        else:
            put(name, "url", cfg.url)
            plain: dict[str, str] = {}
            from_env: dict[str, str] = {}
            for j, (header, value) in enumerate(cfg.headers.items()):
                if _cli.secret_refs(value, secrets, f"{where}.headers.{header}"):
                    var = f"MST_MCP_HEADER_{i}_{j}"
                    env[var] = _cli.expand(value, secrets, f"{where}.headers.{header}")
                    from_env[header] = var
                else:
                    plain[header] = value
            if plain:
                put(name, "http_headers", plain)
            if from_env:
                put(name, "env_http_headers", from_env)
        if settings.startupTimeoutSeconds is not None:
            put(name, "startup_timeout_sec", settings.startupTimeoutSeconds)
        if settings.toolTimeoutSeconds is not None:
            put(name, "tool_timeout_sec", settings.toolTimeoutSeconds)
    return args, env


class CodexStream:
    """Turns ``codex exec --json`` events into canonical events as they arrive."""

    def __init__(self, rec: TranscriptRecorder, model: str, servers: list[str], max_tool_calls: int | None) -> None:
        self.rec = rec
        self.model = model
        self.servers = servers
        self.max_tool_calls = max_tool_calls
        self.started: dict[str, float] = {}
        self.tool_calls = 0
        self.requests = 0
        self.items_done = 0
        self.answer: str | None = None
        self.completed = False
        self.failure: str | None = None
        self.errors: list[str] = []
        self.thread_id: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0

    def __call__(self, obj: dict[str, Any]) -> Ending | None:
        kind = obj.get("type")
        if kind == "thread.started":
            self.thread_id = obj.get("thread_id")
        elif kind in ("item.started", "item.completed"):
            item = obj.get("item")
            if isinstance(item, dict):
                return self._item(item, done=kind == "item.completed")
        elif kind == "turn.completed":
            usage = obj.get("usage") or {}
            inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
            self.input_tokens += inp
            self.output_tokens += out
            self.rec.emit(MODEL_REQUEST, {"model": self.model, "requestIndex": self.requests, "inputTokens": inp,
                                          "outputTokens": out, "totalTokens": inp + out,
                                          "cachedInputTokens": int(usage.get("cached_input_tokens") or 0)})
            self.requests += 1
            self.completed = True
        elif kind == "turn.failed":
            self.failure = str((obj.get("error") or {}).get("message") or "the turn failed")
        elif kind == "error":
            message = str(obj.get("message") or "")
            self.errors.append(message)
            return self._mcp_start(message)
        return None

    def _mcp_start(self, message: str) -> Ending | None:
        m = _MCP_START.search(message)
        if m is not None and m.group(1) in self.servers:
            return Infrastructure("setup", f"MCP server {m.group(1)!r} did not start: {message}", False)
        return None

    def _start(self, item: dict[str, Any]) -> Ending | None:
        item_id = str(item.get("id"))
        if item_id in self.started:
            return None
        self.started[item_id] = time.monotonic()
        self.tool_calls += 1
        if item.get("type") == "mcp_tool_call":
            data = {"toolCallId": item_id, "toolName": item.get("tool"), "input": item.get("arguments") or {},
                    "mcpServerName": item.get("server")}
        else:
            data = {"toolCallId": item_id, "toolName": "shell", "input": {"command": item.get("command")},
                    "mcpServerName": None}
        self.rec.emit(TOOL_START, data)
        if self.max_tool_calls is not None and self.tool_calls > self.max_tool_calls:
            return Trial("turn-limit", f"Codex asked for tool call {self.tool_calls}; maxToolCalls is "
                                       f"{self.max_tool_calls}")
        return None

    def _item(self, item: dict[str, Any], *, done: bool) -> Ending | None:
        kind = item.get("type")
        if kind in ("mcp_tool_call", "command_execution"):
            decided = self._start(item)
            if decided is not None or not done:
                return decided
            item_id = str(item.get("id"))
            data: dict[str, Any] = {"toolCallId": item_id,
                                    "durationMs": int((time.monotonic() - self.started[item_id]) * 1000)}
            if kind == "mcp_tool_call":
                error = item.get("error")
                result = item.get("result") or {}
                success = item.get("status") == "completed" and not error
                text = _cli.tool_text(result.get("content")) if result.get("content") else (
                    orjson.dumps(result["structured_content"]).decode()
                    if result.get("structured_content") is not None else "")
                if not success and isinstance(error, dict):
                    text = str(error.get("message") or text)
                data.update({"toolName": item.get("tool"), "success": success, "mcpServerName": item.get("server")})
            else:
                success = item.get("exit_code") == 0
                text = str(item.get("aggregated_output") or "")
                data.update({"toolName": "shell", "success": success, "mcpServerName": None})
            data["output" if success else "error"] = text
            self.items_done += 1
            self.rec.emit(TOOL_COMPLETE, data)
        elif done and kind == "agent_message":
            self.answer = str(item.get("text") or "")
            self.items_done += 1
            self.rec.emit(ASSISTANT_MESSAGE, {"content": self.answer})
        elif done and kind == "error":
            message = str(item.get("message") or "")
            self.errors.append(message)
            return self._mcp_start(message)
        return None

    def _classify(self, text: str) -> Ending:
        if _CONTEXT_TEXT.search(text):
            if self.items_done == 0:
                return Infrastructure(
                    "setup", f"the case's prompt does not fit the model's context on the first request: {text}", False)
            return Trial("context-limit", f"the context filled up mid-trial: {text}")
        m = _STATUS_TEXT.search(text)
        if m is not None:
            return ending_for_status("Codex", int(m.group(1) or m.group(2)), text)
        if _RATE_TEXT.search(text):
            return Infrastructure("provider-api", f"Codex: {text}", True)
        if _NETWORK_TEXT.search(text):
            return Infrastructure("network", f"Codex: {text}", True)
        return Trial("client-error", f"Codex: {text}")

    def ending(self, run: _cli.RunResult) -> tuple[Ending, str | None]:
        if run.ending is not None:
            return run.ending, None
        if self.completed and self.failure is None:
            return COMPLETED, self.answer or ""
        if self.failure is not None:
            return self._classify(self.failure), None
        tail = f"; its stderr ends with: {run.stderr}" if run.stderr else ""
        if self.errors and run.returncode not in (0, None):
            return self._classify(self.errors[-1]), None
        return Infrastructure(
            "client-app", f"codex exited with status {run.returncode} without a turn result{tail}", True), None


class CodexClient:
    """The ``codex`` client kind (entry point ``codex`` in group ``mst.clients``)."""

    settings_model: ClassVar[type[BaseModel]] = CodexSettings

    def __init__(self, variant: VariantConfig, settings: Any, base_dir: Path) -> None:
        if not isinstance(settings, CodexSettings):
            settings = CodexSettings.model_validate(settings or {})
        self.settings: CodexSettings = settings
        self.variant = variant
        self.base_dir = base_dir
        model = variant.model or ""
        self.model = model.split(":", 1)[1] if ":" in model else model

    async def aclose(self) -> None:
        return None

    def argv(self, artifacts: Path, overrides: list[str]) -> list[str]:
        s = self.settings
        argv = [*s.command, "exec", "--json", "--skip-git-repo-check", "--cd", str(artifacts)]
        if self.model:
            argv += ["--model", self.model]
        if s.sandbox:
            argv += ["--sandbox", s.sandbox]
        return [*argv, *overrides, *s.extraArgs, "-"]

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        rec = request.transcript
        rec.emit(USER_MESSAGE, {"content": request.prompt})
        stream = CodexStream(rec, self.model, list(self.variant.mcpServers), self.settings.maxToolCalls)
        answer: str | None = None
        try:
            artifacts = request.artifacts_dir.absolute()  # the CLI runs there: relative paths would break
            artifacts.mkdir(parents=True, exist_ok=True)
            overrides, secret_env = mcp_overrides(self.variant.mcpServers, self.base_dir, request.secrets,
                                                  self.settings)
            env = {**os.environ, **self.settings.env, **request.secrets, **secret_env}
            run = await _cli.run_json_lines(
                self.argv(artifacts, overrides), cwd=artifacts, env=env, stdin=request.prompt.encode(),
                time_limit_s=self.settings.timeLimitSeconds, on_line=stream, secrets=request.secrets, name="codex",
            )
            ending, answer = stream.ending(run)
        except EndingException as exc:
            ending = exc.ending
        if request.secrets and ending is not COMPLETED:
            ending = _scrub(ending, request.secrets)
        usage = ({"inputTokens": stream.input_tokens, "outputTokens": stream.output_tokens,
                  "totalTokens": stream.input_tokens + stream.output_tokens} if stream.requests else {})
        diagnostics: dict[str, Any] = {"turns": stream.requests, "toolCalls": stream.tool_calls,
                                       "threadId": stream.thread_id}
        if stream.errors:
            diagnostics["errors"] = [_cli.redact(e, request.secrets) for e in stream.errors[-5:]]
        rec.emit(SESSION_RESULT, {
            "answer": answer, "outcome": ending.outcome if isinstance(ending, Trial) else "infrastructure",
            "ending": to_json(ending), "usage": usage, "durationMs": int((time.monotonic() - started) * 1000),
            "turns": stream.requests,
        })
        return AttemptOutcome(ending, answer, usage, diagnostics)


def _scrub(ending: Ending, secrets: Mapping[str, str]) -> Ending:
    return Redactor.of(secrets).ending(ending)
