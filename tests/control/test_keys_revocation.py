"""Revoking a key revokes the keys it minted, and theirs: a leaked key's
children stop working with it, in one transaction, each audited."""

from datetime import UTC, datetime

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from control import keys
from control.models import ApiKey
from tests.control.calls import call, key

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def mint(client, authorization, name, key_scopes=("jobs:read",)):
    answer = call(
        client, "post", "/api/v1/keys", authorization, {"name": name, "scopes": list(key_scopes)}
    )
    assert answer.status_code == 201, answer.content
    return f"Bearer {answer.json()['key']}"


def works(client, authorization):
    return call(client, "get", "/api/v1/jobs", authorization).status_code == 200


@pytest.fixture
def family(client):
    """ci (admin) -> deploy -> nightly, and a sibling key made apart."""
    _, ci = key("ci", ["admin"])
    deploy = mint(client, ci, "deploy", ["jobs:read", "jobs:write"])
    nightly = mint(client, deploy, "nightly")
    _, apart = key("apart", ["admin"])
    return {"ci": ci, "deploy": deploy, "nightly": nightly, "apart": apart}


def test_a_minted_key_records_the_key_that_minted_it(family):
    parents = dict(ApiKey.objects.values_list("name", "parent__name"))

    assert parents == {"ci": None, "deploy": "ci", "nightly": "deploy", "apart": None}


def test_revoking_a_key_over_the_api_revokes_its_descendants_each_audited(client, family):
    answer = call(client, "delete", "/api/v1/keys/ci", family["apart"])

    assert answer.status_code == 204
    assert [works(client, family[name]) for name in ("ci", "deploy", "nightly", "apart")] == [
        False,
        False,
        False,
        True,
    ]
    events = AuditEvent.objects.filter(action="apikey.revoked").order_by("target_repr")
    assert [(e.target_repr, e.actor_name, e.data) for e in events] == [
        ("ci", "apart", {}),
        ("deploy", "apart", {"revoked_with": "ci"}),
        ("nightly", "apart", {"revoked_with": "ci"}),
    ]
    assert len({e.at for e in events}) == 1


def test_revoking_a_middle_key_leaves_its_parent_working(client, family):
    call(client, "delete", "/api/v1/keys/deploy", family["apart"])

    assert works(client, family["ci"]) and works(client, family["apart"])
    assert not works(client, family["deploy"]) and not works(client, family["nightly"])


def test_revoking_again_reaches_a_descendant_still_live(family):
    """A key revoked before its children were cascaded (revoked by hand,
    as an older version did) takes them along when revoked again."""
    ApiKey.objects.filter(name="ci").update(revoked_at=NOW)

    revoked = keys.revoke(ApiKey.objects.get(name="ci"), NOW)

    assert revoked == 2
    assert not ApiKey.objects.usable(NOW).filter(name__in=["deploy", "nightly"]).exists()
    assert keys.revoke(ApiKey.objects.get(name="ci"), NOW) == 0


def test_a_revoked_key_mints_nothing_even_when_authenticated_before(family):
    deploy = ApiKey.objects.get(name="deploy")
    keys.revoke(ApiKey.objects.get(name="ci"), NOW)

    with pytest.raises(keys.KeyRefused) as refused:
        keys.mint(deploy, "late", ["jobs:read"], None, timezone.now(), actor=deploy)

    assert (refused.value.status, refused.value.detail) == (401, "this key was revoked")
    assert not ApiKey.objects.filter(name="late").exists()


def test_the_admin_action_revokes_descendants_and_counts_them(client, django_user_model, family):
    client.force_login(django_user_model.objects.create_superuser("root", password=None))
    ci = ApiKey.objects.get(name="ci")

    answer = client.post(
        reverse("admin:control_apikey_changelist"),
        {"action": "revoke", "_selected_action": [ci.pk]},
        follow=True,
    )

    assert "3 API key(s) revoked." in [str(m) for m in get_messages(answer.wsgi_request)]
    assert set(ApiKey.objects.usable(timezone.now()).values_list("name", flat=True)) == {"apart"}
    actors = set(AuditEvent.objects.filter(action="apikey.revoked").values_list("actor_name"))
    assert actors == {("root",)}
