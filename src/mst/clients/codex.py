"""The ``codex`` client: OpenAI's Codex CLI run with ``codex exec --json``, its events made canonical.

One attempt runs ``codex exec --json --skip-git-repo-check --cd <artifacts> [--model M] --sandbox S
-c ... -`` with the prompt on stdin (``-``). The variant's MCP servers go in as ``-c mcp_servers.<name>.<key>=
<TOML value>`` overrides, which layer over the user's own configuration for this run only (nothing
is written to ``CODEX_HOME``, the user's login and model provider keep working, concurrent attempts
cannot collide). Secrets never go in argv: a stdio server's env value that names a secret is set in
Codex's environment under the server's variable name and forwarded with ``env_vars``; an HTTP
header that names one is set in a generated variable and sent with ``env_http_headers``.

Two overrides make the servers usable at all under ``codex exec`` (checked against the real CLI,
0.171; config keys in ``codex-rs/config/src/mcp_types.rs`` of openai/codex):

- ``required = true``: Codex starts MCP servers in the background and sends the first model
  request without the tools of a server that has not answered ``initialize`` yet, so a model that
  calls one at once gets ``unsupported call`` (on stderr only). A required server is waited for
  before the first request, and one that cannot start ends ``codex exec`` with ``required MCP
  servers failed to initialize: <name>: <reason>`` instead of a run without its tools.
- ``default_tools_approval_mode = "approve"``: ``codex exec`` runs with approval policy
  ``never``, under which a tool call that needs approval fails (``MCP tool call requires approval,
  but approval policy is never``; ``maybe_request_mcp_tool_approval`` in
  ``codex-rs/core/src/mcp_tool_call.rs``). Approving the variant's own servers' tools is what an
  eval of those servers asks for; it touches neither the sandbox (``--sandbox``, read-only by
  default) nor the approval of shell commands, unlike ``--dangerously-bypass-approvals-and-sandbox``.
  (Signed in with ChatGPT, Codex may still ask its safety monitor about an approved call:
  ``codex-rs/core/src/arc_monitor.rs``; with an API key it does not.)

Format facts relied on (``codex-rs/exec/src/exec_events.rs``, the documented ``codex exec --json``):

- one JSON object per stdout line, tagged by ``type``: ``thread.started`` {thread_id},
  ``turn.started``, ``turn.completed`` {usage: {input_tokens, cached_input_tokens, output_tokens}},
  ``turn.failed`` {error: {message}}, ``item.started`` / ``item.updated`` / ``item.completed``
  {item}, and ``error`` {message} (also transient notices: ``Reconnecting... 2/5 (...)`` while Codex
  retries a request, ``Reconnecting... waiting for network (...)`` while it cannot reach the
  provider at all, which it does without end).
- ``item`` = {id, type, ...}: ``agent_message`` {text}; ``reasoning`` {text};
  ``command_execution`` {command, aggregated_output, exit_code, status}; ``mcp_tool_call``
  {server, tool, arguments, result: {content: [MCP content blocks], structured_content} | null,
  error: {message} | null, status: in_progress | completed | failed}; ``error`` {message}.
- usage per model response is not in the stream: it comes from Codex's session file
  (:mod:`mst.clients._codex_rollout`), one ``model.request`` per response; the turn totals are
  kept only when that file is missing (``session.result`` usage, never a made-up per-request count).

Endings (decided here, at the point of failure; the text read is Codex's, a program mst does not
control; the same table for people is in docs/endings.md, "Codex"):

=============================================  =============================================
what Codex did                                 ending
=============================================  =============================================
``turn.completed``                             trial ``completed``
``timeLimitSeconds`` passed                    trial ``time-limit``
a tool call past ``maxToolCalls``              trial ``turn-limit`` (Codex has no turn limit)
turn failed: context window, no model          ``setup``, not retryable (the prompt does not
response completed before it                   fit)
turn failed: context window, later             trial ``context-limit``
turn failed: an HTTP status in the text, or    the provider status table (429 / 5xx
an OpenAI JSON error body                      ``provider-api`` retryable, 401 / 403 / 404 /
                                               other 4xx ``setup``)
turn failed: ``high demand`` (Codex's words    ``provider-api``, retryable
for a 500), rate or usage limit, overloaded
turn failed: stream disconnected, connection   ``network``, retryable
refused / reset, timed out
``Reconnecting... waiting for network``        ``network``, retryable; the process is stopped
                                               at once, not left to retry until the time limit
turn failed: anything else                     trial ``client-error``
``required MCP servers failed to initialize``  ``setup``, not retryable, with Codex's reason
                                               and the server's own stderr
``Error loading config``, unknown model        ``setup``, not retryable
provider (exit before any event)
``codex`` not found / not executable           ``client-app``, not retryable
killed by a signal, exit without a turn        ``client-app``, retryable
result, a stdout line that is not JSON
=============================================  =============================================
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
from mst.clients._codex_rollout import Rollout, codex_home
from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import HttpServer, StdioServer, VariantConfig
from mst.endings import COMPLETED, Ending, EndingException, Infrastructure, Trial, to_json
from mst.providers._errors import ending_for_status, stream_error_status
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
_BUSY_TEXT: Final = re.compile(r"high demand|rate limit|too many requests|usage limit|overloaded", re.IGNORECASE)
_NETWORK_TEXT: Final = re.compile(r"stream disconnected|error sending request|connection (refused|reset)|"
                                  r"timed out|dns error", re.IGNORECASE)
_NO_NETWORK: Final = re.compile(r"waiting for network", re.IGNORECASE)
_MCP_REQUIRED: Final = re.compile(r"required MCP servers failed to initialize: (.+?)(?: \(code -?\d+\))?$",
                                  re.MULTILINE)
_MCP_STDERR: Final = re.compile(r"MCP server stderr \(([^)]*)\): (.*)$", re.MULTILINE)
_CONFIG_ERROR: Final = re.compile(r"^(Error loading config.*|Error: Model provider .* not found)$", re.MULTILINE)
# Codex's log filter when the user has set none: its default (errors) plus the lines it logs for
# each line an MCP server writes to stderr, so a server that cannot start can say why.
_RUST_LOG: Final = "error,codex_rmcp_client::stdio_server_launcher=info"
_STDERR_KEEP: Final = 16_000
_REASON_CHARS: Final = 800
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
        default=None, gt=0, description="mcp_servers.<name>.startup_timeout_sec for every server (Codex's "
        "default is 10 s; a server not ready by then is a setup failure).",
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
        put(name, "required", True)  # waited for before the first request (module docstring)
        put(name, "default_tools_approval_mode", "approve")  # callable under approval policy `never`
        if settings.startupTimeoutSeconds is not None:
            put(name, "startup_timeout_sec", settings.startupTimeoutSeconds)
        if settings.toolTimeoutSeconds is not None:
            put(name, "tool_timeout_sec", settings.toolTimeoutSeconds)
    return args, env


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and value >= 0 else 0


def mcp_start_failure(stderr: str) -> Infrastructure | None:
    """The ending of a run that Codex refused to start because a (required) MCP server did not.

    The reason is Codex's (``<server>: <why>``), followed by what the server itself wrote to stderr
    (Codex logs it under ``_RUST_LOG``), which usually says the real cause.
    """
    m = _MCP_REQUIRED.search(stderr)
    if m is None:
        return None
    name, _, reason = m.group(1).strip().partition(": ")
    why = f"MCP server {name!r} did not start: {reason or name}"
    said = [f"{prog}: {line.strip()}" for prog, line in _MCP_STDERR.findall(stderr) if line.strip()]
    if said:
        why += "; the server's stderr: " + " | ".join(said[-5:])
    return Infrastructure("setup", why if len(why) <= _REASON_CHARS else why[:_REASON_CHARS] + "…", False)


def config_failure(stderr: str) -> Infrastructure | None:
    """The ending of a run Codex refused to start for its configuration (a bad ``-c`` value in
    ``extraArgs``, a ``model_provider`` its config does not define): the eval must change."""
    m = _CONFIG_ERROR.search(stderr)
    if m is None:
        return None
    return Infrastructure("setup", f"Codex refused its configuration: {stderr_reason(stderr[m.start():])}", False)


def stderr_reason(stderr: str) -> str:
    """Codex's stderr for a reason: its log lines and Rust's empty backtrace frames left out."""
    lines = [ln for ln in stderr.splitlines()
             if ln.strip() and not re.match(r"\s*\d+: <unknown>$|Stack backtrace:$|\S+Z +(INFO|WARN) ", ln)]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= _REASON_CHARS else "…" + text[-_REASON_CHARS:]


class CodexStream:
    """Turns ``codex exec --json`` events into canonical events as they arrive."""

    def __init__(self, rec: TranscriptRecorder, model: str, max_tool_calls: int | None, home: Path) -> None:
        self.rec = rec
        self.model = model
        self.max_tool_calls = max_tool_calls
        self.rollout = Rollout(home, self.model_response)
        self.started: dict[str, float] = {}
        self.tool_calls = 0
        self.turns = 0
        self.items_done = 0
        self.answer: str | None = None
        self.completed = False
        self.failure: str | None = None
        self.errors: list[str] = []
        self.thread_id: str | None = None
        self.turn_usage = {"inputTokens": 0, "outputTokens": 0}
        self.request_usage = {"inputTokens": 0, "outputTokens": 0}

    def __call__(self, obj: dict[str, Any]) -> Ending | None:
        kind = obj.get("type")
        if kind == "thread.started" and isinstance(obj.get("thread_id"), str):
            self.thread_id = obj["thread_id"]
            self.rollout.attach(obj["thread_id"])
        self.rollout.poll()  # the responses completed so far come before what follows them
        if kind in ("item.started", "item.completed"):
            item = obj.get("item")
            if isinstance(item, dict):
                return self._item(item, done=kind == "item.completed")
        elif kind == "turn.completed":
            usage = obj.get("usage") or {}
            self.turn_usage["inputTokens"] += _count(usage, "input_tokens")
            self.turn_usage["outputTokens"] += _count(usage, "output_tokens")
            self.turns += 1
            self.completed = True
        elif kind == "turn.failed":
            self.failure = str((obj.get("error") or {}).get("message") or "the turn failed")
        elif kind == "error":
            message = str(obj.get("message") or "")
            self.errors.append(message)
            if _NO_NETWORK.search(message):
                # Codex waits for the network without end: the provider cannot be reached now.
                return Infrastructure("network", f"Codex cannot reach the model provider: {message}", True)
        return None

    def model_response(self, usage: Mapping[str, Any]) -> None:
        """One completed model response, from Codex's session file: one ``model.request``."""
        inp, out = _count(usage, "input_tokens"), _count(usage, "output_tokens")
        self.request_usage["inputTokens"] += inp
        self.request_usage["outputTokens"] += out
        self.rec.emit(MODEL_REQUEST, {
            "model": self.model, "requestIndex": self.rollout.responses - 1, "inputTokens": inp,
            "outputTokens": out, "totalTokens": _count(usage, "total_tokens") or inp + out,
            "cachedInputTokens": _count(usage, "cached_input_tokens"),
            "reasoningOutputTokens": _count(usage, "reasoning_output_tokens"),
        })

    def usage(self) -> dict[str, int]:
        """The attempt's tokens: the per-response sum when Codex's session file was read, else the turn totals."""
        if self.rollout.responses:
            inp, out = self.request_usage["inputTokens"], self.request_usage["outputTokens"]
        elif self.turns:
            inp, out = self.turn_usage["inputTokens"], self.turn_usage["outputTokens"]
        else:
            return {}
        return {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out}

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
            self.errors.append(str(item.get("message") or ""))
        return None

    def _first_request(self) -> bool:
        """Whether no model response had completed: counted from Codex's session file, which also
        sees responses that left no item (a call Codex dropped); without it, from the items seen."""
        return self.rollout.responses == 0 if self.rollout.found else self.items_done == 0

    def _context(self, text: str) -> Ending:
        if self._first_request():
            return Infrastructure(
                "setup", f"the case's prompt does not fit the model's context on the first request: {text}", False)
        return Trial("context-limit", f"the context filled up mid-trial: {text}")

    def _classify(self, text: str) -> Ending:
        if _CONTEXT_TEXT.search(text):
            return self._context(text)
        m = _STATUS_TEXT.search(text)
        if m is not None:
            return ending_for_status("Codex", int(m.group(1) or m.group(2)), text)
        error = _json_error(text)
        if error is not None:
            return ending_for_status("Codex", stream_error_status(error), str(error.get("message") or text))
        if _BUSY_TEXT.search(text):
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
        refused = mcp_start_failure(run.stderr) or config_failure(run.stderr)
        if refused is not None:
            return refused, None
        if self.errors and run.returncode not in (0, None):
            return self._classify(self.errors[-1]), None
        reason = stderr_reason(run.stderr)
        tail = f"; its stderr ends with: {reason}" if reason else ""
        return Infrastructure(
            "client-app", f"codex exited with status {run.returncode} without a turn result{tail}", True), None


