"""LLM judges: a model (or a panel) grading one trial, or preferring one of two, with a rubric.

Calls go through the same provider adapters as the ``agent`` client (:mod:`mst.providers`), so
an ``openai:``/``anthropic:`` judge, an OpenAI-compatible ``baseUrl`` and the offline ``mock``
behave as they do for a variant. The verdict is asked for as a tool call with a JSON schema (a
forced ``submit_verdict`` call where the provider supports it); a reply in text is parsed
strictly. What can go wrong is a *grading error*, never an infrastructure failure
(docs/grading.md, "LLM judges"): a 429/5xx/timeout after retries, a refused key, or a reply
that is still unparseable after one more try.

Grading calls judges from its worker threads (``gradingConcurrency`` trials at once,
:mod:`mst.grading.phase`). The provider SDKs are asynchronous and their clients belong to one
event loop, so every call runs on one background loop shared by the process: the SDK clients
(and their connection pools) are made once, a panel's votes run at once, and a grading thread
only waits.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from mst.config.judge_llm import LlmJudgeConfig, Price
from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedJudge
from mst.endings import EndingException, Infrastructure
from mst.grading.judge_access import AUTH_TOKEN, JudgeAccess, current
from mst.grading.judges import (
    PAIRWISE_THRESHOLD,
    CaseView,
    JudgeLoadError,
    Preference,
    TrialView,
    Verdict,
    judge_identity,
)
from mst.grading.llm_prompt import pair_prompt, trial_prompt
from mst.grading.sources import JudgeOutcome, PairOutcome

if TYPE_CHECKING:
    from mst.providers.base import ModelResponse, ModelSession, Provider

SOURCE: Final = "llm"
VERSION: Final = "mst.llm-judge/v1"
VERDICT_TOOL: Final = "submit_verdict"

# USD per million tokens (input, output), public list prices; an eval's `prices` overrides them.
PRICES: Final[dict[str, tuple[float, float]]] = {
    "mock": (0.0, 0.0),
    "openai:gpt-4.1": (2.0, 8.0),
    "openai:gpt-4.1-mini": (0.4, 1.6),
    "openai:gpt-4.1-nano": (0.1, 0.4),
    "openai:gpt-4o": (2.5, 10.0),
    "openai:gpt-4o-mini": (0.15, 0.6),
    "openai:gpt-5": (1.25, 10.0),
    "openai:gpt-5-mini": (0.25, 2.0),
    "anthropic:claude-haiku-4-5": (1.0, 5.0),
    "anthropic:claude-sonnet-4-5": (3.0, 15.0),
    "anthropic:claude-opus-4-1": (15.0, 75.0),
}

SYSTEM: Final = ("You are a careful, impartial grader. Judge only by the rubric and the material shown. "
                 f"Answer by calling {VERDICT_TOOL} (or, without tools, with that JSON object alone).")

_REASON: Final = {"type": "string", "description": "One or two sentences: why."}
_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "pass-fail": {"passed": {"type": "boolean"}},
    "score": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
    "likert-5": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
    "pairwise": {"preference": {"type": "string", "enum": ["1", "2", "tie"]}},
}
_DEFAULT_MOCK: Final[dict[str, dict[str, Any]]] = {
    "pass-fail": {"answer": '{"passed": true, "reason": "the mock judge passes what it is not scripted to fail"}'},
    "score": {"answer": '{"score": 1, "reason": "the mock judge scores 1 unless scripted"}'},
    "likert-5": {"answer": '{"rating": 5, "reason": "the mock judge rates 5 unless scripted"}'},
    "pairwise": {"answer": '{"preference": "tie", "reason": "the mock judge ties unless scripted"}'},
}


class JudgeCallError(Exception):
    """A judge call that gave no usable verdict: becomes the trial's (or comparison's) grading error."""


class Unparseable(JudgeCallError):
    """The model's reply is not a verdict of the judge's schema."""


# ---------------------------------------------------------------------------------------------
# Resolving


def _identity_fields(llm: LlmJudgeConfig, pairwise: bool) -> dict[str, Any]:
    """What decides a verdict (docs/grading.md, "Identity"): not prices, endpoints or timeouts."""
    return {
        "models": llm.panel, "vote": llm.vote, "samples": llm.samples, "rubric": llm.rubric,
        "template": llm.template, "scale": "pairwise" if pairwise else llm.scale, "sees": llm.shown(pairwise),
        "maxInputTokens": llm.maxInputTokens, "temperature": llm.temperature, "mock": llm.mock,
    }


def resolve(cfg: JudgeConfig | PairwiseConfig) -> ResolvedJudge:
    """A configured ``llm:`` judge, resolved: its definition travels in ``options`` (a grade
    bundle carries it to shards) and its identity digests what decides its verdicts."""
    from mst.providers import known_prefixes, split_model

    llm = cfg.llm
    assert llm is not None
    pairwise = isinstance(cfg, PairwiseConfig)
    for model in llm.panel:
        prefix, _ = split_model(model)
        if prefix not in known_prefixes():
            raise JudgeLoadError(cfg.id, model, f"unknown model provider {prefix!r}; known: "
                                 f"{', '.join(sorted(known_prefixes()))}")
    _check_mock(cfg.id, llm)
    threshold = PAIRWISE_THRESHOLD if pairwise else cfg.threshold  # type: ignore[union-attr]
    target = ", ".join(llm.panel)
    identity = judge_identity(id=cfg.id, target=target, source=SOURCE, options=_identity_fields(llm, pairwise),
                              threshold=threshold, version=VERSION, kind="pairwise" if pairwise else "judge")
    return ResolvedJudge(id=cfg.id, target=target, source=SOURCE, options=llm.model_dump(mode="json"),
                         threshold=threshold, version=VERSION, identity=identity, secrets=tuple(cfg.secrets))


def _check_mock(judge_id: str, llm: LlmJudgeConfig) -> None:
    """The mock's script is checked when the eval loads, not at the first verdict."""
    from pydantic import ValidationError

    from mst.providers.mock import MockSettings

    if llm.mock is None:
        return
    try:
        MockSettings.model_validate(llm.mock)
    except ValidationError as exc:
        where = "; ".join(f"llm.mock.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise JudgeLoadError(judge_id, "mock", where) from None


_SPECS: dict[str, tuple[Mapping[str, Any], LlmJudgeConfig]] = {}


def spec(judge: ResolvedJudge) -> LlmJudgeConfig:
    """The judge's definition, decoded once (also in a shard worker). Its identity leaves out
    what decides no verdict (endpoint, timeouts), so the cache also checks the options themselves."""
    cached = _SPECS.get(judge.identity)
    if cached is not None and (cached[0] is judge.options or cached[0] == judge.options):
        return cached[1]
    found = LlmJudgeConfig.model_validate(judge.options)
    _SPECS[judge.identity] = (judge.options, found)
    return found


def key_names(llm: LlmJudgeConfig) -> tuple[str, ...]:
    """The secrets (environment variables) holding the keys of the judge's models."""
    from mst.providers import split_model

    names: dict[str, None] = {}
    for model in llm.panel:
        prefix, _ = split_model(model)
        if prefix == "openai":
            names[llm.apiKeySecret or "OPENAI_API_KEY"] = None
        elif prefix == "anthropic":
            names[llm.apiKeySecret or "ANTHROPIC_API_KEY"] = None
    return tuple(names)


def needs(judge: ResolvedJudge) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(environment keys, binaries, imports) the judge needs, for the judge preflight
    (registered for the ``llm`` kind in :mod:`mst.grading.preflight`).

    The keys are required where they are needed: a provider's own API needs its key
    (``OPENAI_API_KEY``/``ANTHROPIC_API_KEY``, or ``apiKeySecret``), and so does a ``baseUrl``
    that names its ``apiKeySecret``. A ``baseUrl`` without one may take no key, or the gateway
    token (see :func:`keys`), so nothing is required of it. The keys named here are also what a
    grade worker is sent (:func:`mst.grading.preflight.needed_env`): a judge need not list them
    in ``secrets:`` for shards.
    """
    from mst.providers import split_model

    llm = spec(judge)
    prefixes = {split_model(m)[0] for m in llm.panel}
    imports = tuple(sorted(p for p in prefixes if p in ("openai", "anthropic")))
    required = llm.baseUrl is None or llm.apiKeySecret is not None
    return key_names(llm) if required else (), (), imports


# ---------------------------------------------------------------------------------------------
# Parsing the verdict


Scale = Literal["pass-fail", "score", "likert-5", "pairwise"]


@dataclass(frozen=True, slots=True)
class Vote:
    """One model's answer to one call: a pass/fail with a score, or a preference."""

    model: str
    sample: int
    passed: bool | None
    score: float | None
    preference: Preference | None
    reason: str
    input_tokens: int
    output_tokens: int
    latency_ms: float
    cost_usd: float | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "sample": self.sample}
        if self.preference is not None:
            out["preference"] = self.preference
        else:
            out["passed"], out["score"] = self.passed, self.score
        return {**out, "reason": self.reason, "inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "latencyMs": self.latency_ms, "costUsd": self.cost_usd}


def _object(response: ModelResponse) -> Mapping[str, Any]:
    for call in response.tool_calls:
        if call.name == VERDICT_TOOL:
            return call.arguments
    if response.tool_calls:
        raise Unparseable(f"the judge called {response.tool_calls[0].name!r} instead of {VERDICT_TOOL}")
    from mst.providers._errors import tool_arguments
    from mst.providers.base import ModelOutputError

    text = response.text.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:  # the text must be what the tool call's arguments would have been: one JSON object
        return tool_arguments(VERDICT_TOOL, text or "null")
    except ModelOutputError:
        raise Unparseable(f"the judge's reply is not a JSON verdict: {response.text[:200]!r}") from None


def parse(response: ModelResponse, scale: Scale, threshold: float
          ) -> tuple[bool | None, float | None, Preference | None, str]:
    """(passed, score, preference, reason) from a reply; :class:`Unparseable` when it is not one."""
    data = _object(response)
    wanted = set(_SCHEMAS[scale]) | {"reason"}
    if set(data) != wanted:
        raise Unparseable(f"the judge's verdict must hold exactly {', '.join(sorted(wanted))}; "
                          f"got {', '.join(sorted(data)) or 'nothing'}")
    reason = data["reason"]
    if not isinstance(reason, str):
        raise Unparseable("the judge's reason is not a string")
    if scale == "pairwise":
        preference = {"1": "A", "2": "B", "tie": "tie"}.get(str(data["preference"]).strip().lower())
        if preference is None:
            raise Unparseable(f"the judge's preference must be \"1\", \"2\" or \"tie\", got {data['preference']!r}")
        return None, None, preference, reason  # type: ignore[return-value]
    if scale == "pass-fail":
        passed = data["passed"]
        if not isinstance(passed, bool):
            raise Unparseable(f"'passed' must be true or false, got {passed!r}")
        return passed, 1.0 if passed else 0.0, None, reason
    value = data[next(iter(_SCHEMAS[scale]))]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Unparseable(f"the judge's {scale} value is not a number: {value!r}")
    if scale == "likert-5":
        if value not in (1, 2, 3, 4, 5):
            raise Unparseable(f"the judge's rating must be 1 to 5, got {value!r}")
        score = (float(value) - 1) / 4
    else:
        if not 0 <= value <= 1:
            raise Unparseable(f"the judge's score must be in 0..1, got {value!r}")
        score = float(value)
    return score >= threshold, score, None, reason


# ---------------------------------------------------------------------------------------------
# Combining votes


def combine(votes: Sequence[Vote], vote: str, threshold: float) -> tuple[bool, float | None, str]:
    """A verdict from the votes: ``majority`` (more than half pass), ``mean`` (the mean score
    passes the threshold) or ``all`` (every vote passes); the score is the votes' mean."""
    scores = [v.score for v in votes if v.score is not None]
    mean = sum(scores) / len(scores) if scores else None
    passes = sum(1 for v in votes if v.passed)
    if vote == "all":
        passed = passes == len(votes)
    elif vote == "mean":
        passed = mean is not None and mean >= threshold
    else:
        passed = passes * 2 > len(votes)
    if len(votes) == 1:
        return passed, mean, votes[0].reason
    agree = next((v for v in votes if v.passed == passed), votes[0])
    return passed, mean, f"{passes}/{len(votes)} votes pass ({vote}): {agree.reason}"


def combine_preferences(votes: Sequence[Vote], vote: str) -> tuple[Preference, str]:
    """A preference from the votes; no majority (or, for ``all``, no unanimity) is a tie."""
    prefs = [v.preference for v in votes]
    if vote == "mean":
        balance = sum(1 if p == "A" else -1 if p == "B" else 0 for p in prefs)
        result: Preference = "A" if balance > 0 else "B" if balance < 0 else "tie"
    else:
        options: tuple[Preference, ...] = ("A", "B", "tie")
        best = max(options, key=prefs.count)
        needed = len(prefs) if vote == "all" else len(prefs) // 2 + 1
        result = best if prefs.count(best) >= needed else "tie"
    if len(votes) == 1:
        return result, votes[0].reason
    agree = next((v for v in votes if v.preference == result), votes[0])
    return result, f"{prefs.count(result)}/{len(votes)} votes for {result} ({vote}): {agree.reason}"


def usage_of(llm: LlmJudgeConfig, votes: Sequence[Vote], latency_ms: float) -> dict[str, Any]:
    """What a verdict records of its calls (docs/grading.md, "What a verdict records")."""
    costs = [v.cost_usd for v in votes]
    panel = llm.panel
    return {
        "model": panel[0] if len(panel) == 1 else panel,
        "inputTokens": sum(v.input_tokens for v in votes),
        "outputTokens": sum(v.output_tokens for v in votes),
        "latencyMs": round(latency_ms, 3),
        "costUsd": None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 8),
        "votes": [v.to_json() for v in votes],
    }


