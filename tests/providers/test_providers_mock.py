"""The offline mock model: determinism, scripting, templates, usage, and every injected failure."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mst.endings import EndingException, Infrastructure
from mst.providers import (
    AssistantMessage,
    AttemptContext,
    ContextOverflow,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
    create_provider,
    register_provider,
)
from mst.providers.mock import MockCrash, MockProvider, MockSession, MockSettings, draw, render, render_value


def ctx(
    case: str = "c1",
    *,
    trial: int = 0,
    try_number: int = 1,
    seed: int = 0,
    variant: str = "v1",
    expected: Any = "42",
    metadata: dict[str, Any] | None = None,
    case_mock: dict[str, Any] | None = None,
    deadline_s: float = 30.0,
    time_budget_s: float | None = None,
) -> AttemptContext:
    return AttemptContext(
        case_id=case,
        variant_id=variant,
        trial=trial,
        try_number=try_number,
        seed=seed,
        prompt="How many hammers?",
        expected=expected,
        metadata=metadata or {"sku": "HAM-001"},
        deadline_s=deadline_s,
        time_budget_s=time_budget_s,
        case_mock=case_mock,
    )


def provider(**settings: Any) -> MockProvider:
    return MockProvider(MockSettings.model_validate(settings))


def request(
    index: int = 0, messages: list[Any] | None = None, tools: tuple[ToolSpec, ...] = ()
) -> ModelRequest:
    return ModelRequest(messages or [UserMessage("How many hammers?")], tools, index)


def test_draw_is_stable_across_processes_and_uniformish() -> None:
    # A fixed value: `hash()` or a global RNG would differ between processes and runs.
    assert draw("success", 0, 0, "v1", "c1", 0) == 0.25690913894707307
    values = [draw("x", i) for i in range(2000)]
    assert all(0 <= v < 1 for v in values)
    assert 0.45 < sum(values) / len(values) < 0.55


async def test_success_rate_is_deterministic_per_trial_and_ignores_the_try_number() -> None:
    p = provider(successRate=0.3)
    outcomes = [p.session(ctx(trial=t)).succeeds for t in range(400)]
    assert outcomes == [p.session(ctx(trial=t)).succeeds for t in range(400)]
    assert 0.22 < sum(outcomes) / 400 < 0.38
    assert outcomes == [p.session(ctx(trial=t, try_number=3)).succeeds for t in range(400)]
    reseeded = [p.session(ctx(trial=t, seed=7)).succeeds for t in range(400)]
    assert reseeded != outcomes
    mock_seeded = [provider(successRate=0.3, seed=1).session(ctx(trial=t)).succeeds for t in range(400)]
    assert mock_seeded != outcomes


async def test_failed_trial_gives_the_wrong_answer() -> None:
    p = provider(successRate=0.0, wrongAnswer="no idea about {case}")
    response = await p.session(ctx()).complete(request())
    assert response.text == "no idea about c1"
    assert response.tool_calls == ()
    ok = await provider(successRate=1.0).session(ctx()).complete(request())
    assert ok.text == "42"


async def test_script_calls_tools_then_answers_from_results() -> None:
    p = provider(
        steps=[
            {"tool": "check_stock", "args": {"sku": "{metadata[sku]}", "n": "{expected}"}, "text": "checking"}
        ],
        answer="total={results[0]} last={result}",
    )
    s = p.session(ctx(expected=42))
    first = await s.complete(request(0))
    assert first.text == "checking"
    assert first.tool_calls == (ToolCall("call_0", "check_stock", {"sku": "HAM-001", "n": 42}),)
    messages = [
        UserMessage("q"),
        AssistantMessage("checking", first.tool_calls),
        ToolResult("call_0", "x", "42"),
    ]
    second = await s.complete(request(1, messages))
    assert second.text == "total=42 last=42"
    assert second.tool_calls == ()


def test_templates() -> None:
    fields = {"expected": {"a": [1, 2]}, "metadata": {"k": "v"}, "results": ["r0"], "n": None}
    assert render("x {{literal}} {metadata[k]} {results[0]} {n}", fields) == "x {literal} v r0 "
    assert render("{expected}", fields) == '{"a":[1,2]}'
    assert render_value({"a": ["{expected[a][1]}", "n={expected[a][0]}"]}, fields) == {"a": [2, "n=1"]}
    with pytest.raises(ValueError, match="unknown placeholder"):
        render("{nope}", fields)
    with pytest.raises(ValueError, match="no item"):
        render("{results[3]}", fields)
    # Nothing of Python's format language beyond names and indexes: no attribute access.
    assert render("{expected.__class__}", fields) == "{expected.__class__}"


async def test_bad_template_is_a_setup_failure() -> None:
    s = provider(answer="{missing}").session(ctx())
    with pytest.raises(EndingException) as info:
        await s.complete(request())
    assert info.value.ending == Infrastructure("setup", info.value.ending.why, False)  # type: ignore[union-attr]
    assert "missing" in info.value.ending.why  # type: ignore[union-attr]


async def test_usage_is_deterministic_and_grows_with_the_conversation() -> None:
    p = provider(steps=[{"tool": "t", "args": {}}])
    a = await p.session(ctx()).complete(request())
    b = await p.session(ctx()).complete(request())
    assert a.usage == b.usage and a.usage.input_tokens > 0 and a.usage.output_tokens > 0
    longer = [
        UserMessage("How many hammers?"),
        AssistantMessage("", a.tool_calls),
        ToolResult("call_0", "t", "x" * 400),
    ]
    c = await p.session(ctx()).complete(request(1, longer))
    assert c.usage.input_tokens >= a.usage.input_tokens + 100
    tools = (ToolSpec("t", "a tool", {"type": "object"}),)
    d = await p.session(ctx()).complete(request(0, tools=tools))
    assert d.usage.input_tokens > a.usage.input_tokens


async def test_context_window_overflows_as_the_conversation_grows() -> None:
    s = provider(contextWindow=60, steps=[{"tool": "t"}]).session(ctx())
    await s.complete(request(0))
    big = [UserMessage("q"), AssistantMessage("", ()), ToolResult("call_0", "t", "y" * 1000)]
    with pytest.raises(ContextOverflow, match="context window is 60"):
        await s.complete(request(1, big))


@pytest.mark.parametrize(
    ("failure", "what", "retryable"),
    [
        ("rate-limit", "provider-api", True),
        ("server-error", "provider-api", True),
        ("network", "network", True),
    ],
)
async def test_provider_failures_are_decided_in_the_adapter(failure: str, what: str, retryable: bool) -> None:
    s = provider(inject=[{"failure": failure}]).session(ctx())
    with pytest.raises(EndingException) as info:
        await s.complete(request())
    ending = info.value.ending
    assert isinstance(ending, Infrastructure) and (ending.what, ending.retryable) == (what, retryable)


async def test_server_error_status_and_429_text() -> None:
    s = provider(inject=[{"failure": "server-error", "status": 502}]).session(ctx())
    with pytest.raises(EndingException, match="HTTP 502"):
        await s.complete(request())
    s = provider(inject=[{"failure": "rate-limit"}]).session(ctx())
    with pytest.raises(EndingException, match="HTTP 429"):
        await s.complete(request())


async def test_other_injected_failures_raise_their_typed_exceptions() -> None:
    with pytest.raises(MockCrash):
        await provider(inject=[{"failure": "client-crash"}]).session(ctx()).complete(request())
    with pytest.raises(ModelOutputError):
        await provider(inject=[{"failure": "client-error"}]).session(ctx()).complete(request())
    with pytest.raises(ContextOverflow):
        await provider(inject=[{"failure": "context-overflow-first"}]).session(ctx()).complete(request())


async def test_mid_trial_overflow_keeps_calling_tools_until_its_request() -> None:
    s = provider(inject=[{"failure": "context-overflow", "atRequest": 2}]).session(ctx())
    tools = (ToolSpec("lookup"),)
    first = await s.complete(request(0, tools=tools))
    second = await s.complete(request(1, tools=tools))
    assert [c.name for c in first.tool_calls + second.tool_calls] == ["lookup", "lookup"]
    with pytest.raises(ContextOverflow):
        await s.complete(request(2, tools=tools))


async def test_turn_limit_never_answers() -> None:
    s = provider(
        steps=[{"tool": "a"}, {"tool": "b", "args": {"x": 1}}], inject=[{"failure": "turn-limit"}]
    ).session(ctx())
    names = [(await s.complete(request(i))).tool_calls[0].name for i in range(6)]
    assert names == ["a", "b", "b", "b", "b", "b"]


async def test_time_limit_needs_a_client_budget_and_deadline_sleeps_past_it() -> None:
    s = provider(inject=[{"failure": "time-limit"}]).session(ctx())
    with pytest.raises(EndingException, match="timeLimitSeconds"):
        await s.complete(request())
    s = provider(inject=[{"failure": "deadline"}]).session(ctx(deadline_s=0.01))
    with pytest.raises(EndingException) as info:
        await s.complete(request())
    assert info.value.ending == Infrastructure("deadline", info.value.ending.why, True)  # type: ignore[union-attr]


def test_injection_targeting_by_case_trial_try_and_rate() -> None:
    p = provider(
        inject=[
            {"failure": "network", "cases": ["c1"], "trials": [0, 2], "tries": [1]},
            {"failure": "rate-limit", "rate": 0.25},
        ]
    )

    def failure(session: MockSession) -> str | None:
        return None if session.injection is None else session.injection.failure

    assert failure(p.session(ctx("c1", trial=0))) == "network"
    assert failure(p.session(ctx("c1", trial=2))) == "network"
    # Not targeted by the first injection: falls to the seeded 25 % rate-limit draw.
    drawn = [failure(p.session(ctx("c2", trial=t))) for t in range(400)]
    assert set(drawn) == {None, "rate-limit"}
    assert 0.17 < drawn.count("rate-limit") / 400 < 0.33
    assert drawn == [failure(p.session(ctx("c2", trial=t))) for t in range(400)]
    # The try number is part of the injection draw, so a retry can succeed.
    retried = [failure(p.session(ctx("c2", trial=t, try_number=2))) for t in range(400)]
    assert retried != drawn
    assert failure(p.session(ctx("c1", trial=0, try_number=2))) != "network"


def test_case_mock_overrides_variant_keys_and_is_validated_once() -> None:
    p = provider(answer="variant", successRate=0.5)
    case_mock = {"answer": "case"}
    merged = p.settings_for("c1", case_mock)
    assert merged.answer == "case" and merged.successRate == 0.5
    assert p.settings_for("c1", case_mock) is merged
    assert p.settings_for("c2", None).answer == "variant"


def test_invalid_case_mock_is_a_setup_failure_without_the_input_value() -> None:
    p = provider()
    with pytest.raises(EndingException) as info:
        p.session(ctx(case_mock={"successRate": "sekrit-value", "bogus": 1}))
    ending = info.value.ending
    assert isinstance(ending, Infrastructure) and ending.what == "setup" and not ending.retryable
    assert "successRate" in ending.why and "bogus" in ending.why
    assert "sekrit-value" not in ending.why


def test_settings_reject_unknown_fields_and_inconsistent_injections() -> None:
    with pytest.raises(ValidationError):
        MockSettings.model_validate({"answr": "x"})
    with pytest.raises(ValidationError, match="context-overflow-first"):
        MockSettings.model_validate({"inject": [{"failure": "context-overflow", "atRequest": 0}]})
    with pytest.raises(ValidationError, match="status applies"):
        MockSettings.model_validate({"inject": [{"failure": "network", "status": 503}]})
    with pytest.raises(ValidationError):
        MockSettings.model_validate({"successRate": 1.5})


def test_provider_lookup() -> None:
    assert isinstance(create_provider("mock", {"mock": None}), MockProvider)
    assert create_provider("openai:gpt-4o").name == "openai"
    assert create_provider("anthropic:claude-x").name == "anthropic"
    for model, phrase in [
        ("acme:m1", "unknown model provider"),
        (None, "names no model"),
    ]:
        with pytest.raises(EndingException) as info:
            create_provider(model)
        ending = info.value.ending
        assert isinstance(ending, Infrastructure) and ending.what == "setup" and not ending.retryable
        assert phrase in ending.why

    class Fixed:
        name = "fixed"

        def __init__(self, model: str) -> None:
            self.model = model

        def session(self, context: AttemptContext) -> Any:
            return self

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(self.model)

        async def aclose(self) -> None:
            return None

    register_provider("fixedtest", lambda model, options: Fixed(model))
    made = create_provider("fixedtest:m-1")
    assert isinstance(made, Fixed) and made.model == "m-1"


def test_a_template_renders_the_same_every_time_it_is_used() -> None:
    """Templates are split once and kept (mst.providers.mock._pieces): a second render with other
    fields must not see the first one's values, and unknown names still fail at render time."""
    template = "{{lit}} {case}: {metadata[k]} }{"
    assert render(template, {"case": "c1", "metadata": {"k": 1}}) == "{lit} c1: 1 }{"
    assert render(template, {"case": "c2", "metadata": {"k": [2]}}) == "{lit} c2: [2] }{"
    with pytest.raises(ValueError, match="unknown placeholder"):
        render(template, {"case": "c3"})
