"""Per judge figures for summary.json: pass rate with its interval, tokens and cost (docs/grading.md).

A judge's pass rate is over the trials it gave a verdict on (its grading errors are not
verdicts), with a Wilson interval; tokens and cost add up the model calls its verdicts record.
A cost is known only when every call's was: one call without a price makes the total ``null``,
never an undercount.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from mst.runs.grading_records import CaseComparison, VerdictRecord
from mst.statistics.intervals import wilson_interval


@dataclass
class Usage:
    """Tokens and cost of judge calls; ``cost`` is None once a call had no known price."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0

    def add(self, calls: Mapping[str, Any]) -> None:
        self.input_tokens += int(calls.get("inputTokens") or 0)
        self.output_tokens += int(calls.get("outputTokens") or 0)
        price = calls.get("costUsd")
        self.cost = None if self.cost is None or price is None else self.cost + float(price)

    def merge(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost

    def to_json(self) -> dict[str, Any]:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "costUsd": None if self.cost is None else round(self.cost, 8)}


@dataclass
class _Judge:
    passed: int = 0
    graded: int = 0
    usage: Usage = field(default_factory=Usage)
    calls: bool = False  # a code judge makes no model calls: its cost is unknown (null), not zero


@dataclass
class JudgeTally:
    """One variant's judge verdicts, added one at a time while the summary walks its trials."""

    judges: dict[str, _Judge] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def add(self, verdict: VerdictRecord) -> None:
        if verdict.kind == "assertion":
            return
        judge = self.judges.get(verdict.judge)
        if judge is None:
            judge = self.judges[verdict.judge] = _Judge()
        judge.graded += 1
        judge.passed += verdict.passed
        if verdict.calls:
            judge.calls = True
            judge.usage.add(verdict.calls)
            self.usage.add(verdict.calls)

    def add_comparison(self, comparison: CaseComparison) -> None:
        """A pairwise judge's calls count towards the candidate's usage."""
        for pair in comparison.pairs:
            for calls in pair.usage:
                if "inputTokens" in calls:
                    self.usage.add(calls)

    def to_json(self, confidence: float) -> dict[str, Any]:
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        out = {}
        for name, j in sorted(self.judges.items()):
            low, high = wilson_interval(j.passed, j.graded, z) if j.graded else (None, None)
            out[name] = {"passed": j.passed, "graded": j.graded,
                         "passRate": j.passed / j.graded if j.graded else None, "interval": [low, high],
                         **(j.usage.to_json() if j.calls else {**j.usage.to_json(), "costUsd": None})}
        return out


def total(usages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's ``judgeUsage``: every variant's judge usage added up."""
    sum_ = Usage()
    for u in usages:
        sum_.add(u)
    return sum_.to_json()


__all__ = ["JudgeTally", "Usage", "total"]
