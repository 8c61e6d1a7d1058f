"""``judgeLimits``: how hard the eval's judges may use each provider (docs/grading.md, "Judge access").

Keyed by provider name (``openai``, ``anthropic``, a gateway's name: whatever a judge passes to
``access.slot(provider)``). The caps hold for the whole grading, locally and across every shard
of ``mst grade --runner``, where the coordinator leases the slots (docs/shards.md).
"""

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class JudgeLimit(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    concurrency: int | None = Field(None, ge=1, le=100_000,
                                    description="Calls to this provider in flight at once, across all shards.")
    requestsPerMinute: float | None = Field(None, gt=0, le=1_000_000,
                                            description="Calls started in any 60-second window, across all shards.")

    @model_validator(mode="after")
    def _some_cap(self) -> Self:
        if self.concurrency is None and self.requestsPerMinute is None:
            raise ValueError("give concurrency, requestsPerMinute or both")
        return self
