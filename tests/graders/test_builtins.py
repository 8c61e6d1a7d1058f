"""Hand-computed values for each of the ten default graders, including the edge cases."""

from __future__ import annotations

from typing import Any

import pytest
from gsession import by_id, call, done, ev, request, result, rpc, start

from mst.graders import DEFAULT_IDS, parse_graders_config, run_graders

DEFAULTS = parse_graders_config(None)


def grade(session: list[dict[str, Any]], **kw: Any) -> dict[str, dict[str, Any]]:
    return by_id(run_graders(session, DEFAULTS, **kw).results)


def value(session: list[dict[str, Any]], gid: str) -> Any:
    return grade(session)[gid]["value"]


def status(session: list[dict[str, Any]], gid: str) -> str:
    return str(grade(session)[gid]["status"])


# A small session everything below refers to:
#   calls: a{x:1} ok, a{x:1} ok (loop), b{} FAILED, c{} unfinished, sub-agent a{x:1} ok
#   model requests: 100/10, 300/20, 200/30 (input/output); judge request excluded
#   gateway duplicate of b; one retry observation; two safe outputs
SESSION = [
    ev("user.message", {"content": "go"}, ts=0),
    request(100, 10),
    *call("1", "a", {"x": 1}),
    *call("2", "a", {"x": 1}),
    request(300, 20),
    start("3", "srv__b", {}),
    *rpc(5, "srv", "b", {}, error=True),
    done("3", "srv__b", success=False),
    ev("mcp.rpc.retry", {"serverName": "srv"}),
    start("4", "c"),
    *call("1", "a", {"x": 1}, agent="sub"),
    request(200, 30),
    request(5000, 5000, phase="judge"),
    ev("safe_output.result", {"kind": "comment"}, phase="safe-output"),
    ev("safe_output.result", {"kind": "issue"}, phase="safe-output"),
    result(duration=4321),
]


def test_tool_success_rate() -> None:
    # 5 calls (gateway duplicate of b not counted): 3 succeeded
    assert value(SESSION, "tool-success-rate") == pytest.approx(3 / 5)
    assert "1 duplicate gateway records not counted" in grade(SESSION)["tool-success-rate"]["message"]


def test_tool_failure_count_includes_unfinished() -> None:
    assert value(SESSION, "tool-failure-count") == 2.0  # b failed, c unfinished


def test_retries() -> None:
    assert value(SESSION, "retries") == 1.0


def test_loops_three_identical_in_a_row_is_two() -> None:
    session = [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 1}), *call("3", "a", {"x": 1}), result()]
    assert value(session, "loops") == 2.0


def test_loops_in_the_mixed_session_are_per_agent() -> None:
    # main agent: a, a (loop), b, c; the sub-agent's a is its own stream → 1
    assert value(SESSION, "loops") == 1.0


def test_loops_compare_arguments_not_only_names() -> None:
    session = [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 2}), *call("3", "a", {"x": 2}), result()]
    assert value(session, "loops") == 1.0


def test_trajectory_efficiency() -> None:
    assert value(SESSION, "trajectory-efficiency") == pytest.approx(3 / 5)  # a, srv__b, c over 5


def test_execution_step_count_excludes_judge_requests() -> None:
    assert value(SESSION, "execution-step-count") == 3.0


def test_execution_duration() -> None:
    assert value(SESSION, "execution-duration") == 4321.0


def test_working_set_rebuild_factor() -> None:
    assert value(SESSION, "working-set-rebuild-factor") == pytest.approx(600 / 300)


def test_context_growth() -> None:
    assert value(SESSION, "context-growth") == pytest.approx((110 + 320 + 230) / 110)


def test_artifact_production() -> None:
    assert value(SESSION, "artifact-production") == 2.0


def test_all_ten_defaults_report_in_registry_order() -> None:
    assert [r["id"] for r in run_graders(SESSION, DEFAULTS).results] == list(DEFAULT_IDS)


# --- edge cases ---------------------------------------------------------------------------------


def test_no_tool_calls_makes_ratios_unavailable() -> None:
    session = [ev("user.message"), request(10, 1), result()]
    results = grade(session)
    assert results["tool-success-rate"]["status"] == "unavailable"
    assert results["tool-success-rate"]["value"] is None
    assert results["trajectory-efficiency"]["status"] == "unavailable"
    # counts are an observed 0 in a completed session
    assert results["tool-failure-count"]["value"] == 0.0
    assert results["loops"]["value"] == 0.0


def test_no_tool_calls_in_an_incomplete_session_makes_counts_unavailable() -> None:
    results = grade([ev("user.message"), request(10, 1)])
    assert results["tool-failure-count"]["status"] == "unavailable"
    assert results["loops"]["status"] == "unavailable"
    assert results["artifact-production"]["status"] == "unavailable"


def test_only_unfinished_calls() -> None:
    results = grade([start("1", "a"), start("2", "b")])
    assert results["tool-success-rate"]["value"] == 0.0
    assert results["tool-failure-count"]["value"] == 2.0


def test_retries_unavailable_without_mcp_events() -> None:
    assert status([*call("1", "a"), result()], "retries") == "unavailable"


def test_retries_zero_when_gateway_observed_none() -> None:
    assert value([*rpc(1, "s", "t", {}), result()], "retries") == 0.0


def test_retry_flags_and_attempts() -> None:
    session = [
        ev("mcp.tool_call", {"serverName": "s", "toolName": "t", "arguments": {}, "attempt": 2}),
        ev("mcp.tool_call", {"serverName": "s", "toolName": "t", "arguments": {}, "isRetry": True}),
        ev("mcp.tool_call", {"serverName": "s", "toolName": "t", "arguments": {}, "attempt": 1}),
        ev("mcp.retry", {}, phase="detection"),
    ]
    assert value(session, "retries") == 2.0


