"""Shared read-only indexes over one unified session (seed 002 §2, ``createSessionLookups``).

Every grader needs the same few derived facts: which events of a type exist, which tool calls
the agent made and how they ended, and how many model requests and tokens the agent used.
Deriving them once, in one linear pass, is what keeps the ten defaults under the benchmark
bound on a million-event session; deriving them in one place is what keeps graders consistent
(two graders can never disagree about what "a tool call" is).

Decisions, each documented where it is made:

* **Main agent** means provenance phase ``agent`` (or no phase at all: a file written by a tool
  that records a single agent has nothing else in it). Every other phase (``judge``,
  ``detection``, ``eval``, ``grading``, ...) is mst's or the workflow's own work and is excluded
  from agent statistics, so a judge's tokens never inflate the agent's cost.
* **Nested agents** (events carrying ``agentId``) belong to the main agent's work, but tool-call
  ids are only unique within one agent, so correlation is scoped by ``agentId``.
* **Native tool events beat gateway evidence.** An MCP gateway may log the very call the client
  reported natively; counting both would double every call. Gateway records are dropped when a
  native call with the same normalised name and equal arguments accounts for them.
* **Per-request proxy telemetry beats aggregate usage** (``firewall.token_usage`` over
  ``model.request`` over ``usage.report`` / ``session.result.usage``): each source describes the
  same requests, so only the most granular one present is used, never a sum of several.
* Nothing here reads files, clocks or the environment, and the session is never mutated:
  lookups hold positions into the session and small immutable records.
"""

from __future__ import annotations

import gc
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import orjson

from mst.session.events import MODEL_REQUEST, PHASE_AGENT, SESSION_RESULT, TOOL_COMPLETE, TOOL_START

FIREWALL_TOKEN_USAGE: Final = "firewall.token_usage"
USAGE_REPORT: Final = "usage.report"
EXECUTION_RESULT: Final = "execution.result"
MCP_TOOL_CALL: Final = "mcp.tool_call"
MCP_RPC_REQUEST: Final = "mcp.rpc.request"
MCP_RPC_RESPONSE: Final = "mcp.rpc.response"
SAFE_OUTPUT_RESULT: Final = "safe_output.result"

SOURCE_NATIVE: Final = "native"
SOURCE_GATEWAY_CALL: Final = MCP_TOOL_CALL
SOURCE_GATEWAY_RPC: Final = "mcp.rpc"

_FAILED_STATUSES: Final = frozenset({"error", "failure", "failed", "cancelled", "canceled", "timeout"})
_TOKEN_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "input": ("inputTokens", "input_tokens", "promptTokens", "prompt_tokens"),
    "output": ("outputTokens", "output_tokens", "completionTokens", "completion_tokens"),
    "total": ("totalTokens", "total_tokens"),
    "cache_read": (
        "cacheReadTokens",
        "cache_read_tokens",
        "cacheReadInputTokens",
        "cache_read_input_tokens",
        "cachedInputTokens",
        "cached_input_tokens",
    ),
    "cache_write": (
        "cacheWriteTokens",
        "cache_write_tokens",
        "cacheCreationInputTokens",
        "cache_creation_input_tokens",
        "cacheCreationTokens",
        "cache_creation_tokens",
    ),
    "requests": ("requests", "requestCount", "request_count", "numRequests", "num_requests"),
}
_ALIAS_FIELD: Final = {
    alias: (name, rank) for name, aliases in _TOKEN_ALIASES.items() for rank, alias in enumerate(aliases)
}


# ---------------------------------------------------------------------------------------------
# Records


class ToolCall(NamedTuple):
    """One main-agent tool call, correlated from its start and completion evidence.

    ``finished`` is False when no completion was seen; such a call also has ``success`` False,
    because an attempt that never reported a result did not succeed (seed 002 §2). Records are
    named tuples rather than frozen dataclasses: a million-event session has hundreds of
    thousands of them and a tuple is several times cheaper to build.
    """

    position: int
    name: str
    arguments: Any
    args_key: str
    agent_id: str | None
    call_id: str | None
    finished: bool
    success: bool
    duration_ms: float | None
    source: str
    start: int | None
    end: int | None


