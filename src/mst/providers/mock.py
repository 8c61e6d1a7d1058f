"""The offline ``mock`` model: deterministic, scriptable, and able to produce every ending.

It exists so an eval, the harness and its tests run without a network or a key, and so every
ending in the closed set (docs/endings.md) can be produced end to end on purpose. Everything it does is a
function of (case, variant, trial, eval seed, mock seed, try number) and the conversation, drawn
through blake2b — never ``hash()`` (salted per process) or a global random generator — so the
same eval gives the same transcripts on any machine, in any process, in any order.

It is configured in the eval file under a variant's ``settings.mock`` and a case's ``mock``; a
case's keys replace the variant's keys of the same name (a shallow merge)::

    variants:
      - id: baseline
        model: mock
        settings:
          mock:
            steps: [{tool: get_item, args: {sku: "{metadata[sku]}"}}]
            answer: "{expected}"
            successRate: 0.8
            latencyMs: 20
            inject:
              - {failure: rate-limit, tries: [1], rate: 0.1}
    cases:
      - id: c1
        prompt: ...
        mock: {inject: [{failure: context-overflow-first}]}

Templates (``answer``, ``wrongAnswer``, step ``text`` and string ``args``) may use
``{expected}``, ``{prompt}``, ``{case}``, ``{variant}``, ``{trial}``, ``{try}``,
``{metadata[key]}``, ``{result}`` (the last tool result's text), ``{results[0]}`` (tool results
in order) and ``{{``/``}}`` for literal braces. A string argument that is exactly one
placeholder takes the value itself (``{expected}`` stays a number if it is one).
"""

import asyncio
import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mst.config.fields import empty_list
from mst.endings import EndingException, Infrastructure
from mst.providers.base import (
    AssistantMessage,
    AttemptContext,
    ContextOverflow,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)

_STRICT = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

MockFailure = Literal[
    "rate-limit",
    "server-error",
    "network",
    "client-crash",
    "context-overflow-first",
    "context-overflow",
    "turn-limit",
    "time-limit",
    "client-error",
    "deadline",
]


class MockToolStep(BaseModel):
    """One scripted model turn that calls a tool.

    The mock takes its steps in order, one per model request, then answers. The loop runs the
    call on the variant's MCP servers and feeds the result (or the tool's error) back.
    """

    model_config = _STRICT

    tool: str = Field(min_length=1, description="Name of the tool to call, as the MCP server lists it.")
    args: dict[str, Any] = Field(
        default_factory=dict, description="Arguments; string values are templates (see the mock's docs)."
    )
    text: str = Field(default="", description="Assistant text sent along with the call (a template).")


