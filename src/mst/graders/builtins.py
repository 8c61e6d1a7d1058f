"""The ten default built-in graders (docs/graders.md, "Defaults"): fast, linear, enabled unless disabled.

Each reads only the shared lookups (artifact-production also the event-type index), so
grading a million-event session costs one pass for the lookups and a few passes over the much
smaller lists of calls and requests.

The common rule: **missing evidence is unavailable**. A ratio over zero calls is undefined; a
count is reported as 0 only when the session shows that what it counts could have been observed
(for tool calls: the agent left a completion record, so its event stream is whole); token metrics
need per-request token evidence on *every* request, because a partial sum is a different number
from the one the metric defines.
"""

from __future__ import annotations

from typing import Any, Final

from mst.graders.base import BuiltinGrader, GraderInput, Measurement, measured, unavailable
from mst.session.lookups import SAFE_OUTPUT_RESULT, SessionLookups


def _calls_note(lookups: SessionLookups) -> str:
    if lookups.gateway_duplicates:
        return f" ({lookups.gateway_duplicates} duplicate gateway records not counted)"
    return ""


# Measurements that depend on nothing but the case they describe are made once (they are
# immutable): most trials make no tool call, and making the same measurement again for every
# trial was a third of the defaults' computation (docs/graders.md, "Defaults").
_CALLS_UNKNOWN: Final = unavailable("no tool calls and no completion record: cannot tell whether calls happened")


def _zero_calls(counted: str) -> Measurement:
    return measured(0, f"no tool calls in a completed session: 0 {counted}")


def _no_calls(lookups: SessionLookups, zero: Measurement) -> Measurement:
    """Zero calls is an observed 0 (``zero``, see :func:`_zero_calls`) only when the agent's
    stream is known to be complete."""
    return zero if lookups.completed else _CALLS_UNKNOWN


_NO_FAILURES: Final = _zero_calls("failures")
_NO_LOOPS: Final = _zero_calls("loops")
_NO_RATE: Final = unavailable("no tool calls: a success rate over zero calls is undefined")
_NO_EFFICIENCY: Final = unavailable("no tool calls: efficiency over zero calls is undefined")
_NO_MCP: Final = unavailable("no main-agent MCP events: retries cannot be observed")
_NO_STEPS: Final = unavailable("no model-request records or request counts for the main agent")
_NO_DURATION: Final = unavailable("no recorded duration or timestamps for the main agent")


def tool_success_rate(inp: GraderInput) -> Measurement:
    """Successful / total calls. Unfinished calls count as failures (docs/graders.md, "What a
    tool call is"): a call that never reported a result did not deliver one. Zero calls →
    unavailable: 0/0 is not 100%."""
    calls = inp.lookups.tool_calls
    if not calls:
        return _NO_RATE
    ok = sum(1 for c in calls if c.success)
    return measured(ok / len(calls), f"{ok} of {len(calls)} tool calls succeeded{_calls_note(inp.lookups)}")


def tool_failure_count(inp: GraderInput) -> Measurement:
    """Failed plus unfinished calls, after native-over-gateway deduplication."""
    calls = inp.lookups.tool_calls
    if not calls:
        return _no_calls(inp.lookups, _NO_FAILURES)
    unfinished = sum(1 for c in calls if not c.finished)
    failed = sum(1 for c in calls if c.finished and not c.success)
    msg = f"{failed} failed and {unfinished} unfinished of {len(calls)} tool calls{_calls_note(inp.lookups)}"
    return measured(failed + unfinished, msg)


def retries(inp: GraderInput) -> Measurement:
    """Retry observations in main-agent ``mcp.*`` events, counted by the lookups pass (what counts
    as one is defined by :func:`mst.session.lookups.is_retry`). Without any main-agent MCP event
    the gateway was not observing, so 0 would be a guess: unavailable."""
    lookups = inp.lookups
    seen = lookups.mcp_events
    if seen == 0:
        return _NO_MCP
    found = lookups.retry_observations
    return measured(found, f"{found} retry observations in {seen} main-agent MCP events")


def loops(inp: GraderInput) -> Measurement:
    """Calls whose tool name and arguments equal the previous call's (three identical calls in a
    row → 2). "Previous" is within the same agent: interleaved sub-agents are separate streams,
    and one agent repeating another's call is not a loop."""
    calls = inp.lookups.tool_calls
    if not calls:
        return _no_calls(inp.lookups, _NO_LOOPS)
    last: dict[str | None, tuple[str, str]] = {}
    count = 0
    for call in calls:
        key = (call.name, call.args_key)
        if last.get(call.agent_id) == key:
            count += 1
        last[call.agent_id] = key
    return measured(count, f"{count} of {len(calls)} calls repeated the previous call exactly")


def trajectory_efficiency(inp: GraderInput) -> Measurement:
    """Distinct tool names / calls; zero calls → unavailable (the ratio is undefined)."""
    calls = inp.lookups.tool_calls
    if not calls:
        return _NO_EFFICIENCY
    distinct = len({c.name for c in calls})
    return measured(distinct / len(calls), f"{distinct} distinct tools over {len(calls)} calls")


# A run's step counts take few values (a count and its source): each measurement is made once
# and shared, so the entry made of it is too (graders/results.py ``_entries``). Bounded: past it,
# a new count is measured each time.
_STEPS: Final[dict[tuple[int, str | None], Measurement]] = {}
_STEPS_KEPT: Final = 1024


