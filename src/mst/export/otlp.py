"""OTLP export of a run: one trace per attempt, sent over OTLP/HTTP (docs/otlp.md).

The spans are built by :mod:`mst.export.otlp_spans` from the run's files; this module turns them
into OpenTelemetry SDK spans and hands them to the SDK's OTLP/HTTP exporter in batches. The SDK
is the optional extra ``mst[otlp]``, imported only here and only when an export runs, so
``mst --help`` and runs without ``--otlp`` never pay for it.

Spans are built as finished :class:`ReadableSpan` s rather than through a tracer: their times are
the transcript's, not the clock's, and it is several times cheaper (the export must keep up with
5,000 attempts a second, bench/otlp.md). The exporter reads the standard ``OTEL_EXPORTER_OTLP_*``
variables itself (headers, timeout, certificates), so a backend's key stays out of argv and files.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from mst.errors import Problem, UserError
from mst.export.otlp_spans import AttemptView, SpanRecord, attempt_spans
from mst.session.io import TranscriptError, read_transcript

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from mst.runs.meta import RunMeta
    from mst.runs.run import Run

INSTALL_HINT: Final = "pip install 'mst[otlp]'"
DEFAULT_ENDPOINT: Final = "http://localhost:4318"  # the OTLP/HTTP default (OpenTelemetry's exporter spec)
TRACES_PATH: Final = "/v1/traces"
SPANS_PER_REQUEST: Final = 4096
_EXPORTER_LOGGER: Final = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
_REQUIRED: Final = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


class OtlpExportError(UserError):
    """The endpoint did not take the spans; the run itself is untouched."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    endpoint: str
    attempts: int
    spans: int


def require_sdk() -> None:
    """Refuse early, without importing the SDK, when the optional extra is not installed."""
    for module in _REQUIRED:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise UserError(Problem("otlp", f"OTLP export needs the optional extra: {INSTALL_HINT} "
                                            f"(missing module {module})"))


def traces_endpoint(explicit: str | None, env: Mapping[str, str] | None = None) -> str:
    """Where the spans go: ``explicit`` (a base URL, or one ending in /v1/traces), else
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is), else ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (+ /v1/traces), else the OTLP/HTTP default on localhost:4318."""
    env = os.environ if env is None else env
    if not explicit:
        traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if traces:
            return traces
    base = explicit or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
    if not base.startswith(("http://", "https://")):
        raise UserError(Problem("otlp", f"the OTLP endpoint {base!r} is not an http:// or https:// URL"))
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def export_run(run_dir: Path, endpoint: str | None = None) -> ExportResult:
    """Send every attempt of the run as a trace; raises :class:`OtlpExportError` naming the
    endpoint and how far it got when a request is refused or the endpoint is unreachable."""
    require_sdk()
    from mst.runs.run import open_run

    url = traces_endpoint(endpoint)
    run = open_run(run_dir)
    sender = _Sender(url)
    total = len(run.attempts)
    sent_attempts = sent_spans = 0
    # One request in flight while the next batch is read and encoded: the wait for the endpoint
    # (the socket releases the GIL) overlaps mst's own work instead of adding to it.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mst-otlp") as pool:
        in_flight: Future[None] | None = None
        try:
            for attempts, records in _batches(run):
                request = sender.encode(records)
                if in_flight is not None:
                    in_flight.result()  # raises the previous request's failure before sending more
                in_flight = pool.submit(sender.send, request, sent_attempts, total)
                sent_attempts += attempts
                sent_spans += len(records)
            if in_flight is not None:
                in_flight.result()
        finally:
            if in_flight is not None:
                in_flight.cancel()
                wait([in_flight])
            sender.close()
    return ExportResult(url, sent_attempts, sent_spans)


def _views(run: Run) -> Iterator[AttemptView]:
    """Each attempt with its grading and transcript, decoded from the bytes the run keeps."""
    root, meta = run.root, run.meta
    variants = {str(v.get("id")): v for v in meta.variants}
    created = _created_ms(meta)
    grades = run.trial_grades
    for raw in run.attempts.raw_in_key_order():
        record = orjson.loads(raw)
        key = (record["variant"], record["case"], record["trial"])
        grading = orjson.loads(grades.raw(key)) if key in grades else None
        events, fallback, problem = _transcript(root, record, created)
        yield AttemptView(meta.id, meta.eval.name, variants.get(record["variant"], {}), record, grading,
                          events, fallback, problem)


def _transcript(root: str, record: Mapping[str, Any], created_ms: float
                ) -> tuple[Sequence[Any], float, str | None]:
    """The attempt's events, a start time for a record written before ``startedAt`` (its
    transcript's mtime less its duration), and why there are no events when the transcript
    cannot be read (the root span still goes, and says so)."""
    rel = record.get("transcript")
    if not isinstance(rel, str):
        return (), created_ms, "the attempt has no transcript"
    path = f"{root}/{rel}"
    try:
        events = read_transcript(path)
    except (TranscriptError, OSError) as exc:
        return (), created_ms, str(exc)
    if "startedAt" in record:
        return events, created_ms, None
    duration = record.get("durationMs")
    try:
        end_ms = os.stat(path).st_mtime * 1000
    except OSError:
        return events, created_ms, None
    return events, end_ms - (duration if isinstance(duration, int | float) else 0), None


