"""MCP gateway evidence (``mcp.tool_call``, JSON-RPC ``tools/call``), retry observations, and the
de-duplication of gateway records against native calls."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mst.session.lookups.fields import (
    _ARG_KEYS,
    _CALL_ID_KEYS,
    _GATEWAY_SERVER_KEYS,
    _TOOL_NAME_KEYS,
    _agent,
    _duration,
    _failed,
    _first,
    _str_field,
    normalise_tool_name,
)
from mst.session.lookups.records import SOURCE_GATEWAY_CALL, SOURCE_GATEWAY_RPC, SOURCE_NATIVE, ToolCall
from mst.session.lookups.tools import (
    _ARGS_KEY,
    _DONE,
    _DURATION,
    _END,
    _NAME,
    _SERVER,
    _SOURCE,
    _SUCCESS,
    _freeze_all,
    _Slot,
)


class _Gateway:
    """MCP gateway evidence: ``mcp.tool_call`` records and ``tools/call`` JSON-RPC exchanges.

    A request is correlated with its response by (server, JSON-RPC id); a request never answered
    is an unfinished (failed) call, exactly like a native start without completion. While the
    pass holds these events it also counts main-agent MCP events and retry observations, so the
    ``retries`` grader does not have to read them again (see :func:`is_retry`).
    """

    __slots__ = ("indices", "mcp_events", "requests", "retries", "slots")

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
                done and not _failed(data), _duration(data), SOURCE_GATEWAY_CALL, pos, pos, server, False]  # fmt: skip
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
                SOURCE_GATEWAY_RPC, pos, None, server, False]  # fmt: skip
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
        value = data.get("durationMs")  # _duration's common case inlined: once per response
        slot[_DURATION] = float(value) if value.__class__ is int and value >= 0 else _duration(data)


def is_retry(event_type: str, data: Mapping[str, Any]) -> bool:
    """A retry observation: an event whose type names a retry (``mcp.retry``, ``mcp.rpc.retry``),
    or one flagged ``retry``/``isRetry``, or one recording ``attempt`` > 1, or a generic MCP event
    record (``mcp.event``) whose ``event`` is ``retry`` or whose message says a retry happened.
    Cumulative counters (``retryCount``) are deliberately ignored: summing snapshots would count
    one retry many times."""
    return "retry" in event_type[event_type.rfind(".") + 1 :] or _flags_retry(data) or _tells_retry(data)


_RETRY_EVENTS: Final = frozenset({"retry", "retrying", "retried"})
_RETRY_WORD: Final = re.compile(r"\bretr(?:y|ies|ied|ying)\b", re.IGNORECASE)


def _tells_retry(data: Mapping[str, Any]) -> bool:
    """An MCP event record's own words: ``event: retry`` (also ``mcp.retry``), or a ``message``
    (``msg``) text naming a retry, such as ``Retrying tools/call (attempt 2)``."""
    name = data.get("event")
    if isinstance(name, str) and name[name.rfind(".") + 1 :].lower() in _RETRY_EVENTS:
        return True
    for key in ("message", "msg"):
        text = data.get(key)
        if isinstance(text, str) and _RETRY_WORD.search(text) is not None:
            return True
    return False


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


def _gateway_candidates(slot: _Slot, hyphenated: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Names a native call for this gateway record may carry (``server__tool`` or ``server-tool``).

    A record that names no server keeps its tool name as written; when that is a hyphenated
    ``server-tool``, the native calls spelled ``server__tool`` whose hyphenated form it is are
    candidates too (``hyphenated``: see :func:`_hyphenated_natives`), since the split point of a
    hyphenated name cannot be known without the server."""
    server, name = slot[_SERVER], slot[_NAME]
    if server and name.startswith(f"{server}__"):
        return (name, f"{server}-{name[len(server) + 2 :]}")
    if not server and name in hyphenated:
        return (name, *hyphenated[name])
    return (name,)


def _hyphenated_natives(slots: list[_Slot]) -> dict[str, tuple[str, ...]]:
    """``server-tool`` → the native ``server__tool`` names it may stand for (usually one)."""
    out: dict[str, tuple[str, ...]] = {}
    for name in {s[_NAME] for s in slots if s[_SOURCE] == SOURCE_NATIVE}:
        server, sep, tool = name.partition("__")
        if sep and server and tool:
            key = f"{server}-{tool}"
            out[key] = (*out.get(key, ()), name)
    return out


def _deduplicate(slots: list[_Slot], gateway: Sequence[int]) -> tuple[tuple[ToolCall, ...], int]:
    """Drop gateway records that a more direct source already accounts for.

    Sources in order of precedence: native events, ``mcp.tool_call``, JSON-RPC exchanges. Each
    source logs calls independently, so for one (name, arguments) key there were at least as many
    calls as the most any source saw; a lower source's record is a duplicate while the higher
    sources' count for its key is not used up. Counting as multisets means two genuine identical
    calls and one gateway record leave two calls, not one. ``gateway`` lists the positions of the
    gateway records in ``slots``, so sessions without gateway evidence skip all of this.
    """
    if not gateway:
        return (tuple(_freeze_all(slots)) if slots else ()), 0  # no calls at all: most trials
    spellings: dict[tuple[str | None, str], tuple[str, ...]] = {}  # few distinct tools, many calls
    candidates = []
    serverless = any(not slots[i][_SERVER] and "-" in slots[i][_NAME] for i in gateway)
    hyphenated = _hyphenated_natives(slots) if serverless else {}
    for i in gateway:
        slot = slots[i]
        key = (slot[_SERVER], slot[_NAME])
        names_of = spellings.get(key)
        if names_of is None:
            names_of = spellings[key] = _gateway_candidates(slot, hyphenated)
        candidates.append((i, names_of))
    names = {name for names_of in spellings.values() for name in names_of}
    frozen = _freeze_all(slots)
    best: dict[tuple[str, str], int] = {}
    for slot in slots:  # the lists now hold their argument keys; indexing them is cheapest
        if slot[_NAME] in names and slot[_SOURCE] == SOURCE_NATIVE:
            key = (slot[_NAME], slot[_ARGS_KEY])
            best[key] = best.get(key, 0) + 1
    dropped: set[int] = set()
    present = {slots[i][_SOURCE] for i in gateway}
    tiers = [t for t in (SOURCE_GATEWAY_CALL, SOURCE_GATEWAY_RPC) if t in present]
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
