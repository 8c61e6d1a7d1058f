"""Codex's ``codex exec --json`` events turned into canonical events, and the ending they mean.

Shared by the ``codex`` client and agentic judges (docs/grading.md, "Agentic judges"); the format
facts relied on and the table of endings are in the ``codex`` client's docstring
(:mod:`mst.clients.codex`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from mst.agentcli import process
from mst.agentcli.codex_rollout import Rollout
from mst.endings import COMPLETED, Ending, Infrastructure, Trial
from mst.providers._errors import ending_for_status, stream_error_status
from mst.session.events import ASSISTANT_MESSAGE, MODEL_REQUEST, TOOL_COMPLETE, TOOL_START
from mst.session.recorder import TranscriptRecorder

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
_REASON_CHARS: Final = 800
# Codex's log filter when the user has set none: its default (errors) plus the lines it logs for
# each line an MCP server writes to stderr, so a server that cannot start can say why.
RUST_LOG: Final = "error,codex_rmcp_client::stdio_server_launcher=info"


def codex_environment(*layers: Mapping[str, str]) -> dict[str, str]:
    """Codex's environment: ``layers`` merged (later ones win), with mst's log filter unless one is set."""
    env: dict[str, str] = {}
    for layer in layers:
        env.update(layer)
    env.setdefault("RUST_LOG", RUST_LOG)
    return env


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
                text = process.tool_text(result.get("content")) if result.get("content") else (
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

    def ending(self, run: process.RunResult) -> tuple[Ending, str | None]:
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
