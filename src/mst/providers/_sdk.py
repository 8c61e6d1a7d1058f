"""What the OpenAI and Anthropic adapters share: one provider per variant, one SDK client per
API key (a key may differ per secrets file), every client closed with the run."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from mst.providers.settings import ProviderSettings


class _Closable(Protocol):
    async def close(self) -> Any: ...


C = TypeVar("C", bound=_Closable)


class SdkProvider(Generic[C]):
    default_key: str  # the secret's name when the settings name none

    def __init__(self, model: str, settings: ProviderSettings | None) -> None:
        self.model = model
        self.settings = settings or ProviderSettings()
        self._clients: dict[str, C] = {}

    def api_key(self, secrets: Mapping[str, str]) -> tuple[str, str | None]:
        """The secret's name, and its value from the secrets file or else the environment."""
        secret = self.settings.apiKeySecret or self.default_key
        return secret, secrets.get(secret) or os.environ.get(secret)

    def cached_client(self, key: str, make: Callable[[], C]) -> C:
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = make()
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


P = TypeVar("P", bound=SdkProvider[Any])


class SdkSession(Generic[P]):
    """One attempt's view of a provider: the provider and the attempt's secrets."""

    __slots__ = ("_provider", "_secrets")

    def __init__(self, provider: P, secrets: Mapping[str, str]) -> None:
        self._provider = provider
        self._secrets = secrets
