"""The records the lookups hand out: tool calls, token usage, model requests, execution
statistics, and the lookups themselves (all immutable), plus the event types they are built from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

FIREWALL_TOKEN_USAGE: Final = "firewall.token_usage"
USAGE_REPORT: Final = "usage.report"
EXECUTION_RESULT: Final = "execution.result"
MCP_TOOL_CALL: Final = "mcp.tool_call"
MCP_RPC_REQUEST: Final = "mcp.rpc.request"
MCP_RPC_RESPONSE: Final = "mcp.rpc.response"
SAFE_OUTPUT_RESULT: Final = "safe_output.result"

SOURCE_NATIVE: Final = "native"
SOURCE_GATEWAY_CALL: Final = MCP_TOOL_CALL
SOURCE_GATEWAY_RPC: Final = "mcp.rpc"


class ToolCall(NamedTuple):
    """One main-agent tool call, correlated from its start and completion evidence.

    ``finished`` is False when no completion was seen; such a call also has ``success`` False,
    because an attempt that never reported a result did not succeed, and a completion without
    ``success: true`` has ``success`` False too (docs/graders.md, "What a tool call is"). Records
    are named tuples rather than frozen dataclasses: a million-event session has hundreds of
    thousands of them and a tuple is several times cheaper to build.
    """

    position: int
    name: str
    arguments: Any
    args_key: str
    agent_id: str | None
    call_id: str | None
    finished: bool
    success: bool
    duration_ms: float | None
    source: str
    start: int | None
    end: int | None
    server: str | None
    rejected: bool = False  # mst refused it before any server saw it (``"rejected": true`` in its events' data)

    @property
    def reached_server(self) -> bool:
        """The call was sent to a server (or the evidence does not say it was refused)."""
        return not self.rejected


class TokenUsage(NamedTuple):
    """Token counts as recorded; a field is None when the evidence did not carry it."""

    input: int | None = None
    output: int | None = None
    total: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    requests: int | None = None

    @property
    def tokens(self) -> int | None:
        """Total tokens: the recorded total, else input + output when both were recorded."""
        if self.total is not None:
            return self.total
        if self.input is not None and self.output is not None:
            return self.input + self.output
        return None

    @property
    def empty(self) -> bool:
        # input, output, total and requests (indexing a tuple is cheapest; once per usage record)
        return self[0] is None and self[1] is None and self[2] is None and self[5] is None


class ModelRequest(NamedTuple):
    """One observed model request of the main agent (from a per-request record)."""

    position: int
    usage: TokenUsage
    duration_ms: float | None
    model: str | None


class ExecutionStats(NamedTuple):
    """Concrete main-agent execution statistics; None means "not observed", never zero.

    A named tuple like the other records, and for the same reason: it is built once per trial
    graded, where a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost
    as much as the rest of a five-event session's lookups (docs/graders.md, "The contract")."""

    requests: tuple[ModelRequest, ...]
    request_source: str | None
    aggregate: TokenUsage | None
    aggregate_source: str | None
    duration_ms: float | None
    duration_source: str | None

    @property
    def request_count(self) -> int | None:
        """Per-request records when present; else a request count an aggregate report gave."""
        if self.requests:
            return len(self.requests)
        return self.aggregate.requests if self.aggregate is not None else None


class SessionLookups(NamedTuple):
    """Everything graders share, computed once per session (read-only: a named tuple, built in
    one C call, see :class:`ExecutionStats`).

    ``by_type`` maps an event type to the ascending positions of its events in the session.
    ``completed`` is True when the main agent left a completion record (``session.result`` or
    ``execution.result``): the event stream is then known to be whole, so the absence of a kind
    of event is an observation rather than a gap. ``mcp_events`` counts main-agent ``mcp.*``
    events and ``retry_observations`` those of them that observe a retry (:func:`is_retry`).
    """

    size: int
    by_type: Mapping[str, tuple[int, ...]]
    tool_calls: tuple[ToolCall, ...]
    gateway_duplicates: int
    execution: ExecutionStats
    completed: bool
    mcp_events: int
    retry_observations: int

    def positions(self, event_type: str) -> tuple[int, ...]:
        return self.by_type.get(event_type, ())
