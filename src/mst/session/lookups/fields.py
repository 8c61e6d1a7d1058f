"""Small pure readers of one event's fields: phase, data, tool names, argument keys, durations,
failure evidence. Each accepts the aliases other tools write (camelCase, snake_case)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from mst.session.events import PHASE_AGENT

_FAILED_STATUSES: Final = frozenset({"error", "failure", "failed", "cancelled", "canceled", "timeout"})


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


def _millis(value: Any) -> float | None:
    if value.__class__ is int:
        return float(value) if value >= 0 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _duration(data: Mapping[str, Any]) -> float | None:
    value = data.get("durationMs")
    if value is None:
        value = data.get("duration_ms")
        if value is None:
            return None
    return _millis(value)


def _failed(data: Mapping[str, Any]) -> bool:
    """Explicit failure evidence in a gateway record (``mcp.tool_call``): the gateway logs calls
    with a status, so one without failure evidence succeeded. Native completions are stricter:
    they succeed only with ``success: true`` (see :class:`mst.session.lookups.tools._Correlator`)."""
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
