"""The eval file's schema: pydantic models at the edge, unknown fields are errors."""

from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from mst.config.fields import empty_list
from mst.config.judge_agentic import AgenticJudgeConfig
from mst.config.judge_limits import JudgeLimit
from mst.config.judge_llm import LlmJudgeConfig

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("must not contain a NUL character (\\0): it cannot be a path, an argument or an "
                         "environment value")
    return value


# Text handed to the operating system (paths, a server's command line and environment): a NUL
# there fails every attempt (a retryable failure for ever) or crashes the run, so it is refused here.
OsText = Annotated[str, AfterValidator(_no_nul)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)


# --- assertions -------------------------------------------------------------------------------


class _AssertionBase(Strict):
    id: str | None = Field(None, pattern=ID_PATTERN, description="Name shown in results; defaults to the type.")
    field: Literal["answer", "transcript"] = Field("answer", description="What the assertion reads.")


class Contains(_AssertionBase):
    type: Literal["contains", "not-contains"]
    value: str
    ignoreCase: bool = False


class Regex(_AssertionBase):
    type: Literal["regex"]
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re

        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return v


class Equals(_AssertionBase):
    type: Literal["equals"]
    value: Any = Field(None, description="Expected answer; defaults to the case's `expected`.")
    ignoreCase: bool = False
    strip: bool = True


class JsonPath(_AssertionBase):
    type: Literal["json-path"]
    path: str = Field(description="A JSONPath into the answer parsed as JSON, e.g. $.items[0].name")
    equals: Any = None


_INCLUDE_REJECTED = Field(False, description="Also count calls mst rejected before any server saw them.")


class ToolCalled(_AssertionBase):
    type: Literal["tool-called", "tool-not-called"]
    tool: str
    args: dict[str, Any] | None = Field(None, description="Arguments that must match (a subset).")
    includeRejected: bool = _INCLUDE_REJECTED


class ToolCallCount(_AssertionBase):
    type: Literal["tool-calls"]
    tool: str | None = Field(None, description="Count only this tool; all tools when omitted.")
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)
    includeRejected: bool = _INCLUDE_REJECTED


class FinalAnswer(_AssertionBase):
    type: Literal["final-answer"]


Assertion = Annotated[
    Contains | Regex | Equals | JsonPath | ToolCalled | ToolCallCount | FinalAnswer,
    Field(discriminator="type"),
]


# --- judges -----------------------------------------------------------------------------------


_ONE_SOURCE = ("give exactly one of 'code' (module:function), 'plugin' (entry point name), 'llm' (a model "
               "judge) or 'agentic' (a Claude Code or Codex judge)")


def _sources(judge: "JudgeConfig | PairwiseConfig") -> int:
    """How many of a judge's kinds are given: exactly one must be (docs/grading.md, "Judges")."""
    return sum(value is not None for value in (judge.code, judge.plugin, judge.llm, judge.agentic))


class JudgeConfig(Strict):
    """A judge: a Python callable named ``module:function``, an ``mst.judges`` entry point, or a model."""

    id: str = Field(pattern=ID_PATTERN)
    code: str | None = Field(None, description="module:function, importable from the eval's directory.")
    plugin: str | None = Field(None, description="Name of an entry point in the group mst.judges.")
    llm: LlmJudgeConfig | None = Field(None, description="A model (or panel) grading with a rubric.")
    options: dict[str, Any] = Field(default_factory=dict)
    threshold: float = Field(0.5, description="A judge returning a score passes at or above this.")
    secrets: list[Annotated[str, Field(pattern=SECRET_NAME)]] = Field(
        default_factory=empty_list,
        description="Names of --secrets-file entries this judge reads from its environment; judges get no others.",
    )

    agentic: AgenticJudgeConfig | None = Field(None, description="A Claude Code or Codex CLI judge (docs/grading.md).")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if _sources(self) != 1:
            raise ValueError(_ONE_SOURCE)
        if self.code is not None and ":" not in self.code:
            raise ValueError("'code' must look like module:function")
        return self


class PairwiseConfig(Strict):
    """A pairwise judge: called with (case, a, b, options), returns "A", "B" or "tie"."""

    id: str = Field("pairwise", pattern=ID_PATTERN)
    code: str | None = None
    plugin: str | None = None
    llm: LlmJudgeConfig | None = Field(None, description="A model (or panel) preferring one response.")
    options: dict[str, Any] = Field(default_factory=dict)
    secrets: list[Annotated[str, Field(pattern=SECRET_NAME)]] = Field(
        default_factory=empty_list,
        description="Names of --secrets-file entries this judge reads from its environment; judges get no others.",
    )

    agentic: AgenticJudgeConfig | None = Field(None, description="A Claude Code or Codex CLI judge (docs/grading.md).")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if _sources(self) != 1:
            raise ValueError(_ONE_SOURCE)
        return self


# --- cases, datasets, variants ----------------------------------------------------------------


class CaseConfig(Strict):
    id: str = Field(pattern=ID_PATTERN)
    prompt: str
    expected: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    trials: int | None = Field(None, ge=1, le=10_000, description="Overrides the eval's `trials`.")
    assertions: list[Assertion] = Field(default_factory=empty_list)
    judges: list[JudgeConfig] = Field(default_factory=empty_list)
    mock: dict[str, Any] | None = Field(
        None, description="Script for the offline mock model on this case, merged over the variant's."
    )


