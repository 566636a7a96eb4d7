"""`/api/v1/secrets` (docs/design.md §11): write-only, `secrets:write` for
every call, bad input refused naming the field with nothing changed."""

import pytest

from control.models import ApiKey
from tests.control.calls import LAST_USED, fingerprint
from tests.control.keyed_client import KeyedClient
from vault import crypto
from vault.models import Secret

pytestmark = pytest.mark.django_db

VALUE = "s3cr3t-v4lue-0001"


@pytest.fixture
def keeper(client):
    return KeyedClient(client, ["secrets:write"], name="keeper")


def test_setting_a_secret_answers_201_then_200_and_never_the_value(keeper):
    created = keeper.post("secrets", {"name": "db-password", "value": VALUE})
    replaced = keeper.post("secrets", {"name": "db-password", "value": "other-value"})
    assert created.status_code == 201, created.content
    assert replaced.status_code == 200, replaced.content
    body = created.json()
    assert set(body) == {"name", "project", "created_at", "updated_at"}
    assert (body["name"], body["project"]) == ("db-password", "default")
    for answer in (created, replaced):
        assert VALUE.encode() not in answer.content and b"other-value" not in answer.content
    assert crypto.decrypt(Secret.objects.get().ciphertext) == "other-value"


def test_the_list_names_secrets_without_values(keeper):
    for name in ("b-token", "a-password"):
        keeper.post("secrets", {"name": name, "value": VALUE})
    listed = keeper.get("secrets")
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()["items"]] == ["a-password", "b-token"]
    assert VALUE.encode() not in listed.content
    assert b"ciphertext" not in listed.content


def test_delete_answers_204_then_404(keeper):
    keeper.post("secrets", {"name": "db-password", "value": VALUE})
    assert keeper.delete("secrets/db-password").status_code == 204
    assert not Secret.objects.exists()
    gone = keeper.delete("secrets/db-password")
    assert gone.status_code == 404
    assert "db-password" in gone.json()["detail"]


@pytest.mark.parametrize(
    "scopes", [["jobs:read", "jobs:write", "jobs:trigger"], ["checks:read", "audit:read"]]
)
def test_keys_without_the_scope_are_refused_every_call(client, keeper, scopes):
    keeper.post("secrets", {"name": "db-password", "value": VALUE})
    other = KeyedClient(client, scopes, name="other")
    before = fingerprint(ignore={LAST_USED})
    for answer in (
        other.get("secrets"),
        other.post("secrets", {"name": "db-password", "value": "stolen"}),
        other.delete("secrets/db-password"),
    ):
        assert answer.status_code == 403
        assert answer.json()["detail"] == "needs scope secrets:write"
    assert fingerprint(ignore={LAST_USED}) == before


def test_an_admin_key_may_manage_secrets(client):
    admin = KeyedClient(client, ["admin"], name="root")
    assert admin.post("secrets", {"name": "x-token", "value": VALUE}).status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "has space", "value": VALUE}, "name"),
        ({"name": "../etc", "value": VALUE}, "name"),
        ({"name": "ok", "value": ""}, "value"),
        ({"name": "ok"}, "value"),
        ({"value": VALUE}, "name"),
        ({"name": "ok", "value": 12345}, "value"),
        ({"name": "ok", "value": VALUE, "project": "payments"}, "project"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(keeper, body, field):
    before = fingerprint(ignore={LAST_USED})
    answer = keeper.post("secrets", body)
    assert answer.status_code == 422, answer.content
    assert field in str(answer.json())
    assert fingerprint(ignore={LAST_USED}) == before


def test_a_key_minted_by_a_secrets_key_holds_at_most_its_scope(keeper):
    minted = keeper.post("keys", {"name": "child", "scopes": ["secrets:write"]})
    assert minted.status_code == 201
    broader = keeper.post("keys", {"name": "child2", "scopes": ["jobs:write"]})
    assert broader.status_code == 403
    assert ApiKey.objects.filter(name="child2").count() == 0
