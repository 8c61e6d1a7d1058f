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
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
    alias: (index, rank) for index, aliases in enumerate(_TOKEN_ALIASES.values()) for rank, alias in enumerate(aliases)
}
_USAGE_FIELDS: Final = len(_TOKEN_ALIASES)
_NO_RANK: Final = 1 << 30


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
    server: str | None


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
    of event is an observation rather than a gap. ``mcp_events`` counts main-agent ``mcp.*``
    events and ``retry_observations`` those of them that observe a retry (:func:`is_retry`).
    """

    size: int
    by_type: Mapping[str, tuple[int, ...]]
    tool_calls: tuple[ToolCall, ...]
    gateway_duplicates: int
    execution: ExecutionStats
    completed: bool
    mcp_events: int
    retry_observations: int

    def positions(self, event_type: str) -> tuple[int, ...]:
        return self.by_type.get(event_type, ())


_NO_USAGE: Final = TokenUsage()
_new_usage = tuple.__new__
assert TokenUsage._fields == tuple(_TOKEN_ALIASES), "usage fields and alias table must align"


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
            return fallback_key(value)
    if isinstance(value, str) and value[:1] in ("{", "["):
        text: str = value
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return fallback_key(value)


def fallback_key(value: Any) -> str:
    """:func:`canonical_key` for what orjson cannot encode: nesting beyond its 255 levels (tool
    arguments may nest 1,000 deep) or values that are not JSON. Built without recursion, since
    ``repr`` of such a value raises RecursionError; keys are sorted, as in the JSON form."""
    out: list[str] = []
    stack: list[tuple[bool, Any]] = [(False, value)]  # (is literal text, item)
    while stack:
        is_text, item = stack.pop()
        if is_text:
            out.append(item)
        elif isinstance(item, dict):
            out.append("{")
            stack.append((True, "}"))
            for n, key in enumerate(sorted(item, key=str, reverse=True)):
                stack.extend([(True, ",")] * (n > 0) + [(False, item[key]), (True, f"{key!r}:")])
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append((True, "]"))
            for n, element in enumerate(reversed(item)):
                stack.extend([(True, ",")] * (n > 0) + [(False, element)])
        else:
            out.append(repr(item))
    return "".join(out)


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
        if name.startswith(server):
            rest = name[len(server) :]
            if rest.startswith("__") and len(rest) > 2:
                name = rest[2:]
            elif rest.startswith("-") and len(rest) > 1:
                name = rest[1:]
        return f"{server}__{name}"
    return name


def _first(data: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = data.get(key)
        if value is not None:
            return value
    return None


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


def _usage_fields(src: Mapping[str, Any], values: list[int | None], ranks: list[int]) -> None:
    """Fill ``values[field]`` from ``src``; where aliases collide, the earliest in the table wins."""
    for key, raw in src.items():
        alias = _ALIAS_FIELD.get(key) if key.__class__ is str else None
        if alias is None:
            continue
        index, rank = alias
        if rank < ranks[index]:
            value = raw if raw.__class__ is int and raw >= 0 else _count(raw)
            if value is not None:
                values[index], ranks[index] = value, rank


def parse_usage(data: Mapping[str, Any]) -> TokenUsage:
    """Token usage in camelCase or snake_case, directly in ``data`` or, for fields ``data``
    lacks, in ``data.usage``. Iterates the record's own (few) keys instead of trying every
    alias, which matters at one record per model request."""
    values: list[int | None] = [None] * _USAGE_FIELDS
    ranks = [_NO_RANK] * _USAGE_FIELDS
    _usage_fields(data, values, ranks)
    nested = data.get("usage")
    if nested.__class__ is dict:
        inner: list[int | None] = [None] * _USAGE_FIELDS
        _usage_fields(nested, inner, [_NO_RANK] * _USAGE_FIELDS)
        values = [v if v is not None else w for v, w in zip(values, inner, strict=True)]
    return _new_usage(TokenUsage, values)


def _duration(data: Mapping[str, Any]) -> float | None:
    value = data.get("durationMs")
    if value is None:
        value = data.get("duration_ms")
        if value is None:
            return None
    return _millis(value)


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


# A call under construction is a plain list laid out like ToolCall (``_ARGS_KEY`` filled at the
# end): building and updating a list is several times cheaper than an object with attributes,
# and freezing it is one C-level list → tuple conversion. It is mutated only in this module.
_Slot = list[Any]
_POS, _NAME, _ARGUMENTS, _ARGS_KEY, _AGENT, _CALL_ID, _DONE, _SUCCESS = 0, 1, 2, 3, 4, 5, 6, 7
_DURATION, _SOURCE, _START, _END, _SERVER = 8, 9, 10, 11, 12

_new_tuple = tuple.__new__


def _freeze_all(slots: list[_Slot]) -> list[ToolCall]:
    """Fill each argument key and turn the lists into ToolCalls (the common dict-arguments case
    is serialised inline: this loop runs once per call)."""
    dumps, sort_keys, new = orjson.dumps, orjson.OPT_SORT_KEYS, _new_tuple
    out: list[ToolCall] = []
    append = out.append
    for slot in slots:
        args = slot[_ARGUMENTS]
        if args.__class__ is dict:
            try:
                slot[_ARGS_KEY] = dumps(args, option=sort_keys).decode()
            except TypeError:
                slot[_ARGS_KEY] = fallback_key(args)
        else:
            slot[_ARGS_KEY] = canonical_key(args)
        append(new(ToolCall, slot))
    return out


_CALL_ID_KEYS: Final = ("toolCallId", "tool_call_id", "callId", "call_id")
_TOOL_NAME_KEYS: Final = ("toolName", "tool_name", "name", "tool")
_ARG_KEYS: Final = ("input", "arguments", "args", "params")
_SERVER_KEYS: Final = ("mcpServerName", "serverName", "server", "server_name", "mcp_server_name")
_GATEWAY_SERVER_KEYS: Final = ("serverName", "server", "mcpServerName", "server_name", "mcp_server_name")


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


_Key = tuple[str | None, str]


def _enqueue(queues: dict[_Key, deque[_Slot]], key: _Key, slot: _Slot) -> None:
    queue = queues.get(key)
    if queue is None:
        queues[key] = deque((slot,))
    else:
        queue.append(slot)


class _Correlator:
    """Native start ↔ completion matching, scoped by ``agentId``.

    Ids decide first. Without an id on the completion, the oldest pending start with the same
    tool name is taken (clients that omit ids still complete calls in order per tool). A
    completion whose id matches nothing may still belong to an id-less start of the same name.
    A completion with no start at all is kept as its own call: it is evidence a call happened.
    Pending queues use lazy deletion so every start is enqueued and dequeued at most once.
    """

    def __init__(self, session: Sequence[Any], slots: list[_Slot]) -> None:
        self.session = session
        self.slots = slots
        self.by_id: dict[_Key, _Slot] = {}
        self.by_name: dict[_Key, deque[_Slot]] | None = None  # built at the first id-less completion
        self.by_name_no_id: dict[_Key, deque[_Slot]] = {}

    def start(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        agent = event.get("agentId")
        if agent is not None and (agent.__class__ is not str or not agent):
            agent = None
        raw = data.get("toolName")
        if raw.__class__ is str and raw:
            # mst's (and the Copilot CLI's) spelling: its server field is ``mcpServerName``, so
            # the alias search for an absent server (most calls) is skipped on this hot path.
            call_id, server, args = data.get("toolCallId"), data.get("mcpServerName"), data.get("input")
            if call_id.__class__ is not str or not call_id:
                call_id = _str_field(data, _CALL_ID_KEYS)
            server = server if server.__class__ is str and server else None
            if args is None:
                args = _field(data, _ARG_KEYS)
        else:
            call_id, server = _str_field(data, _CALL_ID_KEYS), _str_field(data, _SERVER_KEYS)
            raw, args = _str_field(data, _TOOL_NAME_KEYS), _field(data, _ARG_KEYS)
        name = normalise_tool_name(raw, server) if raw else "unknown"
        slot = [pos, name, args, None, agent, call_id, False, False, None, SOURCE_NATIVE, pos, None, server]
        self.slots.append(slot)
        if call_id is not None:
            self.by_id[(agent, call_id)] = slot
        else:
            _enqueue(self.by_name_no_id, (agent, name), slot)
        if self.by_name is not None:
            _enqueue(self.by_name, (agent, name), slot)

    def complete(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        agent = event.get("agentId")
        if agent is not None and (agent.__class__ is not str or not agent):
            agent = None
        call_id = data.get("toolCallId")
        if call_id.__class__ is not str or not call_id:
            call_id = _str_field(data, _CALL_ID_KEYS)
        slot = self.by_id.pop((agent, call_id), None) if call_id is not None else None
        if slot is None or slot[_DONE]:
            slot = self._unmatched(pos, agent, call_id, data)
        slot[_DONE] = True
        slot[_END] = pos
        slot[_SUCCESS] = not _failed(data)
        duration = _duration(data)
        if duration is None and slot[_START] is not None:
            began, ended = _timestamp(self.session[slot[_START]]), _timestamp(event)
            if began is not None and ended is not None and ended >= began:
                duration = ended - began
        slot[_DURATION] = duration

    def _unmatched(self, pos: int, agent: str | None, call_id: str | None, data: Mapping[str, Any]) -> _Slot:
        """No start with this id: an id-less start of the same tool (when the completion has an
        id), or the oldest pending start of the same tool (when it has none), else a new call."""
        server = _str_field(data, _SERVER_KEYS)
        raw = _str_field(data, _TOOL_NAME_KEYS)
        name = normalise_tool_name(raw, server) if raw else None
        if name is not None:
            queues = self.by_name_no_id if call_id is not None else self._all_by_name()
            slot = self._oldest(queues, (agent, name))
            if slot is not None:
                return slot
        slot = [pos, name or "unknown", _field(data, _ARG_KEYS), None, agent, call_id, False, False, None,
                SOURCE_NATIVE, None, None, server]  # fmt: skip
        self.slots.append(slot)
        return slot

    def _all_by_name(self) -> dict[_Key, deque[_Slot]]:
        """Pending native starts by (agent, name), built once when first needed: most sessions
        carry call ids on every completion and never need it."""
        if self.by_name is None:
            self.by_name = {}
            for slot in self.slots:
                if slot[_SOURCE] == SOURCE_NATIVE and not slot[_DONE] and slot[_START] is not None:
                    _enqueue(self.by_name, (slot[_AGENT], slot[_NAME]), slot)
        return self.by_name

    @staticmethod
    def _oldest(queues: dict[_Key, deque[_Slot]], key: _Key) -> _Slot | None:
        queue = queues.get(key)
        while queue:
            slot = queue.popleft()
            if not slot[_DONE]:
                return slot
        return None


class _Gateway:
    """MCP gateway evidence: ``mcp.tool_call`` records and ``tools/call`` JSON-RPC exchanges.

    A request is correlated with its response by (server, JSON-RPC id); a request never answered
    is an unfinished (failed) call, exactly like a native start without completion. While the
    pass holds these events it also counts main-agent MCP events and retry observations, so the
    ``retries`` grader does not have to read them again (see :func:`is_retry`).
    """

    def __init__(self, slots: list[_Slot]) -> None:
        self.slots = slots
        self.indices: list[int] = []  # where the gateway records sit in ``slots``
        self.requests: dict[tuple[str | None, str], _Slot] = {}
        self.mcp_events = 0
        self.retries = 0

    def observe(self, event_type: str, data: Mapping[str, Any]) -> None:
        self.mcp_events += 1
        if is_retry(event_type, data):
            self.retries += 1

    def observe_known(self, data: Mapping[str, Any]) -> None:
        """:meth:`observe` for the interpreted types, whose names never mention a retry (the
        flag test of :func:`_flags_retry`, inlined: it runs for every gateway event)."""
        self.mcp_events += 1
        if data.get("retry") is True or data.get("isRetry") is True:
            self.retries += 1
        else:
            attempt = data.get("attempt")
            if attempt.__class__ is int and attempt > 1:
                self.retries += 1

    def other(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.observe(event["type"], data)

    def tool_call(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.observe_known(data)
        server = _str_field(data, _GATEWAY_SERVER_KEYS)
        name = normalise_tool_name(_str_field(data, _TOOL_NAME_KEYS) or "unknown", server)
        status = data.get("status")
        done = not (isinstance(status, str) and status.lower() in ("started", "pending", "running"))
        slot = [pos, name, _first(data, _ARG_KEYS), None, _agent(event), _str_field(data, _CALL_ID_KEYS), done,
                done and not _failed(data), _duration(data), SOURCE_GATEWAY_CALL, pos, pos, server]  # fmt: skip
        self.indices.append(len(self.slots))
        self.slots.append(slot)

    def request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.observe_known(data)
        msg = data.get("message")
        if msg.__class__ is not dict:
            msg = _rpc_message(data)
        if msg.get("method") != "tools/call":
            return
        params = msg.get("params")
        if params.__class__ is not dict:
            params = {}
        server = data.get("serverName")
        if server.__class__ is not str or not server:
            server = _str_field(data, _GATEWAY_SERVER_KEYS)
        rpc_id = _rpc_id(msg)
        raw = params.get("name")
        name = normalise_tool_name(raw if raw.__class__ is str and raw else "unknown", server)
        slot = [pos, name, params.get("arguments"), None, _agent(event), rpc_id, False, False, None,
                SOURCE_GATEWAY_RPC, pos, None, server]  # fmt: skip
        self.indices.append(len(self.slots))
        self.slots.append(slot)
        if rpc_id is not None:
            self.requests[(server, rpc_id)] = slot

    def response(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.observe_known(data)
        msg = data.get("message")
        if msg.__class__ is not dict:
            msg = _rpc_message(data)
        rpc_id = _rpc_id(msg)
        if rpc_id is None:
            return
        server = data.get("serverName")
        if server.__class__ is not str or not server:
            server = _str_field(data, _GATEWAY_SERVER_KEYS)
        slot = self.requests.pop((server, rpc_id), None)
        if slot is None:
            return
        result = msg.get("result")
        failed = msg.get("error") is not None or (result.__class__ is dict and result.get("isError") is True)
        slot[_DONE], slot[_SUCCESS], slot[_END] = True, not failed, pos
        slot[_DURATION] = _duration(data)


def is_retry(event_type: str, data: Mapping[str, Any]) -> bool:
    """A retry observation: an event whose type names a retry (``mcp.retry``, ``mcp.rpc.retry``),
    or one flagged ``retry``/``isRetry``, or one recording ``attempt`` > 1. Cumulative counters
    (``retryCount``) are deliberately ignored: summing snapshots would count one retry many times."""
    return "retry" in event_type[event_type.rfind(".") + 1 :] or _flags_retry(data)


def _flags_retry(data: Mapping[str, Any]) -> bool:
    if data.get("retry") is True or data.get("isRetry") is True:
        return True
    attempt = data.get("attempt")
    return attempt.__class__ is int and attempt > 1


def _rpc_message(data: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = data.get("message")
    if inner.__class__ is dict:
        return inner  # type: ignore[no-any-return]
    for key in ("payload", "body"):
        inner = data.get(key)
        if isinstance(inner, dict):
            return inner
    return data


def _rpc_id(msg: Mapping[str, Any]) -> str | None:
    value = msg.get("id")
    if value.__class__ is int or value.__class__ is str:
        return str(value)
    if value is None:
        value = msg.get("requestId")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value)


def _gateway_candidates(slot: _Slot) -> tuple[str, ...]:
    """Names a native call for this gateway record may carry (``server__tool`` or ``server-tool``)."""
    server, name = slot[_SERVER], slot[_NAME]
    if server and name.startswith(f"{server}__"):
        return (name, f"{server}-{name[len(server) + 2 :]}")
    return (name,)


def _deduplicate(slots: list[_Slot], gateway: list[int]) -> tuple[tuple[ToolCall, ...], int]:
    """Drop gateway records that a more direct source already accounts for.

    Sources in order of precedence: native events, ``mcp.tool_call``, JSON-RPC exchanges. Each
    source logs calls independently, so for one (name, arguments) key there were at least as many
    calls as the most any source saw; a lower source's record is a duplicate while the higher
    sources' count for its key is not used up. Counting as multisets means two genuine identical
    calls and one gateway record leave two calls, not one. ``gateway`` lists the positions of the
    gateway records in ``slots``, so sessions without gateway evidence skip all of this.
    """
    if not gateway:
        return tuple(_freeze_all(slots)), 0
    spellings: dict[tuple[str | None, str], tuple[str, ...]] = {}  # few distinct tools, many calls
    candidates = []
    for i in gateway:
        slot = slots[i]
        key = (slot[_SERVER], slot[_NAME])
        names_of = spellings.get(key)
        if names_of is None:
            names_of = spellings[key] = _gateway_candidates(slot)
        candidates.append((i, names_of))
    names = {name for names_of in spellings.values() for name in names_of}
    frozen = _freeze_all(slots)
    best: dict[tuple[str, str], int] = {}
    for slot in slots:  # the lists now hold their argument keys; indexing them is cheapest
        if slot[_NAME] in names and slot[_SOURCE] == SOURCE_NATIVE:
            key = (slot[_NAME], slot[_ARGS_KEY])
            best[key] = best.get(key, 0) + 1
    dropped: set[int] = set()
    tiers = [t for t in (SOURCE_GATEWAY_CALL, SOURCE_GATEWAY_RPC) if any(frozen[i].source == t for i in gateway)]
    for n, tier in enumerate(tiers, start=1):
        last = n == len(tiers)
        budget = best if last else dict(best)  # the last tier may use up ``best`` itself
        seen: dict[tuple[str, str], int] = {}
        for i, names_of in candidates:
            call = frozen[i]
            if call.source != tier:
                continue
            key = (call.name, call.args_key)
            for name in names_of:
                match = (name, call.args_key)
                if budget.get(match, 0) > 0:
                    budget[match] -= 1
                    key = match
                    dropped.add(i)
                    break
            if not last:
                seen[key] = seen.get(key, 0) + 1
        for key, count in seen.items():
            if count > best.get(key, 0):
                best[key] = count
    if not dropped:
        return tuple(frozen), 0
    return tuple([c for i, c in enumerate(frozen) if i not in dropped]), len(dropped)


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
        usage, duration = parse_usage(data), _duration(data)
        return _new_tuple(ModelRequest, (pos, usage, duration, model if model.__class__ is str else None))  # type: ignore[no-any-return]

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


_SMALL_SESSION = 1000  # events: too few for a collection to sweep them often


@contextmanager
def paused_gc(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector for a linear pass over a session of ``size`` events.

    The pass allocates many small acyclic records; each automatic collection would otherwise
    traverse the whole (large, live) session, which made building lookups several times slower
    than the work itself and its cost grow faster than linearly. Collection is re-enabled on
    exit (also on error) if it was enabled before; nothing allocated here forms a cycle. A small
    session (most trials) is left alone: pausing would cost more than it saves.
    """
    if size < _SMALL_SESSION:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def create_session_lookups(session: Sequence[Any]) -> SessionLookups:
    """Build the shared lookups in one linear pass (plus a timestamp pass only when no explicit
    duration was recorded), with the garbage collector paused (see :func:`paused_gc`). Items
    that are not objects, or whose type is not a string, are skipped, never indexed."""
    with paused_gc(len(session)):
        return _build(session)


