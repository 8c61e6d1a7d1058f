"""Agentic judges: the real Claude Code or Codex CLI grades a trial (or a pair) by reading it.

A judge run (docs/grading.md, "Agentic judges"):

1. A fresh read-only workspace holds the trial's transcript (JSONL and Markdown) and artifacts
   (:mod:`mst.grading.workspace`); a pairwise judge gets both sides under the neutral labels
   ``A/`` and ``B/``, in the order :func:`~mst.grading.grade.compare_pairwise` asks for.
2. The CLI runs headless there, with read-only tools and the rubric on stdin, through the same
   code the ``claude-code`` and ``codex`` clients run it with (:mod:`mst.agentcli`): its own
   process group, its stream read into canonical events, killed at the time limit.
3. The verdict is JSON matching :data:`VERDICT_SCHEMA` (or :data:`PREFERENCE_SCHEMA`), taken from
   the CLI's structured output — Claude Code's ``--json-schema`` (``structured_output`` in its
   result line), Codex's ``--output-schema`` (its final message is then that JSON) — and parsed
   strictly: anything else is a grading error, never a guessed verdict.
4. The workspace is removed; the judge's event stream (redacted) comes back with the verdict and
   is kept in the regrade under ``judges/<judge>/<variant>/<case>/<trial>.jsonl``.

Keys reach the CLI by its environment only: the names in the judge's ``secrets`` are in the
grading process's environment while judges run, never in argv or a file; they are redacted from
the stream, the verdict's reason and every error. A crashed CLI, a time-out or a verdict that does
not parse is the trial's (or the comparison's) grading error, returned in its outcome: the trial
is ungraded and ``mst grade --resume`` grades it again.

A judge's identity digests its runtime, the runtime's ``--version``, model, rubric and limits,
so a new CLI version or a changed rubric regrades, and a grade worker whose CLI reports another
version refuses to grade with it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mst.agentcli import process
from mst.agentcli.claude_stream import ClaudeStream, private_environment
from mst.agentcli.codex_rollout import codex_home
from mst.agentcli.codex_stream import CodexStream, codex_environment
from mst.config.judge_agentic import AgenticJudgeConfig
from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedJudge
from mst.endings import COMPLETED, Ending, Infrastructure
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess, current
from mst.grading.judges import (
    PAIRWISE_THRESHOLD,
    CaseView,
    JudgeLoadError,
    JudgeReturnError,
    TrialView,
    Verdict,
    judge_identity,
    to_preference,
    to_verdict,
)
from mst.grading.sources import JudgeOutcome, PairOutcome, run_to_completion
from mst.grading.workspace import workspace
from mst.session.events import PHASE_JUDGE
from mst.session.io import dumps_jsonl
from mst.session.recorder import TranscriptRecorder
from mst.session.redact import Redactor

SOURCE: Final = "agentic"
VERSION_TIMEOUT_S: Final = 60.0
READ_ONLY_TOOLS: Final = "Read,Grep,Glob"  # Claude Code's tools that read and never write or run
TRANSCRIPT_BUDGET_CHARS: Final = 2_000_000  # transcript.md; the JSONL beside it is always whole
BACKOFF_S: tuple[float, ...] = (2.0, 8.0)  # pauses before running a judge again (see run_judge)
# The provider a runtime's model calls go to: the name of its `judgeLimits` cap (docs/grading.md).
PROVIDERS: Final[dict[str, str]] = {"claude-code": "anthropic", "codex": "openai"}

VERDICT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"passed": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["passed", "reason"], "additionalProperties": False,
}
PREFERENCE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"preference": {"type": "string", "enum": ["A", "B", "tie"]}, "reason": {"type": "string"}},
    "required": ["preference", "reason"], "additionalProperties": False,
}

_TRIAL_PROMPT: Final = """You are a judge grading one attempt by an AI agent at a task. Everything is in the
current directory, read-only:

- task.json: the task (prompt), what was expected, and its metadata
- transcript.md: the attempt's transcript, readable (transcript.jsonl: the same, as recorded)
- artifacts/: the files the agent produced (absent when it produced none)

Read what you need, then decide by this rubric:

{rubric}

Answer with JSON only, exactly of this shape:
{{"passed": true or false, "reason": "why, in one or two sentences"}}
"""

_PAIR_PROMPT: Final = """You are a judge comparing two attempts, A and B, by AI agents at the same task.
Everything is in the current directory, read-only:

- task.json: the task (prompt), what was expected, and its metadata
- A/ and B/: each attempt's transcript.md (readable; transcript.jsonl as recorded) and artifacts/

Read what you need, then decide by this rubric which attempt is better:

{rubric}

