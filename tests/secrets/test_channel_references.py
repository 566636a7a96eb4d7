"""Channels accept `${secret:NAME}` (docs/design.md §11): the store's value
signs, fills the URL and headers at delivery, stays out of error texts and
of the stored channel, and an unknown secret is refused when the channel is
applied, naming the field."""

import datetime as dt

import pytest

from notifications import channels, secrets
from notifications.models import Channel
from scheduler.apply.document import ApplyError, apply
from tests.notifications.conftest import message, receiver  # noqa: F401 (fixtures)
from vault import store

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
SIGNING = "whsec-from-the-store"
TOKEN = "T0K3N-from-the-store"


@pytest.fixture
def stored():
    store.put("hook-signing", SIGNING, actor=None, now=NOW)
    store.put("hook-token", TOKEN, actor=None, now=NOW)


def test_a_store_reference_signs_and_fills_url_and_headers(stored, receiver, message):  # noqa: F811
    config = {
        "url": receiver.url + "?token=${secret:hook-token}",
        "secret": "${secret:hook-signing}",
        "headers": {"Authorization": "Bearer ${secret:hook-token}"},
    }
    assert channels.send("webhook", config, message, now=NOW).ok
    [(path, headers, body)] = receiver.received
    assert path == f"/hook?token={TOKEN}"
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert channels.verify(SIGNING, headers["Croniq-Signature"], body, now=NOW)


def test_store_values_stay_out_of_the_error_text(stored, receiver, message):  # noqa: F811
    receiver.status = 403
    receiver.reply = TOKEN.encode()
    config = {"url": receiver.url, "headers": {"Authorization": "Bearer ${secret:hook-token}"}}
    assert channels.send("webhook", config, message, now=NOW).error == "HTTP 403"


def test_a_deleted_secret_fails_the_delivery_naming_it(stored, receiver, message):  # noqa: F811
    store.delete(store.Secret.objects.get(name="hook-signing"), actor=None, now=NOW)
    config = {"url": receiver.url, "secret": "${secret:hook-signing}"}
    with pytest.raises(ValueError, match='secret "hook-signing" does not exist'):
        channels.send("webhook", config, message, now=NOW)
    assert receiver.received == []


def test_apply_stores_the_reference_and_refuses_an_unknown_secret(stored):
    hook = {"name": "ops-hook", "kind": "webhook", "url": "https://hooks.example.com/x"}
    apply({"channels": [{**hook, "secret": "${secret:hook-signing}"}]}, now=NOW)
    assert Channel.objects.get(name="ops-hook").secret == "${secret:hook-signing}"
    with pytest.raises(ApplyError) as refused:
        apply({"channels": [{**hook, "name": "other", "secret": "${secret:nope}"}]}, now=NOW)
    assert "channels[0].secret" in str(refused.value)
    assert 'secret "nope" does not exist' in str(refused.value)
    assert not Channel.objects.filter(name="other").exists()


def test_a_store_reference_counts_as_a_reference():
    assert secrets.is_reference("${secret:hook-signing}")
    assert not secrets.is_reference("${secret:a}${secret:b}")


def test_a_jobs_webhook_secret_may_name_a_stored_secret(stored):
    from django.apps import apps

    config = apps.get_app_config("notifications")
    assert config.secret_reference_problem("${secret:hook-signing}") is None
    assert 'secret "nope" does not exist' in config.secret_reference_problem("${secret:nope}")
