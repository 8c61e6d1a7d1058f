"""The one linear pass that builds :class:`SessionLookups` from a session."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import compress, count
from types import MappingProxyType
from typing import Any, Final

from mst._gc import SMALL_PASS, paused_gc
from mst.session.events import MODEL_REQUEST, PHASE_AGENT, SESSION_RESULT, TOOL_COMPLETE, TOOL_START
from mst.session.lazy import LazySession
from mst.session.lookups.fields import event_data, is_main_agent
from mst.session.lookups.gateway import _deduplicate, _Gateway
from mst.session.lookups.records import (
    EXECUTION_RESULT,
    FIREWALL_TOKEN_USAGE,
    MCP_RPC_REQUEST,
    MCP_RPC_RESPONSE,
    MCP_TOOL_CALL,
    USAGE_REPORT,
    SessionLookups,
)
from mst.session.lookups.tools import _Correlator, _new_tuple, _Slot
from mst.session.lookups.usage import _Usage

# A handler is a collector's method, called with the collector: (collector, position, event, data).
_Handler = Callable[[Any, int, dict[str, Any], dict[str, Any]], None]
_NATIVE, _GATEWAY, _USAGE = 0, 1, 2  # a collector's place in ``_Pass.collectors``

# The handler of each type the pass interprets, and which collector it is called with. One table
# for every pass, not bound methods made per session: most trials' sessions have five events, and
# making ten bound methods and their dict was a sixth of such a trial's lookups.
HANDLERS: Final[dict[str, tuple[int, _Handler]]] = {
    TOOL_START: (_NATIVE, _Correlator.start),
    TOOL_COMPLETE: (_NATIVE, _Correlator.complete),
    MCP_TOOL_CALL: (_GATEWAY, _Gateway.tool_call),
    MCP_RPC_REQUEST: (_GATEWAY, _Gateway.request),
    MCP_RPC_RESPONSE: (_GATEWAY, _Gateway.response),
    FIREWALL_TOKEN_USAGE: (_USAGE, _Usage.firewall_request),
    MODEL_REQUEST: (_USAGE, _Usage.model_request),
    USAGE_REPORT: (_USAGE, _Usage.report_usage),
    SESSION_RESULT: (_USAGE, _Usage.session_result),
    EXECUTION_RESULT: (_USAGE, _Usage.execution_result),
}
# The types the pass interprets; every other event is only indexed.
INTERPRETED: Final = frozenset(HANDLERS)


def create_session_lookups(session: Sequence[Any]) -> SessionLookups:
    """Build the shared lookups in one linear pass (plus a timestamp pass only when no explicit
    duration was recorded), with the garbage collector paused (see :func:`mst._gc.paused_gc`). Items
    that are not objects, or whose type is not a string, are skipped, never indexed.

    A :class:`~mst.session.lazy.LazySession` gives each event's type without decoding it: only
    the events the pass interprets are visited and decoded (40% of a typical session), and its
    index by type is found when a grader asks for it (:class:`_TypeIndex`)."""
    size = len(session)
    if session.__class__ is list and size < SMALL_PASS:  # a trial's session: paused_gc would leave it alone
        return _eager_pass(session)
    with paused_gc(size):
        if isinstance(session, LazySession):
            return _lazy_pass(session)
        return _eager_pass(session)


def _eager_pass(session: Sequence[Any]) -> SessionLookups:
    """A list of decoded events (every trial of a run): index and interpret in one loop, kept
    flat on purpose (it runs once per event, and its fixed cost is most of a five-event trial's)."""
    state = _Pass(session)
    handlers, collectors = HANDLERS, state.collectors
    index: dict[str, list[int]] = {}
    for pos, event in enumerate(session):
        if event.__class__ is not dict and not isinstance(event, dict):
            continue
        etype = event.get("type")
        if etype.__class__ is not str and not isinstance(etype, str):  # exact check first: hot
            continue
        bucket = index.get(etype)
        if bucket is None:
            index[etype] = [pos]
        else:
            bucket.append(pos)
        entry = handlers.get(etype)
        if entry is None:
            continue
        prov = event.get("provenance")  # the main agent's only (is_main_agent, inlined)
        phase = prov.get("phase") if prov.__class__ is dict or isinstance(prov, dict) else None
        if phase is not None and phase != "" and phase != PHASE_AGENT:
            continue
        data = event.get("data")
        which, handler = entry
        collector = collectors[which]
        if collector is None:
            collector = state.collector(which)
        handler(collector, pos, event, data if data.__class__ is dict or isinstance(data, dict) else {})
    return state.finish(MappingProxyType({k: tuple(v) for k, v in index.items()}))


def _lazy_pass(session: LazySession) -> SessionLookups:
    """A lazily read session: the interpreted events' positions are picked out of the types list
    at C speed (a million-event session has 600,000 it never needs to touch)."""
    state = _Pass(session)
    handlers, collectors, types, event_at = HANDLERS, state.collectors, session.types, session.event
    for pos in compress(count(), map(INTERPRETED.__contains__, types)):
        event = event_at(pos)  # a checked canonical event: provenance and data are objects
        phase = event["provenance"].get("phase")
        if phase is not None and phase != "" and phase != PHASE_AGENT:
            continue
        which, handler = handlers[types[pos]]
        collector = collectors[which]
        if collector is None:
            collector = state.collector(which)
        handler(collector, pos, event, event["data"])
    return state.finish(_TypeIndex(types))


class _Pass:
    """The pass's collectors (the handlers of :data:`HANDLERS` are their methods). The native
    and gateway collectors are made at their first event (:meth:`collector`): most trials'
    sessions have no tool call and no MCP event, and making both up front was a tenth of such a
    trial's lookups."""

    __slots__ = ("collectors", "session", "slots", "usage")

    def __init__(self, session: Sequence[Any]) -> None:
        self.session = session
        self.slots: list[_Slot] = []  # the calls of both tool collectors, in the order they were met
        self.usage = usage = _Usage()
        self.collectors: list[Any] = [None, None, usage]  # by _NATIVE, _GATEWAY, _USAGE

    def collector(self, which: int) -> Any:
        """The native or gateway collector, made now: the pass met its first event."""
        made = _Correlator(self.session, self.slots) if which == _NATIVE else _Gateway(self.slots)
        self.collectors[which] = made
        return made

    def finish(self, by_type: Mapping[str, tuple[int, ...]]) -> SessionLookups:
        session, usage = self.session, self.usage
        _other_mcp_events(session, by_type, self)
        gateway: _Gateway | None = self.collectors[_GATEWAY]
        if gateway is None:  # no MCP event at all: no gateway record, none counted
            calls, dropped = _deduplicate(self.slots, ())
            mcp_events = retries = 0
        else:
            calls, dropped = _deduplicate(self.slots, gateway.indices)
            mcp_events, retries = gateway.mcp_events, gateway.retries
        # SessionLookups' fields in order, without the named tuple's Python-level __new__
        fields = (len(session), by_type, calls, dropped, usage.stats(session), usage.completed, mcp_events, retries)
        return _new_tuple(SessionLookups, fields)  # type: ignore[no-any-return]


def _other_mcp_events(session: Sequence[Any], by_type: Mapping[str, tuple[int, ...]], state: _Pass) -> None:
    """``mcp.*`` types the pass does not interpret (``mcp.retry``, ...) still count as MCP
    events; they are usually rare, so they are visited here rather than tested for on every event."""
    known = _OTHER_MCP
    for etype in by_type:
        other = known.get(etype)
        if other is None:
            other = _is_other_mcp(etype)
        if not other:
            continue
        for pos in by_type[etype]:
            event = session[pos]
            if is_main_agent(event):
                gateway = state.collectors[_GATEWAY] or state.collector(_GATEWAY)
                gateway.observe(etype, event_data(event))


# Whether a type is an ``mcp.*`` type the pass does not interpret, by type: the sessions of a run
# share a few dozen types, and testing each type's prefix in every trial cost more than the rest
# of ``finish`` for a five-event session. Bounded: made-up types beyond it are tested each time.
_OTHER_MCP: Final[dict[str, bool]] = {}
_OTHER_MCP_KEPT: Final = 4096


def _is_other_mcp(etype: str) -> bool:
    other = etype.startswith("mcp.") and etype not in INTERPRETED
    if len(_OTHER_MCP) < _OTHER_MCP_KEPT:
        _OTHER_MCP[etype] = other
    return other


class _TypeIndex(Mapping[str, tuple[int, ...]]):
    """``by_type`` of a :class:`~mst.session.lazy.LazySession`: its keys are the session's
    types, and a type's positions are found when first read (one C-level scan of the types
    list) and kept. Graders read the positions of one or two types, so building a million
    positions for all of them up front was most of the pass's cost. Read-only, like the
    mapping proxy of a decoded session, and equal to it when the positions are."""

    __slots__ = ("_found", "_types")

    def __init__(self, types: list[str]) -> None:
        self._types = types
        self._found: dict[str, tuple[int, ...] | None] = dict.fromkeys(types)  # first-seen order

    def __getitem__(self, etype: str) -> tuple[int, ...]:
        found = self._found[etype]  # KeyError for a type the session lacks, as a mapping should
        if found is None:
            found = self._found[etype] = _positions(self._types, etype)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)

    def __contains__(self, etype: object) -> bool:
        return etype in self._found

    def __repr__(self) -> str:
        return f"_TypeIndex({dict(self.items())!r})"


def _positions(types: list[str], etype: str) -> tuple[int, ...]:
    """Where ``etype`` occurs in ``types``: ``list.index`` scans at C speed (an identity check
    per item: a session's lines share one string per type), Python runs once per occurrence."""
    out: list[int] = []
    append, index = out.append, types.index
    pos = -1
    try:
        while True:
            pos = index(etype, pos + 1)
            append(pos)
    except ValueError:
        return tuple(out)
