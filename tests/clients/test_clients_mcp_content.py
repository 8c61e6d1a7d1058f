"""Tool results → what the model sees and what the transcript keeps (no server needed), and `lifetime`."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
)
from tests.helpers import basic_eval, mock_variant, write_eval

from mst.clients._mcp_content import TRANSCRIPT_DATA_CAP, convert, decoded_size
from mst.config.errors import UserError
from mst.config.resolve import resolve_eval
from mst.providers.base import ImageData


@pytest.mark.parametrize("raw", [b"", b"a", b"ab", b"abc", bytes(range(256)) * 3])
def test_decoded_size_matches_the_bytes(raw: bytes) -> None:
    assert decoded_size(base64.b64encode(raw).decode()) == len(raw)


def test_large_binaries_are_recorded_by_type_and_size_only() -> None:
    big = base64.b64encode(b"\x89PNG" + bytes(100_000)).decode()
    assert len(big) > TRANSCRIPT_DATA_CAP
    result = CallToolResult(content=[
        ImageContent(data=big, mime_type="image/png"),
        AudioContent(data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
        EmbeddedResource(resource=BlobResourceContents(uri="file:///x.bin", mime_type=None, blob=big)),
    ])
    got = convert(result)
    image, audio, blob = got.content
    assert image == {"type": "image", "mimeType": "image/png", "size": 100_004, "truncated": True}
    assert audio == {"type": "audio", "mimeType": "audio/wav", "size": 4, "data": "UklGRg=="}
    assert blob == {"type": "resource", "uri": "file:///x.bin", "mimeType": None, "size": 100_004, "truncated": True}
    # The model still gets the image itself; the transcript does not carry 130 KB of base64.
    assert got.images == (ImageData("image/png", big),)
    assert got.text.splitlines() == [
        "[image 1: image/png, 100004 bytes]", "[audio: audio/wav, 4 bytes]",
        "[resource file:///x.bin (unknown type): 100004 bytes of binary data]"]


def test_structured_content_is_what_the_model_sees_without_text() -> None:
    only = convert(CallToolResult(content=[], structured_content={"total": 42}))
    assert only.text == '{"total":42}' and only.structured == {"total": 42}
    with_text = convert(CallToolResult(content=[TextContent(text="42 in stock")], structured_content={"total": 42}))
    assert with_text.text == "42 in stock" and with_text.structured == {"total": 42}


def test_lifetime_is_attempt_by_default_and_checked(tmp_path: Path) -> None:
    variant = {**mock_variant("v"), "mcpServers": {"s": {"command": "python"}, "h": {"url": "http://x/mcp",
                                                                                      "lifetime": "variant"}}}
    resolved = resolve_eval(write_eval(tmp_path, basic_eval(variants=[variant])))
    servers = resolved.variants[0].mcpServers
    assert (servers["s"].lifetime, servers["h"].lifetime) == ("attempt", "variant")
    variant["mcpServers"]["s"]["lifetime"] = "forever"
    with pytest.raises(UserError) as info:
        resolve_eval(write_eval(tmp_path, basic_eval(variants=[variant])))
    assert "lifetime" in str(info.value) and "mcpServers" in str(info.value)
