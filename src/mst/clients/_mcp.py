"""MCP session management for the agent client: start a variant's servers, list, call, stop.

Imported only when a variant has MCP servers, so the no-server path of the agent client never
pays for ``mcp``/``anyio`` (importing ``mcp`` alone costs over a second of CPU).

Endings decided here (docs/endings.md: at the point of failure):

- a server that cannot start, initialise or list its tools within ``startup_timeout_s``, or a
  server setting that names a secret the secrets file lacks → ``Infrastructure("setup", ...,
  retryable=False)``: the eval's setup must change, a retry cannot help. The ``why`` carries the
  tail of a stdio server's stderr (with secret values removed), because that is where the reason is.
- a tool call that fails once the trial is under way (an ``isError`` result, a protocol error,
  a timeout, a server that died) is *part of the trial*: :meth:`Toolbox.call` returns it as a
  failed :class:`ToolOutcome` for the loop to record and feed back to the model.

Servers are entered in one ``AsyncExitStack`` in the attempt's task and always leave through it,
including on cancellation (mst's deadline): the SDK's stdio transport closes stdin, waits, then
kills the server's whole process group inside a shielded scope, so no server outlives its attempt.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import orjson
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, Implementation, TextContent, Tool

from mst.config.models import HttpServer, McpServer, StdioServer
from mst.endings import EndingException, Infrastructure
from mst.providers.base import ToolSpec
from mst.session.redact import Redactor

_SECRET_REF: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDERR_TAIL_CHARS: Final = 1500
_CLIENT_INFO: Final = Implementation(name="mst", version="0.1")
# `command: python` means the interpreter mst runs under, so a server written with the `mcp` SDK
# finds the packages mst was installed with (a bare `python` on PATH may be another one).
_SAME_PYTHON: Final = frozenset({"python", "python3"})


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One tool call's result as the transcript records it and the model sees it."""

    success: bool
    text: str
    server: str | None


@dataclass(frozen=True, slots=True)
class _Route:
    server: str
    client: Client
    tool: str


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Remove every secret value from text that is about to reach an error message."""
    return Redactor.of(secrets).text(text)


def expand_secrets(value: str, secrets: Mapping[str, str], where: str) -> str:
    """Replace ``${NAME}`` with the secret ``NAME`` (server env values and HTTP headers only)."""
    if "${" not in value:
        return value

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in secrets:
            raise EndingException(Infrastructure(
                "setup", f"{where} refers to the secret ${{{name}}}, which the secrets file does not define",
                False))
        return secrets[name]

    return _SECRET_REF.sub(one, value)


def _describe(exc: BaseException) -> str:
    """A short reason from an exception, looking inside exception groups for the first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _stderr_tail(log: TextIO | None) -> str:
    if log is None:
        return ""
    try:
        log.flush()
        log.seek(0)
        text = log.read()
    except (OSError, ValueError):
        return ""
    text = text.strip()
    if not text:
        return ""
    if len(text) > _STDERR_TAIL_CHARS:
        text = "…" + text[-_STDERR_TAIL_CHARS:]
    return text


