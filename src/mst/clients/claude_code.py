"""The ``claude-code`` client: Claude Code run headless, its stream turned into canonical events.

One attempt runs ``claude -p --output-format stream-json --verbose --include-partial-messages``
with the prompt on stdin, ``--mcp-config`` pointing at a JSON file (in the attempt's artifacts
directory) that holds the variant's MCP servers, ``--strict-mcp-config`` so only those servers
are used, ``--model`` and ``--max-turns`` from the variant, and ``--allowedTools mcp__<server>``
for each server so the servers' tools run without a permission prompt. The stream's format and
how it is read are in :mod:`mst.clients._claude_stream`.

The environment mst gives the CLI (Claude Code's "Environment variables" reference and its
changelog name every variable used):

- ``HOME`` and ``CLAUDE_CONFIG_DIR`` are a fresh temporary folder per attempt, so the CLI never
  reads the user's ``~/.claude.json``, ``~/.claude/settings.json``, memory or plugins, and leaves
  nothing behind (its session files and MCP logs go there). The stdio MCP servers keep the
  user's ``HOME`` (their caches: ``npx``, ``uvx``), unless the variant sets one, and so does
  npm's cache (``npm_config_cache``) for a ``command`` that runs the CLI through ``npx``.
- ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no telemetry, error reports, feedback prompts)
  and ``DISABLE_AUTOUPDATER=1``.
- The MCP servers are connected *before* the first model request: ``MCP_CONNECTION_NONBLOCKING=
  false``, ``CLAUDE_CODE_MCP_STARTUP_WAIT_MS`` and ``MCP_TIMEOUT`` (both ``mcpStartupSeconds``).
  Otherwise the CLI may connect them in the background: the init line says ``pending``, the
  model first sees only a ``WaitForMcpServers`` tool, a call made at once gets "still
  connecting", the wait costs a turn, and a server that fails a few seconds in goes unnoticed.
  A server that is not ``connected`` when the init line comes is a ``setup`` failure, with the
  reason from the CLI's MCP log.
- ``CLAUDE_CODE_MAX_RETRIES`` when ``providerRetries`` is set (the CLI's default is 10 retries,
  about three minutes of back-off). Each retry is recorded as a ``model.retry`` event.
- Then the variant's ``settings.env``, then the secrets (``ANTHROPIC_API_KEY``; ``${NAME}``
  references in the ``--mcp-config`` file are expanded by Claude Code from its environment, so
  secrets stay out of the file and out of argv).

Endings (docs/endings.md; the same table for users is in README, "Evaluate your MCP server"),
decided here:

==========================================================  =======================================
what happened                                               ending
==========================================================  =======================================
``result`` success (``terminal_reason: completed``)         trial ``completed``
``error_max_turns`` / ``error_max_budget_usd``              trial ``turn-limit`` (its own budget)
``timeLimitSeconds`` passed                                 trial ``time-limit``
``timeLimitSeconds`` passed while the CLI was retrying      that API failure (below), however long
a failed request (``system/api_retry``)                     it retried
prompt too long (``terminal_reason: prompt_too_long``)      ``setup``, not retryable
before any model response
the same after one                                          trial ``context-limit``
API error with HTTP status 408, 409, 429, 5xx, 529          ``provider-api``, retryable
(``api_error_status``, or the retry lines')
401, 403 (``authentication_failed``), ``billing_error``     ``setup``, not retryable
404, other 4xx                                              ``setup``, not retryable
API error without a status: refused, reset, timed out       ``network``, retryable
(``API Error: Connection refused … (ECONNREFUSED)``,
typed ``server_error``)
API error without a status otherwise (a malformed answer)   ``provider-api``, retryable
the model refused (``stop_reason: refusal``) or exceeded    trial ``client-error``
its output limit (``max_output_tokens``)
an MCP server of the variant not ``connected`` at init      ``setup``, not retryable (stopped at
(``failed``, or ``pending`` after ``mcpStartupSeconds``)    once; the reason from the MCP log)
other errors it reports in its result                       trial ``client-error``
binary missing                                              ``client-app``, not retryable
crash (signal, or exit without a result)                    ``client-app``, retryable
a line that is not JSON                                     ``client-app``, retryable
==========================================================  =======================================

Reading the API error's text (for a context overflow and a connection failure without a status)
is the one place this client reads text, and it is text from a program mst does not control.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from mst.agentcli import process as _cli
from mst.agentcli.claude_stream import ClaudeStream, private_environment, split_tool
from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import HttpServer, StdioServer, VariantConfig
from mst.endings import COMPLETED, Ending, EndingException, Infrastructure, Trial, to_json
from mst.session.events import SESSION_RESULT, USER_MESSAGE
from mst.session.redact import Redactor

__all__ = ["CONFIG_FILE", "NAME", "ClaudeCodeClient", "ClaudeCodeSettings", "mcp_config", "split_tool"]

NAME: Final = "claude-code"
CONFIG_FILE: Final = "claude-mcp-config.json"
_SAME_PYTHON: Final = frozenset({"python", "python3"})
_MCP_LOG_LINES: Final = 200
_MCP_REASON_CHARS: Final = 800
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
    mcpStartupSeconds: float = Field(
        default=30, gt=0, le=600,
        description="How long the CLI waits for the MCP servers to connect before the first model request "
                    "(MCP_TIMEOUT, CLAUDE_CODE_MCP_STARTUP_WAIT_MS); a server not connected by then is setup.",
    )
    providerRetries: int | None = Field(
        default=None, ge=0, le=100,
        description="How often the CLI retries a failed model request (CLAUDE_CODE_MAX_RETRIES); "
                    "default: the CLI's own (10, about three minutes of back-off).",
    )
    permissionMode: str | None = Field(default=None, description="--permission-mode, e.g. bypassPermissions.")
    appendSystemPrompt: str | None = Field(default=None, description="--append-system-prompt.")
    extraArgs: list[str] = Field(default_factory=list, description="More arguments, added last.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables (no secrets here: "
                                "secrets from --secrets-file are passed to the environment already).")


def mcp_config(
    servers: Mapping[str, StdioServer | HttpServer], base_dir: Path, secrets: Mapping[str, str],
    home: str | None = None,
) -> dict[str, Any]:
    """The ``--mcp-config`` document; ``${NAME}`` references stay unexpanded (Claude Code expands them).

    ``home`` is given to the stdio servers as ``HOME`` (unless the variant sets it): the CLI runs
    with a temporary one, the servers keep the user's (their package caches live there).
    """
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
                         "env": ({"HOME": home} if home else {}) | dict(cfg.env)}
        else:
            for key, value in cfg.headers.items():
                _cli.secret_refs(value, secrets, f"{where}.headers.{key}")
            out[name] = {"type": "http", "url": cfg.url, "headers": dict(cfg.headers)}
    return {"mcpServers": out}


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
                "--mcp-config", str(config_path), "--strict-mcp-config", "--include-partial-messages"]
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

    def environment(self, home: Path, secrets: Mapping[str, str]) -> dict[str, str]:
        """The CLI's environment: the user's, made private and quiet, waiting for the MCP servers."""
        s = self.settings
        wait_ms = str(int(s.mcpStartupSeconds * 1000))
        env = {**private_environment(home), "MCP_CONNECTION_NONBLOCKING": "false", "MCP_TIMEOUT": wait_ms,
               "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": wait_ms}
        if s.providerRetries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(s.providerRetries)
        return {**env, **s.env, **secrets}

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        rec = request.transcript
        rec.emit(USER_MESSAGE, {"content": request.prompt})
        answer: str | None = None
        with tempfile.TemporaryDirectory(prefix="mst-claude-") as tmp:
            home = Path(tmp)
            stream = ClaudeStream(rec, self.model, list(self.variant.mcpServers),
                                  mcp_reason=lambda name: mcp_log_reason(home, name),
                                  startup_s=self.settings.mcpStartupSeconds)
            try:
                artifacts = request.artifacts_dir.absolute()  # the CLI runs there: relative paths would break
                artifacts.mkdir(parents=True, exist_ok=True)
                config = mcp_config(self.variant.mcpServers, self.base_dir, request.secrets, os.environ.get("HOME"))
                config_path = artifacts / CONFIG_FILE
                config_path.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
                run = await _cli.run_json_lines(
                    self.argv(config_path), cwd=artifacts, env=self.environment(home, request.secrets),
                    stdin=request.prompt.encode(), time_limit_s=self.settings.timeLimitSeconds, on_line=stream,
                    secrets=request.secrets, name="claude",
                )
                ending, answer = stream.ending(run)
            except EndingException as exc:
                ending = exc.ending
        if request.secrets and ending is not COMPLETED:
            ending = _scrub(ending, request.secrets)
        return _finish(rec, ending, answer, stream.result, stream, started)


def mcp_log_reason(home: Path, server: str) -> str | None:
    """The errors Claude Code logged for MCP server ``server`` (the server's stderr, why the
    connection failed), from its per-server MCP log under ``$HOME/.cache/claude-cli-nodejs/``."""
    errors: list[str] = []
    for log in sorted(home.glob(f".cache/claude-cli-nodejs/*/mcp-logs-{server}/*.jsonl")):
        try:
            lines = log.read_text(errors="replace").splitlines()[-_MCP_LOG_LINES:]
        except OSError:
            continue
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            error = entry.get("error") if isinstance(entry, dict) else None
            if isinstance(error, str) and error.strip() and error.strip() not in errors:
                errors.append(error.strip())
    text = "; ".join(errors)
    return (text if len(text) <= _MCP_REASON_CHARS else text[:_MCP_REASON_CHARS] + "…") or None


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
