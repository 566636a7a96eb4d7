"""API keys in the admin: created with checkbox scopes and shown once,
listed without secrets, revoked by an audited action; only the Croniq admins
(and superusers) manage them."""

import re
from datetime import UTC, datetime
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group, Permission
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from control import scopes
from control.models import ApiKey
from tests.control.calls import key

key_groups = import_module("dashboard.migrations.0003_api_key_groups")
croniq_groups = import_module("dashboard.migrations.0001_croniq_groups")

pytestmark = pytest.mark.django_db

ADD = "admin:control_apikey_add"
CHANGELIST = "admin:control_apikey_changelist"


@pytest.fixture
def superuser(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password=None)
    client.force_login(user)
    return user


def test_a_key_created_in_the_admin_is_shown_once_and_audited(client, superuser):
    answer = client.post(
        reverse(ADD),
        {"name": "ci", "scopes": ["jobs:trigger", "jobs:read"], "expires_at_0": "2099-01-01",
         "expires_at_1": "00:00:00"},
        follow=True,
    )  # fmt: skip

    # Shown in the answer itself, never in a message (a cookie).
    assert "shown only now" in answer.content.decode()
    [secret] = re.findall(r'id="shown-once"[^>]*>([^<]+)<', answer.content.decode())
    made = ApiKey.objects.authenticate(secret, timezone.now())
    assert made.name == "ci" and made.scopes == ["jobs:read", "jobs:trigger"]
    assert made.expires_at == datetime(2099, 1, 1, tzinfo=UTC)
    assert made.created_by == "admin root"
    assert secret not in client.get(reverse(CHANGELIST)).content.decode()
    event = AuditEvent.objects.get(action="apikey.created")
    assert (event.actor_kind, event.actor_name) == ("user", "root")
    assert secret not in str(event.data) and made.secret_hash not in str(event.data)


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"name": "ci"}, "scopes"),
        ({"name": "ci", "scopes": ["jobs:delete"]}, "scopes"),
        ({"name": "ci", "scopes": ["admin"], "expires_at_0": "2001-01-01",
          "expires_at_1": "00:00:00"}, "expires_at"),
    ],
)  # fmt: skip
def test_a_bad_form_creates_nothing(client, superuser, form, field):
    answer = client.post(reverse(ADD), form)
    assert answer.status_code == 200
    assert field in answer.context["adminform"].form.errors
    assert not ApiKey.objects.exists()


def test_the_list_shows_scopes_and_dates_and_the_form_the_checkboxes(client, superuser):
    key("deploy", ["jobs:write", "calendars:write"])
    listing = client.get(reverse(CHANGELIST)).content.decode()
    assert "deploy" in listing and "calendars:write, jobs:write" in listing
    for column in ["created", "expires", "last used", "revoked"]:
        assert column in listing.lower(), column
    form = client.get(reverse(ADD)).content.decode()
    assert form.count('type="checkbox" name="scopes"') == len(scopes.ALL)  # one per scope


def test_revoke_action_ends_the_key_and_is_audited(client, superuser):
    made, _ = key("leaked", ["admin"])
    answer = client.post(
        reverse(CHANGELIST), {"action": "revoke", "_selected_action": [made.pk]}, follow=True
    )
    assert "1 API key(s) revoked." in [str(m) for m in get_messages(answer.wsgi_request)]
    made.refresh_from_db()
    assert made.revoked_at is not None
    event = AuditEvent.objects.get(action="apikey.revoked")
    assert (event.actor_name, event.target_repr) == ("root", "leaked")


def test_only_the_croniq_admins_group_is_granted_the_key_permissions():
    editor = SimpleNamespace(connection=connection)
    croniq_groups.create_groups(django_apps, editor)
    admins = Group.objects.get(name=croniq_groups.ADMINS)
    by_hand = Permission.objects.get(codename="change_apikey")
    admins.permissions.add(by_hand)
    key_groups.grant(django_apps, editor)
    key_groups.grant(django_apps, editor)  # idempotent

    def held(group):
        found = Group.objects.get(name=group).permissions.filter(content_type__app_label="control")
        return set(found.values_list("codename", flat=True))

    # What was granted by hand stays: the migration only ever adds.
    assert held(croniq_groups.ADMINS) == {
        "add_apikey",
        "view_apikey",
        "revoke_apikey",
        "change_apikey",
    }
    assert held(croniq_groups.OPERATORS) == held(croniq_groups.VIEWERS) == set()
