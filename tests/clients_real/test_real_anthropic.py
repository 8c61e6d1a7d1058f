"""The agent client with ``model: anthropic:...``: the real ``anthropic`` SDK against a fake provider over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fake_provider import FakeProvider, context_length, drop, serve, status, text, tool
from real_helpers import SERVER
from tests.clients.clients_helpers import of_type, run, variant

from mst.clients.agent import AgentClient, AgentSettings
from mst.endings import COMPLETED, Infrastructure, Trial

KEY = "sk-ant-test-5678"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


def client(fake: FakeProvider, model: str, *, servers: dict[str, Any] | None = None, **settings: Any) -> AgentClient:
    provider = {"baseUrl": fake.anthropic_url, "maxRetries": 0, **settings.pop("provider", {})}
    return AgentClient(variant(f"anthropic:{model}", servers), AgentSettings.model_validate(
        {"provider": provider, **settings}), Path(SERVER).parent)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_loop_over_streamable_http_server(tmp_path: Path, fake: FakeProvider, stream: bool) -> None:
    from tests.clients.clients_helpers import free_port, start_http_server, stop

    model = f"claude-loop-{stream}"
    fake.script(model, [tool("get_item", {"sku": "SAW-050"}, say="Looking it up."),
                        tool("get_item", {"sku": "NOPE"}), text("Hand saw 500 mm")])
    port = free_port()
    proc = start_http_server(port)
    try:
        c = client(fake, model, provider={"stream": stream},
                   servers={"store": {"url": f"http://127.0.0.1:{port}/mcp"}}, systemPrompt="Be brief.")
        outcome, events = await run(c, tmp_path, secrets={"ANTHROPIC_API_KEY": KEY})
        await c.aclose()
    finally:
        stop(proc)
    assert outcome.ending == COMPLETED and outcome.answer == "Hand saw 500 mm"
    done = of_type(events, "tool.execution_complete")
    assert [(d["toolCallId"], d["success"]) for d in done] == [("toolu_0", True), ("toolu_1", False)]
    assert orjson.loads(done[0]["output"])["name"] == "Hand saw 500 mm"
    sent = [r for r in fake.requests if r.body.get("model") == model]
    # The key reaches the API in a header (this SDK version sends it as a bearer token).
    assert all(KEY in (r.headers.get("x-api-key"), r.headers.get("authorization", "").removeprefix("Bearer "))
               for r in sent)
    body = sent[-1].body
    assert body["system"] == "Be brief." and body["max_tokens"] == 4096
    assert all(t["input_schema"]["type"] == "object" for t in body["tools"])
    # Each turn's tool results go back as tool_result blocks in one user message.
    results = [m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
    assert [b["tool_use_id"] for m in results for b in m["content"]] == ["toolu_0", "toolu_1"]
    assert results[1]["content"][0]["is_error"] is True
    assert of_type(events, "assistant.message")[0]["content"] == "Looking it up."


@pytest.mark.parametrize(
    ("steps", "what", "retryable"),
    [
        ([status(529, "Overloaded")], "provider-api", True),
        ([status(429)], "provider-api", True),
        ([status(500)], "provider-api", True),
        ([status(401, "invalid x-api-key")], "setup", False),
        ([status(404, "model: claude-nope")], "setup", False),
        ([context_length()], "setup", False),
        ([drop()], "network", True),
    ],
    ids=["529", "429", "500", "401", "404", "context-first", "drop"],
)
async def test_status_becomes_the_typed_ending(
    tmp_path: Path, fake: FakeProvider, steps: list[Any], what: str, retryable: bool, request: Any
) -> None:
    model = f"status-{request.node.callspec.id}"
    fake.script(model, steps)
    c = client(fake, model)
    outcome, _ = await run(c, tmp_path, secrets={"ANTHROPIC_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Infrastructure), outcome.ending
    assert (outcome.ending.what, outcome.ending.retryable) == (what, retryable), outcome.ending
    assert KEY not in outcome.ending.why


async def test_context_overflow_after_a_turn_is_a_trial(tmp_path: Path, fake: FakeProvider) -> None:
    fake.script("ctx-later", [tool("nope"), context_length()])
    c = client(fake, "ctx-later", provider={"stream": True})
    outcome, _ = await run(c, tmp_path, secrets={"ANTHROPIC_API_KEY": KEY})
    await c.aclose()
    assert isinstance(outcome.ending, Trial) and outcome.ending.outcome == "context-limit"
    assert "prompt is too long" in (outcome.ending.detail or "")


async def test_missing_key_is_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    c = AgentClient(variant("anthropic:claude-sonnet-4-5"), AgentSettings.model_validate({}), Path("."))
    outcome, _ = await run(c, tmp_path)
    assert isinstance(outcome.ending, Infrastructure) and outcome.ending.what == "setup"
    assert not outcome.ending.retryable and "ANTHROPIC_API_KEY" in outcome.ending.why
