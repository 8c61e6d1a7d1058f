"""The model interface the agent loop talks to, whatever the provider behind it.

The agent loop (``mst.clients.agent``) only ever sees these types: a conversation of
:data:`Message` values, the :class:`ToolSpec` list of the attempt's MCP tools, and a
:class:`ModelResponse` with text and/or :class:`ToolCall` values and its token usage. A provider
adapter (the offline ``mock`` today; OpenAI- and Anthropic-compatible adapters later) translates
to and from its SDK and decides its own failures *at the point of failure* (docs/endings.md):

- a 429, a 5xx or an overloaded API → ``EndingException(Infrastructure("provider-api", ..., True))``
- a dropped connection → ``EndingException(Infrastructure("network", ..., True))``
- a rejected key, a model that does not exist → ``EndingException(Infrastructure("setup", ..., False))``
- the conversation no longer fits the model's context → :class:`ContextOverflow`. The adapter
  cannot know whether that is a setup failure (the prompt alone does not fit) or a trial (the
  client's own turns filled the context), so the loop decides from the request index.
- a response the client cannot use (malformed tool-call arguments) → :class:`ModelOutputError`,
  which the loop ends as a ``client-error`` trial.

Requests and responses are slotted dataclasses: the harness budget is 1 ms per attempt, so
nothing here validates at runtime. The ones made for every attempt or request
(:class:`AttemptContext`, :class:`ModelRequest`, :class:`ModelResponse`) are not ``frozen``: a
frozen dataclass sets each field through ``object.__setattr__``, which made an
:class:`AttemptContext` cost ~4 µs instead of ~1 µs (bench/perf16_percase.md). They are still
values: nothing changes one after it is made (a provider must not), and nothing hashes them
(a context or a request holds a mapping or a list, so neither was hashable anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: the name it calls it by, and the JSON Schema of its input."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for; ``id`` pairs it with its :class:`ToolResult`."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model said: text, tool calls, or both."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()


# The image types the providers' APIs take (Anthropic image blocks, OpenAI ``image_url`` data URLs).
MODEL_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class ImageData:
    """An image a tool returned (base64, as MCP carries it), passed to models that take images."""

    mime_type: str
    data: str


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one tool call, fed back to the model (an error is fed back too).

    ``content`` is the text the model sees; ``images`` are the result's images, which an adapter
    passes as image content where its API accepts it (the text names each image either way).
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImageData, ...] = ()

    def model_images(self) -> list[ImageData]:
        """The images a model API takes as images; the others stay described in the text only."""
        return [i for i in self.images if i.mime_type in MODEL_IMAGE_TYPES]


Message = UserMessage | AssistantMessage | ToolResult


@dataclass(slots=True)
class ModelRequest:
    """One call to the model. ``request_index`` counts from 0 within the attempt."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    request_index: int
    system: str | None = None
    tool_choice: str | None = None  # the one tool the model must call (a judge's verdict), or free


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class ModelResponse:
    """The model's next step. No tool calls means ``text`` is the final answer.

    The loop measures each request's duration itself (wall time around :meth:`ModelSession.complete`),
    so every provider's ``durationMs`` in the transcript means the same thing.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: str | None = None


@dataclass(slots=True)
class AttemptContext:
    """What a provider may know about the attempt it serves.

    Real providers use ``secrets`` (API keys, from the secrets file; never logged). The mock also
    uses the identity fields to be deterministic per (case, variant, trial, seed, try number),
    and ``expected``/``prompt`` for its answer templates.
    """

    case_id: str
    variant_id: str
    trial: int
    try_number: int
    seed: int
    prompt: str
    expected: Any
    metadata: Mapping[str, Any]
    deadline_s: float
    time_budget_s: float | None = None
    case_mock: Mapping[str, Any] | None = None
    secrets: Mapping[str, str] = field(default_factory=dict)


class ContextOverflow(Exception):
    """The request did not fit the model's context window.

    Raised by an adapter (from the provider's typed error code, or its own token count). The
    agent loop ends the attempt as ``Infrastructure("setup", ..., retryable=False)`` when this is
    the first request (the case's prompt alone does not fit) and as ``Trial("context-limit")``
    later (the client's own turns and tool results filled the context).
    """


class ModelOutputError(Exception):
    """The model answered with something the client cannot use (e.g. unparseable tool arguments).

    This is the client's own failure inside the trial: the loop ends it as ``client-error``.
    """


class ModelSession(Protocol):
    """A provider bound to one attempt; carries whatever per-attempt state the provider needs."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class Provider(Protocol):
    """A model provider, created once per variant and shared by all its attempts."""

    name: str

    def session(self, context: AttemptContext) -> ModelSession:
        """Bind to one attempt. May raise ``EndingException`` (e.g. a setup error in the case's script)."""

    async def aclose(self) -> None: ...