Answer with JSON only, exactly of this shape:
{{"preference": "A", "B" or "tie", "reason": "why, in one or two sentences"}}
"""


class AgenticJudgeError(Exception):
    """The judge gave no verdict (crash, time-out, unparseable answer): a grading error."""


@dataclass(frozen=True, slots=True)
class JudgeRun:
    """What one CLI run of a judge produced: its final structured answer and what it cost."""

    answer: Any  # the parsed JSON object
    usage: dict[str, Any]
    stream: bytes  # the judge's canonical events as JSONL, redacted


# ---------------------------------------------------------------------------------------------
# Resolving


@functools.cache
def runtime_version(argv_prefix: tuple[str, ...]) -> str:
    """``<cli> --version``, once per command per process; raises :class:`OSError` or
    :class:`subprocess.SubprocessError` when the CLI cannot say."""
    done = subprocess.run([*argv_prefix, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                          stdin=subprocess.DEVNULL, check=False)
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise subprocess.SubprocessError(
            f"exited {done.returncode}" + (f": {done.stderr.strip()[-300:]}" if done.stderr.strip() else ""))
    return version


def _version(judge_id: str, cfg: AgenticJudgeConfig) -> str:
    prefix = tuple(cfg.argv_prefix())
    try:
        return runtime_version(prefix)
    except (OSError, subprocess.SubprocessError) as exc:
        why = (f"`{' '.join(prefix)} --version` failed ({type(exc).__name__}: {exc}); install the {cfg.runtime} "
               "CLI, or set `command` in the judge's agentic settings")
        raise JudgeLoadError(judge_id, cfg.runtime, why) from None


def resolve(cfg: JudgeConfig | PairwiseConfig) -> ResolvedJudge:
    """The resolved agentic judge; its identity digests the config and the runtime's version."""
    assert cfg.agentic is not None
    agentic = cfg.agentic
    pairwise = isinstance(cfg, PairwiseConfig)
    threshold = cfg.threshold if isinstance(cfg, JudgeConfig) else PAIRWISE_THRESHOLD
    options = agentic.model_dump(mode="json")
    version = _version(cfg.id, agentic)
    identity = judge_identity(id=cfg.id, target=agentic.runtime, source=SOURCE, options=options,
                              threshold=threshold, version=version, kind="pairwise" if pairwise else "judge")
    return ResolvedJudge(id=cfg.id, target=agentic.runtime, source=SOURCE, options=options, threshold=threshold,
                         version=version, identity=identity, secrets=tuple(cfg.secrets))


def settings(judge: ResolvedJudge) -> AgenticJudgeConfig:
    return AgenticJudgeConfig.model_validate(judge.options)


def needs(judge: ResolvedJudge) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What the judge needs where it runs (the judge preflight): its keys, its CLI, no imports."""
    return tuple(judge.secrets), (settings(judge).argv_prefix()[0],), ()


_CHECKED: set[str] = set()  # identities whose CLI version this process has checked


def _check_version(judge: ResolvedJudge, cfg: AgenticJudgeConfig) -> None:
    """In a process that did not resolve the judge (a grade worker), the CLI must report the
    version it was resolved with: grading with another would break the judge's identity."""
    if judge.identity in _CHECKED:
        return
    found = _version(judge.id, cfg)
    if found != judge.version:
        why = f"the {cfg.runtime} CLI here reports {found!r}; the judge was resolved with {judge.version!r}"
        raise AgenticJudgeError(why)
    _CHECKED.add(judge.identity)


def _describe(judge: ResolvedJudge, exc: BaseException) -> str:
    what = str(exc) if isinstance(exc, AgenticJudgeError | JudgeLoadError) else f"{type(exc).__name__}: {exc}"
    return f"judge {judge.id!r} (agentic {judge.target}): {what}"


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def judge(judge: ResolvedJudge, trial: TrialView, case: CaseView, access: JudgeAccess | None = None) -> JudgeOutcome:
    """Grade one trial; any failure is this trial's grading error. ``access`` is the grading's
    (caps, holds, keys); without one, :func:`~mst.grading.judge_access.current`'s."""
    start = time.perf_counter()
    try:
        cfg = settings(judge)
        _check_version(judge, cfg)
        with workspace(case, [("", trial)], budget_chars=TRANSCRIPT_BUDGET_CHARS) as root:
            run = run_to_completion(run_judge(judge, cfg, root, _TRIAL_PROMPT.format(rubric=cfg.rubric),
                                              VERDICT_SCHEMA, access or current()))
        try:
            verdict = to_verdict(run.answer, judge.threshold)
        except JudgeReturnError as exc:
            raise AgenticJudgeError(f"the judge's verdict does not match its schema: {exc}") from None
    except Exception as exc:  # whatever went wrong, it is this trial's grading error
        return JudgeOutcome(None, _describe(judge, exc), None, _ms(start))
    return JudgeOutcome(Verdict(verdict.passed, verdict.score, verdict.reason, run.usage), None, run.usage,
                        _ms(start), run.stream)


