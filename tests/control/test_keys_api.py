"""API keys over the API: a key mints keys only within its own scopes and
expiry; admin keys list and revoke them; everything audited with the key as
actor."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from control import paging
from control.models import ApiKey
from tests.control.calls import LAST_USED, call, changed, fingerprint, key

pytestmark = pytest.mark.django_db

LATER = datetime(2099, 1, 1, tzinfo=UTC)


def mint(client, authorization, **body):
    return call(client, "post", "/api/v1/keys", authorization, {"name": "child", **body})


def test_a_key_mints_a_narrower_key_shown_once_and_audited(client):
    _, parent = key("ci", ["jobs:read", "jobs:trigger"])

    answer = mint(client, parent, scopes=["jobs:read"], expires_at="2099-01-01T00:00:00Z")

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["name"] == "child" and body["scopes"] == ["jobs:read"]
    assert body["expires_at"].startswith("2099-01-01T00:00:00")
    child = ApiKey.objects.authenticate(body["key"], timezone.now())
    assert child.name == "child" and child.created_by == "key ci"
    assert call(client, "get", "/api/v1/keys", f"Bearer {body['key']}").status_code == 403
    event = AuditEvent.objects.get(action="apikey.created")
    assert (event.actor_kind, event.actor_name, event.target_repr) == ("api_key", "ci", "child")
    assert event.data["scopes"] == ["jobs:read"] and body["key"] not in str(event.data)


@pytest.mark.parametrize(
    ("parent_scopes", "wanted", "message"),
    [
        (["jobs:read"], ["jobs:write"], "scope jobs:write is beyond this key's scopes"),
        (["jobs:read", "audit:read"], ["admin"], "scope admin is beyond this key's scopes"),
        (["jobs:read"], ["jobs:read", "runners:read"], "scope runners:read is beyond"),
    ],
)
def test_a_key_never_mints_a_broader_one(client, parent_scopes, wanted, message):
    _, parent = key("ci", parent_scopes)
    before = fingerprint(ignore=[LAST_USED])

    answer = mint(client, parent, scopes=wanted)

    assert answer.status_code == 403
    assert message in answer.json()["detail"]
    assert not changed(before, fingerprint(ignore=[LAST_USED]))


def test_an_admin_key_mints_any_scope(client):
    _, parent = key("root", ["admin"])
    assert mint(client, parent, scopes=["admin"]).status_code == 201


def test_an_expiring_key_mints_only_keys_expiring_no_later(client):
    expiry = timezone.now() + timedelta(days=1)
    _, parent = key("temp", ["admin"], expires_at=expiry)
    before = fingerprint(ignore=[LAST_USED])

    never = mint(client, parent, scopes=["jobs:read"])
    later = mint(client, parent, scopes=["jobs:read"], expires_at=LATER.isoformat())

    assert never.status_code == 403
    assert never.json() == {"detail": "this key expires, so a key it creates must expire too"}
    assert later.status_code == 403 and "later than this key's own expiry" in later.json()["detail"]
    assert not changed(before, fingerprint(ignore=[LAST_USED]))
    same = mint(client, parent, scopes=["jobs:read"], expires_at=expiry.isoformat())
    assert same.status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scopes": []}, "scopes"),
        ({"scopes": ["jobs:destroy"]}, "scopes"),
        ({"scopes": ["jobs:read"], "expires_at": "2099-01-01T00:00:00+99:00"}, "expires_at"),
        ({"scopes": ["jobs:read"], "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"scopes": ["jobs:read"], "name": ""}, "name"),
        ({"scopes": ["jobs:read"], "name": "a\x00b"}, "name"),
        ({"scopes": ["jobs:read"], "name": "a/b"}, "name"),
        ({"scopes": ["jobs:read"], "name": " ci"}, "name"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_creates_nothing(client, body, field):
    _, parent = key("root", ["admin"])
    before = fingerprint(ignore=[LAST_USED])

    answer = mint(client, parent, **body)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(f"body.{field}"), answer.json()
    assert not changed(before, fingerprint(ignore=[LAST_USED]))


def test_a_name_is_taken_once(client):
    _, parent = key("root", ["admin"])
    assert mint(client, parent, name="root", scopes=["jobs:read"]).status_code == 409


def test_admin_lists_keys_by_name_without_secrets(client):
    _, admin = key("root", ["admin"])
    for name in ["b", "a", "c"]:
        key(name, ["jobs:read"])

    first = call(client, "get", "/api/v1/keys?limit=2", admin).json()
    rest = call(client, "get", f"/api/v1/keys?limit=2&cursor={first['next_cursor']}", admin).json()

    assert [k["name"] for k in first["items"] + rest["items"]] == ["a", "b", "c", "root"]
    assert rest["next_cursor"] is None
    assert set(first["items"][0]) == {
        "name", "project", "scopes", "created_at", "created_by", "expires_at", "last_used_at",
        "revoked_at",
    }  # fmt: skip


def test_revoking_a_key_ends_it_and_is_audited(client):
    _, admin = key("root", ["admin"])
    _, victim = key("leaked", ["jobs:read"])

    answer = call(client, "delete", "/api/v1/keys/leaked", admin)
    again = call(client, "delete", "/api/v1/keys/leaked", admin)

    assert (answer.status_code, again.status_code) == (204, 204)
    assert call(client, "post", "/api/v1/keys", victim, {"name": "x", "scopes": ["jobs:read"]}
                ).status_code == 401  # fmt: skip
    [event] = AuditEvent.objects.filter(action="apikey.revoked")
    assert (event.actor_kind, event.actor_name, event.target_repr) == ("api_key", "root", "leaked")


@pytest.mark.parametrize("cursor", [paging.encode(3), paging.encode("a\x00")])
def test_a_cursor_that_cannot_be_a_name_is_422(client, cursor):
    _, admin = key("root", ["admin"])
    answer = call(client, "get", f"/api/v1/keys?cursor={cursor}", admin)
    assert answer.status_code == 422
    assert answer.json() == {"detail": "cursor: not a cursor of this list"}


def test_revoking_an_unknown_key_is_404(client):
    _, admin = key("root", ["admin"])
    answer = call(client, "delete", "/api/v1/keys/nobody", admin)
    assert answer.status_code == 404
    assert answer.json() == {"detail": "no API key named 'nobody'"}
