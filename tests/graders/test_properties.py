"""Property tests: on arbitrary well-formed sessions graders never fail, never mutate, agree."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mst.graders import BUILTINS, parse_graders_config, run_graders
from mst.session.events import is_event
from mst.session.lookups import create_session_lookups

ALL = parse_graders_config({gid: {} for gid in BUILTINS})

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.text(max_size=5))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)
names = st.sampled_from(["a", "b", "srv__t", "mcp__srv__t", "srv-t", "t"])
ids = st.one_of(st.none(), st.sampled_from(["1", "2", "3"]), st.integers(0, 3))
tokens = st.one_of(st.none(), st.integers(-1, 5000), st.floats(0, 10), st.booleans(), st.text(max_size=2))
phases = st.sampled_from(["agent", "judge", "detection", "eval", "grading", "", None, "safe-output"])


@st.composite
def data_for(draw: st.DrawFn, etype: str) -> dict[str, Any]:
    if etype in ("tool.execution_start", "tool.execution_complete", "mcp.tool_call"):
        data: dict[str, Any] = {"toolCallId": draw(ids), "toolName": draw(st.one_of(names, st.none()))}
        if draw(st.booleans()):
            data["input"] = draw(json_value)
        if draw(st.booleans()):
            data["success"] = draw(st.one_of(st.booleans(), json_leaf))
        if draw(st.booleans()):
            data["mcpServerName"] = draw(st.one_of(st.just("srv"), json_leaf))
        if draw(st.booleans()):
            data["durationMs"] = draw(tokens)
        return data
    if etype in ("mcp.rpc.request", "mcp.rpc.response"):
        msg = {"id": draw(ids), "method": draw(st.sampled_from(["tools/call", "tools/list", None])),
               "params": draw(st.one_of(st.fixed_dictionaries({"name": names, "arguments": json_value}), json_value)),
               "result": draw(json_value)}  # fmt: skip
        return {"serverName": draw(st.one_of(st.just("srv"), st.none())), "message": msg}
    if etype in ("model.request", "firewall.token_usage", "usage.report", "session.result", "execution.result"):
        keys = ["inputTokens", "input_tokens", "outputTokens", "output_tokens", "totalTokens", "requests",
                "durationMs", "answer"]  # fmt: skip
        data = {k: draw(tokens) for k in draw(st.lists(st.sampled_from(keys), max_size=4, unique=True))}
        if draw(st.booleans()):
            data["usage"] = {"input_tokens": draw(tokens)}
        return data
    return draw(st.dictionaries(st.text(max_size=5), json_value, max_size=3))


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    etype = draw(
        st.sampled_from(
            ["tool.execution_start", "tool.execution_complete", "mcp.tool_call", "mcp.rpc.request",
             "mcp.rpc.response", "mcp.retry", "model.request", "firewall.token_usage", "usage.report",
             "session.result", "execution.result", "safe_output.result", "assistant.message", "user.message",
             "x.unknown"]
        )
    )  # fmt: skip
    prov: dict[str, Any] = {"component": "c"}
    phase = draw(phases)
    if phase is not None:
        prov["phase"] = phase
    if draw(st.booleans()):
        prov["timestampMs"] = draw(tokens)
    event: dict[str, Any] = {"type": etype, "data": draw(data_for(etype)), "provenance": prov}
    if draw(st.booleans()):
        event["agentId"] = draw(st.one_of(st.sampled_from(["s1", "s2"]), json_leaf))
    return event


sessions = st.lists(events(), max_size=40)
expected_values = st.one_of(
    st.none(),
    json_value,
    st.fixed_dictionaries(
        {
            "toolCalls": st.lists(st.one_of(names, st.fixed_dictionaries({"name": names, "arguments": json_value}))),
            "states": st.lists(names, min_size=1, max_size=5),
            "objectives": st.lists(
                st.one_of(names, st.fixed_dictionaries({"tool": names}), st.just({"answerContains": "x"})),
                min_size=1,
                max_size=4,
            ),
        }
    ),
)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(sessions, expected_values)
def test_graders_never_error_on_well_formed_sessions(session: list[dict[str, Any]], expected: Any) -> None:
    assert all(is_event(e) for e in session)
    run = run_graders(session, ALL, expected=expected)
    assert [r for r in run.results if r["status"] == "error"] == []
    for r in run.results:
        assert r["value"] is None or r["status"] in ("pass", "fail")


@SETTINGS
@given(sessions, expected_values)
def test_graders_never_mutate_their_input(session: list[dict[str, Any]], expected: Any) -> None:
    before = orjson.dumps([session, expected])
    snapshot = copy.deepcopy((session, expected))
    run_graders(session, ALL, expected=expected)
    assert orjson.dumps([session, expected]) == before
    assert (session, expected) == snapshot


@SETTINGS
@given(sessions)
def test_grading_is_deterministic(session: list[dict[str, Any]]) -> None:
    first = run_graders(session, ALL)
    second = run_graders(copy.deepcopy(session), ALL)
    assert orjson.dumps(first.results) == orjson.dumps(second.results)


@SETTINGS
@given(sessions)
def test_lookup_invariants(session: list[dict[str, Any]]) -> None:
    lk = create_session_lookups(session)
    native_events = sum(e["type"] in ("tool.execution_start", "tool.execution_complete") for e in session)
    native_calls = [c for c in lk.tool_calls if c.source == "native"]
    assert len(native_calls) <= native_events
    assert all(c.finished or not c.success for c in lk.tool_calls)
    assert sum(len(v) for v in lk.by_type.values()) == len(session)
    assert [c.position for c in lk.tool_calls] == sorted(c.position for c in lk.tool_calls)
