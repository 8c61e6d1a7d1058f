"""Shared read-only indexes over one unified session (docs/graders.md, "The contract").

Every grader needs the same few derived facts: which events of a type exist, which tool calls
the agent made and how they ended, and how many model requests and tokens the agent used.
Deriving them once, in one linear pass, is what keeps the ten defaults under the benchmark
bound on a million-event session; deriving them in one place is what keeps graders consistent
(two graders can never disagree about what "a tool call" is).

Decisions, each documented where it is made:

* **Main agent** means provenance phase ``agent`` (or no phase at all: a file written by a tool
  that records a single agent has nothing else in it). Every other phase (``judge``,
  ``detection``, ``eval``, ``grading``, ...) is mst's or the workflow's own work and is excluded
  from agent statistics, so a judge's tokens never inflate the agent's cost.
* **Nested agents** (events carrying ``agentId``) belong to the main agent's work, but tool-call
  ids are only unique within one agent, so correlation is scoped by ``agentId``.
* **Native tool events beat gateway evidence.** An MCP gateway may log the very call the client
  reported natively; counting both would double every call. Gateway records are dropped when a
  native call with the same normalised name and equal arguments accounts for them.
* **Per-request proxy telemetry beats aggregate usage** (``firewall.token_usage`` over
  ``model.request`` over ``usage.report`` / ``session.result.usage``): each source describes the
  same requests, so only the most granular one present is used, never a sum of several.
* Nothing here reads files, clocks or the environment, and the session is never mutated:
  lookups hold positions into the session and small immutable records.
"""

from mst._gc import SMALL_PASS, paused_gc
from mst.session.lookups.build import create_session_lookups
from mst.session.lookups.fields import canonical_key, event_data, is_main_agent, normalise_tool_name
from mst.session.lookups.gateway import is_retry
from mst.session.lookups.records import (
    EXECUTION_RESULT,
    FIREWALL_TOKEN_USAGE,
    MCP_RPC_REQUEST,
    MCP_RPC_RESPONSE,
    MCP_TOOL_CALL,
    SAFE_OUTPUT_RESULT,
    SOURCE_NATIVE,
    USAGE_REPORT,
    ExecutionStats,
    ModelRequest,
    SessionLookups,
    TokenUsage,
    ToolCall,
)
from mst.session.lookups.usage import parse_usage

__all__ = [
    "EXECUTION_RESULT",
    "FIREWALL_TOKEN_USAGE",
    "MCP_RPC_REQUEST",
    "MCP_RPC_RESPONSE",
    "MCP_TOOL_CALL",
    "SAFE_OUTPUT_RESULT",
    "SMALL_PASS",
    "SOURCE_NATIVE",
    "USAGE_REPORT",
    "ExecutionStats",
    "ModelRequest",
    "SessionLookups",
    "TokenUsage",
    "ToolCall",
    "canonical_key",
    "create_session_lookups",
    "event_data",
    "is_main_agent",
    "is_retry",
    "normalise_tool_name",
    "parse_usage",
    "paused_gc",
]