def pairwise(judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView,
             access: JudgeAccess | None = None) -> PairOutcome:
    """One order of a comparison: ``a`` is shown as ``A/``, ``b`` as ``B/``."""
    start = time.perf_counter()
    try:
        cfg = settings(judge)
        _check_version(judge, cfg)
        with workspace(case, [("A", a), ("B", b)], budget_chars=TRANSCRIPT_BUDGET_CHARS) as root:
            run = run_to_completion(run_judge(judge, cfg, root, _PAIR_PROMPT.format(rubric=cfg.rubric),
                                              PREFERENCE_SCHEMA, access or current()))
        try:
            preference, reason = to_preference(run.answer)
        except JudgeReturnError as exc:
            raise AgenticJudgeError(f"the judge's preference does not match its schema: {exc}") from None
    except Exception as exc:  # whatever went wrong, it is this comparison's grading error
        return PairOutcome(None, None, _describe(judge, exc), None, _ms(start))
    return PairOutcome(preference, reason, None, run.usage, _ms(start), run.stream)


def keys(judge: ResolvedJudge, access: JudgeAccess) -> dict[str, str]:
    """The keys one CLI run gets in its environment (never in argv or a file), read afresh for
    each run through ``access.credential``: the judge's ``secrets``, and, when
    ``MST_LLM_AUTH_COMMAND`` is set, the gateway token as ``MST_LLM_AUTH_TOKEN`` (a Codex model
    provider's ``env_key``, say), as fresh as the coordinator keeps it."""
    names = [*judge.secrets, *([AUTH_TOKEN] if access.token is not None else [])]
    return {name: value for name in dict.fromkeys(names) if (value := access.credential(name)) is not None}


async def run_judge(judge: ResolvedJudge, cfg: AgenticJudgeConfig, root: Path, prompt: str,
                    schema: Mapping[str, Any], access: JudgeAccess) -> JudgeRun:
    """Run the judge's CLI in ``root``: the one place a judge CLI is started.

    Each run holds one slot of its runtime's provider (:data:`PROVIDERS`: the eval's
    ``judgeLimits`` by that name hold across shards) and gets its keys once the slot is held. The
    CLIs retry a failed model request themselves, honouring the provider's ``retry-after``
    (Claude Code's ``CLAUDE_CODE_MAX_RETRIES``, Codex's ``request_max_retries``). When one gives up
    on a 429, a 5xx or the network, the whole run is tried again after :data:`BACKOFF_S` (a
    provider's refusal holds that provider for every judge meanwhile); its events stay in the one
    stream, so the audit shows every try.
    """
    # judge access: slot + credential (fleet)
    provider = PROVIDERS[cfg.runtime]
    hide: list[str] = []  # every try's keys (a token may have been refreshed between tries)
    rec = TranscriptRecorder(f"judge:{cfg.runtime}", phase=PHASE_JUDGE)
    started = time.monotonic()
    runner = _run_claude if cfg.runtime == "claude-code" else _run_codex
    for pause in (*BACKOFF_S, None):
        async with access.slot(provider):
            secrets = keys(judge, access)
            hide += secrets.values()
            try:
                ending, answer, usage = await runner(cfg, root, prompt, schema, secrets, rec)
            except AgenticJudgeError as exc:
                raise AgenticJudgeError(Redactor(hide).text(str(exc))) from None
        if pause is None or not _transient(ending):
            break
        if isinstance(ending, Infrastructure) and ending.what == "provider-api":
            access.hold(provider, pause)
        await asyncio.sleep(pause)
    redactor = Redactor(hide)
    usage = {"model": cfg.model, **usage, "latencyMs": int((time.monotonic() - started) * 1000)}
    if ending != COMPLETED:
        raise AgenticJudgeError(redactor.text(f"the {cfg.runtime} judge did not finish: {_why(ending)}"))
    stream = dumps_jsonl(redactor.value(rec.events) if redactor.active else rec.events)
    return JudgeRun(redactor.value(answer), usage, stream)


def _transient(ending: Ending) -> bool:
    """A provider's 429 / 5xx or a network failure the CLI gave up on: worth another run."""
    return isinstance(ending, Infrastructure) and ending.retryable and ending.what in ("provider-api", "network")


