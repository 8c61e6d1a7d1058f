"""MCP server sessions for the agent client: start a server, list its tools, call them, stop it.

Imported only when a variant has MCP servers, so the no-server path of the agent client never
pays for ``mcp``/``anyio`` (importing ``mcp`` alone costs over a second of CPU).

**Each server lives in a task of its own** (:class:`ServerInstance`), never in the attempt's
task. The SDK's transports run their I/O in anyio task groups, and a transport that fails (an
HTTP server that died mid-call) cancels the task that entered it. Entered in the attempt's task,
that cancellation escaped the attempt as ``CancelledError`` and took the whole run down; entered
in its own task, it ends only that server, and the calls in flight fail as tool errors inside
the trial. It also lets a server outlive one attempt (``lifetime: variant``), start before its
attempt (pre-started spares) and close after it, in the background, bounded
(:data:`CLOSE_BOUND_S`), without counting against the attempt's deadline
(see :mod:`mst.clients._mcp_pool`).

Endings decided here (at the point of failure, docs/endings.md; the start-failure rule is in
docs/mcp-servers.md):

- a server that cannot start, initialise or list its tools, or names a secret the secrets file
  lacks → ``setup``, not retryable: the eval's setup must change. The ``why`` carries the tail
  of a stdio server's stderr (with secret values removed), because that is where the reason is.
- an HTTP server that cannot be reached at start (connection refused or reset, a connect or
  read timeout, no answer within ``startupTimeoutSeconds``) → ``network``, retryable: it may be
  back up when ``mst run --resume`` tries again.
- a tool call that fails once the trial is under way (an ``isError`` result, a protocol error,
  a timeout, a server that died) is *part of the trial*: :meth:`Toolbox.call` returns it as a
  failed :class:`ToolOutcome` for the loop to record and feed back to the model.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client._transport import ReadStream, Transport, TransportStreams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import SessionMessage
from mcp_types import CallToolResult, Implementation, Tool

from mst.clients._mcp_content import convert
from mst.config.models import HttpServer, McpServer, StdioServer
from mst.endings import EndingException, Infrastructure, from_exception
from mst.providers.base import ImageData, ToolSpec
from mst.session.redact import Redactor

_SECRET_REF: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDERR_TAIL_CHARS: Final = 1500
_CLIENT_INFO: Final = Implementation(name="mst", version="0.1")
# `command: python` means the interpreter mst runs under, so a server written with the `mcp` SDK
# finds the packages mst was installed with (a bare `python` on PATH may be another one).
_SAME_PYTHON: Final = frozenset({"python", "python3"})
# Bound on stopping one server. The SDK's stdio transport closes stdin, waits 2 s, then SIGTERMs
# the server's process group (it starts each server in a session of its own) and SIGKILLs it
# 2 s later; past this bound the instance's task is cancelled outright.
CLOSE_BOUND_S: Final = 10.0
TASK_ONLY_REASON: Final = (
    "its execution.taskSupport is 'required' and mst's MCP client does not run MCP tasks"
)

_instance_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One tool call's result as the transcript records it and the model sees it.

    ``rejected`` means mst refused the call without sending it to any server (an unknown tool, a
    tool mst does not offer); grading counts only calls that reached a server.
    """

    success: bool
    text: str
    server: str | None
    rejected: bool = False
    images: tuple[ImageData, ...] = ()
    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None


class ServerGone(Exception):
    """The server's connection ended (it died, or it was stopped) before the call finished."""


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


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """A short reason from an exception, looking inside exception groups for the first leaf."""
    exc = _leaves(exc)[0]
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _unreachable(exc: BaseException) -> bool:
    """Whether an HTTP server's start failed in transport (refused, reset, timed out): retryable."""
    for leaf in _leaves(exc):
        ending = from_exception(leaf)
        if isinstance(ending, Infrastructure) and ending.what == "network":
            return True
    return False


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
    if len(text) > _STDERR_TAIL_CHARS:
        text = "…" + text[-_STDERR_TAIL_CHARS:]
    return text


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


