"""Trace contexts (W3C Trace Context) and the export of spans over
OTLP/HTTP (docs/design.md §15).

Every execution carries a `traceparent` from its creation, whether or not
anything is exported: `00-<trace id>-<span id>-01`, where the span id names
the execution's "run" span, the one its job runs under (the agent sets the
job's TRACEPARENT to it). The execution's other spans hang from its "fire"
span, whose id is derived from the run span's (`fire_span_id`), so that any
process exporting a claim, a run or a finish names the same parent without
reading or storing more than the traceparent.

With CRONIQ_OTLP_ENDPOINT set, `export` hands spans to the OpenTelemetry
SDK's BatchSpanProcessor, which sends them from a thread of its own: a
caller appends to a queue and never waits on the network. The SDK is the
optional extra `tracing`; without the variable nothing of it is imported,
and `enabled()` is one global read. The spans are built whole
(`ReadableSpan`) rather than started and ended through a tracer: their ids
come from the execution's trace context and their instants from the
database (a run's start is its `claimed_at`), neither of which a tracer
takes.
"""

import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger("croniq.tracing")

# Version 00, a 32-hex trace id and a 16-hex span id, neither all zeros,
# and the flags Croniq sends: sampled (01).
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")
SERVICE_NAME = "croniq"
# The OTLP/HTTP path of traces, added to the endpoint unless it ends with it.
TRACES_PATH = "/v1/traces"
# At a process's stop, how long the spans still queued get to leave: an
# endpoint that is down or slow never holds a stop longer, and a web process
# still stops within 2 s (docs/design.md §16). A collector that answers
# takes milliseconds for the few batches a queue holds.
STOP_FLUSH_TIMEOUT = 0.5
EXTRA_MISSING = "croniq.E001"
# The modules export needs: the SDK and its OTLP/HTTP exporter.
EXTRA_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# -- trace contexts ----------------------------------------------------------


class Context(NamedTuple):
    """A parsed traceparent: the trace's id and the run span's id."""

    trace_id: int
    span_id: int


def random_id(size: int) -> int:
    """A random id of `size` bytes, never zero (an invalid id in W3C)."""
    while True:
        value = int.from_bytes(os.urandom(size), "big")
        if value:
            return value


