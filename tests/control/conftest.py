import pytest
from django.test import Client

from control.models import ApiKey
from core import db_threads


@pytest.fixture(autouse=True)
def steps_see_the_test_rows():
    """Async management calls (trigger) run their database steps on the
    test's thread, where its transaction holds the rows."""
    with db_threads.steps_in_caller_thread():
        yield


class Management:
    """The management API over Django's test client, as one API key."""

    def __init__(self, secret):
        self.client = Client()
        self.headers = {"authorization": f"Bearer {secret}"}

    def get(self, path, params=None):
        return self.client.get(f"/api/v1/{path}", params or {}, headers=self.headers)

    def post(self, path, body=None, raw=None):
        data = raw if raw is not None else body
        if data is None:  # no body at all, as `curl -X POST` sends
            return self.client.generic("POST", f"/api/v1/{path}", headers=self.headers)
        return self.client.post(
            f"/api/v1/{path}", data, content_type="application/json", headers=self.headers
        )


def management_as(*key_scopes):
    _, secret = ApiKey.issue(f"key-{'-'.join(key_scopes)}", list(key_scopes))
    return Management(secret)


@pytest.fixture
def api(db):
    """The management API as a key that may trigger jobs and run executions."""
    return management_as("jobs:trigger", "executions:read", "executions:write")
