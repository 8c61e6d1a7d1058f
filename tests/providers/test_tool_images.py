"""Tool-result images in the provider adapters' message building: what each API takes, where."""

from __future__ import annotations

from mst.providers import anthropic, openai
from mst.providers.base import AssistantMessage, ImageData, ToolCall, ToolResult, UserMessage

PNG = ImageData("image/png", "iVBORw0KGgo=")
SVG = ImageData("image/svg+xml", "PHN2Zy8+")  # no provider takes SVG: it stays described in the text


def _turn(*results: ToolResult) -> list[UserMessage | AssistantMessage | ToolResult]:
    calls = tuple(ToolCall(r.call_id, r.name, {}) for r in results)
    return [UserMessage("look"), AssistantMessage("", calls), *results]


def test_anthropic_puts_the_images_it_takes_inside_the_tool_result() -> None:
    with_png = ToolResult("c1", "shot", "[image 1: image/png, 8 bytes]", images=(PNG, SVG))
    only_svg = ToolResult("c2", "draw", "[image 1: image/svg+xml, 6 bytes]", images=(SVG,))
    *_, last = anthropic._messages(_turn(with_png, only_svg))
    first, second = last["content"]
    assert first["content"] == [
        {"type": "text", "text": "[image 1: image/png, 8 bytes]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}},
    ]
    assert second["content"] == "[image 1: image/svg+xml, 6 bytes]"  # text only, as without images


def test_openai_sends_the_images_after_the_turns_tool_messages() -> None:
    with_png = ToolResult("c1", "shot", "[image 1: image/png, 8 bytes]", images=(SVG, PNG))
    only_svg = ToolResult("c2", "draw", "[image 1: image/svg+xml, 6 bytes]", images=(SVG,))
    messages = openai._messages(None, [*_turn(with_png, only_svg), UserMessage("and now?")])
    roles = [m["role"] for m in messages]
    # Tool messages must follow the assistant's calls directly; the images come after them all.
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    intro, picture = messages[4]["content"]
    assert "c1" in intro["text"] and "c2" not in intro["text"]
    assert picture == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG.data}"}}
    assert messages[5] == {"role": "user", "content": "and now?"}
    assert openai._messages(None, _turn(only_svg))[-1]["role"] == "tool"  # nothing to add
