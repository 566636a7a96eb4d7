"""Tracing end to end (docs/design.md §15): a real web process, scheduler
loop and agent export an execution's fire, claim, run and finish spans to a
local OTLP/HTTP receiver, all in the trace of the job's TRACEPARENT; and
with the endpoint refusing connections, both processes still stop."""

import gzip
import http.server
import signal
import threading
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from harness.processes import (
    LAYOUTS,
    Server,
    free_port,
    manage,
    start_agent,
    start_loop,
    start_web_and_loop,
    wait_for,
)
from tests.agent.world import executions, issue_token, ready

pytestmark = pytest.mark.e2e

# The SDK's batch processor sends every 5 s unless told otherwise: these
# processes send within 100 ms, so the test waits for spans, not a timer.
QUICK_BATCHES = {"OTEL_BSP_SCHEDULE_DELAY": "100"}


class Receiver(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP collector of one route, POST /v1/traces: the spans it
    receives, decoded, with their resource's attributes."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.spans = []  # [(resource attributes, span)]
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def received(self, body):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = values(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    self.spans += [(resource, span) for span in scope_spans.spans]

    def in_trace(self, trace_id):
        with self.lock:
            return [(resource, span) for resource, span in self.spans if span.trace_id == trace_id]


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.received(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def values(attributes):
    """{key: value} of OTLP KeyValues (strings and integers, as Croniq sends)."""
    found = {}
    for attribute in attributes:
        kind = attribute.value.WhichOneof("value")
        found[attribute.key] = getattr(attribute.value, kind) if kind else None
    return found


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.shutdown()
    server.server_close()


def apply_job(db, tmp_path, name, label, command):
    """A job firing once, a second from now, for the agent with `label`."""
    document = tmp_path / f"{name}.yaml"
    document.write_text(
        f"jobs:\n  - name: {name}\n    schedule: '@every 1s'\n    max_runs: 1\n"
        f"    command: '{command}'\n    labels: [{label}]\n    retries: 0\n"
    )
    manage(db, "apply", str(document))


def test_the_four_spans_share_the_trace_of_the_jobs_traceparent(e2e_database, tmp_path, receiver):
    env = {"CRONIQ_OTLP_ENDPOINT": receiver.url, **QUICK_BATCHES}
    server = Server(e2e_database, tmp_path / "web.log", **env)
    loop = start_loop(e2e_database, tmp_path / "loop.log", **env)
    agent = None
    try:
        token = issue_token(e2e_database)
        ready(server)
        apply_job(e2e_database, tmp_path, "traced", "traced", 'echo "TRACEPARENT=$TRACEPARENT"')
        agent = start_agent(
            server.url, token, tmp_path / "agent.log", "--name", "tracer-01", "--labels", "traced"
        )
        wait_for(
            lambda: [e for e in executions(e2e_database, "traced") if e["state"] == "succeeded"],
            timeout=60,
            message="the traced job's run to succeed",
        )
        [run] = executions(e2e_database, "traced")
        traceparent = run["log"].strip().removeprefix("TRACEPARENT=")
        version, trace_hex, parent_hex, flags = traceparent.split("-")
        assert (version, len(trace_hex), len(parent_hex), flags) == ("00", 32, 16, "01")
        trace_id = bytes.fromhex(trace_hex)

        def four_spans():
            names = {span.name for _, span in receiver.in_trace(trace_id)}
            return {"fire", "claim", "run", "finish"} <= names

        wait_for(four_spans, timeout=30, message=f"the four spans of trace {trace_hex}")
        spans = {span.name: (resource, span) for resource, span in receiver.in_trace(trace_id)}
        fire = spans["fire"][1]
        assert fire.parent_span_id == b""  # the trace's root
        for name in ("claim", "run", "finish"):
            assert spans[name][1].parent_span_id == fire.span_id, name
        # The job's TRACEPARENT names the run span: the job's own spans go under it.
        assert spans["run"][1].span_id == bytes.fromhex(parent_hex)
        for name, (resource, span) in spans.items():
            assert resource["service.name"] == "croniq", name
            attributes = values(span.attributes)
            assert attributes["croniq.job"] == "traced", name
            assert attributes["croniq.execution.id"] == run["id"], name
            assert attributes["croniq.execution.attempt"] == 1, name
        assert values(spans["claim"][1].attributes)["croniq.runner"] == "tracer-01"
        assert values(spans["run"][1].attributes)["croniq.execution.exit_code"] == 0
        assert values(spans["finish"][1].attributes)["croniq.execution.state"] == "succeeded"
        assert spans["run"][1].start_time_unix_nano <= spans["run"][1].end_time_unix_nano
    finally:
        if agent is not None:
            agent.stop()
        loop.stop()
        server.stop()
        print(server.output()[-3000:], loop.output()[-3000:])


@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_an_endpoint_refusing_connections_never_holds_a_stop(e2e_database, tmp_path, layout):
    # Nothing listens there; the batches wait for the stop (a minute's delay).
    env = {
        "CRONIQ_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "OTEL_BSP_SCHEDULE_DELAY": "60000",
    }
    token = issue_token(e2e_database)
    server, processes = start_web_and_loop(layout, e2e_database, tmp_path, **env)
    try:
        apply_job(e2e_database, tmp_path, "unheard", "unheard", "true")
        agent = start_agent(
            server.url, token, tmp_path / "agent.log", "--once", "--labels", "unheard"
        )
        wait_for(lambda: not agent.alive(), timeout=60, message="the agent's one run")
        agent.stop()  # exited: its log is closed
        # A CI run once saw no run here (the agent's one poll came back
        # empty): what each process logged says whether the job fired.
        logs = "\n".join(p.output()[-3000:] for p in (agent, *processes))
        assert [e["state"] for e in executions(e2e_database, "unheard")] == ["succeeded"], logs
        # Spans are queued (fire in the loop; claim, run and finish in the
        # web process) and their endpoint refuses: every process stops anyway.
        for process in processes:
            process.popen.send_signal(signal.SIGTERM)
        for process in processes:
            wait_for(lambda p=process: not p.alive(), timeout=30, message="the process to stop")
            assert process.popen.returncode in (0, -signal.SIGTERM), process.output()[-3000:]
            assert "spans not exported within 0.5s of the stop: dropped" in process.output()
    finally:
        for process in processes:
            process.stop()
