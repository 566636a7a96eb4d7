"""Authenticators in the admin (croniq_project/admin.py): listed without
their secrets, removed by a superuser (a lost phone) with their owner's
recovery codes, audited; never added or edited there."""

import pytest
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.urls import reverse

from audit.models import AuditEvent
from tests.sign_in.conftest import SECRET, log_in, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client, db):
    user = get_user_model().objects.create_superuser("root", password=None)
    client.force_login(user)
    return user


def test_the_list_and_the_page_show_no_secret(client, root, staff, enrolled):
    listing = client.get(reverse("admin:mfa_authenticator_changelist")).content.decode()
    totp = Authenticator.objects.get(user=staff, type=Authenticator.Type.TOTP)
    page = client.get(reverse("admin:mfa_authenticator_change", args=[totp.pk])).content.decode()
    for html in (listing, page):
        assert "ops" in html
        assert SECRET not in html
        assert totp.data["secret"] not in html
        assert "seed" not in html
    assert client.get(reverse("admin:mfa_authenticator_add")).status_code == 403


def test_a_superuser_removes_a_lost_authenticator_and_its_owner_signs_in_with_the_password(
    client, root, staff, enrolled
):
    totp = Authenticator.objects.get(user=staff, type=Authenticator.Type.TOTP)
    answer = client.post(reverse("admin:mfa_authenticator_delete", args=[totp.pk]), {"post": "yes"})
    assert answer.status_code == 302
    assert not Authenticator.objects.filter(user=staff).exists()  # the codes too
    [event] = AuditEvent.objects.filter(action="authenticator.deleted")
    assert event.actor_name == "root"
    assert "data" not in event.data
    assert SECRET not in str(event.data)
    client.logout()
    log_in(client)
    assert signed_in(client)


def test_allauths_other_models_have_no_admin(client, root):
    for name in ("account_emailaddress", "socialaccount_socialapp", "socialaccount_socialtoken"):
        assert client.get(f"/admin/{name.replace('_', '/', 1)}/").status_code == 404
