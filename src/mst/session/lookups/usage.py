"""Token usage and model requests of the main agent: alias parsing and the precedence of
per-request telemetry over aggregate reports (see the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mst.session.events import MODEL_REQUEST, SESSION_RESULT
from mst.session.lookups.fields import _duration, _timestamp, is_main_agent
from mst.session.lookups.records import (
    EXECUTION_RESULT,
    FIREWALL_TOKEN_USAGE,
    USAGE_REPORT,
    ExecutionStats,
    ModelRequest,
    TokenUsage,
)

_TOKEN_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "input": ("inputTokens", "input_tokens", "promptTokens", "prompt_tokens"),
    "output": ("outputTokens", "output_tokens", "completionTokens", "completion_tokens"),
    "total": ("totalTokens", "total_tokens"),
    "cache_read": (
        "cacheReadTokens",
        "cache_read_tokens",
        "cacheReadInputTokens",
        "cache_read_input_tokens",
        "cachedInputTokens",
        "cached_input_tokens",
    ),
    "cache_write": (
        "cacheWriteTokens",
        "cache_write_tokens",
        "cacheCreationInputTokens",
        "cache_creation_input_tokens",
        "cacheCreationTokens",
        "cache_creation_tokens",
    ),
    "requests": ("requests", "requestCount", "request_count", "numRequests", "num_requests"),
}
_ALIAS_FIELD: Final = {
    alias: (index, rank) for index, aliases in enumerate(_TOKEN_ALIASES.values()) for rank, alias in enumerate(aliases)
}
_USAGE_FIELDS: Final = len(_TOKEN_ALIASES)
_NO_RANK: Final = 1 << 30


_NO_USAGE: Final = TokenUsage()
_RESULT_USAGE: Final = f"{SESSION_RESULT}.usage"  # the aggregate's source when a result gave it
_new_usage = _new_tuple = tuple.__new__
assert TokenUsage._fields == tuple(_TOKEN_ALIASES), "usage fields and alias table must align"


def _count(value: Any) -> int | None:
    """A token count: a non-negative integer (an integral float is accepted, bools are not)."""
    if value.__class__ is int:
        return value if value >= 0 else None  # type: ignore[no-any-return]
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


_ALIASES: Final = frozenset(_ALIAS_FIELD)


_FIRST_INDEX: Final = {aliases[0]: index for index, aliases in enumerate(_TOKEN_ALIASES.values())}
_FIRST: Final = frozenset(_FIRST_INDEX)  # each field's first alias: what mst's own clients write


def _usage_fields(src: Mapping[str, Any], keys: set[Any] | frozenset[Any]) -> list[int | None]:
    """The fields ``src`` gives, ``keys`` being its keys that are aliases (not empty); where
    aliases collide, the earliest in the table wins. Only those keys are visited (the caller
    found them with one C-level set intersection), which matters at one record per model request
    and per trial graded. When each key is its field's first alias (mst's own transcripts), no
    two can collide, and no ranks are kept (a third of the call's cost, bench/perf16_gcompute.md)."""
    values: list[int | None] = [None] * _USAGE_FIELDS
    if keys <= _FIRST:
        first = _FIRST_INDEX
        for key in keys:
            if key.__class__ is str:  # a str subclass equal to an alias is not one
                raw = src[key]
                values[first[key]] = raw if raw.__class__ is int and raw >= 0 else _count(raw)
        return values
    ranks = [_NO_RANK] * _USAGE_FIELDS
    for key in keys:
        if key.__class__ is not str:
            continue
        index, rank = _ALIAS_FIELD[key]
        if rank < ranks[index]:
            raw = src[key]
            value = raw if raw.__class__ is int and raw >= 0 else _count(raw)
            if value is not None:
                values[index], ranks[index] = value, rank
    return values


def parse_usage(data: Mapping[str, Any]) -> TokenUsage:
    """Token usage in camelCase or snake_case, directly in ``data`` or, for fields ``data``
    lacks, in ``data.usage``. Each of the two is read only when it names a field (a
    ``session.result`` has its usage only in ``data.usage``: its own keys are matched once, in C)."""
    keys = _ALIASES.intersection(data)
    values = _usage_fields(data, keys) if keys else None
    nested = data.get("usage")
    if nested.__class__ is dict:
        inner_keys = _ALIASES.intersection(nested)
        if inner_keys:
            inner = _usage_fields(nested, inner_keys)
            values = inner if values is None else [v if v is not None else w
                                                   for v, w in zip(values, inner, strict=True)]
    return _NO_USAGE if values is None else _new_usage(TokenUsage, values)  # type: ignore[no-any-return]


class _Usage:
    """Collects model-request and usage evidence of the main agent during the pass."""

    __slots__ = ("completed", "firewall", "model", "report", "result_duration", "result_source", "result_usage")

    def __init__(self) -> None:
        self.firewall: list[ModelRequest] = []
        self.model: list[ModelRequest] = []
        self.report: TokenUsage | None = None
        self.result_usage: TokenUsage | None = None
        self.result_duration: float | None = None
        self.result_source: str | None = None
        self.completed = False

    @staticmethod
    def _request(pos: int, data: Mapping[str, Any]) -> ModelRequest:
        model, value = data.get("model"), data.get("durationMs")  # _duration's common case inlined
        duration = float(value) if value.__class__ is int and value >= 0 else _duration(data)
        usage = parse_usage(data)
        return _new_tuple(ModelRequest, (pos, usage, duration, model if model.__class__ is str else None))  # type: ignore[no-any-return]

    def firewall_request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.firewall.append(self._request(pos, data))

    def model_request(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.model.append(self._request(pos, data))

    def report_usage(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """The last aggregate report wins: reports are cumulative snapshots, not increments."""
        usage = parse_usage(data)
        if not usage.empty:
            self.report = usage

    def session_result(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self._result(SESSION_RESULT, event, data)

    def execution_result(self, pos: int, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self._result(EXECUTION_RESULT, event, data)

    def _result(self, event_type: str, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """A completion record. A nested agent's result describes part of the work; only a
        top-level one (no ``agentId``) gives the whole agent's duration and usage, unless nothing
        else exists."""
        self.completed = True
        agent = event.get("agentId")  # _agent, inlined (as _duration's common case below)
        if agent.__class__ is str and agent and self.result_source is not None:
            return
        usage = parse_usage(data)
        if usage is not _NO_USAGE and not usage.empty:
            self.result_usage = usage
        value = data.get("durationMs")
        duration = float(value) if value.__class__ is int and value >= 0 else _duration(data)
        if duration is not None:
            self.result_duration = duration
            self.result_source = event_type

    def stats(self, session: Sequence[Any]) -> ExecutionStats:
        requests: list[ModelRequest]
        if self.firewall:
            requests, source = self.firewall, FIREWALL_TOKEN_USAGE
        elif self.model:
            requests, source = self.model, MODEL_REQUEST
        else:
            requests, source = [], None
        aggregate, agg_source = self.report, USAGE_REPORT if self.report is not None else None
        if aggregate is None and self.result_usage is not None:
            aggregate, agg_source = self.result_usage, _RESULT_USAGE
        duration, dur_source = self.result_duration, self.result_source
        if duration is None:
            duration = _timestamp_span(session)
            dur_source = "provenance.timestampMs" if duration is not None else None
        return _new_tuple(ExecutionStats, (tuple(requests), source, aggregate, agg_source, duration, dur_source))  # type: ignore[no-any-return]


def _timestamp_span(session: Sequence[Any]) -> float | None:
    """Last minus first main-agent timestamp, when at least two were recorded.

    Only used when no explicit duration exists. It is an observed lower bound of the agent's
    wall time, which is what the metric means by "observed duration"; one timestamp alone gives
    no span, so it yields None rather than 0.
    """
    first: float | None = None
    last: float | None = None
    seen = 0
    for event in session:
        if not isinstance(event, dict) or not is_main_agent(event):
            continue
        ts = _timestamp(event)
        if ts is None:
            continue
        seen += 1
        first = ts if first is None else min(first, ts)
        last = ts if last is None else max(last, ts)
    if seen < 2 or first is None or last is None:
        return None
    return last - first