def tool_text(result: CallToolResult) -> str:
    """The text the model sees for a tool result: text blocks, else the structured content."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            kind = getattr(block, "type", "content")
            label = getattr(block, "uri", None) or getattr(block, "mime_type", None) or ""
            parts.append(f"[{kind}{': ' + str(label) if label else ''}]")
    if not parts and result.structured_content is not None:
        return orjson.dumps(result.structured_content).decode()
    return "\n".join(parts)


class Toolbox:
    """The tools of an attempt's MCP servers, under the names the model sees.

    A tool keeps its own name unless two servers list the same one; then each is exposed as
    ``<server>__<tool>``. The transcript always records the server's own tool name and the
    server's name (``mcpServerName``), so assertions match what the server calls it.
    """

    def __init__(self, listed: list[tuple[str, Client, Tool]]) -> None:
        counts: dict[str, int] = {}
        for _, _, tool in listed:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        self._routes: dict[str, _Route] = {}
        specs: list[ToolSpec] = []
        for server, client, tool in listed:
            exposed = tool.name if counts[tool.name] == 1 else f"{server}__{tool.name}"
            self._routes[exposed] = _Route(server, client, tool.name)
            specs.append(ToolSpec(exposed, tool.description or "", tool.input_schema))
        self.specs: tuple[ToolSpec, ...] = tuple(specs)

    def resolve(self, name: str) -> tuple[str | None, str]:
        """(server name, the server's own tool name) for the name the model used."""
        route = self._routes.get(name)
        return (None, name) if route is None else (route.server, route.tool)

    async def call(self, name: str, arguments: Mapping[str, Any], timeout_s: float | None) -> ToolOutcome:
        route = self._routes.get(name)
        if route is None:
            known = ", ".join(sorted(self._routes)) or "none"
            return ToolOutcome(False, f"unknown tool {name!r}; available tools: {known}", None)
        try:
            result = await route.client.call_tool(route.tool, dict(arguments), read_timeout_seconds=timeout_s)
        except Exception as exc:
            # Inside the trial, whatever went wrong with the call is the tool's failure, which the
            # model sees and the transcript records; it never ends the attempt.
            return ToolOutcome(False, f"tool call failed: {_describe(exc)}", route.server)
        return ToolOutcome(not result.is_error, tool_text(result), route.server)


def _setup_error(
    server: str, reason: str, log: TextIO | None, secrets: Mapping[str, str]
) -> EndingException:
    why = f"MCP server {server!r} did not start: {reason}"
    tail = _stderr_tail(log)
    if tail:
        why += f"; its stderr ends with:\n{tail}"
    return EndingException(Infrastructure("setup", redact(why, secrets), False))


def _stdio_params(
    name: str, cfg: StdioServer, base_dir: Path, secrets: Mapping[str, str]
) -> StdioServerParameters:
    command = sys.executable if cfg.command in _SAME_PYTHON else cfg.command
    cwd = base_dir if cfg.cwd is None else (base_dir / cfg.cwd)
    env = {k: expand_secrets(v, secrets, f"mcpServers.{name}.env.{k}") for k, v in cfg.env.items()}
    return StdioServerParameters(command=command, args=list(cfg.args), env=env or None, cwd=cwd)


async def _list_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(1000):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _enter(
    stack: AsyncExitStack, name: str, cfg: McpServer, base_dir: Path, secrets: Mapping[str, str],
    log: TextIO | None,
) -> Client:
    if isinstance(cfg, StdioServer):
        params = _stdio_params(name, cfg, base_dir, secrets)
        if not params.cwd or not Path(params.cwd).is_dir():
            reason = f"its working directory {str(params.cwd)!r} does not exist"
            raise _setup_error(name, reason, None, secrets)
        assert log is not None
        client = Client(stdio_client(params, errlog=log), client_info=_CLIENT_INFO)
    else:
        assert isinstance(cfg, HttpServer)
        headers = {
            k: expand_secrets(v, secrets, f"mcpServers.{name}.headers.{k}") for k, v in cfg.headers.items()
        }
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
        client = Client(streamable_http_client(cfg.url, http_client=http), client_info=_CLIENT_INFO)
    return await stack.enter_async_context(client)


@asynccontextmanager
async def open_servers(
    servers: Mapping[str, McpServer],
    *,
    base_dir: Path,
    secrets: Mapping[str, str],
    startup_timeout_s: float,
) -> AsyncIterator[Toolbox]:
    """Start every server, list its tools, yield the :class:`Toolbox`; stop them all on exit.

    Raises ``EndingException(setup)`` when a server cannot be started, initialised or listed.
    Errors while stopping servers are swallowed: the attempt's ending is already decided and
    the transports kill what does not stop on its own.
    """
    stack = AsyncExitStack()
    try:
        listed: list[tuple[str, Client, Tool]] = []
        for name, cfg in servers.items():
            log: TextIO | None = None
            if isinstance(cfg, StdioServer):
                # The server's stderr, kept for the setup error's reason; gone when the attempt ends.
                log = stack.enter_context(
                    tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
                )
            try:
                async with asyncio.timeout(startup_timeout_s):
                    client = await _enter(stack, name, cfg, base_dir, secrets, log)
                    tools = await _list_tools(client)
            except EndingException:
                raise
            except FileNotFoundError as exc:
                missing = exc.filename or (cfg.command if isinstance(cfg, StdioServer) else "")
                raise _setup_error(name, f"command {str(missing)!r} not found", log, secrets) from None
            except TimeoutError:
                reason = f"it did not initialise within {startup_timeout_s:g} s (startupTimeoutSeconds)"
                raise _setup_error(name, reason, log, secrets) from None
            except Exception as exc:
                raise _setup_error(name, _describe(exc), log, secrets) from None
            listed.extend((name, client, tool) for tool in tools)
        toolbox = Toolbox(listed)
    except BaseException:
        await _close(stack)
        raise
    try:
        yield toolbox
    finally:
        await _close(stack)


async def _close(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except Exception:
        pass
