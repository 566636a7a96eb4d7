"""Management calls through the project's ASGI handler: they share /api/v1/
with the runner protocol's lean path, but their sync views get what Django's
request signals would give their thread: stale connections closed."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from croniq_project.asgi_handler import CroniqASGIHandler, runs_in_a_thread
from tests.control.calls import key

pytestmark = pytest.mark.django_db(transaction=True)


def test_only_the_runner_protocol_views_are_async():
    assert not runs_in_a_thread("/api/v1/runners/1/poll")
    assert not runs_in_a_thread("/api/v1/executions/1/finish")
    assert runs_in_a_thread("/api/v1/runners")
    assert runs_in_a_thread("/api/v1/runners/1/drain")
    assert not runs_in_a_thread("/api/v1/no-such-call")


def asgi_get(path, authorization):
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
        "headers": [(b"host", b"testserver"), (b"authorization", authorization.encode())],
    }  # fmt: skip
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    async def run():
        await CroniqASGIHandler()(scope, receive, send)
        # The connection of the thread Django runs sync code in.
        return await sync_to_async(lambda: connection.connection is None)()

    closed = asyncio.run(run())
    return sent[0]["status"], closed


def test_a_management_call_answers_and_leaves_no_connection_open():
    _, authorization = key("ops", ["runners:read"])
    status, closed = asgi_get("/api/v1/runners", authorization)
    assert status == 200
    if connection.vendor == "sqlite":
        pytest.skip("Django never closes an in-memory SQLite database's connection")
    assert closed