def execution_step_count(inp: GraderInput) -> Measurement:
    """Observed model requests: per-request records, else an aggregate report's request count."""
    stats = inp.lookups.execution
    count = stats.request_count
    if count is None:
        return _NO_STEPS
    source = stats.request_source or stats.aggregate_source
    key = (count, source)
    found = _STEPS.get(key)
    if found is None:
        found = measured(count, f"{count} model requests (from {source})")
        if len(_STEPS) < _STEPS_KEPT:
            _STEPS[key] = found
    return found


def execution_duration(inp: GraderInput) -> Measurement:
    """Observed main-agent duration in ms: an explicit ``durationMs`` on the agent's result, else
    the span of its timestamps; never a clock reading taken while grading."""
    stats = inp.lookups.execution
    duration = stats.duration_ms
    if duration is None:
        return _NO_DURATION
    return measured(duration, f"{duration:g} ms (from {stats.duration_source})")


_NO_REQUESTS: Final = unavailable("no per-request token evidence for the main agent")


def _counts(values: list[Any], kind: str) -> list[int] | Measurement:
    """Per-request token counts of one kind (``values``, one per request, None where a request
    lacks it), or the reason they cannot be used."""
    if None in values:  # one scan in C; the count only for the message
        return unavailable(f"{values.count(None)} of {len(values)} model requests lack {kind} token counts")
    return values


def working_set_rebuild_factor(inp: GraderInput) -> Measurement:
    """Σ per-request input tokens / the largest single one: how many times the agent re-sent its
    working set. A peak of 0 gives no scale, so the factor is unavailable rather than infinite."""
    requests = inp.lookups.execution.requests
    if not requests:
        return _NO_REQUESTS
    values = _counts([r.usage.input for r in requests], "input")
    if isinstance(values, Measurement):
        return values
    total = peak = 0
    for value in values:  # sum and peak in one pass (counts are never negative)
        total += value
        if value > peak:
            peak = value
    if peak == 0:
        return unavailable("peak input tokens is 0: the factor has no scale")
    return measured(total / peak, f"{total} input tokens over {len(values)} requests, peak {peak}")


def context_growth(inp: GraderInput) -> Measurement:
    """Σ per-request total tokens / the first request's. First request of 0 tokens → unavailable."""
    requests = inp.lookups.execution.requests
    if not requests:
        return _NO_REQUESTS
    values = _counts([r.usage.tokens for r in requests], "total")
    if isinstance(values, Measurement):
        return values
    if values[0] == 0:
        return unavailable("the first request has 0 tokens: growth has no base")
    total = sum(values)
    return measured(total / values[0], f"{total} tokens over {len(values)} requests, first {values[0]}")


def artifact_production(inp: GraderInput) -> Measurement:
    """``safe_output.result`` events, from any phase (safe outputs are processed after the agent).
    0 needs a completed session or some safe-output activity; otherwise it is unavailable."""
    lookups = inp.lookups
    count = len(lookups.positions(SAFE_OUTPUT_RESULT))
    observed = lookups.completed or any(t.startswith("safe_output.") for t in lookups.by_type)
    if count == 0:
        return _NO_ARTIFACTS if observed else _ARTIFACTS_UNKNOWN
    return measured(count, f"{count} safe-output results")


_NO_ARTIFACTS: Final = measured(0, "0 safe-output results")
_ARTIFACTS_UNKNOWN: Final = unavailable("no safe-output evidence and no completion record")


DEFAULT_GRADERS: tuple[BuiltinGrader, ...] = (
    BuiltinGrader(
        "tool-success-rate", "Tool success rate", "Successful tool calls / total tool calls",
        "ratio", "higher", tool_success_rate, True, threshold=0.9, min=0.0, max=1.0,
    ),
    BuiltinGrader(
        "tool-failure-count", "Tool failure count", "Failed or unfinished tool calls",
        "count", "lower", tool_failure_count, True, min=0.0,
    ),
    BuiltinGrader(
        "retries", "Retries", "Retry observations in main-agent MCP events",
        "count", "lower", retries, True, min=0.0,
    ),
    BuiltinGrader(
        "loops", "Loops", "Consecutive calls with identical tool names and arguments",
        "count", "lower", loops, True, min=0.0,
    ),
    BuiltinGrader(
        "trajectory-efficiency", "Trajectory efficiency", "Distinct tool names / total calls",
        "ratio", "higher", trajectory_efficiency, True, min=0.0, max=1.0,
    ),
    BuiltinGrader(
        "execution-step-count", "Execution step count", "Observed model request count",
        "count", "lower", execution_step_count, True, min=0.0,
    ),
    BuiltinGrader(
        "execution-duration", "Execution duration", "Observed duration in milliseconds",
        "ms", "lower", execution_duration, True, min=0.0,
    ),
    BuiltinGrader(
        "working-set-rebuild-factor", "Working-set rebuild factor",
        "Cumulative input tokens / peak invocation input tokens",
        "factor", "lower", working_set_rebuild_factor, True, min=1.0,
    ),
    BuiltinGrader(
        "context-growth", "Context growth", "Total tokens / first-request tokens",
        "factor", "lower", context_growth, True, min=1.0,
    ),
    BuiltinGrader(
        "artifact-production", "Artifact production", "Safe-output result count",
        "count", "higher", artifact_production, True, min=0.0,
    ),
)  # fmt: skip