def cost(llm: LlmJudgeConfig, model: str, input_tokens: int, output_tokens: int) -> float | None:
    """USD for one call, from the eval's prices or the built-in table; None when no price is known."""
    override: Price | None = llm.prices.get(model)
    price = (override.input, override.output) if override is not None else PRICES.get(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


# ---------------------------------------------------------------------------------------------
# Calling the models


class _Loop:
    """One event loop in a daemon thread for every judge call of the process (see the module doc)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._pid = 0

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        loop = self._loop
        if loop is None or self._pid != os.getpid():
            loop = self._start()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mst-llm-judges", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
                _PROVIDERS.clear()
            return self._loop


_LOOP = _Loop()
# (identity, model, how it is reached) -> provider; used on the loop only
_PROVIDERS: dict[tuple[Any, ...], Provider] = {}


def _provider(judge: ResolvedJudge, llm: LlmJudgeConfig, model: str, scale: str) -> Provider:
    key = (judge.identity, model, llm.baseUrl, llm.apiKeySecret, llm.stream, llm.timeoutSeconds,
           llm.maxOutputTokens)
    found = _PROVIDERS.get(key)
    if found is None:
        from mst.providers import create_provider
        from mst.providers.mock import MockSettings
        from mst.providers.settings import ProviderSettings

        settings = ProviderSettings(baseUrl=llm.baseUrl, apiKeySecret=llm.apiKeySecret, stream=llm.stream,
                                    maxRetries=0, timeoutSeconds=llm.timeoutSeconds,
                                    maxOutputTokens=llm.maxOutputTokens, temperature=llm.temperature)
        mock = MockSettings.model_validate(llm.mock if llm.mock is not None else _DEFAULT_MOCK[scale])
        found = _PROVIDERS[key] = create_provider(model, {"mock": mock, "provider": settings})
    return found


def _retry_after(exc: BaseException) -> float | None:
    """The provider's ``retry-after`` (seconds) on the HTTP error behind an adapter's ending."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        headers = getattr(response, "headers", None)
        if headers is not None:
            for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
                value = headers.get(name)
                try:
                    if value is not None:
                        return max(float(value) * scale, 0.0)
                except ValueError:
                    continue  # an HTTP date: rare from model APIs; the backoff applies
        seen = seen.__cause__ or seen.__context__
    return None


def backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds before retry ``attempt`` (1-based): the provider's ``retry-after`` when it gave one,
    else exponential from 0.5 s with jitter, both capped at a minute."""
    if retry_after is not None:
        return min(retry_after, 60.0)
    return float(min(0.5 * 2 ** (attempt - 1), 30.0) * (0.5 + random.random() / 2))


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind an adapter's ending, when there was one."""
    seen: BaseException | None = exc
    while seen is not None:
        code = getattr(getattr(seen, "response", None), "status_code", None)
        if isinstance(code, int):
            return code
        seen = seen.__cause__ or seen.__context__
    return None


def keys(llm: LlmJudgeConfig, access: JudgeAccess) -> dict[str, str]:
    """The keys one call sends, read afresh for each call (docs/grading.md, "Judge access").

    A key comes through ``access.credential``: the secrets the grading was given, else the
    environment. When ``MST_LLM_AUTH_COMMAND`` is set, a judge with a ``baseUrl`` (a gateway)
    sends the gateway token in place of its key, as fresh as the coordinator keeps it; a judge
    of a provider's own API keeps its key. ``apiKeySecret: MST_LLM_AUTH_TOKEN`` asks for the
    token by name."""
    token = access.credential(AUTH_TOKEN) if llm.baseUrl is not None and access.token is not None else None
    found: dict[str, str] = {}
    for name in key_names(llm):
        value = token if token is not None else access.credential(name)
        if value is not None:
            found[name] = value
    return found


async def call_model(judge: ResolvedJudge, llm: LlmJudgeConfig, model: str, session_key: tuple[str, str, int, int],
                     prompt: str, scale: str, case: CaseView, access: JudgeAccess) -> ModelResponse:
    """Every model call of every LLM judge, with its retries of 429/5xx/timeouts (backing off,
    honouring the provider's ``retry-after``).

    Each try holds one slot of the provider (``split_model(model)[0]``: the eval's
    ``judgeLimits`` by that name hold across shards); a 429 holds the provider for every judge
    of the grading until its ``retry-after`` (or the backoff) has passed. The backoff itself
    holds no slot. The keys are read for each try once its slot is held, so a refreshed token is
    used at once.
    """
    # judge access: slot + credential (fleet)
    from mst.providers import split_model
    from mst.providers.base import AttemptContext, ModelRequest, ToolSpec, UserMessage

    provider = split_model(model)[0]
    variant, case_id, trial, sample = session_key
    properties = {**_SCHEMAS[scale], "reason": _REASON}
    tool = ToolSpec(VERDICT_TOOL, "Submit the verdict.", {"type": "object", "properties": properties,
                                                          "required": sorted(properties),
                                                          "additionalProperties": False})
    request = ModelRequest([UserMessage(prompt)], [tool], 0, SYSTEM, VERDICT_TOOL)
    for attempt in range(llm.retries + 1):
        try:
            async with access.slot(provider), asyncio.timeout(llm.timeoutSeconds + 5):  # the SDK's should fire first
                # The keys are read once the slot is held: a wait for it may outlast a token.
                context = AttemptContext(case_id=case_id, variant_id=f"{variant}/{judge.id}/{model}/{sample}",
                                         trial=trial, try_number=1, seed=0, prompt=case.prompt, expected=case.expected,
                                         metadata=case.metadata, deadline_s=llm.timeoutSeconds,
                                         secrets=keys(llm, access))
                session: ModelSession = _provider(judge, llm, model, scale).session(context)
                return await session.complete(request)
        except EndingException as exc:
            ending = exc.ending
            if not (isinstance(ending, Infrastructure) and ending.retryable) or attempt == llm.retries:
                raise JudgeCallError(f"{model}: {_ending_text(ending)}") from None
            delay = backoff(attempt + 1, _retry_after(exc))
            if _status(exc) == 429:
                access.hold(provider, delay)
            await asyncio.sleep(delay)
        except TimeoutError:
            if attempt == llm.retries:
                raise JudgeCallError(f"{model}: no reply within {llm.timeoutSeconds:g} s") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _ending_text(ending: Any) -> str:
    why = getattr(ending, "why", None)
    return str(why) if why else str(ending)


async def _vote(judge: ResolvedJudge, llm: LlmJudgeConfig, model: str, sample: int, key: tuple[str, str, int],
                prompt: str, scale: Scale, case: CaseView, access: JudgeAccess) -> Vote:
    """One vote; an unparseable reply is asked once more (both replies' tokens count)."""
    from mst.providers.base import ContextOverflow, ModelOutputError

    tokens_in = tokens_out = 0
    start = time.perf_counter()
    for attempt in (1, 2):
        try:
            response = await call_model(judge, llm, model, (*key, sample * 2 + attempt - 1), prompt, scale, case,
                                        access)
        except ContextOverflow as exc:
            raise JudgeCallError(f"{model}: the prompt does not fit the model's context: {exc}") from None
        except ModelOutputError as exc:
            if attempt == 2:
                raise JudgeCallError(f"{model}: unparseable verdict twice: {exc}") from None
            continue
        tokens_in += response.usage.input_tokens
        tokens_out += response.usage.output_tokens
        try:
            passed, score, preference, reason = parse(response, scale, judge.threshold)
        except Unparseable as exc:
            if attempt == 2:
                raise JudgeCallError(f"{model}: unparseable verdict twice: {exc}") from None
            continue
        latency = (time.perf_counter() - start) * 1000
        return Vote(model, sample, passed, score, preference, reason, tokens_in, tokens_out, round(latency, 3),
                    cost(llm, model, tokens_in, tokens_out))
    raise AssertionError("unreachable")  # pragma: no cover


async def _votes(judge: ResolvedJudge, llm: LlmJudgeConfig, key: tuple[str, str, int], prompt: str,
                 scale: Scale, case: CaseView, access: JudgeAccess) -> list[Vote]:
    calls = [_vote(judge, llm, model, sample, key, prompt, scale, case, access)
             for model in llm.panel for sample in range(llm.samples)]
    if len(calls) == 1:  # the common case: no task to make
        return [await calls[0]]
    results = await asyncio.gather(*calls, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        first = errors[0]
        if not isinstance(first, JudgeCallError):
            raise JudgeCallError(f"{type(first).__name__}: {first}") from first
        raise first
    return [r for r in results if isinstance(r, Vote)]


def _describe(judge: ResolvedJudge, exc: BaseException) -> str:
    what = str(exc) if isinstance(exc, JudgeCallError) else f"{type(exc).__name__}: {exc}"
    return f"judge {judge.id!r} (llm {judge.target}): {what}"


def judge(judge: ResolvedJudge, trial: TrialView, case: CaseView, access: JudgeAccess | None = None) -> JudgeOutcome:
    """Grade one trial: every vote of the panel at once, combined by the judge's ``vote``.
    ``access`` is the grading's (caps, holds, keys); without one, :func:`~mst.grading.judge_access.current`'s."""
    start = time.perf_counter()
    try:
        llm = spec(judge)
        prompt = trial_prompt(llm, trial, case)
        key = (trial.variant, trial.case_id, trial.trial)
        votes = _LOOP.run(_votes(judge, llm, key, prompt, llm.scale, case, access or current()))
    except Exception as exc:  # whatever went wrong, it is this trial's grading error
        return JudgeOutcome(None, _describe(judge, exc), None, _ms(start))
    passed, score, reason = combine(votes, llm.vote, judge.threshold)
    elapsed = (time.perf_counter() - start) * 1000
    usage = usage_of(llm, votes, elapsed)
    return JudgeOutcome(Verdict(passed, score, reason, usage), None, usage, round(elapsed, 3))


def pairwise(judge: ResolvedJudge, case: CaseView, a: TrialView, b: TrialView,
             access: JudgeAccess | None = None) -> PairOutcome:
    """One order of a pairwise comparison: ``a`` is shown as Response 1, ``b`` as Response 2."""
    start = time.perf_counter()
    try:
        llm = spec(judge)
        prompt = pair_prompt(llm, case, a, b)
        key = (f"{a.variant}~{b.variant}", case.id, a.trial)
        votes = _LOOP.run(_votes(judge, llm, key, prompt, "pairwise", case, access or current()))
    except Exception as exc:  # whatever went wrong, it is this comparison's grading error
        return PairOutcome(None, None, _describe(judge, exc), None, _ms(start))
    preference, reason = combine_preferences(votes, llm.vote)
    elapsed = (time.perf_counter() - start) * 1000
    return PairOutcome(preference, reason, None, usage_of(llm, votes, elapsed), round(elapsed, 3))


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


__all__ = ["PRICES", "JudgeCallError", "Vote", "combine", "combine_preferences", "cost", "judge", "keys", "needs",
           "pairwise", "parse", "resolve"]