def _json_error(text: str) -> dict[str, Any] | None:
    """The ``error`` object of an OpenAI-style error body that Codex passed on as the whole message."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None


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

    def environment(self, secrets: Mapping[str, str], secret_env: Mapping[str, str]) -> dict[str, str]:
        env = {**os.environ, **self.settings.env, **secrets, **secret_env}
        env.setdefault("RUST_LOG", _RUST_LOG)
        return env

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        rec = request.transcript
        rec.emit(USER_MESSAGE, {"content": request.prompt})
        stream = CodexStream(rec, self.model, self.settings.maxToolCalls,
                             codex_home({**os.environ, **self.settings.env}))
        rollout = stream.rollout
        answer: str | None = None
        try:
            artifacts = request.artifacts_dir.absolute()  # the CLI runs there: relative paths would break
            artifacts.mkdir(parents=True, exist_ok=True)
            overrides, secret_env = mcp_overrides(self.variant.mcpServers, self.base_dir, request.secrets,
                                                  self.settings)
            run = await _cli.run_json_lines(
                self.argv(artifacts, overrides), cwd=artifacts, env=self.environment(request.secrets, secret_env),
                stdin=request.prompt.encode(), time_limit_s=self.settings.timeLimitSeconds, on_line=stream,
                secrets=request.secrets, name="codex", stderr_tail=_STDERR_KEEP,
            )
            rollout.close()  # the last responses' counts decide the first-request rule
            ending, answer = stream.ending(run)
        except EndingException as exc:
            ending = exc.ending
        finally:
            rollout.close()  # also when cancelled by mst's deadline (closing twice is a no-op)
        if request.secrets and ending is not COMPLETED:
            ending = _scrub(ending, request.secrets)
        usage = stream.usage()
        diagnostics: dict[str, Any] = {"turns": stream.turns, "modelRequests": rollout.responses if rollout.found
                                       else None, "toolCalls": stream.tool_calls, "threadId": stream.thread_id}
        if stream.errors:
            diagnostics["errors"] = [_cli.redact(e, request.secrets) for e in stream.errors[-5:]]
        rec.emit(SESSION_RESULT, {
            "answer": answer, "outcome": ending.outcome if isinstance(ending, Trial) else "infrastructure",
            "ending": to_json(ending), "usage": usage, "durationMs": int((time.monotonic() - started) * 1000),
            "turns": stream.turns,
        })
        return AttemptOutcome(ending, answer, usage, diagnostics)


def _scrub(ending: Ending, secrets: Mapping[str, str]) -> Ending:
    return Redactor.of(secrets).ending(ending)
