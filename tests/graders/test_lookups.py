"""Shared lookups: tool correlation, duplicate accounting, phase isolation, token precedence."""

from __future__ import annotations

import random

import pytest
from gsession import call, done, ev, request, result, rpc, start

from mst.session.lookups import create_session_lookups, normalise_tool_name, parse_usage


def test_index_by_type_holds_positions_in_order() -> None:
    session = [ev("user.message"), request(1, 1), ev("user.message"), "not an event", result()]
    lk = create_session_lookups(session)  # type: ignore[arg-type]
    assert lk.positions("user.message") == (0, 2)
    assert lk.positions("model.request") == (1,)
    assert lk.positions("nothing.here") == ()
    assert lk.size == 5


def test_lookups_are_read_only() -> None:
    lk = create_session_lookups([ev("user.message")])
    with pytest.raises(AttributeError):  # named tuples, like the records they hold
        lk.completed = True  # type: ignore[misc]
    with pytest.raises(AttributeError):
        lk.execution.duration_ms = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        lk.by_type["x"] = ()  # type: ignore[index]


def test_correlation_by_tool_call_id_out_of_order() -> None:
    session = [start("1", "a", {"x": 1}), start("2", "b"), done("2", "b", success=False), done("1", "a")]
    calls = create_session_lookups(session).tool_calls
    assert [(c.name, c.call_id, c.finished, c.success) for c in calls] == [
        ("a", "1", True, True),
        ("b", "2", True, False),
    ]
    assert calls[0].arguments == {"x": 1}
    assert (calls[0].start, calls[0].end) == (0, 3)


def test_fallback_matches_oldest_pending_start_with_same_name() -> None:
    session = [start(None, "a", {"n": 1}), start(None, "a", {"n": 2}), done(None, "a", success=False)]
    calls = create_session_lookups(session).tool_calls
    assert [c.arguments for c in calls] == [{"n": 1}, {"n": 2}]
    assert [(c.finished, c.success) for c in calls] == [(True, False), (False, False)]


def test_completion_with_unknown_id_may_match_an_id_less_start() -> None:
    session = [start(None, "a"), done("zz", "a")]
    calls = create_session_lookups(session).tool_calls
    assert len(calls) == 1 and calls[0].finished


def test_completion_without_start_is_its_own_call() -> None:
    calls = create_session_lookups([done("9", "orphan")]).tool_calls
    assert len(calls) == 1
    assert (calls[0].name, calls[0].finished, calls[0].success, calls[0].start) == ("orphan", True, True, None)


def test_unfinished_call_counts_as_failed() -> None:
    calls = create_session_lookups([start("1", "a")]).tool_calls
    assert (calls[0].finished, calls[0].success) == (False, False)


def test_nested_agents_scope_call_ids() -> None:
    session = [
        start("1", "a", agent="sub-1"),
        start("1", "b"),
        done("1", "b", success=False),
        done("1", "a", agent="sub-1"),
    ]
    calls = create_session_lookups(session).tool_calls
    assert [(c.name, c.agent_id, c.success) for c in calls] == [("a", "sub-1", True), ("b", None, False)]


def test_duration_from_timestamps_when_completion_has_none() -> None:
    session = [start("1", "a", ts=100), done("1", "a", ts=350), start("2", "b"), done("2", "b", duration=7)]
    calls = create_session_lookups(session).tool_calls
    assert [c.duration_ms for c in calls] == [250.0, 7.0]


@pytest.mark.parametrize(
    ("native", "server"),
    [("srv__lookup", None), ("mcp__srv__lookup", None), ("srv-lookup", None), ("lookup", "srv")],
)
def test_native_call_takes_precedence_over_gateway_duplicate(native: str, server: str | None) -> None:
    session = [
        start("1", native, {"q": 1, "k": 2}, server=server),
        *rpc(7, "srv", "lookup", {"k": 2, "q": 1}),
        ev("mcp.tool_call", {"serverName": "srv", "toolName": "lookup", "arguments": {"q": 1, "k": 2}}),
        done("1", native, server=server),
    ]
    lk = create_session_lookups(session)
    assert len(lk.tool_calls) == 1
    assert lk.tool_calls[0].source == "native"
    assert lk.gateway_duplicates == 2


