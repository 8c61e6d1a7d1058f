"""What an MCP tool result becomes: the text (and images) the model sees, and the transcript's record.

Nothing of a result is dropped. Every block is kept in the transcript's ``content`` list with
its type and metadata: text; images and audio with ``mimeType``, ``size`` (decoded bytes) and
``data`` (base64) when it is at most :data:`TRANSCRIPT_DATA_CAP` characters; embedded resources
with ``uri``, ``mimeType`` and their ``text`` (or ``blob`` under the same cap, and its ``size``);
resource links with ``uri``, ``name``, ``description`` and ``mimeType``. Structured content is
kept as ``structuredContent``.

The model sees text blocks as they are, an embedded text resource as its URI line followed by
its text, and a one-line description of every other block (so it knows a blob, an image or a
link is there). Images also go to the model as images (:class:`ImageData`) where the provider
accepts them (see docs/mcp-servers.md). When a result has no text at all, the model sees its
structured content as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from mst.providers.base import ImageData

# Base64 payloads longer than this are recorded by type and size only (a transcript is not a blob store).
TRANSCRIPT_DATA_CAP: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Converted:
    """One tool result, ready for the model and for the transcript."""

    text: str
    images: tuple[ImageData, ...]
    content: list[dict[str, Any]]
    structured: Any


def decoded_size(data: str) -> int:
    """Bytes a base64 string decodes to, without decoding it."""
    n = len(data.rstrip())
    return max(0, n * 3 // 4 - data.rstrip()[-2:].count("="))


def _binary(record: dict[str, Any], key: str, data: str) -> dict[str, Any]:
    record["size"] = decoded_size(data)
    if len(data) <= TRANSCRIPT_DATA_CAP:
        record[key] = data
    else:
        record["truncated"] = True
    return record


def _resource(block: EmbeddedResource) -> tuple[str, dict[str, Any]]:
    res = block.resource
    mime = res.mime_type or "unknown type"
    record: dict[str, Any] = {"type": "resource", "uri": str(res.uri), "mimeType": res.mime_type}
    if isinstance(res, TextResourceContents):
        record["text"] = res.text
        return f"[resource {res.uri} ({mime})]\n{res.text}", record
    assert isinstance(res, BlobResourceContents)
    _binary(record, "blob", res.blob)
    return f"[resource {res.uri} ({mime}): {record['size']} bytes of binary data]", record


def _link(block: ResourceLink) -> tuple[str, dict[str, Any]]:
    record: dict[str, Any] = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    if block.description:
        record["description"] = block.description
    if block.mime_type:
        record["mimeType"] = block.mime_type
    about = f" ({block.mime_type})" if block.mime_type else ""
    about += f": {block.description}" if block.description else ""
    return f"[resource link {block.name} <{block.uri}>{about}]", record


def convert(result: CallToolResult) -> Converted:
    parts: list[str] = []
    images: list[ImageData] = []
    content: list[dict[str, Any]] = []
    has_text = False
    for block in result.content:
        if isinstance(block, TextContent):
            has_text = True
            parts.append(block.text)
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            record = _binary({"type": "image", "mimeType": block.mime_type}, "data", block.data)
            images.append(ImageData(block.mime_type, block.data))
            parts.append(f"[image {len(images)}: {block.mime_type}, {record['size']} bytes]")
            content.append(record)
        elif isinstance(block, AudioContent):
            record = _binary({"type": "audio", "mimeType": block.mime_type}, "data", block.data)
            parts.append(f"[audio: {block.mime_type}, {record['size']} bytes]")
            content.append(record)
        elif isinstance(block, EmbeddedResource):
            has_text = has_text or isinstance(block.resource, TextResourceContents)
            line, record = _resource(block)
            parts.append(line)
            content.append(record)
        elif isinstance(block, ResourceLink):
            line, record = _link(block)
            parts.append(line)
            content.append(record)
        else:  # a block type newer than this code: keep what it says about itself
            content.append(block.model_dump(mode="json", by_alias=True, exclude_none=True))
            parts.append(f"[{getattr(block, 'type', 'content')}]")
    structured = result.structured_content
    if not has_text and structured is not None:
        parts.insert(0, orjson.dumps(structured).decode())
    return Converted("\n".join(parts), tuple(images), content, structured)