class TokenUsage(NamedTuple):
    """Token counts as recorded; a field is None when the evidence did not carry it."""

    input: int | None = None
    output: int | None = None
    total: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    requests: int | None = None

    @property
    def tokens(self) -> int | None:
        """Total tokens: the recorded total, else input + output when both were recorded."""
        if self.total is not None:
            return self.total
        if self.input is not None and self.output is not None:
            return self.input + self.output
        return None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.input, self.output, self.total, self.requests))


class ModelRequest(NamedTuple):
    """One observed model request of the main agent (from a per-request record)."""

    position: int
    usage: TokenUsage
    duration_ms: float | None
    model: str | None


@dataclass(frozen=True, slots=True)
class ExecutionStats:
    """Concrete main-agent execution statistics; None means "not observed", never zero."""

    requests: tuple[ModelRequest, ...]
    request_source: str | None
    aggregate: TokenUsage | None
    aggregate_source: str | None
    duration_ms: float | None
    duration_source: str | None

    @property
    def request_count(self) -> int | None:
        """Per-request records when present; else a request count an aggregate report gave."""
        if self.requests:
            return len(self.requests)
        return self.aggregate.requests if self.aggregate is not None else None


@dataclass(frozen=True, slots=True)
class SessionLookups:
    """Everything graders share, computed once per session (read-only).

    ``by_type`` maps an event type to the ascending positions of its events in the session.
    ``completed`` is True when the main agent left a completion record (``session.result`` or
    ``execution.result``): the event stream is then known to be whole, so the absence of a kind
    of event is an observation rather than a gap.
    """

    size: int
    by_type: Mapping[str, tuple[int, ...]]
    tool_calls: tuple[ToolCall, ...]
    gateway_duplicates: int
    execution: ExecutionStats
    completed: bool

    def positions(self, event_type: str) -> tuple[int, ...]:
        return self.by_type.get(event_type, ())


_NO_USAGE: Final = TokenUsage()


# ---------------------------------------------------------------------------------------------
# Small helpers (pure)


def is_main_agent(event: Mapping[str, Any]) -> bool:
    """Provenance phase ``agent`` or no phase (see the module docstring for why)."""
    prov = event.get("provenance")
    if not isinstance(prov, dict):
        return True
    phase = prov.get("phase")
    return phase is None or phase == "" or phase == PHASE_AGENT


