"""Code judges for the quickstart eval (plain functions: `module:function` in eval.yaml)."""

from __future__ import annotations

from typing import Any


def mentions_expected(trial: Any) -> tuple[bool, str]:
    """Pass when the answer contains the case's expected value (case-insensitive)."""
    expected = str(trial.expected).lower()
    answer = (trial.answer or "").lower()
    if expected in answer:
        return True, f"answer mentions {trial.expected!r}"
    return False, f"answer does not mention {trial.expected!r}"


def prefer_correct(case: Any, a: Any, b: Any) -> tuple[str, str]:
    """Prefer the answer that mentions the expected value; fewer tool calls break a tie."""
    expected = str(case.expected).lower()
    a_ok = expected in (a.answer or "").lower()
    b_ok = expected in (b.answer or "").lower()
    if a_ok != b_ok:
        return ("A" if a_ok else "B"), "only one answer is correct"
    if len(a.tool_calls) != len(b.tool_calls):
        return ("A" if len(a.tool_calls) < len(b.tool_calls) else "B"), "fewer tool calls"
    return "tie", "equally good"
