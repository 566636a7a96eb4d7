"""Pings through the project's ASGI handler take the runner calls' lean
path: no request thread, no request signals, no browser middleware (no
session, CSRF or message work), as they come a thousand a second."""

import asyncio

import pytest
from django.core.signals import request_started

from checks import states
from checks.models import MAX_BODY, Check
from core.request_bodies import read_capped_body
from croniq_project.asgi_handler import CroniqASGIHandler, runs_in_a_thread
from croniq_project.middleware import is_runner_api

pytestmark = pytest.mark.django_db(transaction=True)


def asgi(method, path, body=b"", chunks=None):
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("testserver", 80), "client": ("10.1.2.3", 5000),
        "headers": [(b"host", b"testserver"), (b"user-agent", b"curl/8.5")],
    }  # fmt: skip
    parts = chunks if chunks is not None else [body]
    messages = [
        {"type": "http.request", "body": part, "more_body": n < len(parts) - 1}
        for n, part in enumerate(parts)
    ][::-1]
    sent = []

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)  # the client stays connected until answered

    async def send(message):
        sent.append(message)

    asyncio.run(CroniqASGIHandler()(scope, receive, send))
    headers = {name.decode().lower(): value.decode() for name, value in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.fixture
def started():
    seen = []

    def note(**kwargs):
        seen.append(kwargs)

    request_started.connect(note)
    yield seen
    request_started.disconnect(note)


def test_a_ping_is_answered_on_the_lean_path(started):
    check = Check.objects.create(name="backup", period=3600)
    status, headers, body = asgi("POST", f"/ping/{check.token}/fail", b"disk full")
    assert (status, body) == (200, b"OK")
    assert started == []  # Django's handler would have sent request_started
    assert "set-cookie" not in headers and "cookie" not in headers.get("vary", "").lower()
    check.refresh_from_db()
    assert check.state == states.DOWN
    ping = check.pings.get()
    assert (ping.body, ping.remote_addr, ping.user_agent) == ("disk full", "10.1.2.3", "curl/8.5")


def test_an_unknown_token_is_a_plain_404_on_the_lean_path(started):
    status, _, body = asgi("GET", "/ping/" + "A" * 43)
    assert (status, body) == (404, b"not found")
    assert started == []


def test_pings_are_machine_calls_and_async():
    assert not runs_in_a_thread("/ping/abc123/0")

    class Request:
        path_info = "/ping/abc"

    assert is_runner_api(Request())
    Request.path_info = "/pinged"
    assert not is_runner_api(Request())


def test_a_huge_body_is_cut_to_100_kb_as_it_arrives():
    check = Check.objects.create(name="backup", period=3600)
    megabyte = b"x" * 1024 * 1024
    status, headers, body = asgi("POST", f"/ping/{check.token}", chunks=[megabyte] * 8)
    assert (status, body, headers["croniq-body-truncated"]) == (200, b"OK", "true")
    ping = check.pings.get()
    assert (len(ping.body), ping.body_truncated) == (MAX_BODY, True)


def test_the_capped_reader_keeps_its_limit_and_reads_to_the_end():
    messages = [
        {"type": "http.request", "body": b"a" * 70, "more_body": True},
        {"type": "http.request", "body": b"b" * 70, "more_body": True},
        {"type": "http.request", "body": b"c" * 70, "more_body": False},
    ]
    read = []

    async def receive():
        read.append(messages[len(read)])
        return read[-1]

    kept = asyncio.run(read_capped_body(receive, 100))
    assert kept.read() == b"a" * 70 + b"b" * 30
    assert len(read) == 3  # the whole body was read, and dropped past the limit


# -- the ASGI endpoint answers as the view does (checks.endpoint) ------------------


def test_the_endpoint_sends_the_headers_django_would(started):
    check = Check.objects.create(name="backup", period=3600)
    status, headers, body = asgi("GET", f"/ping/{check.token}")
    assert (status, body) == (200, b"OK")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["content-length"] == "2"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"
    assert started == []


@pytest.mark.parametrize(
    "path",
    ["/ping/", "/ping//start", "/ping/{token}/bogus", "/ping/{token}/start/more", "/ping/a%20b"],
)
def test_a_path_no_ping_has_is_a_plain_404_that_records_nothing(path):
    check = Check.objects.create(name="backup", period=3600)
    status, headers, body = asgi("GET", path.format(token=check.token))
    assert (status, body, headers["content-type"]) == (
        404,
        b"not found",
        "text/plain; charset=utf-8",
    )
    check.refresh_from_db()
    assert (check.n_pings, check.pings.count()) == (0, 0)


def test_each_kind_of_ping_and_the_method_rules():
    check = Check.objects.create(name="backup", period=3600)
    assert asgi("POST", f"/ping/{check.token}/start")[0] == 200
    assert asgi("GET", f"/ping/{check.token}/log")[0] == 200
    assert asgi("GET", f"/ping/{check.token}/3")[0] == 200
    assert asgi("GET", f"/ping/{check.token}/256")[:3:2] == (
        400,
        b"exit status must be a whole number from 0 to 255",
    )
    status, headers, _ = asgi("PUT", f"/ping/{check.token}")
    assert (status, headers["allow"]) == (405, "GET, POST, HEAD")
    assert asgi("HEAD", f"/ping/{check.token}")[:3:2] == (200, b"")
    check.refresh_from_db()
    kinds = list(check.pings.order_by("n").values_list("kind", "exit_status"))
    assert kinds == [(states.START, None), (states.LOG, None), (states.EXIT, 3)]
    assert check.state == states.DOWN  # exit status 3


def test_a_host_outside_allowed_hosts_is_refused_and_records_nothing(settings):
    settings.ALLOWED_HOSTS = ["croniq.example"]
    check = Check.objects.create(name="backup", period=3600)
    status, _, body = asgi("GET", f"/ping/{check.token}")
    assert (status, body) == (400, b"invalid Host header")
    assert check.pings.count() == 0


def test_a_failing_database_is_a_503_the_sender_retries():
    from django.db import connection

    check = Check.objects.create(name="backup", period=3600)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE checks_ping RENAME TO checks_ping_away")
    try:
        status, _, body = asgi("GET", f"/ping/{check.token}")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE checks_ping_away RENAME TO checks_ping")
    assert (status, body) == (503, b"the database is unavailable: try again")
    check.refresh_from_db()
    assert check.n_pings == 0  # the check's half of the ping was rolled back
