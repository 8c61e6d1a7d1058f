"""The agent client without MCP servers: the loop, the transcript, limits and every ending via the mock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clients_helpers import REPO, agent, of_type, request, run, types
from pydantic import ValidationError

from mst.clients.agent import AgentClient, AgentSettings
from mst.endings import COMPLETED, Infrastructure, Trial, stored_ending


async def test_completed_attempt_writes_the_canonical_transcript(tmp_path: Path) -> None:
    client = agent({"mock": {"answer": "There are {expected}."}})
    outcome, events = await run(client, tmp_path)
    assert outcome.ending == COMPLETED
    assert outcome.answer == "There are 42."
    assert types(events) == [
        "session.format",
        "user.message",
        "model.request",
        "assistant.message",
        "session.result",
    ]
    assert of_type(events, "user.message") == [{"content": "How many claw hammers are in stock?"}]
    [req] = of_type(events, "model.request")
    assert req["model"] == "mock" and req["requestIndex"] == 0
    assert req["totalTokens"] == req["inputTokens"] + req["outputTokens"] > 0
    assert isinstance(req["durationMs"], int)
    [result] = of_type(events, "session.result")
    assert result["answer"] == "There are 42." and result["outcome"] == "completed" and result["turns"] == 1
    assert (
        outcome.usage
        == result["usage"]
        == {
            "inputTokens": req["inputTokens"],
            "outputTokens": req["outputTokens"],
            "totalTokens": req["totalTokens"],
        }
    )
    assert outcome.diagnostics == {"turns": 1, "toolCalls": 0}
    # Deterministic: the same attempt gives the same transcript data, but for the request's
    # measured duration (a wall time: 0 ms usually, more when the machine is loaded).
    again, events2 = await run(client, tmp_path)

    def timeless(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e["data"].items() if k != "durationMs"} for e in evs if e["type"] != "session.result"]

    assert timeless(events2) == timeless(events)
    assert again.usage == outcome.usage


async def test_case_mock_overrides_the_variant_script(tmp_path: Path) -> None:
    client = agent({"mock": {"answer": "variant"}})
    outcome, _ = await run(client, tmp_path, case_mock={"answer": "case {case}"})
    assert outcome.answer == "case c1"


async def test_success_rate_varies_across_trials_deterministically(tmp_path: Path) -> None:
    client = agent({"mock": {"successRate": 0.5, "answer": "right", "wrongAnswer": "wrong"}})
    answers = [(await run(client, tmp_path, trial=t))[0].answer for t in range(40)]
    assert set(answers) == {"right", "wrong"}
    assert answers == [(await run(client, tmp_path, trial=t))[0].answer for t in range(40)]
    # Every one is still a completed trial: a wrong answer is for grading to judge.
    endings = [(await run(client, tmp_path, trial=t))[0].ending for t in range(5)]
    assert endings == [COMPLETED] * 5


async def test_tool_call_without_servers_is_a_failed_call_inside_the_trial(tmp_path: Path) -> None:
    client = agent({"mock": {"steps": [{"tool": "lookup", "args": {"q": "x"}}], "answer": "{result}"}})
    outcome, events = await run(client, tmp_path)
    assert outcome.ending == COMPLETED
    [start] = of_type(events, "tool.execution_start")
    # mst refused it without a server to send it to: marked `rejected` for grading.
    assert start == {"toolCallId": "call_0", "toolName": "lookup", "input": {"q": "x"}, "mcpServerName": None,
                     "rejected": True}
    [done] = of_type(events, "tool.execution_complete")
    assert done["success"] is False and "no MCP servers" in done["error"] and "output" not in done
    assert done["rejected"] is True
    assert outcome.answer == done["error"]  # the error was fed back to the model
    assert outcome.diagnostics == {"turns": 2, "toolCalls": 1}


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        ("rate-limit", ("provider-api", True)),
        ("server-error", ("provider-api", True)),
        ("network", ("network", True)),
        ("client-crash", ("client-app", True)),
        ("context-overflow-first", ("setup", False)),
    ],
)
async def test_injected_infrastructure_endings(tmp_path: Path, failure: str, expected: tuple[str, bool]) -> None:
    client = agent({"mock": {"inject": [{"failure": failure}]}})
    outcome, events = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure)
    assert (outcome.ending.what, outcome.ending.retryable) == expected
    assert outcome.answer is None
    [result] = of_type(events, "session.result")
    assert result["outcome"] == "infrastructure" and result["ending"]["what"] == expected[0]


async def test_context_overflow_mid_trial_is_a_context_limit_trial(tmp_path: Path) -> None:
    client = agent({"mock": {"inject": [{"failure": "context-overflow"}]}})
    outcome, events = await run(client, tmp_path)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "context-limit"
    assert len(of_type(events, "model.request")) == 1


async def test_context_window_filled_by_the_conversation(tmp_path: Path) -> None:
    big = "word " * 300
    client = agent({"mock": {"contextWindow": 200, "steps": [{"tool": "t"}]}})
    outcome, _ = await run(client, tmp_path, prompt="short")
    # The unknown tool's error message is small: still fits.
    assert outcome.ending == COMPLETED
    outcome, _ = await run(client, tmp_path, prompt=big)
    assert outcome.ending == Infrastructure("setup", outcome.ending.why, False)  # type: ignore[union-attr]


async def test_turn_limit(tmp_path: Path) -> None:
    client = agent({"maxTurns": 3, "mock": {"inject": [{"failure": "turn-limit"}]}})
    outcome, events = await run(client, tmp_path)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "turn-limit"
    assert "maxTurns=3" in (outcome.ending.detail or "")
    assert len(of_type(events, "model.request")) == 3
    # The calls of the last allowed turn are not run: the client stopped there.
    assert len(of_type(events, "tool.execution_start")) == 2
    assert outcome.diagnostics == {"turns": 3, "toolCalls": 2}


async def test_token_budget_ends_as_turn_limit(tmp_path: Path) -> None:
    client = agent({"maxTokens": 30, "mock": {"steps": [{"tool": "t"}, {"tool": "t"}, {"tool": "t"}]}})
    outcome, events = await run(client, tmp_path)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "turn-limit"
    assert "maxTokens is 30" in (outcome.ending.detail or "")
    used = sum(r["totalTokens"] for r in of_type(events, "model.request"))
    assert used >= 30 and outcome.usage["totalTokens"] == used


async def test_time_limit(tmp_path: Path) -> None:
    client = agent({"timeLimitSeconds": 0.05, "mock": {"inject": [{"failure": "time-limit"}]}})
    t0 = time.monotonic()
    outcome, _ = await run(client, tmp_path)
    assert time.monotonic() - t0 < 1.0
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"
    no_budget = agent({"mock": {"inject": [{"failure": "time-limit"}]}})
    outcome, _ = await run(no_budget, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"


async def test_client_error(tmp_path: Path) -> None:
    client = agent({"mock": {"inject": [{"failure": "client-error"}]}})
    outcome, _ = await run(client, tmp_path)
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "client-error"


async def test_deadline_is_mst_s_when_the_collector_cancels(tmp_path: Path) -> None:
    client = agent({"mock": {"inject": [{"failure": "deadline"}]}})
    req = request(client, tmp_path, deadline_s=0.1)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.attempt(req), 0.1)
    assert stored_ending(TimeoutError(), deadline_passed=True).what == "deadline"  # type: ignore[union-attr]
    # Driven outside a collector, the mock still ends the attempt once it is past the deadline.
    outcome, _ = await run(client, tmp_path, deadline_s=0.01)
    assert outcome.ending == Infrastructure("deadline", outcome.ending.why, True)  # type: ignore[union-attr]


async def test_injection_on_first_try_only_lets_the_retry_succeed(tmp_path: Path) -> None:
    client = agent({"mock": {"inject": [{"failure": "server-error", "tries": [1]}]}})
    first, _ = await run(client, tmp_path, try_number=1)
    second, _ = await run(client, tmp_path, try_number=2)
    assert isinstance(first.ending, Infrastructure) and first.ending.retryable
    assert second.ending == COMPLETED and second.answer == "42"


async def test_latency_per_model_call(tmp_path: Path) -> None:
    client = agent({"mock": {"latencyMs": 30, "steps": [{"tool": "t"}]}})
    t0 = time.monotonic()
    _, events = await run(client, tmp_path)
    assert time.monotonic() - t0 >= 0.06
    assert all(r["durationMs"] >= 29 for r in of_type(events, "model.request"))


async def test_system_prompt_counts_in_the_mock_s_input_tokens(tmp_path: Path) -> None:
    plain, _ = await run(agent(), tmp_path)
    prompted, _ = await run(agent({"systemPrompt": "You are a careful inventory clerk. " * 10}), tmp_path)
    assert prompted.usage["inputTokens"] > plain.usage["inputTokens"]


@pytest.mark.parametrize(("model", "phrase"), [("anthropic:claude-x", "no API key"), (None, "names no model")])
async def test_unavailable_model_is_a_setup_failure(
    tmp_path: Path, model: str | None, phrase: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client = agent(model=model)
    outcome, events = await run(client, tmp_path)
    assert isinstance(outcome.ending, Infrastructure)
    assert outcome.ending.what == "setup" and not outcome.ending.retryable and phrase in outcome.ending.why
    assert types(events)[-1] == "session.result"


async def test_invalid_case_mock_is_a_setup_failure(tmp_path: Path) -> None:
    outcome, _ = await run(agent(), tmp_path, case_mock={"successRate": 2})
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert "successRate" in outcome.ending.why


def test_settings_validation() -> None:
    assert AgentSettings.model_validate({}).maxTurns == 10
    for bad in ({"maxTurns": 0}, {"maxTokens": 0}, {"timeLimitSeconds": -1}, {"nope": 1}, {"mock": {"x": 1}}):
        with pytest.raises(ValidationError):
            AgentSettings.model_validate(bad)
    assert AgentClient.settings_model is AgentSettings


async def test_no_server_attempt_is_cheap(tmp_path: Path) -> None:
    client = agent({"mock": {"successRate": 0.7}})
    reqs: list[Any] = [request(client, tmp_path, case=f"c{i % 50}", trial=i % 5) for i in range(2000)]
    for r in reqs[:50]:
        await client.attempt(r)
    t0 = time.process_time()
    for r in reqs:
        await client.attempt(r)
    per_attempt = (time.process_time() - t0) / len(reqs)
    # The harness budget is 1 ms per attempt end to end; the client's share must stay well under 0.3 ms.
    assert per_attempt < 0.0003, f"{per_attempt * 1e6:.0f} µs per attempt"


def test_no_server_path_imports_no_mcp() -> None:
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "sys.path.insert(0, 'tests/clients')\n"
        "from clients_helpers import agent, run\n"
        "outcome, _ = asyncio.run(run(agent({'mock': {'steps': [{'tool': 't'}]}}), Path('/tmp')))\n"
        "assert outcome.answer == '42', outcome\n"
        "heavy = {'mcp', 'anyio', 'httpx2', 'mcp_types'}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


async def test_secrets_never_reach_an_ending(tmp_path: Path) -> None:
    client = agent({"mock": {"inject": [{"failure": "client-crash"}]}})
    secret = "crash"  # the crash message contains this word: it must not survive in the ending
    outcome, _ = await run(client, tmp_path, secrets={"API_KEY": secret})
    assert isinstance(outcome.ending, Infrastructure)
    assert secret not in outcome.ending.why and "[REDACTED]" in outcome.ending.why


def test_a_request_makes_its_artifacts_path_from_a_string_when_read(tmp_path: Path) -> None:
    """The collector passes the artifacts folder as a string (no pathlib per attempt); a client
    always reads a Path, the same one each time."""
    from mst.clients.base import AttemptRequest, TranscriptRecorder

    client = agent()
    req = AttemptRequest("c1", "p", "42", {}, client.variant, 0, 1, 0, 60.0, f"{tmp_path}/artifacts/c1/0",
                         TranscriptRecorder("agent"))
    assert req.artifacts_dir == tmp_path / "artifacts" / "c1" / "0"
    assert req.artifacts_dir is req.artifacts_dir
    assert req.secrets == {} and req.case_mock is None


async def test_the_provider_is_given_each_of_the_requests_fields_by_name(tmp_path: Path) -> None:
    """The agent makes the provider's AttemptContext by position (fewer instructions an attempt):
    each field must still hold the request's value of the same name."""
    from mst.clients.base import AttemptRequest, TranscriptRecorder
    from mst.providers.base import AttemptContext

    client = agent({"timeLimitSeconds": 30})
    seen: list[AttemptContext] = []
    provider = client._provider
    assert provider is not None
    session = provider.session

    def spy(context: AttemptContext) -> Any:
        seen.append(context)
        return session(context)

    client._provider.session = spy  # type: ignore[union-attr,method-assign]
    req = AttemptRequest("c7", "the prompt", {"n": 42}, {"tag": "m"}, client.variant, 3, 2, 11, 60.0,
                         f"{tmp_path}/artifacts", TranscriptRecorder("agent"), {"KEY": "v"}, {"answer": "x"})
    await client.attempt(req)
    [context] = seen
    assert (context.case_id, context.variant_id, context.trial, context.try_number, context.seed) == (
        "c7", client.variant.id, 3, 2, 11)
    assert (context.prompt, context.expected, context.metadata) == ("the prompt", {"n": 42}, {"tag": "m"})
    assert (context.deadline_s, context.time_budget_s) == (60.0, 30)
    assert context.case_mock == {"answer": "x"} and context.secrets == {"KEY": "v"}
