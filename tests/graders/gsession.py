"""Builders for small unified sessions used across the graders tests."""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


def ev(etype: str, data: dict[str, Any] | None = None, *, phase: str = "agent", agent: str | None = None,
       ts: int | None = None) -> Event:  # fmt: skip
    prov: dict[str, Any] = {"component": "test", "phase": phase}
    if ts is not None:
        prov["timestampMs"] = ts
    event: Event = {"type": etype, "data": data if data is not None else {}, "provenance": prov}
    if agent is not None:
        event["agentId"] = agent
    return event


def start(call_id: str | None, name: str, args: Any = None, **kw: Any) -> Event:
    data: dict[str, Any] = {"toolName": name, "input": args if args is not None else {}}
    if call_id is not None:
        data["toolCallId"] = call_id
    server = kw.pop("server", None)
    if server is not None:
        data["mcpServerName"] = server
    return ev("tool.execution_start", data, **kw)


def done(call_id: str | None, name: str | None = None, success: bool = True, **kw: Any) -> Event:
    data: dict[str, Any] = {"success": success}
    if call_id is not None:
        data["toolCallId"] = call_id
    if name is not None:
        data["toolName"] = name
    duration = kw.pop("duration", None)
    if duration is not None:
        data["durationMs"] = duration
    server = kw.pop("server", None)
    if server is not None:
        data["mcpServerName"] = server
    return ev("tool.execution_complete", data, **kw)


def call(call_id: str, name: str, args: Any = None, success: bool = True, **kw: Any) -> list[Event]:
    return [start(call_id, name, args, **kw), done(call_id, name, success, **kw)]


def request(inp: int | None, out: int | None, **kw: Any) -> Event:
    data: dict[str, Any] = {"model": "m"}
    if inp is not None:
        data["inputTokens"] = inp
    if out is not None:
        data["outputTokens"] = out
    return ev("model.request", data, **kw)


def result(duration: int | None = 1000, answer: str = "done", **kw: Any) -> Event:
    data: dict[str, Any] = {"answer": answer, "outcome": "completed"}
    if duration is not None:
        data["durationMs"] = duration
    return ev("session.result", data, **kw)


def rpc(rpc_id: int, server: str, tool: str, args: Any, *, error: bool = False) -> list[Event]:
    req = {"serverName": server, "message": {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
                                             "params": {"name": tool, "arguments": args}}}  # fmt: skip
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
    body["error" if error else "result"] = {"code": -1, "message": "x"} if error else {"content": []}
    return [ev("mcp.rpc.request", req), ev("mcp.rpc.response", {"serverName": server, "message": body})]


def by_id(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in results}
