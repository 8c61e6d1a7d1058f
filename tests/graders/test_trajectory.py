"""Opt-in trajectory analyses: hand-computed values, bounds, and reference evidence."""

from __future__ import annotations

import math
from typing import Any

import pytest
from gsession import by_id, call, ev, result, start

from mst.graders import OPT_IN_IDS, parse_graders_config, run_graders
from mst.graders.trajectory import MAX_ITEMS, _lz76, _max_phrases

ALL = parse_graders_config({gid: {} for gid in OPT_IN_IDS})


def grade(session: list[dict[str, Any]], expected: Any = None, config: Any = ALL) -> dict[str, dict[str, Any]]:
    return by_id(run_graders(session, config, expected=expected).results)


def names(*tools: str) -> list[dict[str, Any]]:
    return [e for i, t in enumerate(tools) for e in call(str(i), t)] + [result()]


ABABC = names("a", "b", "a", "b", "c")


def test_trajectory_analyses_are_opt_in() -> None:
    defaults = run_graders(ABABC, parse_graders_config({})).results
    assert not {r["id"] for r in defaults} & set(OPT_IN_IDS)
    only = run_graders(ABABC, parse_graders_config({"recurrence-rate": {}})).results
    assert "recurrence-rate" in {r["id"] for r in only}
    assert "event-entropy-rate" not in {r["id"] for r in only}


def test_recurrence_rate() -> None:
    assert grade(ABABC)["recurrence-rate"]["value"] == pytest.approx(2 / 10)


def test_recurrence_determinism_on_a_repeated_subsequence() -> None:
    assert grade(ABABC)["recurrence-determinism"]["value"] == pytest.approx(1.0)


def test_recurrence_determinism_with_isolated_recurrences() -> None:
    assert grade(names("a", "b", "c", "a", "x", "c"))["recurrence-determinism"]["value"] == 0.0


def test_recurrence_determinism_min_line_three() -> None:
    config = parse_graders_config({"recurrence-determinism": {"config": {"minLine": 3}}})
    # a b a b: the only diagonal line has length 2 < 3
    assert grade(names("a", "b", "a", "b"), config=config)["recurrence-determinism"]["value"] == 0.0


def test_recurrence_determinism_matches_brute_force() -> None:
    seq = "abcabcabxyabcaab"
    points = on_lines = 0
    n = len(seq)
    for i in range(n):
        for j in range(i + 1, n):
            if seq[i] != seq[j]:
                continue
            points += 1
            prev = i > 0 and seq[i - 1] == seq[j - 1]
            nxt = j + 1 < n and seq[i + 1] == seq[j + 1]
            on_lines += prev or nxt
    got = grade(names(*seq))["recurrence-determinism"]["value"]
    assert got == pytest.approx(on_lines / points)


def test_no_recurrence_makes_determinism_unavailable() -> None:
    r = grade(names("a", "b", "c"))["recurrence-determinism"]
    assert r["status"] == "unavailable" and "undefined" in r["message"]


def test_event_entropy_rate() -> None:
    assert grade(ABABC)["event-entropy-rate"]["value"] == pytest.approx(0.5 / math.log2(3))
    assert grade(names("a", "a", "a"))["event-entropy-rate"]["value"] == 0.0


def test_lempel_ziv_complexity() -> None:
    assert _lz76([0, 0, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 1]) == 6  # Lempel & Ziv's example
    assert _lz76([1, 2, 1, 2, 3]) == 3
    value = grade(ABABC)["lempel-ziv-trajectory-complexity"]["value"]
    # normalised by the most phrases possible (docs/graders.md): 5 steps over 3 states fit at most
    # a, b, c + one 2-symbol word + a last phrase = 5 phrases (was c·log_k(n)/n, which can exceed 1)
    assert _max_phrases(5, 3) == 5
    assert value == pytest.approx(3 / 5)


def test_state_revisit_probability() -> None:
    assert grade(ABABC)["state-revisit-probability"]["value"] == pytest.approx(0.4)


def test_symbols_config_switches_between_tools_and_calls() -> None:
    session = [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 2}), result()]
    by_call = grade(session)["state-revisit-probability"]["value"]
    by_tool_cfg = parse_graders_config({"state-revisit-probability": {"config": {"symbols": "tool"}}})
    by_tool = grade(session, config=by_tool_cfg)["state-revisit-probability"]["value"]
    assert (by_call, by_tool) == (0.0, 0.5)


def test_fewer_than_two_calls_is_unavailable() -> None:
    r = grade(names("a"))
    assert r["recurrence-rate"]["status"] == "unavailable"
    assert r["event-entropy-rate"]["status"] == "unavailable"


