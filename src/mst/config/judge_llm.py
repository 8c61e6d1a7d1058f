"""The eval file's ``llm:`` judge: a model (or a panel of models) grading with a rubric.

One model serves both a case judge (``judges[].llm``) and the pairwise judge (``pairwise.llm``);
how it runs is in :mod:`mst.grading.llm_judge` and docs/grading.md ("LLM judges"). Everything
that decides a verdict is validated here, when the eval loads: a template naming a field that
does not exist is an error naming the field path, not a prompt with a hole in it.
"""

import re
from typing import Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Scale = Literal["pass-fail", "score", "likert-5"]
Vote = Literal["majority", "mean", "all"]
Sees = Literal["prompt", "answer", "expected", "tool-calls", "transcript", "artifacts", "metadata"]

# What each `sees` item is called in a template ({tool_calls} for `tool-calls`).
TEMPLATE_FIELDS: Final[dict[str, Sees]] = {
    "prompt": "prompt", "answer": "answer", "expected": "expected", "tool_calls": "tool-calls",
    "transcript": "transcript", "artifacts": "artifacts", "metadata": "metadata",
}
# `{rubric}` is always available: it is the judge's own text, not something of the trial.
ALWAYS_FIELDS: Final = frozenset({"rubric"})
# `{{`/`}}` are literal braces; `{name}` or `{metadata.KEY}` a field.
PLACEHOLDER: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_]+)(?:\.([A-Za-z0-9_.-]+))?\}")


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)

    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")


def template_fields(template: str) -> list[tuple[str, str | None]]:
    """The ``(field, key)`` placeholders of a template, in order (``key`` for ``{metadata.KEY}``)."""
    return [(m.group(1), m.group(2)) for m in PLACEHOLDER.finditer(template) if m.group(1)]


class LlmJudgeConfig(BaseModel):
    """A rubric judge run by a model or a panel of models (docs/grading.md, "LLM judges")."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)

    model: str | None = Field(None, min_length=1, description="provider:model (openai:…, anthropic:…) or mock.")
    models: list[str] | None = Field(None, min_length=1, max_length=16, description="A panel of models.")
    vote: Vote = Field("majority", description="How a panel's (and samples') votes combine.")
    samples: int = Field(1, ge=1, le=25, description="Votes per model (self-consistency).")
    rubric: str = Field(min_length=1, description="What the judge checks.")
    template: str | None = Field(
        None, min_length=1,
        description="The whole prompt, with {prompt} {answer} {expected} {transcript} {tool_calls} "
        "{artifacts} {metadata} {metadata.KEY} {rubric}; default: one per scale.",
    )
    scale: Scale = Field("pass-fail", description="pass-fail, score (0..1, passes at threshold) or likert-5.")
    sees: list[Sees] | None = Field(
        None, description="What of the trial the judge is shown; default prompt, answer, expected "
        "(a template's fields when it has one).",
    )
    maxInputTokens: int = Field(
        16_000, ge=256, le=2_000_000,
        description="Token budget of the prompt: the transcript (then tool calls, artifacts) is cut in the "
        "middle, with a visible marker, to fit.",
    )
    maxOutputTokens: int = Field(1024, ge=16, le=100_000)
    temperature: float = Field(0, ge=0, le=2)
    baseUrl: str | None = Field(None, pattern=r"^https?://",
                                description="An OpenAI-compatible (or Anthropic) endpoint.")
    apiKeySecret: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                     description="The key's secret name; default OPENAI_API_KEY / ANTHROPIC_API_KEY.")
    stream: bool = False
    timeoutSeconds: float = Field(120, gt=0, le=3600, description="Bound on one request.")
    retries: int = Field(3, ge=0, le=20, description="Retries of a 429, 5xx, timeout or dropped connection.")
    prices: dict[str, Price] = Field(default_factory=dict,
                                     description="Overrides the built-in price table, by provider:model.")
    mock: dict[str, Any] | None = Field(
        None, description="The mock model's script when a model is `mock` (checked when the judge is resolved).")

    @field_validator("template")
    @classmethod
    def _known_fields(cls, template: str | None) -> str | None:
        if template is None:
            return None
        for name, key in template_fields(template):
            if name not in TEMPLATE_FIELDS and name not in ALWAYS_FIELDS:
                known = ", ".join(f"{{{n}}}" for n in [*TEMPLATE_FIELDS, *sorted(ALWAYS_FIELDS)])
                raise ValueError(f"unknown field {{{name}}} in the template; known: {known}, {{metadata.KEY}}")
            if key is not None and name != "metadata":
                raise ValueError(f"{{{name}.{key}}}: only metadata has keys ({{metadata.KEY}})")
        return template

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.model is None) == (self.models is None):
            raise ValueError("give exactly one of 'model' or 'models' (a panel)")
        if self.template is not None and self.sees is not None:
            used = {TEMPLATE_FIELDS[n] for n, _ in template_fields(self.template) if n in TEMPLATE_FIELDS}
            missing = sorted(used - set(self.sees))
            if missing:
                raise ValueError(f"the template shows {', '.join(missing)}, which 'sees' does not list")
        return self

    @property
    def panel(self) -> list[str]:
        """Every model that votes, in order."""
        return list(self.models) if self.models is not None else [str(self.model)]

    def shown(self, pairwise: bool = False) -> list[Sees]:
        """What the judge sees: ``sees``, else the template's fields, else the default."""
        if self.sees is not None:
            return list(dict.fromkeys(self.sees))
        if self.template is not None:
            return list(dict.fromkeys(TEMPLATE_FIELDS[n] for n, _ in template_fields(self.template)
                                      if n in TEMPLATE_FIELDS))
        return ["prompt", "answer"] if pairwise else ["prompt", "answer", "expected"]


__all__ = ["LlmJudgeConfig", "Price", "Scale", "Sees", "Vote", "template_fields"]
