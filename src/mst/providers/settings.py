"""Settings of a real model provider (the ``agent`` client's ``settings.provider``).

One model for every SDK-backed provider (``openai:``, ``anthropic:``), so an eval can switch a
variant from one provider to the other by changing ``model`` alone. Validated once, when the eval
is loaded, like every other client setting.
"""

from pydantic import BaseModel, ConfigDict, Field


class ProviderSettings(BaseModel):
    """How the agent client reaches its model provider (``settings.provider`` of an agent variant)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    baseUrl: str | None = Field(
        default=None, pattern=r"^https?://",
        description="API base URL, for gateways and OpenAI-compatible local servers (e.g. "
        "http://127.0.0.1:8000/v1). Default: the SDK's (OPENAI_BASE_URL / ANTHROPIC_BASE_URL or the "
        "provider's own).",
    )
    apiKeySecret: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of the secret (from --secrets-file, else the environment) holding the API key. "
        "Default: OPENAI_API_KEY or ANTHROPIC_API_KEY.",
    )
    stream: bool = Field(default=False, description="Stream each response (SSE) instead of one JSON body.")
    maxRetries: int = Field(
        default=2, ge=0, le=20,
        description="The SDK's own retries of 408/409/429/5xx and dropped connections; when they are "
        "exhausted the attempt ends as provider-api or network (retryable by `mst run --resume`).",
    )
    timeoutSeconds: float = Field(
        default=600, gt=0, description="Bound on one HTTP request; passing it is a network failure (read timeout)."
    )
    maxOutputTokens: int | None = Field(
        default=None, ge=1,
        description="Most tokens the model may write per request (Anthropic requires one: default 4096).",
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
