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

from mst.agentcli import process as _cli
from mst.agentcli.codex_rollout import codex_home
from mst.agentcli.codex_stream import CodexStream, codex_environment
from mst.clients.base import AttemptOutcome, AttemptRequest
from mst.config.models import HttpServer, StdioServer, VariantConfig
from mst.endings import COMPLETED, Ending, EndingException, Infrastructure, Trial, to_json
from mst.session.events import (
    SESSION_RESULT,
    USER_MESSAGE,
)
from mst.session.redact import Redactor

NAME: Final = "codex"
_SAME_PYTHON: Final = frozenset({"python", "python3"})
_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")
_STDERR_KEEP: Final = 16_000
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
        return codex_environment(os.environ, self.settings.env, secrets, secret_env)

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
