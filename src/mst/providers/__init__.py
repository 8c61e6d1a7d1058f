"""Model providers behind one interface (:mod:`mst.providers.base`), looked up by model name.

A variant's ``model`` names the provider: ``mock`` is the offline mock model; ``openai:gpt-4o``
or ``anthropic:claude-...`` name a provider prefix and that provider's model. Adapters register a
factory under their prefix (:func:`register_provider`), so a new provider drops in without the
agent loop changing. An unknown or not-yet-available provider is a setup failure a retry cannot
help, raised when the client is created so no attempt is spent on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mst.endings import EndingException, Infrastructure
from mst.providers.base import (
    AssistantMessage,
    AttemptContext,
    ContextOverflow,
    Message,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSession,
    Provider,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)

ProviderFactory = Callable[[str, Mapping[str, Any]], Provider]
"""``factory(model, options)``: ``model`` is the part after ``prefix:``; ``options`` are the
client's provider options: ``{"mock": MockSettings | None, "provider": ProviderSettings | None}``."""

MOCK_MODEL = "mock"

# Prefixes planned but not built yet: naming one is a clear setup error, not "unknown provider".
_PLANNED: tuple[str, ...] = ()


def _mock_factory(model: str, options: Mapping[str, Any]) -> Provider:
    from mst.providers.mock import MockProvider

    return MockProvider(options.get("mock"))


def _openai_factory(model: str, options: Mapping[str, Any]) -> Provider:
    # The adapter module is light; the `openai` SDK itself is imported at the first request.
    from mst.providers.openai import OpenAIProvider

    return OpenAIProvider(model, options.get("provider"))


def _anthropic_factory(model: str, options: Mapping[str, Any]) -> Provider:
    from mst.providers.anthropic import AnthropicProvider

    return AnthropicProvider(model, options.get("provider"))


_REGISTRY: dict[str, ProviderFactory] = {
    MOCK_MODEL: _mock_factory, "openai": _openai_factory, "anthropic": _anthropic_factory,
}


def register_provider(prefix: str, factory: ProviderFactory) -> None:
    """Make ``prefix:model`` resolve to ``factory`` (used by provider adapters and tests)."""
    _REGISTRY[prefix] = factory


def known_prefixes() -> frozenset[str]:
    """The provider prefixes a model name may start with (``mock`` included)."""
    return frozenset(_REGISTRY)


def split_model(model: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` → ``("openai", "gpt-4o")``; ``"mock"`` → ``("mock", "mock")``."""
    prefix, sep, name = model.partition(":")
    return (prefix, name) if sep else (model, model)


def create_provider(model: str | None, options: Mapping[str, Any] | None = None) -> Provider:
    """The provider for a variant's ``model``; raises ``EndingException(setup)`` when there is none."""
    if not model:
        raise EndingException(Infrastructure(
            "setup", "the variant names no model: set `model` (e.g. `mock`, or provider:model)", False))
    prefix, name = split_model(model)
    factory = _REGISTRY.get(prefix)
    if factory is None:
        if prefix in _PLANNED:
            why = f"provider {prefix!r} is not available yet (model {model!r}); use `model: mock` for now"
        else:
            known = ", ".join(sorted({*_REGISTRY, *_PLANNED}))
            why = f"unknown model provider {prefix!r} in model {model!r}; known providers: {known}"
        raise EndingException(Infrastructure("setup", why, False))
    return factory(name, options or {})


__all__ = [
    "MOCK_MODEL",
    "AssistantMessage",
    "AttemptContext",
    "ContextOverflow",
    "Message",
    "ModelOutputError",
    "ModelRequest",
    "ModelResponse",
    "ModelSession",
    "Provider",
    "ProviderFactory",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "create_provider",
    "known_prefixes",
    "register_provider",
    "split_model",
]
