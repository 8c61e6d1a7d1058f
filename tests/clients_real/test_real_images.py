"""Images from MCP tools reach the model as images, through the real ``openai`` and ``anthropic`` SDKs.

server-everything's ``get-tiny-image`` returns text, a PNG, and text; the fake provider records
what each SDK sent. Anthropic takes images inside the ``tool_result`` block; OpenAI's ``tool``
messages take text only, so the image follows them in a user message of ``image_url`` parts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, serve, text, tool
from tests.clients.clients_helpers import of_type, run, serving, start_everything_http, variant

from mst.clients.agent import AgentClient, AgentSettings
from mst.endings import COMPLETED


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    with serving(start_everything_http) as url:
        yield url


async def _attempt(fake: FakeProvider, tmp: Path, model: str, url: str) -> tuple[list[dict[str, Any]], Any]:
    provider_name, name = model.split(":")
    base = fake.openai_url if provider_name == "openai" else fake.anthropic_url
    fake.script(name, [tool("get-tiny-image", say="Let me look."), text("It is the MCP logo.")])
    client = AgentClient(
        variant(model, {"e": {"url": url}}),
        AgentSettings.model_validate({"provider": {"baseUrl": base, "maxRetries": 0}}), tmp)
    try:
        outcome, events = await run(client, tmp, secrets={"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"})
    finally:
        await client.aclose()
    assert outcome.ending == COMPLETED and outcome.answer == "It is the MCP logo.", outcome.ending
    [done] = of_type(events, "tool.execution_complete")
    [image] = [b for b in done["content"] if b["type"] == "image"]
    assert image["mimeType"] == "image/png" and image["data"].startswith("iVBOR")
    return [r.body for r in fake.requests if r.body.get("model") == name], image


async def test_openai_gets_the_image_in_a_user_message_after_the_tool_message(
    tmp_path: Path, fake: FakeProvider, everything_url: str
) -> None:
    bodies, image = await _attempt(fake, tmp_path, "openai:gpt-image-test", everything_url)
    messages = bodies[-1]["messages"]
    tool_msg, images_msg = messages[-2], messages[-1]
    assert tool_msg["role"] == "tool" and isinstance(tool_msg["content"], str)
    assert "Here's the image you requested:" in tool_msg["content"]
    assert f"[image 1: image/png, {image['size']} bytes]" in tool_msg["content"]
    assert images_msg["role"] == "user"
    intro, picture = images_msg["content"]
    assert intro["type"] == "text" and tool_msg["tool_call_id"] in intro["text"]
    assert picture == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image['data']}"}}


async def test_anthropic_gets_the_image_inside_the_tool_result(
    tmp_path: Path, fake: FakeProvider, everything_url: str
) -> None:
    bodies, image = await _attempt(fake, tmp_path, "anthropic:claude-image-test", everything_url)
    last = bodies[-1]["messages"][-1]
    assert last["role"] == "user"
    [result] = last["content"]
    assert result["type"] == "tool_result" and result["is_error"] is False
    words, picture = result["content"]
    assert words["type"] == "text" and "The image above is the MCP logo." in words["text"]
    assert picture == {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": image["data"]}}
