import datetime as dt

import pytest
from asgiref.sync import async_to_sync
from ninja.testing import TestAsyncClient

from core import db_threads
from croniq_project.api import api
from runners.models import RunnerToken
from tests.factories import ExecutionFactory, JobFactory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def issued(db):
    """(token, secret) of a fresh runner token."""
    return RunnerToken.issue("test-token")


@pytest.fixture
def token(issued):
    return issued[0]


@pytest.fixture
def secret(issued):
    return issued[1]


class Api:
    """The runner API in-process (ninja's test client), steps on the test's thread."""

    def __init__(self, secret):
        self.secret = secret
        self.client = TestAsyncClient(api)

    def post(self, path, body=None, secret=None, raw=None, authorization=None):
        use = self.secret if secret is None else secret
        headers = {"Authorization": f"Bearer {use}"} if use else {}
        if authorization is not None:
            headers = {"Authorization": authorization}
        kwargs = {"body": raw} if raw is not None else {"json": body}
        with db_threads.steps_in_caller_thread():
            return async_to_sync(self.client.post)(path, headers=headers, **kwargs)


@pytest.fixture
def api_client(secret):
    return Api(secret)


def pending(now=NOW, labels=(), **fields):
    """A pending execution ready at `now` for a job with `labels`."""
    job = fields.pop("job", None) or JobFactory(labels=list(labels))
    fields.setdefault("scheduled_for", now)
    return ExecutionFactory(job=job, **fields)