def _created_ms(meta: RunMeta) -> float:
    from datetime import datetime

    created = meta.to_json().get("createdAt")
    try:
        return datetime.fromisoformat(str(created)).timestamp() * 1000
    except ValueError:
        return 0.0


def _batches(run: Run) -> Iterator[tuple[int, list[SpanRecord]]]:
    attempts, spans = 0, []
    for view in _views(run):
        spans += attempt_spans(view)
        attempts += 1
        if len(spans) >= SPANS_PER_REQUEST:
            yield attempts, spans
            attempts, spans = 0, []
    if spans:
        yield attempts, spans


def resource_attributes() -> dict[str, Any]:
    """mst's resource, merged by the SDK with ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME``."""
    from opentelemetry.sdk.resources import Resource

    from mst import __version__

    return dict(Resource.create({"service.name": "mst", "service.version": __version__}).attributes)


def sdk_converter(resource_attrs: Mapping[str, Any]) -> Any:
    """A function from :class:`SpanRecord` s to SDK spans, its SDK objects made once: what the
    SDK's own exporter is given when its HTTP client cannot take bytes (and what tests encode
    with the SDK's encoder to check :mod:`mst.export.otlp_wire`)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
    from opentelemetry.trace.status import Status, StatusCode

    from mst import __version__

    resource = Resource(dict(resource_attrs))
    scope = InstrumentationScope("mst", __version__)
    sampled = TraceFlags(TraceFlags.SAMPLED)
    kinds = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
    unset = Status(StatusCode.UNSET)

    def convert(records: list[SpanRecord]) -> list[ReadableSpan]:
        out = []
        for r in records:
            context = SpanContext(r.trace_id, r.span_id, False, sampled)
            parent = None if r.parent is None else SpanContext(r.trace_id, r.parent, False, sampled)
            status = unset if r.error is None else Status(StatusCode.ERROR, r.error)
            out.append(ReadableSpan(r.name, context, parent, resource, r.attributes, kind=kinds[r.kind],
                                    status=status, start_time=r.start_ns, end_time=r.end_ns,
                                    instrumentation_scope=scope))
        return out

    return convert


class _Sender:
    """The SDK's OTLP/HTTP exporter, fed the request's bytes from :mod:`mst.export.otlp_wire`.

    The exporter's HTTP client does what the exporter does with a request — the endpoint's
    headers, compression, certificates and timeout from ``OTEL_EXPORTER_OTLP_*``, retries with
    backoff on 429/502/503/504 and connection errors — and the bytes are the ones the SDK's
    encoder makes for the same spans (tests compare them), made about ten times cheaper. An
    exporter without that client (another SDK release) is given SDK spans instead.
    """

    def __init__(self, url: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from mst import __version__
        from mst.export.otlp_wire import Encoder

        self.url = url
        self.exporter = OTLPSpanExporter(endpoint=url)
        client = getattr(self.exporter, "_client", None)
        self.client = client if callable(getattr(client, "export", None)) else None
        resource = resource_attributes()
        self.encoder = Encoder(resource, "mst", __version__)
        self.convert = None if self.client is not None else sdk_converter(resource)

    def encode(self, records: list[SpanRecord]) -> bytes | list[ReadableSpan]:
        """The request: its bytes, or SDK spans for an exporter that encodes them itself."""
        if self.client is not None:
            encode = self.encoder.span
            return self.encoder.request([encode(r) for r in records])
        assert self.convert is not None
        spans: list[ReadableSpan] = self.convert(records)
        return spans

    def send(self, request: bytes | list[ReadableSpan], sent: int, total: int) -> None:
        """One request; a failure names its reason, which the exporter only logs, so its log
        is listened to for the length of the call. ``sent`` attempts of ``total`` went before."""
        reasons = _Reasons()
        logger = logging.getLogger(_EXPORTER_LOGGER)
        logger.addHandler(reasons)
        try:
            if isinstance(request, bytes):
                assert self.client is not None
                ok = bool(self.client.export(request).success)
            else:
                from opentelemetry.sdk.trace.export import SpanExportResult

                ok = self.exporter.export(request) is SpanExportResult.SUCCESS
        finally:
            logger.removeHandler(reasons)
        if not ok:
            why = reasons.last or "the request failed"
            raise OtlpExportError(Problem(self.url, f"the OTLP endpoint did not take the spans ({why}); "
                                                    f"{sent} of {total} attempts were sent before. The run is "
                                                    "unchanged: send it again with `mst export otlp RUN`"))

    def close(self) -> None:
        self.exporter.shutdown()  # type: ignore[no-untyped-call]


class _Reasons(logging.Handler):
    """The exporter's own account of a failure: its last message naming a cause (the final one
    says only "due to timeout, max retries or shutdown")."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(" ".join(record.getMessage().split())[:300])

    @property
    def last(self) -> str | None:
        named = [m for m in self.messages if "reason:" in m or m.startswith("Transient error")]
        found = named or self.messages
        return found[-1] if found else None