def event_data(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def canonical_key(value: Any) -> str:
    """A stable text key for argument equality: key order never makes two calls differ."""
    if value.__class__ is dict:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            return repr(value)
    if isinstance(value, str) and value[:1] in ("{", "["):
        text: str = value
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def normalise_tool_name(name: str, server: str | None) -> str:
    """One spelling for MCP tools: ``server__tool``.

    ``mcp__server__tool`` and ``server__tool`` are unambiguous and map to ``server__tool``; a
    hyphenated ``server-tool`` is only recognised when the server is known (tool and server names
    may themselves contain hyphens), otherwise the name is kept as written and gateway matching
    tries that spelling too (see :func:`_gateway_candidates`).
    """
    if name.startswith("mcp__"):
        srv, sep, tool = name[5:].partition("__")
        if sep and srv and tool:
            return f"{srv}__{tool}"
    if server:
        for prefix in (f"{server}__", f"{server}-"):
            if name.startswith(prefix) and len(name) > len(prefix):
                name = name[len(prefix) :]
                break
        return f"{server}__{name}"
    return name


def _first(data: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = data.get(key)
        if value is not None:
            return value
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    """A token count: a non-negative integer (an integral float is accepted, bools are not)."""
    if value.__class__ is int:
        return value if value >= 0 else None  # type: ignore[no-any-return]
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def _millis(value: Any) -> float | None:
    if value.__class__ is int:
        return float(value) if value >= 0 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _usage_fields(src: Mapping[str, Any], found: dict[str, tuple[int, int]]) -> None:
    """Fill ``found[field] = (alias rank, value)``; the earliest alias in the table wins."""
    for key, raw in src.items():
        alias = _ALIAS_FIELD.get(key) if key.__class__ is str else None
        if alias is None:
            continue
        value = _count(raw)
        if value is None:
            continue
        name, rank = alias
        if name not in found or found[name][0] > rank:
            found[name] = (rank, value)


def parse_usage(data: Mapping[str, Any]) -> TokenUsage:
    """Token usage in camelCase or snake_case, directly in ``data`` or, for fields ``data``
    lacks, in ``data.usage``. Iterates the record's own (few) keys instead of trying every
    alias, which matters at one record per model request."""
    found: dict[str, tuple[int, int]] = {}
    _usage_fields(data, found)
    nested = data.get("usage")
    if nested.__class__ is dict:
        inner: dict[str, tuple[int, int]] = {}
        _usage_fields(nested, inner)
        for name, item in inner.items():
            found.setdefault(name, item)
    if not found:
        return _NO_USAGE
    return TokenUsage._make([found[f][1] if f in found else None for f in TokenUsage._fields])


def _duration(data: Mapping[str, Any]) -> float | None:
    value = data.get("durationMs")
    return _millis(value if value is not None else data.get("duration_ms"))


def _failed(data: Mapping[str, Any]) -> bool:
    """Explicit failure evidence only: a completion is a success unless it says otherwise."""
    success = data.get("success")
    if success is True or success is False:
        return not success
    if data.get("isError") is True:
        return True
    error = data.get("error")
    if error is not None and error is not False and error != "":
        return True
    status = data.get("status")
    return isinstance(status, str) and status.lower() in _FAILED_STATUSES


def _timestamp(event: Mapping[str, Any]) -> float | None:
    prov = event.get("provenance")
    return _millis(prov.get("timestampMs")) if isinstance(prov, dict) else None


# ---------------------------------------------------------------------------------------------
# Tool-call correlation


class _Slot:
    """A call under construction (mutable only inside :func:`create_session_lookups`)."""

    __slots__ = (
        "agent_id",
        "arguments",
        "began",
        "call_id",
        "done",
        "duration_ms",
        "end",
        "name",
        "position",
        "server",
        "source",
        "start",
        "success",
    )

    def __init__(
        self,
        position: int,
        source: str,
        agent_id: str | None,
        call_id: str | None,
        name: str,
        server: str | None,
    ) -> None:
        self.position = position
        self.source = source
        self.agent_id = agent_id
        self.call_id = call_id
        self.name = name
        self.server = server
        self.arguments: Any = None
        self.done = False
        self.success = False
        self.duration_ms: float | None = None
        self.start: int | None = None
        self.end: int | None = None
        self.began: float | None = None

    def freeze(self) -> ToolCall:
        return ToolCall(
            self.position,
            self.name,
            self.arguments,
            canonical_key(self.arguments),
            self.agent_id,
            self.call_id,
            self.done,
            self.done and self.success,
            self.duration_ms,
            self.source,
            self.start,
            self.end,
        )


_CALL_ID_KEYS: Final = ("toolCallId", "tool_call_id", "callId", "call_id")
_TOOL_NAME_KEYS: Final = ("toolName", "tool_name", "name", "tool")
_ARG_KEYS: Final = ("input", "arguments", "args", "params")
_SERVER_KEYS: Final = ("mcpServerName", "serverName", "server", "server_name", "mcp_server_name")


def _field(data: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The first present alias; the first alias (mst's own spelling) is tried without a loop."""
    value = data.get(keys[0])
    return value if value is not None else _first(data, keys[1:])


def _str_field(data: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """A non-empty string field under any alias (fast path: mst's own spelling)."""
    value = data.get(keys[0])
    if value is None:
        value = _first(data, keys[1:])
    return value if value.__class__ is str and value else None


def _agent(event: Mapping[str, Any]) -> str | None:
    agent = event.get("agentId")
    return agent if agent.__class__ is str and agent else None


def _call_fields(data: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(call id, normalised tool name, server) of a native tool event."""
    server = _str_field(data, _SERVER_KEYS)
    raw = _str_field(data, _TOOL_NAME_KEYS)
    return _str_field(data, _CALL_ID_KEYS), normalise_tool_name(raw, server) if raw else None, server


_Key = tuple[str | None, str]


class _Correlator:
    """Native start ↔ completion matching, scoped by ``agentId``.

    Ids decide first. Without an id on the completion, the oldest pending start with the same
    tool name is taken (clients that omit ids still complete calls in order per tool). A
    completion whose id matches nothing may still belong to an id-less start of the same name.
    A completion with no start at all is kept as its own call: it is evidence a call happened.
    Pending queues use lazy deletion so every start is enqueued and dequeued at most once.
    """

    def __init__(self, slots: list[_Slot]) -> None:
        self.slots = slots
        self.by_id: dict[_Key, _Slot] = {}
        self.by_name: dict[_Key, deque[_Slot]] = {}
        self.by_name_no_id: dict[_Key, deque[_Slot]] = {}

    def start(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        agent = _agent(event)
        call_id, name, server = _call_fields(data)
        slot = _Slot(pos, SOURCE_NATIVE, agent, call_id, name or "unknown", server)
        slot.arguments = _field(data, _ARG_KEYS)
        slot.start = pos
        slot.began = _timestamp(event)
        self.slots.append(slot)
        key = (agent, slot.name)
        if call_id is not None:
            self.by_id[(agent, call_id)] = slot
        else:
            self.by_name_no_id.setdefault(key, deque()).append(slot)
        self.by_name.setdefault(key, deque()).append(slot)

    def complete(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        agent = _agent(event)
        call_id = _str_field(data, _CALL_ID_KEYS)
        slot = self.by_id.pop((agent, call_id), None) if call_id is not None else None
        if slot is None or slot.done:
            _, name, server = _call_fields(data)
            slot = self._fallback(agent, call_id, name)
            if slot is None:
                slot = _Slot(pos, SOURCE_NATIVE, agent, call_id, name or "unknown", server)
                slot.arguments = _field(data, _ARG_KEYS)
                self.slots.append(slot)
        slot.done = True
        slot.end = pos
        slot.success = not _failed(data)
        slot.duration_ms = _duration(data)
        if slot.duration_ms is None and slot.began is not None:
            ended = _timestamp(event)
            if ended is not None and ended >= slot.began:
                slot.duration_ms = ended - slot.began

    def _fallback(self, agent: str | None, call_id: str | None, name: str | None) -> _Slot | None:
        """No start with this id: an id-less start of the same tool (when the completion has an
        id), or the oldest pending start of the same tool (when it has none)."""
        if name is None:
            return None
        return self._oldest(self.by_name_no_id if call_id is not None else self.by_name, (agent, name))

    @staticmethod
    def _oldest(queues: dict[_Key, deque[_Slot]], key: _Key) -> _Slot | None:
        queue = queues.get(key)
        while queue:
            slot = queue.popleft()
            if not slot.done:
                return slot
        return None


class _Gateway:
    """MCP gateway evidence: ``mcp.tool_call`` records and ``tools/call`` JSON-RPC exchanges.

    A request is correlated with its response by (server, JSON-RPC id); a request never answered
    is an unfinished (failed) call, exactly like a native start without completion.
    """

    def __init__(self, slots: list[_Slot]) -> None:
        self.slots = slots
        self.requests: dict[tuple[str | None, str], _Slot] = {}

    def tool_call(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        call_id = _text(_first(data, _CALL_ID_KEYS))
        server = _text(_first(data, _SERVER_KEYS))
        name = normalise_tool_name(_text(_first(data, _TOOL_NAME_KEYS)) or "unknown", server)
        slot = _Slot(pos, SOURCE_GATEWAY_CALL, _agent(event), call_id, name, server)
        slot.arguments = _first(data, _ARG_KEYS)
        status = data.get("status")
        slot.done = not (isinstance(status, str) and status.lower() in ("started", "pending", "running"))
        slot.success = not _failed(data)
        slot.duration_ms = _duration(data)
        slot.start = slot.end = pos
        self.slots.append(slot)

    def request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        msg = _rpc_message(data)
        if msg.get("method") != "tools/call":
            return
        params = msg.get("params")
        params = params if isinstance(params, dict) else {}
        server = _text(_first(data, _SERVER_KEYS))
        rpc_id = _rpc_id(msg)
        name = normalise_tool_name(_text(params.get("name")) or "unknown", server)
        slot = _Slot(pos, SOURCE_GATEWAY_RPC, _agent(event), rpc_id, name, server)
        slot.arguments = params.get("arguments")
        slot.start = pos
        self.slots.append(slot)
        if rpc_id is not None:
            self.requests[(server, rpc_id)] = slot

    def response(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        msg = _rpc_message(data)
        rpc_id = _rpc_id(msg)
        if rpc_id is None:
            return
        slot = self.requests.pop((_text(_first(data, _SERVER_KEYS)), rpc_id), None)
        if slot is None:
            return
        result = msg.get("result")
        failed = msg.get("error") is not None or (isinstance(result, dict) and result.get("isError") is True)
        slot.done, slot.success, slot.end = True, not failed, pos
        slot.duration_ms = _duration(data)


def _rpc_message(data: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("message", "payload", "body"):
        inner = data.get(key)
        if isinstance(inner, dict):
            return inner
    return data


def _rpc_id(msg: Mapping[str, Any]) -> str | None:
    value = msg.get("id")
    if value is None:
        value = msg.get("requestId")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value)


def _gateway_candidates(slot: _Slot) -> tuple[str, ...]:
    """Names a native call for this gateway record may carry (``server__tool`` or ``server-tool``)."""
    if slot.server and slot.name.startswith(f"{slot.server}__"):
        tool = slot.name[len(slot.server) + 2 :]
        return (slot.name, f"{slot.server}-{tool}")
    return (slot.name,)


def _deduplicate(slots: list[_Slot]) -> tuple[tuple[ToolCall, ...], int]:
    """Native calls first, then ``mcp.tool_call``, then JSON-RPC: each lower tier is dropped where a
    higher tier already accounts for the same (name, arguments), counted as a multiset so that
    two genuine identical calls and one gateway record leave two calls, not one."""
    frozen = [s.freeze() for s in slots]
    gateway = [i for i, c in enumerate(frozen) if c.source != SOURCE_NATIVE]
    if not gateway:
        return tuple(frozen), 0
    seen = Counter((c.name, c.args_key) for c in frozen if c.source == SOURCE_NATIVE)
    keep = [True] * len(frozen)
    for tier in (SOURCE_GATEWAY_CALL, SOURCE_GATEWAY_RPC):
        added: Counter[tuple[str, str]] = Counter()
        for i in gateway:
            call = frozen[i]
            if call.source != tier:
                continue
            for name in _gateway_candidates(slots[i]):
                if seen[(name, call.args_key)] > 0:
                    seen[(name, call.args_key)] -= 1
                    keep[i] = False
                    break
            else:
                added[(call.name, call.args_key)] += 1
        seen.update(added)
    return tuple(c for c, k in zip(frozen, keep, strict=True) if k), keep.count(False)


# ---------------------------------------------------------------------------------------------
# Execution statistics


class _Usage:
    """Collects model-request and usage evidence of the main agent during the pass."""

    def __init__(self) -> None:
        self.firewall: list[ModelRequest] = []
        self.model: list[ModelRequest] = []
        self.report: TokenUsage | None = None
        self.result_usage: TokenUsage | None = None
        self.result_duration: float | None = None
        self.result_source: str | None = None
        self.completed = False

    @staticmethod
    def _request(pos: int, data: Mapping[str, Any]) -> ModelRequest:
        model = data.get("model")
        return ModelRequest(
            pos, parse_usage(data), _duration(data), model if model.__class__ is str else None
        )

    def firewall_request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.firewall.append(self._request(pos, data))

    def model_request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.model.append(self._request(pos, data))

    def report_usage(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """The last aggregate report wins: reports are cumulative snapshots, not increments."""
        usage = parse_usage(data)
        if not usage.empty:
            self.report = usage

    def session_result(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self._result(SESSION_RESULT, event, data)

    def execution_result(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self._result(EXECUTION_RESULT, event, data)

    def _result(self, event_type: str, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """A completion record. A nested agent's result describes part of the work; only a
        top-level one (no ``agentId``) gives the whole agent's duration and usage, unless nothing
        else exists."""
        self.completed = True
        if _agent(event) is not None and self.result_source is not None:
            return
        usage = parse_usage(data)
        if not usage.empty:
            self.result_usage = usage
        duration = _duration(data)
        if duration is not None:
            self.result_duration = duration
            self.result_source = event_type

    def stats(self, session: Sequence[Any]) -> ExecutionStats:
        requests: list[ModelRequest]
        if self.firewall:
            requests, source = self.firewall, FIREWALL_TOKEN_USAGE
        elif self.model:
            requests, source = self.model, MODEL_REQUEST
        else:
            requests, source = [], None
        aggregate, agg_source = self.report, USAGE_REPORT if self.report is not None else None
        if aggregate is None and self.result_usage is not None:
            aggregate, agg_source = self.result_usage, f"{SESSION_RESULT}.usage"
        duration, dur_source = self.result_duration, self.result_source
        if duration is None:
            duration = _timestamp_span(session)
            dur_source = "provenance.timestampMs" if duration is not None else None
        return ExecutionStats(tuple(requests), source, aggregate, agg_source, duration, dur_source)


def _timestamp_span(session: Sequence[Any]) -> float | None:
    """Last minus first main-agent timestamp, when at least two were recorded.

    Only used when no explicit duration exists. It is an observed lower bound of the agent's
    wall time, which is what the metric means by "observed duration"; one timestamp alone gives
    no span, so it yields None rather than 0.
    """
    first: float | None = None
    last: float | None = None
    seen = 0
    for event in session:
        if not isinstance(event, dict) or not is_main_agent(event):
            continue
        ts = _timestamp(event)
        if ts is None:
            continue
        seen += 1
        first = ts if first is None else min(first, ts)
        last = ts if last is None else max(last, ts)
    if seen < 2 or first is None or last is None:
        return None
    return last - first


# ---------------------------------------------------------------------------------------------
# The pass


def create_session_lookups(session: Sequence[Any]) -> SessionLookups:
    """Build the shared lookups in one linear pass (plus a timestamp pass only when no explicit
    duration was recorded). Items that are not objects, or whose type is not a string, are
    skipped, never indexed.

    The cyclic garbage collector is paused for the pass: the pass allocates hundreds of
    thousands of small acyclic records, and each automatic collection would otherwise traverse
    the whole (large, live) session, which made building lookups several times slower than the
    work itself. It is re-enabled on exit, including on error, and the records form no cycles.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(session)
    finally:
        if was_enabled:
            gc.enable()


def _build(session: Sequence[Any]) -> SessionLookups:
    """The pass itself; the loop body is kept flat on purpose, it runs once per event."""
    index: dict[str, list[int]] = {}
    slots: list[_Slot] = []
    native = _Correlator(slots)
    gateway = _Gateway(slots)
    usage = _Usage()
    handlers: dict[str, Callable[[int, dict[str, Any], dict[str, Any]], None]] = {
        TOOL_START: native.start,
        TOOL_COMPLETE: native.complete,
        MCP_TOOL_CALL: gateway.tool_call,
        MCP_RPC_REQUEST: gateway.request,
        MCP_RPC_RESPONSE: gateway.response,
        FIREWALL_TOKEN_USAGE: usage.firewall_request,
        MODEL_REQUEST: usage.model_request,
        USAGE_REPORT: usage.report_usage,
        SESSION_RESULT: usage.session_result,
        EXECUTION_RESULT: usage.execution_result,
    }
    for pos, event in enumerate(session):
        if event.__class__ is not dict:
            continue
        etype = event.get("type")
        if etype.__class__ is not str:
            continue
        bucket = index.get(etype)
        if bucket is None:
            index[etype] = [pos]
        else:
            bucket.append(pos)
        handler = handlers.get(etype)
        if handler is None:
            continue
        prov = event.get("provenance")
        phase = prov.get("phase") if prov.__class__ is dict else None
        if phase is not None and phase != "" and phase != PHASE_AGENT:
            continue
        data = event.get("data")
        handler(pos, event, data if data.__class__ is dict else {})
    calls, dropped = _deduplicate(slots)
    return SessionLookups(
        size=len(session),
        by_type=MappingProxyType({k: tuple(v) for k, v in index.items()}),
        tool_calls=calls,
        gateway_duplicates=dropped,
        execution=usage.stats(session),
        completed=usage.completed,
    )


__all__ = [
    "EXECUTION_RESULT",
    "FIREWALL_TOKEN_USAGE",
    "MCP_RPC_REQUEST",
    "MCP_RPC_RESPONSE",
    "MCP_TOOL_CALL",
    "SAFE_OUTPUT_RESULT",
    "USAGE_REPORT",
    "ExecutionStats",
    "ModelRequest",
    "SessionLookups",
    "TokenUsage",
    "ToolCall",
    "canonical_key",
    "create_session_lookups",
    "event_data",
    "is_main_agent",
    "normalise_tool_name",
    "parse_usage",
]
