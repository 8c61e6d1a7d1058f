"""What the CLI agent clients (``claude-code``, ``codex``) share: run a JSON-lines program, safely.

A CLI agent is started in its own session (process group) with the prompt on stdin and secrets in
its environment only. Its stdout is read line by line as it comes, each line a JSON object handed
to the client's converter, which may end the attempt early (an MCP server that failed to start,
a budget mst enforces). Whatever happens — the client's time budget, mst's deadline cancelling the
task, an unreadable line — the whole process group is terminated, then killed, so nothing the CLI
started (its MCP servers included) outlives the attempt.

Endings decided here, at the point of failure (docs/endings.md):

- the binary does not exist or is not executable → ``client-app``, not retryable (install it).
- a stdout line that is not a JSON object → ``client-app``, retryable (output mst cannot read).
- the program is killed by a signal → ``client-app``, retryable (a crash).
- ``timeLimitSeconds`` passes → trial ``time-limit``.

The exit status and the stream's own result are for the client to judge (:class:`RunResult`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mst.endings import Ending, EndingException, Infrastructure, Trial
from mst.session.redact import Redactor

SECRET_REF: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LINE_LIMIT: Final = 64 * 1024 * 1024
_KILL_GRACE_S: Final = 2.0
_STDERR_TAIL: Final = 800


def redact(text: str, secrets: Mapping[str, str]) -> str:
    return Redactor.of(secrets).text(text)


def secret_refs(value: str, secrets: Mapping[str, str], where: str) -> list[str]:
    """The secret names ``value`` refers to (``${NAME}``); a name the secrets lack is a setup failure."""
    names = SECRET_REF.findall(value)
    for name in names:
        if name not in secrets:
            raise EndingException(Infrastructure(
                "setup", f"{where} refers to the secret ${{{name}}}, which the secrets file does not define", False))
    return names


def expand(value: str, secrets: Mapping[str, str], where: str) -> str:
    secret_refs(value, secrets, where)
    return SECRET_REF.sub(lambda m: secrets[m.group(1)], value)


def tool_text(content: Any) -> str:
    """MCP-style content (a string, or a list of ``{type: text, text}`` blocks) as the text the model saw."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'content')}]")
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return "" if content is None else orjson.dumps(content).decode()


LineHandler = Callable[[dict[str, Any]], Ending | None]


@dataclass
class RunResult:
    """How the program ended, for the client to turn into its ending."""

    ending: Ending | None  # decided here or by the line handler; None: judge from the stream
    returncode: int | None
    stderr: str


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def stop(proc: asyncio.subprocess.Process) -> None:
    """Terminate the process group, give it a moment, then kill whatever is left of it."""
    _kill_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
    _kill_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()


def _tail(log: Any, secrets: Mapping[str, str], limit: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        log.seek(0)
        text = log.read().decode("utf-8", errors="replace").strip()
        text = text if len(text) <= limit else "…" + text[-limit:]
        return redact(text, secrets)
    return ""


async def run_json_lines(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], stdin: bytes, time_limit_s: float | None,
    on_line: LineHandler, secrets: Mapping[str, str], name: str, stderr_tail: int = _STDERR_TAIL,
) -> RunResult:
    """Run ``argv``, feed each stdout JSON line to ``on_line``, and stop the process group at the end.

    ``stderr_tail``: how many of the last stderr characters :attr:`RunResult.stderr` keeps (a
    client that reads its CLI's diagnostics there asks for more than a one-line reason needs).
    """
    with tempfile.TemporaryFile() as errlog:  # a file, not a pipe: a chatty stderr can never block it
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=dict(env), start_new_session=True, limit=_LINE_LIMIT,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=errlog,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            what = "was not found" if isinstance(exc, FileNotFoundError) else "is not executable"
            if isinstance(exc, FileNotFoundError) and not cwd.is_dir():
                what = f"could not start: its working directory {str(cwd)!r} does not exist"
            why = f"{name}: {argv[0]!r} {what} (install it, or set `command` in the variant's settings)"
            return RunResult(Infrastructure("client-app", why, False), None, "")
        try:
            ending = await _drive(proc, stdin, time_limit_s, on_line, name)
        except BaseException:
            # Cancelled (mst's deadline) or failed while reading: nothing it started may survive.
            await asyncio.shield(stop(proc))
            raise
        if ending is not None:
            await stop(proc)
        else:
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            # Whatever it left running in its session (an MCP server it started) goes with it.
            _kill_group(proc.pid, signal.SIGKILL)
        code = proc.returncode
        tail = _tail(errlog, secrets, stderr_tail)
    if ending is None and code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        why = f"{name} was killed by {sig}" + (f"; its stderr ends with: {tail}" if tail else "")
        ending = Infrastructure("client-app", why, True)
    return RunResult(ending, code, tail)


async def _drive(
    proc: asyncio.subprocess.Process, stdin: bytes, time_limit_s: float | None, on_line: LineHandler, name: str
) -> Ending | None:
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
            proc.stdin.close()

    async def read() -> Ending | None:
        await feed()
        while True:
            try:
                raw = await stdout.readline()
            except ValueError:
                return Infrastructure("client-app", f"{name} wrote a line longer than {_LINE_LIMIT} bytes", True)
            if not raw:
                return None
            line = raw.strip()
            if not line:
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict):
                shown = line[:120].decode("utf-8", errors="replace")
                return Infrastructure("client-app", f"{name} printed output mst cannot read: {shown!r}", True)
            decided = on_line(obj)
            if decided is not None:
                return decided

    if time_limit_s is None:
        return await read()
    try:
        async with asyncio.timeout(time_limit_s) as scope:
            return await read()
    except TimeoutError:
        if not scope.expired():
            raise
        return Trial("time-limit", f"{name} ran past its time budget of {time_limit_s:g} s (timeLimitSeconds)")
