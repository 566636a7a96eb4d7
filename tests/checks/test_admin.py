"""Checks and pings in the admin: read-only for the Croniq groups, the
ping URL (the check's secret) only for whoever may change checks."""

from datetime import UTC, datetime
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.db import connection
from django.urls import reverse

from checks import pings, states
from tests.checks.factories import CheckFactory

croniq_groups = import_module("dashboard.migrations.0001_croniq_groups")
check_groups = import_module("dashboard.migrations.0005_check_groups")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture
def login(client, django_user_model):
    editor = SimpleNamespace(connection=connection)
    croniq_groups.create_groups(django_apps, editor)
    check_groups.grant(django_apps, editor)

    def as_member(group):
        user = django_user_model.objects.create_user(group, password=None, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        client.force_login(user)
        return client

    return as_member


@pytest.fixture
def check():
    made = CheckFactory(name="backup")
    pings.record(pings.Received(token=made.token, kind=states.START, at=NOW))
    pings.record(pings.Received(token=made.token, kind=states.FAIL, at=NOW, body=b"disk full"))
    CheckFactory(name="other")
    return made


def test_viewers_read_checks_and_pings_but_not_the_ping_url(login, check):
    client = login(check_groups.VIEWERS)
    listing = client.get(reverse("admin:checks_check_changelist"))
    assert listing.status_code == 200
    assert b"backup" in listing.content
    page = client.get(reverse("admin:checks_check_change", args=[check.pk]))
    assert page.status_code == 200
    assert check.token.encode() not in page.content
    assert b"Save" not in page.content
    pings_page = client.get(reverse("admin:checks_ping_changelist") + "?check=backup")
    assert pings_page.status_code == 200
    assert [p.kind for p in pings_page.context["cl"].result_list] == ["fail", "start"]
    ping = check.pings.get(kind="fail")
    assert b"disk full" in client.get(reverse("admin:checks_ping_change", args=[ping.pk])).content


def test_admins_see_the_ping_url(login, check):
    client = login(check_groups.ADMINS)
    page = client.get(reverse("admin:checks_check_change", args=[check.pk]))
    assert f"/ping/{check.token}".encode() in page.content


def test_nobody_adds_changes_or_deletes_here(login, check):
    client = login(check_groups.ADMINS)
    assert client.get(reverse("admin:checks_check_add")).status_code == 403
    answer = client.post(reverse("admin:checks_check_delete", args=[check.pk]), {"post": "yes"})
    assert answer.status_code == 403
    check.refresh_from_db()


def test_only_the_offered_filters_filter(login, check):
    client = login(check_groups.VIEWERS)
    changelist = reverse("admin:checks_check_changelist")
    assert client.get(changelist + "?state__exact=down").status_code == 200
    assert client.get(changelist + "?token__startswith=a").status_code == 400
