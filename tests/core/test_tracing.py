"""Trace contexts and the span export (core/tracing.py, docs/design.md §15)."""

import datetime as dt
import re
import sys
import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from core import tracing

W3C = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01")


def test_a_new_traceparent_is_version_00_sampled_with_nonzero_ids():
    value = tracing.new_traceparent()
    assert W3C.fullmatch(value)
    _, trace_id, span_id, _ = value.split("-")
    assert int(trace_id, 16) and int(span_id, 16)
    assert tracing.parse(value) == tracing.Context(int(trace_id, 16), int(span_id, 16))


def test_each_traceparent_is_a_new_trace():
    drawn = {tracing.new_traceparent()[3:35] for _ in range(100)}
    assert len(drawn) == 100


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",  # not sampled
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # another version
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ",
    ],
)
def test_only_a_traceparent_croniq_writes_is_read(value):
    assert tracing.parse(value) is None


def test_a_new_attempt_continues_the_trace_with_a_span_of_its_own():
    first = tracing.new_traceparent()
    retry = tracing.continued(first)
    assert W3C.fullmatch(retry)
    assert tracing.parse(retry).trace_id == tracing.parse(first).trace_id
    assert tracing.parse(retry).span_id != tracing.parse(first).span_id


def test_a_run_stored_without_a_trace_context_retries_in_a_new_trace():
    assert W3C.fullmatch(tracing.continued(""))


def test_the_fire_span_is_named_the_same_wherever_it_is_derived():
    context = tracing.parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    fire = tracing.fire_span_id(context)
    assert fire == tracing.fire_span_id(context)
    assert 0 < fire < 2**64
    assert fire != context.span_id
    other = tracing.Context(context.trace_id, context.span_id + 1)
    assert tracing.fire_span_id(other) != fire


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otel.example.com/v1/traces", "https://otel.example.com/v1/traces"),
        ("http://gateway/otlp", "http://gateway/otlp/v1/traces"),
    ],
)
def test_the_endpoint_is_the_collector_and_traces_go_to_v1_traces(endpoint, url):
    assert tracing.traces_url(endpoint) == url


def test_instants_become_nanoseconds_exactly():
    instant = dt.datetime(2026, 12, 5, 9, 0, 0, 123456, tzinfo=dt.UTC)
    assert tracing.nanoseconds(instant) == 1_796_461_200_123_456_000


# -- exporting ---------------------------------------------------------------


@pytest.fixture
def undecided():
    """core.tracing as a process starts: nothing decided yet."""
    tracing.reset()
    yield
    tracing.reset()


def test_nothing_is_exported_when_the_endpoint_is_unset(settings, undecided):
    settings.CRONIQ_OTLP_ENDPOINT = None
    assert tracing.enabled() is False
    assert tracing._exporting is False
    tracing.export([span()])  # nothing to export to: no error


def test_an_endpoint_starts_the_otlp_exporter_on_first_use(settings, undecided):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    settings.CRONIQ_OTLP_ENDPOINT = "http://127.0.0.1:9/"
    assert tracing.enabled() is True
    exporting = tracing._exporting
    assert isinstance(exporting.processor, BatchSpanProcessor)
    assert isinstance(exporting.exporter, OTLPSpanExporter)
    assert exporting.exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    assert exporting.resource.attributes["service.name"] == "croniq"


def span(**fields):
    values = dict(
        name="fire",
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        parent_id=None,
        start=1_000,
        end=2_000,
        attributes={"croniq.job": "report"},
    )
    values.update(fields)
    return tracing.Span(**values)


def test_a_span_is_exported_with_its_ids_instants_and_attributes(exported_spans):
    tracing.export([span(parent_id=0x1234, error="failed")])
    [exported] = exported_spans.get_finished_spans()
    assert exported.name == "fire"
    assert exported.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert exported.context.span_id == 0xB7AD6B7169203331
    assert exported.context.trace_flags.sampled
    assert exported.parent.span_id == 0x1234
    assert (exported.start_time, exported.end_time) == (1_000, 2_000)
    assert exported.attributes == {"croniq.job": "report"}
    assert exported.status.description == "failed"
    assert not exported.status.is_ok
    assert exported.resource.attributes["service.name"] == "croniq"


class Stuck(SpanExporter):
    """An exporter whose export never ends until shut down: an endpoint
    that takes the connection and never answers."""

    def __init__(self):
        self.exporting = threading.Event()
        self.shut = threading.Event()

    def export(self, spans):
        self.exporting.set()
        self.shut.wait()
        return SpanExportResult.FAILURE

    def shutdown(self):
        self.shut.set()


def test_a_flush_at_the_stop_gives_up_on_an_endpoint_that_does_not_answer():
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = Stuck()
    tracing.install(BatchSpanProcessor(exporter), exporter)
    try:
        tracing.export([span()])
        assert tracing.flush(timeout=0.2) is False
        # The export under way is abandoned: the exporter was shut down.
        assert exporter.shut.is_set()
    finally:
        tracing.reset()


def test_a_flush_sends_what_is_queued(exported_spans):
    tracing.export([span()])
    assert tracing.flush() is True
    assert len(exported_spans.get_finished_spans()) == 1


def test_a_flush_with_nothing_to_export_returns_at_once(settings, undecided):
    settings.CRONIQ_OTLP_ENDPOINT = None
    assert tracing.flush() is True


# -- the extra ----------------------------------------------------------------


@pytest.fixture
def without_the_extra(monkeypatch):
    # An import of a module set to None raises ImportError: as if not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)


def test_the_check_names_the_missing_extra(settings, without_the_extra):
    settings.CRONIQ_OTLP_ENDPOINT = "http://collector:4318"
    [error] = tracing.tracing_extra()
    assert error.id == "croniq.E001"
    assert "CRONIQ_OTLP_ENDPOINT" in error.msg and "croniq[tracing]" in error.msg
    with pytest.raises(ImproperlyConfigured, match=r"tracing extra is not installed"):
        tracing.require_extra()


def test_without_an_endpoint_the_extra_is_not_needed(settings, without_the_extra):
    settings.CRONIQ_OTLP_ENDPOINT = None
    assert tracing.tracing_extra() == []
    tracing.require_extra()


def test_with_the_extra_installed_the_check_passes(settings):
    settings.CRONIQ_OTLP_ENDPOINT = "http://collector:4318"
    assert tracing.tracing_extra() == []


def test_a_process_that_skipped_the_check_exports_nothing(settings, undecided, without_the_extra):
    settings.CRONIQ_OTLP_ENDPOINT = "http://collector:4318"
    assert tracing.enabled() is False


def test_an_installed_processor_replaces_the_settings_until_reset(settings, undecided):
    settings.CRONIQ_OTLP_ENDPOINT = None

    class Nothing(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    tracing.install(SimpleSpanProcessor(Nothing()))
    assert tracing.enabled() is True
    tracing.reset()
    assert tracing.enabled() is False


def test_the_check_runs_with_the_system_checks(settings, without_the_extra):
    # What `manage.py check`, `scheduler_loop` and `serve` run at their start.
    from django.core import checks

    settings.CRONIQ_OTLP_ENDPOINT = "http://collector:4318"
    assert "croniq.E001" in [message.id for message in checks.run_checks()]