def test_inputs_over_the_bound_are_unavailable() -> None:
    session = [start(str(i), f"t{i % 3}") for i in range(MAX_ITEMS + 1)]
    expected = {"toolCalls": ["t0"], "states": ["t0"], "objectives": ["t0"]}
    results = grade(session, expected)
    for gid in OPT_IN_IDS:
        assert results[gid]["status"] == "unavailable", gid
        assert "5000" in results[gid]["message"], gid


def test_reference_over_the_bound_is_unavailable() -> None:
    results = grade(ABABC, {"toolCalls": ["a"] * (MAX_ITEMS + 1)})
    assert results["tool-wise-score"]["status"] == "unavailable"


# --- reference-dependent ------------------------------------------------------------------------

CALLS = [*call("1", "a", {"x": 1}), *call("2", "b"), *call("3", "a", {"x": 2}), result()]


def test_tool_wise_score() -> None:
    expected = {"toolCalls": [{"name": "a", "arguments": {"x": 2}}, "b", "d"]}
    assert grade(CALLS, expected)["tool-wise-score"]["value"] == pytest.approx(2 * 2 / (3 + 3))


def test_tool_wise_score_exact_references_do_not_steal_name_matches() -> None:
    session = [*call("1", "a", {"x": 1}), *call("2", "a", {"x": 2}), result()]
    expected = {"toolCalls": ["a", {"name": "a", "arguments": {"x": 1}}]}
    assert grade(session, expected)["tool-wise-score"]["value"] == 1.0


def test_tool_wise_score_both_empty_is_perfect() -> None:
    assert grade([result()], {"toolCalls": []})["tool-wise-score"]["value"] == 1.0


def test_trajectory_ndtw() -> None:
    expected = {"states": ["a", "c"]}
    session = names("a", "b", "c")
    assert grade(session, expected)["trajectory-ndtw"]["value"] == pytest.approx(math.exp(-1 / 2))
    assert grade(names("a", "c"), expected)["trajectory-ndtw"]["value"] == 1.0


def test_trajectory_ndtw_without_calls_is_zero_in_a_completed_session() -> None:
    assert grade([result()], {"states": ["a"]})["trajectory-ndtw"]["value"] == 0.0


def test_objective_coverage() -> None:
    session = [
        *call("1", "a"),
        *call("2", "b", {"k": 1, "j": 2}, success=False),
        *call("3", "b", {"k": 1}),
        result(answer="the answer is 42"),
    ]
    expected = {"objectives": ["a", {"tool": "b", "arguments": {"k": 1}}, {"answerContains": "42"}, {"tool": "z"}]}
    r = grade(session, expected)["objective-coverage"]
    assert r["value"] == pytest.approx(0.75)
    assert "unmet: 3" in r["message"]


def test_objective_needs_a_successful_call() -> None:
    session = [*call("1", "b", {"k": 1}, success=False), result()]
    assert grade(session, {"objectives": [{"tool": "b"}]})["objective-coverage"]["value"] == 0.0


def test_objective_coverage_unavailable_before_completion() -> None:
    r = grade([*call("1", "a")], {"objectives": ["a"]})["objective-coverage"]
    assert r["status"] == "unavailable"


@pytest.mark.parametrize("gid", ["tool-wise-score", "trajectory-ndtw", "objective-coverage"])
@pytest.mark.parametrize("expected", [None, "a plain answer", {"other": 1}])
def test_missing_reference_is_unavailable(gid: str, expected: Any) -> None:
    r = grade(ABABC, expected)[gid]
    assert r["status"] == "unavailable" and r["value"] is None


@pytest.mark.parametrize(
    ("expected", "gid", "fragment"),
    [
        ({"toolCalls": [42]}, "tool-wise-score", "expected.toolCalls[0]"),
        ({"toolCalls": "a"}, "tool-wise-score", "must be a list"),
        ({"states": []}, "trajectory-ndtw", "empty"),
        ({"objectives": [{"answerContains": ""}]}, "objective-coverage", "expected.objectives[0]"),
    ],
)
def test_malformed_reference_is_an_error_not_a_score(expected: Any, gid: str, fragment: str) -> None:
    r = grade(ABABC, expected)[gid]
    assert r["status"] == "error" and r["value"] is None
    assert fragment in r["message"]


def test_trajectory_uses_deduplicated_main_agent_calls() -> None:
    session = [*call("1", "a"), *call("2", "a", phase="judge"), *call("3", "b"), result()]
    assert grade(session)["state-revisit-probability"]["value"] == 0.0


def test_events_that_are_not_calls_do_not_enter_the_trajectory() -> None:
    session = [*call("1", "a"), ev("assistant.message", {"content": "x"}), *call("2", "a"), result()]
    assert grade(session)["recurrence-rate"]["value"] == 1.0
