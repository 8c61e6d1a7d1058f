"""The OTLP/protobuf encoding of :class:`SpanRecord` s: an ``ExportTraceServiceRequest``'s bytes.

Why not the SDK's encoder: it builds a protobuf object per span, per attribute and per value
(about 40 µs a span), which alone would hold the export under its 5,000 attempts a second
(bench/otlp.md). The wire format of the few messages a trace request needs is small and fixed
(opentelemetry-proto's ``trace.proto``, ``common.proto``, ``resource.proto``), so it is written
here directly, and an attribute's encoding (most repeat from span to span: the operation, the
model, the eval) is kept once made. Tests decode what this writes with opentelemetry-proto and
compare it with the SDK encoder's output for the same spans. Imports nothing outside the stdlib.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from mst.export.otlp_spans import AttrValue, SpanRecord

# Field tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
_KIND: Final = {"internal": 1, "client": 3}  # Span.SpanKind
_STATUS_ERROR: Final = 2  # Status.StatusCode
_FLAGS: Final = b"\x85\x01\x00\x01\x00\x00"  # Span.flags (field 16, fixed32) = 0x100: "is remote" known, false
_pack_q = struct.Struct("<Q").pack
_pack_d = struct.Struct("<d").pack
_CACHE_LIMIT: Final = 65536


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (tags below 16: one byte)."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _any_value(value: AttrValue) -> bytes:
    kind = value.__class__
    if kind is str:
        return _field(0x0A, value.encode())  # type: ignore[union-attr]
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        return b"\x18" + _varint(value & 0xFFFF_FFFF_FFFF_FFFF)  # type: ignore[operator]  # int64, two's complement
    if kind is float:
        return b"\x21" + _pack_d(value)  # type: ignore[arg-type]
    items = b"".join(_field(0x0A, _any_value(str(item))) for item in value)  # type: ignore[union-attr]
    return _field(0x2A, items)  # an ArrayValue of strings


class Encoder:
    """Encodes requests for one resource and one instrumentation scope (mst's own)."""

    def __init__(self, resource: Mapping[str, AttrValue], scope_name: str, scope_version: str) -> None:
        self._cache: dict[tuple[str, object], bytes] = {}
        self._resource = _field(0x0A, self.attributes(resource.items()))  # ResourceSpans.resource
        self._scope = _field(0x0A, _field(0x0A, scope_name.encode()) + _field(0x12, scope_version.encode()))

    def attributes(self, items: Iterable[tuple[str, AttrValue]], tag: bytes = b"\x0A") -> bytes:
        """Repeated ``KeyValue`` fields under ``tag`` (0x0A in Resource, 0x4A in Span), each
        kept once made per (key, value)."""
        cache = self._cache
        out = []
        for key, value in items:
            hashable = value if value.__class__ is not list else tuple(value)  # type: ignore[arg-type]
            try:
                encoded = cache[(key, hashable)]
            except KeyError:
                kv = _field(0x0A, key.encode()) + _field(0x12, _any_value(value))
                encoded = _varint(len(kv)) + kv
                if len(cache) < _CACHE_LIMIT:
                    cache[(key, hashable)] = encoded
            except TypeError:  # an unhashable value
                kv = _field(0x0A, key.encode()) + _field(0x12, _any_value(value))
                encoded = _varint(len(kv)) + kv
            out.append(encoded)
        return tag + tag.join(out) if out else b""

    def span(self, r: SpanRecord) -> bytes:
        parts = [b"\x0A\x10", r.trace_id.to_bytes(16, "big"), b"\x12\x08", r.span_id.to_bytes(8, "big")]
        if r.parent is not None:
            parts += (b"\x22\x08", r.parent.to_bytes(8, "big"))
        parts += (_field(0x2A, r.name.encode()), b"\x30", bytes((_KIND[r.kind],)),
                  b"\x39", _pack_q(r.start_ns), b"\x41", _pack_q(r.end_ns))
        if r.attributes:
            parts.append(self.attributes(r.attributes.items(), b"\x4A"))
        if r.error is not None:
            parts.append(_field(0x7A, _field(0x12, r.error.encode()) + b"\x18" + bytes((_STATUS_ERROR,))))
        else:
            parts.append(b"\x7A\x00")  # an empty Status (code unset), as the SDK's encoder writes it
        parts.append(_FLAGS)
        return b"".join(parts)

    def request(self, spans: Sequence[bytes]) -> bytes:
        """An ``ExportTraceServiceRequest`` with one ResourceSpans holding one ScopeSpans."""
        scope_spans = self._scope + b"".join([_field(0x12, s) for s in spans])
        resource_spans = self._resource + _field(0x12, scope_spans)
        return _field(0x0A, resource_spans)