class MockInjection(BaseModel):
    """A failure the mock injects, to produce one ending of the closed set on purpose.

    ``failure`` and the ending it leads to:

    - ``rate-limit``: the provider answers HTTP 429 → infrastructure ``provider-api``, retryable.
    - ``server-error``: the provider answers ``status`` (5xx, default 503) → ``provider-api``, retryable.
    - ``network``: the connection drops → infrastructure ``network``, retryable.
    - ``client-crash``: the client raises an unexpected exception → ``client-app``, retryable.
    - ``context-overflow-first``: the first request does not fit the context → ``setup``, not retryable.
    - ``context-overflow``: request ``atRequest`` (default 1) does not fit → trial ``context-limit``.
    - ``turn-limit``: the model never stops calling tools → trial ``turn-limit`` (the agent's maxTurns).
    - ``time-limit``: the model stalls past the agent's ``timeLimitSeconds`` → trial ``time-limit``
      (the agent must set ``timeLimitSeconds``; without it this is a setup error).
    - ``client-error``: the model returns unusable tool-call arguments → trial ``client-error``.
    - ``deadline``: the model stalls past mst's per-attempt deadline, so the collector's
      deadline fires → infrastructure ``deadline``, retryable.

    Targeting: the injection applies to an attempt when every given filter matches (``cases``,
    ``trials``, ``tries``) and a seeded draw falls under ``rate``. The first matching injection
    in the list wins. Use ``tries: [1]`` to fail only the first try, so a resume's retry succeeds.
    """

    model_config = _STRICT

    failure: MockFailure = Field(description="Which failure to inject (see the list above).")
    cases: list[str] | None = Field(default=None, description="Only these case ids (all when omitted).")
    trials: list[int] | None = Field(
        default=None, description="Only these trial indexes, as the run numbers them."
    )
    tries: list[int] | None = Field(
        default=None, description="Only these try numbers (1 is the first collection)."
    )
    rate: float = Field(default=1.0, ge=0, le=1, description="Probability, drawn per attempt from the seeds.")
    atRequest: int | None = Field(
        default=None, ge=0,
        description="Model request (0-based) the failure happens on; default 0, or 1 for context-overflow.",
    )
    status: int | None = Field(
        default=None, ge=500, le=599, description="HTTP status for server-error (default 503)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.failure == "context-overflow-first" and self.atRequest not in (None, 0):
            raise ValueError("context-overflow-first happens on the first request; drop atRequest")
        if self.failure == "context-overflow" and self.atRequest == 0:
            raise ValueError("a context overflow on request 0 is context-overflow-first (a setup failure)")
        if self.status is not None and self.failure != "server-error":
            raise ValueError("status applies only to failure: server-error")
        return self

    @property
    def request_index(self) -> int:
        if self.atRequest is not None:
            return self.atRequest
        return 1 if self.failure == "context-overflow" else 0


class MockSettings(BaseModel):
    """The offline mock model's script (``settings.mock`` of a variant, ``mock`` of a case).

    Deterministic for (case, variant, trial, eval seed, ``seed``, try number). A case's keys
    replace the variant's keys of the same name.
    """

    model_config = _STRICT

    steps: list[MockToolStep] = Field(
        default_factory=empty_list, description="Tool calls to make, one per model turn, before answering."
    )
    answer: str = Field(
        default="{expected}", description="The final answer of a successful trial (a template)."
    )
    wrongAnswer: str = Field(
        default="I don't know.", description="The final answer of a trial that fails its successRate draw."
    )
    successRate: float = Field(
        default=1.0, ge=0, le=1,
        description="Fraction of trials that answer `answer` (the rest answer `wrongAnswer`), drawn per "
        "(case, variant, trial, seeds); the try number is left out, so a retried attempt draws the same.",
    )
    seed: int = Field(
        default=0, description="Mixed with the eval's seed: change it to redraw successes and injections."
    )
    latencyMs: float = Field(default=0, ge=0, description="Added wall time per model call (asyncio.sleep).")
    contextWindow: int | None = Field(
        default=None, ge=1,
        description="Context window in tokens: a request whose input tokens exceed it overflows "
        "(setup failure on the first request, context-limit trial later).",
    )
    inject: list[MockInjection] = Field(
        default_factory=empty_list, description="Failures to inject (first match wins)."
    )


class MockCrash(RuntimeError):
    """The injected client-app crash: deliberately an exception no rule recognises."""


# ---------------------------------------------------------------------------------------------
# Determinism


def draw(*parts: object) -> float:
    """A uniform number in [0, 1) that depends only on ``parts`` (stable across processes)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


# ---------------------------------------------------------------------------------------------
# Templates: only `{name}` and `{name[key]}`; nothing else of Python's format language, so a
# template can reach no attribute of anything.

_PLACEHOLDER: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_]+)((?:\[[^\]\[]*\])*)\}")
_INDEX: Final = re.compile(r"\[([^\]\[]*)\]")


class MockTemplateError(ValueError):
    pass


def _lookup(fields: Mapping[str, Any], name: str, indexes: str) -> Any:
    if name not in fields:
        raise MockTemplateError(f"unknown placeholder {{{name}}}; known: {', '.join(sorted(fields))}")
    value = fields[name]
    if not indexes:  # `{name}`, most placeholders: no index to look up
        return value
    for key in _INDEX.findall(indexes):
        try:
            if isinstance(value, Sequence) and not isinstance(value, str):
                value = value[int(key)]
            elif isinstance(value, Mapping):
                value = value[key]
            else:
                raise TypeError
        except (KeyError, IndexError, ValueError, TypeError):
            raise MockTemplateError(f"{{{name}{indexes}}}: no item [{key}]") from None
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple | bool | int | float):
        return orjson.dumps(value).decode()
    return str(value)


def render(template: str, fields: Mapping[str, Any]) -> str:
    """Fill a template's placeholders with text."""
    if "{" not in template and "}" not in template:
        return template
    # A loop, not a list comprehension: in this Python each comprehension makes a function and
    # a frame, more than the few pieces of a template cost to join.
    texts: list[str] = []
    for p in _pieces(template):
        texts.append(p if p.__class__ is str else _text(_lookup(fields, *p)))
    return "".join(texts)


@functools.lru_cache(maxsize=1024)
def _pieces(template: str) -> tuple[str | tuple[str, str], ...]:
    """A template split once into literal text and (name, indexes) placeholders: every attempt
    of a variant renders the same few templates, and a regex substitution per render cost more
    than the rest of the mock's answer."""
    pieces: list[str | tuple[str, str]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        pieces.append(template[pos:m.start()])
        whole = m.group(0)
        pieces.append(whole[0] if whole in ("{{", "}}") else (m.group(1), m.group(2) or ""))
        pos = m.end()
    pieces.append(template[pos:])
    return tuple(p for p in pieces if p != "")


def render_value(value: Any, fields: Mapping[str, Any]) -> Any:
    """Fill templates inside tool arguments; a string that is one placeholder keeps its value's type."""
    if isinstance(value, str):
        m = _PLACEHOLDER.fullmatch(value)
        if m is not None and m.group(1) is not None:
            return _lookup(fields, m.group(1), m.group(2) or "")
        return render(value, fields)
    if isinstance(value, dict):
        return {k: render_value(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, fields) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Token counting: about four characters a token, plus a fixed overhead per message and request,
# so input tokens grow with the conversation as a real model's do.

_REQUEST_OVERHEAD: Final = 8
# How far past a time budget or deadline an injected stall sleeps: enough for the timer that
# should fire (started before the stall) to fire first.
_OVERSLEEP_S: Final = 0.25
_MESSAGE_OVERHEAD: Final = 4


def _tokens(chars: int) -> int:
    return (chars + 3) // 4


def _tools_chars(tools: Sequence[ToolSpec]) -> int:
    """Kept for the last tool list seen (held, so its identity stays its own): attempts that share
    their MCP servers offer the very same specs, and serializing every schema per attempt was
    most of what a variant with servers cost over one without (bench/mcp_lifetime.md)."""
    last = _LAST_TOOLS
    if last and last[0] is tools:
        return int(last[1])
    chars = sum(len(t.name) + len(t.description) + len(orjson.dumps(dict(t.input_schema))) for t in tools)
    _LAST_TOOLS[:] = [tools, chars]
    return chars


_LAST_TOOLS: list[Any] = []


def _message_chars(message: UserMessage | AssistantMessage | ToolResult) -> int:
    if isinstance(message, AssistantMessage):
        return len(message.content) + sum(
            len(c.name) + len(orjson.dumps(dict(c.arguments))) for c in message.tool_calls
        )
    return len(message.content)


# ---------------------------------------------------------------------------------------------


def _setup(why: str) -> EndingException:
    return EndingException(Infrastructure("setup", why, False))


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class MockProvider:
    """The ``mock`` model. One per variant; each attempt gets a :class:`MockSession`."""

    name = "mock"

    def __init__(self, settings: MockSettings | None) -> None:
        self._settings = settings or MockSettings.model_validate({})
        self._base: dict[str, Any] = self._settings.model_dump(exclude_unset=True)
        self._script = _Script(self._settings)
        # case id -> (the case's mock mapping it was merged from, the merged settings' script).
        # The mapping is checked by identity, so validation runs once per case, not per attempt.
        self._per_case: dict[str, tuple[Mapping[str, Any], _Script]] = {}

    def settings_for(self, case_id: str, case_mock: Mapping[str, Any] | None) -> MockSettings:
        """The variant's settings with the case's keys merged over them (validated once per case)."""
        return self._script_for(case_id, case_mock).settings

    def _script_for(self, case_id: str, case_mock: Mapping[str, Any] | None) -> "_Script":
        if not case_mock:
            return self._script
        cached = self._per_case.get(case_id)
        if cached is not None and cached[0] is case_mock:
            return cached[1]
        try:
            merged = MockSettings.model_validate({**self._base, **case_mock})
        except ValidationError as exc:
            raise _setup(f"case {case_id!r}: invalid mock settings: {_format_errors(exc)}") from None
        script = self._per_case[case_id] = (case_mock, _Script(merged))
        return script[1]

    def session(self, context: AttemptContext) -> "MockSession":
        return MockSession(self._script_for(context.case_id, context.case_mock), context)

    async def aclose(self) -> None:
        return None


class _Script:
    """The settings an attempt reads, as plain slots, made once per variant and case mock: a
    read of a pydantic model's attribute goes through the ``__getattr__`` hook of its class
    (~0.9 k instructions), and an attempt read seven of them."""

    __slots__ = ("answer", "contextWindow", "inject", "latencyMs", "seed", "settings", "steps", "successRate",
                 "wrongAnswer")

    def __init__(self, settings: MockSettings) -> None:
        self.settings = settings
        self.answer, self.wrongAnswer = settings.answer, settings.wrongAnswer
        self.contextWindow, self.latencyMs = settings.contextWindow, settings.latencyMs
        self.seed, self.successRate = settings.seed, settings.successRate
        self.inject, self.steps = settings.inject, settings.steps


class MockSession:
    """The mock bound to one attempt: its draws are made here, once."""

    __slots__ = ("_ctx", "_injection", "_settings", "_succeeds", "_tools_chars", "_tools_ref")

    def __init__(self, settings: _Script, context: AttemptContext) -> None:
        self._settings = settings
        self._ctx = context
        key = (settings.seed, context.seed, context.variant_id, context.case_id, context.trial)
        rate = settings.successRate
        self._succeeds = rate >= 1.0 or (rate > 0.0 and draw("success", *key) < rate)
        self._injection: MockInjection | None = None
        for i, inj in enumerate(settings.inject):
            if inj.cases is not None and context.case_id not in inj.cases:
                continue
            if inj.trials is not None and context.trial not in inj.trials:
                continue
            if inj.tries is not None and context.try_number not in inj.tries:
                continue
            if inj.rate < 1.0 and not (
                inj.rate > 0.0 and draw("inject", i, *key, context.try_number) < inj.rate
            ):
                continue
            self._injection = inj
            break
        self._tools_ref: Sequence[ToolSpec] | None = None
        self._tools_chars = 0

    @property
    def succeeds(self) -> bool:
        """Whether this trial draws ``answer`` (else ``wrongAnswer``)."""
        return self._succeeds

    @property
    def injection(self) -> MockInjection | None:
        return self._injection

    async def complete(self, request: ModelRequest) -> ModelResponse:
        settings, idx = self._settings, request.request_index
        if settings.latencyMs:
            await asyncio.sleep(settings.latencyMs / 1000.0)
        input_tokens = self._input_tokens(request)
        if settings.contextWindow is not None and input_tokens > settings.contextWindow:
            raise ContextOverflow(
                f"mock: the request needs {input_tokens} input tokens; the context window is "
                f"{settings.contextWindow}"
            )
        inj = self._injection
        if inj is not None and idx == inj.request_index and inj.failure != "turn-limit":
            await self._fail(inj)
        try:
            text, calls, stop_reason = self._next_step(request)
        except MockTemplateError as exc:
            raise _setup(f"case {self._ctx.case_id!r}: mock template: {exc}") from None
        out_chars = len(text)
        for c in calls:
            out_chars += len(c.name) + len(orjson.dumps(dict(c.arguments)))
        return ModelResponse(text, calls, Usage(input_tokens, _tokens(out_chars) + 1), stop_reason)

    # -----------------------------------------------------------------------------------------

    def _input_tokens(self, request: ModelRequest) -> int:
        if request.tools is not self._tools_ref:
            self._tools_ref = request.tools
            self._tools_chars = _tools_chars(request.tools) if request.tools else 0
        chars = self._tools_chars + len(request.system or "")
        for m in request.messages:
            chars += _message_chars(m) + _MESSAGE_OVERHEAD * 4
        return _REQUEST_OVERHEAD + _tokens(chars)

    async def _fail(self, inj: MockInjection) -> None:
        ctx, failure = self._ctx, inj.failure
        if failure == "rate-limit":
            raise EndingException(Infrastructure(
                "provider-api", "mock: HTTP 429 Too Many Requests (injected rate limit)", True))
        if failure == "server-error":
            status = inj.status or 503
            raise EndingException(Infrastructure(
                "provider-api", f"mock: HTTP {status} from the provider (injected server error)", True))
        if failure == "network":
            raise EndingException(Infrastructure(
                "network", "mock: connection reset by peer (injected network drop)", True))
        if failure == "client-crash":
            raise MockCrash("mock: injected client crash")
        if failure in ("context-overflow", "context-overflow-first"):
            raise ContextOverflow("mock: injected context overflow")
        if failure == "client-error":
            raise ModelOutputError(
                "mock: the model returned tool-call arguments that are not valid JSON (injected)")
        if failure == "time-limit":
            if ctx.time_budget_s is None:
                raise _setup("mock: failure time-limit needs the agent's timeLimitSeconds "
                             "(the client's own time budget)")
            await asyncio.sleep(ctx.time_budget_s + _OVERSLEEP_S)
            raise _setup("mock: stalled past the agent's timeLimitSeconds but the loop did not stop it")
        if failure == "deadline":
            await asyncio.sleep(ctx.deadline_s + _OVERSLEEP_S)
            # Reached only when nothing enforced mst's deadline (a client driven outside the collector).
            raise EndingException(Infrastructure(
                "deadline", "mock: stalled past mst's per-attempt deadline (injected)", True))
        raise AssertionError(f"unhandled mock failure {failure}")  # pragma: no cover

    def _fields(self, request: ModelRequest) -> dict[str, Any]:
        ctx = self._ctx
        results: list[str] = []  # a loop, not a comprehension (see render): called once a model request
        for m in request.messages:
            if isinstance(m, ToolResult):
                results.append(m.content)
        return {
            "expected": ctx.expected,
            "prompt": ctx.prompt,
            "case": ctx.case_id,
            "variant": ctx.variant_id,
            "trial": ctx.trial,
            "try": ctx.try_number,
            "metadata": ctx.metadata,
            "result": results[-1] if results else "",
            "results": results,
        }

    def _next_step(self, request: ModelRequest) -> tuple[str, tuple[ToolCall, ...], str]:
        """The step's text, tool calls and stop reason: :meth:`complete` builds the one
        :class:`ModelResponse`, with its usage, from them."""
        settings, idx = self._settings, request.request_index
        inj = self._injection
        steps = settings.steps
        keep_going = inj is not None and (inj.failure == "turn-limit" or inj.request_index > idx)
        if idx < len(steps):
            step = steps[idx]
        elif keep_going:
            # The script is done but an injection still has to happen later: keep calling tools
            # (the last scripted step again, or the first tool, or one that does not exist).
            if steps:
                step = steps[-1]
            else:
                step = MockToolStep(tool=request.tools[0].name if request.tools else "noop", args={}, text="")
        else:
            template = settings.answer if self._succeeds else settings.wrongAnswer
            return render(template, self._fields(request)), (), "end_turn"
        fields = self._fields(request)
        call = ToolCall(f"call_{idx}", step.tool, render_value(step.args, fields))
        return render(step.text, fields), (call,), "tool_use"