class DatasetConfig(Strict):
    """Cases from a file (JSONL, CSV, YAML, by extension or `format`) or a `mst.datasets` plugin."""

    path: OsText | None = None
    format: str | None = Field(None, description="jsonl, csv, yaml, or a mst.datasets entry point.")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _source(self) -> Self:
        if self.path is None and self.format is None:
            raise ValueError("give 'path' (a JSONL, CSV or YAML file) or 'format' (a dataset plugin)")
        return self


ServerLifetime = Literal["attempt", "variant"]


class _ServerBase(Strict):
    lifetime: ServerLifetime = Field(
        "attempt",
        description="`attempt` (default): a fresh server (or HTTP session) for every attempt, for servers "
        "with state. `variant`: one per variant and worker, shared by its attempts (concurrent ones too), "
        "for stateless servers.",
    )


class StdioServer(_ServerBase):
    command: OsText
    args: list[OsText] = Field(default_factory=empty_list)
    env: dict[OsText, OsText] = Field(default_factory=dict)
    cwd: OsText | None = None


class HttpServer(_ServerBase):
    url: OsText = Field(pattern=r"^https?://")
    headers: dict[OsText, OsText] = Field(default_factory=dict)


McpServer = StdioServer | HttpServer


class VariantConfig(Strict):
    id: str = Field(pattern=ID_PATTERN)
    client: str = Field("agent", description="A client kind: agent, command, or a mst.clients plugin.")
    model: str | None = Field(None, description="Model name, e.g. mock, or provider:model.")
    baseline: bool = False
    mcpServers: dict[str, McpServer] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict, description="Client settings; checked by the client.")
    secrets: list[Annotated[str, Field(pattern=SECRET_NAME)]] = Field(
        default_factory=empty_list,
        description="Names of --secrets-file entries this variant's client receives (besides the ${NAME}s its "
        "mcpServers refer to); it gets no others.",
    )


CasePassRule = Literal["all", "any", "majority"]


class CasePass(Strict):
    atLeast: float = Field(ge=0, le=1, description="Fraction of trials that must pass.")


class ResultsConfig(Strict):
    """Where finished runs are uploaded (docs/result-store.md)."""

    store: OsText = Field(
        min_length=1, pattern=r"^(file|s3|gs)://",
        description="A result store URL: file:///dir, s3://bucket/prefix or gs://bucket/prefix.",
    )


class EvalConfig(Strict):
    """An eval: cases, the variants that attempt them, and how attempts are graded."""

    model_config = ConfigDict(
        extra="forbid", hide_input_in_errors=True, title="mst eval", json_schema_extra={"$id": "mst.eval/v1"}
    )

    name: str = Field(min_length=1)
    description: str | None = None
    runsDir: OsText | None = Field(None, description="Where runs are written; default ./runs.")
    trials: int = Field(1, ge=1, le=10_000, description="Trials per case for every variant.")
    concurrency: int = Field(4, ge=1, le=10_000)
    gradingConcurrency: int | None = Field(
        None, ge=1, le=10_000,
        description="Trials graded at once when judges run (default: `concurrency`). Judges that wait on "
        "a provider or a CLI gain from more; CPU-bound Python judges run best at 1.",
    )
    deadlineSeconds: float = Field(600, gt=0, description="mst's deadline for one attempt.")
    seed: int = Field(
        0, ge=-(2**63), le=2**63 - 1,
        description="Seeds the mock model's draws; stored in run.json, so it must fit in 64 bits.",
    )
    casePass: CasePassRule | CasePass = Field(
        "all", description="When a case passes: all trials (default), any, majority, or {atLeast: f}."
    )
    cases: list[CaseConfig] = Field(default_factory=empty_list)
    datasets: list[DatasetConfig] = Field(default_factory=empty_list)
    variants: list[VariantConfig] = Field(min_length=1)
    assertions: list[Assertion] = Field(default_factory=empty_list, description="Applied to every case.")
    judges: list[JudgeConfig] = Field(default_factory=empty_list, description="Applied to every case.")
    pairwise: PairwiseConfig | None = None
    judgeLimits: dict[Annotated[str, Field(pattern=ID_PATTERN)], JudgeLimit] = Field(
        default_factory=dict, description="Per provider: judge calls in flight and per minute, across all shards.")
    graders: dict[str, Any] | None = Field(None, description="Deterministic graders (docs/graders.md, Configuration).")
    redact: list[str] = Field(default_factory=empty_list, description="Extra regexes redacted from transcripts.")
    metrics: list[str] = Field(
        default_factory=empty_list,
        description="Experiment metrics: `grader:<id>` or `graders.<id>.value` of an enabled grader.",
    )
    results: ResultsConfig | None = Field(None, description="Upload every finished run to a result store.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        ids = [v.id for v in self.variants]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"variant ids must be unique; repeated: {', '.join(dupes)}")
        if sum(v.baseline for v in self.variants) > 1:
            raise ValueError("at most one variant may be the baseline")
        if self.pairwise is not None and not any(v.baseline for v in self.variants):
            raise ValueError("a pairwise judge needs one variant marked `baseline: true`")
        if not self.cases and not self.datasets:
            raise ValueError("give cases inline (`cases`) or from files (`datasets`)")
        return self
