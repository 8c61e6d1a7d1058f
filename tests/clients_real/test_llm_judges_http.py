"""LLM judges through the real ``openai`` and ``anthropic`` SDKs against the fake provider over HTTP.

The verdict is asked for as a forced tool call with a JSON schema; a reply in text is parsed
strictly. 429s (with ``retry-after``), 5xx, timeouts and garbage are driven by the fake server
and must end as the trial's grading error, never an exception or a fabricated verdict.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, drop, serve, slow, status, text, tool

from mst.config.models import JudgeConfig, PairwiseConfig
from mst.config.resolved import ResolvedJudge
from mst.grading.judges import CaseView, TrialView, resolve_judge
from mst.grading.sources import LiveSource

KEYS = {"OPENAI_API_KEY": "sk-judge-openai-1234", "ANTHROPIC_API_KEY": "sk-judge-anthropic-5678"}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def url(fake: FakeProvider, provider: str) -> str:
    return fake.openai_url if provider == "openai" else fake.anthropic_url


def judge(fake: FakeProvider, model: str, provider: str = "openai", **llm: Any) -> ResolvedJudge:
    cfg = JudgeConfig.model_validate({"id": "j", "llm": {
        "model": f"{provider}:{model}", "rubric": "The answer names the price.", "baseUrl": url(fake, provider),
        "timeoutSeconds": 2, **llm}})
    return resolve_judge(cfg, Path("."))


CASE = CaseView("c1", "How much is the hammer?", "18.99", {"sku": "HAM-001"}, 1)


def trial(answer: str = "It costs 18.99.", variant: str = "v") -> TrialView:
    return TrialView(variant=variant, case_id="c1", trial=0, answer=answer, ending={"kind": "trial"},
                     transcript=None, expected="18.99", prompt=CASE.prompt)


def bodies(fake: FakeProvider, model: str) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.body.get("model") == model]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_structured_verdict_through_the_sdk(fake: FakeProvider, provider: str, stream: bool) -> None:
    model = f"v-{provider}-{stream}"
    fake.script(model, [tool("submit_verdict", {"passed": True, "reason": "names 18.99"})])
    outcome = LiveSource().judge(judge(fake, model, provider, stream=stream), trial(), CASE)
    assert outcome.error is None and outcome.verdict is not None
    assert outcome.verdict.passed is True and outcome.verdict.reason == "names 18.99"
    usage = outcome.usage
    assert usage is not None and usage["model"] == f"{provider}:{model}"
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0 and usage["latencyMs"] > 0
    assert usage["costUsd"] is None  # no price known for this model
    assert [v["passed"] for v in usage["votes"]] == [True]
    (body,) = bodies(fake, model)
    # the verdict's schema went as a forced tool call, at temperature 0
    assert body["temperature"] == 0
    if provider == "openai":
        assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_verdict"}}
        schema = body["tools"][0]["function"]["parameters"]
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "submit_verdict"}
        schema = body["tools"][0]["input_schema"]
    assert schema["required"] == ["passed", "reason"]
    prompt = str(body["messages"][-1]["content"])
    assert "It costs 18.99." in prompt and "How much is the hammer?" in prompt and "18.99" in prompt


def test_key_is_sent_and_never_in_the_verdict(fake: FakeProvider) -> None:
    fake.script("keyed", [tool("submit_verdict", {"passed": False, "reason": "no"})])
    outcome = LiveSource().judge(judge(fake, "keyed"), trial(), CASE)
    assert outcome.verdict is not None and outcome.verdict.passed is False
    (rec,) = [r for r in fake.requests if r.body.get("model") == "keyed"]
    assert rec.headers["authorization"] == f"Bearer {KEYS['OPENAI_API_KEY']}"
    assert KEYS["OPENAI_API_KEY"] not in repr(outcome)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_text_reply_is_parsed_strictly(fake: FakeProvider, provider: str) -> None:
    model = f"texty-{provider}"
    fake.script(model, [text('```json\n{"score": 0.8, "reason": "mostly"}\n```')])
    outcome = LiveSource().judge(judge(fake, model, provider, scale="score"), trial(), CASE)
    assert outcome.verdict is not None and outcome.verdict.score == 0.8 and outcome.verdict.passed


def test_garbage_is_asked_once_more_then_a_grading_error(fake: FakeProvider) -> None:
    fake.queue("garbage-once", [text("I think it passes.")])
    fake.script("garbage-once", [tool("submit_verdict", {"passed": True, "reason": "fine"})])
    outcome = LiveSource().judge(judge(fake, "garbage-once"), trial(), CASE)
    assert outcome.verdict is not None and outcome.verdict.passed
    assert len(bodies(fake, "garbage-once")) == 2
    # both calls' tokens count (the fake counts 10 + a quarter of the messages' JSON per request)
    expected = sum(10 + len(json.dumps(b["messages"])) // 4 for b in bodies(fake, "garbage-once"))
    assert outcome.usage is not None and outcome.usage["inputTokens"] == expected

    fake.script("garbage", [text("PASS!!")])
    outcome = LiveSource().judge(judge(fake, "garbage"), trial(), CASE)
    assert outcome.verdict is None
    assert outcome.error is not None and "unparseable verdict twice" in outcome.error
    assert len(bodies(fake, "garbage")) == 2  # retried once, not more


def test_wrong_fields_are_unparseable(fake: FakeProvider) -> None:
    fake.script("wrong-fields", [tool("submit_verdict", {"passed": "yes", "reason": "x"})])
    outcome = LiveSource().judge(judge(fake, "wrong-fields"), trial(), CASE)
    assert outcome.verdict is None and outcome.error is not None and "'passed' must be true or false" in outcome.error


def test_429_honours_retry_after_then_succeeds(fake: FakeProvider) -> None:
    fake.queue("busy", [status(429, "slow down", **{"retry-after-ms": "300", "retry-after": "0.3"})])
    fake.script("busy", [tool("submit_verdict", {"passed": True, "reason": "ok"})])
    start = time.monotonic()
    outcome = LiveSource().judge(judge(fake, "busy"), trial(), CASE)
    assert outcome.verdict is not None and outcome.verdict.passed
    assert time.monotonic() - start >= 0.3  # waited what the provider asked
    assert len(bodies(fake, "busy")) == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("code", [429, 500, 529])
def test_persistent_errors_are_grading_errors_after_retries(fake: FakeProvider, provider: str, code: int) -> None:
    model = f"down-{provider}-{code}"
    fake.script(model, [status(code, "down", **{"retry-after": "0"})])
    outcome = LiveSource().judge(judge(fake, model, provider, retries=2), trial(), CASE)
    assert outcome.verdict is None and outcome.error is not None
    assert f"HTTP {code}" in outcome.error and "judge 'j'" in outcome.error
    assert len(bodies(fake, model)) == 3  # the first try and two retries


def test_refused_key_is_not_retried(fake: FakeProvider) -> None:
    fake.script("refused", [status(401, "bad key")])
    outcome = LiveSource().judge(judge(fake, "refused"), trial(), CASE)
    assert outcome.error is not None and "HTTP 401" in outcome.error
    assert KEYS["OPENAI_API_KEY"] not in outcome.error
    assert len(bodies(fake, "refused")) == 1


def test_timeout_and_dropped_connection_are_grading_errors(fake: FakeProvider) -> None:
    fake.script("stalls", [slow(3, tool("submit_verdict", {"passed": True, "reason": "late"}))])
    outcome = LiveSource().judge(judge(fake, "stalls", timeoutSeconds=0.5, retries=1), trial(), CASE)
    assert outcome.verdict is None and outcome.error is not None and "timeout" in outcome.error
    fake.script("drops", [drop()])
    outcome = LiveSource().judge(judge(fake, "drops", retries=1), trial(), CASE)
    assert outcome.verdict is None and outcome.error is not None and "connection" in outcome.error


def test_panel_votes_are_kept_and_combined(fake: FakeProvider) -> None:
    fake.script("p-yes", [tool("submit_verdict", {"passed": True, "reason": "yes"})])
    fake.script("p-no", [tool("submit_verdict", {"passed": False, "reason": "no"})])
    cfg = JudgeConfig.model_validate({"id": "panel", "llm": {
        "models": ["openai:p-yes", "openai:p-no", "openai:p-yes"], "rubric": "r", "baseUrl": fake.openai_url,
        "vote": "majority", "prices": {"openai:p-yes": {"input": 1.0, "output": 2.0},
                                       "openai:p-no": {"input": 1.0, "output": 2.0}}}})
    outcome = LiveSource().judge(resolve_judge(cfg, Path(".")), trial(), CASE)
    assert outcome.verdict is not None and outcome.verdict.passed and outcome.verdict.score == pytest.approx(2 / 3)
    usage = outcome.usage
    assert usage is not None and [v["passed"] for v in usage["votes"]] == [True, False, True]
    assert usage["costUsd"] == pytest.approx((usage["inputTokens"] * 1.0 + usage["outputTokens"] * 2.0) / 1e6)
    assert usage["model"] == ["openai:p-yes", "openai:p-no", "openai:p-yes"]
    cfg_all = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"vote": "all"})})  # type: ignore[union-attr]
    outcome = LiveSource().judge(resolve_judge(cfg_all, Path(".")), trial(), CASE)
    assert outcome.verdict is not None and not outcome.verdict.passed


def test_pairwise_sides_are_neutral_and_orders_recorded(fake: FakeProvider) -> None:
    fake.script("pair", [tool("submit_verdict", {"preference": "1", "reason": "first is better"})])
    cfg = PairwiseConfig.model_validate({"llm": {"model": "openai:pair", "rubric": "Which is more correct?",
                                                 "baseUrl": fake.openai_url}})
    pw = resolve_judge(cfg, Path("."))
    cand, base = trial("Answer X: 18.99", "candidate"), trial("Answer Y: 20", "baseline")
    ab = LiveSource().pairwise(pw, CASE, cand, base)
    ba = LiveSource().pairwise(pw, CASE, base, cand)
    assert ab.preference == "A" and ba.preference == "A"  # always the first: a flip across orders
    prompts = [str(b["messages"][-1]["content"]) for b in bodies(fake, "pair")]
    for prompt in prompts:
        assert "Response 1" in prompt and "Response 2" in prompt
        assert "baseline" not in prompt.lower() and "candidate" not in prompt.lower()
    assert prompts[0].index("Answer X") < prompts[0].index("Answer Y")
    assert prompts[1].index("Answer Y") < prompts[1].index("Answer X")
    assert ab.usage is not None and ab.usage["votes"][0]["preference"] == "A"


def test_same_identity_other_endpoint_is_called_there(fake: FakeProvider) -> None:
    """The identity leaves the endpoint out (it decides no verdict), yet a judge is reached where it says."""
    fake.script("moved", [tool("submit_verdict", {"passed": True, "reason": "first server"})])
    first = judge(fake, "moved")
    assert LiveSource().judge(first, trial(), CASE).verdict is not None
    with serve() as other:
        other.script("moved", [tool("submit_verdict", {"passed": False, "reason": "second server"})])
        second = judge(other, "moved")
        assert second.identity == first.identity
        outcome = LiveSource().judge(second, trial(), CASE)
        assert outcome.verdict is not None and outcome.verdict.reason == "second server"
        assert len(other.requests) == 1
