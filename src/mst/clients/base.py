"""The client interface: what every client kind (built in or a `mst.clients` plugin) implements.

A client runs one attempt and says how it ended. It decides its own ending at the point of
failure (docs/endings.md): a provider's 429 is ``provider-api``, its own turn limit is a trial with
``turn-limit``. It never writes files of the run except under ``artifacts_dir``; the collector
writes the transcript it recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from mst.config.models import VariantConfig
from mst.endings import Ending
from mst.session.recorder import TranscriptRecorder as TranscriptRecorder  # its home: the session package


class NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


@dataclass
class AttemptRequest:
    """Everything a client needs for one attempt; nothing else of the run is reachable."""

    case_id: str
    prompt: str
    expected: Any
    metadata: Mapping[str, Any]
    variant: VariantConfig
    trial: int
    try_number: int
    seed: int
    deadline_s: float
    artifacts_dir: Path
    transcript: TranscriptRecorder
    secrets: Mapping[str, str] = field(default_factory=dict)
    case_mock: Mapping[str, Any] | None = None


@dataclass
class AttemptOutcome:
    ending: Ending
    answer: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)


class Client(Protocol):
    """A client kind. ``settings_model`` validates the variant's ``settings`` at load time."""

    settings_model: ClassVar[type[BaseModel]]

    def __init__(self, variant: VariantConfig, settings: Any, base_dir: Path) -> None: ...

    async def attempt(self, request: AttemptRequest) -> AttemptOutcome: ...

    async def aclose(self) -> None: ...