def test_gateway_record_with_different_arguments_is_not_a_duplicate() -> None:
    session = [*call("1", "srv__lookup", {"q": 1}), *rpc(1, "srv", "lookup", {"q": 2})]
    lk = create_session_lookups(session)
    assert [c.source for c in lk.tool_calls] == ["native", "mcp.rpc"]
    assert lk.gateway_duplicates == 0


def test_duplicates_are_counted_as_a_multiset() -> None:
    session = [*call("1", "srv__t", {"a": 1}), *call("2", "srv__t", {"a": 1}), *rpc(1, "srv", "t", {"a": 1})]
    lk = create_session_lookups(session)
    assert len(lk.tool_calls) == 2 and lk.gateway_duplicates == 1


def test_gateway_only_calls_are_calls_and_unanswered_requests_fail() -> None:
    session = [*rpc(1, "srv", "t", {}), *rpc(2, "srv", "t", {}, error=True), rpc(3, "srv", "u", {})[0]]
    calls = create_session_lookups(session).tool_calls
    assert [(c.name, c.finished, c.success) for c in calls] == [
        ("srv__t", True, True),
        ("srv__t", True, False),
        ("srv__u", False, False),
    ]


def test_rpc_requests_other_than_tools_call_are_ignored() -> None:
    session = [ev("mcp.rpc.request", {"message": {"id": 1, "method": "tools/list"}})]
    assert create_session_lookups(session).tool_calls == ()


@pytest.mark.parametrize("phase", ["judge", "detection", "eval", "grading"])
def test_phase_isolation_excludes_non_agent_work(phase: str) -> None:
    session = [
        *call("1", "a"),
        *call("2", "b", phase=phase),
        request(10, 1),
        request(999, 99, phase=phase),
        ev("firewall.token_usage", {"input_tokens": 5}, phase=phase),
        result(duration=50),
        result(duration=99999, phase=phase),
    ]
    lk = create_session_lookups(session)
    assert [c.name for c in lk.tool_calls] == ["a"]
    stats = lk.execution
    assert stats.request_source == "model.request"
    assert [r.usage.input for r in stats.requests] == [10]
    assert stats.duration_ms == 50.0


def test_proxy_telemetry_takes_precedence_over_model_requests_and_aggregates() -> None:
    session = [
        request(100, 10),
        ev("firewall.token_usage", {"input_tokens": 7, "output_tokens": 1}),
        ev("firewall.token_usage", {"inputTokens": 8, "outputTokens": 2}),
        ev("usage.report", {"inputTokens": 1000, "outputTokens": 100, "requests": 9}),
    ]
    stats = create_session_lookups(session).execution
    assert stats.request_source == "firewall.token_usage"
    assert [(r.usage.input, r.usage.output) for r in stats.requests] == [(7, 1), (8, 2)]
    assert stats.request_count == 2
    assert stats.aggregate is not None and stats.aggregate.requests == 9


def test_aggregate_request_count_is_used_only_without_per_request_records() -> None:
    session = [ev("usage.report", {"input_tokens": 5, "request_count": 3}), ev("usage.report", {"requests": 4})]
    stats = create_session_lookups(session).execution
    assert stats.requests == () and stats.request_count == 4


def test_no_request_evidence_is_none_not_zero() -> None:
    stats = create_session_lookups([ev("user.message")]).execution
    assert stats.request_count is None and stats.duration_ms is None