def _build(session: Sequence[Any]) -> SessionLookups:
    """The pass itself; the loop body is kept flat on purpose, it runs once per event."""
    index: dict[str, list[int]] = {}
    slots: list[_Slot] = []
    native = _Correlator(session, slots)
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
        if event.__class__ is not dict and not isinstance(event, dict):  # exact check first: hot
            continue
        etype = event.get("type")
        if etype.__class__ is not str and not isinstance(etype, str):
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
        phase = prov.get("phase") if isinstance(prov, dict) else None
        if phase is not None and phase != "" and phase != PHASE_AGENT:
            continue
        data = event.get("data")
        handler(pos, event, data if data.__class__ is dict or isinstance(data, dict) else {})
    _other_mcp_events(session, index, handlers, gateway)
    calls, dropped = _deduplicate(slots, gateway.indices)
    return SessionLookups(
        size=len(session),
        by_type=MappingProxyType({k: tuple(v) for k, v in index.items()}),
        tool_calls=calls,
        gateway_duplicates=dropped,
        execution=usage.stats(session),
        completed=usage.completed,
        mcp_events=gateway.mcp_events,
        retry_observations=gateway.retries,
    )


def _other_mcp_events(session: Sequence[Any], index: Mapping[str, list[int]], handled: Mapping[str, Any],
                      gateway: _Gateway) -> None:  # fmt: skip
    """``mcp.*`` types the pass does not interpret (``mcp.retry``, ...) still count as MCP
    events; they are usually rare, so they are visited here rather than tested for on every event."""
    for etype, positions in index.items():
        if not etype.startswith("mcp.") or etype in handled:
            continue
        for pos in positions:
            event = session[pos]
            if is_main_agent(event):
                gateway.observe(etype, event_data(event))


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
    "is_retry",
    "normalise_tool_name",
    "parse_usage",
    "paused_gc",
]
