"""Four grader rules, checked against the reference graders runtime (docs/graders.md: "What a tool call
is" and "Defaults, opt-ins, and `unavailable`")."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from gsession import by_id, call, ev, result, start

from mst.graders import parse_graders_config, run_graders
from mst.session.lookups import create_session_lookups, is_retry

DEFAULTS = parse_graders_config(None)
LZ = "lempel-ziv-trajectory-complexity"
LZ_ONLY = parse_graders_config({LZ: {}})


def grade(session: list[dict[str, Any]], config: Any = DEFAULTS) -> dict[str, dict[str, Any]]:
    return by_id(run_graders(session, config).results)


def names(*tools: str) -> list[dict[str, Any]]:
    return [e for i, t in enumerate(tools) for e in call(str(i), t)] + [result()]


# 1. A completion that does not say it succeeded did not succeed.


@pytest.mark.parametrize("data", [{}, {"output": "ok"}, {"success": None}, {"success": "true"}, {"isError": False}])
def test_a_completion_without_success_true_is_not_a_success(data: dict[str, Any]) -> None:
    session = [start("1", "a"), ev("tool.execution_complete", {"toolCallId": "1", **data}), result()]
    (tool_call,) = create_session_lookups(session).tool_calls
    assert tool_call.finished and not tool_call.success
    results = grade(session)
    assert results["tool-success-rate"]["value"] == 0.0
    assert results["tool-failure-count"]["value"] == 1.0


def test_explicit_success_still_counts() -> None:
    session = [start("1", "a"), ev("tool.execution_complete", {"toolCallId": "1", "success": True}), result()]
    assert grade(session)["tool-success-rate"]["value"] == 1.0


# 2. Retries that arrive as generic MCP events.


@pytest.mark.parametrize("data", [
    {"event": "retry"}, {"event": "RETRY", "serverName": "s"}, {"event": "mcp.retry"},
    {"message": "Retrying tools/call (attempt 2 of 3)"}, {"message": "request failed; will retry in 2 s"},
    {"msg": "retried after timeout"},
])  # fmt: skip
def test_retry_observations_in_mcp_events_are_counted(data: dict[str, Any]) -> None:
    assert is_retry("mcp.event", data)
    session = [*call("1", "a"), ev("mcp.event", data), ev("mcp.event", {"event": "connected"}), result()]
    assert grade(session)["retries"]["value"] == 1.0


@pytest.mark.parametrize("data", [{"event": "connected"}, {"message": "server ready"}, {"message": {"id": 1}},
                                  {"event": "retryCount", "retryCount": 3}])  # fmt: skip
def test_other_mcp_events_are_not_retries(data: dict[str, Any]) -> None:
    assert not is_retry("mcp.event", data)


def test_retry_events_of_other_phases_are_not_the_agents() -> None:
    session = [*call("1", "a"), ev("mcp.event", {"event": "retry"}, phase="detection"), ev("mcp.event", {}), result()]
    assert grade(session)["retries"]["value"] == 0.0


# 3. Lempel-Ziv complexity in [0, 1], low for a single repeated symbol.


def test_lempel_ziv_is_zero_for_a_single_repeated_symbol() -> None:
    for n in (2, 3, 10, 200):
        assert grade(names(*["a"] * n), LZ_ONLY)[LZ]["value"] == 0.0


def test_lempel_ziv_stays_in_its_declared_range_on_short_trajectories() -> None:
    """Short trajectories exceeded 1 before (``a a b`` gave 1.06, ``a b c a`` 1.26)."""
    for tools in (("a", "a", "b"), ("a", "b", "c", "a"), ("a", "b"), ("a", "b", "c"), ("a", "b", "a", "c", "b")):
        value = grade(names(*tools), LZ_ONLY)[LZ]["value"]
        assert 0.0 < value <= 1.0, (tools, value)


def test_lempel_ziv_range_holds_for_random_trajectories_and_orders_them() -> None:
    rng = random.Random(20261201)
    for _ in range(300):
        n, k = rng.randint(2, 60), rng.randint(1, 6)
        value = grade(names(*[f"t{rng.randrange(k)}" for _ in range(n)]), LZ_ONLY)[LZ]["value"]
        assert 0.0 <= value <= 1.0
    varied = grade(names(*[f"t{rng.randrange(4)}" for _ in range(64)]), LZ_ONLY)[LZ]["value"]
    periodic = grade(names(*["a", "b", "c", "d"] * 16), LZ_ONLY)[LZ]["value"]
    assert periodic < varied


def test_lempel_ziv_declares_its_range() -> None:
    from mst.graders.registry import BUILTINS

    grader = BUILTINS[LZ]
    assert (grader.min, grader.max) == (0.0, 1.0)
    assert not math.isnan(grade(names("a", "b"), LZ_ONLY)[LZ]["value"])


# 4. Gateway de-duplication of a ``server-tool`` record that names no server.


def test_gateway_record_named_server_hyphen_tool_without_server_is_a_duplicate() -> None:
    session = [
        start("1", "list_issues", {"repo": "x"}, server="github"),
        ev("tool.execution_complete", {"toolCallId": "1", "success": True}),
        ev("mcp.tool_call", {"toolName": "github-list_issues", "arguments": {"repo": "x"}, "status": "success"}),
        result(),
    ]
    lookups = create_session_lookups(session)
    assert [c.name for c in lookups.tool_calls] == ["github__list_issues"]
    assert lookups.gateway_duplicates == 1


def test_server_hyphen_tool_gateway_record_with_other_arguments_is_its_own_call() -> None:
    session = [
        start("1", "list_issues", {"repo": "x"}, server="github"),
        ev("tool.execution_complete", {"toolCallId": "1", "success": True}),
        ev("mcp.tool_call", {"toolName": "github-list_issues", "arguments": {"repo": "y"}, "status": "success"}),
        result(),
    ]
    assert create_session_lookups(session).gateway_duplicates == 0
