"""Secrets in the admin: write-only, and only the Croniq admins (and
superusers) see them at all; every change audited without its value."""

import datetime as dt
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.db import connection

from audit.models import AuditEvent
from vault import crypto, store
from vault.models import Secret

croniq_groups = import_module("dashboard.migrations.0001_croniq_groups")
secret_groups = import_module("dashboard.migrations.0006_secret_groups")

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
VALUE = "never-shown-again-42"
ADD = "/admin/vault/secret/add/"
LIST = "/admin/vault/secret/"


@pytest.fixture
def login(client, django_user_model):
    editor = SimpleNamespace(connection=connection)
    croniq_groups.create_groups(django_apps, editor)
    secret_groups.grant(django_apps, editor)

    def as_role(group):
        user = django_user_model.objects.create_user(group or "staff", password=None, is_staff=True)
        if group:
            user.groups.add(Group.objects.get(name=group))
        client.force_login(user)
        return client

    return as_role


@pytest.mark.parametrize("group", [croniq_groups.VIEWERS, croniq_groups.OPERATORS, None])
def test_viewers_operators_and_plain_staff_cannot_see_or_add_secrets(login, group):
    store.put("db-password", VALUE, actor=None, now=NOW)
    client = login(group)
    assert client.get(LIST).status_code == 403
    assert client.post(ADD, {"name": "x-token", "value": VALUE}).status_code == 403
    secret = Secret.objects.get()
    assert client.get(f"{LIST}{secret.pk}/change/").status_code == 403
    assert Secret.objects.count() == 1


def test_an_admin_adds_a_secret_whose_value_is_never_shown(login):
    client = login(croniq_groups.ADMINS)
    added = client.post(ADD, {"name": "db-password", "value": VALUE})
    assert added.status_code == 302, added.content.decode()[:2000]
    secret = Secret.objects.get()
    assert crypto.decrypt(secret.ciphertext) == VALUE
    change = client.get(f"{LIST}{secret.pk}/change/")
    listed = client.get(LIST)
    for page in (change, listed):
        assert page.status_code == 200
        assert VALUE not in page.content.decode()
        assert secret.ciphertext not in page.content.decode()
    event = AuditEvent.objects.get(action="secret.created")
    assert event.data == {"project": "default", "name": "db-password"}
    assert event.actor_name == "Croniq admins"


def test_a_change_with_an_empty_value_keeps_the_value(login):
    client = login(croniq_groups.ADMINS)
    secret, _ = store.put("db-password", VALUE, actor=None, now=NOW)
    before = Secret.objects.get().ciphertext
    assert client.post(f"{LIST}{secret.pk}/change/", {"value": ""}).status_code == 302
    assert Secret.objects.get().ciphertext == before
    assert client.post(f"{LIST}{secret.pk}/change/", {"value": "a-new-value"}).status_code == 302
    assert crypto.decrypt(Secret.objects.get().ciphertext) == "a-new-value"
    assert AuditEvent.objects.filter(action="secret.changed").count() == 1


def test_a_new_secret_needs_a_value(login):
    client = login(croniq_groups.ADMINS)
    answer = client.post(ADD, {"name": "db-password", "value": ""})
    assert answer.status_code == 200
    assert "a new secret needs a value" in answer.content.decode()
    assert not Secret.objects.exists()
