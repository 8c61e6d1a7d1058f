"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tests: it decodes each request's protobuf
payload (opentelemetry-proto) into plain span dicts, as a collector would see them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


@dataclass
class Receiver:
    url: str  # the base endpoint (the exporter adds /v1/traces)
    status: int = 200  # what the receiver answers: 200, or an error to refuse the spans
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)  # path, content type, resource attrs


def _decode(body: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans, resource = [], {}
    for rs in request.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append({
                    "name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                    "parent": s.parent_span_id.hex() or None, "kind": s.kind,
                    "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                    "attrs": {a.key: _value(a.value) for a in s.attributes},
                    "status": s.status.code, "status_message": s.status.message, "scope": ss.scope.name,
                })
    return spans, resource


@contextmanager
def receiver(status: int = 200) -> Iterator[Receiver]:
    rec = Receiver(url="", status=status)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            spans, resource = _decode(body)
            with lock:
                rec.requests.append({"path": self.path, "type": self.headers.get("Content-Type"),
                                     "resource": resource})
                if rec.status == 200:
                    rec.spans.extend(spans)
            payload = ExportTraceServiceResponse().SerializeToString()
            self.send_response(rec.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
