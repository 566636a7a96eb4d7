"""Channels stored before their references were limited: `migrate` and
`manage.py check --database default` name each one, and what to change."""

from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command

from notifications.checks import STORED_REFERENCE_REFUSED, stored_channel_references
from notifications.models import Channel

pytestmark = pytest.mark.django_db


def warnings():
    found = checks.run_checks(databases=["default"], tags=[checks.Tags.database])
    return [w for w in found if w.id == STORED_REFERENCE_REFUSED]


def test_each_refused_reference_of_a_stored_channel_is_named():
    # Written as an older Croniq stored them, past today's checks.
    Channel.objects.create(
        name="old-hook",
        kind="webhook",
        url="https://hooks.example.com/${HOOK_PATH}",
        secret="file:/etc/croniq/hook",
        headers={"Authorization": "Bearer ${API_TOKEN}", "X-Team": "ops"},
    )
    Channel.objects.create(
        name="fine-hook",
        kind="webhook",
        url="https://hooks.example.com/${CRONIQ_SECRET_HOOK_PATH}",
        secret="file:/run/secrets/hook",
    )
    Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])

    messages = [w.msg for w in warnings()]

    assert messages == [
        "channel 'old-hook': url: ${HOOK_PATH}: a channel reads only environment variables "
        "named CRONIQ_SECRET_*, e.g. ${CRONIQ_SECRET_HOOK_PATH} (or a file under /run/secrets)",
        "channel 'old-hook': secret: file:/etc/croniq/hook: a channel reads only files under "
        "/run/secrets (CRONIQ_SECRETS_DIR), symlinks resolved",
        "channel 'old-hook': headers: Authorization: ${API_TOKEN}: a channel reads only "
        "environment variables named CRONIQ_SECRET_*, e.g. ${CRONIQ_SECRET_API_TOKEN} "
        "(or a file under /run/secrets)",
    ]
    assert all(isinstance(w, checks.Warning) for w in warnings())


def test_without_a_database_the_check_looks_at_nothing():
    Channel.objects.create(name="old-hook", kind="webhook", url="https://h.example/${HOOK_PATH}")
    assert stored_channel_references(databases=None) == []
    # A check run that names no database (`manage.py check`, a server's start).
    found = checks.run_checks()
    assert [w for w in found if w.id == STORED_REFERENCE_REFUSED] == []


def test_manage_py_check_with_the_database_prints_the_warning():
    Channel.objects.create(name="old-hook", kind="webhook", url="https://h.example/${HOOK_PATH}")
    err = StringIO()
    call_command("check", "--database", "default", stdout=StringIO(), stderr=err)
    assert "croniq.W101" in err.getvalue() and "old-hook" in err.getvalue()
