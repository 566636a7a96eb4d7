"""Static files under ASGI: whole, and without a warning per file.

The requests go through Croniq's real ASGI handler (the test client does not
send bodies the way a server does), the file is the admin's stylesheet.
"""

import asyncio
import warnings
from pathlib import Path

import django.contrib.admin
import pytest

from croniq_project.asgi_handler import CroniqASGIHandler

STYLESHEET = Path(django.contrib.admin.__file__).parent / "static/admin/css/base.css"


def asgi_request(method, path, headers=()):
    """Status, headers and body of one request through the ASGI handler."""

    async def exchange():
        sent = []
        received = asyncio.Event()

        async def receive():
            if not received.is_set():
                received.set()
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()  # the client never hangs up

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"localhost"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("localhost", 8000),
        }
        await CroniqASGIHandler()(scope, receive, send)
        return sent

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sent = asyncio.run(exchange())
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:] if m["type"] == "http.response.body")
    headers = {name.lower(): value for name, value in start["headers"]}
    return start["status"], headers, body, [str(w.message) for w in caught]


@pytest.fixture
def static_url(settings):
    return f"{settings.STATIC_URL}admin/css/base.css"


def test_a_static_file_is_sent_whole_without_a_warning(static_url):
    status, headers, body, warned = asgi_request("GET", static_url)
    assert status == 200
    assert body == STYLESHEET.read_bytes()
    assert headers[b"content-type"].startswith(b"text/css")
    assert int(headers[b"content-length"]) == len(body)
    assert warned == []


def test_a_range_head_and_not_modified_answer_without_a_warning(static_url):
    status, _, body, warned = asgi_request("GET", static_url, [(b"range", b"bytes=0-9")])
    assert (status, body, warned) == (206, STYLESHEET.read_bytes()[:10], [])

    status, headers, body, warned = asgi_request("HEAD", static_url)
    assert (status, body, warned) == (200, b"", [])

    etag = headers[b"etag"]
    status, _, body, warned = asgi_request("GET", static_url, [(b"if-none-match", etag)])
    assert (status, body, warned) == (304, b"", [])