def _why(ending: Ending) -> str:
    if isinstance(ending, Infrastructure):
        return f"{ending.what}: {ending.why}"
    return f"{ending.outcome}" + (f": {ending.detail}" if ending.detail else "")


async def _run_claude(cfg: AgenticJudgeConfig, root: Path, prompt: str, schema: Mapping[str, Any],
                      secrets: Mapping[str, str], rec: TranscriptRecorder) -> tuple[Ending, Any, dict[str, Any]]:
    model = _bare(cfg.model)
    argv = [*cfg.argv_prefix(), "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
            "--strict-mcp-config", "--tools", READ_ONLY_TOOLS, "--allowedTools", READ_ONLY_TOOLS,
            "--json-schema", orjson.dumps(schema).decode(), "--max-turns", str(cfg.maxTurns)]
    if model:
        argv += ["--model", model]
    argv += cfg.extraArgs
    with tempfile.TemporaryDirectory(prefix="mst-judge-home-") as home:
        stream = ClaudeStream(rec, model or "", [], mcp_reason=lambda _name: None, startup_s=30)
        env = {**private_environment(Path(home)), **cfg.env, **secrets}
        run = await process.run_json_lines(argv, cwd=root, env=env, stdin=prompt.encode(),
                                           time_limit_s=cfg.timeLimitSeconds, on_line=stream, secrets=secrets,
                                           name="claude")
        ending, text = stream.ending(run)
    result = stream.result or {}
    structured = result.get("structured_output")
    answer = structured if isinstance(structured, dict) else (_strict_json(text) if ending == COMPLETED else None)
    return ending, answer, _claude_usage(result)


def _claude_usage(result: Mapping[str, Any]) -> dict[str, Any]:
    raw = result.get("usage")
    usage: dict[str, Any] = {"inputTokens": None, "outputTokens": None, "costUsd": None}
    if isinstance(raw, dict):
        usage["inputTokens"] = sum(int(raw.get(k) or 0) for k in
                                   ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        usage["outputTokens"] = int(raw.get("output_tokens") or 0)
    cost = result.get("total_cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        usage["costUsd"] = float(cost)
    return usage


async def _run_codex(cfg: AgenticJudgeConfig, root: Path, prompt: str, schema: Mapping[str, Any],
                     secrets: Mapping[str, str], rec: TranscriptRecorder) -> tuple[Ending, Any, dict[str, Any]]:
    model = _bare(cfg.model)
    env = codex_environment(os.environ, cfg.env, secrets)
    with tempfile.TemporaryDirectory(prefix="mst-judge-schema-") as private:
        schema_file = Path(private) / "verdict.schema.json"
        schema_file.write_bytes(orjson.dumps(schema))
        argv = [*cfg.argv_prefix(), "exec", "--json", "--skip-git-repo-check", "--cd", str(root),
                "--sandbox", "read-only", "--output-schema", str(schema_file)]
        if model:
            argv += ["--model", model]
        argv += [*cfg.extraArgs, "-"]
        stream = CodexStream(rec, model or "", cfg.maxTurns, codex_home(env))
        try:
            run = await process.run_json_lines(argv, cwd=root, env=env, stdin=prompt.encode(),
                                               time_limit_s=cfg.timeLimitSeconds, on_line=stream, secrets=secrets,
                                               name="codex", stderr_tail=16_000)
            stream.rollout.close()
            ending, text = stream.ending(run)
        finally:
            stream.rollout.close()
    answer = _strict_json(text) if ending == COMPLETED else None
    usage = stream.usage()
    return ending, answer, {"inputTokens": usage.get("inputTokens"), "outputTokens": usage.get("outputTokens"),
                            "costUsd": None}


def _bare(model: str | None) -> str | None:
    """``anthropic:claude-sonnet-4-5`` → ``claude-sonnet-4-5``: the CLIs take a bare model name."""
    if not model:
        return None
    return model.split(":", 1)[1] if ":" in model else model


def _strict_json(text: str | None) -> dict[str, Any]:
    """The final message as one JSON object, and nothing else (one fenced ``json`` block is allowed)."""
    body = (text or "").strip()
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3].removeprefix("json").strip()
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        shown = (text or "").strip()[:200]
        raise AgenticJudgeError(f"the judge's final message is not a JSON verdict: {shown!r}") from None
    if not isinstance(value, dict):
        raise AgenticJudgeError(f"the judge's final message is JSON but not an object: {body[:200]!r}")
    return value


__all__ = [
    "PREFERENCE_SCHEMA",
    "VERDICT_SCHEMA",
    "AgenticJudgeError",
    "judge",
    "needs",
    "pairwise",
    "resolve",
    "run_judge",
    "runtime_version",
]