def test_missing_token_evidence_is_unavailable() -> None:
    results = grade([*call("1", "a"), ev("usage.report", {"inputTokens": 100}), result()])
    assert results["working-set-rebuild-factor"]["status"] == "unavailable"
    assert results["context-growth"]["status"] == "unavailable"
    assert results["execution-step-count"]["status"] == "unavailable"


def test_partial_token_evidence_is_unavailable_not_a_partial_sum() -> None:
    results = grade([request(100, 10), request(None, 5), result()])
    assert results["working-set-rebuild-factor"]["status"] == "unavailable"
    assert "1 of 2" in results["working-set-rebuild-factor"]["message"]
    assert results["context-growth"]["status"] == "unavailable"
    assert results["execution-step-count"]["value"] == 2.0


def test_zero_peak_or_first_request_is_unavailable() -> None:
    results = grade([request(0, 0), request(0, 0), result()])
    assert results["working-set-rebuild-factor"]["status"] == "unavailable"
    assert results["context-growth"]["status"] == "unavailable"


def test_context_growth_uses_total_when_recorded() -> None:
    session = [ev("model.request", {"totalTokens": 50}), ev("model.request", {"total_tokens": 150}), result()]
    assert value(session, "context-growth") == pytest.approx(4.0)


def test_firewall_telemetry_is_not_double_counted() -> None:
    session = [
        request(100, 0),
        ev("firewall.token_usage", {"input_tokens": 100, "output_tokens": 0}),
        request(300, 0),
        ev("firewall.token_usage", {"input_tokens": 300, "output_tokens": 0}),
        ev("usage.report", {"inputTokens": 400, "requests": 2}),
        result(),
    ]
    results = grade(session)
    assert results["execution-step-count"]["value"] == 2.0
    assert results["working-set-rebuild-factor"]["value"] == pytest.approx(400 / 300)


def test_duration_unavailable_without_evidence() -> None:
    assert status([ev("user.message")], "execution-duration") == "unavailable"


def test_nested_agent_calls_count_but_correlate_separately() -> None:
    session = [start("1", "a", agent="x"), start("1", "a", agent="y"), done("1", "a", agent="y"), result()]
    results = grade(session)
    assert results["tool-failure-count"]["value"] == 1.0  # x's call never completed
    assert results["tool-success-rate"]["value"] == 0.5


def test_default_threshold_on_success_rate() -> None:
    r = grade(SESSION)["tool-success-rate"]
    assert (r["threshold"], r["thresholdOutcome"], r["status"]) == (0.9, "missed", "fail")
    ok = grade([*call("1", "a"), result()])["tool-success-rate"]
    assert (ok["thresholdOutcome"], ok["status"]) == ("met", "pass")


def test_every_message_of_a_trial_without_tool_calls_is_pinned() -> None:
    """The measurements most trials get (no tool call, one model request), some of them made once
    and shared: each message, value and status exactly, for a completed session and twice over
    (a shared measurement must not carry anything from the trial graded before)."""
    completed = [ev("user.message"), request(10, 2), result(duration=5)]
    incomplete = [ev("user.message")]
    for _ in range(2):
        done_, open_ = grade(completed), grade(incomplete)
        assert {k: (r["value"], r["status"], r["message"]) for k, r in done_.items()} == {
            "tool-success-rate": (None, "unavailable", "no tool calls: a success rate over zero calls is undefined"),
            "tool-failure-count": (0.0, "pass", "no tool calls in a completed session: 0 failures"),
            "retries": (None, "unavailable", "no main-agent MCP events: retries cannot be observed"),
            "loops": (0.0, "pass", "no tool calls in a completed session: 0 loops"),
            "trajectory-efficiency": (None, "unavailable", "no tool calls: efficiency over zero calls is undefined"),
            "execution-step-count": (1.0, "pass", "1 model requests (from model.request)"),
            "execution-duration": (5.0, "pass", "5 ms (from session.result)"),
            "working-set-rebuild-factor": (1.0, "pass", "10 input tokens over 1 requests, peak 10"),
            "context-growth": (1.0, "pass", "12 tokens over 1 requests, first 12"),
            "artifact-production": (0.0, "pass", "0 safe-output results"),
        }
        assert {k: r["message"] for k, r in open_.items() if r["status"] == "unavailable"} == {
            "tool-success-rate": "no tool calls: a success rate over zero calls is undefined",
            "tool-failure-count": "no tool calls and no completion record: cannot tell whether calls happened",
            "retries": "no main-agent MCP events: retries cannot be observed",
            "loops": "no tool calls and no completion record: cannot tell whether calls happened",
            "trajectory-efficiency": "no tool calls: efficiency over zero calls is undefined",
            "execution-step-count": "no model-request records or request counts for the main agent",
            "execution-duration": "no recorded duration or timestamps for the main agent",
            "working-set-rebuild-factor": "no per-request token evidence for the main agent",
            "context-growth": "no per-request token evidence for the main agent",
            "artifact-production": "no safe-output evidence and no completion record",
        }


def test_working_set_factor_sums_and_peaks_in_any_order() -> None:
    session = [request(30, 1), request(100, 1), request(0, 1), request(70, 1), result()]
    r = grade(session)["working-set-rebuild-factor"]
    assert (r["value"], r["message"]) == (2.0, "200 input tokens over 4 requests, peak 100")
    r = grade([request(0, 1), request(0, 2), result()])["working-set-rebuild-factor"]
    assert (r["status"], r["message"]) == ("unavailable", "peak input tokens is 0: the factor has no scale")
