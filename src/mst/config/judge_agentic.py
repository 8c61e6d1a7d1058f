"""The eval file's schema for agentic judges: a real Claude Code or Codex CLI that reads a trial.

``judges[].agentic`` grades one trial, ``pairwise.agentic`` compares two; both run the CLI
headless in a temporary, read-only workspace holding the trial's transcript and artifacts
(docs/grading.md, "Agentic judges").
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mst.config.fields import empty_list

Runtime = Literal["claude-code", "codex"]
DEFAULT_COMMAND: dict[str, list[str]] = {"claude-code": ["claude"], "codex": ["codex"]}


class AgenticJudgeConfig(BaseModel):
    """Which CLI judges, with which model, rubric and limits."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    runtime: Runtime = Field(description="claude-code (Claude Code's `claude -p`) or codex (`codex exec`).")
    model: str | None = Field(None, description="The CLI's --model; default: the CLI's own.")
    rubric: str = Field(min_length=1, description="What the judge decides; it reads the workspace to decide.")
    maxTurns: int = Field(
        20, ge=1, le=1000,
        description="Claude Code's --max-turns; for Codex the most tool calls (Codex has no turn limit).",
    )
    timeLimitSeconds: float = Field(600, gt=0, le=86_400, description="A judge run past this is a grading error.")
    command: list[str] | None = Field(
        None, min_length=1, description="How to run the CLI (argv prefix); default [claude] or [codex]."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables for the CLI (no secrets: list those in the judge's `secrets`).",
    )
    extraArgs: list[str] = Field(default_factory=empty_list, description="More CLI arguments (no secrets), added last.")

    def argv_prefix(self) -> list[str]:
        return list(self.command or DEFAULT_COMMAND[self.runtime])


__all__ = ["DEFAULT_COMMAND", "AgenticJudgeConfig", "Runtime"]
