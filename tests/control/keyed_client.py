"""Calls to the management API through Django's test client, with a real
API key (control.models.ApiKey.issue)."""

import json
from urllib.parse import urlencode

from control.models import ApiKey


class KeyedClient:
    def __init__(self, client, key_scopes, name="deploy"):
        self.key, self.secret = ApiKey.issue(name, key_scopes)
        self.client = client

    def call(self, method, path, body=None, **query):
        url = f"/api/v1/{path}" + (f"?{urlencode(query)}" if query else "")
        extra = {"HTTP_AUTHORIZATION": f"Bearer {self.secret}"}
        if method != "get":
            # No body at all when there is none, as curl or the CLI sends it.
            data = "" if body is None else json.dumps(body)
            extra.update(data=data, content_type="application/json")
        return getattr(self.client, method)(url, **extra)

    def get(self, path, **query):
        return self.call("get", path, **query)

    def post(self, path, body=None, **query):
        return self.call("post", path, body, **query)

    def patch(self, path, body, **query):
        return self.call("patch", path, body, **query)

    def put(self, path, body, **query):
        return self.call("put", path, body, **query)

    def delete(self, path, **query):
        return self.call("delete", path, **query)
