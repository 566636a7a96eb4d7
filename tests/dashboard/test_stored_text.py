"""Dashboard input holding text no database can store or search for (a
NUL, which PostgreSQL refuses even in a query; a lone surrogate): a 400 or
a message naming the field, never a 500, and nothing changes."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from scheduler.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize(
    ("page", "query", "detail"),
    [
        ("dashboard:overview", {"q": "a\x00b"}, "q: must not contain NUL characters"),
        ("dashboard:audit", {"action": "job.\x00"}, "action: must not contain NUL characters"),
        ("dashboard:audit", {"actor": "user:\x00"}, "actor: must not contain NUL characters"),
        ("dashboard:audit", {"target": "x.y:\x00"}, "target: must not contain NUL characters"),
    ],
)
def test_a_filter_with_a_nul_is_a_400_naming_it(root_client, page, query, detail):
    answer = root_client.get(reverse(page), query)

    assert answer.status_code == 400
    assert answer.content.decode() == detail


def test_a_pause_reason_with_a_nul_is_refused_with_a_message(root_client, make_job):
    # A form's body is UTF-8 bytes: a NUL can come through, a lone surrogate cannot.
    job = make_job("nightly")

    answer = root_client.post(
        reverse("dashboard:job-pause", args=[job.name]), {"reason": "disk\x00full"}, follow=True
    )

    assert answer.status_code == 200
    assert "nightly not paused: the reason must not contain NUL characters." in (
        answer.content.decode()
    )
    job.refresh_from_db()
    assert job.paused_at is None and job.pause_reason == ""
    assert Job.objects.filter(paused_at__isnull=False).count() == 0
