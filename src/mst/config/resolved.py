"""The resolved eval: what the coordinator computes once and every later step reads.

Plain frozen dataclasses (inside the edge). Resolution loads datasets and plugins, applies
eval-level assertions and judges to each case, and gives every judge an identity, so a
resumed grading can tell a verdict from the same judge from one by a changed judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mst.config.models import Assertion, EvalConfig, VariantConfig


@dataclass(frozen=True)
class ResolvedJudge:
    """A code judge ready to call. ``identity`` digests its definition and plugin version."""

    id: str
    target: str  # "module:function" or the entry-point name
    source: str  # "code", "plugin", or a judge kind of mst.grading.judges.JUDGE_KINDS ("llm")
    options: dict[str, Any]
    threshold: float
    version: str  # plugin package version, or a digest of the judge's module file
    identity: str
    secrets: tuple[str, ...] = ()  # the --secrets-file names it reads (not part of its identity)


@dataclass(frozen=True, slots=True)  # one per case, and an eval may have tens of thousands
class ResolvedCase:
    id: str
    prompt: str
    expected: Any
    metadata: dict[str, Any]
    trials: int
    assertions: tuple[Assertion, ...]
    judges: tuple[ResolvedJudge, ...]
    mock: dict[str, Any] | None = None


@dataclass(frozen=True)
class ResolvedEval:
    config: EvalConfig
    path: Path  # the eval file
    base_dir: Path  # the eval file's directory: code judges and relative paths resolve here
    digest: str  # sha256 of the eval file's bytes
    cases: tuple[ResolvedCase, ...]
    pairwise: ResolvedJudge | None
    client_settings: dict[str, Any] = field(default_factory=dict)  # variant id -> validated settings
    graders: Any = None  # mst.graders.GradersConfig

    @property
    def variants(self) -> list[VariantConfig]:
        return self.config.variants

    @property
    def baseline(self) -> VariantConfig | None:
        return next((v for v in self.config.variants if v.baseline), None)

    def case(self, case_id: str) -> ResolvedCase:
        """A case by id, in O(1): callers look cases up once per trial."""
        by_id: dict[str, ResolvedCase] | None = self.__dict__.get("_by_id")
        if by_id is None:
            by_id = {c.id: c for c in self.cases}
            object.__setattr__(self, "_by_id", by_id)
        return by_id[case_id]
