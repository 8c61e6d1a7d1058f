"""Native tool-call correlation: ``tool.execution_start`` ↔ ``tool.execution_complete``."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from mst.session.lookups.fields import (
    _ARG_KEYS,
    _CALL_ID_KEYS,
    _SERVER_KEYS,
    _TOOL_NAME_KEYS,
    _duration,
    _field,
    _str_field,
    _timestamp,
    canonical_key,
    fallback_key,
    normalise_tool_name,
)
from mst.session.lookups.records import SOURCE_NATIVE, ToolCall

# A call under construction is a plain list laid out like ToolCall (``_ARGS_KEY`` filled at the
# end): building and updating a list is several times cheaper than an object with attributes,
# and freezing it is one C-level list → tuple conversion. It is mutated only in this package.
_Slot = list[Any]
_POS, _NAME, _ARGUMENTS, _ARGS_KEY, _AGENT, _CALL_ID, _DONE, _SUCCESS = 0, 1, 2, 3, 4, 5, 6, 7
_DURATION, _SOURCE, _START, _END, _SERVER, _REJECTED = 8, 9, 10, 11, 12, 13

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
    A completion succeeded only when it says so (``success: true``): one without a ``success``
    field, whatever else it carries, is finished but not successful, because the absence of an
    error is not evidence of success (docs/graders.md, "What a tool call is").
    Pending queues use lazy deletion so every start is enqueued and dequeued at most once.
    """

    __slots__ = ("by_id", "by_name", "by_name_no_id", "session", "slots")

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
        slot = [pos, name, args, None, agent, call_id, False, False, None, SOURCE_NATIVE, pos, None, server,
                data.get("rejected") is True]
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
        slot[_SUCCESS] = data.get("success") is True  # absence of an error is not a success
        if data.get("rejected") is True:
            slot[_REJECTED] = True
        value = data.get("durationMs")  # _duration's common case inlined: once per completion
        duration = float(value) if value.__class__ is int and value >= 0 else _duration(data)
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
                SOURCE_NATIVE, None, None, server, False]  # fmt: skip
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