def test_token_fields_accept_camel_snake_and_nested_usage() -> None:
    assert parse_usage({"inputTokens": 3, "output_tokens": 4}).tokens == 7
    assert parse_usage({"usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 5}}).tokens == 5
    assert parse_usage({"cache_read_input_tokens": 9, "cacheCreationInputTokens": 2}).cache_read == 9
    assert parse_usage({"input_tokens": 1, "inputTokens": 2}).input == 2  # mst's spelling wins
    assert parse_usage({"inputTokens": -1, "outputTokens": True, "totalTokens": 3.0}).input is None
    assert parse_usage({"inputTokens": -1, "outputTokens": True, "totalTokens": 3.0}).total == 3


def test_token_fields_are_the_first_valid_alias_in_table_order() -> None:
    """Mst's own spelling alone (read without ranks) and mixed spellings (ranked) give what the
    alias table says: per field, the first alias in its order with a valid count."""
    from mst.session.lookups.usage import _TOKEN_ALIASES

    rng = random.Random(7)
    aliases = [a for names in _TOKEN_ALIASES.values() for a in names]
    first = [names[0] for names in _TOKEN_ALIASES.values()]
    values = [0, 1, 7, -1, 2.0, 2.5, True, None, "3"]
    for round_ in range(3000):
        names = rng.sample(first if round_ % 2 else aliases, rng.randint(1, 6))
        data = {name: rng.choice(values) for name in names}
        expected = []
        for spellings in _TOKEN_ALIASES.values():
            valid = [data[a] for a in spellings if a in data and _valid_count(data[a])]
            expected.append(int(valid[0]) if valid else None)
        assert list(parse_usage(data)) == expected, data


def _valid_count(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
        isinstance(value, float) and value >= 0 and value.is_integer())


def test_duration_falls_back_to_main_agent_timestamp_span() -> None:
    session = [ev("user.message", ts=10), ev("assistant.message", ts=70), ev("x.y", phase="judge", ts=900)]
    stats = create_session_lookups(session).execution
    assert (stats.duration_ms, stats.duration_source) == (60.0, "provenance.timestampMs")
    assert create_session_lookups([ev("user.message", ts=10)]).execution.duration_ms is None


def test_nested_result_does_not_replace_top_level_duration() -> None:
    session = [result(duration=500), result(duration=20, agent="sub")]
    assert create_session_lookups(session).execution.duration_ms == 500.0


def test_completion_record_marks_session_complete() -> None:
    assert create_session_lookups([result()]).completed
    assert create_session_lookups([ev("execution.result", {})]).completed
    assert not create_session_lookups([result(phase="judge")]).completed


def test_normalise_tool_name_spellings() -> None:
    assert normalise_tool_name("mcp__gh__list", None) == "gh__list"
    assert normalise_tool_name("gh__list", None) == "gh__list"
    assert normalise_tool_name("gh-list", "gh") == "gh__list"
    assert normalise_tool_name("list", "gh") == "gh__list"
    assert normalise_tool_name("bash", None) == "bash"


def test_id_less_completion_matches_oldest_start_even_when_starts_have_ids() -> None:
    session = [start("1", "a"), start("2", "a"), done(None, "a"), start("3", "a"), done(None, "a"), done("3", "a")]
    calls = create_session_lookups(session).tool_calls
    assert [(c.call_id, c.finished) for c in calls] == [("1", True), ("2", True), ("3", True)]
    assert [c.end for c in calls] == [2, 4, 5]


def test_other_spellings_of_native_fields_are_accepted() -> None:
    session = [
        ev("tool.execution_start", {"tool_call_id": "x", "tool_name": "t", "arguments": {"k": 1}, "server": "s"}),
        ev("tool.execution_complete", {"callId": "x", "success": False}),
    ]
    [c] = create_session_lookups(session).tool_calls
    assert (c.name, c.arguments, c.call_id, c.finished, c.success) == ("s__t", {"k": 1}, "x", True, False)


def test_dict_subclasses_are_events_too() -> None:
    from collections import OrderedDict

    event = OrderedDict(start("1", "a"))
    event["provenance"] = OrderedDict(phase="judge", component="c")
    lk = create_session_lookups([event, OrderedDict(done("2", "b"))])
    assert lk.positions("tool.execution_start") == (0,)
    assert [c.name for c in lk.tool_calls] == ["b"]  # the judge-phase start is excluded


def test_copilot_style_arguments_field_is_read() -> None:
    session = [ev("tool.execution_start", {"toolCallId": "1", "toolName": "t", "arguments": {"k": 2}})]
    assert create_session_lookups(session).tool_calls[0].arguments == {"k": 2}


def test_a_call_mst_rejected_is_marked_and_never_reached_a_server() -> None:
    refused = ev("tool.execution_complete", {"toolCallId": "b", "toolName": "nope", "success": False,
                                             "rejected": True})
    session = [start("a", "read"), done("a"), start("b", "nope"), refused,
               ev("tool.execution_start", {"toolCallId": "c", "toolName": "task", "rejected": True})]
    calls = create_session_lookups(session).tool_calls
    assert [(c.name, c.rejected, c.reached_server) for c in calls] == [
        ("read", False, True), ("nope", True, False), ("task", True, False)]


def test_uninterpreted_mcp_types_count_past_the_kept_type_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a type is an uninterpreted ``mcp.*`` one is kept per type for the next sessions,
    up to a bound; types beyond it are still counted, and the bound holds."""
    from mst.session.lookups import build

    monkeypatch.setattr(build, "_OTHER_MCP", {})  # the process's own flags stay as they were
    kept = build._OTHER_MCP_KEPT
    session = [ev(f"mcp.made_up_{n}", {"attempt": 2}) for n in range(kept + 50)]
    session += [ev("mcp.retry"), ev("user.message"), ev("mcp.other", phase="judge")]
    for _ in range(2):  # the second time from the kept flags (those there are)
        lk = create_session_lookups(session)
        assert (lk.mcp_events, lk.retry_observations) == (kept + 51, kept + 51)
        assert len(build._OTHER_MCP) <= kept


def test_lookups_as_script_data_keep_their_shape() -> None:
    """Custom graders get the lookups as camelCase data (named tuples, like the records)."""
    from mst.graders.custom.js import lookups_data

    lk = create_session_lookups([request(3, 4), *call("1", "a", {"k": 1}), result(duration=7)])
    data = lookups_data(lk)
    keys = "size byType toolCalls gatewayDuplicates execution completed mcpEvents retryObservations"
    assert list(data) == keys.split()
    assert data["execution"]["durationMs"] == 7.0 and data["execution"]["requestCount"] == 1
    assert data["execution"]["requests"][0]["usage"]["input"] == 3
    assert data["toolCalls"][0]["name"] == "a" and data["byType"]["model.request"] == (0,)


def test_tool_collectors_are_made_only_for_sessions_with_their_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session without tool calls or MCP events makes neither tool collector (most trials'),
    and one that has them makes each at its first event, with the same lookups as before."""
    import mst.session.lookups.build as build

    made: list[str] = []
    for name in ("_Correlator", "_Gateway"):
        cls = getattr(build, name)
        monkeypatch.setattr(build, name, lambda *a, _cls=cls, _name=name: made.append(_name) or _cls(*a))
    plain = create_session_lookups([request(5, 1), result(duration=3)])
    assert made == [] and plain.tool_calls == () and (plain.mcp_events, plain.retry_observations) == (0, 0)
    assert plain.execution.duration_ms == 3.0 and plain.completed
    retried = create_session_lookups([ev("mcp.retry", {"attempt": 2}), result()])
    assert made == ["_Gateway"] and (retried.mcp_events, retried.retry_observations) == (1, 1)
    made.clear()
    both = create_session_lookups([*call("1", "a"), *rpc(2, "srv", "b", {}), result()])
    assert sorted(made) == ["_Correlator", "_Gateway"] and len(both.tool_calls) == 2 and both.mcp_events == 2
