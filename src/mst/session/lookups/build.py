"""The one linear pass that builds :class:`SessionLookups` from a session."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from mst._gc import paused_gc
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
from mst.session.lookups.tools import _Correlator, _Slot
from mst.session.lookups.usage import _Usage


def create_session_lookups(session: Sequence[Any]) -> SessionLookups:
    """Build the shared lookups in one linear pass (plus a timestamp pass only when no explicit
    duration was recorded), with the garbage collector paused (see :func:`mst._gc.paused_gc`). Items
    that are not objects, or whose type is not a string, are skipped, never indexed.

    A :class:`~mst.session.lazy.LazySession` gives each event's type without decoding it, and
    only the events the pass interprets are decoded (a third of a typical session)."""
    with paused_gc(len(session)):
        if isinstance(session, LazySession):
            return _build(session, session.types, session.event)
        return _build(session, _types(session), session.__getitem__)


def _types(session: Sequence[Any]) -> list[Any]:
    """Each item's ``type`` (None for an item that is not an object)."""
    return [e.get("type") if e.__class__ is dict or isinstance(e, dict) else None for e in session]


def _build(session: Sequence[Any], types: Sequence[Any], event_at: Callable[[int], Any]) -> SessionLookups:
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
    for pos, etype in enumerate(types):
        if etype.__class__ is not str and not isinstance(etype, str):  # exact check first: hot
            continue
        bucket = index.get(etype)
        if bucket is None:
            index[etype] = [pos]
        else:
            bucket.append(pos)
        handler = handlers.get(etype)
        if handler is None:
            continue
        event = event_at(pos)
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