class ServerInstance:
    """One running MCP server (a stdio process, or a session with an HTTP server), held by its own task.

    ``instance_id`` names it in transcripts (``mcp.server`` events), so a run shows which attempts
    shared a server. ``served`` counts the attempts that used it.
    """

    def __init__(
        self, name: str, cfg: McpServer, *, base_dir: Path, secrets: Mapping[str, str], startup_timeout_s: float
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.instance_id = f"{name}#{next(_instance_ids)}"
        self.secrets = dict(secrets)
        self.base_dir = base_dir
        self.startup_timeout_s = startup_timeout_s
        self.tools: list[Tool] = []
        self.served = 0
        self.startup_ms = 0
        self.tainted = False  # a call was abandoned mid-way: the server's state is unknown, never reuse it
        self.failure: str | None = None
        self._client: Client | None = None
        self._log: TextIO | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._ended = False

    @property
    def transport(self) -> str:
        return "stdio" if isinstance(self.cfg, StdioServer) else "http"

    @property
    def alive(self) -> bool:
        """Running and connected: a stdio server that exited, or an HTTP stream that ended, is not."""
        return self._client is not None and not self._ended and self._task is not None and not self._task.done()

    def _connection_ended(self) -> None:
        self._ended = True
        self.failure = self.failure or "its connection ended"

    async def start(self) -> None:
        """Start and initialise the server and list its tools; raise ``EndingException`` if it cannot.

        A failed or cancelled start leaves the instance to :meth:`aclose`, like any other.
        """
        t0 = time.monotonic()
        self._task = asyncio.create_task(self._host(), name=f"mcp-server {self.instance_id}")
        try:
            async with asyncio.timeout(self.startup_timeout_s):
                await asyncio.shield(self._ready)
        except TimeoutError:
            reason = f"it did not initialise within {self.startup_timeout_s:g} s (startupTimeoutSeconds)"
            raise self._start_error(reason, retryable=isinstance(self.cfg, HttpServer)) from None
        except Exception as exc:
            leaf = _leaves(exc)[0]
            if isinstance(leaf, EndingException):
                raise leaf from None
            if isinstance(leaf, FileNotFoundError):
                missing = leaf.filename or (self.cfg.command if isinstance(self.cfg, StdioServer) else "")
                raise self._start_error(f"command {str(missing)!r} not found") from None
            retryable = isinstance(self.cfg, HttpServer) and _unreachable(exc)
            raise self._start_error(_describe(exc), retryable=retryable) from None
        self.startup_ms = int((time.monotonic() - t0) * 1000)

    def _start_error(self, reason: str, *, retryable: bool = False) -> EndingException:
        if retryable:
            assert isinstance(self.cfg, HttpServer)
            why = f"MCP server {self.name!r} at {self.cfg.url} could not be reached: {reason}"
            return EndingException(Infrastructure("network", redact(why, self.secrets), True))
        why = f"MCP server {self.name!r} did not start: {reason}"
        tail = _stderr_tail(self._log)
        if tail:
            why += f"; its stderr ends with:\n{tail}"
        return EndingException(Infrastructure("setup", redact(why, self.secrets), False))

    async def _host(self) -> None:
        """The instance's task: enter the transport and the session, wait to be stopped, leave them."""
        try:
            async with AsyncExitStack() as stack:
                client = await self._enter(stack)
                self.tools = await _list_tools(client)
                self._client = client
                self._ready.set_result(None)
                await self._stop.wait()
                self._client = None
        except Exception as exc:
            # The transport failed (the server died, an HTTP session broke): this instance is over.
            self.failure = _describe(exc)
            if not self._ready.done():
                self._ready.set_exception(exc)
                self._ready.exception()
        finally:
            self._client = None
            if not self._ready.done():
                self._ready.set_exception(ServerGone("stopped before it was ready"))
                self._ready.exception()  # retrieved: a start nobody awaits any more must not warn

    async def _enter(self, stack: AsyncExitStack) -> Client:
        cfg, secrets = self.cfg, self.secrets
        if isinstance(cfg, StdioServer):
            params = _stdio_params(self.name, cfg, self.base_dir, secrets)
            if not params.cwd or not Path(params.cwd).is_dir():
                raise self._start_error(f"its working directory {str(params.cwd)!r} does not exist")
            # The server's stderr, kept for a start failure's reason (and a death's); gone with the instance.
            self._log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            client = Client(_watched(stdio_client(params, errlog=self._log), self._connection_ended),
                            client_info=_CLIENT_INFO)
        else:
            assert isinstance(cfg, HttpServer)
            headers = {
                k: expand_secrets(v, secrets, f"mcpServers.{self.name}.headers.{k}") for k, v in cfg.headers.items()
            }
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
            client = Client(_watched(streamable_http_client(cfg.url, http_client=http), self._connection_ended),
                            client_info=_CLIENT_INFO)
        return await stack.enter_async_context(client)

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float | None, progress: ProgressFnT | None
    ) -> CallToolResult:
        """Call a tool; raise :class:`ServerGone` when the server's connection ends first."""
        client, host = self._client, self._task
        if client is None or host is None or not self.alive:
            raise ServerGone(self._gone_reason())
        call = asyncio.ensure_future(
            client.call_tool(tool, arguments, read_timeout_seconds=timeout_s, progress_callback=progress))
        try:
            done, _ = await asyncio.wait((call, host), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                self.tainted = True
                call.cancel()
        if call in done:
            if call.exception() is not None:
                self.tainted = True  # timed out or broke mid-way: the server may still be at it
                if self._ended:  # the server went away under the call: say so, with its stderr
                    raise ServerGone(self._gone_reason())
            return call.result()
        raise ServerGone(self._gone_reason())

    def _gone_reason(self) -> str:
        why = f"the MCP server {self.name!r} is no longer running"
        if self.failure:
            why += f" ({self.failure})"
        tail = _stderr_tail(self._log) if self._log is not None and not self._log.closed else ""
        if tail:
            why += f"; its stderr ends with:\n{tail}"
        return redact(why, self.secrets)

    async def aclose(self) -> None:
        """Stop the server, bounded: ask the task to leave its session (the SDK's transport then
        stops the process), cancel it if it is still starting or overstays :data:`CLOSE_BOUND_S`,
        kill whatever the server left running, and release the stderr log. Never raises."""
        self._stop.set()
        task = self._task
        try:
            if task is not None:
                if not self._ready.done():
                    task.cancel()  # still starting: there is no session to leave politely
                try:
                    await asyncio.wait_for(asyncio.shield(task), CLOSE_BOUND_S)
                except TimeoutError:
                    task.cancel()
                    await asyncio.wait({task}, timeout=CLOSE_BOUND_S)
                except BaseException:
                    if not task.done():
                        raise  # this close itself was cancelled
                    # else: the task's own end (it recorded why already)
        finally:
            if self._log is not None:
                _kill_holders(self._log)
                self._log.close()


def _kill_holders(log: TextIO) -> None:
    """SIGKILL every process still writing its stderr to ``log``: what a stdio server left behind.

    The SDK's transport kills the server's process group only when the server itself outlives
    its 2 s grace; a server that exits at once on the end of its stdin leaves its children (a
    wrapper's worker, a background helper) running. They inherited the server's stderr, which is
    this instance's own unlinked temporary file, so matching that file's inode in
    ``/proc/*/fd/2`` finds exactly them — whatever group or session they moved to — and nothing
    else. Linux only (elsewhere there is no ``/proc`` and this does nothing).
    """
    try:
        own = os.fstat(log.fileno())
        entries = os.listdir("/proc")
    except (OSError, ValueError):
        return
    me = str(os.getpid())
    for entry in entries:
        if not entry.isdigit() or entry == me:
            continue
        try:
            fd2 = os.stat(f"/proc/{entry}/fd/2")
            if (fd2.st_dev, fd2.st_ino) == (own.st_dev, own.st_ino):
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            continue  # gone meanwhile, or not ours to look at


class _WatchedRead:
    """A transport's read stream that reports its end: how mst learns, without a round trip, that a
    server is gone (a stdio server's stdout closed, an HTTP session's stream ended)."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(transport: Transport, on_end: Callable[[], None]) -> AsyncIterator[TransportStreams]:
    async with transport as (read, write):
        yield _WatchedRead(read, on_end), write


@dataclass(frozen=True, slots=True)
class _Route:
    instance: ServerInstance
    tool: str


def offered(tool: Tool) -> bool:
    """Whether the model is offered the tool: not if it can only run as an MCP task (unsupported)."""
    execution = tool.execution
    return execution is None or execution.task_support != "required"


class Toolbox:
    """The tools of an attempt's MCP servers, under the names the model sees.

    A tool keeps its own name unless two servers list the same one; then each is exposed as
    ``<server>__<tool>``. The transcript always records the server's own tool name and the
    server's name (``mcpServerName``), so assertions match what the server calls it.
    """

    def __init__(self, instances: list[ServerInstance]) -> None:
        listed = [(inst, tool) for inst in instances for tool in inst.tools if offered(tool)]
        self.withheld: dict[str, list[str]] = {
            inst.name: names for inst in instances if (names := [t.name for t in inst.tools if not offered(t)])
        }
        counts: dict[str, int] = {}
        for _, tool in listed:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        self._routes: dict[str, _Route] = {}
        specs: list[ToolSpec] = []
        for inst, tool in listed:
            exposed = tool.name if counts[tool.name] == 1 else f"{inst.name}__{tool.name}"
            self._routes[exposed] = _Route(inst, tool.name)
            specs.append(ToolSpec(exposed, tool.description or "", tool.input_schema))
        self.specs: tuple[ToolSpec, ...] = tuple(specs)

    def resolve(self, name: str) -> tuple[str | None, str, bool]:
        """(server name, the server's own tool name, whether mst sends the call) for the model's name."""
        route = self._routes.get(name)
        if route is not None:
            return route.instance.name, route.tool, True
        server = next((server for server, names in self.withheld.items() if name in names), None)
        return server, name, False

    def _refuse(self, name: str) -> ToolOutcome:
        for server, names in self.withheld.items():
            if name in names:
                return ToolOutcome(False, f"tool {name!r} of server {server!r} is not offered: {TASK_ONLY_REASON}",
                                   server, rejected=True)
        known = ", ".join(sorted(self._routes)) or "none"
        return ToolOutcome(False, f"unknown tool {name!r}; available tools: {known}", None, rejected=True)

    async def call(
        self, name: str, arguments: Mapping[str, Any], timeout_s: float | None, progress: ProgressFnT | None = None
    ) -> ToolOutcome:
        route = self._routes.get(name)
        if route is None:
            return self._refuse(name)
        server = route.instance.name
        try:
            result = await route.instance.call(route.tool, dict(arguments), timeout_s, progress)
        except Exception as exc:
            # Inside the trial, whatever went wrong with the call is the tool's failure, which the
            # model sees and the transcript records; it never ends the attempt.
            reason = str(exc) if isinstance(exc, ServerGone) else _describe(exc)
            return ToolOutcome(False, f"tool call failed: {reason}", server)
        got = convert(result)
        return ToolOutcome(not result.is_error, got.text, server, images=got.images, content=got.content,
                           structured=got.structured)
