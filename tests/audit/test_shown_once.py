"""A secret Croniq keeps only as its hash (an API key, a runner token) is shown
once, in the page that answers the admin's add form: never in a message,
which Django carries in a cookie that is signed but readable, and never in
the session, which the database keeps."""

import re
from datetime import UTC, datetime

import pytest
from django.contrib.messages.storage.cookie import CookieStorage
from django.test import RequestFactory
from django.urls import reverse

from control.models import KEY_PREFIX, ApiKey
from runners.models import TOKEN_PREFIX, RunnerToken

pytestmark = [
    pytest.mark.django_db,
    # The test settings have no collected static files; whitenoise only warns.
    pytest.mark.filterwarnings("ignore:No directory at:UserWarning"),
]

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def api_key_made(secret):
    return ApiKey.objects.authenticate(secret, NOW)


def token_made(secret):
    return RunnerToken.objects.authenticate(secret)


CASES = {
    "api key": (
        "control_apikey",
        {"name": "ci", "scopes": ["jobs:read"]},
        KEY_PREFIX,
        api_key_made,
    ),
    "runner token": ("runners_runnertoken", {"name": "ci-runners"}, TOKEN_PREFIX, token_made),
}


@pytest.fixture
def superuser(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password=None))
    return client


def cookie_texts(cookies):
    """Every cookie's value, the messages cookie decoded."""
    texts = []
    for name, morsel in cookies.items():
        texts.append(morsel.value)
        if name == CookieStorage.cookie_name:
            decoded = CookieStorage(RequestFactory().get("/"))._decode(morsel.value) or []
            texts.extend(str(message) for message in decoded)
    return texts


def shown_secret(answer, prefix):
    found = re.findall(
        rf'id="shown-once"[^>]*>({re.escape(prefix)}[^<]+)<', answer.content.decode()
    )
    return found[0] if len(found) == 1 else None


@pytest.mark.parametrize("case", CASES)
def test_a_new_secret_travels_in_no_cookie_and_is_shown_in_the_answer(superuser, client, case):
    model, form, prefix, made = CASES[case]
    answer = client.post(reverse(f"admin:{model}_add"), form)
    # Neither this answer's cookies nor those the browser keeps hold it.
    for text in cookie_texts(answer.cookies) + cookie_texts(client.cookies):
        assert prefix not in text
    assert prefix not in str(dict(client.session.items()))
    assert answer.status_code == 200
    assert answer.context["title"].endswith(f"{form['name']} created")
    secret = shown_secret(answer, prefix)
    assert secret is not None
    assert made(secret).name == form["name"]
    # Nothing caches the page that holds it.
    assert "no-store" in answer["Cache-Control"]


@pytest.mark.parametrize("case", CASES)
def test_a_new_secret_is_shown_only_once(superuser, client, case):
    model, form, prefix, made = CASES[case]
    secret = shown_secret(client.post(reverse(f"admin:{model}_add"), form), prefix)
    created = made(secret)
    for later in [
        client.get(reverse(f"admin:{model}_changelist")),
        client.get(reverse(f"admin:{model}_change", args=[created.pk])),
    ]:
        assert later.status_code == 200
        assert secret not in later.content.decode()
        assert prefix not in later.content.decode()


@pytest.mark.parametrize("case", CASES)
def test_a_refused_form_shows_no_secret_and_creates_nothing(superuser, client, case):
    model, form, prefix, made = CASES[case]
    answer = client.post(reverse(f"admin:{model}_add"), {**form, "name": ""})
    assert answer.status_code == 200
    assert "name" in answer.context["adminform"].form.errors
    assert shown_secret(answer, prefix) is None
    assert not answer.context["adminform"].form.instance._meta.model.objects.exists()
