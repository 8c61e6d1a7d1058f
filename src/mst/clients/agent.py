"""The built-in ``agent`` client: a model driving the variant's MCP servers in a tool loop.

One attempt: start the variant's MCP servers (stdio commands and streamable-HTTP URLs, through
the official ``mcp`` SDK), list their tools, then ask the model for its next step, run the tool
calls it asks for, feed the results back, and stop at its final answer or at one of the client's
own limits. Everything is written to the transcript as it happens (canonical events, docs/graders.md).

Endings (docs/endings.md), decided where they happen:

========================================  ==================================================
what happened                             ending
========================================  ==================================================
final answer                              trial ``completed``
model asks for tools after ``maxTurns``   trial ``turn-limit``
``maxTokens`` (total) used up             trial ``turn-limit`` (see below)
``timeLimitSeconds`` passed               trial ``time-limit``
context overflow on the first request     ``setup``, not retryable (the prompt alone does not fit)
context overflow on a later request       trial ``context-limit``
unusable model output                     trial ``client-error``
a tool call fails                         part of the trial: recorded, fed back to the model
an MCP server dies during the attempt     part of the trial: its calls fail as tool errors
an MCP server does not start              ``setup``, not retryable
an HTTP MCP server unreachable at start   ``network``, retryable (docs/mcp-servers.md)
provider 429 / 5xx, network drop          decided by the provider adapter (``provider-api``/``network``)
anything unrecognised the client raises   ``mst.endings.from_exception`` (``client-app``, retryable)
========================================  ==================================================

``maxTokens`` is a *spend* budget the client sets itself on the whole attempt (input plus
output tokens over every request), not the model's context window. Running out of it means the
client stopped itself before it finished, exactly like running out of turns, so it ends as a
``turn-limit`` trial with a detail naming the token budget. ``context-limit`` stays reserved for
what docs/endings.md means by it: the model's context filled up.

MCP servers come from a per-client :class:`~mst.clients._mcp_pool.ServerPool`, by each server's
``lifetime`` (``attempt``: fresh per attempt, the next one pre-started; ``variant``: reused). An
attempt's servers are given back (closed in the background) after its ending is decided, so a
busy server that is slow to stop never costs an answer its deadline. The transcript records the
server instances an attempt used (``mcp.server``), tools not offered (``mcp.tools_withheld``), and
each call's progress notifications (``tool.progress``). A call mst refuses without sending it to
a server (an unknown or withheld tool) carries ``"rejected": true`` in its tool events.

Performance: with ``model: mock`` and no MCP servers an attempt must cost well under 0.3 ms of
CPU, so that path touches no ``mcp``/``anyio`` import, no task group and no pydantic validation
(the mock's per-case settings are validated once per case and cached).
"""

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from mst.clients.base import AttemptOutcome, AttemptRequest, TranscriptRecorder
from mst.config.models import VariantConfig
from mst.endings import COMPLETED, Ending, EndingException, Infrastructure, Trial, from_exception, to_json
from mst.providers import create_provider
from mst.providers.base import (
    AssistantMessage,
    AttemptContext,
    ContextOverflow,
    Message,
    ModelOutputError,
    ModelRequest,
    ModelSession,
    Provider,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from mst.providers.mock import MockSettings
from mst.providers.settings import ProviderSettings
from mst.session.events import (
    ASSISTANT_MESSAGE,
    MCP_SERVER,
    MCP_TOOLS_WITHHELD,
    MODEL_REQUEST,
    SESSION_RESULT,
    TOOL_COMPLETE,
    TOOL_PROGRESS,
    TOOL_START,
    USER_MESSAGE,
)
from mst.session.redact import Redactor

if TYPE_CHECKING:
    from mst.clients._mcp import Toolbox
    from mst.clients._mcp_pool import Lease, ServerPool


class AgentSettings(BaseModel):
    """Settings of the built-in ``agent`` client (a variant's ``settings``)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    maxTurns: int = Field(
        default=10, ge=1, le=10_000,
        description="Most model requests in one attempt; asking for tools after the last one ends the "
        "trial as turn-limit.",
    )
    maxTokens: int | None = Field(
        default=None, ge=1,
        description="Total token budget (input + output over all requests); when used up before the "
        "answer, the trial ends as turn-limit.",
    )
    timeLimitSeconds: float | None = Field(
        default=None, gt=0,
        description="The client's own time budget for the model-and-tools loop (server start-up not "
        "included); passing it ends the trial as time-limit. Keep it below the eval's deadlineSeconds.",
    )
    systemPrompt: str | None = Field(default=None, description="System prompt sent with every model request.")
    toolTimeoutSeconds: float | None = Field(
        default=None, gt=0,
        description="Bound on one tool call; a call that takes longer fails inside the trial.",
    )
    startupTimeoutSeconds: float = Field(
        default=60, gt=0,
        description="Bound on starting and initialising each MCP server; past it: setup failure.",
    )
    mock: MockSettings | None = Field(
        default=None, description="Script of the offline mock model (`model: mock`)."
    )
    provider: ProviderSettings | None = Field(
        default=None,
        description="How to reach a real model (`model: openai:...` or `anthropic:...`): base URL, key "
        "secret name, streaming, SDK retries, request timeout.",
    )


class _State:
    """What the loop accumulates; kept outside the loop so a failure still reports it."""

    __slots__ = ("answer", "input_tokens", "output_tokens", "requests", "tool_calls")

    def __init__(self) -> None:
        self.requests = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.answer: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


_NO_TOOLS: tuple[ToolSpec, ...] = ()


class AgentClient:
    """The ``agent`` client kind (entry point ``agent`` in group ``mst.clients``)."""

    settings_model: ClassVar[type[BaseModel]] = AgentSettings

    def __init__(self, variant: VariantConfig, settings: Any, base_dir: Path) -> None:
        if isinstance(settings, AgentSettings):
            self.settings = settings
        elif settings is None:
            self.settings = AgentSettings.model_validate({})
        else:
            self.settings = AgentSettings.model_validate(settings)
        self.variant = variant
        self.base_dir = base_dir
        self.model = variant.model or ""
        # An unknown provider fails every attempt the same way: remember it and report it per
        # attempt as the setup failure it is, rather than failing the whole run here.
        self._provider: Provider | None = None
        self._pool: ServerPool | None = None
        self._provider_error: Ending | None = None
        try:
            self._provider = create_provider(
                variant.model, {"mock": self.settings.mock, "provider": self.settings.provider}
            )
        except EndingException as exc:
            self._provider_error = exc.ending

    async def aclose(self) -> None:
        """Close the provider and every MCP server still running (idle, pre-started or closing)."""
        if self._pool is not None:
            await self._pool.aclose()
        if self._provider is not None:
            await self._provider.aclose()

    # -----------------------------------------------------------------------------------------

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome:
        started = time.monotonic()
        rec = request.transcript
        state = _State()
        rec.emit(USER_MESSAGE, {"content": request.prompt})
        try:
            if self._provider_error is not None:
                raise EndingException(self._provider_error)
            assert self._provider is not None
            settings = self.settings
            # By position, in the fields' order (case_id, variant_id, trial, try_number, seed, prompt,
            # expected, metadata, deadline_s, time_budget_s, case_mock, secrets): twelve keywords
            # cost ~3 k instructions an attempt more to match (bench/perf16_collect.md).
            context = AttemptContext(
                request.case_id, self.variant.id, request.trial, request.try_number, request.seed,
                request.prompt, request.expected, request.metadata, request.deadline_s,
                settings.timeLimitSeconds, request.case_mock, request.secrets,
            )
            model = self._provider.session(context)
            if self.variant.mcpServers:
                ending = await self._with_servers(request, model, state)
            elif settings.timeLimitSeconds is None:  # one coroutine fewer per attempt than _limited
                ending = await self._loop(request, model, None, state)
            else:
                ending = await self._limited(request, model, None, state)
        except EndingException as exc:
            ending = exc.ending
        except Exception as exc:
            ending = from_exception(exc)
        if request.secrets and ending is not COMPLETED:
            ending = _scrub(ending, request.secrets)
        usage = {
            "inputTokens": state.input_tokens,
            "outputTokens": state.output_tokens,
            "totalTokens": state.total_tokens,
        }
        rec.emit(SESSION_RESULT, {
            "answer": state.answer,
            "outcome": ending.outcome if isinstance(ending, Trial) else "infrastructure",
            "ending": to_json(ending),
            "usage": usage,
            "durationMs": int((time.monotonic() - started) * 1000),
            "turns": state.requests,
        })
        return AttemptOutcome(
            ending, state.answer, usage, {"turns": state.requests, "toolCalls": state.tool_calls}
        )

    async def _with_servers(self, request: AttemptRequest, model: ModelSession, state: _State) -> Ending:
        """The loop with the variant's MCP servers, taken from the pool and given back after it.

        Servers go back reusable unless the attempt was cut short (mst's deadline cancelled it),
        in which case a ``variant`` server is closed rather than handed to the next attempt.
        """
        if self._pool is None:
            from mst.clients._mcp_pool import ServerPool

            self._pool = ServerPool(self.variant.mcpServers, base_dir=self.base_dir,
                                    startup_timeout_s=self.settings.startupTimeoutSeconds)
        pool = self._pool
        lease = await pool.acquire(request.secrets)
        cut_short = True
        try:
            _record_servers(request.transcript, lease)
            ending = await self._limited(request, model, lease.toolbox, state)
            cut_short = False
            return ending
        except Exception:
            cut_short = False
            raise
        finally:
            pool.release(lease, reusable=not cut_short)

    async def _limited(
        self, request: AttemptRequest, model: ModelSession, toolbox: "Toolbox | None", state: _State
    ) -> Ending:
        """The loop under the client's own time budget, when it has one."""
        budget = self.settings.timeLimitSeconds
        if budget is None:
            return await self._loop(request, model, toolbox, state)
        try:
            async with asyncio.timeout(budget) as scope:
                return await self._loop(request, model, toolbox, state)
        except TimeoutError:
            if not scope.expired():
                raise
            return Trial("time-limit", f"the client's time budget of {budget:g} s (timeLimitSeconds) ran out")

    async def _loop(
        self, request: AttemptRequest, model: ModelSession, toolbox: "Toolbox | None", state: _State
    ) -> Ending:
        settings, rec = self.settings, request.transcript
        tools = toolbox.specs if toolbox is not None else _NO_TOOLS
        messages: list[Message] = [UserMessage(request.prompt)]
        model_name = self.model
        for turn in range(settings.maxTurns):
            if settings.maxTokens is not None and state.total_tokens >= settings.maxTokens:
                return Trial("turn-limit", f"the token budget ran out: {state.total_tokens} tokens used, "
                             f"maxTokens is {settings.maxTokens}")
            t0 = time.monotonic()
            try:
                response = await model.complete(ModelRequest(messages, tools, turn, settings.systemPrompt))
            except ContextOverflow as exc:
                if turn == 0:
                    why = f"the case's prompt does not fit the model's context on the first request: {exc}"
                    return Infrastructure("setup", why, False)
                return Trial("context-limit", f"the context filled up on request {turn + 1}: {exc}")
            except ModelOutputError as exc:
                return Trial("client-error", str(exc))
            duration_ms = int((time.monotonic() - t0) * 1000)
            state.requests = turn + 1
            usage = response.usage
            state.input_tokens += usage.input_tokens
            state.output_tokens += usage.output_tokens
            rec.emit(MODEL_REQUEST, {
                "model": model_name, "requestIndex": turn,
                "inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                "totalTokens": usage.input_tokens + usage.output_tokens, "durationMs": duration_ms,
            })
            calls = response.tool_calls
            if not calls:
                rec.emit(ASSISTANT_MESSAGE, {"content": response.text})
                state.answer = response.text
                return COMPLETED
            rec.emit(ASSISTANT_MESSAGE, {
                "content": response.text,
                "toolCalls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
            })
            messages.append(AssistantMessage(response.text, calls))
            if turn + 1 >= settings.maxTurns:
                break
            for call in calls:
                result = await self._call_tool(rec, toolbox, call.id, call.name, call.arguments, state)
                messages.append(result)
        return Trial(
            "turn-limit", f"the model still asked for tools after maxTurns={settings.maxTurns} requests"
        )

    async def _call_tool(
        self, rec: TranscriptRecorder, toolbox: "Toolbox | None", call_id: str, name: str,
        arguments: Mapping[str, Any], state: _State,
    ) -> ToolResult:
        server, tool_name, sent = toolbox.resolve(name) if toolbox is not None else (None, name, False)
        start: dict[str, Any] = {
            "toolCallId": call_id, "toolName": tool_name, "input": arguments, "mcpServerName": server,
        }
        if not sent:
            start["rejected"] = True
        rec.emit(TOOL_START, start)
        state.tool_calls += 1
        t0 = time.monotonic()
        if toolbox is None:
            text = f"unknown tool {name!r}: this variant has no MCP servers"
            rec.emit(TOOL_COMPLETE, {
                "toolCallId": call_id, "toolName": tool_name, "success": False, "rejected": True,
                "durationMs": int((time.monotonic() - t0) * 1000), "mcpServerName": None, "error": text,
            })
            return ToolResult(call_id, name, text, True)
        live = True

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if live:  # a notification that arrives after the call ended belongs to no call
                rec.emit(TOOL_PROGRESS, {
                    "toolCallId": call_id, "toolName": tool_name, "mcpServerName": server,
                    "progress": progress, "total": total, "message": message,
                })

        try:
            outcome = await toolbox.call(name, arguments, self.settings.toolTimeoutSeconds, on_progress)
        finally:
            live = False
        data: dict[str, Any] = {
            "toolCallId": call_id, "toolName": tool_name, "success": outcome.success,
            "durationMs": int((time.monotonic() - t0) * 1000), "mcpServerName": outcome.server,
        }
        if outcome.rejected:
            data["rejected"] = True
        data["output" if outcome.success else "error"] = outcome.text
        if any(block["type"] != "text" for block in outcome.content):
            data["content"] = outcome.content
        if outcome.structured is not None:
            data["structuredContent"] = outcome.structured
        rec.emit(TOOL_COMPLETE, data)
        return ToolResult(call_id, name, outcome.text, not outcome.success, outcome.images)


def _record_servers(rec: TranscriptRecorder, lease: "Lease") -> None:
    """Which server instances the attempt uses (and what they withheld from the model)."""
    from mst.clients._mcp import TASK_ONLY_REASON

    for instance in lease.instances:
        rec.emit(MCP_SERVER, {
            "server": instance.name, "instanceId": instance.instance_id, "transport": instance.transport,
            "lifetime": instance.cfg.lifetime, "attemptsServed": instance.served,
            "startedAhead": instance.served == 1 and instance.name in lease.prestarted,
            "startupMs": instance.startup_ms, "tools": len(instance.tools),
            "attemptsSharing": lease.sharing.get(instance.instance_id, 1),
        })
    for server, names in lease.toolbox.withheld.items():
        rec.emit(MCP_TOOLS_WITHHELD, {"server": server, "tools": names, "reason": TASK_ONLY_REASON})


def _scrub(ending: Ending, secrets: Mapping[str, str]) -> Ending:
    """Remove secret values from an ending's text (it may quote an exception or a provider's error)."""
    return Redactor.of(secrets).ending(ending)
