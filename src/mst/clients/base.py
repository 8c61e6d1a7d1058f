"""The client interface: what every client kind (built in or a `mst.clients` plugin) implements.

A client runs one attempt and says how it ended. It decides its own ending at the point of
failure (docs/endings.md): a provider's 429 is ``provider-api``, its own turn limit is a trial with
``turn-limit``. It never writes files of the run except under ``artifacts_dir``; the collector
writes the transcript it recorded.
"""

from __future__ import annotations

import os
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


class AttemptRequest:
    """Everything a client needs for one attempt; nothing else of the run is reachable.

    ``artifacts_dir`` may be given as a string: the collector does, and the :class:`~pathlib.Path`
    is made only when a client reads it (most never do; making one per attempt cost ~5% of an
    offline attempt's CPU, bench/perf16_collect.md).
    """

    __slots__ = ("_artifacts", "case_id", "case_mock", "deadline_s", "expected", "metadata", "prompt",
                 "secrets", "seed", "transcript", "trial", "try_number", "variant")

    def __init__(
        self, case_id: str, prompt: str, expected: Any, metadata: Mapping[str, Any], variant: VariantConfig,
        trial: int, try_number: int, seed: int, deadline_s: float, artifacts_dir: Path | str,
        transcript: TranscriptRecorder, secrets: Mapping[str, str] | None = None,
        case_mock: Mapping[str, Any] | None = None,
    ) -> None:
        self.case_id = case_id
        self.prompt = prompt
        self.expected = expected
        self.metadata = metadata
        self.variant = variant
        self.trial = trial
        self.try_number = try_number
        self.seed = seed
        self.deadline_s = deadline_s
        self._artifacts: Path | str = artifacts_dir
        self.transcript = transcript
        self.secrets: Mapping[str, str] = {} if secrets is None else secrets
        self.case_mock = case_mock

    @property
    def artifacts_dir(self) -> Path:
        """The only place of the run a client may write files (made when first read)."""
        artifacts = self._artifacts
        if isinstance(artifacts, str):
            artifacts = self._artifacts = Path(artifacts)
        return artifacts

    @property
    def artifacts_read(self) -> bool:
        """Whether :attr:`artifacts_dir` was read (or given as a Path): a client that never read
        it cannot have written artifacts, so the collector does not look for any."""
        return not isinstance(self._artifacts, str)

    def __repr__(self) -> str:
        return (f"AttemptRequest({self.variant.id}/{self.case_id}/{self.trial}, try {self.try_number}, "
                f"artifacts {os.fspath(self._artifacts)})")


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
