"""The agent client with ``model: openai:...``: the real ``openai`` SDK against a fake provider over HTTP.

Every status the adapter types is produced by the fake server and checked as the ending the
attempt ends with; the SDK's retries are set small and the fake asks for a 5 ms back-off.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fake_provider import FakeProvider, bad_tool_args, context_length, drop, serve, slow, status, text, tool
from real_helpers import SERVER
from tests.clients.clients_helpers import of_type, run, variant

from mst.clients.agent import AgentClient, AgentSettings
from mst.endings import COMPLETED, Infrastructure, Trial

KEY = "sk-test-openai-1234"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


def client(fake: FakeProvider, model: str, *, servers: dict[str, Any] | None = None, **settings: Any) -> AgentClient:
    provider = {"baseUrl": fake.openai_url, "maxRetries": 0, **settings.pop("provider", {})}
    return AgentClient(variant(f"openai:{model}", servers), AgentSettings.model_validate(
        {"provider": provider, **settings}), Path(SERVER).parent)


def requests_for(fake: FakeProvider, model: str) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.body.get("model") == model]


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_loop_against_the_real_quickstart_server(tmp_path: Path, fake: FakeProvider, stream: bool) -> None:
    model = f"loop-{stream}"
    fake.script(model, [tool("check_stock", {"sku": "HAM-001"}, say="Checking."),
                        tool("quote_order", {"sku": "HAM-001", "quantity": 0}), text("42 in stock")])
    store = {"store": {"command": "python", "args": ["server.py"]}}
    c = client(fake, model, provider={"stream": stream}, servers=store)
    outcome, events = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert outcome.ending == COMPLETED and outcome.answer == "42 in stock"
    done = of_type(events, "tool.execution_complete")
    assert [(d["toolName"], d["success"], d["mcpServerName"]) for d in done] == [
        ("check_stock", True, "store"), ("quote_order", False, "store")]
    assert orjson.loads(done[0]["output"])["total"] == 42
    assert "quantity must be at least 1" in done[1]["error"]
    requests = of_type(events, "model.request")
    assert len(requests) == 3 and all(r["inputTokens"] > 0 and r["outputTokens"] == 7 for r in requests)
    assert outcome.usage["inputTokens"] == sum(r["inputTokens"] for r in requests)
    sent = requests_for(fake, model)
    assert len(sent) == 3 and bool(sent[0].get("stream")) is stream
    assert {t["function"]["name"] for t in sent[0]["tools"]} >= {"check_stock", "quote_order", "search_items"}
    # The tool results went back as `tool` messages paired with the model's call ids.
    last = sent[2]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert last[2]["tool_call_id"] == "call_0" and orjson.loads(last[2]["content"])["total"] == 42
    assert last[1]["tool_calls"][0]["function"]["arguments"] == '{"sku":"HAM-001"}'
    headers = [r.headers for r in fake.requests if r.body.get("model") == model]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in headers)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([status(429)], Infrastructure("provider-api", "", True)),
        ([status(500)], Infrastructure("provider-api", "", True)),
        ([status(503)], Infrastructure("provider-api", "", True)),
        ([status(401, "Incorrect API key provided")], Infrastructure("setup", "", False)),
        ([status(403, "not allowed")], Infrastructure("setup", "", False)),
        ([status(404, "The model `x` does not exist")], Infrastructure("setup", "", False)),
        ([context_length()], Infrastructure("setup", "", False)),
        ([tool("nope"), context_length()], Trial("context-limit")),
        ([drop()], Infrastructure("network", "", True)),
        ([tool("nope")], Trial("turn-limit")),
    ],
    ids=["429", "500", "503", "401", "403", "404", "context-first", "context-later", "drop", "turns"],
)
async def test_status_becomes_the_typed_ending(
    tmp_path: Path, fake: FakeProvider, steps: list[Any], expected: Infrastructure | Trial, request: Any
) -> None:
    model = f"status-{request.node.callspec.id}"
    fake.script(model, steps)
    c = client(fake, model, maxTurns=3)
    outcome, events = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    ending = outcome.ending
    if isinstance(expected, Trial):
        assert isinstance(ending, Trial) and ending.outcome == expected.outcome, ending
    else:
        assert isinstance(ending, Infrastructure), ending
        assert (ending.what, ending.retryable) == (expected.what, expected.retryable), ending
    assert KEY not in repr(ending)
    assert of_type(events, "session.result")[0]["ending"]["kind"] == ("trial" if isinstance(expected, Trial)
                                                                     else "infrastructure")


async def test_sdk_retries_are_configurable_and_exhausting_them_is_provider_api(
    tmp_path: Path, fake: FakeProvider
) -> None:
    fake.script("retry-429", [status(429, "Rate limit reached")])
    c = client(fake, "retry-429", provider={"maxRetries": 2})
    started = time.monotonic()
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert len(requests_for(fake, "retry-429")) == 3  # the first try and two retries
    assert time.monotonic() - started < 5  # the fake's retry-after-ms keeps the back-off tiny
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "provider-api"
    assert "HTTP 429" in outcome.ending.why and "Rate limit reached" in outcome.ending.why


async def test_slow_response_is_a_read_timeout_or_a_time_limit(tmp_path: Path, fake: FakeProvider) -> None:
    fake.script("slow", [slow(1.5, text("late"))])
    c = client(fake, "slow", provider={"timeoutSeconds": 0.3})
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert outcome.ending == Infrastructure("network", "openai: read timeout: no response within 0.3 s", True)
    # The client's own budget is a trial, whatever the model is doing.
    c = client(fake, "slow", timeLimitSeconds=0.3)
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "time-limit"


async def test_connection_refused_is_network(tmp_path: Path) -> None:
    from tests.clients.clients_helpers import free_port

    c = AgentClient(variant("openai:m"), AgentSettings.model_validate(
        {"provider": {"baseUrl": f"http://127.0.0.1:{free_port()}/v1", "maxRetries": 0}}), Path("."))
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "network" and outcome.ending.retryable


async def test_missing_key_is_setup_and_key_from_environment_works(
    tmp_path: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    c = AgentClient(variant("openai:gpt-4o-mini"), AgentSettings.model_validate({}), Path("."))
    outcome, _ = await run(c, tmp_path)
    assert outcome.ending == Infrastructure(
        "setup", "openai: no API key: set OPENAI_API_KEY in --secrets-file or the environment", False)
    fake.script("env-key", [text("ok")])
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-from-env-9")
    c = client(fake, "env-key", provider={"apiKeySecret": "MY_GATEWAY_KEY"})
    outcome, _ = await run(c, tmp_path)
    await c.aclose()
    assert outcome.ending == COMPLETED
    assert [r.headers["authorization"] for r in fake.requests if r.body.get("model") == "env-key"] == [
        "Bearer sk-from-env-9"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("raw", ["{not json", "[1, 2]"])
async def test_unusable_tool_arguments_are_a_client_error(
    tmp_path: Path, fake: FakeProvider, stream: bool, raw: str
) -> None:
    model = f"badargs-{stream}-{raw}"
    fake.script(model, [bad_tool_args("echo", raw)])
    c = client(fake, model, provider={"stream": stream})
    outcome, _ = await run(c, tmp_path, secrets={"OPENAI_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "client-error", outcome.ending
    assert "'echo'" in (outcome.ending.detail or "")