def traceparent(trace_id: int, span_id: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def new_traceparent() -> str:
    """A new trace: what an execution gets when it is created."""
    return traceparent(random_id(16), random_id(8))


def parse(value: str | None) -> Context | None:
    """The context of a traceparent Croniq wrote, or None (an execution
    stored before trace contexts has none)."""
    found = TRACEPARENT.fullmatch(value or "")
    if found is None:
        return None
    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    if not trace_id or not span_id:
        return None
    return Context(trace_id, span_id)


def continued(value: str | None) -> str:
    """The trace context of a new attempt at the run `value` belongs to: the
    same trace, a span of its own; a new trace when `value` is none."""
    context = parse(value)
    if context is None:
        return new_traceparent()
    return traceparent(context.trace_id, random_id(8))


def fire_span_id(context: Context) -> int:
    """The id of the execution's fire span, derived from its run span's: the
    parent of its claim, run and finish spans, named the same by whichever
    process exports them."""
    digest = hashlib.blake2b(
        context.span_id.to_bytes(8, "big"), digest_size=8, person=b"croniq-fire"
    ).digest()
    return int.from_bytes(digest, "big") or 1


# -- spans -------------------------------------------------------------------


class Span(NamedTuple):
    """A span whole: its ids, instants (ns since the epoch) and attributes.
    `error` sets an error status with that description."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: int
    end: int
    attributes: Mapping[str, Any]
    error: str | None = None


def nanoseconds(instant: dt.datetime) -> int:
    """An aware datetime as ns since the epoch, exactly (no float)."""
    return (instant - EPOCH) // dt.timedelta(microseconds=1) * 1000


def now_ns() -> int:
    return time.time_ns()


def new_span_id() -> int:
    return random_id(8)


class Exporting:
    """The SDK's span processor (and its exporter, when it is the OTLP one)
    of this process, with the resource and scope its spans carry."""

    def __init__(self, processor: Any, exporter: Any = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.processor = processor
        self.exporter = exporter
        # Croniq's name wins over OTEL_SERVICE_NAME; OTEL_RESOURCE_ATTRIBUTES
        # (deployment.environment, ...) adds to it.
        self.resource = Resource.create(
            {"service.name": SERVICE_NAME, "service.version": croniq_version()}
        )
        self.scope = InstrumentationScope("croniq", croniq_version())

    def readable(self, span: Span) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

        sampled = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=sampled)
        parent = None
        if span.parent_id is not None:
            parent = SpanContext(
                span.trace_id, span.parent_id, is_remote=False, trace_flags=sampled
            )
        status = Status(StatusCode.UNSET)
        if span.error is not None:
            status = Status(StatusCode.ERROR, span.error)
        return ReadableSpan(
            span.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=dict(span.attributes),
            start_time=span.start,
            end_time=span.end,
            status=status,
            instrumentation_scope=self.scope,
        )


def croniq_version() -> str:
    try:
        return importlib.metadata.version("croniq")
    except importlib.metadata.PackageNotFoundError:  # a checkout run without installing
        return "unknown"


_lock = threading.Lock()
# None until the first `enabled()` of the process decides; then the
# exporting in place (tests install their own), or False.
_exporting: Exporting | bool | None = None


def enabled() -> bool:
    """Whether this process exports spans: CRONIQ_OTLP_ENDPOINT is set and
    the extra installed. Decided at the first call (the exporter's thread
    starts then, in the process that exports: after any fork)."""
    exporting = _exporting
    if exporting is None:
        exporting = configure()
    return exporting is not False


def configure() -> Exporting | bool:
    global _exporting
    with _lock:
        if _exporting is None:
            endpoint = settings.CRONIQ_OTLP_ENDPOINT
            if not endpoint:
                _exporting = False
            elif missing_extra():
                # The system check says so at start (croniq.E001); a process
                # that skipped it exports nothing rather than fail its work.
                log.error(extra_missing_message())
                _exporting = False
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
                from opentelemetry.sdk.trace.export import BatchSpanProcessor

                # Headers, certificates, compression and the request's
                # timeout come from the SDK's OTEL_EXPORTER_OTLP_TRACES_*.
                exporter = OTLPSpanExporter(endpoint=traces_url(endpoint))
                _exporting = Exporting(BatchSpanProcessor(exporter), exporter)
        return _exporting


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of CRONIQ_OTLP_ENDPOINT: the collector's
    address (`http://collector:4318`) with /v1/traces added, or that URL
    already."""
    endpoint = endpoint.rstrip("/")
    if urllib.parse.urlsplit(endpoint).path.endswith(TRACES_PATH):
        return endpoint
    return endpoint + TRACES_PATH


def export(spans: Iterable[Span]) -> None:
    """Queue `spans` for export (nothing when tracing is off)."""
    exporting = _exporting
    if not isinstance(exporting, Exporting):
        return
    for span in spans:
        exporting.processor.on_end(exporting.readable(span))


def install(processor: Any, exporter: Any = None) -> None:
    """Export through `processor` (an SDK SpanProcessor) from now on: the
    tests' in-memory exporters."""
    global _exporting
    with _lock:
        _exporting = Exporting(processor, exporter)


def reset() -> None:
    """Forget the exporting in place, shutting its processor down; the next
    `enabled()` decides again from the settings."""
    global _exporting
    with _lock:
        exporting, _exporting = _exporting, None
    if isinstance(exporting, Exporting):
        exporting.processor.shutdown()


def flush(timeout: float = STOP_FLUSH_TIMEOUT) -> bool:
    """Send the spans still queued, waiting at most `timeout` seconds: a
    process calls it as it stops. Past the timeout the exporter is shut
    down, so a request to an endpoint that is down is abandoned instead of
    retried while the process exits (those spans are lost). Whether all
    left in time."""
    exporting = _exporting
    if not isinstance(exporting, Exporting):
        return True
    sent = threading.Event()

    def send() -> None:
        exporting.processor.force_flush()
        sent.set()

    threading.Thread(target=send, name="croniq-trace-flush", daemon=True).start()
    if sent.wait(timeout):
        return True
    log.warning("spans not exported within %.1fs of the stop: dropped", timeout)
    if exporting.exporter is not None:
        exporting.exporter.shutdown()
    return False


# -- the extra ---------------------------------------------------------------


def missing_extra() -> bool:
    """Whether the tracing extra's modules cannot be imported."""
    for name in EXTRA_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return True
        except ImportError:  # its package is missing, or set to None
            return True
    return False


def extra_missing_message() -> str:
    return (
        "CRONIQ_OTLP_ENDPOINT is set, but the tracing extra is not installed "
        "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http): "
        "install croniq[tracing], or unset CRONIQ_OTLP_ENDPOINT"
    )


def require_extra() -> None:
    """ImproperlyConfigured when spans are to be exported and the SDK is
    missing: the web process runs no system checks, and refuses to start."""
    if settings.CRONIQ_OTLP_ENDPOINT and missing_extra():
        raise ImproperlyConfigured(extra_missing_message())


# The tag of the check below, which every command runs (core.commands).
TRACING_CHECKS = "tracing"


@checks.register(TRACING_CHECKS)
def tracing_extra(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """croniq.E001: spans are to be exported, and the SDK is missing."""
    if settings.CRONIQ_OTLP_ENDPOINT and missing_extra():
        return [
            checks.Error(
                extra_missing_message(),
                hint="pip install 'croniq[tracing]'",
                id=EXTRA_MISSING,
            )
        ]
    return []
