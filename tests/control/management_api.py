"""The management API's operations, read from the NinjaAPI itself: every
path operation authenticated by an API key (control.auth.ApiKeyAuth), with
the scope it needs. Calls added later join the tests that walk this list."""

import re
from dataclasses import dataclass

from control.auth import ApiKeyAuth
from croniq_project.api import api

ROOT = "/api/"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # "/api/v1/runners/{runner_id}/drain"
    scope: str | None  # None: any usable key

    @property
    def resource(self):
        """The first path segment after /v1/: "runners", "jobs", "keys"..."""
        return self.path.removeprefix(ROOT + "v1/").split("/")[0]

    @property
    def parameters(self):
        return re.findall(r"{(?:[^}:]+:)?([^}]+)}", self.path)

    def url(self, values):
        """The path with each {parameter} replaced by values[parameter]."""
        return re.sub(r"{(?:[^}:]+:)?([^}]+)}", lambda m: str(values[m.group(1)]), self.path)

    def __str__(self):
        return f"{self.method} {self.path}"


def all_operations():
    """[(method, path, [auth])] of every path operation of the API."""
    found = []
    # ninja keeps no public list of mounted operations; its own OpenAPI
    # generator walks the bound routers the same way.
    for router in api._get_bound_routers():
        for path, path_view in router.path_operations.items():
            full = "/".join(part for part in (router.prefix, path) if part)
            full = ROOT + re.sub("/+", "/", full).lstrip("/")
            for operation in path_view.operations:
                for method in operation.methods:
                    found.append((method, full, list(operation.auth_callbacks)))
    return found


def management_operations():
    return sorted(
        (
            Operation(method, path, auths[0].scope)
            for method, path, auths in all_operations()
            if any(isinstance(auth, ApiKeyAuth) for auth in auths)
        ),
        key=str,
    )
